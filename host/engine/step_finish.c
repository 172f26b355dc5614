/* step_finish.c — the activation's end: run()'s outcome made the
 * instance's new row, queued with the activation's last writes for the
 * final commit (asynchronous: the worker moves on), and the engine let go
 * of the instance once that commit landed. */
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "error.h"
#include "log.h"
#include "step_internal.h"

/* Decides the instance's new row and queues it, with the activation's
 * last writes, for the final commit. */
void activation_finish(duro_step *a, duro_rc rc) {
  int64_t now = now_ms(a);
  journal_instance *row = &a->final_row;
  *row = a->inst; /* borrowed strings; never cleared */
  row->wake_ms = JOURNAL_NONE;
  row->wait_type = NULL;
  row->started_ms =
      a->inst.started_ms != JOURNAL_NONE ? a->inst.started_ms : a->begun_ms;
  int clear_control = 0;
  if (a->suspended)
    rc = DURO_SUSPEND;
  /* a restart's request is done with, or stays persisted for the next
   * activation: no pause is refused for it now */
  if (a->unwind == UNWIND_RESTART && a->ent)
    __atomic_store_n(&a->ent->restart_req, 0, __ATOMIC_RELEASE);
  if (rc == DURO_OK) {
    row->status = DURO_STATUS_COMPLETE;
    row->output = (char *)a->output;
    row->error = NULL;
    row->ended_ms = now;
    clear_control = 1;
  } else if (rc == DURO_SUSPEND && a->reason == SUSPEND_WAIT) {
    row->status = DURO_STATUS_WAITING;
    row->wake_ms = deadline_wake(a, a->wake_ms);
    row->wait_type = (char *)a->wait_type;
    if (a->unwind == UNWIND_TERMINATE && a->ent) {
      /* a terminate's rollback waits out its back-off: the request stays
       * persisted for the next activation, not applied again now */
      __atomic_store_n(&a->ent->terminate_req, 0, __ATOMIC_RELEASE);
      __atomic_store_n(&a->ent->rollback_req, 0, __ATOMIC_RELEASE);
    }
  } else if (rc == DURO_SUSPEND && a->reason == SUSPEND_PAUSE) {
    row->status = DURO_STATUS_PAUSED;
    row->paused_ms = now;
    clear_control = 1;
  } else if (rc == DURO_SUSPEND && a->reason == SUSPEND_TERMINATE) {
    row->status = DURO_STATUS_TERMINATED;
    row->ended_ms = now;
    if (a->rollback_failed) /* a rollback of the terminate's failed */
      row->error = (char *)a->last_error;
    clear_control = 1;
  } else if (rc == DURO_SUSPEND && a->reason == SUSPEND_RESTART) {
    /* its rollbacks ran: the restart itself, as a plain one's, after
     * the rollback steps in this batch (which it discards with the
     * rest) */
    engine_restart_ops(a->e, &a->batch, row, a->unwind_from);
    clear_control = 1;
  } else if (rc == DURO_SUSPEND && a->reason == SUSPEND_SHUTDOWN) {
    row->status = DURO_STATUS_QUEUED;
  } else if (rc == DURO_SUSPEND && (a->reason == SUSPEND_NO_BUILD ||
                                    (a->reason == SUSPEND_DIVERGED &&
                                     a->wf->limits.pause_on_divergence))) {
    /* For an operator: roll the build back, or restart --from. */
    row->status = DURO_STATUS_PAUSED;
    row->paused_ms = now;
    row->error = (char *)a->last_error;
    clear_control = 1;
  } else if (rc == DURO_SUSPEND &&
             (a->reason == SUSPEND_CRASHED || a->reason == SUSPEND_TIMED_OUT)) {
    row->status = DURO_STATUS_ERRORED;
    row->ended_ms = now;
    row->error = (char *)a->last_error;
    clear_control = 1;
  } else if (rc == DURO_SUSPEND && a->reason == SUSPEND_DIVERGED) {
    row->status = DURO_STATUS_ERRORED;
    row->ended_ms = now;
    row->error = (char *)a->last_error;
    clear_control = 1;
  } else {
    row->status = DURO_STATUS_ERRORED;
    row->ended_ms = now;
    clear_control = 1;
    if (rc == DURO_ERROR && a->last_error)
      row->error = (char *)a->last_error;
    else
      row->error = arena_take(
          a, error_json("Error", rc == DURO_ERROR
                                     ? "run() returned DURO_ERROR with no "
                                       "failed step"
                                     : "run() returned an unknown code or "
                                       "DURO_SUSPEND with no suspending step"));
  }
  journal_op *op = journal_batch_add(&a->batch, JOP_INSTANCE_SET);
  op->inst = row;
  op->clear_control = clear_control;
  engine_drivers_instance_changed(a->e, a->wf, &a->batch, row, a->inst.status,
                                  a->inst.started_ms, now);
  engine_retention_ops(a->wf, &a->batch, row, a->inst.status);
  /* Pinned at its first activation (versioning: pinned); under latest,
   * the build it last ran on.  Written only when it changes.  (A restart
   * keeps its pin, or from the top is pinned afresh: engine_restart_ops.) */
  if (a->build_hash && a->reason != SUSPEND_RESTART &&
      (!a->inst.build || strcmp(a->inst.build, a->build_hash) != 0)) {
    op = journal_batch_add(&a->batch, JOP_INSTANCE_PIN);
    op->rowid = row->rowid;
    op->step_key = a->build_hash;
  }
  /* An event of the awaited type may have been stored after this
   * activation read the events (while it ran, or while this commit
   * waited): in the same transaction, the wait is then due at once.  The
   * event's arrival and the instance's wake are one durable fact,
   * whichever commit lands first. */
  a->event_wake_op = -1;
  if (row->wait_type && !a->held) {
    a->event_wake_op = (ssize_t)a->batch.n;
    op = journal_batch_add(&a->batch, JOP_WAKE_IF_EVENT_PENDING);
    op->rowid = row->rowid;
    op->ts_ms = now;
  }
}

/* The final commit is on disk (or failed): only now may the engine let go
 * of the instance.  Runs on whichever thread committed. */
void activation_final_commit(void *ctx, int rc) {
  duro_step *a = ctx;
  duro_status status = ENGINE_STATUS_NONE;
  int64_t wake = JOURNAL_NONE;
  if (rc) {
    /* Nothing of it is on disk: the instance runs again from its journal
     * once writes succeed. */
    log_at(DURO_LOG_ERROR, &a->log, "journal commit failed: %s; retrying",
           journal_errmsg(a->e->j));
    engine_activation_retry(a->e, a->ent);
    activation_free(a);
    return;
  } else {
    status = a->final_row.status;
    wake = a->final_row.wake_ms;
    if (a->event_wake_op >= 0 && a->batch.ops[a->event_wake_op].out_rowid)
      wake = a->batch.ops[a->event_wake_op].ts_ms;
    a->ent->write_failures = 0;
    /* the drivers' events in it (a child's end told its parent) */
    engine_batch_woke(a->e, &a->batch);
    if (status == DURO_STATUS_ERRORED)
      log_at(DURO_LOG_WARN, &a->log, "errored: %s", a->final_row.error);
    else if (status != DURO_STATUS_WAITING)
      log_at(DURO_LOG_DEBUG, &a->log, "%s", duro_status_name(status));
  }
  activation_trace_report(a);
  engine_activation_done(a->e, a->ent, status, wake, 0);
  activation_free(a);
}
