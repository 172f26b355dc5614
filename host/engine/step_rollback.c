/* step_rollback.c — rollbacks (saga compensation): what undoes a
 * completed step, registered as run() passes the step (duro_do_with_
 * rollback, a duro_do_all branch's `rollback`) on every activation, and
 * run newest first (reverse start order) when run() returns an error it
 * did not handle, or when it calls duro_rollback; and, in an unwind
 * (run() replayed only as far as its journal), for a terminate or a
 * restart that asks for them, or at the instance's deadline when its
 * workflow does (on_timeout: rollback).
 *
 * Each rollback is a step of its own, kind "rollback", keyed
 * "<its step's key>/rollback" (a step's own key ends in "#<count>", so
 * no name of the plugin's can take it), with its own retries and timeout
 * (do_call, as a duro_do's: an attempt, its back-off, its conclusion),
 * journaled at a call position past any of run()'s (ROLLBACK_SEQ less
 * its step's: describe lists them in the order they run), so replay's
 * divergence check never meets it.  A completed
 * rollback is never run again: a replay after a crash in the middle of
 * them runs run() up to its error again, which registers the same
 * rollbacks, and only those left run.  One in its back-off suspends the
 * instance until then; one that fails for good is reported beside the
 * error that caused the rollback, and the rest still run. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "step.h"
#include "step_internal.h"

/* Rollback steps' call positions: past any of run()'s (limits.steps is
 * at most 25,000). */
#define ROLLBACK_SEQ ((int64_t)1 << 40)

/* rb's configuration into *c, for the step `what` names: -1 (the error
 * set) when it has no callback or a bad duration. */
static int rollback_config(duro_step *a, const char *what,
                           const duro_rollback_cfg *rb, do_config *c) {
  if (!rb->fn) {
    char *msg = xasprintf("step \"%s\": its rollback has no callback", what);
    fail_with(a, "Error", msg);
    free(msg);
    return -1;
  }
  duro_step_config cfg = {.retries = rb->retries, .timeout = rb->timeout};
  return do_read_config(a, what, &cfg, c);
}

int step_rollback_check(duro_step *a, const char *name,
                        const duro_rollback_cfg *rb) {
  do_config c;
  return rb ? rollback_config(a, name ? name : "", rb, &c) : 0;
}

int step_rollback_register(duro_step *a, journal_step *s,
                           const duro_rollback_cfg *rb) {
  if (!rb)
    return 0;
  /* run() passes each step once an activation: no step comes twice */
  step_undo u = {.s = s, .fn = rb->fn, .arg = rb->arg};
  if (rollback_config(a, s->key, rb, &u.c) != 0)
    return -1;
  if (a->n_undo == a->cap_undo) {
    a->cap_undo = a->cap_undo ? a->cap_undo * 2 : 8;
    a->undo = xrealloc(a->undo, a->cap_undo * sizeof *a->undo);
  }
  a->undo[a->n_undo++] = u;
  return 0;
}

static int undo_call(duro_attempt *at, void *arg) {
  const step_undo *u = arg;
  return u->fn(at, u->s->result ? u->s->result : "null", u->arg);
}

/* Undoes u's step: DO_DONE (its rollback completed, now or before),
 * DO_ERRORED (failed for good: its step in *failed), DO_WAIT (its
 * back-off ends at (*failed)->wake_ms) or DO_SUSPEND. */
static int undo_one(duro_step *a, step_undo *u, journal_step **failed) {
  const char *key = arena_printf(a, "%s/rollback", u->s->key);
  journal_step *s = strmap_get(&a->steps, key);
  *failed = s;
  if (s && s->status == DURO_STEP_COMPLETE)
    return DO_DONE;
  if (s && s->status == DURO_STEP_ERRORED)
    return DO_ERRORED;
  if (a->dry) {
    dry_stop(a, key);
    return DO_SUSPEND;
  }
  a->replaying = 0;
  if (!s) {
    int64_t seq = a->seq;
    a->seq = ROLLBACK_SEQ - u->s->seq; /* its call position */
    s = step_new(a, key, u->s->key, 1, DURO_STEP_ROLLBACK);
    a->seq = seq;
    *failed = s;
  }
  do_call call = {.key = key, .s = s, .c = u->c};
  int policy = do_orphan_policy(a, s, &call.c);
  if (policy == DO_ERRORED)
    return DO_ERRORED;
  if (at_boundary(a) || lease_lapsed(a))
    return DO_SUSPEND;
  if (s->wake_ms != JOURNAL_NONE && now_ms(a) < s->wake_ms)
    return DO_WAIT;
  if (do_enter(a, &call))
    return DO_SUSPEND;
  duro_attempt at;
  int cut, fn_rc;
  do_attempt_init(a, &call, &at, &cut);
  if (do_run_attempt(a, &at, undo_call, u, &fn_rc))
    return DO_SUSPEND;
  return do_conclude(a, &call, &at, fn_rc, cut, NULL);
}

static int newest_first(const void *x, const void *y) {
  const step_undo *p = x, *q = y;
  return p->s->seq < q->s->seq ? 1 : p->s->seq > q->s->seq ? -1 : 0;
}

duro_rc step_unwind(duro_step *a, journal_step **failed) {
  *failed = NULL;
  if (a->n_undo == 0)
    return DURO_OK;
  qsort(a->undo, a->n_undo, sizeof *a->undo, newest_first);
  log_at(DURO_LOG_INFO, &a->log, "rolling back %zu step%s, newest first",
         a->n_undo, a->n_undo == 1 ? "" : "s");
  for (size_t i = 0; i < a->n_undo; i++) {
    journal_step *s;
    switch (undo_one(a, &a->undo[i], &s)) {
    case DO_DONE:
      continue;
    case DO_ERRORED:
      if (!*failed)
        *failed = s; /* the newest's failure is the one reported */
      continue;
    case DO_WAIT:
      return suspend_until(a, s->wake_ms, NULL);
    default:
      return DURO_SUSPEND;
    }
  }
  return *failed ? DURO_ERROR : DURO_OK;
}

static const char *error_json_arena(duro_step *a, const char *name,
                                    const char *message) {
  return arena_take(a, error_json(name, message));
}

/* The error that caused the rollback, with the rollback's that failed
 * for good: {"name","message","rollback":{"step","name","message"}}. */
static const char *both_errors(duro_step *a, const char *cause,
                               const journal_step *failed) {
  json_t *e = cause ? json_loads(cause, 0, NULL) : NULL;
  if (!json_is_object(e)) {
    json_decref(e);
    e = json_pack("{s:s, s:s}", "name", "Error", "message",
                  "run() returned DURO_ERROR with no failed step");
  }
  json_t *r = failed->error ? json_loads(failed->error, 0, NULL) : NULL;
  json_t *rb = json_object();
  json_object_set_new(rb, "step", json_string(failed->name));
  json_t *v;
  if ((v = json_object_get(r, "name")))
    json_object_set(rb, "name", v);
  if ((v = json_object_get(r, "message")))
    json_object_set(rb, "message", v);
  json_decref(r);
  json_object_set_new(e, "rollback", rb);
  char *text = json_dumps(e, JSON_COMPACT);
  json_decref(e);
  return text ? arena_take(a, text) : cause;
}

/* A terminate that asked for the rollbacks: run() stopped at the
 * request (or, replaying, at the first step past its journal); the
 * rollbacks run now, the request not stopping them, and the instance
 * ends terminated, or waits while one waits out its back-off (the
 * request stays persisted: the next activation goes on). */
static duro_rc unwind_for_terminate(duro_step *a) {
  a->unwind = UNWIND_TERMINATE;
  a->unwound = 1;
  a->suspended = 0;
  a->reason = SUSPEND_NONE;
  journal_step *failed;
  duro_rc r = step_unwind(a, &failed);
  if (r == DURO_SUSPEND && a->suspended)
    return DURO_SUSPEND; /* a back-off, a stop, a lost lease */
  if (r == DURO_ERROR) {
    a->rollback_failed = 1;
    a->last_error = both_errors(
        a,
        error_json_arena(a, "instance.terminated",
                         "the instance was terminated with its rollbacks"),
        failed);
  }
  a->suspended = 1;
  a->reason = SUSPEND_TERMINATE;
  return DURO_SUSPEND;
}

/* A restart with rollbacks: run() replayed as far as its journal; the
 * rollbacks of the steps the restart discards (from unwind_from on) run,
 * and the instance restarts (activation_finish), or ends errored when
 * one failed for good: the journal it was to leave stays for a look, and
 * a restart without rollback discards it all the same. */
static duro_rc unwind_for_restart(duro_step *a) {
  a->unwound = 1;
  a->suspended = 0;
  a->reason = SUSPEND_NONE;
  size_t kept = 0;
  for (size_t i = 0; i < a->n_undo; i++)
    if (a->undo[i].s->seq >= a->unwind_from)
      a->undo[kept++] = a->undo[i];
  a->n_undo = kept;
  journal_step *failed;
  duro_rc r = step_unwind(a, &failed);
  if (r == DURO_SUSPEND && a->suspended)
    return DURO_SUSPEND; /* a back-off, a stop, a lost lease */
  if (r == DURO_ERROR) {
    a->last_error = both_errors(
        a,
        error_json_arena(a, "instance.restart_failed",
                         "a rollback of the restart's failed for good: the "
                         "instance was not restarted"),
        failed);
    return DURO_ERROR;
  }
  a->suspended = 1;
  a->reason = SUSPEND_RESTART;
  return DURO_SUSPEND;
}

/* Past its deadline, its workflow asking for its rollbacks first: run()
 * stopped at the deadline (or, replaying, at the first step past its
 * journal); the rollbacks run, the deadline cutting none short, and the
 * instance ends errored instance.timed_out, a rollback's error beside
 * when one failed for good.  Every activation past the deadline gets
 * here again until they ran: one in its back-off waits for it, not for
 * the deadline gone by. */
static duro_rc unwind_for_timeout(duro_step *a) {
  a->unwind = UNWIND_TIMEOUT;
  a->unwound = 1;
  a->suspended = 0;
  a->reason = SUSPEND_NONE;
  const char *cause = deadline_error(a);
  journal_step *failed;
  duro_rc r = step_unwind(a, &failed);
  if (r == DURO_SUSPEND && a->suspended)
    return DURO_SUSPEND; /* a back-off, a pause, a stop, a lost lease */
  a->last_error = r == DURO_ERROR ? both_errors(a, cause, failed) : cause;
  a->suspended = 1;
  a->reason = SUSPEND_TIMED_OUT;
  return DURO_SUSPEND;
}

duro_rc step_after_run(duro_step *a, duro_rc rc) {
  /* given up on by the watchdog (or a terminate of a hung callback): its
   * entry may be gone, nothing of it is touched */
  if (a->reason == SUSPEND_ABANDONED)
    return rc;
  int may_unwind = a->ent && !a->unwound && !a->worker_died && !a->dry;
  if (may_unwind && a->unwind == UNWIND_RESTART)
    return unwind_for_restart(a);
  if (may_unwind &&
      (a->unwind == UNWIND_TIMEOUT ||
       (a->suspended && a->reason == SUSPEND_TIMED_OUT && deadline_unwinds(a))))
    return unwind_for_timeout(a);
  if (may_unwind && __atomic_load_n(&a->ent->rollback_req, __ATOMIC_ACQUIRE) &&
      (a->unwind == UNWIND_TERMINATE ||
       (a->suspended && a->reason == SUSPEND_TERMINATE)))
    return unwind_for_terminate(a);
  if (rc != DURO_ERROR || a->suspended || a->unwound || a->n_undo == 0)
    return rc;
  a->unwound = 1;
  const char *cause = a->last_error;
  journal_step *failed;
  duro_rc r = step_unwind(a, &failed);
  if (r == DURO_SUSPEND)
    return DURO_SUSPEND;
  a->last_error = r == DURO_ERROR ? both_errors(a, cause, failed) : cause;
  return DURO_ERROR;
}

duro_rc step_api_rollback(duro_step *a) {
  if (a->suspended || at_boundary(a))
    return DURO_SUSPEND;
  journal_step *failed;
  duro_rc r = step_unwind(a, &failed);
  if (r == DURO_ERROR)
    a->last_error = failed->error;
  return r;
}
