/* view_health.h — the engine's health report as the JSON of /healthz,
 * built from engine.h's typed one. */
#ifndef DURO_VIEW_HEALTH_H
#define DURO_VIEW_HEALTH_H

#include <jansson.h>

#include "engine.h"

/* {"status":"ok"|"degraded", the drivers' parts (each under its key: a
 * word, or [{"queue","messages","running_ms","timeout_ms","plugin"?}]),
 * "host":{"id","lease_ms"} on a shared store, "storage":{"status":"writes
 * failing","error"} while journal writes fail, "hung":[{"workflow","id",
 * "step","attempt","running_ms"}], "stuck_workers", "stuck_cap" while hung
 * attempts' threads still run}.  Caller owns it. */
json_t *view_health(const duro_health_report *r);

/* duro_engine_health_report as view_health's JSON (caller owns it). */
json_t *duro_engine_health(duro_engine *e);

#endif
