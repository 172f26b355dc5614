/* view_health.c — the engine's health report as the JSON of /healthz
 * (view_health.h), keys in the order they always came: the status first,
 * then the drivers' parts, then the engine's own. */
#include "view_health.h"

static json_t *hung_handlers_json(const duro_health_part *p) {
  json_t *a = json_array();
  for (size_t i = 0; i < p->n_handlers; i++) {
    const duro_hung_handler *h = &p->handlers[i];
    json_t *o = json_pack("{s:s,s:I,s:I,s:I}", "queue", h->queue, "messages",
                          (json_int_t)h->messages, "running_ms",
                          (json_int_t)h->running_ms, "timeout_ms",
                          (json_int_t)h->timeout_ms);
    if (h->plugin)
      json_object_set_new(o, "plugin", json_string(h->plugin));
    json_array_append_new(a, o);
  }
  return a;
}

static json_t *part_json(const duro_health_part *p) {
  switch (p->kind) {
  case DURO_HEALTH_TEXT:
    return json_string(p->text);
  case DURO_HEALTH_HUNG_HANDLERS:
    return hung_handlers_json(p);
  }
  return json_null();
}

static json_t *hung_attempts_json(const duro_health_report *r) {
  json_t *a = json_array();
  for (size_t i = 0; i < r->n_hung; i++) {
    const duro_hung_attempt *h = &r->hung[i];
    json_array_append_new(
        a, json_pack("{s:s,s:s,s:s,s:I,s:I}", "workflow", h->workflow, "id",
                     h->id, "step", h->step, "attempt", (json_int_t)h->attempt,
                     "running_ms", (json_int_t)h->running_ms));
  }
  return a;
}

json_t *view_health(const duro_health_report *r) {
  json_t *h = json_pack("{s:s}", "status", r->degraded ? "degraded" : "ok");
  for (size_t i = 0; i < r->parts.n; i++)
    json_object_set_new(h, r->parts.v[i].key, part_json(&r->parts.v[i]));
  if (r->host_id)
    json_object_set_new(h, "host",
                        json_pack("{s:I,s:I}", "id", (json_int_t)r->host_id,
                                  "lease_ms", (json_int_t)r->host_lease_ms));
  if (r->storage_error)
    json_object_set_new(h, "storage",
                        json_pack("{s:s,s:s}", "status", "writes failing",
                                  "error", r->storage_error));
  if (r->n_hung) {
    json_object_set_new(h, "hung", hung_attempts_json(r));
    json_object_set_new(h, "stuck_workers", json_integer(r->stuck_workers));
    json_object_set_new(h, "stuck_cap", json_integer(r->stuck_cap));
  }
  return h;
}

json_t *duro_engine_health(duro_engine *e) {
  duro_health_report r;
  duro_engine_health_report(e, &r);
  json_t *h = view_health(&r);
  duro_health_report_clear(&r);
  return h;
}
