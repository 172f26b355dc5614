/* sqlite_write_instance.c — the SQLite backend's ops on an instance's
 * rows: the instance inserted, set and marked (control, restarts, pin),
 * its steps and attempts, its events and the wakes they cause, and the
 * retention sweep of ended instances. */
#include <sqlite3.h>
#include <stdint.h>

#include "sqlite_internal.h"

int sqlite_instance_insert(sqlite_store *sq, journal_op *op) {
  const journal_instance *in = op->inst;
  sqlite3_stmt *st = sq->ws[ST_INSTANCE_INSERT];
  int rc;
  bind_text(st, 1, in->workflow);
  bind_text(st, 2, in->id);
  bind_text(st, 3, duro_status_name(in->status));
  bind_text(st, 4, in->params);
  sqlite3_bind_int64(st, 5, in->created_ms);
  sqlite3_bind_int64(st, 6, in->retention_ms);
  bind_ms(st, 7, in->deadline_ms > 0 ? in->deadline_ms : JOURNAL_NONE);
  bind_ms(st, 8, in->parent > 0 ? in->parent : JOURNAL_NONE);
  sqlite3_bind_int(st, 9, in->parent_close);
  bind_text(st, 10, in->traceparent);
  bind_ms(st, 11, in->wake_ms > 0 ? in->wake_ms : JOURNAL_NONE);
  if ((rc = sqlite_step_done(sq, st)))
    return rc;
  if (sqlite3_changes(sq->wr) == 0) {
    op->rc = DURO_E_ALREADY_EXISTS;
    return 0;
  }
  op->rc = 0;
  op->out_rowid = sqlite3_last_insert_rowid(sq->wr);
  for (size_t i = 0; i < in->n_attrs; i++)
    if ((rc = sqlite_attribute_set(sq, op->out_rowid, &in->attrs[i])))
      return rc;
  return 0;
}

/* A rescheduled instance took new params: its attributes are those they
 * give (it has not started, so run() set none). */
static int reindex(sqlite_store *sq, const journal_instance *in) {
  sqlite3_stmt *st = sq->ws[ST_ATTRIBUTES_CLEAR_BY_ID];
  bind_text(st, 1, in->workflow);
  bind_text(st, 2, in->id);
  int rc = sqlite_step_done(sq, st);
  for (size_t i = 0; rc == 0 && i < in->n_attrs; i++) {
    const duro_attr *a = &in->attrs[i];
    st = sq->ws[ST_ATTRIBUTE_SET_BY_ID];
    bind_text(st, 1, in->workflow);
    bind_text(st, 2, in->id);
    bind_text(st, 3, a->name);
    bind_text(st, 4, a->str);
    if (a->str)
      sqlite3_bind_null(st, 5);
    else
      sqlite3_bind_double(st, 5, a->num);
    rc = sqlite_step_done(sq, st);
  }
  return rc;
}

int sqlite_attribute_set(sqlite_store *sq, int64_t rowid, const duro_attr *a) {
  sqlite3_stmt *st = sq->ws[ST_ATTRIBUTE_SET];
  sqlite3_bind_int64(st, 1, rowid);
  bind_text(st, 2, a->name);
  bind_text(st, 3, a->str);
  if (a->str)
    sqlite3_bind_null(st, 4);
  else
    sqlite3_bind_double(st, 4, a->num);
  return sqlite_step_done(sq, st);
}

/* An instance's new state; an end by error or terminate cancels the
 * steps still open. */
int sqlite_instance_set(sqlite_store *sq, journal_op *op) {
  const journal_instance *in = op->inst;
  sqlite3_stmt *st = sq->ws[ST_INSTANCE_SET];
  int rc;
  sqlite3_bind_int64(st, 1, in->rowid);
  bind_text(st, 2, duro_status_name(in->status));
  bind_text(st, 3, in->output);
  bind_text(st, 4, in->error);
  bind_ms(st, 5, in->started_ms);
  bind_ms(st, 6, in->ended_ms);
  bind_ms(st, 7, in->wake_ms);
  bind_ms(st, 8, in->paused_ms);
  bind_text(st, 9, in->wait_type);
  sqlite3_bind_int(st, 10, op->clear_control);
  if ((rc = sqlite_step_done(sq, st)))
    return rc;
  if (in->status != DURO_STATUS_ERRORED && in->status != DURO_STATUS_TERMINATED)
    return 0;
  st = sq->ws[ST_STEPS_CANCEL];
  sqlite3_bind_int64(st, 1, in->rowid);
  bind_ms(st, 2, in->ended_ms);
  return sqlite_step_done(sq, st);
}

/* The instance's one-statement ops: its control, restarts, pin, its start
 * put off, its retention at its end. */
int sqlite_instance_mark(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st;
  switch (op->kind) {
  case JOP_INSTANCE_CONTROL:
    st = sq->ws[ST_INSTANCE_CONTROL];
    sqlite3_bind_int64(st, 1, op->rowid);
    sqlite3_bind_int(st, 2, op->inst ? op->inst->control : 0);
    return sqlite_step_done(sq, st);
  case JOP_INSTANCE_CONTROL_CLEAR:
    st = sq->ws[ST_INSTANCE_CONTROL_CLEAR];
    sqlite3_bind_int64(st, 1, op->rowid);
    return sqlite_step_done(sq, st);
  case JOP_INSTANCE_RESTARTED:
    st = sq->ws[ST_INSTANCE_RESTARTED];
    sqlite3_bind_int64(st, 1, op->rowid);
    bind_ms(st, 2, op->ts_ms > 0 ? op->ts_ms : JOURNAL_NONE);
    return sqlite_step_done(sq, st);
  case JOP_INSTANCE_PIN:
    st = sq->ws[ST_INSTANCE_PIN];
    sqlite3_bind_int64(st, 1, op->rowid);
    bind_text(st, 2, op->step_key);
    return sqlite_step_done(sq, st);
  case JOP_INSTANCE_RESCHEDULE:
    st = sq->ws[ST_INSTANCE_RESCHEDULE];
    bind_text(st, 1, op->inst->workflow);
    bind_text(st, 2, op->inst->id);
    bind_text(st, 3, op->inst->params);
    bind_ms(st, 4, op->ts_ms);
    int rc = sqlite_step_changes(sq, st, op);
    return rc || op->out_rowid != 1 || !op->inst->params
               ? rc
               : reindex(sq, op->inst);
  case JOP_INSTANCE_RETAIN:
    st = sq->ws[ST_INSTANCE_RETAIN];
    sqlite3_bind_int64(st, 1, op->rowid);
    sqlite3_bind_int64(st, 2, op->ts_ms);
    return sqlite_step_done(sq, st);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

int sqlite_step_put(sqlite_store *sq, journal_op *op) {
  const journal_step *s = op->step;
  sqlite3_stmt *st = sq->ws[ST_STEP_PUT];
  sqlite3_bind_int64(st, 1, op->rowid);
  bind_text(st, 2, s->key);
  sqlite3_bind_int64(st, 3, s->seq);
  bind_text(st, 4, s->name);
  sqlite3_bind_int64(st, 5, s->count);
  bind_text(st, 6, duro_step_kind_name(s->type));
  bind_text(st, 7, duro_step_status_name(s->status));
  bind_text(st, 8, s->result);
  bind_text(st, 9, s->error);
  sqlite3_bind_int64(st, 10, s->attempts);
  bind_ms(st, 11, s->started_ms);
  bind_ms(st, 12, s->ended_ms);
  bind_ms(st, 13, s->wake_ms);
  bind_ms(st, 14, s->attempt_started_ms);
  bind_text(st, 15, s->build);
  return sqlite_step_done(sq, st);
}

/* The steps' other ops: a discard (with the attempts), a shift of their
 * wakes, an attempt's row. */
int sqlite_steps_change(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st;
  int rc;
  switch (op->kind) {
  case JOP_STEPS_DISCARD:
    st = sq->ws[ST_STEPS_DISCARD];
    sqlite3_bind_int64(st, 1, op->rowid);
    sqlite3_bind_int64(st, 2, op->from_seq < 0 ? INT64_MIN : op->from_seq);
    if ((rc = sqlite_step_done(sq, st)))
      return rc;
    st = sq->ws[ST_ATTEMPTS_DISCARD];
    sqlite3_bind_int64(st, 1, op->rowid);
    return sqlite_step_done(sq, st);
  case JOP_STEPS_SHIFT_WAKE:
    st = sq->ws[ST_STEPS_SHIFT_WAKE];
    sqlite3_bind_int64(st, 1, op->rowid);
    sqlite3_bind_int64(st, 2, op->from_seq);
    return sqlite_step_done(sq, st);
  case JOP_ATTEMPT_PUT:
    st = sq->ws[ST_ATTEMPT_PUT];
    sqlite3_bind_int64(st, 1, op->rowid);
    bind_text(st, 2, op->attempt.key);
    sqlite3_bind_int64(st, 3, op->attempt.number);
    bind_ms(st, 4, op->attempt.started_ms);
    bind_ms(st, 5, op->attempt.ended_ms);
    bind_text(st, 6, op->attempt.error);
    bind_text(st, 7, op->attempt.build);
    return sqlite_step_done(sq, st);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

/* An event's ops: its insert, its consumption, the wakes it may cause. */
int sqlite_event_apply(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st;
  int rc;
  switch (op->kind) {
  case JOP_EVENT_INSERT:
    st = sq->ws[ST_EVENT_INSERT];
    sqlite3_bind_int64(st, 1, op->rowid);
    bind_text(st, 2, op->event_type);
    bind_text(st, 3, op->event_payload);
    sqlite3_bind_int64(st, 4, op->ts_ms);
    if ((rc = sqlite_step_done(sq, st)))
      return rc;
    if (sqlite3_changes(sq->wr) == 0) {
      op->rc = DURO_E_INSTANCE_ENDED;
      return 0;
    }
    op->rc = 0;
    op->out_rowid = sqlite3_last_insert_rowid(sq->wr);
    return 0;
  case JOP_EVENT_CONSUME:
    st = sq->ws[ST_EVENT_CONSUME];
    sqlite3_bind_int64(st, 1, op->event_seq);
    bind_text(st, 2, op->step_key);
    return sqlite_step_done(sq, st);
  case JOP_WAKE_IF_WAITING:
    st = sq->ws[ST_WAKE_IF_WAITING];
    sqlite3_bind_int64(st, 1, op->rowid);
    bind_text(st, 2, op->event_type);
    sqlite3_bind_int64(st, 3, op->ts_ms);
    return sqlite_step_changes(sq, st, op);
  case JOP_WAKE_IF_EVENT_PENDING:
    st = sq->ws[ST_WAKE_IF_EVENT_PENDING];
    sqlite3_bind_int64(st, 1, op->rowid);
    sqlite3_bind_int64(st, 2, op->ts_ms);
    return sqlite_step_changes(sq, st, op);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

int sqlite_sweep(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st = sq->ws[ST_SWEEP_PICK];
  int rc;
  sqlite3_bind_int64(st, 1, op->ts_ms);
  sqlite3_bind_int64(st, 2, op->from_seq);
  if ((rc = sqlite_step_done(sq, st)))
    return rc;
  op->out_rowid = sqlite3_changes(sq->wr);
  for (int k = ST_SWEEP_STEPS; k <= ST_SWEEP_CLEAR; k++)
    if ((rc = sqlite_step_done(sq, sq->ws[k])))
      return rc;
  return 0;
}

/* The instance first: nothing else goes unless it did (it had ended).
 * The counts table follows the instance's row by its trigger. */
int sqlite_instance_delete(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st = sq->ws[ST_DELETE_INSTANCE];
  int rc;
  sqlite3_bind_int64(st, 1, op->rowid);
  if ((rc = sqlite_step_changes(sq, st, op)) || op->out_rowid == 0)
    return rc;
  int64_t gone[ST_DELETE_ATTRIBUTES - ST_DELETE_STEPS + 1];
  for (int k = ST_DELETE_STEPS; k <= ST_DELETE_ATTRIBUTES; k++) {
    st = sq->ws[k];
    sqlite3_bind_int64(st, 1, op->rowid);
    if ((rc = sqlite_step_done(sq, st)))
      return rc;
    gone[k - ST_DELETE_STEPS] = sqlite3_changes(sq->wr);
  }
  if (op->deleted)
    *op->deleted = (journal_deleted){.steps = gone[0],
                                     .attempts = gone[1],
                                     .events = gone[2],
                                     .logs = gone[3]};
  return 0;
}
