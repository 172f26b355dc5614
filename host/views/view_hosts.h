/* view_hosts.h — the hosts sharing a store as the JSON of GET /hosts,
 * built from engine.h's duro_host_list. */
#ifndef DURO_VIEW_HOSTS_H
#define DURO_VIEW_HOSTS_H

#include <jansson.h>

#include "engine.h"

/* {"shared": bool, "hosts": [{"id","name","pid","started_ms",
 * "heartbeat_ms","heartbeat_age_ms","lease_ms","alive","dead","me",
 * "instances"}]}, `instances` those it owns that have not ended.  Caller
 * owns it. */
json_t *view_hosts(const duro_host_list *l);

/* duro_hosts_read as view_hosts's JSON into *out (caller owns it): 0, or
 * the engine's code (DURO_E_STORAGE) and *out NULL. */
int duro_engine_hosts(duro_engine *e, json_t **out);

#endif
