/* trigger.c — cron triggers in the engine (trigger.h).
 *
 * The registry (guarded by its mutex) holds each trigger's schedule and
 * policies and, in memory only, the next tick to look at and how many of
 * its handler ticks run.  Everything a restart must know is in the
 * journal: when a trigger was first seen (so a new trigger misses
 * nothing from before it existed), and one row per tick that came.
 *
 * The first dispatch after start reconciles each trigger with its rows:
 * ticks between its newest row and now that are more than LATE_MS old
 * passed while no host ran, and are recorded `missed` (the newest
 * MAX_MISSED_ROWS one by one, the rest counted), then fired late as
 * catch_up says, without the overlap check (a handler's late ticks as one
 * burst on one thread); a tick still `fired` belongs to a handler the
 * stop cut short and becomes `failed`.  From then on a tick fires when it
 * comes, claimed before it runs.
 *
 * A reload changes the triggers while the engine runs (duro_cron_replace):
 * the set of triggers is an array of pointers published whole under the
 * mutex, never changed in place.  The dispatch, a fire by hand and the
 * listing each take a reference on the set they walk, and a fire holds
 * one on its trigger, so a removed trigger and an old array are freed by
 * whoever lets go of them last.  A trigger whose defining fields stay
 * keeps its object (its next tick, its handler ticks running); its
 * policies (catch_up, max_catch_up, overlap) are atomics a reload stores
 * and the dispatch loads. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "core.h"
#include "trigger_internal.h"

struct cron_registry *cron_registry_of(duro_engine *e) {
  cron_state *s = duro_engine_driver_state(e, &cron_driver);
  pthread_mutex_lock(&s->mu);
  if (!s->r) {
    s->r = xcalloc(1, sizeof *s->r);
    pthread_mutex_init(&s->r->mu, NULL);
    engine_cond_init(&s->r->idle); /* stop's monotonic grace */
  }
  struct cron_registry *r = s->r;
  pthread_mutex_unlock(&s->mu);
  return r;
}

/* The registry, NULL before the first registration. */
struct cron_registry *cron_registry_if_any(duro_engine *e) {
  cron_state *s = duro_engine_driver_state(e, &cron_driver);
  pthread_mutex_lock(&s->mu);
  struct cron_registry *r = s->r;
  pthread_mutex_unlock(&s->mu);
  return r;
}

void cron_trigger_clear(cron_trigger *t) {
  free(t->key);
  free(t->plugin);
  free(t->schedule);
  free(t->timezone);
  free(t->workflow);
  free(t->id);
  free(t->params);
  free(t->last_instance);
}

/* r->mu held. */
void cron_trigger_drop_locked(cron_trigger *t) {
  if (--t->refs == 0) {
    cron_trigger_clear(t);
    free(t);
  }
}

/* The set to walk, referenced (NULL: none); cron_set_drop lets go of it. */
cron_set *cron_set_take(struct cron_registry *r) {
  pthread_mutex_lock(&r->mu);
  cron_set *s = r->set;
  if (s)
    s->refs++;
  pthread_mutex_unlock(&r->mu);
  return s;
}

static void set_drop_locked(cron_set *s) {
  if (!s || --s->refs > 0)
    return;
  for (size_t i = 0; i < s->n; i++)
    cron_trigger_drop_locked(s->v[i]);
  free(s->v);
  free(s);
}

void cron_set_drop(struct cron_registry *r, cron_set *s) {
  pthread_mutex_lock(&r->mu);
  set_drop_locked(s);
  pthread_mutex_unlock(&r->mu);
}

/* Makes `v` (n triggers, each referenced for the new set) the set. */
void cron_set_publish(struct cron_registry *r, cron_trigger **v, size_t n) {
  cron_set *s = xcalloc(1, sizeof *s);
  *s = (cron_set){v, n, 1};
  pthread_mutex_lock(&r->mu);
  cron_set *old = r->set;
  r->set = s;
  set_drop_locked(old);
  pthread_mutex_unlock(&r->mu);
}

uint32_t cron_registry_wait(struct cron_registry *r,
                            const struct timespec *until) {
  if (!r)
    return 0;
  pthread_mutex_lock(&r->mu);
  while (r->threads) {
    if (!until)
      pthread_cond_wait(&r->idle, &r->mu);
    else if (pthread_cond_timedwait(&r->idle, &r->mu, until) != 0)
      break;
  }
  uint32_t left = r->threads;
  pthread_mutex_unlock(&r->mu);
  return left;
}

void cron_registry_free(struct cron_registry *r) {
  if (!r)
    return;
  cron_registry_wait(r, NULL);
  pthread_mutex_lock(&r->mu);
  set_drop_locked(r->set);
  pthread_mutex_unlock(&r->mu);
  for (size_t i = 0; i < r->n_handlers; i++)
    free(r->handlers[i].plugin);
  free(r->handlers);
  free(r->running);
  pthread_cond_destroy(&r->idle);
  pthread_mutex_destroy(&r->mu);
  free(r);
}
