/* view_instance.h — the instance reads and creations as the JSON the
 * HTTP routes send (server/http/route_workflows.c) and the tests and the
 * dashboard read, built from engine.h's structs.  User data (params,
 * output, results, errors, payloads), JSON text in the structs, is parsed
 * into the answer (a text that is not JSON becomes a string; none, null).
 * Times the instance has not reached are null. */
#ifndef DURO_VIEW_INSTANCE_H
#define DURO_VIEW_INSTANCE_H

#include <jansson.h>

#include "engine.h"

/* {"id","workflow","status","params","output","error":{name,message}|null,
 *  "created_ms","started_ms","ended_ms","wake_ms",
 *  "steps":[{"key","name","count","type":"do|sleep|waitForEvent",
 *            "status":"waiting|complete|errored|cancelled","result",
 *            "error","started_ms","ended_ms","wake_ms",
 *            "attempts":[{"number","started_ms","ended_ms","error",
 *                         "build"?}]}],
 *  "build","builds":[hash...],"restarts","several_builds",
 *  "events":[{"type","payload","sent_ms","consumed_by"}],"wait_type"}.
 * Caller owns it. */
json_t *view_instance(const duro_instance_info *in);

/* {"id","workflow","status","output","error","created_ms","started_ms",
 *  "ended_ms"} (caller owns it). */
json_t *view_instance_summary(const duro_instance_info *in);

/* {"instances":[{"id","status","created_ms"}],"cursor"?} (caller owns
 * it). */
json_t *view_instance_page(const duro_instance_page *p);

/* {"name","instances":{status: count},"backlog","oldest_queued_age_ms"}
 * (caller owns it). */
json_t *view_workflow_counts(const duro_workflow_counts *c);

/* A batch's creations: {"created":[{"id"}],"errors":[{"index","id"?,
 * "code","message"}]}, each in request order (the reply of POST
 * .../instances/batch; caller owns it). */
json_t *view_create_result(const duro_create_result *r);

/* duro_instance_create_many as view_create_result's JSON into *result
 * (caller owns; NULL when the call fails), each error with "rc" too, the
 * DURO_E_* code, as it always had for C callers. */
int duro_instance_create_batch(duro_engine *e, const char *workflow,
                               const duro_create_req *reqs, size_t n,
                               json_t **result);

/* duro_instance_read as view_instance's JSON into *out (caller owns;
 * NULL on an error). */
int duro_instance_describe(duro_engine *e, const char *workflow, const char *id,
                           json_t **out);

/* duro_instance_read_summary as view_instance_summary's JSON. */
int duro_instance_summary(duro_engine *e, const char *workflow, const char *id,
                          json_t **out);

/* duro_instance_list_page as view_instance_page's JSON. */
int duro_instance_list(duro_engine *e, const char *workflow,
                       const duro_list_filter *f, size_t limit,
                       const char *cursor, json_t **out);

/* duro_workflow_counts_read as view_workflow_counts's JSON. */
int duro_workflow_stats(duro_engine *e, const char *workflow, json_t **out);

#endif
