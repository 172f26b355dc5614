/* trigger_driver.c — the triggers as an engine driver (driver.h): their
 * state made and freed, the dispatch and the sweep of the scheduler's
 * passes, their metrics, and the drain of the handler threads at a stop. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core.h"
#include "log.h"
#include "trigger_internal.h"

static void *driver_create(duro_engine *e) {
  (void)e;
  cron_state *s = xcalloc(1, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  return s;
}

/* The ticks that fired never make the pass go again at once: the next
 * one is at *next_ms. */
static int driver_dispatch(duro_engine *e, void *state, int64_t *next_ms) {
  (void)state;
  duro_crons_dispatch(e, next_ms);
  return 0;
}

static int driver_sweep(duro_engine *e, void *state, size_t budget) {
  (void)state;
  (void)budget; /* one statement deletes the old ticks */
  if (duro_crons_sweep(e, NULL) != 0)
    log_error("cron tick sweep failed: %s", journal_errmsg(engine_journal(e)));
  return 0;
}

static void driver_metrics(duro_engine *e, void *state, FILE *out) {
  (void)state;
  cron_metrics(e, out);
}

static uint32_t driver_drain(void *state, const struct timespec *until) {
  cron_state *s = state;
  pthread_mutex_lock(&s->mu);
  struct cron_registry *r = s->r;
  pthread_mutex_unlock(&s->mu);
  return cron_registry_wait(r, until);
}

static void driver_free(void *state) {
  cron_state *s = state;
  cron_registry_free(s->r);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

const duro_driver cron_driver = {
    .name = "cron",
    .create = driver_create,
    .dispatch = driver_dispatch,
    .sweep = driver_sweep,
    .metrics = driver_metrics,
    .drain = driver_drain,
    .free = driver_free,
};
