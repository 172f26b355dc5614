/* step_do.c — duro_do: a step call that runs a callback.  Answered from
 * the journal when it can be; else prepared (the step's configuration,
 * a retry its last attempt left owed, the lease, the back-off, the
 * instance's start, the gate), the callback run as one attempt (the
 * ledger and the watchdog told), its outcome judged and recorded: a
 * success committed with its sends before the plugin sees it, a failure
 * as an attempt and a retry after a back-off, or the step's error.
 *
 * One file for the whole per-step path of duro_do (prepare, attempt,
 * outcome and its commit): the small calls it makes on every step are in
 * this file or static inline in step_internal.h (the arena, the
 * journal's answer, the boundary's requests, the lease, a step's row), as
 * they were in one step.c.  What it calls in another file: step_begin,
 * step_new and the steps limit (step_replay.c, shared with the sleeps and
 * the event wait), calls of their own in one step.c too, and the gate
 * (step_gate.c): one call per attempt, which returns at once without
 * suspects. */
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "error.h"
#include "log.h"
#include "step_internal.h"

#define DEFAULT_RETRIES 5
#define DEFAULT_DELAY_MS (10LL * 1000)
#define DEFAULT_TIMEOUT_MS (10LL * 60 * 1000)

/* The wait before retry `attempt`+1, at most the longest sleep (365
 * days): computed so it cannot overflow, whatever the delay and count. */
static int64_t backoff_ms(int64_t delay, duro_backoff how, uint32_t attempt) {
  const int64_t max = DURATION_MAX_SLEEP_MS;
  if (delay <= 0)
    return 0;
  if (delay >= max)
    return max;
  if (how == DURO_BACKOFF_LINEAR)
    return (int64_t)attempt > max / delay ? max : delay * (int64_t)attempt;
  int64_t d = delay;
  if (how != DURO_BACKOFF_CONSTANT)
    for (uint32_t i = 1; i < attempt && d < max; i++)
      d = d > max / 2 ? max : d * 2;
  return d > max ? max : d;
}

/* cfg->resource, when the plugin's duro_step_config reaches it: one built
 * against an older minor hands a smaller struct (duro.h's rule). */
static const char *config_resource(const duro_step *a,
                                   const duro_step_config *cfg) {
  size_t size = a->build && a->build->step_config_size
                    ? a->build->step_config_size
                    : sizeof *cfg;
  return size >= offsetof(duro_step_config, resource) + sizeof cfg->resource
             ? cfg->resource
             : NULL;
}

int do_read_config(duro_step *a, const char *key, const duro_step_config *cfg,
                   do_config *out) {
  out->limit = DEFAULT_RETRIES;
  out->delay_ms = DEFAULT_DELAY_MS;
  out->timeout_ms = DEFAULT_TIMEOUT_MS;
  out->backoff = DURO_BACKOFF_EXPONENTIAL;
  out->resource = NULL;
  if (!cfg)
    return 0;
  out->resource = config_resource(a, cfg);
  const char *bad = NULL;
  if (cfg->retries) {
    out->limit = cfg->retries->limit;
    out->backoff = cfg->retries->backoff;
    if (cfg->retries->delay &&
        (duration_parse(cfg->retries->delay, &out->delay_ms) != 0 ||
         out->delay_ms > DURATION_MAX_SLEEP_MS))
      bad = cfg->retries->delay;
    if ((unsigned)out->backoff > DURO_BACKOFF_LINEAR)
      bad = "backoff";
  }
  if (!bad && cfg->timeout &&
      (duration_parse(cfg->timeout, &out->timeout_ms) != 0 ||
       out->timeout_ms <= 0 || out->timeout_ms > DURATION_MAX_SLEEP_MS))
    bad = cfg->timeout;
  if (bad) {
    char *msg = xasprintf("step \"%s\": invalid configuration value \"%s\" "
                          "(durations are at most 365 days)",
                          key, bad);
    fail_with(a,
              strcmp(bad, "backoff") ? duro_err_name(DURO_E_INVALID_DURATION)
                                     : "Error",
              msg);
    free(msg);
    return -1;
  }
  return 0;
}

typedef struct cut_count {
  const char *key;
  uint32_t n;
} cut_count;

static void count_cut(void *ctx, const char *key, uint32_t number,
                      int64_t started_ms, int64_t ended_ms, const char *error,
                      const char *build) {
  (void)number, (void)started_ms, (void)ended_ms, (void)build;
  cut_count *c = ctx;
  if (!strcmp(key, c->key) && error &&
      strstr(error, "\"name\":\"" DURO_ERR_CUT_SHORT "\""))
    c->n++;
}

/* The attempts up to `number` that count against the step's retries:
 * those cut short by a stop or a death of the engine do not (engine.c,
 * faults.c; a death is bounded by engine.max_crashes instead).  Read from
 * the journal only where a failed attempt is charged, never on a step
 * that succeeds; a read that fails charges them all. */
static uint32_t charged_attempts(duro_step *a, const char *key,
                                 uint32_t number) {
  cut_count c = {.key = key};
  if (number <= 1 ||
      journal_attempts_each(a->e->j, a->inst.rowid, count_cut, &c) != 0 ||
      c.n >= number)
    return number;
  return number - c.n;
}

int do_orphan_policy(duro_step *a, journal_step *s, const do_config *c) {
  if (s->attempts == 0 || s->wake_ms != JOURNAL_NONE)
    return DO_RUN; /* a back-off of its own is the caller's to wait out */
  int64_t now = now_ms(a);
  uint32_t charged = charged_attempts(a, s->key, s->attempts);
  if (charged > c->limit) {
    log_at(DURO_LOG_WARN, &a->log, "step \"%s\" failed after %u attempts",
           s->key, s->attempts);
    s->status = DURO_STEP_ERRORED;
    s->ended_ms = now;
    put_step(a, s);
    return step_error_durable(a) == DURO_ERROR ? DO_ERRORED : DO_SUSPEND;
  }
  s->wake_ms = now + backoff_ms(c->delay_ms, c->backoff, charged);
  put_step(a, s);
  metrics_add(&a->e->m.retries_scheduled, 1);
  return now >= s->wake_ms ? DO_RUN : DO_WAIT;
}

/* duro_do's side of do_orphan_policy: returns 1 with *rc set when the
 * call ends here (a back-off to wait, or the retries are spent). */
static int retry_orphaned(duro_step *a, journal_step *s, const do_config *c,
                          duro_rc *rc) {
  switch (do_orphan_policy(a, s, c)) {
  case DO_ERRORED:
    a->last_error = s->error;
    *rc = DURO_ERROR;
    return 1;
  case DO_SUSPEND:
    *rc = DURO_SUSPEND;
    return 1;
  case DO_WAIT:
    *rc = suspend_until(a, s->wake_ms, NULL);
    return 1;
  default:
    return 0;
  }
}

static void attempt_clear(duro_attempt *at) {
  free(at->result);
  free(at->message);
  free(at->bad_result);
  journal_batch_free(&at->sends);
}

duro_rc step_error_durable(duro_step *a) {
  if (step_flush(a) == 0)
    return DURO_ERROR;
  a->suspended = 1;
  if (a->reason != SUSPEND_ABANDONED)
    a->reason = SUSPEND_SHUTDOWN;
  return DURO_SUSPEND;
}

int step_flush(duro_step *a) {
  if (a->slot)
    ledger_set_state(a->slot, LEDGER_IDLE);
  int orphaned;
  int rc = engine_commit_step(a->e, &a->batch, &orphaned);
  journal_batch_reset(&a->batch);
  step_running_act = a; /* others ran on this thread meanwhile */
  if (orphaned) {
    a->suspended = 1;
    a->reason = SUSPEND_ABANDONED;
    return DURO_E_IO;
  }
  step_slot_bind(a);
  if (rc) {
    a->storage_failed = 1;
    log_at(DURO_LOG_ERROR, &a->log, "journal commit failed: %s",
           journal_errmsg(a->e->j));
  }
  return rc;
}

/* The instance's first activation is about to run a callback: its start
 * (when the activation began, not when it ends), with its lifecycle
 * "started" message, joins the batch the attempt's outcome commits, so
 * the next activation does not take its place.  Not a commit of its own:
 * that cost every new instance a second group commit (H1 -8%); a crash
 * inside the first callback leaves the start to the next activation.  An
 * activation that runs no callback stores its start with its final row.
 * Returns 0. */
static int save_start(duro_step *a) {
  if (a->inst.started_ms != JOURNAL_NONE)
    return 0;
  journal_instance *row = &a->start_row;
  *row = a->inst; /* borrowed strings */
  row->started_ms = a->begun_ms;
  journal_op *op = journal_batch_add(&a->batch, JOP_INSTANCE_SET);
  op->inst = row;
  engine_drivers_instance_changed(a->e, a->wf, &a->batch, row, a->inst.status,
                                  JOURNAL_NONE, a->begun_ms);
  a->inst.started_ms = a->begun_ms;
  return 0;
}

/* A callback about to run on this engine thread takes a place in its
 * plugin's bound (engine_admit.c), waiting parked for one.  Returns 1
 * when the call must suspend instead: the engine stops, a pause or
 * terminate came, or the watchdog gave up on this activation meanwhile. */
static int admit(duro_step *a) {
  engine_admit *g = a->wf->admit;
  if (!g || !a->worker || step_is_remote(a))
    return 0;
  int rc;
  /* a request whose write failed was taken back: wait again */
  while ((rc = engine_admit_enter(a->e, g, a->ent)) == ADMIT_BOUNDARY &&
         !at_boundary(a))
    ;
  if (rc != ADMIT_IN)
    step_running_act = a; /* others may have run on this thread meanwhile */
  if (rc == ADMIT_ORPHANED) {
    a->suspended = 1;
    a->reason = SUSPEND_ABANDONED;
    return 1;
  }
  if (rc != ADMIT_IN)
    step_slot_bind(a);
  if (rc == ADMIT_BOUNDARY)
    return 1; /* at_boundary set the reason */
  a->admitted = g;
  return 0;
}

/* The callback returned (or never started): its place goes back. */
static void admit_leave(duro_step *a) {
  if (a->admitted) {
    engine_admit_leave(a->e, a->admitted);
    a->admitted = NULL;
  }
}

/* What the step names (its resource) claimed of the drivers before its
 * attempt, ahead of a place in the plugin's bound, so that a wait for it
 * holds none.  Returns 1 when the activation waits instead: its instance
 * waiting for the driver's wake, the wait's type a reason (no event's),
 * its thread free.  A refusal is the attempt's to fail with (do_call). */
static int claim(duro_step *a, do_call *call) {
  call->claim.driver = -1;
  call->refused = NULL;
  if (!call->c.resource)
    return 0;
  const char *wait_type = NULL;
  int64_t recheck_ms = 0;
  int rc = engine_drivers_step_claim(a->e, call->c.resource, a->inst.rowid,
                                     a->wf->name, call->key, &call->claim,
                                     &wait_type, &recheck_ms,
                                     &call->refused_name, &call->refused);
  if (rc != DURO_STEP_CLAIM_WAIT)
    return 0;
  a->held = 1;
  suspend_until(a, deadline_wake(a, recheck_ms), wait_type);
  return 1;
}

int do_enter(duro_step *a, do_call *call) {
  if (save_start(a) != 0) {
    a->suspended = 1;
    if (a->reason != SUSPEND_ABANDONED)
      a->reason = SUSPEND_SHUTDOWN;
    return 1;
  }
  /* Waiting for a resource, a place or at the gate is no part of the
   * attempt's time. */
  if (claim(a, call))
    return 1;
  if (admit(a)) {
    engine_drivers_step_unclaim(a->e, &call->claim);
    free(call->refused);
    return 1;
  }
  call->gate = step_gate_enter(a, call->s, call->s->attempts + 1);
  if (call->gate < 0) {
    admit_leave(a);
    engine_drivers_step_unclaim(a->e, &call->claim);
    free(call->refused);
    a->suspended = 1;
    a->reason = SUSPEND_SHUTDOWN;
    return 1;
  }
  return 0;
}

/* Everything before the callback: the journal's answer when it has one,
 * the step's configuration, a retry its last attempt left owed, the
 * lease, the back-off and the gate.  Returns 1 with *rc set when the call
 * ends here. */
static int do_prepare(duro_step *a, const char *name,
                      const duro_step_config *cfg, duro_step_fn fn,
                      const char **result, do_call *call, duro_rc *rc) {
  uint32_t count;
  if (result)
    *result = NULL;
  if (step_begin(a, name, DURO_STEP_DO, &call->key, &count, &call->s, rc) ||
      from_journal(a, call->s, call->key, result, rc))
    return 1;
  *rc = DURO_ERROR;
  if (!fn) {
    fail_with(a, "Error", "duro_do needs a callback");
    return 1;
  }
  if (do_read_config(a, call->key, cfg, &call->c))
    return 1;
  if (!call->s) {
    if (step_limit_reached(a, call->key))
      return 1;
    call->s = step_new(a, call->key, name, count, DURO_STEP_DO);
  }
  journal_step *s = call->s;
  if (retry_orphaned(a, s, &call->c, rc))
    return 1;
  *rc = DURO_SUSPEND;
  if (lease_lapsed(a))
    return 1;
  int64_t now = now_ms(a);
  if (s->wake_ms != JOURNAL_NONE && now < s->wake_ms) {
    *rc = suspend_until(a, s->wake_ms, NULL); /* back-off not over */
    return 1;
  }
  return do_enter(a, call);
}

/* The callback is about to run: the ledger says so (should the process
 * die inside it, the next engine counts a crash), and the watchdog may
 * find it through the worker.  Returns 1 when the lease may have lapsed,
 * or a terminate or pause came since the step boundary: the callback
 * must not start.  (A terminate sets its flag, then looks for the
 * worker's attempt under the worker's mutex; the attempt is published
 * under that mutex before the flag is read here, so either the terminate
 * finds the attempt and abandons it, or the flag is seen here.) */
static int attempt_end(duro_step *a, duro_attempt *at);

static int attempt_begin(duro_step *a, duro_attempt *at) {
  /* Looked at again here, as late as can be: save_start's commit and the
   * gate may have waited since step_api_do looked, and a host frozen meanwhile
   * must not start the callback. */
  if (lease_lapsed(a)) {
    attempt_gate_leave(at);
    return 1;
  }
  ledger_slot *sl = step_is_remote(a) ? NULL : a->slot;
  if (sl) {
    const journal_step *s = at->step;
    sl->rowid = a->inst.rowid;
    sl->attempt = at->number;
    sl->count = s->count;
    sl->seq = s->seq;
    sl->started_ms = at->started_ms;
    sl->deadline_ms = at->deadline_ms;
    sl->step_started_ms = s->started_ms;
    ledger_copy(sl->key, sizeof sl->key, s->key);
    ledger_copy(sl->name, sizeof sl->name, s->name);
    ledger_set_state(sl, LEDGER_ATTEMPT);
  }
  if (a->worker && !step_is_remote(a)) {
    pthread_mutex_lock(&a->worker->mu);
    a->worker->attempt = at;
    pthread_mutex_unlock(&a->worker->mu);
  }
  if (!at_boundary(a))
    return 0;
  /* Withdrawn before it ran; if the terminate already gave up on it, the
   * activation is the watchdog's to account for (attempt_end says so). */
  attempt_end(a, at);
  return 1;
}

/* The callback returned.  Returns 1 when the watchdog gave up on it
 * meanwhile: then nothing of the activation may be written any more. */
static int attempt_end(duro_step *a, duro_attempt *at) {
  int abandoned = 0;
  if (a->worker && !step_is_remote(a)) {
    pthread_mutex_lock(&a->worker->mu);
    abandoned = a->worker->abandoned;
    a->worker->attempt = NULL;
    pthread_mutex_unlock(&a->worker->mu);
  }
  attempt_gate_leave(at);
  if (abandoned) {
    a->suspended = 1;
    a->reason = SUSPEND_ABANDONED;
    return 1;
  }
  if (a->slot && !step_is_remote(a))
    ledger_set_state(a->slot, LEDGER_ACTIVATION);
  return 0;
}

/* Runs the callback as attempt `at`.  Returns 1 when the call must
 * suspend: a terminate or pause won the race before it started, or the
 * watchdog gave up on it meanwhile (its outcome was recorded as a
 * timeout). */
int do_run_attempt(duro_step *a, duro_attempt *at, duro_step_fn fn, void *arg,
                   int *fn_rc) {
  if (at->failed) {
    /* refused what it claimed: failed for good, its callback not run */
    attempt_gate_leave(at);
    admit_leave(a);
    *fn_rc = -1;
    return 0;
  }
  if (attempt_begin(a, at)) {
    admit_leave(a);
    engine_drivers_step_unclaim(a->e, &at->claim);
    return 1;
  }
  step_running_attempt = at;
  int64_t t0 = metrics_now_us();
  *fn_rc = fn(at, arg);
  metrics_hist_observe(&a->e->m.attempt_us, metrics_now_us() - t0);
  step_running_attempt = NULL;
  admit_leave(a);
  engine_drivers_step_unclaim(a->e, &at->claim);
  if (attempt_end(a, at) || a->worker_died || at->withdrawn) {
    attempt_clear(at); /* a dead worker's attempt: step_worker_died */
    return 1;
  }
  return 0;
}

/* Judges the attempt that returned `fn_rc`: NULL when it succeeded, else
 * the error's name, with its message in *err_msg (malloc'ed) and *final
 * set when no retry could change it. */
static const char *do_verdict(duro_step *a, const duro_attempt *at,
                              const do_call *call, int fn_rc, int overran,
                              char **err_msg, int *final) {
  const char *key = call->key;
  *err_msg = NULL;
  *final = 0;
  /* A result that is not JSON was refused when it was set (the callback
   * may have returned that code, or ignored it). */
  if (at->failed || (fn_rc != 0 && !at->bad_result)) {
    *err_msg = at->message ? xstrdup(at->message)
                           : xasprintf("step callback returned %d", fn_rc);
    *final = at->final;
    if (at->fail_name)
      return at->fail_name;
    return at->final ? DURO_ERR_NON_RETRYABLE : DURO_ERR_ERROR;
  }
  if (overran) {
    char buf[48];
    *err_msg =
        xasprintf("step \"%s\" attempt %u exceeded its timeout of %s", key,
                  at->number, format_ms(buf, sizeof buf, call->c.timeout_ms));
    return DURO_ERR_TIMEOUT;
  }
  if (at->bad_result) {
    *err_msg = xstrdup(at->bad_result);
    *final = 1; /* the same code would set the same text */
    return duro_err_name(DURO_E_INVALID_OUTPUT);
  }
  /* duro_attempt_result parsed it already: only its size is left. */
  const char *text = at->result ? at->result : "null";
  int64_t limit = a->e->max_step_result;
  if (limit > 0 && (int64_t)strlen(text) > limit) {
    *err_msg = xasprintf("step \"%s\" returned %zu bytes; the limit is "
                         "%" PRId64 " bytes",
                         key, strlen(text), limit);
    *final = 1;
    return duro_err_name(DURO_E_OUTPUT_TOO_LARGE);
  }
  if (a->state_bytes + (int64_t)strlen(text) > a->e->max_instance_state) {
    *err_msg = xasprintf("step \"%s\" would bring the instance's state to "
                         "%" PRId64 " bytes; the limit is %" PRId64,
                         key, a->state_bytes + (int64_t)strlen(text),
                         a->e->max_instance_state);
    *final = 1;
    return duro_err_name(DURO_E_STATE_TOO_LARGE);
  }
  return NULL;
}

/* The attempt succeeded: its result, with its queue sends and events, is
 * on disk before the plugin sees it. */
static duro_rc do_record_success(duro_step *a, const do_call *call,
                                 duro_attempt *at, const char **result) {
  journal_step *s = call->s;
  /* The successful attempt is kept in the step row: one row written per
   * step instead of two. */
  s->status = DURO_STEP_COMPLETE;
  s->attempt_started_ms = call->started;
  s->build = (char *)a->build_hash;
  /* The step's error is that of a pending retry; a success ends it (the
   * failed attempts keep theirs). */
  s->error = NULL;
  s->result = arena_strdup(a, at->result ? at->result : "null");
  a->state_bytes += (int64_t)strlen(s->result);
  s->ended_ms = call->ended;
  s->wake_ms = JOURNAL_NONE;
  /* Its queue sends and events commit in the same transaction as its
   * result: exactly once, with the step. */
  int sent = 0;
  size_t first_send = a->batch.n;
  for (size_t i = 0; i < at->sends.n; i++) {
    sent |= at->sends.ops[i].kind == JOP_MESSAGE_INSERT;
    *journal_batch_add(&a->batch, at->sends.ops[i].kind) = at->sends.ops[i];
  }
  size_t n_sends = at->sends.n;
  put_step(a, s);
  attempt_clear(at);
  int flushed = step_flush(a);
  /* The ops stay readable after the commit reset the batch: wake the
   * receivers of its events.  Even when this activation cannot go on
   * (abandoned meanwhile, or the write failed): a receiver woken for
   * nothing only replays and waits again. */
  for (size_t i = first_send; i < first_send + n_sends; i++)
    if (a->batch.ops[i].kind == JOP_WAKE_IF_WAITING)
      engine_event_stored(a->e, &a->batch.ops[i]);
  if (flushed != 0) {
    a->suspended = 1;
    if (a->reason != SUSPEND_ABANDONED)
      a->reason = SUSPEND_SHUTDOWN;
    return DURO_SUSPEND;
  }
  metrics_add(&a->e->m.steps_completed, 1);
  if (sent)
    engine_kick_scheduler(a->e); /* a consumer may take them now */
  if (result)
    *result = s->result;
  return DURO_OK;
}

/* The attempt failed with `err_name` and `err_msg` (freed here): the
 * attempt is recorded, then the step waits for its retry (DO_WAIT, at
 * s->wake_ms) or, when final or out of retries, errors (DO_ERRORED,
 * s->error); DO_SUSPEND when a terminate came meanwhile. */
static int do_record_failure(duro_step *a, const do_call *call,
                             duro_attempt *at, const char *err_name,
                             char *err_msg, int final) {
  journal_step *s = call->s;
  const char *key = call->key;
  const do_config *c = &call->c;
  metrics_add(&a->e->m.attempts_failed, 1);
  const char *err = arena_take(a, error_json(err_name, err_msg));
  journal_op *op = journal_batch_add(&a->batch, JOP_ATTEMPT_PUT);
  op->rowid = a->inst.rowid;
  op->attempt = (journal_attempt){.key = s->key,
                                  .number = at->number,
                                  .started_ms = call->started,
                                  .ended_ms = call->ended,
                                  .error = err,
                                  .build = a->build_hash};
  activation_trace_error(a, call->ended, s->key, at->number, err);
  attempt_clear(at); /* a failed attempt sent nothing */
  uint32_t charged = final ? at->number : charged_attempts(a, key, at->number);
  if (!final && charged <= c->limit) {
    int64_t wait = backoff_ms(c->delay_ms, c->backoff, charged);
    log_at(DURO_LOG_INFO, &a->log,
           "step \"%s\" attempt %u failed: %s; "
           "retrying in %" PRId64 " ms",
           key, at->number, err_msg, wait);
    free(err_msg);
    metrics_add(&a->e->m.retries_scheduled, 1);
    s->wake_ms = call->ended + wait;
    s->error = (char *)err;
    put_step(a, s);
    return DO_WAIT;
  }
  if (a->ent && !a->unwind &&
      __atomic_load_n(&a->ent->terminate_req, __ATOMIC_ACQUIRE)) {
    /* A terminate answered while this last attempt ran (and failed it,
     * or its failure raced it): the instance ends terminated, as the
     * answer said, not errored.  (An unwind's rollbacks run on.) */
    free(err_msg);
    a->suspended = 1;
    a->reason = SUSPEND_TERMINATE;
    return DO_SUSPEND;
  }
  log_at(DURO_LOG_WARN, &a->log, "step \"%s\" failed after %u attempt%s: %s",
         key, at->number, at->number == 1 ? "" : "s", err_msg);
  free(err_msg);
  s->status = DURO_STEP_ERRORED;
  s->error = (char *)err;
  s->ended_ms = call->ended;
  s->wake_ms = JOURNAL_NONE;
  put_step(a, s);
  return step_error_durable(a) == DURO_ERROR ? DO_ERRORED : DO_SUSPEND;
}

void do_attempt_init(duro_step *a, do_call *call, duro_attempt *at, int *cut) {
  journal_step *s = call->s;
  call->started = now_ms(a);
  /* its timeout cut to the instance's deadline (*cut) */
  int64_t timeout = deadline_cap(a, call->started, call->c.timeout_ms, cut);
  *at = (duro_attempt){
      .act = a,
      .step = s,
      .number = s->attempts + 1,
      .started_ms = call->started,
      .deadline_ms = call->started + timeout,
      .timeout_ms = timeout,
      .deadline_mono = engine_mono_ms(a->e) + timeout,
      .gate = call->gate,
      .claim = call->claim,
      /* a refused claim fails it for good (do_run_attempt runs nothing) */
      .failed = call->refused != NULL,
      .final = call->refused != NULL,
      .fail_name = call->refused ? call->refused_name : NULL,
      .message = call->refused,
      /* A restart's re-run is a new request: "@<restarts>" sets it apart. */
      .idempotency_key = a->inst.restarts
                             ? arena_printf(a, "%s/%s@%" PRId64, a->inst.id,
                                            call->key, a->inst.restarts)
                             : arena_printf(a, "%s/%s", a->inst.id, call->key),
  };
  call->claim.driver = -1;
  call->refused = NULL;
}

int do_conclude(duro_step *a, do_call *call, duro_attempt *at, int fn_rc,
                int cut, const char **result) {
  journal_step *s = call->s;
  call->ended = now_ms(a);
  int overran = engine_mono_ms(a->e) > at->deadline_mono;
  char *err_msg;
  int final;
  const char *err_name =
      do_verdict(a, at, call, fn_rc, overran, &err_msg, &final);
  s->attempts = at->number;
  if (!err_name)
    return do_record_success(a, call, at, result) == DURO_OK ? DO_DONE
                                                             : DO_SUSPEND;
  if (!(cut && overran))
    return do_record_failure(a, call, at, err_name, err_msg, final);
  /* The instance's deadline came while the callback ran: the attempt is
   * the last, and the instance ends with it, whatever run() would do
   * with the step's error. */
  free(err_msg);
  err_msg = xasprintf("step \"%s\" attempt %u was running at the instance's "
                      "deadline",
                      call->key, at->number);
  if (do_record_failure(a, call, at, DURO_ERR_TIMED_OUT, err_msg, 1) ==
      DO_ERRORED) {
    a->last_error = s->error;
    a->suspended = 1;
    a->reason = SUSPEND_TIMED_OUT;
  }
  return DO_SUSPEND;
}

/* duro_do: answered from the journal when it can be, else one attempt of
 * the callback, whose outcome is recorded before the call returns.  On
 * DURO_OK *done (if not NULL) is the completed step. */
static duro_rc do_step(duro_step *a, const char *name,
                       const duro_step_config *cfg, duro_step_fn fn, void *arg,
                       const char **result, journal_step **done) {
  do_call call;
  duro_rc rc;
  if (do_prepare(a, name, cfg, fn, result, &call, &rc)) {
    if (rc == DURO_OK && done)
      *done = call.s;
    return rc;
  }
  duro_attempt at;
  int cut, fn_rc;
  do_attempt_init(a, &call, &at, &cut);
  if (do_run_attempt(a, &at, fn, arg, &fn_rc))
    return DURO_SUSPEND;
  switch (do_conclude(a, &call, &at, fn_rc, cut, result)) {
  case DO_DONE:
    if (done)
      *done = call.s;
    return DURO_OK;
  case DO_WAIT:
    return suspend_until(a, call.s->wake_ms, NULL);
  case DO_ERRORED:
    a->last_error = call.s->error;
    return DURO_ERROR;
  default:
    return DURO_SUSPEND;
  }
}

duro_rc step_api_do(duro_step *a, const char *name, const duro_step_config *cfg,
                    duro_step_fn fn, void *arg, const char **result) {
  return do_step(a, name, cfg, fn, arg, result, NULL);
}

/* duro_do_with_rollback: duro_do, then rb (NULL: nothing) registered to
 * undo the step once it completed (step_rollback.c), on every replay
 * too.  Its configuration is checked before the step runs: a step whose
 * rollback could not run is not begun. */
duro_rc step_api_do_with_rollback(duro_step *a, const char *name,
                                  const duro_step_config *cfg, duro_step_fn fn,
                                  void *arg, const duro_rollback_cfg *rb,
                                  const char **result) {
  if (rb && !a->suspended && step_rollback_check(a, name, rb) != 0) {
    if (result)
      *result = NULL;
    return DURO_ERROR;
  }
  journal_step *done = NULL;
  duro_rc rc = do_step(a, name, cfg, fn, arg, result, &done);
  if (rc == DURO_OK && step_rollback_register(a, done, rb) != 0)
    return DURO_ERROR;
  return rc;
}
