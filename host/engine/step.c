/* step.c — one activation of an instance, and the step API plugins call
 * through the duro_api table (step_api_fill puts it there, api.c
 * assembles the table).
 *
 * An activation loads the instance's journal (its steps; events on the
 * first wait) once, calls the workflow's run(), and answers each step call
 * from the journal when it can (replay) or by doing the step.  Writes
 * accumulate in a batch; the batch is committed durably before a duro_do
 * result is handed back (a completed step is on disk before anything after
 * it runs).  When run() returns, the rest of the batch and the instance's
 * new row are committed asynchronously: the worker moves on, and
 * activation_final_commit lets the engine release the instance once they
 * landed.
 *
 * Suspension is sticky: once a step call decides the instance must yield
 * (sleep, back-off, event wait, pause, terminate, shutdown) every later call
 * returns DURO_SUSPEND without touching the journal, so a plugin that
 * ignores the code cannot corrupt anything.
 *
 * Everything the activation hands to the plugin lives in its arena and is
 * freed when the activation ends.
 *
 * This file: an activation begun, run and ended.  Its pieces, the step
 * API among them, are in step_*.c (step_internal.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "step.h"
#include "step_internal.h"

/* The activation running on this thread, and the attempt whose callback
 * runs on it (step_internal.h). */
__thread duro_step *step_running_act;
__thread duro_attempt *step_running_attempt;

/* The ledger slot names this activation: set when it starts, and again
 * whenever it resumes on its worker (others ran meanwhile). */
void step_slot_bind(duro_step *a) {
  if (!a->slot)
    return;
  a->slot->rowid = a->inst.rowid;
  ledger_copy(a->slot->workflow, sizeof a->slot->workflow, a->inst.workflow);
  ledger_copy(a->slot->id, sizeof a->slot->id, a->inst.id);
  ledger_set_state(a->slot, LEDGER_ACTIVATION);
}

void activation_free(duro_step *a) {
  if (a->wf)
    build_release(a->wf, a->build);
  journal_batch_free(&a->batch);
  journal_events_free(a->events, a->n_events);
  free(a->consumed);
  strmap_free(&a->steps);
  idmap_free(&a->by_seq);
  strmap_free(&a->name_counts);
  free(a->undo);
  activation_trace_free(a);
  journal_instance_clear(&a->inst);
  arena_free(a);
  free(a);
}

/* What run() is handed: the instance's id, params and creation time
 * (borrowed from the activation). */
duro_event activation_event_of(const duro_step *a) {
  return (duro_event){.size = sizeof(duro_event),
                      .workflow = a->inst.workflow,
                      .instance_id = a->inst.id,
                      .params = a->inst.params,
                      .created_ms = a->inst.created_ms};
}

void activation_run(duro_engine *e, entry *ent) {
  duro_step *a = xcalloc(1, sizeof *a);
  a->e = e;
  a->ent = ent;
  a->replaying = 1;
  duro_status status = ENGINE_STATUS_NONE;
  int rc = journal_instance_get_rowid(e->j, ent->rowid, &a->inst);
  if (rc == DURO_E_STORAGE)
    goto retry;
  if (rc)
    goto done; /* swept meanwhile */
  a->log = (log_ctx){.workflow = a->inst.workflow, .instance = a->inst.id};
  /* Handed to another host (rebalance.c) after whatever queued this
   * entry read its owner (an event's poke): that host runs it. */
  if (a->inst.owner != journal_host(e->j))
    goto done;
  /* Stale runnable entries (an event for a paused instance, a wake that a
   * control operation overtook) do nothing. */
  if (a->inst.status != DURO_STATUS_QUEUED &&
      a->inst.status != DURO_STATUS_WAITING) {
    status = a->inst.status;
    goto done;
  }
  a->wf = engine_find_workflow(e, a->inst.workflow);
  if (!a->wf) {
    log_at(DURO_LOG_ERROR, &a->log,
           "workflow \"%s\" is not in the config; instance left %s",
           a->inst.workflow, duro_status_name(a->inst.status));
    goto done;
  }
  if (!engine_activation_admit(e, ent, a->wf, a->inst.params,
                               a->inst.started_ms == JOURNAL_NONE)) {
    activation_free(a); /* runs when one of the workflow's activations ends */
    return;
  }
  a->begun_ms = now_ms(a);
  activation_trace_begin(a);
  a->worker = engine_thread_worker();
  a->slot = engine_thread_slot();
  step_slot_bind(a);
  /* A request persisted before a crash, or while the last activation ran. */
  if (a->inst.control == JOURNAL_CONTROL_PAUSE)
    __atomic_store_n(&ent->pause_req, 1, __ATOMIC_RELEASE);
  else if (a->inst.control == JOURNAL_CONTROL_TERMINATE)
    __atomic_store_n(&ent->terminate_req, 1, __ATOMIC_RELEASE);
  else if (a->inst.control == JOURNAL_CONTROL_TERMINATE_ROLLBACK) {
    /* replays run() up to where it is, then its rollbacks, then ends
     * terminated (step_rollback.c) */
    a->unwind = UNWIND_TERMINATE;
    __atomic_store_n(&ent->rollback_req, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&ent->terminate_req, 1, __ATOMIC_RELEASE);
  } else if (journal_control_is_restart(a->inst.control)) {
    /* the same for the steps it will discard, then it restarts; it
     * takes no pause meanwhile (the request would be lost) */
    a->unwind = UNWIND_RESTART;
    a->unwind_from = journal_control_restart_from(a->inst.control);
    __atomic_store_n(&ent->restart_req, 1, __ATOMIC_RELEASE);
  }
  if (activation_load_journal(a) != 0) {
    log_at(DURO_LOG_ERROR, &a->log, "cannot load journal: %s",
           journal_errmsg(e->j));
    goto retry;
  }

  if (lease_lapsed(a))
    goto retry; /* run() starts only under a lease that surely holds */
  duro_event ev = activation_event_of(a);
  duro_env env = {.engine = e};
  metrics_add(&e->m.activations, 1);
  duro_rc out = DURO_SUSPEND;
  char *held = NULL;
  a->build =
      build_acquire_unless_held(a->wf, a->inst.build, !a->n_outcomes, &held);
  if (a->build && a->build->hash && a->inst.build &&
      strcmp(a->build->hash, a->inst.build) &&
      !a->wf->limits.versioning_latest) {
    /* Moved off a held build it ran no step on: pinned to this one from
     * its first commit, so a crash before its last cannot send its
     * steps back to the held build. */
    log_at(DURO_LOG_INFO, &a->log,
           "its build %s is held and it ran no step on it: it runs on "
           "build %s",
           a->inst.build, a->build->hash);
    journal_op *op = journal_batch_add(&a->batch, JOP_INSTANCE_PIN);
    op->rowid = a->inst.rowid;
    op->step_key = a->build->hash;
  }
  /* Past its deadline with on_timeout: rollback, run() replays only for
   * its rollbacks (a request's unwind already covers them). */
  if (!a->unwind && deadline_unwinds(a))
    a->unwind = UNWIND_TIMEOUT;
  if (a->inst.deadline_ms > 0 && at_boundary(a)) {
    /* Past its deadline (or asked to stop before it): none of its code
     * runs, replay included. */
  } else if (held) {
    /* None of a held build's code runs, replay included.  The instance
     * keeps no pin to it unless it had one: one that never ran starts
     * on whichever build is the newest when it is woken (holds.c). */
    log_at(DURO_LOG_DEBUG, &a->log, "held: its build is (%s)", held);
    a->held = 1;
    suspend_until(a, now_ms(a) + engine_hold_recheck_ms(), arena_take(a, held));
  } else if (a->build) {
    a->build_hash = a->build->hash;
    a->log.build = a->build_hash;
    step_running_act = a;
    out = a->build->run(a, &ev, &env);
    /* a worker's stand-in ran them while its worker was there */
    if (!step_is_remote(a))
      out = step_after_run(a, out);
    step_running_act = NULL;
  } else {
    /* Its build left the store (deleted by hand?): wait for an operator
     * rather than replay on other code.  Both ways out work on a paused
     * instance: a resume loads the build if it is back (control.c), and
     * a restart from the top, once terminated, runs on the newest. */
    char *msg = xasprintf("pinned to build %s, which is not loaded: put "
                          "its file back in the build store as %s.so and "
                          "resume the instance, or terminate it and restart "
                          "it from the top (on the newest build)",
                          a->inst.build, a->inst.build);
    fail_with(a, duro_err_name(DURO_E_BUILD_UNAVAILABLE), msg);
    free(msg);
    a->suspended = 1;
    a->reason = SUSPEND_NO_BUILD;
  }
  if (a->reason == SUSPEND_ABANDONED) {
    /* The watchdog recorded the hung attempt and let go of the instance,
     * which may be running elsewhere by now: touch nothing of it. */
    activation_free(a);
    return;
  }
  if (a->slot)
    ledger_set_state(a->slot, LEDGER_IDLE);
  if (a->storage_failed)
    goto retry; /* its row is as its last successful write left it */
  /* The worker moves on at once; the engine lets go of the instance when
   * the final commit lands (activation_final_commit). */
  activation_finish(a, out);
  engine_commit_final(e, &a->batch, activation_final_commit, a);
  return;
done:
  if (a->slot)
    ledger_set_state(a->slot, LEDGER_IDLE);
  engine_activation_done(e, ent, status, JOURNAL_NONE, 1);
  activation_free(a);
  return;
retry:
  if (a->slot)
    ledger_set_state(a->slot, LEDGER_IDLE);
  engine_activation_retry(e, ent);
  activation_free(a);
}
