/* flow.h — flow control by key (flow.c): the driver that is the engine's
 * admission gate.  A workflow's rules come with its limits
 * (duro_workflow_limits.flow_concurrency, engine.h); nothing else is
 * configured here. */
#ifndef DURO_FLOW_H
#define DURO_FLOW_H

#include "driver.h"

extern const duro_driver flow_driver;

#endif
