/* outcomes.c — each workflow's last hour as this host saw it
 * (outcomes.h), read from the journal's commits (the driver's
 * `committed` hook): an instance's insert counts as created in the
 * minute of its creation, a status stored as complete, errored or
 * terminated counts as its outcome in the minute of its end, with its
 * run time (start to end) in that minute's histogram.
 *
 * Each workflow has a ring of OUTCOME_MINUTES minutes, each its counts
 * and a histogram of run times in buckets a quarter of a power of two
 * wide (within 10 % of any value: bucket b holds [2^(b/4), 2^((b+1)/4))
 * ms), so the hour's percentiles are the sum of sixty histograms, read
 * rarely.  A minute the ring comes round to again is emptied first.  The
 * counts are this host's memory: a restart starts them afresh, and on a
 * database several hosts share each counts what it committed. */
#include "outcomes.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "journal.h"
#include "map.h"
#include "status.h"
#include "util.h"

#define MINUTE_MS 60000
#define RUN_BUCKETS 168 /* 2^42 ms, 139 years: the last bucket takes more */

typedef struct minute {
  int64_t number; /* its minute since the epoch; -1: never used */
  uint64_t created, completed, errored, terminated;
  uint32_t runs[RUN_BUCKETS];
  int64_t longest;
} minute;

typedef struct workflow_hour {
  char *name; /* the map's key */
  minute ring[OUTCOME_MINUTES];
} workflow_hour;

typedef struct outcomes {
  duro_engine *e;
  pthread_mutex_t mu;
  strmap workflows; /* name -> workflow_hour */
  int64_t since_ms;
} outcomes;

static void *outcomes_create(duro_engine *e) {
  outcomes *o = xcalloc(1, sizeof *o);
  o->e = e;
  pthread_mutex_init(&o->mu, NULL);
  o->since_ms = engine_now(e);
  return o;
}

static void outcomes_free(void *state) {
  outcomes *o = state;
  for (size_t i = 0; i < o->workflows.cap; i++) {
    workflow_hour *w = o->workflows.vals[i];
    if (o->workflows.keys[i] && w) {
      free(w->name);
      free(w);
    }
  }
  strmap_free(&o->workflows);
  pthread_mutex_destroy(&o->mu);
  free(o);
}

/* The bucket of a run time of `ms`. */
static size_t run_bucket(int64_t ms) {
  if (ms < 1)
    return 0;
  size_t b = (size_t)(4 * log2((double)ms));
  return b < RUN_BUCKETS ? b : RUN_BUCKETS - 1;
}

/* The middle of bucket b, ms. */
static int64_t bucket_middle(size_t b) {
  return (int64_t)llround(exp2(((double)b + 0.5) / 4));
}

/* The minute of `workflow` that `at_ms` falls in, emptied if the ring
 * held an older one there; NULL for one older than the ring holds (mu
 * held). */
static minute *minute_of(outcomes *o, const char *workflow, int64_t at_ms) {
  workflow_hour *w = strmap_get(&o->workflows, workflow);
  if (!w) {
    w = xcalloc(1, sizeof *w);
    w->name = xstrdup(workflow);
    for (size_t i = 0; i < OUTCOME_MINUTES; i++)
      w->ring[i].number = -1;
    strmap_put(&o->workflows, w->name, w);
  }
  int64_t number = at_ms / MINUTE_MS;
  minute *m = &w->ring[number % OUTCOME_MINUTES];
  if (m->number > number)
    return NULL; /* (a late commit of an old time) */
  if (m->number != number) {
    memset(m, 0, sizeof *m);
    m->number = number;
  }
  return m;
}

static void count_op(outcomes *o, const journal_op *op) {
  const journal_instance *in = op->inst;
  if (!in || !in->workflow)
    return;
  if (op->kind == JOP_INSTANCE_INSERT) {
    minute *m = minute_of(o, in->workflow, in->created_ms);
    if (m)
      m->created++;
    return;
  }
  if (op->kind != JOP_INSTANCE_SET || !duro_status_ended(in->status) ||
      in->ended_ms == JOURNAL_NONE)
    return;
  minute *m = minute_of(o, in->workflow, in->ended_ms);
  if (!m)
    return;
  if (in->status == DURO_STATUS_COMPLETE)
    m->completed++;
  else if (in->status == DURO_STATUS_ERRORED)
    m->errored++;
  else
    m->terminated++;
  if (in->started_ms != JOURNAL_NONE) {
    int64_t ran = in->ended_ms - in->started_ms;
    m->runs[run_bucket(ran)]++;
    if (ran > m->longest)
      m->longest = ran;
  }
}

static void outcomes_committed(duro_engine *e, void *state,
                               const journal_batch *b) {
  (void)e;
  outcomes *o = state;
  pthread_mutex_lock(&o->mu);
  for (size_t i = 0; i < b->n; i++)
    count_op(o, &b->ops[i]);
  pthread_mutex_unlock(&o->mu);
}

/* The run time at which `rank` of the hour's runs (counted in `runs`)
 * are reached. */
static int64_t rank_of(const uint64_t *runs, uint64_t rank) {
  uint64_t seen = 0;
  for (size_t b = 0; b < RUN_BUCKETS; b++) {
    seen += runs[b];
    if (seen >= rank)
      return bucket_middle(b);
  }
  return -1;
}

void duro_workflow_hour_read(duro_engine *e, const char *workflow,
                             duro_workflow_hour *out) {
  memset(out, 0, sizeof *out);
  int64_t now = engine_now(e), newest = now / MINUTE_MS;
  out->minute_ms = MINUTE_MS;
  out->start_ms = (newest - OUTCOME_MINUTES + 1) * MINUTE_MS;
  out->p50_ms = out->p99_ms = out->max_ms = -1;
  outcomes *o = duro_engine_driver_state(e, &outcomes_driver);
  if (!o)
    return;
  out->since_ms = o->since_ms;
  uint64_t runs[RUN_BUCKETS] = {0};
  pthread_mutex_lock(&o->mu);
  workflow_hour *w = strmap_get(&o->workflows, workflow);
  for (size_t i = 0; w && i < OUTCOME_MINUTES; i++) {
    int64_t number = newest - OUTCOME_MINUTES + 1 + (int64_t)i;
    const minute *m = &w->ring[number % OUTCOME_MINUTES];
    if (m->number != number)
      continue;
    out->created[i] = m->created;
    out->completed[i] = m->completed;
    out->errored[i] = m->errored;
    out->terminated[i] = m->terminated;
    for (size_t b = 0; b < RUN_BUCKETS; b++) {
      runs[b] += m->runs[b];
      out->ran += m->runs[b];
    }
    if (m->longest > out->max_ms)
      out->max_ms = m->longest;
  }
  pthread_mutex_unlock(&o->mu);
  if (out->ran) {
    out->p50_ms = rank_of(runs, (out->ran + 1) / 2);
    out->p99_ms = rank_of(runs, out->ran - out->ran / 100);
    if (out->p99_ms > out->max_ms) /* a bucket's middle past the longest */
      out->p99_ms = out->max_ms;
    if (out->p50_ms > out->max_ms)
      out->p50_ms = out->max_ms;
  }
}

const duro_driver outcomes_driver = {
    .name = "outcomes",
    .create = outcomes_create,
    .committed = outcomes_committed,
    .free = outcomes_free,
};
