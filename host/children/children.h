/* children.h — child workflows as an engine driver (engine/driver.h).
 *
 * A child is an instance another started with duro_child_start (the step
 * runner's engine/step_child.c, which links it to its parent).  This
 * driver keeps the two promises that follow from the link, both without
 * the engine naming it:
 *   - the parent hears of the child's end: in the commit that ends the
 *     child, an event of type engine_child_event_type() with
 *     {"status", "output" | "error"} is stored for the parent and wakes it
 *     if it waits (duro_child_wait);
 *   - the parent's end reaches its children still running: those whose
 *     parent_close is terminate are terminated (and theirs in turn), found
 *     on each scheduler pass, so that neither a crash nor a host's death
 *     between the two ends loses it. */
#ifndef DURO_CHILDREN_H
#define DURO_CHILDREN_H

#include "driver.h"

extern const duro_driver children_driver;

/* One look for children still running whose parent ended (parent_close:
 * terminate): each is asked to terminate (at most a batch a call); its
 * own children follow on a later call.  Returns how many were asked: the
 * driver's pass, and a test's. */
size_t duro_children_dispatch(duro_engine *e);

#endif
