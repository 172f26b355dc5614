/* outcomes.h — each workflow's last hour as this host saw it
 * (outcomes.c): the driver that counts, a minute at a time, the
 * instances created and those that ended by how, and how long those that
 * ended ran, for GET /workflows/{wf} and the dashboard's home. */
#ifndef DURO_OUTCOMES_H
#define DURO_OUTCOMES_H

#include <stdint.h>

#include "driver.h"

#define OUTCOME_MINUTES 60

/* A workflow's last OUTCOME_MINUTES minutes, oldest first, the last the
 * minute now falls in (still filling).  Run time is from an instance's
 * first start to its end; one that ended without starting (terminated
 * while queued) counts in its outcome, not in the run times. */
typedef struct duro_workflow_hour {
  int64_t minute_ms; /* a minute's length, ms */
  int64_t start_ms;  /* when the oldest minute begins (engine clock) */
  int64_t since_ms;  /* when this host began counting */
  uint64_t created[OUTCOME_MINUTES];
  uint64_t completed[OUTCOME_MINUTES];
  uint64_t errored[OUTCOME_MINUTES];
  uint64_t terminated[OUTCOME_MINUTES];
  /* over the window: how many ended having started, and their run time's
   * median, 99th percentile and longest, ms (-1: none ended); the
   * percentiles are a bucket's middle, within 10 % of the true value */
  uint64_t ran;
  int64_t p50_ms, p99_ms, max_ms;
} duro_workflow_hour;

extern const duro_driver outcomes_driver;

/* Fills *out with `workflow`'s last hour (all zero for a workflow that
 * nothing happened to). */
void duro_workflow_hour_read(duro_engine *e, const char *workflow,
                             duro_workflow_hour *out);

#endif
