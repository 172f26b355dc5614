/* step_internal.h — what the pieces of the step runner share: an
 * activation (duro_step) and an attempt (duro_attempt), the thread's
 * running ones, the small calls every step call makes (static inline, so
 * that the per-step path calls them as it did when all was one file),
 * and the calls one piece makes in another.  Private to engine/ (step.h
 * and engine_internal.h are the step runner's faces).
 *
 *   step.c         an activation begun, run and ended (activation_run)
 *   step_arena.h   the activation's arena
 *   step_replay.c  the journal loaded; each step call looked up in it,
 *                  divergence; a new step
 *   step_do.c      duro_do: prepare, attempt, outcome
 *   step_gate.c    the gate callbacks pass while kills are charged
 *   step_wait.c    the sleeps and the event waits
 *   step_api.c     the plugin API table's step calls and the others
 *                  (output, errors, an attempt's calls, logging), and
 *                  other subsystems' side effects (step.h)
 *   step_hung.c    an attempt as the watchdog sees it
 *   step_finish.c  the instance's new row and the final commit
 *   step_dry.c     a dry run of another build */
#ifndef DURO_STEP_INTERNAL_H
#define DURO_STEP_INTERNAL_H

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "duro.h"
#include "engine_internal.h"
#include "error.h"
#include "journal.h"
#include "log.h"
#include "trace_ids.h"
#include "util.h"

typedef enum suspend_reason {
  SUSPEND_NONE = 0,
  SUSPEND_WAIT, /* sleep, back-off or event: a wake time is set */
  SUSPEND_PAUSE,
  SUSPEND_TERMINATE,
  SUSPEND_SHUTDOWN,
  SUSPEND_ABANDONED, /* the watchdog gave up on a hung attempt */
  SUSPEND_DIVERGED,  /* the code asked for a step its journal does not have
                        there */
  SUSPEND_NO_BUILD,  /* the build it is pinned to is not loaded */
  SUSPEND_DRY,       /* a dry run reached what it would have to run */
  SUSPEND_CRASHED,   /* its plugin code crashed its worker process for
                        good: the instance errors (last_error) */
  SUSPEND_TIMED_OUT, /* it passed its deadline: it errors (last_error,
                        instance.timed_out) */
  SUSPEND_RESTART    /* a restart's rollbacks ran: it restarts from
                        unwind_from (activation_finish) */
} suspend_reason;

/* Why an activation runs rollbacks instead of run()'s next steps: run()
 * replays only what is journaled (the first step call past it stops),
 * then the rollbacks run, no control request and no deadline cutting
 * them short (step_rollback.c). */
typedef enum unwind_cause {
  UNWIND_NONE = 0,
  UNWIND_TERMINATE, /* a terminate with rollbacks: it then ends terminated */
  UNWIND_RESTART,   /* a restart with rollbacks: those of the steps from
                       unwind_from, then it restarts from there */
  UNWIND_TIMEOUT    /* past its deadline, its workflow's on_timeout
                       rollback: it then ends errored, timed out */
} unwind_cause;

/* The arena: a bump allocator over 4 KiB chunks (bigger requests get a
 * chunk of their own), freed whole when the activation ends. */
#define ARENA_CHUNK 4096
typedef struct arena_blk {
  struct arena_blk *next;
  size_t used, cap;
  max_align_t data[];
} arena_blk;

struct duro_step {
  duro_engine *e;
  entry *ent;
  wf_reg *wf;
  journal_instance inst; /* the row as loaded; owns its strings */
  arena_blk *arena;

  strmap steps;       /* key → journal_step (arena) */
  idmap by_seq;       /* journaled call position → journal_step */
  strmap name_counts; /* name → (uintptr_t) occurrences so far */
  int64_t seq;        /* step calls so far in this activation */
  uint32_t n_steps;   /* steps of every kind, for limits.steps */
  /* Journaled steps a replay would hand back (all but do steps whose
   * attempts all failed): 0 = it ran no step on its build yet. */
  uint32_t n_outcomes;
  int64_t state_bytes;   /* params + results + errors, for the state limit */
  journal_event *events; /* loaded by the first event wait */
  size_t n_events;
  int events_loaded;
  unsigned char *consumed;

  journal_batch batch; /* writes not yet committed */
  int replaying;       /* no step call has missed the journal yet */
  int suspended;
  suspend_reason reason;
  int64_t wake_ms;
  const char *wait_type;
  const char *last_error; /* {"name","message"} of the last DURO_ERROR */
  const char *output;
  log_ctx log; /* its workflow, id and build, for logs */
  int storage_failed;
  journal_instance final_row; /* the row the last commit stores */
  ssize_t event_wake_op;      /* its index in the final batch, or -1 */
  wf_build *build;            /* the build it runs (acquired) */
  int dry;                    /* a dry run: replays, never runs or writes */
  const char *dry_next;       /* where a dry run stopped */
  /* Where a dry run diverged: the step the code asked for, and the one
   * the journal has at that call (NULL: none there). */
  const char *dry_code_key, *dry_journal_key;
  const char *build_hash;     /* its hash, or NULL */
  worker *worker;             /* NULL when run inline */
  ledger_slot *slot;          /* the thread's crash-ledger slot, or NULL */
  int64_t begun_ms;           /* when this activation began */
  journal_instance start_row; /* the row save_start stores */
  int worker_died;            /* step_worker_died: its run() is gone */
  int held;                   /* wait_type is a reason, no event type: its
                                 build is held (holds.c), or a driver's
                                 step_claim said it waits */
  engine_admit *admitted;     /* the plugin bound its callback has a place
                                 in, while it runs (engine_admit.c) */
  /* What undoes the completed steps run() passed (step_rollback.c), and
   * whether the rollbacks after run()'s error were run. */
  struct step_undo *undo;
  size_t n_undo, cap_undo;
  int unwound;
  unwind_cause unwind;
  int64_t unwind_from; /* UNWIND_RESTART: the call position restarted
                          from (-1: the top) */
  int rollback_failed; /* one failed for good: last_error says which */
  /* What it logged and failed with, while a driver observes activations
   * (activation_trace.c); NULL otherwise. */
  struct act_trace *trace;
};

struct duro_attempt {
  duro_step *act;
  journal_step *step;
  uint32_t number;
  int64_t started_ms, deadline_ms, timeout_ms;
  /* The deadline the watchdog and the end of the callback check, on the
   * monotonic clock: a step of the wall clock neither abandons a healthy
   * callback nor spares a hung one (deadline_ms is the plugin's view). */
  int64_t deadline_mono;
  const char *idempotency_key;
  /* duro_attempt_traceparent's answer, made on first use ("" till then) */
  char traceparent[TRACEPARENT_LEN + 1];
  char *result; /* malloc'ed copy */
  char *message;
  char *bad_result; /* why the last result set was not JSON, or NULL */
  int failed, final;
  const char *fail_name; /* the failure's error name when not the plugin's
                            own (step_attempt_given_up) */
  int withdrawn;         /* its callback never began (step_attempt_withdraw) */
  int cancelled;         /* its duro_do_all no longer needs it (atomic) */
  int gate;              /* its place in the gate (step_gate_enter); atomic */
  step_claim claim;      /* what it holds of a driver while it runs */
  /* Queue sends and events made by the callback: committed with the
   * step's result, or dropped with a failed attempt. */
  journal_batch sends;
};

/* The activation running on this thread (in run() or in one of its
 * callbacks), and the attempt whose callback runs on it; NULL outside
 * (step.c). */
extern __thread duro_step *step_running_act;
extern __thread duro_attempt *step_running_attempt;

#include "step_arena.h" /* after duro_step, whose arena it is */

/* ---- the small calls the pieces share, the per-step path's among them - */

static inline int64_t now_ms(duro_step *a) {
  return duro_clock_now(a->e->clock);
}

static inline const char *format_ms(char *buf, size_t len, int64_t ms) {
  static const struct {
    int64_t ms;
    const char *unit;
  } units[] = {{86400000, "day"},
               {3600000, "hour"},
               {60000, "minute"},
               {1000, "second"}};
  for (size_t i = 0; i < sizeof units / sizeof *units; i++)
    if (ms >= units[i].ms && ms % units[i].ms == 0) {
      int64_t v = ms / units[i].ms;
      snprintf(buf, len, "%" PRId64 " %s%s", v, units[i].unit,
               v == 1 ? "" : "s");
      return buf;
    }
  snprintf(buf, len, "%" PRId64 " ms", ms);
  return buf;
}

static inline void fail_with(duro_step *a, const char *name,
                             const char *message) {
  a->last_error = arena_take(a, error_json(name, message));
}

/* The instance's deadline (its timeout from creation) has come: it ends
 * errored instance.timed_out, whatever run() would do next.  Returns 1
 * when it has (and the activation must yield).  Out of line: most
 * instances have no deadline. */
int deadline_passed(duro_step *a);
/* The instance.timed_out error of its deadline (in the arena). */
const char *deadline_error(duro_step *a);
/* 1 when the instance is past its deadline and its workflow asks for its
 * rollbacks then (on_timeout: rollback; read live). */
int deadline_unwinds(duro_step *a);
/* An attempt's timeout from `now`, cut to what is left until the
 * deadline (*cut = 1 then: an overrun is the instance's timeout). */
int64_t deadline_cap(const duro_step *a, int64_t now, int64_t timeout_ms,
                     int *cut);
/* A waiting instance's wake, at its deadline at the latest. */
int64_t deadline_wake(const duro_step *a, int64_t wake_ms);

/* Checks the requests a step boundary honours.  Returns 1 when the
 * activation must yield. */
static inline int at_boundary(duro_step *a) {
  if (a->suspended)
    return 1;
  if (!a->ent)
    return 0; /* a dry run: no control requests */
  suspend_reason r = SUSPEND_NONE;
  if (__atomic_load_n(&a->ent->terminate_req, __ATOMIC_ACQUIRE) && !a->unwind)
    r = SUSPEND_TERMINATE;
  else if (__atomic_load_n(&a->ent->pause_req, __ATOMIC_ACQUIRE))
    r = SUSPEND_PAUSE;
  else if (__atomic_load_n(&a->e->stopping, __ATOMIC_ACQUIRE))
    r = SUSPEND_SHUTDOWN;
  /* A terminate or pause asked for first is what the instance does.  An
   * unwind is past any deadline: its rollbacks run whole. */
  if (r == SUSPEND_NONE)
    return a->inst.deadline_ms > 0 && !a->unwind && deadline_passed(a);
  a->suspended = 1;
  a->reason = r;
  return 1;
}

static inline duro_rc suspend_until(duro_step *a, int64_t wake_ms,
                                    const char *wait_type) {
  a->suspended = 1;
  a->reason = SUSPEND_WAIT;
  a->wake_ms = wake_ms;
  a->wait_type = wait_type;
  return DURO_SUSPEND;
}

static inline void put_step(duro_step *a, journal_step *s) {
  journal_op *op = journal_batch_add(&a->batch, JOP_STEP_PUT);
  op->rowid = a->inst.rowid;
  op->step = s;
}

/* On a shared store, a host whose lease may have lapsed starts no
 * callback: another host may have taken the instance over and completed
 * the step meanwhile (a host frozen past its lease resumes its parked
 * activations right here).  The activation ends as after a failed write:
 * nothing more of it is written, and it runs again later if the lease
 * still holds (journal_lease_held waited for the keeper to say). */
static inline void lease_may_be_lost(duro_step *a) {
  a->storage_failed = 1;
  a->suspended = 1;
  a->reason = SUSPEND_SHUTDOWN;
}

static inline int lease_lapsed(duro_step *a) {
  if (journal_lease_held(a->e->j))
    return 0;
  lease_may_be_lost(a);
  return 1;
}

/* A dry run replays only what is journaled as done: at the first step
 * call that would run a callback, start or finish a wait, it stops. */
static inline duro_rc dry_stop(duro_step *a, const char *key) {
  a->dry_next = key;
  a->suspended = 1;
  a->reason = SUSPEND_DRY;
  return DURO_SUSPEND;
}

/* A journaled step answers from the journal: its result when it completed
 * (into *out, may be NULL), its error when it errored; a dry run stops at
 * anything else.  Returns 1 with *rc set when the call ends here. */
static inline int from_journal(duro_step *a, const journal_step *s,
                               const char *key, const char **out, duro_rc *rc) {
  if (s && s->status == DURO_STEP_COMPLETE) {
    if (out)
      *out = s->result;
    *rc = DURO_OK;
    return 1;
  }
  if (s && s->status == DURO_STEP_ERRORED) {
    a->last_error = s->error;
    *rc = DURO_ERROR;
    return 1;
  }
  if (a->dry) {
    *rc = dry_stop(a, key);
    return 1;
  }
  if (a->unwind) {
    /* run() replays for its rollbacks: nothing new runs (step_after_run
     * decides the end; a terminate's is terminated) */
    a->suspended = 1;
    a->reason =
        a->unwind == UNWIND_TERMINATE ? SUSPEND_TERMINATE : SUSPEND_SHUTDOWN;
    *rc = DURO_SUSPEND;
    return 1;
  }
  a->replaying = 0;
  return 0;
}

/* Its plugin code runs in a worker process (its build has a context, its
 * run() is a stand-in: step_died.c): a callback there parks its fiber
 * while it runs, so the engine's thread is no attempt's, and neither the
 * thread's crash-ledger slot nor the watchdog names it (the stand-in
 * holds its deadline). */
static inline int step_is_remote(const duro_step *a) {
  return a->build && a->build->ctx;
}

/* ---- step.c ---- */

/* The ledger slot names this activation: set when it starts, and again
 * whenever it resumes on its worker. */
void step_slot_bind(duro_step *a);
void activation_free(duro_step *a);
/* What run() is handed (borrowed from the activation). */
duro_event activation_event_of(const duro_step *a);

/* ---- step_replay.c ---- */

/* Loads the instance's steps into the arena; 0 or the journal's error. */
int activation_load_journal(duro_step *a);
/* Common entry of every step call: returns 0 to proceed (*key, *count
 * and *s, the journaled step or NULL, set), or 1 with *rc to return. */
int step_begin(duro_step *a, const char *name, duro_step_kind type,
               const char **key, uint32_t *count, journal_step **s,
               duro_rc *rc);
/* Whether a new step would cross limits.steps (the error set if so). */
int step_limit_reached(duro_step *a, const char *key);
/* Commits the activation's batch now (step_do.c): it may park here while
 * its worker thread runs others (engine_commit_step).  Non-zero when the
 * activation cannot go on (abandoned, or the write failed). */
int step_flush(duro_step *a);
/* A step that just failed for good (its errored row in the batch) is on
 * disk before run() sees the error: run() may act on it — a
 * compensating step, its rollbacks — and a crash must not leave that
 * action behind an error the journal never had (the step would run again
 * after it, and might succeed).  Returns DURO_ERROR, or DURO_SUSPEND when
 * the write failed or the activation was given up on meanwhile. */
duro_rc step_error_durable(duro_step *a);
/* A step the journal does not have, waiting, in the activation's map. */
journal_step *step_new(duro_step *a, const char *key, const char *name,
                       uint32_t count, duro_step_kind type);

/* ---- step_do.c: a do step's pieces, which duro_do_all shares ---- */

/* A do step's configuration, read from the plugin's duro_step_config. */
typedef struct do_config {
  uint32_t limit;
  int64_t delay_ms, timeout_ms;
  duro_backoff backoff;
  const char *resource; /* what its attempts claim of a driver, or NULL */
} do_config;

/* One do step's attempt as it goes, from its preparation to its outcome. */
typedef struct do_call {
  const char *key;
  journal_step *s;
  do_config c;
  int gate;               /* the place taken in the gate (GATE_*) */
  int64_t started, ended; /* the attempt's, on the engine clock */
  /* What it claimed of a driver (c.resource), handed to its attempt;
   * or the claim's refusal, which fails the attempt for good without
   * running its callback: its error's name and message (malloc'ed). */
  step_claim claim;
  const char *refused_name;
  char *refused;
} do_call;

/* What came of a step's attempt, or of the retry its last one owed. */
enum { DO_RUN, DO_DONE, DO_WAIT, DO_ERRORED, DO_SUSPEND };

/* The step's configuration into *out; -1 (the error set) when a value is
 * no duration. */
int do_read_config(duro_step *a, const char *key, const duro_step_config *cfg,
                   do_config *out);
/* The step's last attempt ended without its activation (it crashed the
 * engine, or hung and was abandoned): its retry policy applied now that
 * the configuration is known again.  DO_RUN (no such attempt, or its
 * retry is due), DO_WAIT (its back-off ends at s->wake_ms) or DO_ERRORED
 * (the retries are spent: s->error, on disk), or DO_SUSPEND (that
 * could not be written). */
int do_orphan_policy(duro_step *a, journal_step *s, const do_config *c);
/* The start of the instance, what the step claims of a driver (its
 * resource), the plugin's admission and the gate, before an attempt: 1
 * when the activation must yield instead (reason set: a resource's wait
 * among them). */
int do_enter(duro_step *a, do_call *call);
/* The attempt about to run (*cut: its timeout was cut to the instance's
 * deadline). */
void do_attempt_init(duro_step *a, do_call *call, duro_attempt *at, int *cut);
/* Runs the callback as attempt `at`: 1 when the activation must yield
 * (nothing of the attempt is recorded, or the watchdog recorded it). */
int do_run_attempt(duro_step *a, duro_attempt *at, duro_step_fn fn, void *arg,
                   int *fn_rc);
/* The attempt's outcome judged and recorded: DO_DONE (committed, its
 * result in *result), DO_WAIT (a retry at s->wake_ms), DO_ERRORED (for
 * good: s->error) or DO_SUSPEND (the activation must yield). */
int do_conclude(duro_step *a, do_call *call, duro_attempt *at, int fn_rc,
                int cut, const char **result);

/* ---- step_rollback.c ---- */

/* What undoes completed step s: its callback (the plugin's, or a
 * worker's stand-in), argument and configuration. */
typedef struct step_undo {
  journal_step *s;
  duro_rollback_fn fn;
  void *arg;
  do_config c;
} step_undo;

/* A rollback's configuration checked before its step runs: -1 (the error
 * set) when it has no callback or a bad duration. */
int step_rollback_check(duro_step *a, const char *name,
                        const duro_rollback_cfg *rb);
/* rb (NULL: none) undoes completed step s: -1 (the error set) when it
 * cannot. */
int step_rollback_register(duro_step *a, journal_step *s,
                           const duro_rollback_cfg *rb);
/* The registered rollbacks not yet run, newest first: DURO_OK, DURO_ERROR
 * (*failed: the newest rollback step that failed for good; the others
 * ran) or DURO_SUSPEND (a back-off, or the activation must yield). */
duro_rc step_unwind(duro_step *a, journal_step **failed);

/* ---- step_gate.c ---- */

/* Takes a place in the gate for the attempt `number` of step s: the
 * place (GATE_*, step_gate.c), or -1 when the engine stops. */
int step_gate_enter(duro_step *a, const journal_step *s, uint32_t number);

/* ---- the plugin API's step calls (step_api_fill puts them) ---- */

/* step_do.c */
duro_rc step_api_do(duro_step *a, const char *name, const duro_step_config *cfg,
                    duro_step_fn fn, void *arg, const char **result);
/* step_do.c */
duro_rc step_api_do_with_rollback(duro_step *a, const char *name,
                                  const duro_step_config *cfg, duro_step_fn fn,
                                  void *arg, const duro_rollback_cfg *rb,
                                  const char **result);
/* step_rollback.c */
duro_rc step_api_rollback(duro_step *a);
/* duro_set_attribute (attributes.c). */
int step_set_attribute(duro_step *a, const char *name, const char *json);
/* step_parallel.c */
duro_rc step_api_do_all(duro_step *a, const char *name, duro_branch *branches,
                        size_t n, size_t size, uint32_t max_in_flight,
                        uint32_t flags);
/* step_wait.c */
duro_rc step_api_sleep(duro_step *a, const char *name, const char *duration);
duro_rc step_api_sleep_until(duro_step *a, const char *name, int64_t unix_ms);
duro_rc step_api_wait_for_event(duro_step *a, const char *name,
                                const char *type, const char *timeout,
                                const char **event);
duro_rc step_api_wait_any(duro_step *a, const char *name,
                          const char *const *types, size_t n,
                          int64_t deadline_ms, const char **event);
/* step_child.c */
duro_rc step_api_child_start(duro_step *a, const char *name,
                             duro_workflow *child, const char *id,
                             const char *params, int parent_close,
                             const char **child_id);
duro_rc step_api_child_wait(duro_step *a, const char *name,
                            duro_workflow *child, const char *id,
                            const char **output);

/* ---- step_finish.c ---- */

/* Decides the instance's new row and queues it, with the activation's
 * last writes, for the final commit. */
void activation_finish(duro_step *a, duro_rc rc);

/* activation_trace.c: what an activation did, kept for the drivers that
 * observe activations (a tail handler's items).  _begin keeps nothing
 * unless one does; _log and _error copy what they are given (bounded);
 * _report hands the drivers the activation once its final commit is on
 * disk; _free lets go. */
void activation_trace_begin(duro_step *a);
void activation_trace_log(duro_step *a, int64_t time_ms, int level,
                          const char *step, uint32_t attempt, const char *text);
void activation_trace_error(duro_step *a, int64_t time_ms, const char *step,
                            uint32_t attempt, const char *error);
void activation_trace_report(duro_step *a);
void activation_trace_free(duro_step *a);
/* The final commit's callback (ctx: the activation, freed here). */
void activation_final_commit(void *ctx, int rc);

/* Keeps a line activation `a`'s plugin code logged (instance_logs.c):
 * queued to the journal with its instance, step key (NULL: run()) and
 * attempt; never waits for the disk.  Takes `message` (malloc'ed). */
void engine_log_keep(duro_step *a, const char *step, uint32_t attempt,
                     int level, char *message);

#endif
