/* core.h — the engine's services to the features that run beside it as
 * drivers (driver.h: queues, cron): its journal and clock, its settings,
 * the creation of instances in a feature's own commit, the crash ledger,
 * and the scheduler's kick.  A feature includes this, never
 * engine_internal.h, so the engine's struct stays its own. */
#ifndef DURO_ENGINE_CORE_H
#define DURO_ENGINE_CORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "driver.h"
#include "engine.h"
#include "journal.h"
#include "ledger.h"

/* What run() and a queue or scheduled handler get as their env: the
 * engine, which is all a plugin reaches through it (its bindings). */
struct duro_env {
  duro_engine *engine;
  /* A queue or cron handler's context: what its registration gave with
   * it (a worker's stand-in finds its build there), NULL in run(). */
  void *ctx;
  /* A queue handler's deadline, CLOCK_MONOTONIC ms: past it the batch
   * has been given up on (its visibility timeout); 0 = none. */
  int64_t deadline_ms;
  int64_t timeout_ms; /* the visibility timeout that deadline came from */
  /* Why a handler failed, when its stand-in knows better than its
   * return code (its worker died, passed a limit): an error name and a
   * message (malloc'ed; whoever ran the handler frees it). */
  const char *failure_name;
  char *failure;
};

/* A registered workflow (opaque to features). */
typedef struct wf_reg wf_reg;

/* ---- the store and the clock ---- */

/* The engine's journal: a feature commits its own batches to it. */
journal *engine_journal(const duro_engine *e);
/* The engine clock's now, in ms (a virtual clock in tests). */
int64_t engine_now(const duro_engine *e);
/* A list's filter as journal_list takes it (its prefix and where
 * borrowed): the listing's and a bulk job's walk read alike. */
journal_list_filter engine_list_filter(const duro_list_filter *f);
/* Milliseconds for back-offs and timers: CLOCK_MONOTONIC on the real
 * clock (a clock step neither hastens nor stalls them), the virtual
 * clock's time in tests. */
int64_t engine_mono_ms(const duro_engine *e);
/* A condition variable whose timed waits run on CLOCK_MONOTONIC (a step
 * of the wall clock neither stalls nor hastens them), and the deadline
 * `ms` from now such a wait takes. */
void engine_cond_init(pthread_cond_t *c);
struct timespec engine_cond_deadline(int64_t ms);

/* ---- the engine's settings and state ---- */

/* Worker threads (0: everything runs inline, on the caller's thread). */
uint32_t engine_workers(const duro_engine *e);
/* How many hung callbacks may keep their threads (max_hung). */
uint32_t engine_max_hung(const duro_engine *e);
/* The largest step result (and instance params), in bytes. */
int64_t engine_max_step_result(const duro_engine *e);
/* 1 once the engine is stopping (read with acquire). */
int engine_stopping(const duro_engine *e);
/* The share of traces kept (telemetry's sample), which the sampled flag
 * of duro_attempt_traceparent follows; before the start. */
void engine_set_trace_sample(duro_engine *e, double ratio);
/* Whether driver d observes activations: while any does, activations
 * keep what they log and their failures and the drivers' activation_ended
 * hooks are called (while none does, nothing is kept). */
void engine_observe_activations(duro_engine *e, const duro_driver *d, int on);
/* The crash ledger (slots a feature claims for its handlers' threads). */
ledger *engine_ledger(const duro_engine *e);
/* Wakes the scheduler: a driver has work sooner than it said. */
void engine_kick_scheduler(duro_engine *e);

/* ---- admission gates (driver.h's admit, release, forget) ---- */

/* A ticket the gate parked may run now: it goes to the runnable FIFO.
 * Only within a gate hook or engine_gate_run (the engine's lock held). */
void engine_gate_ready_locked(duro_engine *e, duro_gate_ticket *ticket);
/* Wakes the scheduler: the gate has a ticket whose turn comes with time,
 * sooner than its dispatch said.  Only within a gate hook. */
void engine_gate_kick_locked(duro_engine *e);
/* The instance a ticket is for (its rowid). */
int64_t engine_gate_ticket_rowid(const duro_gate_ticket *ticket);
/* Runs fn(e, ctx) under the engine's lock, as the gate hooks run: for a
 * gate whose tickets come due with time (a rate), from its dispatch. */
void engine_gate_run(duro_engine *e, void (*fn)(duro_engine *e, void *ctx),
                     void *ctx);

/* ---- instances ---- */

wf_reg *engine_find_workflow(const duro_engine *e, const char *name);
/* The i-th registered workflow's name, NULL past the last. */
const char *engine_workflow_name_at(const duro_engine *e, size_t i);
/* The limits wf was registered with (NULL for a NULL wf): read by the
 * drivers a workflow's settings name (limits.lifecycle_queue). */
const duro_workflow_limits *engine_workflow_limits(const wf_reg *wf);
/* Fills `row` for a new instance of wf with id (both borrowed until b is
 * committed) and req's params and retention, and appends its insert to b:
 * for callers that commit a creation with other writes.
 * engine_create.c. */
/* (req->traceparent, when set, must be trace_ids.h's traceparent_norm's.) */
void engine_instance_insert_op(const wf_reg *wf, const char *id,
                               const duro_create_req *req, int64_t now,
                               journal_instance *row, journal_batch *b);
/* After such an insert committed (op rc 0): the instance is runnable. */
void engine_instance_created(duro_engine *e, int64_t rowid);
/* A terminate as duro_instance_terminate asks it, answered once it is
 * persisted: a running instance takes it at its next step boundary,
 * without waiting for that here (a driver's pass must not). */
int engine_terminate_nowait(duro_engine *e, const char *workflow,
                            const char *id);

/* Instance `rowid`, waiting on this host, runs again now (a driver's
 * step_claim said it waits: its turn came); one running now runs again
 * once its activation ends. */
void engine_instance_wake(duro_engine *e, int64_t rowid);

/* ---- child workflows (engine/step_child.c) ---- */

/* The type of the event that tells a parent child workflow/id ended
 * (malloc'ed): "duro.child:<workflow>/<id>", of the host's own types
 * (DURO_RESERVED_EVENT_PREFIX). */
char *engine_child_event_type(const char *workflow, const char *id);

/* ---- JSON ---- */

/* Validates JSON text; returns 0, DURO_E_INVALID_OUTPUT, or
 * DURO_E_OUTPUT_TOO_LARGE when longer than `limit` bytes. */
int json_text_check(const char *text, int64_t limit);
/* {"name":..,"message":..} as a malloc'ed string. */
char *error_json(const char *name, const char *message);

#endif
