/* journal_wire.c — journal batches and rows as flat bytes (journal_wire.h).
 *
 * Every field is written in one order and read back in the same, one
 * function a record kind; a field added to journal_op or a row is added
 * to both halves here and to test_wire's round trip. */
#include "journal_wire.h"

#include <stdlib.h>
#include <string.h>

#include "duro.h"
#include "util.h"

#define WIRE_VERSION 1
enum { TAG_BATCH = 'B', TAG_RESULTS = 'R' };

/* ---- rows ---- */

static void put_instance(wire_buf *w, const journal_instance *in) {
  wire_put_i64(w, in->rowid);
  wire_put_str(w, in->workflow);
  wire_put_str(w, in->id);
  wire_put_u32(w, (uint32_t)in->status);
  wire_put_str(w, in->params);
  wire_put_str(w, in->output);
  wire_put_str(w, in->error);
  wire_put_i64(w, in->created_ms);
  wire_put_i64(w, in->started_ms);
  wire_put_i64(w, in->ended_ms);
  wire_put_i64(w, in->wake_ms);
  wire_put_i64(w, in->paused_ms);
  wire_put_str(w, in->wait_type);
  wire_put_u32(w, (uint32_t)in->control);
  wire_put_i64(w, in->retention_ms);
  wire_put_str(w, in->build);
  wire_put_i64(w, in->restarts);
  wire_put_i64(w, in->owner);
  wire_put_i64(w, in->deadline_ms);
  wire_put_i64(w, in->parent);
  wire_put_u32(w, (uint32_t)in->parent_close);
  wire_put_str(w, in->traceparent);
}

static void get_instance(wire_reader *r, journal_instance *in) {
  memset(in, 0, sizeof *in);
  in->rowid = wire_get_i64(r);
  in->workflow = wire_get_str(r);
  in->id = wire_get_str(r);
  in->status = (duro_status)wire_get_enum(r, DURO_STATUS_COMPLETE + 1);
  in->params = wire_get_str(r);
  in->output = wire_get_str(r);
  in->error = wire_get_str(r);
  in->created_ms = wire_get_i64(r);
  in->started_ms = wire_get_i64(r);
  in->ended_ms = wire_get_i64(r);
  in->wake_ms = wire_get_i64(r);
  in->paused_ms = wire_get_i64(r);
  in->wait_type = wire_get_str(r);
  in->control = (int)wire_get_enum(r, INT32_MAX); /* a restart's: any */
  in->retention_ms = wire_get_i64(r);
  in->build = wire_get_str(r);
  in->restarts = wire_get_i64(r);
  in->owner = wire_get_i64(r);
  in->deadline_ms = wire_get_i64(r);
  in->parent = wire_get_i64(r);
  in->parent_close = (int)wire_get_enum(r, JOURNAL_PARENT_CLOSE_ABANDON + 1);
  in->traceparent = wire_get_str(r);
}

static void put_step(wire_buf *w, const journal_step *s) {
  wire_put_str(w, s->key);
  wire_put_str(w, s->name);
  wire_put_u32(w, s->count);
  wire_put_i64(w, s->seq);
  wire_put_u32(w, (uint32_t)s->type);
  wire_put_u32(w, (uint32_t)s->status);
  wire_put_str(w, s->result);
  wire_put_str(w, s->error);
  wire_put_u32(w, s->attempts);
  wire_put_i64(w, s->started_ms);
  wire_put_i64(w, s->ended_ms);
  wire_put_i64(w, s->wake_ms);
  wire_put_i64(w, s->attempt_started_ms);
  wire_put_str(w, s->build);
}

static void get_step(wire_reader *r, journal_step *s) {
  memset(s, 0, sizeof *s);
  s->key = wire_get_str(r);
  s->name = wire_get_str(r);
  s->count = wire_get_u32(r);
  s->seq = wire_get_i64(r);
  s->type = (duro_step_kind)wire_get_enum(r, DURO_STEP_ROLLBACK + 1);
  s->status = (duro_step_status)wire_get_enum(r, DURO_STEP_CANCELLED + 1);
  s->result = wire_get_str(r);
  s->error = wire_get_str(r);
  s->attempts = wire_get_u32(r);
  s->started_ms = wire_get_i64(r);
  s->ended_ms = wire_get_i64(r);
  s->wake_ms = wire_get_i64(r);
  s->attempt_started_ms = wire_get_i64(r);
  s->build = wire_get_str(r);
}

void journal_wire_instance(wire_buf *w, const journal_instance *in) {
  put_instance(w, in);
}

int journal_wire_instance_read(wire_reader *r, journal_instance *out) {
  get_instance(r, out);
  if (!r->bad)
    return 0;
  journal_instance_clear(out);
  return DURO_E_INVALID_ARGUMENT;
}

/* A count of rows that could not fit in what is left (each row takes
 * more than 4 bytes) is garbage, not an allocation to attempt. */
static size_t get_count(wire_reader *r) {
  uint32_t n = wire_get_u32(r);
  if (!r->bad && (size_t)n > (size_t)(r->end - r->p) / 4)
    r->bad = 1;
  return r->bad ? 0 : n;
}

void journal_wire_steps(wire_buf *w, const journal_step *s, size_t n) {
  wire_put_u32(w, (uint32_t)n);
  for (size_t i = 0; i < n; i++)
    put_step(w, &s[i]);
}

int journal_wire_steps_read(wire_reader *r, journal_step **out, size_t *n) {
  *out = NULL;
  *n = get_count(r);
  journal_step *v = *n ? xcalloc(*n, sizeof *v) : NULL;
  for (size_t i = 0; i < *n; i++)
    get_step(r, &v[i]);
  if (!r->bad) {
    *out = v;
    return 0;
  }
  journal_steps_free(v, *n);
  *n = 0;
  return DURO_E_INVALID_ARGUMENT;
}

void journal_wire_events(wire_buf *w, const journal_event *ev, size_t n) {
  wire_put_u32(w, (uint32_t)n);
  for (size_t i = 0; i < n; i++) {
    wire_put_i64(w, ev[i].seq);
    wire_put_str(w, ev[i].type);
    wire_put_str(w, ev[i].payload);
    wire_put_i64(w, ev[i].ts_ms);
    wire_put_str(w, ev[i].consumed_by);
  }
}

int journal_wire_events_read(wire_reader *r, journal_event **out, size_t *n) {
  *out = NULL;
  *n = get_count(r);
  journal_event *v = *n ? xcalloc(*n, sizeof *v) : NULL;
  for (size_t i = 0; i < *n; i++) {
    v[i].seq = wire_get_i64(r);
    v[i].type = wire_get_str(r);
    v[i].payload = wire_get_str(r);
    v[i].ts_ms = wire_get_i64(r);
    v[i].consumed_by = wire_get_str(r);
  }
  if (!r->bad) {
    *out = v;
    return 0;
  }
  journal_events_free(v, *n);
  *n = 0;
  return DURO_E_INVALID_ARGUMENT;
}

/* ---- batches ---- */

static void put_op(wire_buf *w, const journal_op *op) {
  wire_put_u32(w, (uint32_t)op->kind);
  wire_put_i64(w, op->rowid);
  wire_put_u8(w, op->inst != NULL);
  if (op->inst)
    put_instance(w, op->inst);
  wire_put_u8(w, op->step != NULL);
  if (op->step)
    put_step(w, op->step);
  wire_put_str(w, op->attempt.key);
  wire_put_u32(w, op->attempt.number);
  wire_put_i64(w, op->attempt.started_ms);
  wire_put_i64(w, op->attempt.ended_ms);
  wire_put_str(w, op->attempt.error);
  wire_put_str(w, op->attempt.build);
  wire_put_i64(w, op->from_seq);
  wire_put_i64(w, op->event_seq);
  wire_put_str(w, op->event_type);
  wire_put_str(w, op->event_payload);
  wire_put_str(w, op->step_key);
  wire_put_i64(w, op->ts_ms);
  wire_put_u32(w, (uint32_t)op->clear_control);
  wire_put_str(w, op->queue);
  wire_put_str(w, op->body);
  wire_put_str(w, op->lease);
  wire_put_str(w, op->error);
  wire_put_str(w, op->dead_letter_queue);
  wire_put_i64(w, op->visible_ms);
  wire_put_u32(w, op->max_attempts);
  wire_put_str(w, op->lease_token);
  wire_put_i64(w, (int64_t)op->n_leases);
  wire_put_str(w, op->traceparent);
}

/* A string read into b's keeping. */
static const char *own_str(wire_reader *r, journal_batch *b) {
  char *s = wire_get_str(r);
  return s ? journal_batch_own(b, s) : NULL;
}

/* The row's strings go to b one by one, then the row itself. */
static const journal_instance *own_instance(wire_reader *r, journal_batch *b) {
  journal_instance *in = journal_batch_own(b, xmalloc(sizeof *in));
  get_instance(r, in);
  char *strs[] = {in->workflow, in->id,        in->params, in->output,
                  in->error,    in->wait_type, in->build,  in->traceparent};
  for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
    if (strs[i])
      journal_batch_own(b, strs[i]);
  return in;
}

static const journal_step *own_step(wire_reader *r, journal_batch *b) {
  journal_step *s = journal_batch_own(b, xmalloc(sizeof *s));
  get_step(r, s);
  char *strs[] = {s->key, s->name, s->result, s->error, s->build};
  for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
    if (strs[i])
      journal_batch_own(b, strs[i]);
  return s;
}

static void get_op(wire_reader *r, journal_batch *b) {
  journal_op_kind kind =
      (journal_op_kind)wire_get_enum(r, (uint32_t)JOP_MESSAGES_EXPIRE + 1);
  journal_op *op = journal_batch_add(b, kind);
  op->rowid = wire_get_i64(r);
  if (wire_get_u8(r))
    op->inst = own_instance(r, b);
  if (wire_get_u8(r))
    op->step = own_step(r, b);
  op->attempt.key = own_str(r, b);
  op->attempt.number = wire_get_u32(r);
  op->attempt.started_ms = wire_get_i64(r);
  op->attempt.ended_ms = wire_get_i64(r);
  op->attempt.error = own_str(r, b);
  op->attempt.build = own_str(r, b);
  op->from_seq = wire_get_i64(r);
  op->event_seq = wire_get_i64(r);
  op->event_type = own_str(r, b);
  op->event_payload = own_str(r, b);
  op->step_key = own_str(r, b);
  op->ts_ms = wire_get_i64(r);
  op->clear_control = (int)wire_get_enum(r, 2);
  op->queue = own_str(r, b);
  op->body = own_str(r, b);
  op->lease = own_str(r, b);
  op->error = own_str(r, b);
  op->dead_letter_queue = own_str(r, b);
  op->visible_ms = wire_get_i64(r);
  op->max_attempts = wire_get_u32(r);
  op->lease_token = own_str(r, b);
  int64_t n_leases = wire_get_i64(r);
  if (n_leases < 0)
    r->bad = 1;
  op->n_leases = r->bad ? 0 : (size_t)n_leases;
  op->traceparent = own_str(r, b);
}

void journal_wire_batch(wire_buf *w, const journal_batch *b) {
  wire_put_u8(w, WIRE_VERSION);
  wire_put_u8(w, TAG_BATCH);
  wire_put_u32(w, (uint32_t)b->n);
  for (size_t i = 0; i < b->n; i++)
    put_op(w, &b->ops[i]);
}

/* The version and tag, then a count no larger than what is left could
 * hold (an op is more than 4 bytes). */
static size_t get_header(wire_reader *r, uint8_t tag) {
  if (wire_get_u8(r) != WIRE_VERSION || wire_get_u8(r) != tag)
    r->bad = 1;
  return get_count(r);
}

int journal_wire_batch_read(const void *data, size_t len, journal_batch *b) {
  wire_reader r;
  wire_reader_init(&r, data, len);
  journal_batch_reset(b);
  size_t n = get_header(&r, TAG_BATCH);
  for (size_t i = 0; i < n && !r.bad; i++)
    get_op(&r, b);
  if (!r.bad && r.p == r.end)
    return 0;
  journal_batch_reset(b);
  return DURO_E_INVALID_ARGUMENT;
}

void journal_wire_results(wire_buf *w, const journal_batch *b) {
  wire_put_u8(w, WIRE_VERSION);
  wire_put_u8(w, TAG_RESULTS);
  wire_put_u32(w, (uint32_t)b->n);
  for (size_t i = 0; i < b->n; i++) {
    wire_put_u32(w, (uint32_t)b->ops[i].rc);
    wire_put_i64(w, b->ops[i].out_rowid);
    wire_put_i64(w, b->ops[i].out_owner);
  }
}

int journal_wire_results_read(const void *data, size_t len, journal_batch *b) {
  wire_reader r;
  wire_reader_init(&r, data, len);
  size_t n = get_header(&r, TAG_RESULTS);
  if (r.bad || n != b->n)
    return DURO_E_INVALID_ARGUMENT;
  /* Read into a copy first: a bad buffer leaves the batch as it was. */
  int64_t *v = n ? xcalloc(n * 3, sizeof *v) : NULL;
  for (size_t i = 0; i < n; i++) {
    v[3 * i] = (int32_t)wire_get_u32(&r);
    v[3 * i + 1] = wire_get_i64(&r);
    v[3 * i + 2] = wire_get_i64(&r);
  }
  int ok = !r.bad && r.p == r.end;
  for (size_t i = 0; ok && i < n; i++) {
    b->ops[i].rc = (int)v[3 * i];
    b->ops[i].out_rowid = v[3 * i + 1];
    b->ops[i].out_owner = v[3 * i + 2];
  }
  free(v);
  return ok ? 0 : DURO_E_INVALID_ARGUMENT;
}
