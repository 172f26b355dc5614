/* engine_admit.c — admission per plugin of the step callbacks that run
 * on the engine's own threads (a plugin with workers: 0).
 *
 * Such a callback holds its engine thread, and every fiber on it, until
 * it returns: callbacks blocked on a hung dependency would take every
 * thread in turn, and no other plugin would run.  So the callbacks of
 * one plugin hold at most `limit` threads at once (its workflows share
 * the bound); one past it parks its fiber, which takes no share of its
 * thread (the thread runs other activations), until one of them returns
 * and hands it its place, first come first served.  A plugin at its
 * bound none of whose callbacks returned for ADMIT_WARN_MS is logged
 * once, until one returns: an operator sees why its instances wait.
 *
 * With room, a callback passes with one uncontended lock of its own
 * plugin's (the engine's mu only when it must wait or hand over). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "log.h"
#include "util.h"

#define ADMIT_WARN_MS 10000

/* A fiber waiting for a place, on its own stack while it waits. */
typedef struct admit_waiter {
  engine_task *t;
  worker *w;
  entry *ent;
  /* 0 while waiting, 1 handed a place, -1 to look at its step boundary
   * (the engine stops, or a pause or terminate came) */
  int outcome;
  struct admit_waiter *next;
} admit_waiter;

struct engine_admit {
  char *plugin;
  uint32_t limit;
  pthread_mutex_t mu; /* inside under the engine's mu (lock order) */
  uint32_t inside;    /* callbacks holding a thread now (mu) */
  uint32_t waiting;   /* on the FIFO (mu) */
  admit_waiter *head, *tail;
  /* engine_mono_ms when it reached its bound, or a callback last
   * returned at it (mu); warned: logged since (mu). */
  int64_t full_since;
  int warned;
};

engine_admit *engine_admit_for(duro_engine *e, const char *plugin,
                               uint32_t threads) {
  for (size_t i = 0; i < e->n_admits; i++)
    if (!strcmp(e->admits[i]->plugin, plugin))
      return e->admits[i];
  /* Half the threads by default; never all of them: another plugin
   * always has one. */
  uint32_t n = e->opt.workers;
  uint32_t limit = threads ? threads : n / 2;
  if (n > 1 && limit > n - 1)
    limit = n - 1;
  engine_admit *g = xcalloc(1, sizeof *g);
  g->plugin = xstrdup(plugin);
  g->limit = limit ? limit : 1;
  pthread_mutex_init(&g->mu, NULL);
  e->admits = xrealloc(e->admits, (e->n_admits + 1) * sizeof *e->admits);
  e->admits[e->n_admits++] = g;
  return g;
}

void engine_admits_free(duro_engine *e) {
  for (size_t i = 0; i < e->n_admits; i++) {
    pthread_mutex_destroy(&e->admits[i]->mu);
    free(e->admits[i]->plugin);
    free(e->admits[i]);
  }
  free(e->admits);
  e->admits = NULL;
  e->n_admits = 0;
}

/* A place taken (g->mu held). */
static void take_locked(duro_engine *e, engine_admit *g) {
  if (++g->inside == g->limit)
    g->full_since = engine_mono_ms(e);
}

int engine_admit_enter(duro_engine *e, engine_admit *g, entry *ent) {
  engine_task *t = engine_current_task();
  pthread_mutex_lock(&g->mu);
  /* Without a fiber (none could be had) it cannot park: it runs. */
  if (g->inside < g->limit || !t) {
    take_locked(e, g);
    pthread_mutex_unlock(&g->mu);
    return ADMIT_IN;
  }
  pthread_mutex_unlock(&g->mu);
  admit_waiter me = {.t = t, .w = engine_thread_worker(), .ent = ent};
  pthread_mutex_lock(&e->mu);
  pthread_mutex_lock(&g->mu);
  /* A request sets its flag under mu, then wakes a waiter: looked at
   * here under mu, none is missed. */
  int stopping = e->stopping || ent->pause_req || ent->terminate_req;
  int parked = 0;
  if (!stopping && g->inside < g->limit) {
    take_locked(e, g);
  } else if (!stopping) {
    if (g->tail)
      g->tail->next = &me;
    else
      g->head = &me;
    g->tail = &me;
    g->waiting++;
    engine_task_hold_locked(t);
    parked = 1;
  }
  pthread_mutex_unlock(&g->mu);
  pthread_mutex_unlock(&e->mu);
  if (stopping)
    return ADMIT_BOUNDARY;
  if (!parked)
    return ADMIT_IN;
  int orphaned = engine_task_held_yield(t);
  if (orphaned) {
    if (me.outcome == 1)
      engine_admit_leave(e, g); /* its place goes to the next */
    return ADMIT_ORPHANED;
  }
  return me.outcome == 1 ? ADMIT_WAITED : ADMIT_BOUNDARY;
}

/* The first waiter, off the FIFO (g->mu held). */
static admit_waiter *pop_locked(engine_admit *g) {
  admit_waiter *w = g->head;
  if (w) {
    if (!(g->head = w->next))
      g->tail = NULL;
    g->waiting--;
  }
  return w;
}

void engine_admit_leave(duro_engine *e, engine_admit *g) {
  pthread_mutex_lock(&g->mu);
  g->full_since = engine_mono_ms(e);
  g->warned = 0;
  if (!g->head) {
    g->inside--;
    pthread_mutex_unlock(&g->mu);
    return;
  }
  pthread_mutex_unlock(&g->mu);
  /* The hand-over makes the waiter ready on its thread: the engine's mu,
   * taken first (the watchdog may be orphaning that thread's tasks). */
  pthread_mutex_lock(&e->mu);
  pthread_mutex_lock(&g->mu);
  admit_waiter *next = pop_locked(g);
  if (next)
    next->outcome = 1; /* the place passes on: inside unchanged */
  else
    g->inside--;
  pthread_mutex_unlock(&g->mu);
  if (next)
    engine_task_release_locked(next->t);
  pthread_mutex_unlock(&e->mu);
}

void engine_admits_stop_locked(duro_engine *e) {
  for (size_t i = 0; i < e->n_admits; i++) {
    engine_admit *g = e->admits[i];
    pthread_mutex_lock(&g->mu);
    admit_waiter *w;
    while ((w = pop_locked(g))) {
      w->outcome = -1;
      engine_task_release_locked(w->t);
    }
    pthread_mutex_unlock(&g->mu);
  }
}

void engine_admit_wake_locked(duro_engine *e, entry *ent) {
  for (size_t i = 0; i < e->n_admits; i++) {
    engine_admit *g = e->admits[i];
    pthread_mutex_lock(&g->mu);
    admit_waiter *prev = NULL, *x = g->head;
    while (x && x->ent != ent)
      prev = x, x = x->next;
    if (x) {
      if (prev)
        prev->next = x->next;
      else
        g->head = x->next;
      if (g->tail == x)
        g->tail = prev;
      g->waiting--;
      x->outcome = -1;
      engine_task_release_locked(x->t);
    }
    pthread_mutex_unlock(&g->mu);
    if (x)
      return;
  }
}

size_t engine_admit_orphans_locked(duro_engine *e, worker *w,
                                   engine_task ***out) {
  size_t n = 0, cap = 0;
  *out = NULL;
  for (size_t i = 0; i < e->n_admits; i++) {
    engine_admit *g = e->admits[i];
    pthread_mutex_lock(&g->mu);
    for (admit_waiter **pp = &g->head, *prev = NULL; *pp;) {
      admit_waiter *x = *pp;
      if (x->w != w) {
        prev = x;
        pp = &x->next;
        continue;
      }
      *pp = x->next;
      if (g->tail == x)
        g->tail = prev;
      g->waiting--;
      x->outcome = -1;
      if (n == cap)
        *out = xrealloc(*out, (cap = cap ? 2 * cap : 8) * sizeof **out);
      (*out)[n++] = x->t;
    }
    pthread_mutex_unlock(&g->mu);
  }
  return n;
}

void engine_admits_watch(duro_engine *e) {
  int64_t now = engine_mono_ms(e);
  for (size_t i = 0; i < e->n_admits; i++) {
    engine_admit *g = e->admits[i];
    pthread_mutex_lock(&g->mu);
    int warn = !g->warned && g->inside >= g->limit &&
               now - g->full_since >= ADMIT_WARN_MS;
    uint32_t inside = g->inside, waiting = g->waiting;
    g->warned |= warn;
    pthread_mutex_unlock(&g->mu);
    if (warn)
      log_warn("plugin \"%s\": its step callbacks hold %u engine threads, "
               "its bound (plugins[].concurrency with workers: 0), and none "
               "returned for %d s: its other callbacks wait (%u now), other "
               "plugins run on the other threads",
               g->plugin, inside, ADMIT_WARN_MS / 1000, waiting);
  }
}
