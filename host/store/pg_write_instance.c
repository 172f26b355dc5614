/* pg_write_instance.c — the PostgreSQL backend's ops on an instance's
 * rows: the instance inserted, set and marked (control, restarts, pin),
 * its steps and attempts, its events and the wakes they cause (a notice
 * to the host that runs it), and the deletes of ended instances: one
 * at a time, and the retention sweep. */
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>

#include "pg_internal.h"

/* Whether the event woke the instance (out_rowid), and which host runs it
 * (out_owner): another host is sent a notice "e <rowid> <woke>",
 * delivered when the group commits. */
static int wake_if_waiting(pg_store *pg, journal_op *op, const params *p) {
  PGresult *r = pg_write_run(pg, ST_WAKE_IF_WAITING, p);
  if (!r)
    return DURO_E_STORAGE;
  int found = PQntuples(r) > 0;
  op->out_rowid = found ? get_i64(r, 0, 0) : 0;
  op->out_owner = found ? get_i64(r, 0, 1) : pg->host;
  PQclear(r);
  if (op->out_owner == pg->host)
    return 0;
  char channel[40], text[48];
  snprintf(channel, sizeof channel, HOST_CHANNEL "%" PRId64, op->out_owner);
  snprintf(text, sizeof text, "e %" PRId64 " %d", op->rowid, op->out_rowid > 0);
  params n = {0};
  p_text(&n, channel);
  p_text(&n, text);
  return pg_write_queue(pg, ST_NOTIFY, &n);
}

int pg_instance_insert(pg_store *pg, journal_op *op) {
  const journal_instance *in = op->inst;
  params p = {0};
  int rc, inserted = 0;
  p_text(&p, in->workflow);
  p_text(&p, in->id);
  p_text(&p, duro_status_name(in->status));
  p_text(&p, in->params);
  p_i64(&p, in->created_ms);
  p_i64(&p, in->retention_ms);
  p_i64(&p, pg->host);
  p_ms(&p, in->deadline_ms > 0 ? in->deadline_ms : JOURNAL_NONE);
  p_ms(&p, in->parent > 0 ? in->parent : JOURNAL_NONE);
  p_i64(&p, in->parent_close);
  p_text(&p, in->traceparent);
  p_ms(&p, in->wake_ms > 0 ? in->wake_ms : JOURNAL_NONE);
  p_text(&p, in->claim_key);
  if ((rc = pg_write_returning(pg, ST_INSTANCE_INSERT, &p, &inserted,
                               &op->out_rowid)))
    return rc;
  op->rc = inserted ? 0 : DURO_E_ALREADY_EXISTS;
  for (size_t i = 0; inserted && i < in->n_attrs; i++)
    if ((rc = pg_attribute_set(pg, op->out_rowid, &in->attrs[i])))
      return rc;
  return 0;
}

int pg_attribute_set(pg_store *pg, int64_t rowid, const duro_attr *a) {
  params p = {0};
  p_i64(&p, rowid);
  p_text(&p, a->name);
  p_text(&p, a->str);
  if (a->str) {
    p_text(&p, NULL);
  } else {
    snprintf(p.buf[p.n], sizeof p.buf[p.n], "%.17g", a->num);
    p_text(&p, p.buf[p.n]);
  }
  return pg_write_queue(pg, ST_ATTRIBUTE_SET, &p);
}

/* A rescheduled instance took new params: its attributes are those they
 * give (it has not started, so run() set none). */
static int reindex(pg_store *pg, const journal_instance *in) {
  params p = {0};
  p_text(&p, in->workflow);
  p_text(&p, in->id);
  int rc = pg_write_queue(pg, ST_ATTRIBUTES_CLEAR_BY_ID, &p);
  for (size_t i = 0; rc == 0 && i < in->n_attrs; i++) {
    const duro_attr *a = &in->attrs[i];
    params q = {0};
    p_text(&q, in->workflow);
    p_text(&q, in->id);
    p_text(&q, a->name);
    p_text(&q, a->str);
    if (a->str) {
      p_text(&q, NULL);
    } else {
      snprintf(q.buf[q.n], sizeof q.buf[q.n], "%.17g", a->num);
      p_text(&q, q.buf[q.n]);
    }
    rc = pg_write_queue(pg, ST_ATTRIBUTE_SET_BY_ID, &q);
  }
  return rc;
}

/* An instance's new state; an end by error or terminate cancels the
 * steps still open. */
int pg_instance_set(pg_store *pg, journal_op *op) {
  const journal_instance *in = op->inst;
  params p = {0};
  int rc;
  p_i64(&p, in->rowid);
  p_text(&p, duro_status_name(in->status));
  p_text(&p, in->output);
  p_text(&p, in->error);
  p_ms(&p, in->started_ms);
  p_ms(&p, in->ended_ms);
  p_ms(&p, in->wake_ms);
  p_ms(&p, in->paused_ms);
  p_text(&p, in->wait_type);
  p_i64(&p, op->clear_control);
  if ((rc = pg_write_queue(pg, ST_INSTANCE_SET, &p)))
    return rc;
  if (in->status != DURO_STATUS_ERRORED && in->status != DURO_STATUS_TERMINATED)
    return 0;
  params c = {0};
  p_i64(&c, in->rowid);
  p_ms(&c, in->ended_ms);
  return pg_write_queue(pg, ST_STEPS_CANCEL, &c);
}

/* The instance's one-statement ops: its control, restarts, pin, its start
 * put off. */
int pg_instance_mark(pg_store *pg, journal_op *op) {
  params p = {0};
  switch (op->kind) {
  case JOP_INSTANCE_CONTROL:
    p_i64(&p, op->rowid);
    p_i64(&p, op->inst ? op->inst->control : 0);
    return pg_write_queue(pg, ST_INSTANCE_CONTROL, &p);
  case JOP_INSTANCE_CONTROL_CLEAR:
    p_i64(&p, op->rowid);
    return pg_write_queue(pg, ST_INSTANCE_CONTROL_CLEAR, &p);
  case JOP_INSTANCE_RESTARTED:
    p_i64(&p, op->rowid);
    p_ms(&p, op->ts_ms > 0 ? op->ts_ms : JOURNAL_NONE);
    return pg_write_queue(pg, ST_INSTANCE_RESTARTED, &p);
  case JOP_INSTANCE_PIN:
    p_i64(&p, op->rowid);
    p_text(&p, op->step_key);
    return pg_write_queue(pg, ST_INSTANCE_PIN, &p);
  case JOP_INSTANCE_RESCHEDULE:
    p_text(&p, op->inst->workflow);
    p_text(&p, op->inst->id);
    p_text(&p, op->inst->params);
    p_ms(&p, op->ts_ms);
    int rc = pg_write_changes(pg, ST_INSTANCE_RESCHEDULE, &p, op);
    return rc || op->out_rowid != 1 || !op->inst->params
               ? rc
               : reindex(pg, op->inst);
  case JOP_INSTANCE_RETAIN:
    p_i64(&p, op->rowid);
    p_i64(&p, op->ts_ms);
    return pg_write_queue(pg, ST_INSTANCE_RETAIN, &p);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

int pg_step_put(pg_store *pg, journal_op *op) {
  const journal_step *s = op->step;
  params p = {0};
  p_i64(&p, op->rowid);
  p_text(&p, s->key);
  p_i64(&p, s->seq);
  p_text(&p, s->name);
  p_i64(&p, s->count);
  p_text(&p, duro_step_kind_name(s->type));
  p_text(&p, duro_step_status_name(s->status));
  p_text(&p, s->result);
  p_text(&p, s->error);
  p_i64(&p, s->attempts);
  p_ms(&p, s->started_ms);
  p_ms(&p, s->ended_ms);
  p_ms(&p, s->wake_ms);
  p_ms(&p, s->attempt_started_ms);
  p_text(&p, s->build);
  return pg_write_queue(pg, ST_STEP_PUT, &p);
}

/* The steps' other ops: a discard (with the attempts), a shift of their
 * wakes, an attempt's row. */
int pg_steps_change(pg_store *pg, journal_op *op) {
  params p = {0};
  int rc;
  switch (op->kind) {
  case JOP_STEPS_DISCARD: {
    p_i64(&p, op->rowid);
    p_i64(&p, op->from_seq < 0 ? INT64_MIN : op->from_seq);
    if ((rc = pg_write_queue(pg, ST_STEPS_DISCARD, &p)))
      return rc;
    params a = {0};
    p_i64(&a, op->rowid);
    return pg_write_queue(pg, ST_ATTEMPTS_DISCARD, &a);
  }
  case JOP_STEPS_SHIFT_WAKE:
    p_i64(&p, op->rowid);
    p_i64(&p, op->from_seq);
    return pg_write_queue(pg, ST_STEPS_SHIFT_WAKE, &p);
  case JOP_ATTEMPT_PUT:
    p_i64(&p, op->rowid);
    p_text(&p, op->attempt.key);
    p_i64(&p, op->attempt.number);
    p_ms(&p, op->attempt.started_ms);
    p_ms(&p, op->attempt.ended_ms);
    p_text(&p, op->attempt.error);
    p_text(&p, op->attempt.build);
    return pg_write_queue(pg, ST_ATTEMPT_PUT, &p);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

/* An event's ops: its insert, its consumption, the wakes it may cause. */
int pg_event_apply(pg_store *pg, journal_op *op) {
  params p = {0};
  int rc, inserted = 0;
  switch (op->kind) {
  case JOP_EVENT_INSERT:
    p_i64(&p, op->rowid);
    p_text(&p, op->event_type);
    p_text(&p, op->event_payload);
    p_i64(&p, op->ts_ms);
    if ((rc = pg_write_returning(pg, ST_EVENT_INSERT, &p, &inserted,
                                 &op->out_rowid)))
      return rc;
    op->rc = inserted ? 0 : DURO_E_INSTANCE_ENDED;
    return 0;
  case JOP_EVENT_CONSUME:
    p_i64(&p, op->event_seq);
    p_text(&p, op->step_key);
    return pg_write_queue(pg, ST_EVENT_CONSUME, &p);
  case JOP_WAKE_IF_WAITING:
    p_i64(&p, op->rowid);
    p_text(&p, op->event_type);
    p_i64(&p, op->ts_ms);
    return wake_if_waiting(pg, op, &p);
  case JOP_WAKE_IF_EVENT_PENDING:
    p_i64(&p, op->rowid);
    p_i64(&p, op->ts_ms);
    return pg_write_changes(pg, ST_WAKE_IF_EVENT_PENDING, &p, op);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

int pg_sweep(pg_store *pg, journal_op *op) {
  params p = {0};
  p_i64(&p, op->ts_ms);
  p_i64(&p, op->from_seq);
  PGresult *r = pg_write_run(pg, ST_SWEEP, &p);
  if (!r)
    return DURO_E_STORAGE;
  op->out_rowid = get_i64(r, 0, 0);
  PQclear(r);
  return 0;
}

int pg_instance_delete(pg_store *pg, journal_op *op) {
  params p = {0};
  p_i64(&p, op->rowid);
  PGresult *r = pg_write_run(pg, ST_INSTANCE_DELETE, &p);
  if (!r)
    return DURO_E_STORAGE;
  op->out_rowid = get_i64(r, 0, 0);
  if (op->deleted)
    *op->deleted = (journal_deleted){.steps = get_i64(r, 0, 1),
                                     .attempts = get_i64(r, 0, 2),
                                     .events = get_i64(r, 0, 3),
                                     .logs = get_i64(r, 0, 4)};
  PQclear(r);
  return 0;
}
