/* span_capture.c — the spans a committed batch holds: an ended instance
 * (its row written with an end status), a failed attempt (its row), a do
 * step completed (its last attempt, in the step's row) and a sleep or
 * wait completed.  Only what the ops carry is copied, on the committing
 * thread; the exporter names the instance later. */
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "telemetry_internal.h"
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
  return 0;
}

void span_capture(telemetry *t, const journal_batch *b) {
  for (size_t i = 0; i < b->n; i++) {
    span_rec r;
    if (!span_of(&b->ops[i], &r))
      continue;
    pthread_mutex_lock(&t->mu);
    if (t->n + t->held < t->max) {
      t->ring[(t->head + t->n) % t->max] = r;
      t->n++;
      if (t->n * 2 >= t->max) /* half full: post now */
        pthread_cond_signal(&t->wake);
    } else {
      t->dropped++;
      span_rec_clear(&r);
    }
    pthread_mutex_unlock(&t->mu);
  }
}
