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

/* ---- writing ---- */

static void put(wire_buf *w, const void *p, size_t n) {
  if (w->len + n > w->cap) {
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + n)
      cap *= 2;
    w->data = xrealloc(w->data, cap);
    w->cap = cap;
  }
  memcpy(w->data + w->len, p, n);
  w->len += n;
}

static void put_u8(wire_buf *w, uint8_t v) { put(w, &v, 1); }
static void put_u32(wire_buf *w, uint32_t v) { put(w, &v, sizeof v); }
static void put_i64(wire_buf *w, int64_t v) { put(w, &v, sizeof v); }

/* Length + 1, then the bytes; 0 for NULL. */
static void put_str(wire_buf *w, const char *s) {
  size_t n = s ? strlen(s) : 0;
  put_u32(w, s ? (uint32_t)n + 1 : 0);
  if (s)
    put(w, s, n);
}

void wire_buf_free(wire_buf *w) {
  free(w->data);
  memset(w, 0, sizeof *w);
}

/* ---- reading ---- */

void wire_reader_init(wire_reader *r, const void *data, size_t len) {
  r->p = data;
  r->end = r->p + len;
  r->bad = 0;
}

static int get(wire_reader *r, void *out, size_t n) {
  if (r->bad || (size_t)(r->end - r->p) < n) {
    r->bad = 1;
    memset(out, 0, n);
    return -1;
  }
  memcpy(out, r->p, n);
  r->p += n;
  return 0;
}

static uint8_t get_u8(wire_reader *r) {
  uint8_t v;
  get(r, &v, 1);
  return v;
}

static uint32_t get_u32(wire_reader *r) {
  uint32_t v;
  get(r, &v, sizeof v);
  return v;
}

static int64_t get_i64(wire_reader *r) {
  int64_t v;
  get(r, &v, sizeof v);
  return v;
}

/* A malloc'ed copy (NULL for NULL, or on a bad read). */
static char *get_str(wire_reader *r) {
  uint32_t n = get_u32(r);
  if (r->bad || n == 0)
    return NULL;
  if ((size_t)(r->end - r->p) < (size_t)n - 1 ||
      memchr(r->p, '\0', (size_t)n - 1)) {
    r->bad = 1;
    return NULL;
  }
  char *s = xmalloc(n);
  memcpy(s, r->p, (size_t)n - 1);
  s[n - 1] = '\0';
  r->p += n - 1;
  return s;
}

/* An enum's value, checked against its count. */
static uint32_t get_enum(wire_reader *r, uint32_t count) {
  uint32_t v = get_u32(r);
  if (v >= count)
    r->bad = 1;
  return r->bad ? 0 : v;
}

/* ---- rows ---- */

static void put_instance(wire_buf *w, const journal_instance *in) {
  put_i64(w, in->rowid);
  put_str(w, in->workflow);
  put_str(w, in->id);
  put_u32(w, (uint32_t)in->status);
  put_str(w, in->params);
  put_str(w, in->output);
  put_str(w, in->error);
  put_i64(w, in->created_ms);
  put_i64(w, in->started_ms);
  put_i64(w, in->ended_ms);
  put_i64(w, in->wake_ms);
  put_i64(w, in->paused_ms);
  put_str(w, in->wait_type);
  put_u32(w, (uint32_t)in->control);
  put_i64(w, in->retention_ms);
  put_str(w, in->build);
  put_i64(w, in->restarts);
  put_i64(w, in->owner);
}

static void get_instance(wire_reader *r, journal_instance *in) {
  memset(in, 0, sizeof *in);
  in->rowid = get_i64(r);
  in->workflow = get_str(r);
  in->id = get_str(r);
  in->status = (duro_status)get_enum(r, DURO_STATUS_COMPLETE + 1);
  in->params = get_str(r);
  in->output = get_str(r);
  in->error = get_str(r);
  in->created_ms = get_i64(r);
  in->started_ms = get_i64(r);
  in->ended_ms = get_i64(r);
  in->wake_ms = get_i64(r);
  in->paused_ms = get_i64(r);
  in->wait_type = get_str(r);
  in->control = (int)get_enum(r, JOURNAL_CONTROL_TERMINATE + 1);
  in->retention_ms = get_i64(r);
  in->build = get_str(r);
  in->restarts = get_i64(r);
  in->owner = get_i64(r);
}

static void put_step(wire_buf *w, const journal_step *s) {
  put_str(w, s->key);
  put_str(w, s->name);
  put_u32(w, s->count);
  put_i64(w, s->seq);
  put_u32(w, (uint32_t)s->type);
  put_u32(w, (uint32_t)s->status);
  put_str(w, s->result);
  put_str(w, s->error);
  put_u32(w, s->attempts);
  put_i64(w, s->started_ms);
  put_i64(w, s->ended_ms);
  put_i64(w, s->wake_ms);
  put_i64(w, s->attempt_started_ms);
  put_str(w, s->build);
}

static void get_step(wire_reader *r, journal_step *s) {
  memset(s, 0, sizeof *s);
  s->key = get_str(r);
  s->name = get_str(r);
  s->count = get_u32(r);
  s->seq = get_i64(r);
  s->type = (duro_step_kind)get_enum(r, DURO_STEP_WAIT_FOR_EVENT + 1);
  s->status = (duro_step_status)get_enum(r, DURO_STEP_CANCELLED + 1);
  s->result = get_str(r);
  s->error = get_str(r);
  s->attempts = get_u32(r);
  s->started_ms = get_i64(r);
  s->ended_ms = get_i64(r);
  s->wake_ms = get_i64(r);
  s->attempt_started_ms = get_i64(r);
  s->build = get_str(r);
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
  uint32_t n = get_u32(r);
  if (!r->bad && (size_t)n > (size_t)(r->end - r->p) / 4)
    r->bad = 1;
  return r->bad ? 0 : n;
}

void journal_wire_steps(wire_buf *w, const journal_step *s, size_t n) {
  put_u32(w, (uint32_t)n);
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
  put_u32(w, (uint32_t)n);
  for (size_t i = 0; i < n; i++) {
    put_i64(w, ev[i].seq);
    put_str(w, ev[i].type);
    put_str(w, ev[i].payload);
    put_i64(w, ev[i].ts_ms);
    put_str(w, ev[i].consumed_by);
  }
}

int journal_wire_events_read(wire_reader *r, journal_event **out, size_t *n) {
  *out = NULL;
  *n = get_count(r);
  journal_event *v = *n ? xcalloc(*n, sizeof *v) : NULL;
  for (size_t i = 0; i < *n; i++) {
    v[i].seq = get_i64(r);
    v[i].type = get_str(r);
    v[i].payload = get_str(r);
    v[i].ts_ms = get_i64(r);
    v[i].consumed_by = get_str(r);
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
  put_u32(w, (uint32_t)op->kind);
  put_i64(w, op->rowid);
  put_u8(w, op->inst != NULL);
  if (op->inst)
    put_instance(w, op->inst);
  put_u8(w, op->step != NULL);
  if (op->step)
    put_step(w, op->step);
  put_str(w, op->attempt.key);
  put_u32(w, op->attempt.number);
  put_i64(w, op->attempt.started_ms);
  put_i64(w, op->attempt.ended_ms);
  put_str(w, op->attempt.error);
  put_str(w, op->attempt.build);
  put_i64(w, op->from_seq);
  put_i64(w, op->event_seq);
  put_str(w, op->event_type);
  put_str(w, op->event_payload);
  put_str(w, op->step_key);
  put_i64(w, op->ts_ms);
  put_u32(w, (uint32_t)op->clear_control);
  put_str(w, op->queue);
  put_str(w, op->body);
  put_str(w, op->lease);
  put_str(w, op->error);
  put_str(w, op->dead_letter_queue);
  put_i64(w, op->visible_ms);
  put_u32(w, op->max_attempts);
  put_str(w, op->lease_token);
  put_i64(w, (int64_t)op->n_leases);
}

/* A string read into b's keeping. */
static const char *own_str(wire_reader *r, journal_batch *b) {
  char *s = get_str(r);
  return s ? journal_batch_own(b, s) : NULL;
}

/* The row's strings go to b one by one, then the row itself. */
static const journal_instance *own_instance(wire_reader *r, journal_batch *b) {
  journal_instance *in = journal_batch_own(b, xmalloc(sizeof *in));
  get_instance(r, in);
  char *strs[] = {in->workflow, in->id,        in->params, in->output,
                  in->error,    in->wait_type, in->build};
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
      (journal_op_kind)get_enum(r, (uint32_t)JOP_MESSAGES_EXPIRE + 1);
  journal_op *op = journal_batch_add(b, kind);
  op->rowid = get_i64(r);
  if (get_u8(r))
    op->inst = own_instance(r, b);
  if (get_u8(r))
    op->step = own_step(r, b);
  op->attempt.key = own_str(r, b);
  op->attempt.number = get_u32(r);
  op->attempt.started_ms = get_i64(r);
  op->attempt.ended_ms = get_i64(r);
  op->attempt.error = own_str(r, b);
  op->attempt.build = own_str(r, b);
  op->from_seq = get_i64(r);
  op->event_seq = get_i64(r);
  op->event_type = own_str(r, b);
  op->event_payload = own_str(r, b);
  op->step_key = own_str(r, b);
  op->ts_ms = get_i64(r);
  op->clear_control = (int)get_enum(r, 2);
  op->queue = own_str(r, b);
  op->body = own_str(r, b);
  op->lease = own_str(r, b);
  op->error = own_str(r, b);
  op->dead_letter_queue = own_str(r, b);
  op->visible_ms = get_i64(r);
  op->max_attempts = get_u32(r);
  op->lease_token = own_str(r, b);
  int64_t n_leases = get_i64(r);
  if (n_leases < 0)
    r->bad = 1;
  op->n_leases = r->bad ? 0 : (size_t)n_leases;
}

void journal_wire_batch(wire_buf *w, const journal_batch *b) {
  put_u8(w, WIRE_VERSION);
  put_u8(w, TAG_BATCH);
  put_u32(w, (uint32_t)b->n);
  for (size_t i = 0; i < b->n; i++)
    put_op(w, &b->ops[i]);
}

/* The version and tag, then a count no larger than what is left could
 * hold (an op is more than 4 bytes). */
static size_t get_header(wire_reader *r, uint8_t tag) {
  if (get_u8(r) != WIRE_VERSION || get_u8(r) != tag)
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
  put_u8(w, WIRE_VERSION);
  put_u8(w, TAG_RESULTS);
  put_u32(w, (uint32_t)b->n);
  for (size_t i = 0; i < b->n; i++) {
    put_u32(w, (uint32_t)b->ops[i].rc);
    put_i64(w, b->ops[i].out_rowid);
    put_i64(w, b->ops[i].out_owner);
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
    v[3 * i] = (int32_t)get_u32(&r);
    v[3 * i + 1] = get_i64(&r);
    v[3 * i + 2] = get_i64(&r);
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
