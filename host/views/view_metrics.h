/* view_metrics.h — the engine's counters over the last ten minutes as
 * the JSON of GET /metrics/history, built from engine.h's typed history. */
#ifndef DURO_VIEW_METRICS_H
#define DURO_VIEW_METRICS_H

#include <jansson.h>

#include "engine.h"

/* {"bucket_ms":10000,"now_ms","start_ms" (when the oldest bucket begins),
 * "since_ms" (when this engine began counting),"series":{"steps_completed",
 * "attempts_failed","retries_scheduled","instances_created","activations",
 * "events_sent": 60 counts each, oldest first}}.  Caller owns it. */
json_t *view_metrics_history(const duro_metrics_history *h);

/* duro_engine_history as view_metrics_history's JSON (caller owns it). */
json_t *duro_engine_metrics_history(duro_engine *e);

#endif
