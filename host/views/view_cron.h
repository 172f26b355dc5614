/* view_cron.h — the cron triggers' answers as JSON (GET /crons,
 * POST /__scheduled), built from trigger.h's typed ones. */
#ifndef DURO_VIEW_CRON_H
#define DURO_VIEW_CRON_H

#include <jansson.h>

#include "trigger.h"

/* duro_cron_fire_by_hand's results as [{"plugin", "schedule", "state"
 * ("complete", "failed", "exists"), "instance"?, "error"?}] (caller
 * owns). */
json_t *view_cron_fire_results(const duro_cron_fire_results *r);

/* duro_cron_describe's triggers as [{"plugin", "schedule", "timezone"?,
 * "catch_up", "overlap", "last": {"tick_ms", "state", "fired_ms"?,
 * "instance"?, "error"?} | null, "workflow"?, "id"?, "next": [ms...],
 * "running", "complete", "failed", "missed", "skipped"}] (caller owns). */
json_t *view_cron_triggers(const duro_cron_trigger_infos *l);

/* duro_cron_fire_by_hand, as JSON into *out (caller owns; NULL on an
 * error). */
int duro_cron_fire_now(duro_engine *e, const char *schedule, json_t **out);

/* duro_cron_describe, as JSON into *out (caller owns; NULL on an
 * error). */
int duro_cron_list(duro_engine *e, json_t **out);

#endif
