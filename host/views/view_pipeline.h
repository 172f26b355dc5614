/* view_pipeline.h — the pipelines' counts as the JSON GET /pipelines
 * sends (server/http/route_pipelines.c) and the tests read: the typed
 * duro_pipeline_stats_read of pipeline.h made JSON.  *out is the
 * caller's, NULL on an error. */
#ifndef DURO_VIEW_PIPELINE_H
#define DURO_VIEW_PIPELINE_H

#include <jansson.h>

#include "pipeline.h"

/* name NULL: [{"name","accepted","accepted_bytes","written",
 * "written_bytes","files","backlog":{"records","bytes"},"oldest_ms",
 * "last_flush_ms","last_error","writing"?:{"first","last"},"sink":{...}}]
 * by name; a name: that one object (DURO_E_NOT_FOUND when unknown).
 * Times are the engine clock's ms, null when there is none. */
int duro_pipeline_stats(duro_engine *e, const char *name, json_t **out);

#endif
