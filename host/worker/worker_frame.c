/* worker_frame.c — frames decoded and checked whole (worker_frame.h):
 * a worker's, one decoder per kind in a table made from worker_proto.h's
 * lists, and the engine's five. */
#include "worker_frame.h"

#include <stdio.h>
#include <string.h>

/* A read through one frame: the first failure is kept in out->why and
 * every later read returns zero or NULL. */
typedef struct dec {
  const char *p, *end;
  worker_frame *out;
  int bad;
} dec;

static void refuse(dec *d, const char *field, const char *what) {
  if (d->bad)
    return;
  d->bad = 1;
  snprintf(d->out->why, sizeof d->out->why, "%s %s", field, what);
}

/* A value out of its range, named. */
static void refuse_value(dec *d, const char *field, uint32_t v,
                         const char *range) {
  if (d->bad)
    return;
  d->bad = 1;
  snprintf(d->out->why, sizeof d->out->why, "%s is %u, %s", field, v, range);
}

static size_t left(const dec *d) { return (size_t)(d->end - d->p); }

static void take(dec *d, const char *field, void *v, size_t n) {
  if (!d->bad && left(d) < n)
    refuse(d, field, "runs past the frame's end");
  if (d->bad) {
    memset(v, 0, n);
    return;
  }
  memcpy(v, d->p, n);
  d->p += n;
}

static uint32_t u32(dec *d, const char *field) {
  uint32_t v;
  take(d, field, &v, sizeof v);
  return v;
}

static uint64_t u64(dec *d, const char *field) {
  uint64_t v;
  take(d, field, &v, sizeof v);
  return v;
}

static int64_t i64(dec *d, const char *field) {
  int64_t v;
  take(d, field, &v, sizeof v);
  return v;
}

/* A flag: 0 or 1. */
static uint32_t flag(dec *d, const char *field) {
  uint32_t v = u32(d, field);
  if (v > 1)
    refuse_value(d, field, v, "not 0 or 1");
  return d->bad ? 0 : v;
}

/* A protocol enum: from `lo` to `hi`. */
static uint32_t within(dec *d, const char *field, uint32_t lo, uint32_t hi) {
  uint32_t v = u32(d, field);
  if (v < lo || v > hi)
    refuse_value(d, field, v, "out of range");
  return d->bad ? 0 : v;
}

/* A string in place (wire.h: its length + 1, 0 for NULL, its bytes and a
 * NUL); NULL refused unless `nullable`. */
static const char *read_str(dec *d, const char *field, int nullable) {
  uint32_t n = u32(d, field);
  if (d->bad)
    return NULL;
  if (n == 0) {
    if (!nullable)
      refuse(d, field, "is NULL");
    return NULL;
  }
  if (left(d) < n)
    refuse(d, field, "runs past the frame's end");
  else if (d->p[n - 1] != '\0')
    refuse(d, field, "is not NUL-terminated");
  else if (memchr(d->p, '\0', n - 1))
    refuse(d, field, "has a NUL inside");
  if (d->bad)
    return NULL;
  const char *s = d->p;
  d->p += n;
  return s;
}

/* A string, or NULL. */
static const char *str(dec *d, const char *field) {
  return read_str(d, field, 1);
}

/* A string the worker never sends as NULL. */
static const char *str_set(dec *d, const char *field) {
  return read_str(d, field, 0);
}

/* A count of items each at least `size` bytes: no more than the bytes
 * left hold. */
static uint32_t count(dec *d, const char *field, size_t size) {
  uint32_t n = u32(d, field);
  if (!d->bad && n > left(d) / size)
    refuse(d, field, "is more than the bytes left hold");
  return d->bad ? 0 : n;
}

/* ---- one decoder per kind, named after the member it carries ---- */

static void read_do_step(dec *d, wf_do_step *m) {
  m->name = str(d, "name");
  m->has_config = flag(d, "has_config");
  m->has_retries = flag(d, "has_retries");
  m->limit = u32(d, "limit");
  m->delay = str(d, "delay");
  m->backoff = u32(d, "backoff");
  m->timeout = str(d, "timeout");
  m->resource = str(d, "resource");
  m->fn = u64(d, "fn");
  m->arg = u64(d, "arg");
  m->wants_result = flag(d, "wants_result");
}

static void decode_do_step(dec *d, worker_frame *f) {
  read_do_step(d, &f->do_step);
}

static void read_rollback(dec *d, wf_rollback *r) {
  r->fn = u64(d, "rollback fn");
  r->arg = u64(d, "rollback arg");
  r->has_retries = flag(d, "rollback has_retries");
  r->limit = u32(d, "rollback limit");
  r->delay = str(d, "rollback delay");
  r->backoff = u32(d, "rollback backoff");
  r->timeout = str(d, "rollback timeout");
}

static void decode_do_with_rollback(dec *d, worker_frame *f) {
  read_do_step(d, &f->do_with_rollback.step);
  read_rollback(d, &f->do_with_rollback.rollback);
}

static void decode_rollback(dec *d, worker_frame *f) { (void)d, (void)f; }

static void decode_sleep(dec *d, worker_frame *f) {
  f->sleep.name = str(d, "name");
  f->sleep.duration = str(d, "duration");
}

static void decode_sleep_until(dec *d, worker_frame *f) {
  f->sleep_until.name = str(d, "name");
  f->sleep_until.unix_ms = i64(d, "unix_ms");
}

static void decode_wait_for_event(dec *d, worker_frame *f) {
  wf_wait_for_event *m = &f->wait_for_event;
  m->name = str(d, "name");
  m->type = str(d, "type");
  m->timeout = str(d, "timeout");
  m->wants_event = flag(d, "wants_event");
}

static void decode_wait_any(dec *d, worker_frame *f) {
  wf_wait_any *m = &f->wait_any;
  m->name = str(d, "name");
  m->n = u32(d, "n");
  m->has_types = flag(d, "has_types");
  if (m->has_types) {
    if (!d->bad && m->n > WM_WAIT_ANY_MAX)
      refuse_value(d, "n", m->n, "more types than WM_WAIT_ANY_MAX");
    if (!d->bad && m->n > left(d) / sizeof(uint32_t))
      refuse(d, "n", "is more than the bytes left hold");
    m->first = d->p;
    for (uint32_t i = 0; i < m->n && !d->bad; i++)
      str(d, "type");
  }
  m->deadline_ms = i64(d, "deadline_ms");
  m->wants_event = flag(d, "wants_event");
}

static void decode_child_start(dec *d, worker_frame *f) {
  wf_child_start *m = &f->child_start;
  m->name = str(d, "name");
  m->binding = str(d, "binding");
  m->id = str(d, "id");
  m->params = str(d, "params");
  m->parent_close = u32(d, "parent_close");
  m->wants_id = flag(d, "wants_id");
}

static void decode_child_wait(dec *d, worker_frame *f) {
  wf_child_wait *m = &f->child_wait;
  m->name = str(d, "name");
  m->binding = str(d, "binding");
  m->id = str(d, "id");
  m->wants_output = flag(d, "wants_output");
}

/* A branch's bytes at least: five u32s, three strings' lengths, two
 * q's. */
#define BRANCH_MIN (8 * sizeof(uint32_t) + 2 * sizeof(uint64_t))

static void decode_branch(dec *d, wf_branch *b) {
  b->has_config = flag(d, "branch has_config");
  b->has_retries = flag(d, "branch has_retries");
  b->limit = u32(d, "branch limit");
  b->delay = str(d, "branch delay");
  b->backoff = u32(d, "branch backoff");
  b->timeout = str(d, "branch timeout");
  b->resource = str(d, "branch resource");
  b->fn = u64(d, "branch fn");
  b->arg = u64(d, "branch arg");
  b->has_rollback = flag(d, "branch has_rollback");
  if (b->has_rollback)
    read_rollback(d, &b->rollback);
}

static void decode_do_all(dec *d, worker_frame *f) {
  wf_do_all *m = &f->do_all;
  m->name = str(d, "name");
  m->max_in_flight = u32(d, "max_in_flight");
  m->flags = u32(d, "flags");
  m->n = count(d, "n", BRANCH_MIN);
  if (!d->bad && m->n > WM_PARALLEL_MAX)
    refuse_value(d, "n", m->n, "more branches than WM_PARALLEL_MAX");
  m->first = d->p;
  wf_branch b;
  for (uint32_t i = 0; i < m->n && !d->bad; i++)
    decode_branch(d, &b);
}

static void decode_step_error(dec *d, worker_frame *f) { (void)d, (void)f; }

static void decode_set_output(dec *d, worker_frame *f) {
  f->set_output.json = str(d, "json");
}

static void decode_vfail(dec *d, worker_frame *f) {
  f->vfail.message = str(d, "message");
}

static void decode_error_is(dec *d, worker_frame *f) {
  f->error_is.name = str(d, "name");
}

static void decode_set_attribute(dec *d, worker_frame *f) {
  f->set_attribute.name = str(d, "name");
  f->set_attribute.json = str(d, "json");
}

static void decode_env_workflow(dec *d, worker_frame *f) {
  f->env_workflow.binding = str_set(d, "binding");
}

static void decode_workflow_create(dec *d, worker_frame *f) {
  wf_workflow_create *m = &f->workflow_create;
  m->binding = str_set(d, "binding");
  m->id = str(d, "id");
  m->params = str(d, "params");
}

static void decode_workflow_send_event(dec *d, worker_frame *f) {
  wf_workflow_send_event *m = &f->workflow_send_event;
  m->binding = str_set(d, "binding");
  m->id = str(d, "id");
  m->type = str(d, "type");
  m->payload = str(d, "payload");
}

static void decode_env_queue(dec *d, worker_frame *f) {
  f->env_queue.binding = str_set(d, "binding");
}

static void decode_queue_send(dec *d, worker_frame *f) {
  f->queue_send.binding = str_set(d, "binding");
  f->queue_send.json = str(d, "json");
  f->queue_send.delay_ms = i64(d, "delay_ms");
}

/* QUEUE_BATCH's fields, which QUEUE_TRACED's follow. */
static void decode_batch(dec *d, wf_queue_send_batch *m) {
  m->binding = str_set(d, "binding");
  m->delay_ms = i64(d, "delay_ms");
  m->n = count(d, "n", sizeof(uint32_t)); /* a string is at least that */
  m->first = d->p;
  for (uint32_t i = 0; i < m->n && !d->bad; i++)
    str(d, "json");
}

static void decode_queue_send_batch(dec *d, worker_frame *f) {
  decode_batch(d, &f->queue_send_batch);
}

static void decode_queue_send_traced(dec *d, worker_frame *f) {
  decode_batch(d, &f->queue_send_traced);
  f->queue_send_traced.traceparent = str(d, "traceparent");
}

static void decode_env_pipeline(dec *d, worker_frame *f) {
  f->env_pipeline.binding = str_set(d, "binding");
}

static void decode_pipeline_send(dec *d, worker_frame *f) {
  wf_pipeline_send *m = &f->pipeline_send;
  m->binding = str_set(d, "binding");
  m->n = count(d, "n", sizeof(uint32_t)); /* a string is at least that */
  m->first = d->p;
  for (uint32_t i = 0; i < m->n && !d->bad; i++)
    str(d, "record");
}

static void decode_vlog(dec *d, worker_frame *f) {
  f->vlog.level = u32(d, "level");
  f->vlog.text = str_set(d, "text");
}

static void decode_attempt_cancelled(dec *d, worker_frame *f) {
  (void)d, (void)f;
}

static void decode_ret(dec *d, worker_frame *f) {
  wf_ret *m = &f->ret;
  m->rc = i64(d, "rc");
  m->result_set = within(d, "result_set", 0, WM_RESULT_NOT_BEGUN);
  m->result = str(d, "result");
  m->failed = flag(d, "failed");
  m->final = flag(d, "final");
  m->message = str(d, "message");
}

/* A mark's bytes: u32 mark, i64 delay. */
#define MARK_SIZE (sizeof(uint32_t) + sizeof(int64_t))

static void decode_end(dec *d, worker_frame *f) {
  wf_end *m = &f->end;
  m->rc = i64(d, "rc");
  m->why = str(d, "why");
  if (d->bad || left(d) == 0)
    return; /* run()'s or a cron handler's: no marks */
  m->has_marks = 1;
  m->n = count(d, "n", MARK_SIZE);
  m->marks = d->p;
  for (uint32_t i = 0; i < m->n && !d->bad; i++) {
    within(d, "mark", WM_MARK_NONE, WM_MARK_RETRY);
    i64(d, "delay");
  }
}

static void decode_limit(dec *d, worker_frame *f) {
  f->limit.which = within(d, "which", 1, 3);
  f->limit.used = i64(d, "used");
  f->limit.limit = i64(d, "limit");
}

/* ---- the engine's frames ---- */

static void decode_build(dec *d, wf_build *b) {
  b->plugin = str_set(d, "plugin");
  b->path = str_set(d, "path");
  b->hash = str_set(d, "hash");
}

static void decode_run(dec *d, worker_frame *f) {
  wf_run *m = &f->run;
  decode_build(d, &m->build);
  m->cls = str_set(d, "class");
  m->workflow = str(d, "workflow");
  m->id = str(d, "id");
  m->params = str(d, "params");
  m->created_ms = i64(d, "created_ms");
}

static void decode_call(dec *d, worker_frame *f) {
  wf_call *m = &f->call;
  m->fn = u64(d, "fn");
  m->arg = u64(d, "arg");
  m->number = u32(d, "number");
  m->deadline_ms = i64(d, "deadline_ms");
  m->key = str(d, "key");
  m->traceparent = str(d, "traceparent");
  m->seq = u64(d, "seq");
  m->begin_by = i64(d, "begin_by");
  m->rollback = flag(d, "rollback");
  m->output = str(d, "output");
}

static void decode_reply(dec *d, worker_frame *f) {
  f->reply.rc = i64(d, "rc");
  f->reply.text = str(d, "text");
}

static void decode_reply_all(dec *d, worker_frame *f) {
  wf_reply_all *m = &f->reply_all;
  m->rc = i64(d, "rc");
  m->n = count(d, "n", 2 * sizeof(uint32_t));
  m->first = d->p;
  for (uint32_t i = 0; i < m->n && !d->bad; i++) {
    str(d, "result");
    str(d, "error");
  }
}

/* A message's bytes at least: i64 id, u32 body's length, u32 attempts,
 * i64 sent_ms, u32 traceparent's length. */
#define MESSAGE_MIN (2 * sizeof(int64_t) + 3 * sizeof(uint32_t))

static void decode_queue_run(dec *d, worker_frame *f) {
  wf_queue_run *m = &f->queue_run;
  decode_build(d, &m->build);
  m->queue = str(d, "queue");
  m->n = count(d, "n", MESSAGE_MIN);
  m->first = d->p;
  for (uint32_t i = 0; i < m->n && !d->bad; i++) {
    i64(d, "message id");
    str(d, "message body");
    u32(d, "message attempts");
    i64(d, "message sent_ms");
    str(d, "message traceparent");
  }
}

static void decode_cron_run(dec *d, worker_frame *f) {
  wf_cron_run *m = &f->cron_run;
  decode_build(d, &m->build);
  m->cron = str(d, "cron");
  m->scheduled_ms = i64(d, "scheduled_ms");
  m->timezone = str(d, "timezone");
}

static void decode_tail_run(dec *d, worker_frame *f) {
  wf_tail_run *m = &f->tail_run;
  decode_build(d, &m->build);
  m->items = str_set(d, "items");
  m->n = u32(d, "n");
  m->dropped = i64(d, "dropped");
}

typedef void decoder(dec *d, worker_frame *f);

#define DECODER(member, kind, ...) [kind - WM_DO] = decode_##member,
static decoder *const decoders[WM_LIMIT - WM_DO + 1] = {WM_CALLS(DECODER)
                                                            WM_OWN(DECODER)};
#undef DECODER

static decoder *const engine_decoders[WM_TAIL_RUN + 1] = {
    [WM_RUN] = decode_run,           [WM_CALL] = decode_call,
    [WM_REPLY] = decode_reply,       [WM_QUEUE_RUN] = decode_queue_run,
    [WM_CRON_RUN] = decode_cron_run, [WM_REPLY_ALL] = decode_reply_all,
    [WM_TAIL_RUN] = decode_tail_run};

/* The frame decoded by fn (NULL: a kind this side does not take, which
 * `sender` never sends), then checked to end at its last field. */
static int decode_with(decoder *fn, const char *sender, uint32_t kind,
                       const uint8_t *body, size_t len, worker_frame *out) {
  /* decoded aside: a refused frame leaves no field half-read in *out */
  worker_frame f = {.kind = kind};
  const char *p =
      body ? (const char *)body : ""; /* an empty body may be NULL */
  dec d = {.p = p, .end = p + len, .out = &f};
  if (!fn) {
    d.bad = 1;
    snprintf(f.why, sizeof f.why, "kind is none %s sends", sender);
  } else {
    fn(&d, &f);
  }
  if (!d.bad && left(&d) > 0) {
    d.bad = 1;
    snprintf(f.why, sizeof f.why, "%zu bytes follow its last field", left(&d));
  }
  if (d.bad) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    memcpy(out->why, f.why, sizeof out->why);
    return -1;
  }
  *out = f;
  return 0;
}

int worker_frame_decode(uint32_t kind, const uint8_t *body, size_t len,
                        worker_frame *out) {
  decoder *fn =
      kind >= WM_DO && kind <= WM_LIMIT ? decoders[kind - WM_DO] : NULL;
  return decode_with(fn, "a worker", kind, body, len, out);
}

int worker_frame_decode_engine(uint32_t kind, const uint8_t *body, size_t len,
                               worker_frame *out) {
  decoder *fn = kind <= WM_TAIL_RUN ? engine_decoders[kind] : NULL;
  return decode_with(fn, "the engine", kind, body, len, out);
}

void worker_frame_queue_message(const char **cursor, wf_message *m) {
  const char *p = *cursor;
  uint32_t n;
  memcpy(&m->id, p, sizeof m->id);
  p += sizeof m->id;
  memcpy(&n, p, sizeof n);
  p += sizeof n;
  m->body = n ? p : NULL;
  p += n;
  memcpy(&m->attempts, p, sizeof m->attempts);
  p += sizeof m->attempts;
  memcpy(&m->sent_ms, p, sizeof m->sent_ms);
  p += sizeof m->sent_ms;
  memcpy(&n, p, sizeof n);
  p += sizeof n;
  m->traceparent = n ? p : NULL;
  p += n;
  *cursor = p;
}

/* n length-prefixed strings from first into v[0 .. n-1]. */
static void strings_at(const char *first, uint32_t n, const char **v) {
  const char *p = first;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t len;
    memcpy(&len, p, sizeof len);
    p += sizeof len;
    v[i] = len ? p : NULL;
    p += len;
  }
}

void worker_frame_batch_json(const wf_queue_send_batch *b, const char **json) {
  strings_at(b->first, b->n, json);
}

void worker_frame_pipeline_records(const wf_pipeline_send *p,
                                   const char **records) {
  strings_at(p->first, p->n, records);
}

void worker_frame_wait_any_types(const wf_wait_any *w, const char **types) {
  strings_at(w->first, w->n, types);
}

/* A string in place, checked by its decoder: its length + 1 (0: NULL)
 * and its bytes. */
static const char *skip_str(const char **p) {
  uint32_t n;
  memcpy(&n, *p, sizeof n);
  *p += sizeof n;
  const char *s = n ? *p : NULL;
  *p += n;
  return s;
}

static uint32_t skip_u32(const char **p) {
  uint32_t v;
  memcpy(&v, *p, sizeof v);
  *p += sizeof v;
  return v;
}

static uint64_t skip_u64(const char **p) {
  uint64_t v;
  memcpy(&v, *p, sizeof v);
  *p += sizeof v;
  return v;
}

void worker_frame_do_all_branch(const char **cursor, wf_branch *b) {
  b->has_config = skip_u32(cursor);
  b->has_retries = skip_u32(cursor);
  b->limit = skip_u32(cursor);
  b->delay = skip_str(cursor);
  b->backoff = skip_u32(cursor);
  b->timeout = skip_str(cursor);
  b->resource = skip_str(cursor);
  b->fn = skip_u64(cursor);
  b->arg = skip_u64(cursor);
  b->has_rollback = skip_u32(cursor);
  if (!b->has_rollback)
    return;
  wf_rollback *r = &b->rollback;
  r->fn = skip_u64(cursor);
  r->arg = skip_u64(cursor);
  r->has_retries = skip_u32(cursor);
  r->limit = skip_u32(cursor);
  r->delay = skip_str(cursor);
  r->backoff = skip_u32(cursor);
  r->timeout = skip_str(cursor);
}

void worker_frame_reply_all_item(const char **cursor, const char **result,
                                 const char **error) {
  *result = skip_str(cursor);
  *error = skip_str(cursor);
}

void worker_frame_end_mark(const wf_end *end, uint32_t i, uint32_t *mark,
                           int64_t *delay_ms) {
  const char *p = end->marks + (size_t)i * MARK_SIZE;
  memcpy(mark, p, sizeof *mark);
  memcpy(delay_ms, p + sizeof *mark, sizeof *delay_ms);
}
