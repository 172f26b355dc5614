/* debounce.h — flow.debounce (debounce.c): the creates of one value of a
 * params key that come within a period of each other are one instance,
 * which takes the params of the last and starts once its key has been
 * quiet for the period (or a bound after its first create).  A driver
 * that claims creates and is an admission gate; a workflow's debounce
 * comes with its limits (duro_workflow_limits.flow_debounce_*, engine.h). */
#ifndef DURO_DEBOUNCE_H
#define DURO_DEBOUNCE_H

#include "driver.h"

/* Why instance (workflow, id) waits queued for its key's quiet spell, in
 * words ("flow: debounce /docId=\"d1\" (3 creates; starts in 29500 ms
 * unless another comes)"), malloc'ed; NULL when it does not. */
char *duro_debounce_why(duro_engine *e, const char *workflow, const char *id);

/* A workflow's debounce as it counts now. */
typedef struct duro_debounce_stats {
  char *key;           /* its JSON pointer, "" for the whole workflow;
                          NULL: the workflow has no debounce */
  int64_t period_ms;   /* the quiet spell that starts an instance */
  int64_t max_wait_ms; /* the bound after the first create; 0: none */
  uint64_t pending;    /* instances waiting for their key's quiet spell */
  uint64_t merged;     /* creates merged into one since the start */
} duro_debounce_stats;

/* Workflow's debounce into *out (key NULL when it has none, or before the
 * engine started); caller frees out->key. */
void duro_debounce_stats_read(duro_engine *e, const char *workflow,
                              duro_debounce_stats *out);

/* Hands the starts whose quiet spell passed to the runnable FIFO, for
 * callers that drive the engine's passes themselves (tests); returns
 * how many.  The driver's dispatch does it otherwise. */
size_t duro_debounce_dispatch(duro_engine *e);

extern const duro_driver debounce_driver;

#endif
