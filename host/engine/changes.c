/* changes.c — watchers of an instance's rows: what lets a stream of its
 * events follow it without polling and without a thread per follower.
 *
 * watch.c tells waiters that an instance ended; this tells followers
 * that something of it was committed.  The journal calls
 * engine_changes_committed with every batch once it is on disk (its
 * commit hook); each op about an instance calls that instance's
 * followers, who read the journal again from what they sent last: a
 * call says only "look again", so calls that coalesce lose nothing.
 * With no follower a commit costs one atomic load.  A follower's fn runs
 * under changes_mu, so once duro_changes_cancel returned it never runs
 * again: it must be quick (a wake of a loop) and take no engine lock.
 *
 * Commits of another host of a shared store are not seen here: a
 * follower of one of its instances polls (doc/reference/http.md). */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "error.h"
#include "util.h"

struct duro_changes {
  duro_changes_fn fn;
  void *ctx;
  int64_t rowid;
  duro_changes *prev, *next; /* its instance's list (changes_mu) */
};

int duro_instance_changes(duro_engine *e, const char *workflow, const char *id,
                          duro_changes_fn fn, void *ctx, duro_changes **out) {
  *out = NULL;
  journal_instance in = {0};
  int rc = engine_instance_get(e, workflow, id, &in);
  if (rc)
    return rc;
  duro_changes *c = xcalloc(1, sizeof *c);
  *c = (duro_changes){.fn = fn, .ctx = ctx, .rowid = in.rowid};
  journal_instance_clear(&in);
  pthread_mutex_lock(&e->changes_mu);
  c->next = idmap_get(&e->changes, c->rowid);
  if (c->next)
    c->next->prev = c;
  idmap_put(&e->changes, c->rowid, c);
  __atomic_add_fetch(&e->n_changes, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&e->changes_mu);
  *out = c;
  return 0;
}

void duro_changes_cancel(duro_engine *e, duro_changes *c) {
  if (!c)
    return;
  pthread_mutex_lock(&e->changes_mu);
  if (c->next)
    c->next->prev = c->prev;
  if (c->prev)
    c->prev->next = c->next;
  else if (c->next)
    idmap_put(&e->changes, c->rowid, c->next);
  else
    idmap_del(&e->changes, c->rowid);
  __atomic_sub_fetch(&e->n_changes, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&e->changes_mu);
  free(c);
}

/* The ops that change what an instance's stream shows. */
static int about_an_instance(journal_op_kind k) {
  switch (k) {
  case JOP_INSTANCE_SET:
  case JOP_STEP_PUT:
  case JOP_STEPS_DISCARD:
  case JOP_ATTEMPT_PUT:
  case JOP_EVENT_INSERT:
  case JOP_INSTANCE_RESTARTED:
    return 1;
  default:
    return 0;
  }
}

void engine_changes_committed(void *ctx, const journal_batch *b) {
  duro_engine *e = ctx;
  engine_drivers_committed(e, b); /* the drivers that observe commits */
  if (!__atomic_load_n(&e->n_changes, __ATOMIC_ACQUIRE))
    return;
  pthread_mutex_lock(&e->changes_mu);
  int64_t last = 0; /* a batch's ops come mostly by instance */
  for (size_t i = 0; i < b->n; i++) {
    const journal_op *op = &b->ops[i];
    if (!about_an_instance(op->kind) || op->rowid == last)
      continue;
    last = op->rowid;
    for (duro_changes *c = idmap_get(&e->changes, op->rowid); c; c = c->next)
      c->fn(c->ctx);
  }
  pthread_mutex_unlock(&e->changes_mu);
}

void engine_changes_free(duro_engine *e) {
  idmap_free(&e->changes); /* followers cancel theirs before the close */
  pthread_mutex_destroy(&e->changes_mu);
}
