/* flow.h — flow control by key (flow.c): the driver that is the engine's
 * admission gate.  A workflow's rules come with its limits
 * (duro_workflow_limits.flow_concurrency, engine.h); nothing else is
 * configured here. */
#ifndef DURO_FLOW_H
#define DURO_FLOW_H

#include <stddef.h>

#include "driver.h"

/* A workflow's flow rules as they count now: for each rule its totals
 * and its busiest keys (most waiting, then most running), at most
 * `max_keys` of them. */
typedef struct duro_flow_key_stat {
  char *value;      /* the key's value as compact JSON text ("" for none) */
  uint32_t running; /* a concurrency rule's activations running */
  uint32_t waiting; /* activations queued for the key's turn */
} duro_flow_key_stat;

typedef struct duro_flow_rule_stat {
  char *key; /* the rule's JSON pointer, NULL: the whole workflow */
  int rate;  /* a rate rule (limit a period_ms, burst), else concurrency */
  uint32_t limit, burst;
  int64_t period_ms;
  size_t keys;             /* keys counted now */
  uint64_t running;        /* summed over its keys */
  uint64_t waiting;        /* summed over its keys */
  duro_flow_key_stat *top; /* the busiest keys */
  size_t n_top;
} duro_flow_rule_stat;

typedef struct duro_flow_stats {
  duro_flow_rule_stat *v;
  size_t n;
} duro_flow_stats;

/* 0 with workflow's rules in *out (none when it has no flow rules), or
 * DURO_E_NOT_FOUND for a workflow not registered. */
int duro_flow_stats_read(duro_engine *e, const char *workflow, size_t max_keys,
                         duro_flow_stats *out);
void duro_flow_stats_free(duro_flow_stats *s);

/* Why instance (workflow, id) waits queued for flow control, in words
 * ("concurrency /customerId=\"c42\" (2 of 2 running)", "rate /tenant=\"t1\"
 * (100 a 60000 ms; 3 waiting)"), malloc'ed; NULL when it does not. */
char *duro_flow_why(duro_engine *e, const char *workflow, const char *id);

/* The driver's scheduler pass, for callers that drive the engine's passes
 * themselves (tests): the waiters whose rate lets them start now are
 * made runnable; returns how many. */
size_t duro_flow_dispatch(duro_engine *e);

extern const duro_driver flow_driver;

#endif
