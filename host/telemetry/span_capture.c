/* span_capture.c — the spans a committed batch holds: an ended instance
 * (its row written with an end status), a failed attempt (its row), a do
 * step completed (its last attempt, in the step's row), a sleep or wait
 * completed, an event stored, and the batch itself when it settled a
 * queue delivery or fired a cron tick.  Only what the ops carry is copied, on
 * the committing thread, into a slot (telemetry_internal.h): its strings
 * inline when they are short, else in one allocation; the exporter names
 * the instance later. */
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "telemetry_internal.h"
#include "trace_ids.h"
#include "util.h"

static int slot_on_heap(const span_slot *s) {
  return s->kind == SPAN_QUEUE || s->kind == SPAN_TICK || s->len > SPAN_INLINE;
}

void span_slot_clear(span_slot *s) {
  if (slot_on_heap(s))
    free(s->data.heap);
  memset(s, 0, sizeof *s);
}

void span_view(const span_slot *s, span_rec *r) {
  memset(r, 0, sizeof *r);
  r->kind = s->kind;
  r->rowid = s->rowid;
  r->created_ms = s->created_ms;
  r->start_ms = s->start_ms;
  r->end_ms = s->end_ms;
  r->attempt = s->attempt;
  const char *at = slot_on_heap(s) ? s->data.heap : s->data.in;
  if (s->kind == SPAN_QUEUE || s->kind == SPAN_TICK) {
    const span_started *st = (const span_started *)at;
    r->self = st->self;
    r->count = st->count;
    r->n_links = st->n_links;
    r->links = (const span_link *)(at + sizeof *st);
    at += sizeof *st + st->n_links * sizeof *r->links;
  }
  const char **dst[SS_N] = {[SS_WORKFLOW] = &r->workflow,
                            [SS_ID] = &r->id,
                            [SS_KEY] = &r->key,
                            [SS_NAME] = &r->name,
                            [SS_BUILD] = &r->build,
                            [SS_ERROR] = &r->error,
                            [SS_TRACEPARENT] = &r->traceparent,
                            [SS_SENDER] = &r->sender,
                            [SS_SUBJECT] = &r->subject};
  for (int i = 0; i < SS_N; i++)
    if (s->has & (1u << i)) {
      *dst[i] = at;
      at += strlen(at) + 1;
    }
  if (s->code && (s->kind == SPAN_INSTANCE || s->kind == SPAN_ACTIVATION))
    r->status = duro_status_name((duro_status)(s->code - 1));
  else if (s->code)
    r->step_kind = duro_step_kind_name((duro_step_kind)(s->code - 1));
}

/* s's data: st and its links first when given (SPAN_QUEUE, SPAN_TICK),
 * then the strings of str that are not NULL, the name after prefix. */
static void slot_fill(span_slot *s, const char *const str[SS_N],
                      const char *prefix, const span_started *st,
                      const span_link *links) {
  size_t len[SS_N], plen = prefix ? strlen(prefix) : 0;
  size_t head = st ? sizeof *st + st->n_links * sizeof *links : 0;
  size_t total = head;
  s->has = 0;
  for (int i = 0; i < SS_N; i++)
    if (str[i]) {
      len[i] = strlen(str[i]) + 1;
      total += len[i] + (i == SS_NAME ? plen : 0);
      s->has |= (uint16_t)(1u << i);
    }
  s->len = (uint32_t)total;
  char *at = s->data.in;
  if (slot_on_heap(s))
    at = s->data.heap = xmalloc(total);
  if (st) {
    memcpy(at, st, sizeof *st);
    if (st->n_links)
      memcpy(at + sizeof *st, links, st->n_links * sizeof *links);
    at += head;
  }
  for (int i = 0; i < SS_N; i++)
    if (str[i]) {
      if (i == SS_NAME && plen) {
        memcpy(at, prefix, plen);
        at += plen;
      }
      memcpy(at, str[i], len[i]);
      at += len[i];
    }
}

/* Whether op holds a span, and it into s. */
static int span_of(const journal_op *op, span_slot *s) {
  const char *str[SS_N] = {0};
  const char *prefix = NULL;
  memset(s, 0, offsetof(span_slot, data));
  s->rowid = op->rowid;
  s->created_ms = JOURNAL_NONE;
  if (op->kind == JOP_INSTANCE_SET && op->inst &&
      duro_status_ended(op->inst->status)) {
    const journal_instance *in = op->inst;
    s->kind = SPAN_INSTANCE;
    s->rowid = in->rowid ? in->rowid : op->rowid;
    str[SS_WORKFLOW] = in->workflow;
    str[SS_ID] = in->id;
    s->created_ms = in->workflow && in->id ? in->created_ms : JOURNAL_NONE;
    str[SS_TRACEPARENT] = in->traceparent;
    s->code = (uint8_t)(in->status + 1);
    str[SS_ERROR] = in->error;
    s->start_ms = in->created_ms;
    s->end_ms = in->ended_ms;
  } else if (op->kind == JOP_ATTEMPT_PUT && op->attempt.key &&
             op->attempt.error) {
    const journal_attempt *a = &op->attempt;
    s->kind = SPAN_ATTEMPT;
    str[SS_KEY] = a->key;
    s->attempt = a->number;
    str[SS_BUILD] = a->build;
    str[SS_ERROR] = a->error;
    s->start_ms = a->started_ms;
    s->end_ms = a->ended_ms;
  } else if (op->kind == JOP_STEP_PUT && op->step &&
             op->step->status == DURO_STEP_COMPLETE) {
    const journal_step *st = op->step;
    int is_do = st->type == DURO_STEP_DO;
    s->kind = is_do ? SPAN_ATTEMPT : SPAN_STEP;
    str[SS_KEY] = st->key;
    str[SS_NAME] = st->name;
    s->code = (uint8_t)(st->type + 1);
    s->attempt = is_do ? st->attempts : 0;
    str[SS_BUILD] = st->build;
    s->start_ms = is_do && st->attempt_started_ms != JOURNAL_NONE
                      ? st->attempt_started_ms
                      : st->started_ms;
    s->end_ms = st->ended_ms;
  } else if (op->kind == JOP_INSTANCE_INSERT && op->rc == 0 && op->inst &&
             op->inst->workflow && op->inst->id && op->out_rowid > 0) {
    const journal_instance *in = op->inst;
    s->kind = SPAN_NAME;
    s->rowid = op->out_rowid;
    str[SS_WORKFLOW] = in->workflow;
    str[SS_ID] = in->id;
    str[SS_TRACEPARENT] = in->traceparent;
    s->created_ms = in->created_ms;
  } else if (op->kind == JOP_EVENT_INSERT && op->rc == 0 && op->event_type) {
    s->kind = SPAN_EVENT;
    str[SS_NAME] = op->event_type;
    prefix = "event ";
    str[SS_KEY] = "event";
    s->attempt = (uint32_t)op->out_rowid; /* its seq: one span an event */
    str[SS_SENDER] = op->traceparent;
    s->start_ms = s->end_ms = op->ts_ms;
  } else {
    return 0;
  }
  slot_fill(s, str, prefix, NULL, NULL);
  return 1;
}

/* The root spans of the instances batch b created, into links (b->n of
 * them at most); how many. */
static size_t link_created(const journal_batch *b, span_link *links) {
  size_t n = 0;
  for (size_t i = 0; i < b->n; i++) {
    const journal_op *op = &b->ops[i];
    if (op->kind != JOP_INSTANCE_INSERT || op->rc || !op->inst)
      continue;
    trace_of t;
    trace_of_instance(op->inst->workflow, op->inst->id, op->inst->created_ms,
                      op->inst->traceparent, &t);
    span_link *l = &links[n++];
    memcpy(l->trace, t.trace, sizeof l->trace);
    memcpy(l->span, t.root, sizeof l->span);
  }
  return n;
}

/* Whether batch b settled a queue delivery (acked messages: a no-code
 * consumer's batch with the instances it started, a push handler's, a
 * pull's ack) or fired a cron tick, and that span into s: a trace of its
 * own, linked to the instances it started.  One span a batch. */
static int span_of_batch(const journal_batch *b, span_slot *s) {
  memset(s, 0, offsetof(span_slot, data));
  s->created_ms = JOURNAL_NONE;
  span_started st = {.count = 0};
  const journal_op *first = NULL, *tick = NULL;
  for (size_t i = 0; i < b->n && !tick; i++) {
    const journal_op *op = &b->ops[i];
    if (op->kind == JOP_CRON_TICK && op->out_rowid == 1 &&
        op->ts_ms != JOURNAL_NONE)
      tick = op;
    else if (op->kind == JOP_MESSAGE_ACK && op->out_rowid == 1 && op->queue &&
             (!first || !strcmp(op->queue, first->queue))) {
      first = first ? first : op;
      st.count++;
    }
  }
  if (!tick && !first)
    return 0;
  const char *str[SS_N] = {0};
  if (tick) {
    s->kind = SPAN_TICK;
    str[SS_SUBJECT] = tick->queue;
    st.count = tick->visible_ms;
    s->start_ms =
        tick->visible_ms < tick->ts_ms ? tick->visible_ms : tick->ts_ms;
    s->end_ms = tick->ts_ms;
    trace_event_ids("cron", tick->queue, tick->visible_ms, st.self.trace,
                    st.self.span);
  } else {
    s->kind = SPAN_QUEUE;
    str[SS_SUBJECT] = first->queue;
    s->start_ms = s->end_ms = first->ts_ms;
    trace_event_ids("queue", first->queue, journal_lease_seq(first->lease),
                    st.self.trace, st.self.span);
  }
  span_link *links = xcalloc(b->n ? b->n : 1, sizeof *links);
  st.n_links = link_created(b, links);
  slot_fill(s, str, NULL, &st, links);
  free(links);
  return 1;
}

/* Spans a batch holds, kept on the stack until they go into the buffer
 * under one lock. */
#define KEEP_MAX 32

/* v[0..n) into the buffer, the spans that do not fit dropped (counted),
 * the names that do not (SPAN_NAME) left to the exporter's reads. */
static void keep(telemetry *t, span_slot *v, size_t n) {
  size_t left[KEEP_MAX], n_left = 0, kept = 0;
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < n; i++) {
    if (v[i].kind == SPAN_NAME) {
      if (t->n_names == t->cap_names && t->cap_names < t->max) {
        size_t cap = t->cap_names ? t->cap_names * 2 : 64;
        t->cap_names = cap < t->max ? cap : t->max;
        t->names = xrealloc(t->names, t->cap_names * sizeof *t->names);
      }
      if (t->n_names < t->cap_names)
        t->names[t->n_names++] = v[i];
      else
        left[n_left++] = i;
    } else if (t->n + t->held < t->max) {
      t->ring[(t->head + t->n) % t->max] = v[i];
      t->n++;
      kept++;
    } else {
      t->dropped++;
      left[n_left++] = i;
    }
  }
  if (kept && t->n * 2 >= t->max) /* half full: post now */
    pthread_cond_signal(&t->wake);
  pthread_mutex_unlock(&t->mu);
  for (size_t i = 0; i < n_left; i++)
    span_slot_clear(&v[left[i]]);
}

void span_capture_activation(telemetry *t, const duro_activation_report *r) {
  span_slot s;
  const char *str[SS_N] = {0};
  memset(&s, 0, offsetof(span_slot, data));
  s.kind = SPAN_ACTIVATION;
  s.rowid = r->rowid;
  s.created_ms = r->created_ms;
  str[SS_WORKFLOW] = r->workflow;
  str[SS_ID] = r->id;
  str[SS_TRACEPARENT] = r->traceparent;
  str[SS_KEY] = "@activation";
  str[SS_NAME] = "activation";
  str[SS_BUILD] = r->build;
  str[SS_SUBJECT] = r->outcome;
  /* its span id from the instance and its start: one an activation */
  s.attempt =
      (uint32_t)((uint64_t)r->started_ms ^ ((uint64_t)r->started_ms >> 32));
  s.code = (uint8_t)(r->status + 1);
  s.start_ms = r->started_ms;
  s.end_ms = r->ended_ms;
  slot_fill(&s, str, NULL, NULL, NULL);
  keep(t, &s, 1);
}

void span_capture(telemetry *t, const journal_batch *b) {
  span_slot v[KEEP_MAX];
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
