/* view_cron.c — the cron triggers' answers as JSON (view_cron.h): the
 * shape GET /crons and POST /__scheduled reply with, keys in the order
 * they always came. */
#include "view_cron.h"

#include <stdint.h>

json_t *view_cron_fire_results(const duro_cron_fire_results *r) {
  json_t *res = json_array();
  for (size_t i = 0; i < r->n; i++) {
    const duro_cron_fire_result *f = &r->v[i];
    json_t *o =
        json_pack("{ss,ss,ss}", "plugin", f->plugin, "schedule", f->schedule,
                  "state", duro_cron_fire_state_name(f->state));
    if (f->instance)
      json_object_set_new(o, "instance", json_string(f->instance));
    if (f->error)
      json_object_set_new(o, "error", json_string(f->error));
    json_array_append_new(res, o);
  }
  return res;
}

static json_t *tick_json(const duro_cron_tick_info *tk) {
  json_t *o = json_pack("{sI,ss}", "tick_ms", (json_int_t)tk->tick_ms, "state",
                        duro_cron_tick_state_name(tk->state));
  if (tk->fired_ms != INT64_MIN)
    json_object_set_new(o, "fired_ms", json_integer(tk->fired_ms));
  if (tk->instance)
    json_object_set_new(o, "instance", json_string(tk->instance));
  if (tk->error)
    json_object_set_new(o, "error", json_string(tk->error));
  return o;
}

static json_t *trigger_json(const duro_cron_trigger_info *t) {
  json_t *o = json_pack("{ss,ss,ss?,ss,ss,so}", "plugin", t->plugin, "schedule",
                        t->schedule, "timezone", t->timezone, "catch_up",
                        duro_cron_catch_up_name(t->catch_up), "overlap",
                        t->overlap_allow ? "allow" : "skip", "last",
                        t->has_last ? tick_json(&t->last) : json_null());
  if (t->workflow) {
    json_object_set_new(o, "workflow", json_string(t->workflow));
    json_object_set_new(o, "id", json_string(t->id));
  }
  json_t *next = json_array();
  for (size_t k = 0; k < t->n_next; k++)
    json_array_append_new(next, json_integer(t->next[k]));
  json_object_set_new(o, "next", next);
  json_object_set_new(o, "running", json_integer(t->running));
  json_object_set_new(o, "complete", json_integer(t->complete));
  json_object_set_new(o, "failed", json_integer(t->failed));
  json_object_set_new(o, "missed", json_integer(t->missed));
  json_object_set_new(o, "skipped", json_integer(t->skipped));
  return o;
}

json_t *view_cron_triggers(const duro_cron_trigger_infos *l) {
  json_t *res = json_array();
  for (size_t i = 0; i < l->n; i++)
    json_array_append_new(res, trigger_json(&l->v[i]));
  return res;
}

int duro_cron_fire_now(duro_engine *e, const char *schedule, json_t **out) {
  duro_cron_fire_results r;
  int rc = duro_cron_fire_by_hand(e, schedule, &r);
  *out = rc ? NULL : view_cron_fire_results(&r);
  duro_cron_fire_results_clear(&r);
  return rc;
}

int duro_cron_list(duro_engine *e, json_t **out) {
  duro_cron_trigger_infos l;
  int rc = duro_cron_describe(e, &l);
  *out = rc ? NULL : view_cron_triggers(&l);
  duro_cron_trigger_infos_clear(&l);
  return rc;
}
