/* span_capture.c — the spans a committed batch holds: an ended instance
 * (its row written with an end status), a failed attempt (its row), a do
 * step completed (its last attempt, in the step's row), a sleep or wait
 * completed, an event stored, and the batch itself when it settled a
 * queue delivery or fired a cron tick.  Only what the ops carry is copied, on
 * the committing thread; the exporter names the instance later. */
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "telemetry_internal.h"
#include "trace_ids.h"
#include "util.h"

void span_rec_clear(span_rec *r) {
  free(r->workflow);
  free(r->id);
  free(r->key);
  free(r->name);
  free(r->step_kind);
  free(r->build);
  free(r->status);
  free(r->error);
  free(r->traceparent);
  free(r->sender);
  free(r->subject);
  free(r->links);
  memset(r, 0, sizeof *r);
}

static char *dup_or_null(const char *s) { return s ? xstrdup(s) : NULL; }

/* Whether op holds a span, and it into r. */
static int span_of(const journal_op *op, span_rec *r) {
  memset(r, 0, sizeof *r);
  r->rowid = op->rowid;
  r->created_ms = JOURNAL_NONE;
  if (op->kind == JOP_INSTANCE_SET && op->inst &&
      duro_status_ended(op->inst->status)) {
    const journal_instance *in = op->inst;
    r->kind = SPAN_INSTANCE;
    r->rowid = in->rowid ? in->rowid : op->rowid;
    r->workflow = dup_or_null(in->workflow);
    r->id = dup_or_null(in->id);
    r->created_ms = in->workflow && in->id ? in->created_ms : JOURNAL_NONE;
    r->traceparent = dup_or_null(in->traceparent);
    r->status = xstrdup(duro_status_name(in->status));
    r->error = dup_or_null(in->error);
    r->start_ms = in->created_ms;
    r->end_ms = in->ended_ms;
    return 1;
  }
  if (op->kind == JOP_ATTEMPT_PUT && op->attempt.key && op->attempt.error) {
    const journal_attempt *a = &op->attempt;
    r->kind = SPAN_ATTEMPT;
    r->key = xstrdup(a->key);
    r->attempt = a->number;
    r->build = dup_or_null(a->build);
    r->error = xstrdup(a->error);
    r->start_ms = a->started_ms;
    r->end_ms = a->ended_ms;
    return 1;
  }
  if (op->kind == JOP_STEP_PUT && op->step &&
      op->step->status == DURO_STEP_COMPLETE) {
    const journal_step *s = op->step;
    int is_do = s->type == DURO_STEP_DO;
    r->kind = is_do ? SPAN_ATTEMPT : SPAN_STEP;
    r->key = xstrdup(s->key);
    r->name = xstrdup(s->name);
    r->step_kind = xstrdup(duro_step_kind_name(s->type));
    r->attempt = is_do ? s->attempts : 0;
    r->build = dup_or_null(s->build);
    r->start_ms = is_do && s->attempt_started_ms != JOURNAL_NONE
                      ? s->attempt_started_ms
                      : s->started_ms;
    r->end_ms = s->ended_ms;
    return 1;
  }
  if (op->kind == JOP_EVENT_INSERT && op->rc == 0 && op->event_type) {
    r->kind = SPAN_EVENT;
    r->name = xasprintf("event %s", op->event_type);
    r->key = xstrdup("event");
    r->attempt = (uint32_t)op->out_rowid; /* its seq: one span an event */
    r->sender = dup_or_null(op->traceparent);
    r->start_ms = r->end_ms = op->ts_ms;
    return 1;
  }
  return 0;
}

/* The root spans of the instances batch b created, into r's links. */
static void link_created(const journal_batch *b, span_rec *r) {
  r->links = xcalloc(b->n ? b->n : 1, sizeof *r->links);
  for (size_t i = 0; i < b->n; i++) {
    const journal_op *op = &b->ops[i];
    if (op->kind != JOP_INSTANCE_INSERT || op->rc || !op->inst)
      continue;
    trace_of t;
    trace_of_instance(op->inst->workflow, op->inst->id, op->inst->created_ms,
                      op->inst->traceparent, &t);
    span_link *l = &r->links[r->n_links++];
    memcpy(l->trace, t.trace, sizeof l->trace);
    memcpy(l->span, t.root, sizeof l->span);
  }
}

/* Whether batch b settled a queue delivery (acked messages: a no-code
 * consumer's batch with the instances it started, a push handler's, a
 * pull's ack) or fired a cron tick, and that span into r: a trace of its
 * own, linked to the instances it started.  One span a batch. */
static int span_of_batch(const journal_batch *b, span_rec *r) {
  memset(r, 0, sizeof *r);
  r->created_ms = JOURNAL_NONE;
  const journal_op *first = NULL;
  for (size_t i = 0; i < b->n; i++) {
    const journal_op *op = &b->ops[i];
    if (op->kind == JOP_CRON_TICK && op->out_rowid == 1 &&
        op->ts_ms != JOURNAL_NONE) {
      r->kind = SPAN_TICK;
      r->subject = xstrdup(op->queue);
      r->count = op->visible_ms;
      r->start_ms = op->visible_ms < op->ts_ms ? op->visible_ms : op->ts_ms;
      r->end_ms = op->ts_ms;
      trace_event_ids("cron", op->queue, op->visible_ms, r->self.trace,
                      r->self.span);
      link_created(b, r);
      return 1;
    }
    if (op->kind == JOP_MESSAGE_ACK && op->out_rowid == 1 && op->queue &&
        (!first || !strcmp(op->queue, first->queue))) {
      first = first ? first : op;
      r->count++;
    }
  }
  if (!first)
    return 0;
  r->kind = SPAN_QUEUE;
  r->subject = xstrdup(first->queue);
  r->start_ms = r->end_ms = first->ts_ms;
  trace_event_ids("queue", first->queue, journal_lease_seq(first->lease),
                  r->self.trace, r->self.span);
  link_created(b, r);
  return 1;
}

/* r into the buffer, or dropped (counted) when it is full. */
static void keep(telemetry *t, span_rec *r) {
  pthread_mutex_lock(&t->mu);
  if (t->n + t->held < t->max) {
    t->ring[(t->head + t->n) % t->max] = *r;
    t->n++;
    if (t->n * 2 >= t->max) /* half full: post now */
      pthread_cond_signal(&t->wake);
  } else {
    t->dropped++;
    span_rec_clear(r);
  }
  pthread_mutex_unlock(&t->mu);
}

void span_capture(telemetry *t, const journal_batch *b) {
  span_rec r;
  for (size_t i = 0; i < b->n; i++)
    if (span_of(&b->ops[i], &r))
      keep(t, &r);
  if (span_of_batch(b, &r))
    keep(t, &r);
}
