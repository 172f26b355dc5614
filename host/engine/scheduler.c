/* scheduler.c — the engine's scheduler thread, and the retry of work that
 * could not be written.
 *
 * The database is the one source of truth for runnable work; memory only
 * caches it.  So the scheduler, one thread beside the workers, keeps the
 * cache honest without ever running on the host's event loop:
 *  - due wakes: it polls the journal's wake index and sleeps until the
 *    earliest wake (at most a second, so a clock step is noticed);
 *  - storage retries: an activation whose write failed (a full disk, an
 *    I/O error) gives its instance back with a back-off; the scheduler
 *    queues it again when the time comes;
 *  - reconciliation: every instance the journal says is queued, or has a
 *    persisted pause/terminate nobody applied, and that no entry holds,
 *    is made runnable.  At start that is crash recovery; later it runs
 *    once writes succeed again after any failed, so nothing acknowledged
 *    waits for a restart;
 *  - the retention sweep (instances, then each driver's rows), once a
 *    minute: at most SWEEP_PASS_MAX instances, then SWEEP_PASS_MESSAGES
 *    rows, a pass, the passes back to back while there are more, so
 *    that a large sweep never holds up the wakes and the dispatch of the
 *    passes between;
 *  - the store's files (journal_check): deleted or replaced under the
 *    host, they would take writes no restart finds, so the journal then
 *    refuses every write (503, /healthz degraded) and a line says why
 *    (each group commit checks them before acknowledging; this pass
 *    finds them gone when nothing writes, and says it once);
 *  - the counters' history (history.c): a sample per pass;
 *  - on a store several hosts share (hosts.c), every half lease: the
 *    lease's renewal and the takeover of stopped hosts' instances;
 *  - the drivers (driver.h: queue consumers, cron triggers): each
 *    dispatches its due work, passes back to back while one has more,
 *    else the pass sleeps until the earliest time one names (a send or a
 *    batch's end kicks it sooner).
 * Timers and back-offs run on CLOCK_MONOTONIC (engine_mono_ms): wake times
 * stay absolute wall-clock times in the journal, but a clock step back
 * only delays them, never busy-loops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "engine_internal.h"
#include "error.h"
#include "fiber.h"
#include "log.h"
#include "util.h"

#define RETRY_FIRST_MS 100
#define RETRY_MAX_MS 5000
#define SWEEP_EVERY_MS 60000
#define SWEEP_FIRST_MS 5000
#define SWEEP_PASS_MAX 500       /* instances deleted in one pass */
#define SWEEP_PASS_MESSAGES 5000 /* a driver's rows deleted in one pass */
#define WAIT_MAX_MS 1000

int64_t engine_mono_ms(const duro_engine *e) {
  return duro_clock_mono(e->clock);
}

void engine_kick_scheduler(duro_engine *e) {
  pthread_mutex_lock(&e->mu);
  e->sched_kick = 1;
  pthread_cond_signal(&e->sched);
  pthread_mutex_unlock(&e->mu);
}

void engine_activation_retry(duro_engine *e, entry *ent) {
  pthread_mutex_lock(&e->mu);
  release_slot_locked(e, ent);
  if (e->stopping) {
    /* Its row is as the last successful write left it: the next start
     * finds it. */
    entry_drop(e, ent);
    pthread_mutex_unlock(&e->mu);
    return;
  }
  int64_t delay = RETRY_FIRST_MS;
  for (uint32_t i = 0; i < ent->write_failures && delay < RETRY_MAX_MS; i++)
    delay *= 2;
  if (delay > RETRY_MAX_MS)
    delay = RETRY_MAX_MS;
  ent->write_failures++;
  ent->retry_at = engine_mono_ms(e) + delay;
  ent->state = ENTRY_RETRY;
  ent->rerun = 0;
  fifo_push(&e->retrying, ent);
  e->sched_kick = 1;
  pthread_cond_signal(&e->sched);
  pthread_cond_broadcast(&e->changed);
  pthread_mutex_unlock(&e->mu);
}

int64_t engine_retries_due_locked(duro_engine *e, int64_t now) {
  int64_t next = INT64_MAX;
  entry *keep = NULL, **tail = &keep, *ent;
  while ((ent = fifo_pop(&e->retrying))) {
    if (ent->retry_at <= now) {
      runnable_push(e, ent);
      continue;
    }
    if (ent->retry_at < next)
      next = ent->retry_at;
    *tail = ent;
    tail = &ent->next;
  }
  for (entry *n; keep; keep = n) {
    n = keep->next;
    fifo_push(&e->retrying, keep);
  }
  return next;
}

/* ---- reconciliation ----------------------------------------------------- */

typedef struct found_row {
  int64_t rowid;
  int control;
} found_row;

typedef struct found {
  found_row *v;
  size_t n, cap;
} found;

static void collect(void *ctx, int64_t rowid, duro_status status, int control) {
  (void)status;
  found *f = ctx;
  if (f->n == f->cap) {
    f->cap = f->cap ? f->cap * 2 : 64;
    f->v = xrealloc(f->v, f->cap * sizeof *f->v);
  }
  f->v[f->n++] = (found_row){rowid, control};
}

int engine_reconcile(duro_engine *e) {
  found f = {0};
  int rc = journal_recover_each(e->j, collect, &f);
  size_t queued = 0;
  for (size_t i = 0; i < f.n && rc == 0; i++) {
    pthread_mutex_lock(&e->mu);
    int held = idmap_get(&e->entries, f.v[i].rowid) != NULL;
    if (!held && !f.v[i].control) {
      engine_queue_new_locked(e, f.v[i].rowid);
      queued++;
    }
    pthread_mutex_unlock(&e->mu);
    /* A pause or terminate acknowledged while an activation ran, that the
     * activation could not apply: apply it now. */
    if (!held && f.v[i].control)
      rc = apply_control_idle(e, f.v[i].rowid, f.v[i].control);
  }
  free(f.v);
  if (queued)
    log_info("recovered %zu runnable instance(s)", queued);
  return rc;
}

/* ---- the thread -----------------------------------------------------------
 */

static void wait_ms(duro_engine *e, int64_t ms) {
  /* mu held; e->sched waits on CLOCK_MONOTONIC. */
  struct timespec until = engine_cond_deadline(ms);
  pthread_cond_timedwait(&e->sched, &e->mu, &until);
}

/* A bounded step of the retention sweep when one is due or under way:
 * at most SWEEP_PASS_MAX instances, then, once no more instances are
 * due, each driver's rows (queue messages, cron ticks), at most
 * SWEEP_PASS_MESSAGES a pass.  Returns 1 while rows remain. */
static int sweep_step(duro_engine *e, int64_t mono) {
  if (!e->sweep.started) {
    e->sweep.started = 1;
    e->sweep.next = mono + SWEEP_FIRST_MS;
  }
  if (!e->sweep.running) {
    if (mono < e->sweep.next)
      return 0;
    e->sweep.running = 1;
    e->sweep.drivers = 0;
    e->sweep.driver = 0;
    e->sweep.instances = 0;
    e->sweep.passes = 0;
  }
  e->sweep.passes++;
  size_t n = 0;
  if (!e->sweep.drivers) {
    if (duro_engine_sweep_some(e, SWEEP_PASS_MAX, &n) != 0)
      log_error("retention sweep failed: %s", journal_errmsg(e->j));
    e->sweep.instances += n;
    if (n == SWEEP_PASS_MAX)
      return 1; /* more on the next pass */
    if (e->sweep.instances)
      log_info("retention: deleted %zu ended instance(s) in %u pass(es)",
               e->sweep.instances, e->sweep.passes);
    e->sweep.drivers = 1;
  }
  if (engine_drivers_sweep(e, SWEEP_PASS_MESSAGES))
    return 1; /* more on the next pass */
  e->sweep.running = 0;
  e->sweep.next = mono + SWEEP_EVERY_MS;
  return 0;
}

int64_t duro_engine_scheduler_pass(duro_engine *e) {
  engine_history_sample(e);
  duro_engine_poll_due(e);
  engine_refill(e);
  /* a driver that handled work may have more, so no wait */
  int64_t drivers_due;
  int busy = engine_drivers_dispatch(e, &drivers_due);
  int64_t hosts_due = engine_hosts_tick(e, engine_mono_ms(e));
  int64_t wake = duro_engine_next_wake(e);
  if (journal_check(e->j))
    log_error("storage: %s", journal_errmsg(e->j));
  uint64_t failures;
  int failing = journal_failing(e->j, NULL, 0, &failures);
  if (!failing && failures != e->reconciled_failures) {
    log_info("storage writes succeed again: reconciling with the journal");
    if (engine_reconcile(e) == 0)
      e->reconciled_failures = failures;
  }
  busy |= sweep_step(e, engine_mono_ms(e));

  pthread_mutex_lock(&e->mu);
  int64_t retry = engine_retries_due_locked(e, engine_mono_ms(e));
  pthread_mutex_unlock(&e->mu);
  if (busy)
    return 0;
  int64_t now = duro_clock_now(e->clock);
  int64_t mono = engine_mono_ms(e);
  int64_t delay = WAIT_MAX_MS;
  if (wake != INT64_MAX && wake - now < delay)
    delay = wake - now;
  if (drivers_due != INT64_MAX && drivers_due - now < delay)
    delay = drivers_due - now;
  if (retry != INT64_MAX && retry - mono < delay)
    delay = retry - mono;
  if (hosts_due != INT64_MAX && hosts_due - mono < delay)
    delay = hosts_due - mono;
  if (failing && delay > 100)
    delay = 100; /* notice recovery quickly */
  return delay > 0 ? delay : 0;
}

void *engine_scheduler_main(void *arg) {
  duro_engine *e = arg;
  pthread_mutex_lock(&e->mu);
  while (!e->stopping) {
    e->sched_kick = 0;
    pthread_mutex_unlock(&e->mu);
    int64_t delay = duro_engine_scheduler_pass(e);
    fiber_cache_trim(clock_mono_ms()); /* memory, not the engine's time */
    pthread_mutex_lock(&e->mu);
    /* a kick since the pass began: pass again at once */
    if (!e->stopping && !e->sched_kick && delay > 0)
      wait_ms(e, delay);
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}
