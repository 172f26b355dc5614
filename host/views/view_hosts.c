/* view_hosts.c — the hosts sharing a store as the JSON of GET /hosts
 * (view_hosts.h). */
#include "view_hosts.h"

static json_t *counts_json(const duro_host_counts *c) {
  return json_pack(
      "{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "activations",
      (json_int_t)c->activations, "steps_completed",
      (json_int_t)c->steps_completed, "attempts_failed",
      (json_int_t)c->attempts_failed, "retries", (json_int_t)c->retries,
      "instances_created", (json_int_t)c->instances_created, "events_sent",
      (json_int_t)c->events_sent, "backlog", (json_int_t)c->backlog,
      "in_flight", (json_int_t)c->in_flight);
}

json_t *view_hosts(const duro_host_list *l) {
  json_t *hosts = json_array();
  for (size_t i = 0; i < l->n; i++) {
    const duro_host_info *h = &l->v[i];
    json_t *host =
        json_pack("{s:I,s:s,s:I,s:I,s:I,s:I,s:I,s:b,s:b,s:b,s:I}", "id",
                  (json_int_t)h->id, "name", h->name, "pid", (json_int_t)h->pid,
                  "started_ms", (json_int_t)h->started_ms, "heartbeat_ms",
                  (json_int_t)h->heartbeat_ms, "heartbeat_age_ms",
                  (json_int_t)h->heartbeat_age_ms, "lease_ms",
                  (json_int_t)h->lease_ms, "alive", h->alive, "dead", h->dead,
                  "me", h->me, "instances", (json_int_t)h->live);
    /* null: a host that has given none yet */
    json_object_set_new(host, "counts",
                        h->counted ? counts_json(&h->counts) : json_null());
    json_array_append_new(hosts, host);
  }
  json_t *totals = counts_json(&l->totals);
  json_object_set_new(totals, "instances", json_integer(l->live_total));
  return json_pack("{s:b,s:o,s:o}", "shared", l->shared, "hosts", hosts,
                   "totals", totals);
}

int duro_engine_hosts(duro_engine *e, json_t **out) {
  duro_host_list l;
  int rc = duro_hosts_read(e, &l);
  *out = rc ? NULL : view_hosts(&l);
  duro_host_list_free(&l);
  return rc;
}
