/* flow.h — flow control by key (flow.c): the driver that is the engine's
 * admission gate.  A workflow's rules come with its limits
 * (duro_workflow_limits.flow_concurrency, engine.h); nothing else is
 * configured here. */
#ifndef DURO_FLOW_H
#define DURO_FLOW_H

#include <stddef.h>

#include "driver.h"

/* The driver's scheduler pass, for callers that drive the engine's passes
 * themselves (tests): the waiters whose rate lets them start now are
 * made runnable; returns how many. */
size_t duro_flow_dispatch(duro_engine *e);

extern const duro_driver flow_driver;

#endif
