/* engine.c — the engine opened (its settings, the journal, the ledger,
 * this host joined to the store, the drivers), started (recovery, the
 * worker threads, the watchdog and the scheduler), stopped (with a grace
 * for callbacks still running) and closed; the retention sweep on demand;
 * the condition variables and waits its files share.
 *
 * The pieces: engine_registry.c the workflows registered, engine_runnable.c
 * the entries and the runnable set, engine_worker.c the worker threads and
 * the commits of steps, engine_create.c the creation of instances,
 * engine_json.c the JSON text checked and built (engine_internal.h). */
#include "engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "log.h"
#include "util.h"

/* ---- open / start / close ------------------------------------------------ */

int duro_engine_open(const duro_engine_options *opt, duro_engine **out,
                     char *err, size_t errlen) {
  duro_engine *e = xcalloc(1, sizeof *e);
  e->opt = *opt;
  e->clock = opt->clock ? opt->clock : duro_clock_real();
  e->gate_open_ms = engine_mono_ms(e) + ENGINE_SUSPECT_SETTLE_MS;
  e->max_step_result =
      opt->max_step_result > 0 ? opt->max_step_result : 1024 * 1024;
  e->max_instance_state = opt->max_instance_state > 0 ? opt->max_instance_state
                                                      : 1024LL * 1024 * 1024;
  e->polled_through = INT64_MIN;
  e->max_runnable = opt->max_runnable ? opt->max_runnable : 10000;
  e->spill_min = INT64_MAX;
  engine_history_init(e);
  int rc = journal_open_backend(
      opt->backend ? opt->backend : &store_sqlite, opt->db_path,
      opt->read_only ? -1 : opt->synchronous_full, &e->j, err, errlen);
  if (rc) {
    free(e);
    return rc;
  }
  journal_set_crypt(e->j, opt->crypt);
  e->ledger = opt->ledger;
  if (!e->ledger) {
    e->ledger = ledger_create_private(ledger_slots_for(opt->workers));
    e->own_ledger = 1;
    if (!e->ledger) {
      fprintf(stderr, "duro: out of memory\n");
      abort();
    }
  }
  e->max_crashes = opt->max_crashes ? opt->max_crashes : 3;
  e->max_stuck = opt->max_hung ? opt->max_hung : opt->workers;
  pthread_mutex_init(&e->mu, NULL);
  pthread_mutex_init(&e->claim_mu, NULL);
  pthread_mutex_init(&e->watches_mu, NULL);
  pthread_mutex_init(&e->changes_mu, NULL);
  journal_on_commit(e->j, engine_changes_committed, e);
  engine_cond_init(&e->work);
  engine_cond_init(&e->changed);
  engine_cond_init(&e->watch);
  engine_cond_init(&e->sched);
  pthread_mutex_init(&e->gate_mu, NULL);
  engine_cond_init(&e->gate_cv);
  for (size_t i = 0; i < sizeof e->control_mu / sizeof *e->control_mu; i++)
    pthread_mutex_init(&e->control_mu[i], NULL);
  if ((rc = engine_join(e, err, errlen)) != 0) {
    /* nothing else was started yet */
    journal_close(e->j);
    if (e->own_ledger)
      ledger_free(e->ledger);
    free(e);
    return rc;
  }
  engine_drivers_open(e); /* the built-in ones always fit */
  *out = e;
  return 0;
}

int duro_engine_start(duro_engine *e) {
  /* Instances of hosts that stopped (this one's previous run among them)
   * become this host's first, so that recovery finds them. */
  engine_takeover(e);
  e->next_takeover = engine_mono_ms(e) + engine_lease_ms(e) / 2;
  engine_drivers_start(e); /* what drivers keep of the journal, read now */
  int rc = engine_record_crashes(e);
  if (rc == 0)
    rc = engine_reconcile(e);
  if (rc)
    return rc;
  duro_engine_poll_due(e);
  if (e->opt.workers == 0)
    return 0;
  pthread_mutex_lock(&e->mu);
  for (uint32_t i = 0; i < e->opt.workers && rc == 0; i++)
    if ((rc = engine_spawn_worker_locked(e)) != 0)
      log_error("cannot start worker thread %u", i);
  pthread_mutex_unlock(&e->mu);
  if (rc == 0 &&
      pthread_create(&e->watchdog, NULL, engine_watchdog_main, e) == 0)
    e->watchdog_started = 1;
  if (rc == 0 &&
      pthread_create(&e->scheduler, NULL, engine_scheduler_main, e) == 0)
    e->scheduler_started = 1;
  return rc;
}

void engine_cond_init(pthread_cond_t *c) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(c, &attr);
  pthread_condattr_destroy(&attr);
}

struct timespec engine_cond_deadline(int64_t ms) {
  return clock_deadline(CLOCK_MONOTONIC, ms);
}

uint32_t duro_engine_stop(duro_engine *e, int64_t grace_ms) {
  int64_t grace = grace_ms < 0 ? 0 : grace_ms;
  struct timespec until = engine_cond_deadline(grace);
  pthread_mutex_lock(&e->mu);
  __atomic_store_n(&e->stopping, 1, __ATOMIC_RELEASE);
  engine_admits_stop_locked(e); /* held activations end their run */
  pthread_cond_broadcast(&e->work);
  pthread_cond_broadcast(&e->watch);
  pthread_cond_broadcast(&e->sched);
  while (e->live > 0) {
    if (grace_ms < 0)
      pthread_cond_wait(&e->changed, &e->mu);
    else if (pthread_cond_timedwait(&e->changed, &e->mu, &until) != 0)
      break;
  }
  uint32_t left = e->live + e->stuck;
  pthread_mutex_unlock(&e->mu);
  if (e->watchdog_started) {
    pthread_join(e->watchdog, NULL);
    e->watchdog_started = 0;
  }
  if (e->scheduler_started) {
    pthread_join(e->scheduler, NULL);
    e->scheduler_started = 0;
  }
  /* Callbacks still running past the grace go with the process: each is
   * journaled now as cut short by the stop, so that its re-run is the
   * next attempt and the one lost shows. */
  if (grace_ms >= 0 && left > 0)
    engine_cut_short_running(e, grace);
  /* The drivers' threads (queue batches in their handlers, cron handlers:
   * none start now, the scheduler is gone) get the same grace; a queue
   * batch still there is settled by no one, and its messages return when
   * its lease ends. */
  left += engine_drivers_drain(e, grace_ms < 0 ? NULL : &until);
  return left;
}

/* The entries an admission gate parked, to be let go with the engine. */
typedef struct parked_list {
  entry **v;
  size_t n;
} parked_list;

static void collect_parked(void *ctx, int64_t rowid, void *val) {
  (void)rowid;
  parked_list *l = ctx;
  entry *ent = val;
  if (ent->gate_parked)
    l->v[l->n++] = ent;
}

void duro_engine_close(duro_engine *e) {
  if (!e)
    return;
  duro_engine_stop(e, -1);
  engine_hosts_quiet(e); /* other hosts' notices use what goes below */
  pthread_mutex_lock(&e->mu);
  uint32_t stuck = e->stuck;
  pthread_mutex_unlock(&e->mu);
  if (stuck) {
    /* Their threads still use the engine: it goes with the process. */
    log_warn("%u hung attempt(s) still running: the engine is not freed",
             stuck);
    return;
  }
  for (uint32_t i = 0; i < e->n_workers; i++) {
    pthread_join(e->workers[i]->thread, NULL);
    pthread_mutex_destroy(&e->workers[i]->mu);
    pthread_cond_destroy(&e->workers[i]->wake);
    if (e->workers[i]->wake_fd >= 0)
      close(e->workers[i]->wake_fd);
    free(e->workers[i]);
  }
  free(e->workers);
  /* The threads are gone, but the final commits of their last activations
   * may still be in the journal's queue, and their callbacks let go of
   * the entries freed below. */
  journal_drain(e->j);
  /* Entries still queued were never started: their rows say queued or
   * waiting, which recovery handles. */
  entry *ent;
  while ((ent = runnable_pop(e)))
    entry_drop(e, ent);
  for (size_t i = 0; i < e->n_wfs; i++)
    while ((ent = fifo_pop(&e->wfs[i].deferred)))
      entry_drop(e, ent);
  parked_list parked = {xcalloc(e->entries.len + 1, sizeof *parked.v), 0};
  idmap_each(&e->entries, collect_parked, &parked);
  for (size_t i = 0; i < parked.n; i++) {
    engine_gate_forget_locked(e, parked.v[i]);
    entry_drop(e, parked.v[i]);
  }
  free(parked.v);
  while ((ent = fifo_pop(&e->retrying)))
    entry_drop(e, ent);
  idmap_free(&e->entries);
  engine_drivers_free(e); /* each waits for its handlers */
  journal_close(e->j);
  for (size_t i = 0; i < e->n_wfs; i++) {
    free(e->wfs[i].name);
    free(e->wfs[i].binding);
    free((char *)e->wfs[i].limits.lifecycle_queue);
    for (size_t k = 0; k < e->wfs[i].limits.n_flow_concurrency; k++)
      free((char *)e->wfs[i].limits.flow_concurrency[k].key);
    free((duro_flow_concurrency *)e->wfs[i].limits.flow_concurrency);
    for (size_t k = 0; k < e->wfs[i].limits.n_flow_rate; k++)
      free((char *)e->wfs[i].limits.flow_rate[k].key);
    free((duro_flow_rate *)e->wfs[i].limits.flow_rate);
    duro_flow_order *order = &e->wfs[i].limits.flow_order;
    free((char *)order->priority_key);
    free((char *)order->fairness_key);
    for (size_t k = 0; k < order->n_weights; k++)
      free((char *)order->weights[k].value);
    free((duro_flow_weight *)order->weights);
    free((char *)e->wfs[i].limits.flow_singleton_key);
    free((char *)e->wfs[i].limits.flow_debounce_key);
    engine_index_free(&e->wfs[i].limits);
    builds_free(&e->wfs[i]);
  }
  free(e->wfs);
  engine_admits_free(e);
  if (e->own_ledger)
    ledger_free(e->ledger);
  engine_watches_free(e);
  engine_changes_free(e);
  pthread_mutex_destroy(&e->mu);
  pthread_mutex_destroy(&e->claim_mu);
  pthread_mutex_destroy(&e->watches_mu);
  pthread_cond_destroy(&e->work);
  pthread_cond_destroy(&e->changed);
  pthread_cond_destroy(&e->watch);
  pthread_cond_destroy(&e->sched);
  for (size_t i = 0; i < sizeof e->control_mu / sizeof *e->control_mu; i++)
    pthread_mutex_destroy(&e->control_mu[i]);
  engine_hosts_free(e);
  engine_history_free(e);
  free(e);
}

/* ---- the retention sweep on demand --------------------------------------- */

#define SWEEP_TRANSACTION 1000 /* instances, at most */

int duro_engine_sweep_some(duro_engine *e, size_t limit, size_t *swept) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_SWEEP);
  op->ts_ms = duro_clock_now(e->clock);
  op->from_seq =
      (int64_t)(limit < SWEEP_TRANSACTION ? limit : SWEEP_TRANSACTION);
  int rc = journal_commit(e->j, &b);
  *swept = rc ? 0 : (size_t)op->out_rowid;
  journal_batch_free(&b);
  return rc;
}

int duro_engine_sweep(duro_engine *e, size_t *swept) {
  size_t total = 0, n = 0;
  int rc;
  /* bounded transactions; loop for more */
  while ((rc = duro_engine_sweep_some(e, SWEEP_TRANSACTION, &n)) == 0) {
    total += n;
    if (n < SWEEP_TRANSACTION)
      break;
  }
  if (swept)
    *swept = total;
  return rc;
}

/* ---- waits --------------------------------------------------------------- */

/* The synchronous form waits for the asynchronous one's answer. */
void engine_wait_done(engine_wait *w, int rc, void *result) {
  pthread_mutex_lock(&w->mu);
  w->rc = rc;
  w->result = result;
  w->done = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

int engine_wait_for(engine_wait *w, void **result) {
  pthread_mutex_lock(&w->mu);
  while (!w->done)
    pthread_cond_wait(&w->cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  if (result)
    *result = w->result;
  return w->rc;
}
