/* tail_deliver.c — a consumer's batches: on each scheduler pass, a
 * consumer whose buffer holds a whole batch, or whose oldest item waited
 * batch_timeout (on the engine's clock: virtual in tests), and that has
 * no batch running, has its oldest items taken and handed to its tail
 * handler on a thread of its own, named in the crash ledger (inline
 * without engine threads).  What the handler returned is counted; its
 * items are let go either way: best effort, never retried. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "altstack.h"
#include "call_scope.h"
#include "log.h"
#include "tail_internal.h"
#include "util.h"

typedef struct tail_job {
  tail_state *t;
  tail_consumer *c;
  tail_rec **v;
  size_t n;
  duro_tail_fn fn;
  void *ctx;
  uint64_t dropped; /* told the handler */
  ledger_slot *slot;
} tail_job;

/* c's oldest items, up to a batch, taken for its handler (mu held; c has
 * items, a handler and no batch running). */
static tail_job *take_locked(tail_state *t, tail_consumer *c) {
  tail_job *j = xcalloc(1, sizeof *j);
  size_t n = c->n < t->opt.max_batch ? c->n : t->opt.max_batch;
  j->v = xcalloc(n, sizeof *j->v);
  for (size_t i = 0; i < n; i++) {
    j->v[i] = c->ring[c->head];
    c->ring[c->head] = NULL;
    c->head = (c->head + 1) % t->opt.buffer;
  }
  c->n -= n;
  /* the rest came later than the first: they wait at most a timeout from
   * now, not from when they came (not kept per item) */
  c->oldest_ms = engine_now(t->e);
  c->in_batch = n;
  c->running = c->fn;
  *j = (tail_job){.t = t,
                  .c = c,
                  .v = j->v,
                  .n = n,
                  .fn = c->fn,
                  .ctx = c->ctx,
                  .dropped = c->dropped_since};
  c->dropped_since = 0;
  return j;
}

/* A consumer without a handler: its items are dropped, counted, and it
 * is said once (mu held). */
static void drop_all_locked(tail_state *t, tail_consumer *c) {
  for (; c->n; c->n--) {
    tail_rec *r = c->ring[c->head];
    c->ring[c->head] = NULL;
    c->head = (c->head + 1) % t->opt.buffer;
    c->bytes -= (int64_t)r->bytes;
    c->dropped++;
    c->dropped_since++;
    if (--r->refs == 0)
      tail_rec_free(r);
  }
  if (!c->warned)
    log_warn("plugin \"%s\" is named in tail_consumers but has no tail "
             "handler loaded: the trace items meant for it are dropped "
             "(duro_tail_items_dropped_total)",
             c->plugin);
  c->warned = 1;
}

static void run_job(tail_job *j) {
  tail_state *t = j->t;
  duro_engine *e = t->e;
  char *items = tail_items_json(j->v, j->n);
  duro_tail_batch b = {
      .size = sizeof b, .items = items, .n = j->n, .dropped = j->dropped};
  int64_t now = engine_mono_ms(e);
  duro_env env = {.engine = e,
                  .ctx = j->ctx,
                  .deadline_ms = now + t->opt.timeout_ms,
                  .timeout_ms = t->opt.timeout_ms};
  call_scope scope; /* what the handler's JSON accessors return */
  call_scope_open(&scope);
  int rc = j->fn(&b, &env);
  call_scope_close(&scope);
  free(items);
  if (rc)
    log_warn("the tail handler of plugin \"%s\" failed on a batch of %zu "
             "item(s), dropped: %s%s%s",
             j->c->plugin, j->n, env.failure ? env.failure_name : "",
             env.failure ? ": " : "it returned non-zero",
             env.failure ? env.failure : "");
  free(env.failure);
  tail_consumer *c = j->c;
  pthread_mutex_lock(&t->mu);
  c->batches++;
  if (rc) {
    c->failed_batches++;
    c->dropped += j->n;
    c->dropped_since += j->n;
  } else {
    c->delivered += j->n;
  }
  for (size_t i = 0; i < j->n; i++) {
    c->bytes -= (int64_t)j->v[i]->bytes;
    if (--j->v[i]->refs == 0)
      tail_rec_free(j->v[i]);
  }
  c->in_batch = 0;
  c->running = NULL;
  pthread_mutex_unlock(&t->mu);
  free(j->v);
}

static void *job_thread(void *arg) {
  tail_job *j = arg;
  tail_state *t = j->t;
  duro_engine *e = t->e;
  thread_altstack();
  ledger_thread_bind(engine_ledger(e), j->slot);
  run_job(j);
  ledger_release(engine_ledger(e), j->slot);
  free(j);
  engine_kick_scheduler(e); /* its next batch may go now */
  pthread_mutex_lock(&t->mu);
  t->threads--;
  pthread_cond_broadcast(&t->idle);
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

/* The crash ledger says which handler runs, so a crash of the engine in
 * it is named at the next start. */
static ledger_slot *job_slot(duro_engine *e, const tail_job *j) {
  ledger *l = engine_ledger(e);
  ledger_slot *sl = l ? ledger_claim(l, LEDGER_IDLE) : NULL;
  if (!sl)
    return NULL;
  ledger_copy(sl->workflow, sizeof sl->workflow, "");
  ledger_copy(sl->plugin, sizeof sl->plugin, j->c->plugin);
  ledger_copy(sl->key, sizeof sl->key, "tail");
  ledger_copy(sl->driver, sizeof sl->driver, tail_driver.name);
  snprintf(sl->what, sizeof sl->what, "tail handler (a batch of %zu items)",
           j->n);
  sl->count = (uint32_t)j->n;
  sl->started_ms = engine_now(e);
  ledger_set_state(sl, LEDGER_HANDLER);
  return sl;
}

static void start_job(tail_state *t, tail_job *j) {
  duro_engine *e = t->e;
  if (engine_workers(e) == 0) {
    run_job(j);
    free(j);
    return;
  }
  j->slot = job_slot(e, j);
  pthread_mutex_lock(&t->mu);
  t->threads++;
  pthread_mutex_unlock(&t->mu);
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&th, &attr, job_thread, j) != 0)
    job_thread(j); /* no thread: this one runs it */
  pthread_attr_destroy(&attr);
}

/* The batches due now (all that wait, with `all`), taken; *next_ms gets
 * when the next is due (mu held). */
static size_t due_locked(tail_state *t, int all, tail_job **jobs,
                         int64_t *next_ms) {
  int64_t now = engine_now(t->e);
  size_t k = 0;
  for (size_t i = 0; i < t->n_consumers; i++) {
    tail_consumer *c = t->consumers[i];
    if (!c->n || c->running)
      continue; /* a batch's end kicks the scheduler */
    if (!c->fn) {
      drop_all_locked(t, c);
      continue;
    }
    int64_t due = c->oldest_ms + t->opt.batch_timeout_ms;
    if (all || c->n >= t->opt.max_batch || now >= due)
      jobs[k++] = take_locked(t, c);
    else if (due < *next_ms)
      *next_ms = due;
  }
  return k;
}

static size_t start_due(tail_state *t, int all, int64_t *next_ms) {
  pthread_mutex_lock(&t->mu);
  tail_job **jobs =
      t->n_consumers ? xcalloc(t->n_consumers, sizeof *jobs) : NULL;
  size_t k = due_locked(t, all, jobs, next_ms);
  pthread_mutex_unlock(&t->mu);
  for (size_t i = 0; i < k; i++)
    start_job(t, jobs[i]);
  free(jobs);
  return k;
}

int tail_dispatch(duro_engine *e, void *state, int64_t *next_ms) {
  (void)e;
  *next_ms = INT64_MAX;
  start_due(state, 0, next_ms);
  return 0;
}

size_t duro_tail_dispatch(duro_engine *e) {
  tail_state *t = tail_state_of(e);
  int64_t next = INT64_MAX;
  return t ? start_due(t, 0, &next) : 0;
}

uint32_t tail_drain(void *state, const struct timespec *until) {
  tail_state *t = state;
  int64_t next = INT64_MAX;
  /* what waits goes now: the host is stopping */
  start_due(t, 1, &next);
  pthread_mutex_lock(&t->mu);
  while (t->threads > 0) {
    if (!until)
      pthread_cond_wait(&t->idle, &t->mu);
    else if (pthread_cond_timedwait(&t->idle, &t->mu, until) != 0)
      break;
  }
  uint32_t left = t->threads;
  pthread_mutex_unlock(&t->mu);
  return left;
}
