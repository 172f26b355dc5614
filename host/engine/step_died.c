/* step_died.c — a run() standing in for code in a worker process: its
 * build's context, its fiber parked while the worker answers, and the
 * death of the worker.
 *
 * The process running an activation's plugin code died
 * (a worker: worker/worker_proxy.c), recorded as faults.c records a
 * death of the engine, with one difference: the engine saw it happen, so
 * it knows which attempt was in its callback and, from the worker's
 * crash handler, whether the death was that callback's own.
 *
 *   guilty, in a callback   failed plugin.crashed, charged toward
 *                           engine.max_crashes (at max: the instance
 *                           errors); its retry policy applies at the
 *                           step's next call, as after an engine crash
 *   not guilty, in one      cut short (attempt.cut_short, not charged):
 *                           it runs again at once as the next attempt
 *   guilty, outside any     run() itself crashed: it would again on
 *                           every activation, so the instance errors
 *   killed, in run() code   (a SIGKILL while its run() code ran outside
 *                           any step) charged a kill; at
 *                           engine.max_crashes of them the instance
 *                           errors, as above
 *   otherwise               nothing to record
 *
 * A guilty death is told to the host as its build's crash (a crash-storm
 * breaker counts them against the attempts that ended, counted here
 * too), except a kill no handler saw that is the step's first: outside
 * kills of a healthy worker hold nothing.
 *
 * The activation ends either way (its run() is gone with the process):
 * what it wrote so far commits with its final row, and the instance runs
 * again at once, on a new worker. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "log.h"
#include "step.h"
#include "step_internal.h"

void *step_build_ctx(duro_step *a) { return a->build ? a->build->ctx : NULL; }

void *step_park_token(duro_step *a) {
  (void)a;
  return engine_current_task();
}

int64_t step_mono_ms(duro_step *a) { return engine_mono_ms(a->e); }

void step_dispatch_set(duro_step *a, uint64_t *word, uint64_t revoke) {
  entry *x = a->ent;
  if (!x)
    return;
  pthread_mutex_lock(&a->e->mu);
  if (x->n_dispatch == x->cap_dispatch) {
    x->cap_dispatch = x->cap_dispatch ? x->cap_dispatch * 2 : 2;
    x->dispatch = xrealloc(x->dispatch, x->cap_dispatch * sizeof *x->dispatch);
  }
  x->dispatch[x->n_dispatch++] = (struct entry_dispatch){word, revoke};
  pthread_mutex_unlock(&a->e->mu);
}

void step_dispatch_clear(duro_step *a, uint64_t *word) {
  entry *x = a->ent;
  if (!x)
    return;
  pthread_mutex_lock(&a->e->mu);
  for (uint32_t i = 0; i < x->n_dispatch; i++)
    if (x->dispatch[i].word == word) {
      x->dispatch[i] = x->dispatch[--x->n_dispatch];
      break;
    }
  pthread_mutex_unlock(&a->e->mu);
}

void step_attempt_begins(duro_attempt *at) {
  int64_t waited =
      engine_mono_ms(at->act->e) - (at->deadline_mono - at->timeout_ms);
  if (waited <= 0 || at->deadline_mono > INT64_MAX / 2)
    return;
  /* never past the instance's own deadline (step_deadline.c) */
  int64_t until = at->act->inst.deadline_ms;
  if (until > 0 && at->deadline_ms + waited > until)
    waited = until > at->deadline_ms ? until - at->deadline_ms : 0;
  at->deadline_mono += waited;
  at->deadline_ms += waited;
}

int step_attempt_withdraw(duro_attempt *at) {
  /* the lease too: the wait for a place in the worker may have outlasted
   * it (a host frozen there must send no CALL once thawed) */
  if (!at_boundary(at->act) && !lease_lapsed(at->act))
    return 0;
  at->withdrawn = 1;
  return 1;
}

int64_t step_begin_by(duro_step *a) { return journal_lease_until(a->e->j); }

void step_attempt_not_begun(duro_attempt *at) {
  at->withdrawn = 1;
  /* a pause or terminate revoked it (at_boundary sets the reason), or
   * its worker read it past the lease */
  if (!at_boundary(at->act))
    lease_may_be_lost(at->act);
}

int step_terminate_requested(duro_step *a) {
  /* an unwind's rollbacks are not cut short by a terminate */
  return a->ent && !a->unwind &&
         __atomic_load_n(&a->ent->terminate_req, __ATOMIC_ACQUIRE);
}

void step_attempt_given_up(duro_attempt *at, const char *name,
                           const char *message) {
  free(at->message);
  at->message = xstrdup(message);
  at->failed = 1;
  at->final = 0;
  at->fail_name = name;
}

void step_attempt_refused(duro_attempt *at, const char *name,
                          const char *message) {
  step_attempt_given_up(at, name, message);
  at->final = 1;
}

int step_attempt_suspect(const duro_attempt *at) {
  duro_engine *e = at->act->e;
  return e->ledger && ledger_has_suspects(e->ledger) &&
         ledger_suspect_kills(e->ledger, at->act->inst.rowid, at->step->key);
}

void step_attempt_unsuspect(const duro_attempt *at) {
  duro_engine *e = at->act->e;
  if (e->ledger)
    ledger_suspect_clear(e->ledger, at->act->inst.rowid, at->step->key);
}

int64_t step_attempt_deadline_mono(const duro_attempt *at) {
  return at->deadline_mono;
}

int step_park_fd(duro_step *a, int fd, short (*events)(void *ctx), void *ctx,
                 int64_t until, short *revents) {
  /* Others run on this thread meanwhile, and set these for their own
   * run() and callbacks: a queue send this activation's callback makes
   * after it resumes must join its own attempt. */
  duro_attempt *at = step_running_attempt;
  int orphaned = engine_park_fd(fd, events, ctx, until, revents);
  step_running_act = a;
  step_running_attempt = at;
  if (orphaned) {
    a->suspended = 1;
    a->reason = SUSPEND_ABANDONED;
    return 1;
  }
  step_slot_bind(a);
  return 0;
}

void step_unpark(void *token) { engine_unpark(token); }

static void crashed_for_good(duro_step *a, char *why) {
  a->last_error = arena_take(a, error_json(DURO_ERR_CRASHED, why));
  a->reason = SUSPEND_CRASHED;
  free(why);
}

static void record_guilty(duro_step *a, duro_attempt *at, const char *plugin,
                          const char *build, const char *how) {
  journal_step *s = at->step;
  uint32_t before = 0;
  if (engine_crashes_of(a->e, a->inst.rowid, s->key, &before) != 0)
    before = 0; /* unread: charge this one at least */
  uint32_t crashes = before + 1;
  int64_t now = now_ms(a);
  /* how first: a screen that cuts the message still shows the signal */
  char *msg = xasprintf("step \"%s\" attempt %u crashed its worker process: "
                        "%s (plugin \"%s\", build %s)",
                        s->key, at->number, how, plugin, build ? build : "?");
  const char *err = arena_take(a, error_json(DURO_ERR_CRASHED, msg));
  journal_op *op = journal_batch_add(&a->batch, JOP_ATTEMPT_PUT);
  op->rowid = a->inst.rowid;
  op->attempt = (journal_attempt){.key = s->key,
                                  .number = at->number,
                                  .started_ms = at->started_ms,
                                  .ended_ms = now,
                                  .error = err,
                                  .build = a->build_hash};
  activation_trace_error(a, now, s->key, at->number, err);
  /* A failed attempt with no wake time: the retry policy is applied at
   * the step's next call (retry_orphaned in step_do.c). */
  s->attempts = at->number;
  s->error = (char *)err;
  s->status = DURO_STEP_WAITING;
  s->wake_ms = JOURNAL_NONE;
  log_at(DURO_LOG_WARN, &a->log, "%s (crash %u of %u)", msg, crashes,
         a->e->max_crashes);
  free(msg);
  if (crashes >= a->e->max_crashes) {
    s->status = DURO_STEP_ERRORED;
    s->ended_ms = now;
    crashed_for_good(a, xasprintf("step \"%s\" crashed its worker process %u "
                                  "times (engine.max_crashes is %u); the "
                                  "last time it was %s",
                                  s->key, crashes, a->e->max_crashes, how));
  }
  put_step(a, s);
}

/* A death no handler saw (SIGKILL: the callback's own, the OOM killer's
 * for the memory a callback took, or an operator's), with attempt `at`
 * in its callback: it is to blame when it was the only callback in the
 * process (`alone`), or when its kills reach engine.max_crashes; else it
 * is charged a kill and cut short. */
static int blame_kill(duro_step *a, duro_attempt *at, int alone) {
  if (alone)
    return 1;
  uint32_t kills =
      ledger_suspect_charge(a->e->ledger, a->inst.rowid, at->step->key);
  uint32_t crashes = 0;
  if (engine_crashes_of(a->e, a->inst.rowid, at->step->key, &crashes) != 0)
    crashes = 0;
  if (kills && crashes + kills >= a->e->max_crashes)
    return 1;
  log_at(DURO_LOG_WARN, &a->log,
         "step \"%s\" was inside its callback, beside others, when its "
         "worker process was killed (%u of %u): it runs again with no "
         "other callback beside it",
         at->step->key, crashes + (kills ? kills : 1), a->e->max_crashes);
  return 0;
}

/* Whether the step of `at` was charged before this death: a kill as a
 * suspect, or a crash.  A kill no handler saw is the build's only then:
 * a first kill may be anyone's (an operator, the OOM killer taking the
 * largest process), a step killed again alone is its own killer. */
static int charged_before(duro_step *a, duro_attempt *at) {
  uint32_t crashes = 0;
  if (a->e->ledger &&
      ledger_suspect_kills(a->e->ledger, a->inst.rowid, at->step->key))
    return 1;
  return engine_crashes_of(a->e, a->inst.rowid, at->step->key, &crashes) == 0 &&
         crashes > 0;
}

void step_attempt_ended(duro_attempt *at) {
  wf_build *b = at->act->build;
  if (b)
    __atomic_add_fetch(&b->attempts, 1, __ATOMIC_RELAXED);
}

void step_worker_died(duro_step *a, duro_attempt *at, const char *plugin,
                      const char *build, const char *how, int guilty,
                      int killed, int alone) {
  /* Told once for the activation, and once more for each other attempt
   * in a callback there (a duro_do_all's branches): each is recorded. */
  if (a->worker_died && !at)
    return;
  int first = !a->worker_died;
  a->worker_died = 1;
  /* queued: it runs again at once (unless it suspended already: a
   * back-off after an attempt that timed out, say, keeps its wake) */
  if (first && !a->suspended) {
    a->suspended = 1;
    a->reason = SUSPEND_SHUTDOWN;
  }
  /* the build's crash: one its handler saw, or a repeated kill */
  int builds = guilty || (at && killed && charged_before(a, at));
  if (at && !guilty && killed && a->e->ledger)
    guilty = blame_kill(a, at, alone);
  if (at && guilty) {
    record_guilty(a, at, plugin, build, how);
  } else if (at) {
    char *by = xasprintf("the death of its worker process (%s), which "
                         "another callback caused",
                         how);
    char *owned = NULL;
    engine_cut_short(&a->batch, &a->log, a->inst.rowid, at->step, at->number,
                     at->started_ms, a->build_hash, by, now_ms(a), &owned);
    journal_batch_own(&a->batch, owned); /* the attempt's error, to commit */
    free(by);
  } else if (guilty && first) {
    crashed_for_good(a, xasprintf("run() crashed its worker process outside "
                                  "any step (plugin \"%s\", build %s: %s); "
                                  "code outside steps runs again on every "
                                  "activation, so it would crash again",
                                  plugin, build ? build : "?", how));
  }
  /* The host counts the crashes of each build against its attempts (a
   * crash-storm breaker); a crash is an attempt that ended too. */
  if (!guilty || !build)
    return;
  uint64_t attempts =
      a->build ? __atomic_add_fetch(&a->build->attempts, 1, __ATOMIC_RELAXED)
               : 0;
  if (builds && a->e->opt.on_build_crash)
    a->e->opt.on_build_crash(a->e->opt.ctx, a->inst.workflow, build, attempts);
}

/* The key run()'s code outside any step is charged its kills under: a
 * step's key is its name and "#n", never empty. */
#define RUN_KEY ""

void step_worker_killed_in_run(duro_step *a, const char *plugin,
                               const char *build, const char *how) {
  if (a->worker_died)
    return;
  a->worker_died = 1;
  if (!a->suspended) { /* queued: it runs again at once */
    a->suspended = 1;
    a->reason = SUSPEND_SHUTDOWN;
  }
  ledger *l = a->e->ledger;
  uint32_t max = a->e->max_crashes;
  uint32_t kills = l ? ledger_suspect_charge(l, a->inst.rowid, RUN_KEY) : max;
  if (kills < max) {
    log_at(DURO_LOG_WARN, &a->log,
           "run() was running outside any step when its worker process "
           "was killed (%s; %u of %u): it runs again",
           how, kills, max);
  } else {
    if (l)
      ledger_suspect_clear(l, a->inst.rowid, RUN_KEY);
    crashed_for_good(a,
                     xasprintf("run() crashed its worker process outside "
                               "any step %u times (engine.max_crashes is "
                               "%u), the last time %s, which no handler "
                               "sees (plugin \"%s\", build %s); code "
                               "outside steps runs again on every "
                               "activation, so it would crash again",
                               kills, max, how, plugin, build ? build : "?"));
  }
  /* a kill is the build's crash once its run() was charged before (a
   * first one may be anyone's), as for a step; a crash is an attempt
   * that ended too */
  if (kills < 2 || !build)
    return;
  uint64_t attempts =
      a->build ? __atomic_add_fetch(&a->build->attempts, 1, __ATOMIC_RELAXED)
               : 0;
  if (a->e->opt.on_build_crash)
    a->e->opt.on_build_crash(a->e->opt.ctx, a->inst.workflow, build, attempts);
}

void step_run_returned(duro_step *a) {
  if (a->e->ledger)
    ledger_suspect_clear(a->e->ledger, a->inst.rowid, RUN_KEY);
}

void step_run_over_limit(duro_step *a, const char *name, const char *message) {
  if (a->worker_died)
    return;
  a->worker_died = 1; /* its death is this */
  a->last_error = arena_take(a, error_json(name, message));
  a->suspended = 1;
  a->reason = SUSPEND_CRASHED;
}

void step_worker_unavailable(duro_step *a) {
  a->storage_failed = 1; /* activation_run: dropped, retried later */
  a->suspended = 1;
  a->reason = SUSPEND_SHUTDOWN;
}
