/* view_flow.h — a workflow's flow control as it counts now (flow.h's
 * duro_flow_stats) made JSON, for GET /workflows/{wf}. */
#ifndef DURO_VIEW_FLOW_H
#define DURO_VIEW_FLOW_H

#include <jansson.h>

#include "flow.h"

/* [{"rule": "concurrency", "key": "/c" | null, "limit", ("period_ms",
 *   "burst" for a rate), "keys", "running", "waiting",
 *   "busiest": [{"value", "running", "waiting"}]}] */
json_t *view_flow_stats(const duro_flow_stats *s);

#endif
