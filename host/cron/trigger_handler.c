/* trigger_handler.c — a handler trigger's fire: the plugin's scheduled
 * handler run for a claimed tick (or a catch-up burst of late ticks, or a
 * fire by hand) on a thread of its own named in the crash ledger, its
 * tick settled by what it returned, and the trigger's counters let go. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "altstack.h"
#include "call_scope.h"
#include "core.h"
#include "log.h"
#include "trigger_internal.h"

static void fire_free(fire *f) {
  free(f->late);
  free(f->key);
  free(f->plugin);
  free(f->schedule);
  free(f->timezone);
  free(f->workflow);
  free(f->id);
  free(f);
}

fire *cron_fire_of(duro_engine *e, cron_trigger *t, int64_t tick) {
  fire *f = xcalloc(1, sizeof *f);
  struct cron_registry *r = cron_registry_if_any(e);
  pthread_mutex_lock(&r->mu);
  t->refs++;
  pthread_mutex_unlock(&r->mu);
  *f = (fire){.e = e,
              .t = t,
              .key = xstrdup(t->key),
              .plugin = xstrdup(t->plugin),
              .schedule = xstrdup(t->schedule),
              .timezone = t->timezone ? xstrdup(t->timezone) : NULL,
              .workflow = t->workflow ? xstrdup(t->workflow) : NULL,
              .id = t->id ? xstrdup(t->id) : NULL,
              .tick = tick};
  return f;
}

/* Runs the handler for tick f->tick; the caller claimed the tick (or it
 * is a fire by hand: no row) and counted fn running. */
static int run_handler(fire *f) {
  duro_scheduled_event ev = {.size = sizeof ev,
                             .cron = f->schedule,
                             .scheduled_ms = f->tick,
                             .timezone = f->timezone};
  duro_env env = {.engine = f->e, .ctx = f->ctx};
  call_scope scope; /* what the handler's JSON accessors return */
  call_scope_open(&scope);
  int rc = f->fn(&ev, &env);
  call_scope_close(&scope);
  if (!f->by_hand) {
    char *err = !rc ? NULL
                : env.failure
                    ? cron_error_text("%s: %s", env.failure_name, env.failure)
                    : cron_error_text("the scheduled handler returned %d", rc);
    cron_tick_set(f->e, f->key, f->tick,
                  rc ? DURO_CRON_TICK_FAILED : DURO_CRON_TICK_COMPLETE, err);
    free(err);
  }
  free(env.failure);
  return rc;
}

/* The trigger's tick counters, after a handler tick (or a catch-up
 * burst: `late`) ended; the fire lets go of it (a reload may have removed
 * it meanwhile). */
static void trigger_done(struct cron_registry *r, cron_trigger *t, int late) {
  pthread_mutex_lock(&r->mu);
  if (t->running)
    t->running--;
  if (late && t->catching)
    t->catching--;
  cron_trigger_drop_locked(t);
  pthread_mutex_unlock(&r->mu);
}

/* A catch-up burst: each claimed tick in turn, oldest first.  A stop
 * ends it; the ticks it did not reach are failed, saying so, rather than
 * left `fired` for the next start to call cut short. */
static void run_burst(fire *f) {
  size_t i = 0;
  for (; i < f->n_late && !engine_stopping(f->e); i++) {
    f->tick = f->late[i];
    run_handler(f);
  }
  for (; i < f->n_late; i++)
    cron_tick_set(f->e, f->key, f->late[i], DURO_CRON_TICK_FAILED,
                  "\"the host stopped before this late tick ran\"");
}

static void run_fire(fire *f) {
  if (f->late)
    run_burst(f);
  else if (f->by_hand)
    f->by_hand->rc = run_handler(f); /* read once `done` is set */
  else
    run_handler(f);
}

/* After f ran: its handler and its tick no longer count running, f is
 * freed, and a fire by hand's caller is told (last: it may return as
 * soon as it is). */
static void fire_finish(fire *f) {
  struct cron_registry *r = cron_registry_if_any(f->e);
  fire_wait *w = f->by_hand;
  cron_handler_put(r, f->fn);
  trigger_done(r, f->t, f->late != NULL);
  fire_free(f);
  if (w) {
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
  }
}

static void *handler_thread(void *arg) {
  fire *f = arg;
  duro_engine *e = f->e;
  struct cron_registry *r = cron_registry_if_any(e);
  thread_altstack();
  ledger_thread_bind(engine_ledger(e), f->slot);
  run_fire(f);
  ledger_release(engine_ledger(e), f->slot);
  fire_finish(f);
  pthread_mutex_lock(&r->mu);
  r->threads--;
  pthread_cond_broadcast(&r->idle);
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

/* The crash ledger says which handler runs, so a crash in it is named in
 * the log (its tick is found `fired` at the next start: failed). */
static ledger_slot *handler_slot(duro_engine *e, const fire *f) {
  ledger_slot *sl = engine_ledger(e) && engine_workers(e)
                        ? ledger_claim(engine_ledger(e), LEDGER_IDLE)
                        : NULL;
  if (!sl)
    return NULL;
  ledger_copy(sl->workflow, sizeof sl->workflow, f->schedule);
  ledger_copy(sl->plugin, sizeof sl->plugin, f->plugin);
  ledger_copy(sl->key, sizeof sl->key, f->key);
  ledger_copy(sl->driver, sizeof sl->driver, cron_driver.name);
  snprintf(sl->what, sizeof sl->what, "scheduled handler (cron \"%s\")",
           f->schedule);
  sl->started_ms = f->tick;
  ledger_set_state(sl, LEDGER_HANDLER);
  return sl;
}

/* The plugin's handler, counted running; NULL (and every tick of
 * `ticks` failed, saying why) when the plugin has none. */
static duro_scheduled_fn handler_or_fail(duro_engine *e, const cron_trigger *t,
                                         const int64_t *ticks, size_t n,
                                         int64_t now, void **ctx) {
  struct cron_registry *r = cron_registry_if_any(e);
  pthread_mutex_lock(&r->mu);
  duro_scheduled_fn fn = cron_handler_take_locked(r, t->plugin, ctx);
  pthread_mutex_unlock(&r->mu);
  if (fn)
    return fn;
  char *err = cron_error_text("plugin \"%s\" has no scheduled handler (a cron "
                              "given as a string needs one)",
                              t->plugin);
  for (size_t i = 0; i < n; i++)
    cron_tick_put(e, t, ticks[i], DURO_CRON_TICK_FAILED, now, NULL, err);
  log_warn("cron %s (plugin %s): %s", t->schedule, t->plugin, err);
  free(err);
  return NULL;
}

/* Runs f (its handler counted running, its ticks claimed) on a thread of
 * its own, or inline without workers; `late`: a catch-up burst. */
void cron_fire_start(duro_engine *e, cron_trigger *t, fire *f) {
  struct cron_registry *r = cron_registry_if_any(e);
  int late = f->late != NULL;
  pthread_mutex_lock(&r->mu);
  t->running++;
  t->catching += late;
  pthread_mutex_unlock(&r->mu);
  if (engine_workers(e) == 0) {
    run_fire(f);
    fire_finish(f);
    return;
  }
  f->slot = handler_slot(e, f);
  pthread_mutex_lock(&r->mu);
  r->threads++;
  pthread_mutex_unlock(&r->mu);
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&th, &attr, handler_thread, f) != 0)
    handler_thread(f); /* no thread: this one runs it */
  pthread_attr_destroy(&attr);
}

/* Handler form: claims the tick, then runs the handler (cron_fire_start). */
void cron_fire_handler(duro_engine *e, cron_trigger *t, int64_t tick,
                       int64_t now) {
  void *ctx = NULL;
  duro_scheduled_fn fn = handler_or_fail(e, t, &tick, 1, now, &ctx);
  if (!fn)
    return;
  if (cron_tick_put(e, t, tick, DURO_CRON_TICK_FIRED, now, NULL, NULL) != 1) {
    cron_handler_put(cron_registry_if_any(e),
                     fn); /* claimed before, or not recorded: no fire */
    return;
  }
  fire *f = cron_fire_of(e, t, tick);
  f->fn = fn;
  f->ctx = ctx;
  cron_fire_start(e, t, f);
}

/* Handler form, catch-up: claims the late ticks (MISSED_CHUNK a commit)
 * and runs those this host claimed as one burst, oldest first, on one
 * thread: each its own tick, none an overlap of the one before.  Returns
 * how many it claimed. */
size_t cron_fire_handler_late(duro_engine *e, cron_trigger *t,
                              const int64_t *ticks, size_t n, int64_t now) {
  void *ctx = NULL;
  duro_scheduled_fn fn = n ? handler_or_fail(e, t, ticks, n, now, &ctx) : NULL;
  if (!fn)
    return 0;
  int64_t *claimed = xcalloc(n, sizeof *claimed);
  size_t k = 0;
  for (size_t i = 0; i < n; i += MISSED_CHUNK) {
    journal_batch b = {0};
    for (size_t j = i; j < n && j < i + MISSED_CHUNK; j++)
      cron_tick_op(&b, t->key, ticks[j], DURO_CRON_TICK_FIRED, now);
    if (journal_commit(engine_journal(e), &b) != 0)
      log_error("cron: cannot claim late ticks: %s",
                journal_errmsg(engine_journal(e)));
    else
      for (size_t j = 0; j < b.n; j++)
        if (b.ops[j].out_rowid == 1)
          claimed[k++] = b.ops[j].visible_ms;
    journal_batch_free(&b);
  }
  if (!k) {
    free(claimed);
    cron_handler_put(cron_registry_if_any(e), fn);
    return 0;
  }
  fire *f = cron_fire_of(e, t, claimed[0]);
  f->fn = fn;
  f->ctx = ctx;
  f->late = claimed;
  f->n_late = k;
  cron_fire_start(e, t, f);
  return k;
}
