/* view_bulk.h — bulk actions' jobs (bulk/bulk.h) as the JSON the routes
 * send (server/http/route_bulk.c) and the CLI reads.  *out is the
 * caller's, NULL on an error. */
#ifndef DURO_VIEW_BULK_H
#define DURO_VIEW_BULK_H

#include <jansson.h>
#include <stdint.h>

#include "bulk.h"

/* A filter as a bulk job's body gave it: {"status"?, "prefix"?,
 * "created_after"?, ...}, times in ms, only the fields it has. */
json_t *duro_bulk_filter_json(const duro_list_filter *f);
/* GET /bulk/{id}: {id, workflow, action, filter, state, matched, done,
 * failed, skipped, created_ms, ended_ms (null while running), errors:
 * [{instance, error}]}, and terminate for a delete. */
int duro_bulk_job_json(duro_engine *e, int64_t id, json_t **out);
/* GET /workflows/{wf}/bulk: {"jobs": [the newest `limit` as above]}. */
int duro_bulk_list_json(duro_engine *e, const char *workflow, size_t limit,
                        json_t **out);

#endif
