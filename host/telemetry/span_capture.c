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
  free(r->mem);
  free(r->links);
  memset(r, 0, sizeof *r);
}

/* Up to PACK_MAX strings copied into one block: add each (its length
 * counted), then pack_copy allocates the block and points each target at
 * its copy (NULL stays NULL). */
#define PACK_MAX 8

typedef struct pack {
  const char **dst[PACK_MAX];
  const char *src[PACK_MAX];
  const char *prefix[PACK_MAX]; /* written before src, or NULL */
  size_t len[PACK_MAX], plen[PACK_MAX];
  size_t n, total;
} pack;

static void pack_add(pack *p, const char **dst, const char *prefix,
                     const char *s) {
  *dst = NULL;
  if (!s)
    return;
  size_t i = p->n++;
  p->dst[i] = dst;
  p->src[i] = s;
  p->prefix[i] = prefix;
  p->plen[i] = prefix ? strlen(prefix) : 0;
  p->len[i] = strlen(s);
  p->total += p->plen[i] + p->len[i] + 1;
}

static char *pack_copy(pack *p) {
  if (!p->n)
    return NULL;
  char *mem = xmalloc(p->total), *at = mem;
  for (size_t i = 0; i < p->n; i++) {
    *p->dst[i] = at;
    if (p->plen[i])
      memcpy(at, p->prefix[i], p->plen[i]);
    memcpy(at + p->plen[i], p->src[i], p->len[i] + 1);
    at += p->plen[i] + p->len[i] + 1;
  }
  return mem;
}

/* Whether op holds a span, and it into r. */
static int span_of(const journal_op *op, span_rec *r) {
  memset(r, 0, sizeof *r);
  r->rowid = op->rowid;
  r->created_ms = JOURNAL_NONE;
  pack p = {.n = 0};
  if (op->kind == JOP_INSTANCE_SET && op->inst &&
      duro_status_ended(op->inst->status)) {
    const journal_instance *in = op->inst;
    r->kind = SPAN_INSTANCE;
    r->rowid = in->rowid ? in->rowid : op->rowid;
    pack_add(&p, &r->workflow, NULL, in->workflow);
    pack_add(&p, &r->id, NULL, in->id);
    r->created_ms = in->workflow && in->id ? in->created_ms : JOURNAL_NONE;
    pack_add(&p, &r->traceparent, NULL, in->traceparent);
    r->status = duro_status_name(in->status);
    pack_add(&p, &r->error, NULL, in->error);
    r->start_ms = in->created_ms;
    r->end_ms = in->ended_ms;
    r->mem = pack_copy(&p);
    return 1;
  }
  if (op->kind == JOP_ATTEMPT_PUT && op->attempt.key && op->attempt.error) {
    const journal_attempt *a = &op->attempt;
    r->kind = SPAN_ATTEMPT;
    pack_add(&p, &r->key, NULL, a->key);
    r->attempt = a->number;
    pack_add(&p, &r->build, NULL, a->build);
    pack_add(&p, &r->error, NULL, a->error);
    r->start_ms = a->started_ms;
    r->end_ms = a->ended_ms;
    r->mem = pack_copy(&p);
    return 1;
  }
  if (op->kind == JOP_STEP_PUT && op->step &&
      op->step->status == DURO_STEP_COMPLETE) {
    const journal_step *s = op->step;
    int is_do = s->type == DURO_STEP_DO;
    r->kind = is_do ? SPAN_ATTEMPT : SPAN_STEP;
    pack_add(&p, &r->key, NULL, s->key);
    pack_add(&p, &r->name, NULL, s->name);
    r->step_kind = duro_step_kind_name(s->type);
    r->attempt = is_do ? s->attempts : 0;
    pack_add(&p, &r->build, NULL, s->build);
    r->start_ms = is_do && s->attempt_started_ms != JOURNAL_NONE
                      ? s->attempt_started_ms
                      : s->started_ms;
    r->end_ms = s->ended_ms;
    r->mem = pack_copy(&p);
    return 1;
  }
  if (op->kind == JOP_EVENT_INSERT && op->rc == 0 && op->event_type) {
    r->kind = SPAN_EVENT;
    pack_add(&p, &r->name, "event ", op->event_type);
    pack_add(&p, &r->key, NULL, "event");
    r->attempt = (uint32_t)op->out_rowid; /* its seq: one span an event */
    pack_add(&p, &r->sender, NULL, op->traceparent);
    r->start_ms = r->end_ms = op->ts_ms;
    r->mem = pack_copy(&p);
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
      pack p = {.n = 0};
      pack_add(&p, &r->subject, NULL, op->queue);
      r->mem = pack_copy(&p);
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
  pack p = {.n = 0};
  pack_add(&p, &r->subject, NULL, first->queue);
  r->mem = pack_copy(&p);
  r->start_ms = r->end_ms = first->ts_ms;
  trace_event_ids("queue", first->queue, journal_lease_seq(first->lease),
                  r->self.trace, r->self.span);
  link_created(b, r);
  return 1;
}

/* Spans a batch holds, kept on the stack until they go into the buffer
 * under one lock. */
#define KEEP_MAX 32

/* v[0..n) into the buffer, those that do not fit dropped (counted). */
static void keep(telemetry *t, span_rec *v, size_t n) {
  size_t kept = 0;
  pthread_mutex_lock(&t->mu);
  for (; kept < n && t->n + t->held < t->max; kept++) {
    t->ring[(t->head + t->n) % t->max] = v[kept];
    t->n++;
  }
  t->dropped += n - kept;
  if (kept && t->n * 2 >= t->max) /* half full: post now */
    pthread_cond_signal(&t->wake);
  pthread_mutex_unlock(&t->mu);
  for (size_t i = kept; i < n; i++)
    span_rec_clear(&v[i]);
}

void span_capture(telemetry *t, const journal_batch *b) {
  span_rec v[KEEP_MAX];
  size_t n = 0;
  for (size_t i = 0; i < b->n; i++) {
    if (!span_of(&b->ops[i], &v[n]))
      continue;
    if (++n == KEEP_MAX) {
      keep(t, v, n);
      n = 0;
    }
  }
  if (span_of_batch(b, &v[n]))
    n++;
  if (n)
    keep(t, v, n);
}
