/* resources.h — shared resources at step level (resources.c): the
 * driver that shares each resource of the host's config (`resources:`)
 * out to the attempts of the steps naming it (duro_step_config.resource),
 * across every workflow and across the hosts of a shared store: at most
 * `concurrency` running at once, at most `rate_limit` starting a
 * `rate_period_ms`; the others' instances wait (wait_type
 * RESOURCE_WAIT_TYPE), first come first served. */
#ifndef DURO_RESOURCES_H
#define DURO_RESOURCES_H

#include <stddef.h>
#include <stdint.h>

#include "driver.h"

/* The wait_type of an instance waiting for a resource. */
#define RESOURCE_WAIT_TYPE "resource"

typedef struct duro_resource_options {
  uint32_t concurrency;   /* attempts running at once; 0: no bound */
  uint32_t rate_limit;    /* starts a period; 0: no rate */
  int64_t rate_period_ms; /* the rate's period (with rate_limit) */
  uint32_t rate_burst;    /* starts at once after a quiet spell; 0: 1 */
} duro_resource_options;

/* Declares resource `name` (copied) before duro_engine_start:
 * DURO_E_INVALID_ARGUMENT for a name twice, or options that bound
 * nothing. */
int duro_resource_register(duro_engine *e, const char *name,
                           const duro_resource_options *o);

/* A resource as it counts now. */
typedef struct duro_resource_stat {
  uint32_t running;  /* attempts holding it, their callbacks running */
  uint32_t waiting;  /* instances waiting for their turn */
  uint32_t promised; /* woken for their turn, not yet back */
} duro_resource_stat;
/* 0 with `name`'s counts, or DURO_E_NOT_FOUND. */
int duro_resource_stat_read(duro_engine *e, const char *name,
                            duro_resource_stat *out);

/* Why instance (workflow, id) waits for a resource, in words ("resource
 * payments (10 of 10 running; 3 waiting)"), malloc'ed; NULL when it
 * waits for none. */
char *duro_resource_why(duro_engine *e, const char *workflow, const char *id);

/* The driver's scheduler pass, for callers that drive the engine's passes
 * themselves (tests): the turns a rate lets come now handed out and their
 * instances woken; returns how many. */
size_t duro_resources_dispatch(duro_engine *e);

extern const duro_driver resources_driver;

#endif
