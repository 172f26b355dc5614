/* singleton.h — flow.singleton (singleton.c): at most one live instance
 * per value of a key of the params, a driver that claims creates (skip
 * mode: a create whose key is live answers with the live instance) and
 * is an admission gate (queue mode: an instance starts once it is its
 * key's oldest live one).  A workflow's singleton comes with its limits
 * (duro_workflow_limits.flow_singleton_key and _mode, engine.h). */
#ifndef DURO_SINGLETON_H
#define DURO_SINGLETON_H

#include "driver.h"

/* Why instance (workflow, id) waits queued for its key's turn, in words
 * ("flow: singleton /userId=\"u1\" (held by u-7)"), malloc'ed; NULL when
 * it does not. */
char *duro_singleton_why(duro_engine *e, const char *workflow, const char *id);

/* A workflow's singleton as it counts now. */
typedef struct duro_singleton_stats {
  char *key;        /* its JSON pointer; NULL: the workflow has none */
  const char *mode; /* "skip" or "queue" */
  uint64_t keys;    /* values with a live instance */
  uint64_t live;    /* live instances of those values */
  uint64_t waiting; /* of those, starts that wait for their key */
} duro_singleton_stats;

/* Workflow's singleton into *out (key NULL when it has none, or before
 * the engine started); caller frees out->key. */
void duro_singleton_stats_read(duro_engine *e, const char *workflow,
                               duro_singleton_stats *out);

/* Hands the starts whose turn came to the runnable FIFO, for callers that
 * drive the engine's passes themselves (tests); returns how many.  The
 * driver's waker thread and its dispatch do it otherwise. */
size_t duro_singleton_dispatch(duro_engine *e);

extern const duro_driver singleton_driver;

#endif
