/* watch.c — waiters for instances to end: what lets a client wait for a
 * result without polling and without a thread per waiter.
 *
 * A watch is a callback in a list per instance (rowid → list, in the
 * engine's `watches` map under `watches_mu`, a lock of its own so a
 * commit thread firing watches never waits for the engine's `mu`).  The
 * threads that store an instance's end call engine_watch_fire once the
 * row is committed: engine_activation_done (an activation ended it),
 * control.c (a terminate of an idle instance), faults.c (a crash ended
 * it).
 *
 * Registration and the end race: a watch is added first and the row read
 * again after, so either that read sees the end or the end's fire sees
 * the watch (it is committed before it fires).
 *
 * Each watch has two holders: the registry (until fired or cancelled) and
 * the caller (until duro_watch_cancel); the last to let go frees it.  The
 * state, under watches_mu, decides between a fire and a cancel: whichever
 * takes a PENDING watch first wins, so fn runs at most once and never
 * after a cancel that returned 0. */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "error.h"
#include "util.h"

enum { WATCH_PENDING = 1, WATCH_FIRED, WATCH_CANCELLED };

struct duro_watch {
  duro_watch_fn fn;
  void *ctx;
  int64_t rowid;
  /* Its instance's list while PENDING; a fired list is detached whole and
   * no longer changes. */
  duro_watch *prev, *next;
  int state; /* watches_mu */
  int refs;  /* watches_mu: the registry's and the caller's */
};

/* Takes a PENDING watch out of its instance's list (watches_mu held). */
static void unlink_locked(duro_engine *e, duro_watch *w) {
  if (w->next)
    w->next->prev = w->prev;
  if (w->prev)
    w->prev->next = w->next;
  else if (w->next)
    idmap_put(&e->watches, w->rowid, w->next);
  else
    idmap_del(&e->watches, w->rowid);
  w->prev = w->next = NULL;
}

/* Drops one hold on w (watches_mu held); returns 1 when w is to be freed. */
static int unref_locked(duro_watch *w) { return --w->refs == 0; }

/* 1 when the row read again shows the instance ended (or gone: its rowid
 * deleted by retention, or taken by another instance). */
static int ended_since(duro_engine *e, int64_t rowid, const char *workflow,
                       const char *id, int *rc) {
  journal_instance in = {0};
  *rc = journal_instance_get_rowid(e->j, rowid, &in);
  int ended = 0;
  if (*rc == DURO_E_NOT_FOUND) {
    *rc = 0;
    ended = 1;
  } else if (*rc == 0) {
    ended = duro_status_ended(in.status) ||
            strcmp(in.workflow, workflow) != 0 || strcmp(in.id, id) != 0;
  }
  journal_instance_clear(&in);
  return ended;
}

int duro_instance_watch(duro_engine *e, const char *workflow, const char *id,
                        duro_watch_fn fn, void *ctx, duro_watch **out) {
  *out = NULL;
  journal_instance in = {0};
  int rc = engine_instance_get(e, workflow, id, &in);
  if (rc == 0 && duro_status_ended(in.status))
    rc = DURO_WATCH_ENDED;
  int64_t rowid = in.rowid, owner = in.owner;
  journal_instance_clear(&in);
  if (rc)
    return rc;

  duro_watch *w = xcalloc(1, sizeof *w);
  *w = (duro_watch){
      .fn = fn, .ctx = ctx, .rowid = rowid, .state = WATCH_PENDING, .refs = 2};
  pthread_mutex_lock(&e->watches_mu);
  duro_watch *head = idmap_get(&e->watches, rowid);
  w->next = head;
  if (head)
    head->prev = w;
  idmap_put(&e->watches, rowid, w);
  pthread_mutex_unlock(&e->watches_mu);
  /* Another host runs it: that host tells this one of its end. */
  if (owner != journal_host(e->j))
    engine_watch_elsewhere(e, owner, rowid);

  /* An end committed between the read above and the registration fired
   * without w: read again. */
  int ended = ended_since(e, rowid, workflow, id, &rc);
  if (!ended && rc == 0) {
    *out = w;
    return 0;
  }
  pthread_mutex_lock(&e->watches_mu);
  if (w->state != WATCH_PENDING) {
    /* Fired meanwhile: fn runs (or ran) once, as for any watch. */
    pthread_mutex_unlock(&e->watches_mu);
    *out = w;
    return 0;
  }
  unlink_locked(e, w);
  pthread_mutex_unlock(&e->watches_mu);
  free(w);
  return rc ? rc : DURO_WATCH_ENDED;
}

int duro_watch_cancel(duro_engine *e, duro_watch *w) {
  pthread_mutex_lock(&e->watches_mu);
  int fired = w->state != WATCH_PENDING;
  if (!fired) {
    unlink_locked(e, w);
    w->state = WATCH_CANCELLED;
    w->refs--; /* the registry's */
  }
  int gone = unref_locked(w);
  pthread_mutex_unlock(&e->watches_mu);
  if (gone)
    free(w);
  return fired;
}

void engine_watch_fire(duro_engine *e, int64_t rowid, const char *status) {
  engine_remote_watches_fire(e, rowid, status);
  pthread_mutex_lock(&e->watches_mu);
  duro_watch *list = e->watches.len ? idmap_del(&e->watches, rowid) : NULL;
  for (duro_watch *w = list; w; w = w->next)
    w->state = WATCH_FIRED;
  pthread_mutex_unlock(&e->watches_mu);
  /* The detached list no longer changes; each watch lives until its
   * registry hold is dropped here. */
  while (list) {
    duro_watch *w = list;
    list = w->next;
    w->fn(w->ctx, status);
    pthread_mutex_lock(&e->watches_mu);
    int gone = unref_locked(w);
    pthread_mutex_unlock(&e->watches_mu);
    if (gone)
      free(w);
  }
}

static void free_list(void *ctx, int64_t key, void *val) {
  (void)ctx, (void)key;
  for (duro_watch *w = val, *next; w; w = next) {
    next = w->next;
    free(w);
  }
}

void engine_watches_free(duro_engine *e) {
  idmap_each(&e->watches, free_list, NULL);
  idmap_free(&e->watches);
}
