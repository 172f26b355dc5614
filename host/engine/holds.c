/* holds.c — builds held.  An activation of an instance that would run a
 * held build runs none of its code: the instance waits (status waiting,
 * wait_type the hold's reason) until it is woken to look again — when the
 * build is released, or when another build became the newest (an
 * instance under versioning: latest, or one that never ran, then runs
 * that one, and so does one pinned to the held build that ran no step
 * on it).  Who holds a build and why is the host's business (a
 * breaker of crash storms, say); the engine only keeps, per workflow, the
 * builds held, beside its builds under the same lock, so that the
 * activation's look at them is the one build_acquire makes anyway. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "log.h"
#include "util.h"

/* A woken held instance that is still held looks again this long after,
 * should no wake come (a hold this host forgot in a restart, or one a
 * host that took the instance over never had). */
#define HOLD_RECHECK_MS (60 * 60 * 1000)

int64_t engine_hold_recheck_ms(void) { return HOLD_RECHECK_MS; }

static ssize_t find_locked(const wf_reg *wf, const char *hash) {
  for (size_t i = 0; i < wf->n_holds; i++)
    if (!strcmp(wf->holds[i].hash, hash))
      return (ssize_t)i;
  return -1;
}

/* The newest build of wf when it is not b and not held, else NULL
 * (builds_mu held). */
static wf_build *newest_unheld_locked(const wf_reg *wf, const wf_build *b) {
  wf_build *newest = wf->n_builds ? wf->builds[wf->n_builds - 1] : NULL;
  if (!newest || newest == b || !newest->hash ||
      find_locked(wf, newest->hash) >= 0)
    return NULL;
  return newest;
}

wf_build *build_acquire_unless_held(wf_reg *wf, const char *pinned, int unrun,
                                    char **held) {
  *held = NULL;
  wf_build *b = build_acquire(wf, pinned);
  if (!b || !b->hash || !__atomic_load_n(&wf->n_holds, __ATOMIC_ACQUIRE))
    return b;
  pthread_mutex_lock(&wf->builds_mu);
  ssize_t i = find_locked(wf, b->hash);
  /* Pinned to a held build it never ran a step on (a rollback, a fix
   * deployed): nothing in its journal came from that build's code, so
   * it starts on the newest one instead of waiting for the bad one. */
  wf_build *moved = i >= 0 && unrun && pinned && !wf->limits.versioning_latest
                        ? newest_unheld_locked(wf, b)
                        : NULL;
  if (moved) {
    b->running--;
    moved->running++;
    moved->acquired++;
    pthread_mutex_unlock(&wf->builds_mu);
    return moved;
  }
  if (i >= 0)
    *held = xasprintf("%s", wf->holds[i].reason);
  pthread_mutex_unlock(&wf->builds_mu);
  if (*held) {
    build_release(wf, b);
    return NULL;
  }
  return b;
}

int duro_engine_hold_build(duro_engine *e, const char *const *workflows,
                           size_t n, const char *hash, const char *reason) {
  if (!hash || !*hash || !reason || !*reason || strlen(reason) > 100)
    return DURO_E_INVALID_ARGUMENT;
  for (size_t k = 0; k < n; k++) {
    wf_reg *wf = engine_find_workflow(e, workflows[k]);
    if (!wf)
      continue;
    pthread_mutex_lock(&wf->builds_mu);
    ssize_t i = find_locked(wf, hash);
    if (i >= 0) {
      free(wf->holds[i].reason);
      wf->holds[i].reason = xstrdup(reason);
    } else {
      wf->holds = xrealloc(wf->holds, (wf->n_holds + 1) * sizeof *wf->holds);
      wf->holds[wf->n_holds] =
          (build_hold){.hash = xstrdup(hash), .reason = xstrdup(reason)};
      __atomic_store_n(&wf->n_holds, wf->n_holds + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&wf->builds_mu);
  }
  return 0;
}

typedef struct rowid_list {
  int64_t *v;
  size_t n;
} rowid_list;

static void collect(void *ctx, int64_t rowid, const char *workflow) {
  (void)workflow;
  rowid_list *l = ctx;
  l->v = xrealloc(l->v, (l->n + 1) * sizeof *l->v);
  l->v[l->n++] = rowid;
}

int duro_engine_waiting_on(duro_engine *e, const char *reason,
                           void (*fn)(void *ctx, int64_t rowid,
                                      const char *workflow),
                           void *ctx) {
  return journal_waiting_on(e->j, reason, fn, ctx) ? DURO_E_STORAGE : 0;
}

int duro_engine_wake_held(duro_engine *e, const char *reason, size_t *woken) {
  rowid_list l = {0};
  int rc = journal_waiting_on(e->j, reason, collect, &l);
  if (rc == 0)
    for (size_t i = 0; i < l.n; i++)
      engine_instance_poke(e, l.v[i], 1);
  else
    log_error("reading the instances held (%s): %s", reason,
              journal_errmsg(e->j));
  if (woken)
    *woken = rc == 0 ? l.n : 0;
  free(l.v);
  return rc ? DURO_E_STORAGE : 0;
}

int duro_engine_release_build(duro_engine *e, const char *const *workflows,
                              size_t n, const char *hash, size_t *woken) {
  char *reason = NULL;
  for (size_t k = 0; hash && k < n; k++) {
    wf_reg *wf = engine_find_workflow(e, workflows[k]);
    if (!wf)
      continue;
    pthread_mutex_lock(&wf->builds_mu);
    ssize_t i = find_locked(wf, hash);
    if (i >= 0) {
      free(wf->holds[i].hash);
      if (reason)
        free(wf->holds[i].reason);
      else
        reason = wf->holds[i].reason;
      wf->holds[i] = wf->holds[wf->n_holds - 1];
      __atomic_store_n(&wf->n_holds, wf->n_holds - 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&wf->builds_mu);
  }
  if (woken)
    *woken = 0;
  if (!reason)
    return DURO_E_NOT_FOUND;
  /* Instances held for another build for the same reason look again
   * too, and wait on: a spare activation each, none of their code. */
  int rc = duro_engine_wake_held(e, reason, woken);
  free(reason);
  return rc;
}

void holds_free(wf_reg *wf) {
  for (size_t i = 0; i < wf->n_holds; i++) {
    free(wf->holds[i].hash);
    free(wf->holds[i].reason);
  }
  free(wf->holds);
  wf->holds = NULL;
  wf->n_holds = 0;
}
