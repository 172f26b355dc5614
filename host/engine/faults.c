/* faults.c — plugin faults made per-instance events.
 *
 * Crashes: when plugin code brings the engine process down, the
 * supervisor keeps the crash ledger (ledger.h) and starts a new engine,
 * which records, before any activation runs, what the dead one's threads
 * were doing: an attempt whose callback was running becomes a failed
 * attempt `plugin.crashed` (its step's retry policy then applies, at the
 * step's next call), and a step that crashed the engine
 * engine.max_crashes times ends its instance errored, whatever its retry
 * policy says.  A crash in run() outside any step ends the instance at
 * once: that code runs again on every activation, so it would crash
 * again.  Only the thread the crash handlers blamed counts.
 *
 * A death by SIGKILL is seen by no handler: the callback may have raised
 * it, the OOM killer may have sent it for the memory a callback took, or
 * an operator.  Every step then inside its callback is charged a kill
 * (ledger.h, suspects), and its step runs again alone (step_gate.c): no
 * other callback starts while it runs, so a later kill in it is its own.
 * A step charged engine.max_crashes kills (with its journaled crashes)
 * ends its instance errored `plugin.crashed`, as a crash the handlers saw.
 * An instance that merely ran beside a poisoned one is charged at most
 * once that way (it never runs beside it again), and its charge goes when
 * its callback returns; a healthy attempt ends errored only if the engine
 * is killed while it runs alone max_crashes - 1 more times.  Activations
 * outside any callback are never charged.
 *
 * Cut short: an attempt inside its callback at a death it did not cause
 * (a kill below max_crashes, a crash of another thread) is journaled as
 * failed with `attempt.cut_short`, once, here; so is one still running
 * when a stop's grace runs out, by the stopping engine (the watchdog's
 * way of giving up on it, without its error).  Its step is due again at
 * once as the next attempt, and the retry policy does not charge it
 * (step_do.c): nothing is written before a callback for it.
 *
 * Hangs: the watchdog thread looks at every worker ten times a second.
 * An attempt past its deadline is given up on: recorded as a failed
 * attempt (TimeoutError), its instance released to run again under its
 * retry policy, its worker replaced (up to max_hung replacements) so
 * healthy instances keep running.  The stuck thread discards whatever its
 * callback returns and exits when it does.  The handshake is the
 * worker's mutex (engine_internal.h): an attempt's end and the watchdog
 * never both decide its outcome. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "engine_internal.h"
#include "error.h"
#include "log.h"
#include "util.h"

#define CRASHED DURO_ERR_CRASHED
#define WATCHDOG_PERIOD_MS 100

/* ---- crashes ------------------------------------------------------------ */

typedef struct crash_count {
  const char *key;
  uint32_t n;
} crash_count;

static void count_crash(void *ctx, const char *key, uint32_t number,
                        int64_t started_ms, int64_t ended_ms, const char *error,
                        const char *build) {
  (void)number, (void)started_ms, (void)ended_ms, (void)build;
  crash_count *c = ctx;
  if (!strcmp(key, c->key) && error &&
      strstr(error, "\"name\":\"" CRASHED "\""))
    c->n++;
}

int engine_crashes_of(duro_engine *e, int64_t rowid, const char *key,
                      uint32_t *n) {
  crash_count cc = {.key = key};
  int rc = journal_attempts_each(e->j, rowid, count_crash, &cc);
  *n = cc.n;
  return rc;
}

static void row_set(char **field, char *value) {
  free(*field);
  *field = value;
}

/* Ends the instance errored with `error` (owned by the row from now),
 * with the drivers' ops for the change (a lifecycle message) in b. */
static void instance_errored(duro_engine *e, journal_batch *b,
                             journal_instance *in, char *error, int64_t now) {
  duro_status from = in->status;
  in->status = DURO_STATUS_ERRORED;
  row_set(&in->error, error);
  in->ended_ms = now;
  in->wake_ms = JOURNAL_NONE;
  journal_op *op = journal_batch_add(b, JOP_INSTANCE_SET);
  op->inst = in;
  op->clear_control = 1;
  wf_reg *wf = engine_find_workflow(e, in->workflow);
  engine_drivers_instance_changed(e, wf, b, in, from, in->started_ms, now);
  engine_retention_ops(wf, b, in, from);
}

/* The step row the crashed attempt belongs to: the journaled one, or the
 * one the dead activation had not committed yet (a do step, waiting). */
static journal_step step_of(const journal_step *steps, size_t n,
                            const ledger_slot *sl) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(steps[i].key, sl->key))
      return steps[i];
  return (journal_step){.key = (char *)sl->key,
                        .name = (char *)sl->name,
                        .count = sl->count,
                        .seq = sl->seq,
                        .type = DURO_STEP_DO,
                        .status = DURO_STEP_WAITING,
                        .started_ms = sl->step_started_ms,
                        .ended_ms = JOURNAL_NONE,
                        .wake_ms = JOURNAL_NONE,
                        .attempt_started_ms = JOURNAL_NONE};
}

void engine_cut_short(journal_batch *b, const log_ctx *where, int64_t rowid,
                      journal_step *s, uint32_t number, int64_t started_ms,
                      const char *build, const char *by, int64_t now,
                      char **owned) {
  char t[32];
  char *msg = xasprintf("cut short by %s at %s", by, clock_iso_utc(t, now));
  char *err = *owned = error_json(DURO_ERR_CUT_SHORT, msg);
  journal_op *op = journal_batch_add(b, JOP_ATTEMPT_PUT);
  op->rowid = rowid;
  op->attempt = (journal_attempt){.key = s->key,
                                  .number = number,
                                  .started_ms = started_ms,
                                  .ended_ms = now,
                                  .error = err,
                                  .build = build};
  /* Due at once: no retry policy applies (retry_orphaned in step_do.c looks
   * only at a step with no wake time), no back-off is waited. */
  s->attempts = number;
  s->error = err;
  s->status = DURO_STEP_WAITING;
  s->wake_ms = now;
  op = journal_batch_add(b, JOP_STEP_PUT);
  op->rowid = rowid;
  op->step = s;
  log_at(DURO_LOG_WARN, where,
         "step \"%s\" attempt %u was %s: it runs again as attempt %u", s->key,
         number, msg, number + 1);
  free(msg);
}

/* How the last engine died, in a few words, into buf[48]: "SIGKILL",
 * "exit status 1". */
static const char *death_short(const ledger *l, char *buf) {
  int code;
  ledger_death how = ledger_last_death(l, &code);
  const char *abbrev = how == LEDGER_DEATH_SIGNAL ? sigabbrev_np(code) : NULL;
  if (how == LEDGER_DEATH_SIGNAL)
    snprintf(buf, 48, "SIG%s", abbrev ? abbrev : "?");
  else
    snprintf(buf, 48, "exit status %d", code);
  return buf;
}

/* Adds to `b` the attempt of slot `sl` cut short by the death, its step
 * row `s` rewritten: the step runs again at once as the next attempt
 * (alone when it was charged a kill). */
static void add_cut_short(duro_engine *e, journal_batch *b,
                          const journal_instance *in, const ledger_slot *sl,
                          journal_step *s, const char *build, const char *how,
                          uint32_t kills, uint32_t crashes, int64_t now,
                          char **owned) {
  char death[48];
  char *by =
      xasprintf("the engine's death (%s)", death_short(e->ledger, death));
  log_ctx where = {.workflow = in->workflow, .instance = in->id};
  engine_cut_short(b, &where, in->rowid, s, sl->attempt, sl->started_ms, build,
                   by, now, owned);
  free(by);
  if (kills)
    log_write(DURO_LOG_WARN, NULL,
              "%s/%s: step \"%s\" was inside its callback when the engine "
              "was %s (%u of %u): it runs again with no other callback "
              "beside it",
              in->workflow, in->id, sl->key, how, crashes, e->max_crashes);
}

/* Adds to `b` the attempt of slot `sl` as the crash's (plugin.crashed),
 * its step row `s` rewritten; errors the instance when its step reached
 * max_crashes. */
static void add_crashed(duro_engine *e, journal_batch *b, journal_instance *in,
                        const ledger_slot *sl, journal_step *s,
                        const char *build, const char *how, uint32_t kills,
                        uint32_t crashes, int64_t now, char **owned) {
  char *msg = xasprintf("step \"%s\" attempt %u crashed the engine: %s",
                        sl->key, sl->attempt, how);
  char *err = owned[0] = error_json(CRASHED, msg);
  journal_op *op = journal_batch_add(b, JOP_ATTEMPT_PUT);
  op->rowid = in->rowid;
  op->attempt = (journal_attempt){.key = sl->key,
                                  .number = sl->attempt,
                                  .started_ms = sl->started_ms,
                                  .ended_ms = now,
                                  .error = err,
                                  .build = build};
  /* The policy is applied at the step's next call (retry_orphaned in
   * step_do.c): a failed attempt with no wake time. */
  s->attempts = sl->attempt;
  s->error = err;
  s->status = DURO_STEP_WAITING;
  s->wake_ms = JOURNAL_NONE;
  log_write(DURO_LOG_WARN, NULL, "%s/%s: %s (crash %u of %u)", in->workflow,
            in->id, msg, crashes, e->max_crashes);
  if (crashes >= e->max_crashes) {
    s->status = DURO_STEP_ERRORED;
    s->ended_ms = now;
    char *why =
        kills ? xasprintf("step \"%s\" was inside its callback at %u deaths "
                          "of the engine (engine.max_crashes is %u), the later "
                          "ones with no other callback beside it; the last "
                          "time the engine was %s (by the callback itself, or "
                          "by the OOM killer for the memory it took)",
                          sl->key, crashes, e->max_crashes, how)
              : xasprintf("step \"%s\" crashed the engine %u times "
                          "(engine.max_crashes is %u); the last time it was "
                          "%s",
                          sl->key, crashes, e->max_crashes, how);
    instance_errored(e, b, in, error_json(CRASHED, why), now);
    log_write(DURO_LOG_WARN, NULL, "%s/%s: errored: %s", in->workflow, in->id,
              why);
    free(why);
  }
  free(msg);
  op = journal_batch_add(b, JOP_STEP_PUT);
  op->rowid = in->rowid;
  op->step = s;
}

/* Journals the attempt of slot `sl` the death stopped: the crash's when
 * the slot is guilty, or a kill reached max_crashes; any other one (a
 * callback beside the crash, one charged a kill below max_crashes) was
 * cut short by it.  A slot whose attempt ended is stale: nothing. */
static int crash_in_attempt(duro_engine *e, journal_batch *b,
                            journal_instance *in, const ledger_slot *sl,
                            int guilty, const char *how, uint32_t kills,
                            int64_t now, char **owned) {
  journal_step *steps = NULL;
  size_t n = 0;
  int rc = journal_steps_load(e->j, in->rowid, &steps, &n);
  crash_count cc = {.key = sl->key};
  if (rc == 0)
    rc = journal_attempts_each(e->j, in->rowid, count_crash, &cc);
  if (rc) {
    journal_steps_free(steps, n);
    return rc;
  }
  journal_step *s = xmalloc(sizeof *s);
  *s = step_of(steps, n, sl);
  if (s->status == DURO_STEP_COMPLETE || s->status == DURO_STEP_ERRORED ||
      s->attempts >= sl->attempt) {
    ledger_suspect_clear(e->ledger, in->rowid, sl->key);
    goto done;
  }
  wf_reg *wf = engine_find_workflow(e, in->workflow);
  const char *build = in->build ? in->build : wf ? build_newest_hash(wf) : NULL;
  /* A kill counts once the attempt is sure to be the one to blame (see
   * engine_record_crashes): until then the interrupted attempt is cut
   * short, and runs again alone. */
  uint32_t crashes = cc.n + (kills ? kills : 1);
  if (!guilty && (!kills || crashes < e->max_crashes))
    add_cut_short(e, b, in, sl, s, build, how, kills, crashes, now, owned);
  else
    add_crashed(e, b, in, sl, s, build, how, kills, crashes, now, owned);
  rc = journal_commit(e->j, b);
  if (rc == 0)
    engine_batch_woke(e, b); /* the drivers' events in it */
done:
  free(s);
  journal_steps_free(steps, n);
  return rc;
}

/* On a store several hosts share, a dead engine's instance may have
 * moved while this one was not running (a host that lost its lease and
 * exits, then starts again as a new host): another live host runs it and
 * may have completed the very step the ledger names, which a record
 * written here would set back.  Only an instance this host runs (taken
 * over at start, or adopted now from a host that is gone) is recorded. */
static int runs_here(duro_engine *e, const journal_instance *in) {
  int64_t me = journal_host(e->j), owner = 0;
  if (!me)
    return 1; /* one host per journal */
  return journal_adopt(e->j, in->rowid, &owner) == 0 && owner == me;
}

static int record_crash(duro_engine *e, const ledger_slot *sl, int in_attempt,
                        int guilty, const char *how, uint32_t kills,
                        int64_t now) {
  journal_instance in = {0};
  int rc = journal_instance_get_rowid(e->j, sl->rowid, &in);
  if (rc == DURO_E_NOT_FOUND)
    return 0;
  journal_batch b = {0};
  char *owned[1] = {NULL}; /* the attempt's error */
  if (rc == 0 && !runs_here(e, &in))
    ; /* another host runs it now: its journal is that host's to write */
  else if (rc == 0 && duro_status_ended(in.status))
    ; /* it ended meanwhile: nothing to record */
  else if (rc == 0 && in_attempt)
    rc = crash_in_attempt(e, &b, &in, sl, guilty, how, kills, now, owned);
  else if (rc == 0) {
    char *why = xasprintf("run() crashed the engine outside any step (%s); "
                          "code outside steps runs again on every "
                          "activation, so it would crash again",
                          how);
    instance_errored(e, &b, &in, error_json(CRASHED, why), now);
    log_write(DURO_LOG_WARN, NULL, "%s/%s: errored: %s", in.workflow, in.id,
              why);
    free(why);
    rc = journal_commit(e->j, &b);
    if (rc == 0)
      engine_batch_woke(e, &b);
  }
  /* It had not ended (see above): now it may have. */
  if (rc == 0 && in.status == DURO_STATUS_ERRORED)
    engine_watch_fire(e, in.rowid, duro_status_name(DURO_STATUS_ERRORED));
  free(owned[0]);
  journal_batch_free(&b);
  journal_instance_clear(&in);
  return rc;
}

/* Suspects whose instance ended or went away (terminated while it
 * waited, say) would keep every callback behind the gate: forgotten. */
static void prune_suspects(duro_engine *e) {
  ledger *l = e->ledger;
  for (uint32_t i = 0; i < LEDGER_SUSPECTS && ledger_has_suspects(l); i++) {
    int64_t rowid = ledger_suspect_rowid(l, i);
    if (!rowid)
      continue;
    journal_instance in = {0};
    int rc = journal_instance_get_rowid(e->j, rowid, &in);
    if (rc == DURO_E_NOT_FOUND || (rc == 0 && in.status != DURO_STATUS_QUEUED &&
                                   in.status != DURO_STATUS_WAITING))
      ledger_suspect_clear(l, rowid, NULL);
    journal_instance_clear(&in);
  }
}

/* An attempt inside its callback when the engine died of a SIGKILL no
 * handler saw gets one kill; 0 for every other death or slot. */
static uint32_t charge_kill(duro_engine *e, const ledger_slot *sl,
                            ledger_state st, ledger_death death, int code,
                            int blamed) {
  if (st != LEDGER_ATTEMPT || blamed != -1 || death != LEDGER_DEATH_SIGNAL ||
      code != SIGKILL)
    return 0;
  return ledger_suspect_charge(e->ledger, sl->rowid, sl->key);
}

int engine_record_crashes(duro_engine *e) {
  ledger *l = e->ledger;
  int code;
  ledger_death death = ledger_last_death(l, &code);
  if (death == LEDGER_DEATH_NONE) {
    prune_suspects(e);
    return 0;
  }
  int blamed = ledger_last_blamed(l);
  char how[96];
  ledger_death_text(l, how, sizeof how);
  int64_t now = duro_clock_now(e->clock);
  int rc = 0;
  for (uint32_t i = 0; i < ledger_size(l) && rc == 0; i++) {
    const ledger_slot *sl = ledger_last_slot(l, i);
    ledger_state st = ledger_get_state(sl);
    int driver = engine_drivers_owns(e, sl); /* a queue batch, say */
    if (st != LEDGER_ATTEMPT && st != LEDGER_ACTIVATION && !driver)
      continue;
    /* The thread the handlers caught; with none caught, an exit that
     * skipped them (_exit from a callback) is laid on the callbacks. */
    int guilty = blamed >= 0 ? (int)i == blamed
                             : blamed == -1 && death == LEDGER_DEATH_EXIT &&
                                   st != LEDGER_ACTIVATION;
    /* A SIGKILL: every callback then running is charged a kill, and runs
     * again alone (step_gate.c); once alone at max_crashes deaths it is the
     * one, as a crash the handlers saw would be. */
    uint32_t kills = charge_kill(e, sl, st, death, code, blamed);
    if (driver)
      rc = engine_drivers_recover(e, sl, guilty, how);
    else if (guilty || st == LEDGER_ATTEMPT)
      rc = record_crash(e, sl, st == LEDGER_ATTEMPT, guilty, how, kills, now);
  }
  if (rc == 0) {
    ledger_last_clear(l);
    prune_suspects(e);
  } else
    log_error("cannot record the crashed attempts: %s", journal_errmsg(e->j));
  return rc;
}

/* ---- hangs -------------------------------------------------------------- */

static void record_hung(duro_engine *e, hung_attempt *h, int64_t now) {
  journal_batch b = {0};
  char *err = NULL;
  log_ctx where = {.workflow = h->workflow, .instance = h->id};
  if (h->cut_short_by) {
    engine_cut_short(&b, &where, h->rowid, &h->step, h->number, h->started_ms,
                     h->build, h->cut_short_by, now, &err);
  } else {
    err = error_json(h->error_name, h->message);
    journal_op *op = journal_batch_add(&b, JOP_ATTEMPT_PUT);
    op->rowid = h->rowid;
    op->attempt = (journal_attempt){.key = h->step.key,
                                    .number = h->number,
                                    .started_ms = h->started_ms,
                                    .ended_ms = now,
                                    .error = err,
                                    .build = h->build};
    /* As for a crash: the retry policy applies at the step's next call. */
    h->step.attempts = h->number;
    h->step.error = err;
    h->step.wake_ms = JOURNAL_NONE;
    op = journal_batch_add(&b, JOP_STEP_PUT);
    op->rowid = h->rowid;
    op->step = &h->step;
  }
  if (journal_commit(e->j, &b) != 0)
    log_at(DURO_LOG_ERROR, &where, "cannot record the %s attempt: %s",
           h->cut_short_by ? "cut-short" : "hung", journal_errmsg(e->j));
  journal_batch_free(&b);
  h->step.error = NULL;
  free(err);
}

/* The worker is out of the pool (mu held): count it stuck, keep what
 * /healthz shows, and start a replacement while under the cap. */
static void replace_worker_locked(duro_engine *e, worker *w, hung_attempt *h,
                                  int64_t now) {
  e->live--;
  e->stuck++;
  w->hung_workflow = xstrdup(h->workflow);
  w->hung_id = xstrdup(h->id);
  w->hung_key = xstrdup(h->step.key);
  w->hung_attempt = h->number;
  w->hung_since_ms = h->started_ms > 0 ? h->started_ms : now;
  if (e->stopping)
    return;
  if (e->stuck > e->max_stuck) {
    if (!e->stuck_cap_logged)
      log_error("%u workers are stuck in hung attempts, the cap: no more "
                "replacements; instances wait for a free worker",
                e->max_stuck);
    e->stuck_cap_logged = 1;
    return;
  }
  if (engine_spawn_worker_locked(e) != 0)
    log_error("cannot start a worker to replace a hung one");
}

typedef enum abandon_why {
  ABANDON_HUNG,       /* past its deadline, for `ent` unless NULL */
  ABANDON_TERMINATED, /* its instance (`ent`) was terminated */
  ABANDON_STOPPED,    /* the engine stops past its grace: any attempt */
} abandon_why;

/* Gives up on w's attempt, if it is one `why` concerns; `stop_by` is
 * what a stopped one was cut short by. */
static int abandon(duro_engine *e, worker *w, entry *ent, abandon_why why,
                   const char *stop_by) {
  int64_t now = duro_clock_now(e->clock), mono = engine_mono_ms(e);
  hung_attempt h = {0};
  pthread_mutex_lock(&w->mu);
  struct duro_attempt *at = w->attempt;
  if (!at || w->abandoned ||
      !(why == ABANDON_STOPPED      ? 1
        : why == ABANDON_TERMINATED ? attempt_runs_for(at, ent)
                                    : attempt_is_hung(at, mono, ent))) {
    pthread_mutex_unlock(&w->mu);
    return 0;
  }
  attempt_describe(at, why == ABANDON_TERMINATED, &h);
  if (why == ABANDON_STOPPED)
    h.cut_short_by = xstrdup(stop_by);
  /* Under both locks (w->mu, then the engine's): the thread sees itself
   * abandoned and the counts move in one step. */
  pthread_mutex_lock(&e->mu);
  __atomic_store_n(&w->abandoned, 1, __ATOMIC_RELEASE);
  replace_worker_locked(e, w, &h, now);
  /* Activations parked on the same worker would wait for the hung one:
   * those ready now run again elsewhere (on_task_commit hands back the
   * rest as their commits land). */
  entry **orphans;
  size_t n_orphans = engine_orphan_ready_locked(w, &orphans);
  pthread_mutex_unlock(&e->mu);
  /* A later crash must not count this attempt again (set before the
   * thread can return and give its slot back). */
  if (w->slot)
    ledger_set_state(w->slot, LEDGER_ABANDONED);
  attempt_gate_leave(at);
  pthread_mutex_unlock(&w->mu);

  if (!h.cut_short_by)
    log_at(
        DURO_LOG_WARN,
        &(log_ctx){.workflow = h.workflow, .instance = h.id, .build = h.build},
        "%s; its worker is replaced", h.message);
  record_hung(e, &h, now);
  /* The instance runs again (or takes a pending pause or terminate). */
  engine_activation_done(e, h.ent, DURO_STATUS_QUEUED, JOURNAL_NONE, 1);
  for (size_t i = 0; i < n_orphans; i++)
    engine_activation_done(e, orphans[i], DURO_STATUS_QUEUED, JOURNAL_NONE, 1);
  free(orphans);
  hung_attempt_clear(&h);
  return 1;
}

int engine_abandon_hung(duro_engine *e, worker *w, entry *ent) {
  return abandon(e, w, ent, ABANDON_HUNG, NULL);
}

/* The workers as they are now (mu held); the array is the caller's. */
static worker **workers_snapshot(duro_engine *e, uint32_t *n) {
  *n = e->n_workers;
  worker **v = xmalloc((*n ? *n : 1) * sizeof *v);
  if (*n)
    memcpy(v, e->workers, *n * sizeof *v);
  return v;
}

int engine_abandon_entry(duro_engine *e, entry *ent) {
  uint32_t n;
  pthread_mutex_lock(&e->mu);
  worker **ws = workers_snapshot(e, &n);
  pthread_mutex_unlock(&e->mu);
  int done = 0;
  for (uint32_t i = 0; i < n && !done; i++)
    done = abandon(e, ws[i], ent, ABANDON_TERMINATED, NULL);
  free(ws);
  return done;
}

uint32_t engine_cut_short_running(duro_engine *e, int64_t grace_ms) {
  uint32_t n, cut = 0;
  pthread_mutex_lock(&e->mu);
  worker **ws = workers_snapshot(e, &n);
  pthread_mutex_unlock(&e->mu);
  for (uint32_t i = 0; i < n; i++)
    cut += (uint32_t)abandon(e, ws[i], NULL, ABANDON_STOPPED, "a stop");
  free(ws);
  if (cut)
    log_warn("engine.shutdown_grace (%lld ms) passed: %u attempt(s) cut "
             "short, journaled as such",
             (long long)grace_ms, cut);
  return cut;
}

void *engine_watchdog_main(void *arg) {
  duro_engine *e = arg;
  pthread_mutex_lock(&e->mu);
  while (!e->stopping) {
    struct timespec until = engine_cond_deadline(WATCHDOG_PERIOD_MS);
    pthread_cond_timedwait(&e->watch, &e->mu, &until);
    if (e->stopping)
      break;
    uint32_t n;
    worker **ws = workers_snapshot(e, &n);
    pthread_mutex_unlock(&e->mu);
    for (uint32_t i = 0; i < n; i++)
      engine_abandon_hung(e, ws[i], NULL);
    free(ws);
    engine_admits_watch(e);
    pthread_mutex_lock(&e->mu);
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}
