/* view_log.h — an instance's log lines as the JSON GET
 * /workflows/{wf}/instances/{id}/logs sends (server/http/route_workflows.c)
 * and the CLI prints: duro_instance_logs of engine.h made JSON.  *out is
 * the caller's, NULL on an error. */
#ifndef DURO_VIEW_LOG_H
#define DURO_VIEW_LOG_H

#include <jansson.h>
#include <stdint.h>

#include "engine.h"

/* {"logs":[{"n","time_ms","level","step","attempt","message"}],
 * "next": the last line's n (or `after` when there is none): the `after`
 * of the next read}.  step is null for run()'s lines, attempt 0 then. */
int duro_instance_logs_json(duro_engine *e, const char *workflow,
                            const char *id, int64_t after, size_t limit,
                            json_t **out);

#endif
