/* history.c — the engine's counters over the last ten minutes, for
 * GET /metrics/history: a page opened now can draw the minutes before it
 * opened without anything else having scraped /metrics.
 *
 * A fixed ring of HISTORY_BUCKETS buckets of HISTORY_BUCKET_MS each, on
 * the engine's clock: each sample adds how much every counter grew since
 * the previous sample to the bucket the sample's time falls in.  The
 * scheduler thread samples at every pass (at least once a second) and a
 * read samples first, so a bucket holds what happened in it give or take
 * one pass.  A bucket the ring comes round to again is emptied first,
 * which is how buckets older than the window go. */
#include <stddef.h>
#include <string.h>

#include "engine_internal.h"

/* The series, by name, and where their counters are. */
static const struct {
  const char *name;
  size_t offset;
} SERIES[HISTORY_SERIES] = {
    {"steps_completed", offsetof(duro_engine, m.steps_completed)},
    {"attempts_failed", offsetof(duro_engine, m.attempts_failed)},
    {"retries_scheduled", offsetof(duro_engine, m.retries_scheduled)},
    {"instances_created", offsetof(duro_engine, m.instances_created)},
    {"activations", offsetof(duro_engine, m.activations)},
    {"events_sent", offsetof(duro_engine, m.events_sent)},
};

static uint64_t counter(duro_engine *e, size_t k) {
  return __atomic_load_n((const uint64_t *)((const char *)e + SERIES[k].offset),
                         __ATOMIC_RELAXED);
}

void engine_history_init(duro_engine *e) {
  engine_history *h = &e->history;
  pthread_mutex_init(&h->mu, NULL);
  h->since_ms = duro_clock_now(e->clock);
  h->newest = h->since_ms / HISTORY_BUCKET_MS;
  for (size_t i = 0; i < HISTORY_BUCKETS; i++)
    h->ring[i].number = -1;
}

void engine_history_free(duro_engine *e) {
  pthread_mutex_destroy(&e->history.mu);
}

/* h->mu held. */
static void sample_locked(duro_engine *e, engine_history *h, int64_t now) {
  int64_t number = now / HISTORY_BUCKET_MS;
  if (number < h->newest) /* the clock went back: the newest bucket takes it */
    number = h->newest;
  history_bucket *b = &h->ring[number % HISTORY_BUCKETS];
  if (b->number != number) {
    memset(b->n, 0, sizeof b->n);
    b->number = number;
  }
  h->newest = number;
  for (size_t k = 0; k < HISTORY_SERIES; k++) {
    uint64_t v = counter(e, k);
    b->n[k] += v - h->seen[k];
    h->seen[k] = v;
  }
}

void engine_history_sample(duro_engine *e) {
  pthread_mutex_lock(&e->history.mu);
  sample_locked(e, &e->history, duro_clock_now(e->clock));
  pthread_mutex_unlock(&e->history.mu);
}

/* The public sizes are the ring's (engine_internal.h). */
_Static_assert(DURO_HISTORY_BUCKETS == HISTORY_BUCKETS, "history buckets");
_Static_assert(DURO_HISTORY_SERIES == HISTORY_SERIES, "history series");

void duro_engine_history(duro_engine *e, duro_metrics_history *out) {
  engine_history *h = &e->history;
  int64_t now = duro_clock_now(e->clock);
  memset(out, 0, sizeof *out);
  for (size_t k = 0; k < HISTORY_SERIES; k++)
    out->series[k].name = SERIES[k].name;
  pthread_mutex_lock(&h->mu);
  sample_locked(e, h, now);
  int64_t first = h->newest - (HISTORY_BUCKETS - 1);
  for (int64_t number = first; number <= h->newest; number++) {
    /* a slot still holding an older bucket, or none yet: nothing counted */
    const history_bucket *b =
        number >= 0 ? &h->ring[number % HISTORY_BUCKETS] : NULL;
    for (size_t k = 0; k < HISTORY_SERIES; k++)
      out->series[k].n[number - first] = b && b->number == number ? b->n[k] : 0;
  }
  out->since_ms = h->since_ms;
  pthread_mutex_unlock(&h->mu);
  out->bucket_ms = HISTORY_BUCKET_MS;
  out->now_ms = now;
  out->start_ms = first * HISTORY_BUCKET_MS;
}
