/* driver.h — how a feature that runs beside the engine (queue consumers,
 * cron triggers) plugs into it without the engine naming it.
 *
 * A driver is a table of hooks the engine calls at its own moments: on
 * every scheduler pass (dispatch the feature's due work), in the bounded
 * retention sweep, once at start for the crash ledger's slots the feature
 * claimed before a death, for /healthz, at stop (drain within the grace)
 * and at close.  The engine keeps the registered (driver, state) pairs in
 * registration order, calls them in that order and frees them in the
 * reverse one, so a later driver may use an earlier one's state until it
 * is gone.  Every hook may be NULL.  A hook runs on the scheduler thread
 * (dispatch, sweep), at start before any activation (recover), on an HTTP
 * thread (health) or on the thread that stops or closes the engine. */
#ifndef DURO_ENGINE_DRIVER_H
#define DURO_ENGINE_DRIVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine.h"
#include "ledger.h"

struct timespec;
struct journal_batch;
struct journal_instance;

/* An activation parked by an admission gate (flow control): opaque to
 * the driver, which keeps it until its turn comes
 * (engine_gate_ready_locked, core.h). */
typedef struct entry duro_gate_ticket;

/* How many drivers may be admission gates (admit hooks). */
#define ENGINE_MAX_GATES 3

/* What a claim_create hook answers (or DURO_E_FLOW_REJECTED). */
enum {
  DURO_CLAIM_TAKE = 0,  /* create it: not this driver's business */
  DURO_CLAIM_HELD = 1,  /* create it; the driver holds its key until settled */
  DURO_CLAIM_SKIP = 2,  /* create nothing: the live instance answers */
  DURO_CLAIM_MERGE = 3, /* create nothing: the live instance, which has not
                           started, takes the create's params and starts no
                           sooner than claim.wake_ms; settled */
};

/* What a claim_create hook hands back besides its answer. */
typedef struct duro_claim {
  char *live;             /* SKIP, MERGE: the live instance's id (malloc'ed) */
  int64_t wake_ms;        /* HELD: the new instance starts no sooner (0: at
                             once); MERGE: the live one's start from now on */
  int64_t retry_after_ms; /* DURO_E_FLOW_REJECTED: when to try again */
  /* HELD: a key the store keeps for the new instance while it lives
   * (journal_instance.claim_key, malloc'ed; NULL: none): on a store
   * several hosts share, a create whose key another host's live instance
   * holds creates nothing and is answered by that one, as a skip, or
   * under flow.debounce merges into it (journal_claim_merge).  MERGE: the
   * key to merge by in the store should the live one's insert have met
   * another host's. */
  char *key;
} duro_claim;

/* What a step_claim hook answers. */
enum {
  DURO_STEP_CLAIM_PASS = 0, /* not this driver's name: the next is asked */
  DURO_STEP_CLAIM_GO,       /* the attempt runs now, holding *hold */
  DURO_STEP_CLAIM_WAIT,     /* its instance waits for the driver's wake */
  DURO_STEP_CLAIM_FAIL      /* the step fails for good (*error) */
};

/* What an activation did, for a driver that observes activations (tail
 * handlers): kept only while one asked for it (engine_observe_activations
 * in core.h).  Everything is borrowed for the hook's call. */
typedef struct duro_activation_log {
  int64_t time_ms;
  int level;        /* DURO_LOG_* */
  const char *step; /* the step key whose callback logged it, or NULL */
  uint32_t attempt; /* its attempt, 0 from run() */
  const char *text; /* cut at DURO_ACTIVATION_LOG_MAX bytes, marked */
} duro_activation_log;

typedef struct duro_activation_error {
  int64_t time_ms;
  const char *step; /* the step key, or NULL: the instance's own error */
  uint32_t attempt;
  const char *error; /* {"name","message"} */
} duro_activation_error;

/* Kept of one activation at most: lines past DURO_ACTIVATION_LOGS and
 * errors past DURO_ACTIVATION_ERRORS are counted, not kept. */
#define DURO_ACTIVATION_LOGS 64
#define DURO_ACTIVATION_LOG_MAX 2048
#define DURO_ACTIVATION_ERRORS 16

typedef struct duro_activation_report {
  const char *workflow, *id;
  int64_t rowid, created_ms;
  const char *traceparent; /* its creator's, or NULL (trace_ids.h) */
  const char *build;       /* the build hash it ran on, or NULL */
  /* "ok" (it completed or suspends: a sleep, a wait, a retry's back-off,
   * a pause), "exception" (it ended errored), "crashed" (its code
   * crashed its worker), "timedOut" (past its deadline), "canceled"
   * (terminated) */
  const char *outcome;
  duro_status status; /* the instance's status after it */
  int64_t started_ms, ended_ms;
  const duro_activation_log *logs;
  size_t n_logs;
  uint32_t logs_dropped;
  const duro_activation_error *errors;
  size_t n_errors;
  uint32_t errors_dropped;
} duro_activation_report;

typedef struct duro_driver {
  const char *name;
  /* Called by duro_engine_open: the driver's state (may be NULL). */
  void *(*create)(duro_engine *e);
  /* Dispatches the work that is due; returns 1 when more may be due now
   * (the scheduler passes again at once).  *next_ms gets when work is due
   * next, in the engine clock's ms (INT64_MAX: only a kick will tell). */
  int (*dispatch)(duro_engine *e, void *state, int64_t *next_ms);
  /* One bounded step of the retention sweep (at most `budget` rows):
   * 1 while rows remain (the next pass goes on), 0 when done. */
  int (*sweep)(duro_engine *e, void *state, size_t budget);
  /* The crash ledger's LEDGER_HANDLER slots whose `driver` is this
   * driver's name are its own: `recover` records what a dead engine's
   * slot `sl` was doing (guilty: the thread the death is laid on; how:
   * the death in words).  NULL: its slots only name what ran. */
  int (*recover)(duro_engine *e, void *state, const ledger_slot *sl, int guilty,
                 const char *how);
  /* An instance's row is written in batch b with a new status or its
   * start (an activation's commit, a terminate or pause of an idle
   * instance, a crash or hang recorded): row as written, limits its
   * workflow's (NULL: not registered here), from_status and
   * from_started_ms as they were.  The driver may add its own ops to b,
   * which then commit, or roll back, with the change (strings they need
   * go to journal_batch_own).  On the thread that builds the commit. */
  void (*instance_changed)(duro_engine *e, void *state, struct journal_batch *b,
                           const struct journal_instance *row,
                           const duro_workflow_limits *limits,
                           duro_status from_status, int64_t from_started_ms,
                           int64_t now);
  /* Batch b is on disk (the journal's commit hook, on the thread that
   * committed it, before its committer learns of it): the driver may
   * look at its ops, quickly, and must not commit or take an engine
   * lock.  What observes the journal (traces) hooks here. */
  void (*committed)(duro_engine *e, void *state, const struct journal_batch *b);
  /* An activation's final commit is on disk (on the thread that
   * committed it): what it did, while engine_observe_activations is on.
   * Quick, as `committed`: copy what is wanted, and go. */
  void (*activation_ended)(duro_engine *e, void *state,
                           const duro_activation_report *r);
  /* An admission gate (flow control): an activation of a gated workflow
   * (flow rules in its limits) is about to run: its instance's rowid and
   * params, and whether it is the instance's first (`first`: its start).
   * 1: it runs now, and *hold is what `release` gets back
   * when it ends; 0: it waits, holding nothing: the driver keeps `ticket`
   * and hands it to engine_gate_ready_locked when its turn comes (in one
   * of these hooks), or lets go of it in `forget`.  These three run under
   * the engine's lock, quickly, and call nothing of the engine but that.
   * Several drivers may be gates (at most ENGINE_MAX_GATES): they are
   * asked in registration order, and when one parks the activation those
   * before it that let it pass get `release` at once. */
  int (*admit)(duro_engine *e, void *state, const char *workflow,
               const duro_workflow_limits *limits, int64_t rowid,
               const char *params, int first, duro_gate_ticket *ticket,
               void **hold);
  /* A create of a gated workflow whose limits say flow_reject: 0 to
   * take it (counted), or DURO_E_FLOW_REJECTED with *retry_after_ms when
   * it is over a rule.  Under the engine's lock, as admit. */
  int (*check_create)(duro_engine *e, void *state, const char *workflow,
                      const duro_workflow_limits *limits, const char *params,
                      int64_t *retry_after_ms);
  /* A create of a workflow whose limits name a singleton or a debounce
   * (flow_singleton_mode, flow_debounce_ms), before its commit, under the
   * engine's lock as admit; the drivers that have the hook are asked in
   * registration order, the first answer that is not DURO_CLAIM_TAKE
   * wins.  DURO_CLAIM_TAKE takes it; DURO_CLAIM_HELD takes it, the driver
   * counting it its key's until claim_settled says how its commit went;
   * DURO_CLAIM_SKIP creates nothing, claim->live the id of its key's live
   * instance; DURO_CLAIM_MERGE creates nothing either: its params go to
   * that instance in the create's commit, settled too;
   * DURO_E_FLOW_REJECTED refuses it (claim->retry_after_ms).  The
   * creates of a workflow with claims commit in the order claimed. */
  int (*claim_create)(duro_engine *e, void *state, const char *workflow,
                      const duro_workflow_limits *limits, const char *id,
                      const char *params, duro_claim *claim);
  /* The commit of a create claimed DURO_CLAIM_HELD or _MERGE is done.
   * HELD: id the create's, rowid its instance's, 0 when it was not
   * created.  MERGE: id the live instance's, rowid 1 when it took the
   * params, 0 when it had started or ended by then.  Every driver with
   * the hook hears it (a driver ignores an id it did not claim).  Under
   * the engine's lock. */
  void (*claim_settled)(duro_engine *e, void *state, const char *workflow,
                        int claim, const char *id, int64_t rowid);
  /* Called by duro_engine_start before any activation runs, once this
   * host took over the instances of hosts that stopped: what the driver
   * keeps of the journal is read now. */
  void (*start)(duro_engine *e, void *state);
  /* The activation admitted with `hold` ended (or gave up its turn). */
  void (*release)(duro_engine *e, void *state, void *hold);
  /* A parked ticket is taken away (its instance terminated, or the
   * engine closing): the driver forgets it and never hands it back. */
  void (*forget)(duro_engine *e, void *state, duro_gate_ticket *ticket);
  /* A step's attempt names something the drivers share out
   * (duro_step_config.resource: `name`), before its callback runs and
   * before any of its time counts: instance `rowid` of `workflow`, step
   * `key`.  DURO_STEP_CLAIM_GO: it runs now, and step_unclaim gets *hold
   * back when its callback returned (or never began);
   * DURO_STEP_CLAIM_WAIT: it does not run: its instance waits (status
   * waiting, wait_type *wait_type, a static string, holding no thread)
   * until the driver wakes it (engine_instance_wake, core.h), or until
   * *recheck_ms (the engine clock) at the latest, and asks again;
   * DURO_STEP_CLAIM_FAIL: the step fails for good, *error_name (static)
   * and *message (malloc'ed) its error; DURO_STEP_CLAIM_PASS: not this
   * driver's name.  Asked in registration order, on the activation's
   * thread, the engine's lock not held. */
  int (*step_claim)(duro_engine *e, void *state, const char *name,
                    int64_t rowid, const char *workflow, const char *key,
                    void **hold, const char **wait_type, int64_t *recheck_ms,
                    const char **error_name, char **message);
  void (*step_unclaim)(duro_engine *e, void *state, void *hold);
  /* Adds its parts to the /healthz report (duro_health_add_*); returns 1
   * when it makes the engine degraded. */
  int (*health)(duro_engine *e, void *state, duro_health_parts *parts);
  /* Appends its series to GET /metrics (the Prometheus text format). */
  void (*metrics)(duro_engine *e, void *state, FILE *out);
  /* Waits for its own threads until `until` (CLOCK_MONOTONIC; NULL: no
   * limit); returns how many still run. */
  uint32_t (*drain)(void *state, const struct timespec *until);
  void (*free)(void *state);
} duro_driver;

/* Registers driver d (which must outlive the engine) with its state;
 * before duro_engine_start.  DURO_E_INVALID_ARGUMENT past
 * DURO_ENGINE_MAX_DRIVERS. */
#define DURO_ENGINE_MAX_DRIVERS 16
int duro_engine_register_driver(duro_engine *e, const duro_driver *d,
                                void *state);
/* The state driver d was registered with (NULL: not registered). */
void *duro_engine_driver_state(duro_engine *e, const duro_driver *d);

/* For a health hook: a part `key` (copied) holding the word `text`
 * (copied), or the hung handlers[0..n) (a malloc'ed array, taken with
 * the strings it points to). */
void duro_health_add_text(duro_health_parts *p, const char *key,
                          const char *text);
void duro_health_add_hung_handlers(duro_health_parts *p, const char *key,
                                   duro_hung_handler *handlers, size_t n);

/* The drivers built into duro, NULL-terminated, registered by
 * duro_engine_open in this order (drivers.c, the one file that names
 * them). */
extern const duro_driver *const duro_builtin_drivers[];

#endif
