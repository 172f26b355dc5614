/* trigger_dispatch.c — the scheduler's pass over the triggers (each
 * recovered once, then its due ticks fired), a fire by hand of a
 * schedule's triggers, and the sweep of old tick rows. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "trigger_internal.h"

size_t duro_crons_dispatch(duro_engine *e, int64_t *next_ms) {
  struct cron_registry *r = cron_registry_if_any(e);
  int64_t next = INT64_MAX;
  size_t fired = 0;
  /* The set walked stays put while referenced (a reload publishes a new
   * one), and one thread (the scheduler) dispatches, so each trigger's
   * memory fields are its own but for `running` (under the mutex). */
  cron_set *s = r ? cron_set_take(r) : NULL;
  for (size_t i = 0; s && i < s->n; i++) {
    cron_trigger *t = s->v[i];
    int64_t now = engine_now(e);
    if (!t->recovered)
      cron_recover(e, t, now);
    /* The scheduler stalled (the machine slept, say): as after a stop. */
    if (t->recovered && t->next_ms != CRON_NEVER && t->next_ms < now - LATE_MS)
      t->next_ms = cron_settle_late(e, t, t->next_ms, now,
                                    "while the host could not fire them");
    while (t->recovered && t->next_ms != CRON_NEVER && t->next_ms <= now) {
      cron_fire_tick(e, t, t->next_ms, now);
      fired++;
      t->next_ms = cron_next(&t->expr, t->next_ms, t->timezone);
    }
    if (t->next_ms < next)
      next = t->next_ms;
  }
  if (s)
    cron_set_drop(r, s);
  if (next_ms)
    *next_ms = next;
  return fired;
}

/* A fire by hand of a handler trigger runs where its ticks run (a
 * handler thread of its own, named in the crash ledger, counted
 * `running` so that an overlap: skip tick sees it and a stop waits for
 * it), while the caller waits for its result.  fn is counted running
 * (cron_handler_take_locked); the runner puts it back. */
static int fire_by_hand(duro_engine *e, cron_trigger *t, int64_t tick,
                        duro_scheduled_fn fn, void *ctx) {
  fire_wait w = {.done = 0, .rc = -1};
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.cv, NULL);
  fire *f = cron_fire_of(e, t, tick);
  f->fn = fn;
  f->ctx = ctx;
  f->by_hand = &w;
  cron_fire_start(e, t, f); /* f is the runner's now */
  pthread_mutex_lock(&w.mu);
  while (!w.done)
    pthread_cond_wait(&w.cv, &w.mu);
  pthread_mutex_unlock(&w.mu);
  pthread_cond_destroy(&w.cv);
  pthread_mutex_destroy(&w.mu);
  return w.rc;
}

/* One more result in r, zeroed, for trigger t. */
static duro_cron_fire_result *fire_result_add(duro_cron_fire_results *r,
                                              const cron_trigger *t) {
  r->v = xrealloc(r->v, (r->n + 1) * sizeof *r->v);
  duro_cron_fire_result *o = &r->v[r->n++];
  *o = (duro_cron_fire_result){.plugin = xstrdup(t->plugin),
                               .schedule = xstrdup(t->schedule)};
  return o;
}

int duro_cron_fire_by_hand(duro_engine *e, const char *schedule,
                           duro_cron_fire_results *out) {
  *out = (duro_cron_fire_results){0};
  struct cron_registry *r = cron_registry_of(e);
  int64_t now = engine_now(e);
  int64_t tick = now - now % 60000; /* the current minute */
  cron_set *s = cron_set_take(r);
  for (size_t i = 0; s && i < s->n; i++) {
    cron_trigger *t = s->v[i];
    if (strcmp(t->schedule, schedule) != 0)
      continue;
    duro_cron_fire_result *o = fire_result_add(out, t);
    if (t->workflow) {
      /* "exists": the minute's id was taken (by its tick, an earlier fire
       * or a client), so nothing was created. */
      char id[128];
      int created = 0;
      int ok = cron_fire_workflow(e, t, tick, now, NULL, 0, &created) == 1 &&
               cron_expand_id(t->id, tick, t->timezone, id, sizeof id) == 0;
      o->state = !ok       ? DURO_CRON_FIRE_FAILED
                 : created ? DURO_CRON_FIRE_COMPLETE
                           : DURO_CRON_FIRE_EXISTS;
      if (ok)
        o->instance = xstrdup(id);
    } else {
      pthread_mutex_lock(&r->mu);
      void *ctx = NULL;
      duro_scheduled_fn fn = cron_handler_take_locked(r, t->plugin, &ctx);
      pthread_mutex_unlock(&r->mu);
      int rc = fn ? fire_by_hand(e, t, tick, fn, ctx) : -1;
      o->state = rc == 0 ? DURO_CRON_FIRE_COMPLETE : DURO_CRON_FIRE_FAILED;
      if (!fn)
        o->error = xstrdup("the plugin has no scheduled handler");
      else if (rc)
        o->error = xasprintf("the scheduled handler returned %d", rc);
    }
  }
  if (s)
    cron_set_drop(r, s);
  return out->n ? 0 : DURO_E_CRON_NOT_FOUND;
}

void duro_cron_fire_results_clear(duro_cron_fire_results *r) {
  for (size_t i = 0; i < r->n; i++) {
    free(r->v[i].plugin);
    free(r->v[i].schedule);
    free(r->v[i].instance);
    free(r->v[i].error);
  }
  free(r->v);
  *r = (duro_cron_fire_results){0};
}

int duro_crons_sweep(duro_engine *e, size_t *deleted) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_CRON_SWEEP);
  op->ts_ms = engine_now(e) - TICK_RETENTION_MS;
  int rc = journal_commit(engine_journal(e), &b);
  if (deleted)
    *deleted = rc ? 0 : (size_t)b.ops[0].out_rowid;
  journal_batch_free(&b);
  return rc;
}
