/* bulk_driver.c — the bulk actions' driver (bulk.h): a thread of its own
 * runs the jobs' batches, so that a batch (a commit per instance, a
 * delete waiting for a running instance to let go) never holds the
 * scheduler thread, which runs wakes, retries and cron.  Each scheduler
 * pass wakes it at most once a second (a job just made wakes it at
 * once); it runs passes of one batch a job back to back while a job has
 * more, the engine's other commits sharing its group commits.  With
 * `workers: 0` (a test's engine on a virtual clock) no thread runs: the
 * test calls duro_bulk_pass.  The retention sweep takes jobs ended more
 * than DURO_BULK_RETENTION_MS ago. */
#include <pthread.h>
#include <stdlib.h>

#include "bulk_internal.h"
#include "core.h"
#include "log.h"
#include "util.h"

/* How often the running jobs are looked for (another host's dead, one
 * made before a restart). */
#define BULK_LOOK_MS 1000

typedef struct bulk_state {
  duro_engine *e;
  pthread_mutex_t mu;
  pthread_cond_t wake;
  pthread_t thread;
  int started, wanted;
  int stop;    /* atomic: a batch reads it between instances */
  int64_t due; /* engine_mono_ms of the next look */
} bulk_state;

static bulk_state *state_of(duro_engine *e) {
  return duro_engine_driver_state(e, &bulk_driver);
}

int bulk_stopping(duro_engine *e) {
  bulk_state *s = state_of(e);
  return (s && __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) ||
         engine_stopping(e);
}

static void *runner(void *arg) {
  bulk_state *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->wanted && !s->stop)
      pthread_cond_wait(&s->wake, &s->mu);
    if (s->stop)
      break;
    s->wanted = 0;
    pthread_mutex_unlock(&s->mu);
    size_t n = duro_bulk_pass(s->e);
    pthread_mutex_lock(&s->mu);
    if (n)
      s->wanted = 1; /* a job had a batch: another pass at once */
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static void wake_locked(bulk_state *s) {
  if (!s->started && !s->stop) {
    if (pthread_create(&s->thread, NULL, runner, s) == 0)
      s->started = 1;
    else
      log_error("bulk: cannot start the jobs' thread");
  }
  s->wanted = 1;
  pthread_cond_signal(&s->wake);
}

void bulk_wake(duro_engine *e) {
  bulk_state *s = state_of(e);
  if (!s || engine_workers(e) == 0)
    return;
  pthread_mutex_lock(&s->mu);
  wake_locked(s);
  pthread_mutex_unlock(&s->mu);
}

static void *driver_create(duro_engine *e) {
  bulk_state *s = xcalloc(1, sizeof *s);
  s->e = e;
  pthread_mutex_init(&s->mu, NULL);
  engine_cond_init(&s->wake);
  return s;
}

static int bulk_dispatch(duro_engine *e, void *state, int64_t *next_ms) {
  bulk_state *s = state;
  int64_t mono = engine_mono_ms(e);
  if (engine_workers(e) > 0 && mono >= s->due) {
    s->due = mono + BULK_LOOK_MS;
    pthread_mutex_lock(&s->mu);
    wake_locked(s);
    pthread_mutex_unlock(&s->mu);
  }
  *next_ms = engine_now(e) + (s->due > mono ? s->due - mono : BULK_LOOK_MS);
  return 0;
}

size_t duro_bulk_sweep(duro_engine *e, size_t limit) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_BULK_SWEEP);
  op->ts_ms = engine_now(e) - DURO_BULK_RETENTION_MS;
  op->from_seq = (int64_t)limit;
  int rc = journal_commit(engine_journal(e), &b);
  size_t n = rc == 0 ? (size_t)op->out_rowid : 0;
  journal_batch_free(&b);
  if (rc)
    log_error("bulk: sweeping ended jobs: %s",
              journal_errmsg(engine_journal(e)));
  return n;
}

static int bulk_sweep(duro_engine *e, void *state, size_t budget) {
  (void)state;
  return duro_bulk_sweep(e, budget) == budget;
}

static void thread_stop(bulk_state *s) {
  pthread_mutex_lock(&s->mu);
  __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
  int started = s->started;
  s->started = 0;
  pthread_cond_signal(&s->wake);
  pthread_mutex_unlock(&s->mu);
  if (started)
    pthread_join(s->thread, NULL);
}

/* A batch stops between two instances: the one under way (a delete
 * waiting for its activation, a few seconds at most) is all it waits. */
static uint32_t bulk_drain(void *state, const struct timespec *until) {
  (void)until;
  thread_stop(state);
  return 0;
}

static void state_free(void *state) {
  bulk_state *s = state;
  thread_stop(s);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->wake);
  free(s);
}

const duro_driver bulk_driver = {
    .name = "bulk",
    .create = driver_create,
    .dispatch = bulk_dispatch,
    .sweep = bulk_sweep,
    .drain = bulk_drain,
    .free = state_free,
};
