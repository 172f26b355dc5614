/* control.c — control operations on instances: pause, resume, terminate,
 * restart (from a step, with rollbacks or without), delete and events,
 * and the requests an activation or a crash handed over.
 *
 * An operation on an idle instance takes a CONTROL entry (the instance's
 * row is then the operation's to rewrite), changes the row, and ends the
 * entry with the status it left.  On an ACTIVE instance a pause or
 * terminate sets a flag the activation reads at its next step boundary,
 * and is persisted in the row's `control` column so a crash cannot lose an
 * acknowledged request. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_internal.h"
#include "error.h"
#include "log.h"
#include "trace_ids.h"
#include "util.h"

/* Takes a CONTROL entry for an instance, waiting out other control
 * operations.  Returns NULL with *active set when an activation runs it. */
static entry *control_begin(duro_engine *e, int64_t rowid, entry **active) {
  *active = NULL;
  for (;;) {
    entry *ent = idmap_get(&e->entries, rowid);
    if (!ent)
      return entry_take(e, rowid, ENTRY_CONTROL);
    if (ent->state == ENTRY_ACTIVE) {
      *active = ent;
      return NULL;
    }
    if (ent->state == ENTRY_QUEUED || ent->state == ENTRY_RETRY) {
      /* It was due to run: remember that for control_end. */
      runnable_remove(e, ent);
      ent->state = ENTRY_CONTROL;
      ent->rerun = 1;
      return ent;
    }
    pthread_cond_wait(&e->changed, &e->mu);
  }
}

/* Ends a control operation given the status now stored: a queued
 * instance runs, a waiting one runs if something woke it meanwhile, any
 * other is idle. */
static void control_end(duro_engine *e, entry *ent, duro_status status) {
  /* A request an activation handed over (apply_control) that this
   * operation overtook still gets applied, by a worker. */
  if (status == DURO_STATUS_QUEUED ||
      (status == DURO_STATUS_WAITING && ent->rerun) || ent->apply_control) {
    ent->rerun = 0;
    runnable_push(e, ent);
    pthread_cond_broadcast(&e->changed);
  } else {
    entry_drop(e, ent);
  }
}

int engine_instance_get(duro_engine *e, const char *workflow, const char *id,
                        journal_instance *in) {
  if (!engine_find_workflow(e, workflow))
    return DURO_E_WORKFLOW_NOT_FOUND;
  if (!duro_instance_id_valid(id))
    return DURO_E_INVALID_ID;
  return journal_instance_get(e->j, workflow, id, in);
}

/* Writes the row, which was `from_status`, with the drivers' ops for the
 * change (a lifecycle message) in the same commit. */
static int commit_row(duro_engine *e, journal_instance *in, int clear_control,
                      duro_status from_status) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_INSTANCE_SET);
  op->inst = in;
  op->clear_control = clear_control;
  wf_reg *wf = engine_find_workflow(e, in->workflow);
  engine_drivers_instance_changed(e, wf, &b, in, from_status, in->started_ms,
                                  duro_clock_now(e->clock));
  engine_retention_ops(wf, &b, in, from_status);
  int rc = journal_commit(e->j, &b);
  if (rc == 0)
    engine_batch_woke(e, &b); /* the drivers' events in it */
  journal_batch_free(&b);
  return rc;
}

static int persist_control(duro_engine *e, int64_t rowid, int control) {
  journal_instance in = {.rowid = rowid, .control = control};
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, control ? JOP_INSTANCE_CONTROL
                                                 : JOP_INSTANCE_CONTROL_CLEAR);
  op->rowid = rowid;
  op->inst = &in;
  int rc = journal_commit(e->j, &b);
  journal_batch_free(&b);
  return rc;
}

/* Queues the instance for an activation that carries out its persisted
 * request (a terminate's or a restart's rollbacks). */
static int requeue_row(duro_engine *e, journal_instance *in) {
  duro_status old = in->status;
  in->status = DURO_STATUS_QUEUED;
  in->wake_ms = JOURNAL_NONE;
  int rc = commit_row(e, in, 0, old);
  if (rc)
    in->status = old;
  return rc;
}

/* Pause or terminate an instance that no activation runs (the caller holds
 * its CONTROL entry, or is recovery before any worker starts). */
static int control_row(duro_engine *e, journal_instance *in, int control) {
  int64_t now = duro_clock_now(e->clock);
  if (duro_status_ended(in->status))
    return control == JOURNAL_CONTROL_PAUSE ? DURO_E_CANNOT_PAUSE
                                            : DURO_E_CANNOT_TERMINATE;
  if (journal_control_is_restart(in->control)) {
    /* A restart whose rollbacks run: a pause would drop the request
     * (the instance would resume on the journal it was to leave); a
     * terminate ends it there.  Left by a crash: it goes on. */
    if (control == JOURNAL_CONTROL_PAUSE)
      return DURO_E_CANNOT_PAUSE;
    if (journal_control_is_restart(control))
      return requeue_row(e, in);
  }
  /* A terminate acknowledged earlier and not yet applied wins over a
   * pause: the instance ends rather than waits. */
  if (in->control == JOURNAL_CONTROL_TERMINATE ||
      in->control == JOURNAL_CONTROL_TERMINATE_ROLLBACK)
    control = in->control;
  duro_status old = in->status;
  if (control == JOURNAL_CONTROL_TERMINATE_ROLLBACK) {
    /* Its rollbacks first: an activation replays run() to learn them,
     * runs them and ends it terminated (step_rollback.c); the persisted
     * request tells it so, across crashes too. */
    int rc =
        in->control == control ? 0 : persist_control(e, in->rowid, control);
    if (rc)
      return rc;
    in->control = control;
    return requeue_row(e, in);
  }
  if (control == JOURNAL_CONTROL_PAUSE) {
    if (old == DURO_STATUS_PAUSED)
      return persist_control(e, in->rowid, 0);
    in->status = DURO_STATUS_PAUSED;
    in->paused_ms = now;
    in->wake_ms = JOURNAL_NONE; /* frozen: waiting steps keep theirs */
  } else {
    in->status = DURO_STATUS_TERMINATED;
    in->ended_ms = now;
    in->wake_ms = JOURNAL_NONE;
  }
  int rc = commit_row(e, in, 1, old);
  if (rc)
    in->status = old;
  else if (control == JOURNAL_CONTROL_TERMINATE)
    engine_watch_fire(e, in->rowid, duro_status_name(DURO_STATUS_TERMINATED));
  return rc;
}

/* A change to the stored row of an instance a CONTROL entry holds: it may
 * rewrite `in` and commit; its return is the operation's. */
typedef int (*row_change_fn)(duro_engine *e, journal_instance *in, void *arg);

/* Reads the row of the instance `ent` holds, applies `change`, and ends the
 * control operation with the status the row was left in. */
static int change_held_row(duro_engine *e, entry *ent, row_change_fn change,
                           void *arg) {
  journal_instance in = {0};
  int rc = journal_instance_get_rowid(e->j, ent->rowid, &in);
  int read = rc == 0;
  if (read && in.owner != journal_host(e->j)) {
    read = 0; /* handed to another host since its owner was read */
    rc = CONTROL_MOVED;
  } else if (read)
    rc = change(e, &in, arg);
  pthread_mutex_lock(&e->mu);
  control_end(e, ent, read ? in.status : ENGINE_STATUS_NONE);
  pthread_mutex_unlock(&e->mu);
  journal_instance_clear(&in);
  return rc;
}

static int request_row(duro_engine *e, journal_instance *in, void *arg) {
  return control_row(e, in, *(int *)arg);
}

/* A request handed over by an activation or left by a crash: one for an
 * instance that ended meanwhile is dropped. */
static int handed_request_row(duro_engine *e, journal_instance *in, void *arg) {
  int rc = control_row(e, in, *(int *)arg);
  if (rc == DURO_E_CANNOT_PAUSE || rc == DURO_E_CANNOT_TERMINATE)
    rc = persist_control(e, in->rowid, 0);
  return rc;
}

/* Applies a pause or terminate for the CONTROL entry `ent` and ends the
 * control operation. */
static int control_apply(duro_engine *e, entry *ent, int control) {
  int rc = change_held_row(e, ent, handed_request_row, &control);
  return rc == CONTROL_MOVED ? 0 : rc; /* its new owner's to apply */
}

void control_on_entry(duro_engine *e, entry *ent, int control) {
  int rc = control_apply(e, ent, control);
  if (rc)
    log_error("applying a %s request: %s",
              control == JOURNAL_CONTROL_PAUSE ? "pause" : "terminate",
              duro_err_str(rc));
}

int apply_control_idle(duro_engine *e, int64_t rowid, int control) {
  entry *active;
  pthread_mutex_lock(&e->mu);
  entry *ent = control_begin(e, rowid, &active);
  pthread_mutex_unlock(&e->mu);
  if (!ent)
    return 0; /* an activation will see the control column */
  return control_apply(e, ent, control);
}

/* Requests on one instance run one at a time, from reading its state to
 * persisting the request: two that arrive together (a pause and a resume)
 * are stored in the order they are acknowledged. */
static pthread_mutex_t *control_stripe(duro_engine *e, int64_t rowid) {
  size_t n = sizeof e->control_mu / sizeof *e->control_mu;
  return &e->control_mu[(uint64_t)rowid % n];
}

/* Takes instance `rowid` for a control operation: returns with its stripe
 * and mu held and either *ent (its CONTROL entry) or *active (an
 * activation runs it) set.  The caller lets go of the stripe with
 * control_leave. */
static void control_enter(duro_engine *e, int64_t rowid, entry **ent,
                          entry **active) {
  pthread_mutex_lock(control_stripe(e, rowid));
  pthread_mutex_lock(&e->mu);
  *ent = control_begin(e, rowid, active);
}

static int control_leave(duro_engine *e, int64_t rowid, int rc) {
  pthread_mutex_unlock(control_stripe(e, rowid));
  return rc;
}

/* A callback handed to a worker process before the flag was set may not
 * have begun there yet (its CALL on its way): its REVOKED bit is set
 * beside its BEGAN bit, and whichever the word had first wins, so the
 * request is acknowledged at once and no step begins after it (a
 * callback that began first runs on; the request takes effect at its
 * step's end).  The shared word is written under mu, while its
 * registration stands. */
static void revoke_dispatched(duro_engine *e, int64_t rowid) {
  pthread_mutex_lock(&e->mu);
  entry *x = idmap_get(&e->entries, rowid);
  for (uint32_t i = 0; x && i < x->n_dispatch; i++)
    __atomic_fetch_or(x->dispatch[i].word, x->dispatch[i].revoke,
                      __ATOMIC_ACQ_REL);
  pthread_mutex_unlock(&e->mu);
}

/* A pause or terminate for a running instance: set for the activation
 * (it reads it at its next step boundary) and persisted, so a crash
 * cannot lose it; a failed write takes the flag back.  mu held on entry,
 * not on return. */
static int request_active(duro_engine *e, int64_t rowid, entry *active,
                          int control) {
  if (control == JOURNAL_CONTROL_PAUSE &&
      (active->terminate_req ||
       __atomic_load_n(&active->restart_req, __ATOMIC_ACQUIRE))) {
    pthread_mutex_unlock(&e->mu);
    return DURO_E_CANNOT_PAUSE;
  }
  if (control == JOURNAL_CONTROL_TERMINATE_ROLLBACK)
    __atomic_store_n(&active->rollback_req, 1, __ATOMIC_RELEASE);
  int *flag = control == JOURNAL_CONTROL_PAUSE ? &active->pause_req
                                               : &active->terminate_req;
  int before = __atomic_exchange_n(flag, 1, __ATOMIC_ACQ_REL);
  /* waiting for its plugin's admission: it takes the request now */
  engine_admit_wake_locked(e, active);
  pthread_mutex_unlock(&e->mu);
  int rc = persist_control(e, rowid, control);
  if (rc)
    __atomic_store_n(flag, before, __ATOMIC_RELEASE);
  else
    revoke_dispatched(e, rowid);
  return rc;
}

/* Finds the instance of a control request `op` (CONTROL_OP_*) into
 * *rowid: 0 when it runs here (or on no host: it does now); 1 when the
 * request is answered already, with *rc: not found, or another host runs
 * it and *rc is that host's answer (or why it could not be told). */
static int find_or_forward(duro_engine *e, const char *workflow, const char *id,
                           int op, const char *from, uint32_t count, char **why,
                           int64_t *rowid, int *rc) {
  journal_instance in = {0};
  *rc = engine_instance_get(e, workflow, id, &in);
  *rowid = in.rowid;
  int64_t owner = in.owner;
  journal_instance_clear(&in);
  if (*rc)
    return 1;
  /* The row says this host runs it: it does (it moves away only with a
   * lost lease, and then nothing is written anyway). */
  if (owner == journal_host(e->j))
    return 0;
  int where = engine_control_elsewhere(e, *rowid, &owner);
  if (where == 0)
    return 0;
  if (where < 0) {
    *rc = where;
    return 1;
  }
  *rc = engine_forward_control(e, *rowid, owner, op, workflow, id, from, count,
                               why);
  return *rc != FORWARD_HERE; /* taken over here meanwhile: do it here */
}

/* A terminate of a running instance is answered once its activation
 * took it (the callback in flight is given up on at once, so that is
 * soon): an activation past its last step may instead have completed or
 * errored first, its final commit landing after the request was
 * persisted, and then the answer must say so rather than claim a
 * terminate that did not happen.  After 2 s (run() busy outside any
 * step) the persisted request stands and the answer is 0. */
static int settle_terminate(duro_engine *e, const char *workflow,
                            const char *id) {
  for (int i = 0; i < 2000; i++) {
    journal_instance in = {0};
    if (engine_instance_get(e, workflow, id, &in) != 0)
      return 0;
    duro_status st = in.status;
    journal_instance_clear(&in);
    if (st == DURO_STATUS_TERMINATED)
      return 0;
    if (duro_status_ended(st))
      return DURO_E_CANNOT_TERMINATE;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  return 0;
}

static int request_control_once(duro_engine *e, const char *workflow,
                                const char *id, int control, int settle) {
  int64_t rowid;
  entry *ent, *active;
  int rc;
  int op = control == JOURNAL_CONTROL_PAUSE ? CONTROL_OP_PAUSE
           : control == JOURNAL_CONTROL_TERMINATE
               ? CONTROL_OP_TERMINATE
               : CONTROL_OP_TERMINATE_ROLLBACK;
  if (find_or_forward(e, workflow, id, op, NULL, 0, NULL, &rowid, &rc))
    return rc;
  control_enter(e, rowid, &ent, &active);
  if (active) {
    rc = request_active(e, rowid, active, control);
    control_leave(e, rowid, rc);
    /* Do not wait for the running callback (it may hang): give up on it
     * now, and the release applies the terminate. */
    if (rc == 0 && control != JOURNAL_CONTROL_PAUSE) {
      engine_abandon_entry(e, active);
      if (settle)
        rc = settle_terminate(e, workflow, id);
    }
    return rc;
  }
  pthread_mutex_unlock(&e->mu);
  return control_leave(e, rowid,
                       change_held_row(e, ent, request_row, &control));
}

/* An operation that found its instance handed to another host asks
 * again: the owner it reads now is that host, which it forwards to. */
#define AGAIN_IF_MOVED(call)                                                   \
  do {                                                                         \
    int again_rc_;                                                             \
    for (int again_ = 0; again_ < 3; again_++)                                 \
      if ((again_rc_ = (call)) != CONTROL_MOVED)                               \
        return again_rc_;                                                      \
    return DURO_E_HOST_UNAVAILABLE;                                            \
  } while (0)

static int request_control(duro_engine *e, const char *workflow, const char *id,
                           int control, int settle) {
  AGAIN_IF_MOVED(request_control_once(e, workflow, id, control, settle));
}

int duro_instance_pause(duro_engine *e, const char *workflow, const char *id) {
  return request_control(e, workflow, id, JOURNAL_CONTROL_PAUSE, 1);
}

int duro_instance_terminate(duro_engine *e, const char *workflow,
                            const char *id) {
  return request_control(e, workflow, id, JOURNAL_CONTROL_TERMINATE, 1);
}

int duro_instance_terminate_rollback(duro_engine *e, const char *workflow,
                                     const char *id) {
  /* answered once requested: its rollbacks may take a while */
  return request_control(e, workflow, id, JOURNAL_CONTROL_TERMINATE_ROLLBACK,
                         0);
}

int engine_terminate_nowait(duro_engine *e, const char *workflow,
                            const char *id) {
  return request_control(e, workflow, id, JOURNAL_CONTROL_TERMINATE, 0);
}

/* The build instance `in` is pinned to, held (it is not retired while
 * held), loaded by the host first when its workflow no longer has it: an
 * ended instance pins nothing, so its build may have been unloaded since.
 * Nothing is held for a workflow under versioning: latest, or an instance
 * pinned to no build.  Returns 0, or DURO_E_NOT_FOUND with why in err. */
static int hold_pinned(duro_engine *e, const journal_instance *in, wf_reg **wf,
                       wf_build **held, char *err, size_t errlen) {
  *held = NULL;
  *wf = engine_find_workflow(e, in->workflow);
  if (!*wf || (*wf)->limits.versioning_latest || !in->build)
    return 0;
  *held = build_acquire(*wf, in->build);
  if (*held)
    return 0;
  if (!e->opt.load_build)
    snprintf(err, errlen, "it is not loaded");
  else if (e->opt.load_build(e->opt.ctx, in->workflow, in->build, err,
                             errlen) == 0)
    *held = build_acquire(*wf, in->build);
  return *held ? 0 : DURO_E_NOT_FOUND;
}

static int resume_row(duro_engine *e, journal_instance *in, void *arg) {
  (void)arg;
  if (in->status != DURO_STATUS_PAUSED)
    return DURO_E_CANNOT_RESUME;
  /* Paused for want of its build (build.unavailable): the host loads it
   * now if it is back in the build store.  If not, the run pauses again
   * saying so.  A paused instance keeps its pin, so the build is not
   * retired before the run takes it. */
  wf_reg *wf;
  wf_build *held;
  char err[1024] = "";
  if (hold_pinned(e, in, &wf, &held, err, sizeof err) != 0)
    log_warn("%s/%s: resumed without its build %s: %s", in->workflow, in->id,
             in->build, err);
  build_release(wf, held);
  int64_t now = duro_clock_now(e->clock);
  journal_batch b = {0};
  /* Sleeps and timeouts were frozen while paused: move them forward by
   * the pause's length, then let an activation re-derive the wake. */
  if (in->paused_ms != JOURNAL_NONE && now > in->paused_ms) {
    journal_op *op = journal_batch_add(&b, JOP_STEPS_SHIFT_WAKE);
    op->rowid = in->rowid;
    op->from_seq = now - in->paused_ms;
  }
  in->status = DURO_STATUS_QUEUED;
  in->paused_ms = JOURNAL_NONE;
  in->wake_ms = JOURNAL_NONE;
  /* A pause for a diverged replay kept its error; resuming clears it. */
  free(in->error);
  in->error = NULL;
  journal_op *set = journal_batch_add(&b, JOP_INSTANCE_SET);
  set->inst = in;
  set->clear_control = 1;
  int rc = journal_commit(e->j, &b);
  journal_batch_free(&b);
  if (rc)
    in->status = DURO_STATUS_PAUSED;
  return rc;
}

static int resume_once(duro_engine *e, const char *workflow, const char *id) {
  int64_t rowid;
  entry *ent, *active;
  int rc;
  if (find_or_forward(e, workflow, id, CONTROL_OP_RESUME, NULL, 0, NULL, &rowid,
                      &rc))
    return rc;
  control_enter(e, rowid, &ent, &active);
  if (active) {
    /* waitingForPause: withdraw the request before it takes effect (a
     * pending terminate stays persisted) */
    int pending = __atomic_exchange_n(&active->pause_req, 0, __ATOMIC_ACQ_REL);
    int terminating = active->terminate_req;
    pthread_mutex_unlock(&e->mu);
    if (!pending)
      return control_leave(e, rowid, DURO_E_CANNOT_RESUME);
    rc = persist_control(e, rowid, terminating ? JOURNAL_CONTROL_TERMINATE : 0);
    if (rc)
      __atomic_store_n(&active->pause_req, 1, __ATOMIC_RELEASE);
    return control_leave(e, rowid, rc);
  }
  pthread_mutex_unlock(&e->mu);
  return control_leave(e, rowid, change_held_row(e, ent, resume_row, NULL));
}

int duro_instance_resume(duro_engine *e, const char *workflow, const char *id) {
  AGAIN_IF_MOVED(resume_once(e, workflow, id));
}

typedef struct restart_from {
  const char *name; /* NULL: from the top */
  uint32_t count;
  int rollback; /* the rollbacks of the steps it discards run first */
  char **why;   /* may be NULL: receives why it cannot be restarted */
} restart_from;

/* Only an ended instance is restarted: one that runs, waits or is paused
 * has a run in progress, and a restart would race it. */
static char *not_ended_reason(duro_status status) {
  return xasprintf("instance is %s; only an ended instance (complete, "
                   "errored, terminated) can be restarted",
                   duro_status_name(status));
}

/* "the journal has no step "x"#2; its steps: "a"#1, "b"#1", at most 20. */
static char *no_such_step_reason(const char *key, const journal_step *steps,
                                 size_t n) {
  char *text =
      n ? xasprintf("the journal has no step %s; its steps:", key)
        : xasprintf("the journal has no step %s; it has no steps", key);
  size_t shown = n < 20 ? n : 20;
  for (size_t i = 0; i < shown; i++) {
    char *longer = xasprintf("%s%s \"%s\"#%u", text, i ? "," : "",
                             steps[i].name, steps[i].count);
    free(text);
    text = longer;
  }
  if (n > shown) {
    char *longer = xasprintf("%s and %zu more", text, n - shown);
    free(text);
    text = longer;
  }
  return text;
}

/* A restart from a step replays the steps before it: on the build they
 * ran on, which must be had (held until the restart's pin is stored).
 * *held receives it, or NULL when the workflow needs none. */
static int restart_build(duro_engine *e, const journal_instance *in,
                         const restart_from *from, wf_reg **wf,
                         wf_build **held) {
  char err[1024] = "";
  if (hold_pinned(e, in, wf, held, err, sizeof err) == 0)
    return 0;
  if (from->why)
    *from->why = xasprintf(
        "its steps ran on build %s, which cannot be had (%s); %s", in->build,
        err,
        from->rollback ? "its rollbacks are learned by replaying them there: "
                         "a restart without rollback runs none"
                       : "a restart from the top runs on the build a new "
                         "instance gets");
  return DURO_E_CANNOT_RESTART;
}

void engine_restart_ops(duro_engine *e, journal_batch *b, journal_instance *in,
                        int64_t from_seq) {
  /* The re-run is a new run: the discarded steps' results and attempts
   * go, the events they consumed stay consumed (a wait in the re-run
   * needs a new event), and the restart count, part of every
   * idempotency key, goes up. */
  journal_op *op = journal_batch_add(b, JOP_STEPS_DISCARD);
  op->rowid = in->rowid;
  op->from_seq = from_seq;
  /* A new run gets the time its deadline gave the first, from now. */
  op = journal_batch_add(b, JOP_INSTANCE_RESTARTED);
  op->rowid = in->rowid;
  op->ts_ms = in->deadline_ms > 0 ? duro_clock_now(e->clock) +
                                        (in->deadline_ms - in->created_ms)
                                  : JOURNAL_NONE;
  /* From the top nothing is replayed: the run is pinned afresh, like a
   * new instance's, to the build its first activation runs. */
  if (from_seq < 0) {
    op = journal_batch_add(b, JOP_INSTANCE_PIN);
    op->rowid = in->rowid;
    op->step_key = NULL;
  }
  in->status = DURO_STATUS_QUEUED;
  in->output = in->error = NULL;
  in->started_ms = in->ended_ms = in->wake_ms = in->paused_ms = JOURNAL_NONE;
}

/* A restart whose rollbacks run first: the request persisted with where
 * it is from, the instance queued; an activation replays run() on the
 * build its steps ran on to learn the rollbacks, runs those of the steps
 * from there on, and restarts it (step_rollback.c). */
static int request_restart_rollback(duro_engine *e, journal_instance *in,
                                    int64_t from_seq) {
  journal_batch b = {0};
  in->control = journal_control_restart(from_seq);
  journal_op *op = journal_batch_add(&b, JOP_INSTANCE_CONTROL);
  op->rowid = in->rowid;
  op->inst = in;
  duro_status old = in->status;
  free(in->output);
  free(in->error);
  in->output = in->error = NULL;
  in->status = DURO_STATUS_QUEUED;
  in->started_ms = in->ended_ms = in->wake_ms = in->paused_ms = JOURNAL_NONE;
  journal_op *set = journal_batch_add(&b, JOP_INSTANCE_SET);
  set->inst = in;
  int rc = journal_commit(e->j, &b);
  journal_batch_free(&b);
  if (rc)
    in->status = old;
  return rc;
}

static int restart_row(duro_engine *e, journal_instance *in, void *arg) {
  const restart_from *from = arg;
  if (!duro_status_ended(in->status)) {
    if (from->why)
      *from->why = not_ended_reason(in->status);
    return DURO_E_CANNOT_RESTART;
  }
  int64_t from_seq = -1;
  wf_reg *wf = NULL;
  wf_build *held = NULL;
  if (from->name) {
    journal_step *steps = NULL;
    size_t n = 0;
    int rc = journal_steps_load(e->j, in->rowid, &steps, &n);
    uint32_t count = from->count ? from->count : 1;
    char *key = xasprintf("%s#%u", from->name, count);
    for (size_t i = 0; rc == 0 && i < n && from_seq < 0; i++)
      if (!strcmp(steps[i].key, key))
        from_seq = steps[i].seq;
    free(key);
    if (rc == 0 && from_seq < 0 && from->why) {
      char *shown = xasprintf("\"%s\"#%u", from->name, count);
      *from->why = no_such_step_reason(shown, steps, n);
      free(shown);
    }
    journal_steps_free(steps, n);
    if (rc)
      return rc;
    if (from_seq < 0)
      return DURO_E_CANNOT_RESTART;
  }
  /* A replay, of the steps before `from` or of all of them for their
   * rollbacks, needs the build they ran on. */
  int rc = 0;
  if ((from->name || from->rollback) &&
      (rc = restart_build(e, in, from, &wf, &held)) != 0)
    return rc;
  if (from->rollback) {
    rc = request_restart_rollback(e, in, from_seq);
    build_release(wf, held);
    return rc;
  }
  journal_batch b = {0};
  duro_status old = in->status;
  free(in->output);
  free(in->error);
  engine_restart_ops(e, &b, in, from_seq);
  journal_op *set = journal_batch_add(&b, JOP_INSTANCE_SET);
  set->inst = in;
  set->clear_control = 1;
  rc = journal_commit(e->j, &b);
  journal_batch_free(&b);
  build_release(wf, held);
  if (rc)
    in->status = old;
  return rc;
}

static int restart_once(duro_engine *e, const char *workflow, const char *id,
                        const char *from, uint32_t count, int rollback,
                        char **why) {
  if (why)
    *why = NULL;
  int64_t rowid;
  entry *ent, *active;
  int rc;
  if (find_or_forward(e, workflow, id,
                      rollback ? CONTROL_OP_RESTART_ROLLBACK
                               : CONTROL_OP_RESTART,
                      from, count, why, &rowid, &rc))
    return rc;
  control_enter(e, rowid, &ent, &active);
  pthread_mutex_unlock(&e->mu);
  if (active) {
    if (why)
      *why = not_ended_reason(DURO_STATUS_RUNNING);
    return control_leave(e, rowid, DURO_E_CANNOT_RESTART);
  }
  restart_from rf = {
      .name = from, .count = count, .rollback = rollback, .why = why};
  return control_leave(e, rowid, change_held_row(e, ent, restart_row, &rf));
}

static int restart(duro_engine *e, const char *workflow, const char *id,
                   const char *from, uint32_t count, int rollback, char **why) {
  AGAIN_IF_MOVED(restart_once(e, workflow, id, from, count, rollback, why));
}

int duro_instance_restart_why(duro_engine *e, const char *workflow,
                              const char *id, const char *from, uint32_t count,
                              char **why) {
  return restart(e, workflow, id, from, count, 0, why);
}

int duro_instance_restart_rollback_why(duro_engine *e, const char *workflow,
                                       const char *id, const char *from,
                                       uint32_t count, char **why) {
  return restart(e, workflow, id, from, count, 1, why);
}

int duro_instance_restart(duro_engine *e, const char *workflow, const char *id,
                          const char *from, uint32_t count) {
  return duro_instance_restart_why(e, workflow, id, from, count, NULL);
}

/* ---- delete ------------------------------------------------------------ */

/* How long a delete with terminate waits for the activation it
 * terminated to let go of the instance once its end is stored. */
#define DELETE_LET_GO_MS 5000

typedef struct delete_req {
  int terminate; /* a live instance is terminated first */
  int was_live;  /* it was, when the delete came */
  duro_deleted *out;
  char **why; /* may be NULL */
} delete_req;

static char *live_reason(duro_status status) {
  return xasprintf("instance is %s; only an ended instance (complete, "
                   "errored, terminated) can be deleted: terminate it "
                   "first, or delete it with terminate",
                   duro_status_name(status));
}

/* Deletes the instance a CONTROL entry holds, terminated first when it is
 * live and that is asked: its rows go in one commit, which deletes
 * nothing unless the stored row has ended. */
static int delete_row(duro_engine *e, journal_instance *in, delete_req *d) {
  if (!duro_status_ended(in->status)) {
    d->was_live = 1;
    if (d->terminate) {
      int rc = control_row(e, in, JOURNAL_CONTROL_TERMINATE);
      if (rc)
        return rc;
    }
  }
  /* still live: not asked to terminate, or a terminate with rollbacks,
   * requested before, runs them first */
  if (!duro_status_ended(in->status)) {
    if (d->why)
      *d->why = live_reason(in->status);
    return DURO_E_CANNOT_DELETE;
  }
  journal_deleted gone = {0};
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_INSTANCE_DELETE);
  op->rowid = in->rowid;
  op->deleted = &gone;
  int rc = journal_commit(e->j, &b);
  int deleted = rc == 0 && op->out_rowid == 1;
  journal_batch_free(&b);
  if (rc)
    return rc;
  if (!deleted) /* the retention sweep took it meanwhile */
    return DURO_E_NOT_FOUND;
  *d->out = (duro_deleted){.status = in->status,
                           .terminated = d->was_live &&
                                         in->status == DURO_STATUS_TERMINATED,
                           .steps = gone.steps,
                           .attempts = gone.attempts,
                           .events = gone.events,
                           .logs = gone.logs};
  return 0;
}

/* delete_row for the CONTROL entry `ent`, which then goes: a deleted
 * instance has nothing left to run, not even a request handed over. */
static int delete_held(duro_engine *e, entry *ent, delete_req *d) {
  journal_instance in = {0};
  int rc = journal_instance_get_rowid(e->j, ent->rowid, &in);
  int read = rc == 0;
  if (read && in.owner != journal_host(e->j)) {
    read = 0; /* handed to another host since its owner was read */
    rc = CONTROL_MOVED;
  } else if (read)
    rc = delete_row(e, &in, d);
  pthread_mutex_lock(&e->mu);
  if (read && rc == 0) {
    ent->rerun = ent->apply_control = 0;
    entry_drop(e, ent);
  } else {
    control_end(e, ent, read ? in.status : ENGINE_STATUS_NONE);
  }
  pthread_mutex_unlock(&e->mu);
  journal_instance_clear(&in);
  return rc;
}

/* The status of an instance an activation holds, for a refusal's
 * reason, as a read shows it (running while a callback runs); running
 * still while its end, stored, is not let go of. */
static duro_status active_status(duro_engine *e, int64_t rowid) {
  journal_instance in = {0};
  duro_status st = journal_instance_get_rowid(e->j, rowid, &in) == 0
                       ? engine_live_status(e, rowid, in.status)
                       : DURO_STATUS_RUNNING;
  journal_instance_clear(&in);
  return duro_status_ended(st) ? DURO_STATUS_RUNNING : st;
}

static int delete_once(duro_engine *e, const char *workflow, const char *id,
                       int terminate, duro_deleted *out, char **why) {
  duro_deleted unused;
  if (!out)
    out = &unused;
  *out = (duro_deleted){.elsewhere = 1};
  if (why)
    *why = NULL;
  int64_t rowid;
  entry *ent, *active;
  int rc;
  if (find_or_forward(e, workflow, id,
                      terminate ? CONTROL_OP_DELETE_TERMINATE
                                : CONTROL_OP_DELETE,
                      NULL, 0, why, &rowid, &rc))
    return rc;
  delete_req d = {.terminate = terminate, .out = out, .why = why};
  control_enter(e, rowid, &ent, &active);
  if (active && terminate) {
    /* A running instance is terminated as duro_instance_terminate does:
     * the request persisted, its callback given up on; then its
     * activation lets go of it once the end is stored. */
    d.was_live = 1;
    rc = request_active(e, rowid, active, JOURNAL_CONTROL_TERMINATE);
    control_leave(e, rowid, rc);
    if (rc)
      return rc;
    engine_abandon_entry(e, active);
    if ((rc = settle_terminate(e, workflow, id)) != 0 &&
        rc != DURO_E_CANNOT_TERMINATE) /* it ended first: deleted still */
      return rc;
    control_enter(e, rowid, &ent, &active);
    struct timespec until = engine_cond_deadline(DELETE_LET_GO_MS);
    while (active &&
           pthread_cond_timedwait(&e->changed, &e->mu, &until) != ETIMEDOUT)
      ent = control_begin(e, rowid, &active);
  }
  pthread_mutex_unlock(&e->mu);
  if (active) {
    /* not asked to terminate, or run() busy outside any step past the
     * wait: the terminate stays persisted and ends it at its next step */
    if (why)
      *why = live_reason(active_status(e, rowid));
    return control_leave(e, rowid, DURO_E_CANNOT_DELETE);
  }
  return control_leave(e, rowid, delete_held(e, ent, &d));
}

int duro_instance_delete(duro_engine *e, const char *workflow, const char *id,
                         int terminate, duro_deleted *out, char **why) {
  AGAIN_IF_MOVED(delete_once(e, workflow, id, terminate, out, why));
}

/* An event on its way to disk: what its ops point to lives here. */
typedef struct event_job {
  duro_engine *e;
  int64_t rowid;
  char *type, *payload;
  char *traceparent; /* its sender's, normalized, or NULL */
  journal_batch b;
  duro_done_fn done;
  void *ctx;
} event_job;

/* On the thread that committed: wake the instance if it waits for this
 * type (the commit said whether it does: no read that could fail).  An
 * activation running it gets `rerun`, and its own last commit finds the
 * event stored. */
static void event_stored(void *ctx, int rc) {
  event_job *job = ctx;
  duro_engine *e = job->e;
  if (rc == 0)
    rc = job->b.ops[0].rc; /* DURO_E_INSTANCE_ENDED: nothing stored */
  if (rc == 0)
    engine_event_stored(e, &job->b.ops[1]);
  duro_done_fn done = job->done;
  void *done_ctx = job->ctx;
  journal_batch_free(&job->b);
  free(job->type);
  free(job->payload);
  free(job->traceparent);
  free(job);
  done(done_ctx, rc);
}

/* background: the commit never runs on this thread; else this thread
 * may lead it (the synchronous form waits anyway). */
static int send_event(duro_engine *e, const char *workflow, const char *id,
                      const char *type, const char *payload,
                      const char *traceparent, duro_done_fn done, void *ctx,
                      int background) {
  if (!type || !*type || strlen(type) > 100 ||
      !strncmp(type, DURO_RESERVED_EVENT_PREFIX,
               DURO_RESERVED_EVENT_PREFIX_LEN))
    return DURO_E_INVALID_ARGUMENT;
  if (payload && json_text_check(payload, e->max_step_result) != 0)
    return DURO_E_INVALID_PARAMS;
  journal_instance in = {0};
  int rc = engine_instance_get(e, workflow, id, &in);
  int64_t rowid = in.rowid;
  /* An ended instance takes no events: nothing would consume one, and a
   * restart's re-run should not find stale ones.  (The commit checks
   * again, for an end that comes between.) */
  if (rc == 0 && duro_status_ended(in.status))
    rc = DURO_E_INSTANCE_ENDED;
  journal_instance_clear(&in);
  if (rc)
    return rc;
  event_job *job = xcalloc(1, sizeof *job);
  *job = (event_job){.e = e,
                     .rowid = rowid,
                     .type = xstrdup(type),
                     .payload = xstrdup(payload ? payload : "null"),
                     .traceparent = traceparent_norm(traceparent),
                     .done = done,
                     .ctx = ctx};
  journal_op *op = journal_batch_add(&job->b, JOP_EVENT_INSERT);
  op->rowid = rowid;
  op->event_type = job->type;
  op->event_payload = job->payload;
  op->traceparent = job->traceparent;
  op->ts_ms = duro_clock_now(e->clock);
  /* In the same commit, make the wake time due if the instance waits for
   * this type: should the host stop before the woken activation runs,
   * recovery finds it due like any timer. */
  journal_op *wake = journal_batch_add(&job->b, JOP_WAKE_IF_WAITING);
  wake->rowid = rowid;
  wake->event_type = job->type;
  wake->ts_ms = op->ts_ms;
  if (background)
    journal_commit_background(e->j, &job->b, event_stored, job);
  else
    journal_commit_async(e->j, &job->b, event_stored, job);
  return 0;
}

int duro_instance_send_event_async(duro_engine *e, const char *workflow,
                                   const char *id, const char *type,
                                   const char *payload, const char *traceparent,
                                   duro_done_fn done, void *ctx) {
  return send_event(e, workflow, id, type, payload, traceparent, done, ctx, 1);
}

static void event_waited(void *ctx, int rc) { engine_wait_done(ctx, rc, NULL); }

int duro_instance_send_event(duro_engine *e, const char *workflow,
                             const char *id, const char *type,
                             const char *payload) {
  engine_wait w = ENGINE_WAIT_INIT;
  int rc =
      send_event(e, workflow, id, type, payload, NULL, event_waited, &w, 0);
  return rc ? rc : engine_wait_for(&w, NULL);
}
