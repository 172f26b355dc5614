/* view_hosts.c — the hosts sharing a store as the JSON of GET /hosts
 * (view_hosts.h). */
#include "view_hosts.h"

json_t *view_hosts(const duro_host_list *l) {
  json_t *hosts = json_array();
  for (size_t i = 0; i < l->n; i++) {
    const duro_host_info *h = &l->v[i];
    json_array_append_new(
        hosts,
        json_pack("{s:I,s:s,s:I,s:I,s:I,s:I,s:I,s:b,s:b,s:b,s:I}", "id",
                  (json_int_t)h->id, "name", h->name, "pid", (json_int_t)h->pid,
                  "started_ms", (json_int_t)h->started_ms, "heartbeat_ms",
                  (json_int_t)h->heartbeat_ms, "heartbeat_age_ms",
                  (json_int_t)h->heartbeat_age_ms, "lease_ms",
                  (json_int_t)h->lease_ms, "alive", h->alive, "dead", h->dead,
                  "me", h->me, "instances", (json_int_t)h->live));
  }
  return json_pack("{s:b,s:o}", "shared", l->shared, "hosts", hosts);
}

int duro_engine_hosts(duro_engine *e, json_t **out) {
  duro_host_list l;
  int rc = duro_hosts_read(e, &l);
  *out = rc ? NULL : view_hosts(&l);
  duro_host_list_free(&l);
  return rc;
}
