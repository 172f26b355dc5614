/* test_worker_frame.c — worker_frame.c: every kind a worker sends, and
 * every kind the engine sends a worker, is decoded field for field as
 * its sender writes it; cut short at every byte, given a byte too many,
 * a flag or protocol enum out of range, a NULL where none is sent, a
 * string without its NUL or with one inside, or a count past its bytes,
 * it is refused with the field named (ASan watches that no read passes
 * the frame's end); and kinds the sender never sends are refused. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "suite_run.h"
#include "wire.h"
#include "worker_frame.h"
#include "worker_proto.h"

typedef int decoder(uint32_t kind, const uint8_t *body, size_t len,
                    worker_frame *out);

/* The engine's kinds are decoded as the worker reads them, the rest as
 * the engine reads a worker's. */
static decoder *decoder_of(uint32_t kind) {
  return kind >= WM_RUN && kind <= WM_TAIL_RUN ? worker_frame_decode_engine
                                               : worker_frame_decode;
}

/* Decodes a copy of exactly len bytes (so that ASan sees an overread). */
static int decode(uint32_t kind, const void *body, size_t len,
                  worker_frame *f) {
  uint8_t *copy = malloc(len ? len : 1);
  if (len)
    memcpy(copy, body, len);
  int rc = decoder_of(kind)(kind, copy, len, f);
  free(copy);
  return rc;
}

/* The decoded frame's strings point into the body: decoded in place for
 * the field checks. */
static void decode_ok(uint32_t kind, const wire_buf *w, worker_frame *f) {
  int rc = decoder_of(kind)(kind, (const uint8_t *)w->data, w->len, f);
  ck_assert_msg(rc == 0, "kind %u refused: %s", kind, f->why);
  ck_assert_uint_eq(f->kind, kind);
}

static void refused(uint32_t kind, const wire_buf *w, const char *why) {
  worker_frame f;
  ck_assert_int_eq(decode(kind, w->data, w->len, &f), -1);
  ck_assert_uint_eq(f.kind, kind);
  ck_assert_msg(strstr(f.why, why), "kind %u: \"%s\", wanted \"%s\"", kind,
                f.why, why);
}

/* ---- one valid frame of every kind, as worker_api.c writes it ---- */

typedef struct sample {
  uint32_t kind;
  void (*write)(wire_buf *w);
  void (*check)(const worker_frame *f);
} sample;

static void w_do(wire_buf *w) {
  wire_put_str(w, "charge");
  wire_put_u32(w, 1);
  wire_put_u32(w, 1);
  wire_put_u32(w, 5);
  wire_put_str(w, "2 seconds");
  wire_put_u32(w, 7); /* a plugin's backoff is carried as given */
  wire_put_str(w, NULL);
  wire_put_str(w, "payments");
  wire_put_u64(w, 0x1234);
  wire_put_u64(w, 0x5678);
  wire_put_u32(w, 1);
}
static void c_do(const worker_frame *f) {
  ck_assert_str_eq(f->do_step.name, "charge");
  ck_assert_uint_eq(f->do_step.has_config, 1);
  ck_assert_uint_eq(f->do_step.has_retries, 1);
  ck_assert_uint_eq(f->do_step.limit, 5);
  ck_assert_str_eq(f->do_step.delay, "2 seconds");
  ck_assert_uint_eq(f->do_step.backoff, 7);
  ck_assert_ptr_null(f->do_step.timeout);
  ck_assert_str_eq(f->do_step.resource, "payments");
  ck_assert_uint_eq(f->do_step.fn, 0x1234);
  ck_assert_uint_eq(f->do_step.arg, 0x5678);
  ck_assert_uint_eq(f->do_step.wants_result, 1);
}

/* A rollback's fields: fn, arg, has_retries, limit, delay, backoff,
 * timeout. */
static void w_rollback_fields(wire_buf *w) {
  wire_put_u64(w, 0x9abc);
  wire_put_u64(w, 0xdef0);
  wire_put_u32(w, 1);
  wire_put_u32(w, 4);
  wire_put_str(w, "30 seconds");
  wire_put_u32(w, 2);
  wire_put_str(w, "5 minutes");
}
static void c_rollback_fields(const wf_rollback *r) {
  ck_assert_uint_eq(r->fn, 0x9abc);
  ck_assert_uint_eq(r->arg, 0xdef0);
  ck_assert_uint_eq(r->has_retries, 1);
  ck_assert_uint_eq(r->limit, 4);
  ck_assert_str_eq(r->delay, "30 seconds");
  ck_assert_uint_eq(r->backoff, 2);
  ck_assert_str_eq(r->timeout, "5 minutes");
}

/* DO_ROLLBACK: a DO's fields, then its rollback's. */
static void w_do_rollback(wire_buf *w) {
  w_do(w);
  w_rollback_fields(w);
}
static void c_do_rollback(const worker_frame *f) {
  worker_frame g = {.do_step = f->do_with_rollback.step};
  c_do(&g);
  c_rollback_fields(&f->do_with_rollback.rollback);
}

static void w_sleep(wire_buf *w) {
  wire_put_str(w, "nap");
  wire_put_str(w, "1 hour");
}
static void c_sleep(const worker_frame *f) {
  ck_assert_str_eq(f->sleep.name, "nap");
  ck_assert_str_eq(f->sleep.duration, "1 hour");
}

static void w_sleep_until(wire_buf *w) {
  wire_put_str(w, "");
  wire_put_i64(w, -42);
}
static void c_sleep_until(const worker_frame *f) {
  ck_assert_str_eq(f->sleep_until.name, "");
  ck_assert_int_eq(f->sleep_until.unix_ms, -42);
}

static void w_wait(wire_buf *w) {
  wire_put_str(w, "approval");
  wire_put_str(w, "approved");
  wire_put_str(w, "1 day");
  wire_put_u32(w, 0);
}
static void c_wait(const worker_frame *f) {
  ck_assert_str_eq(f->wait_for_event.name, "approval");
  ck_assert_str_eq(f->wait_for_event.type, "approved");
  ck_assert_str_eq(f->wait_for_event.timeout, "1 day");
  ck_assert_uint_eq(f->wait_for_event.wants_event, 0);
}

/* WAIT_ANY: name, n, has_types, n types (a NULL one is the engine's to
 * judge), deadline_ms, wants_event. */
static void w_wait_any(wire_buf *w) {
  wire_put_str(w, "review");
  wire_put_u32(w, 3);
  wire_put_u32(w, 1);
  wire_put_str(w, "approve");
  wire_put_str(w, NULL);
  wire_put_str(w, "reject");
  wire_put_i64(w, 1767398400000);
  wire_put_u32(w, 1);
}
static void c_wait_any(const worker_frame *f) {
  const wf_wait_any *m = &f->wait_any;
  ck_assert_str_eq(m->name, "review");
  ck_assert_uint_eq(m->n, 3);
  ck_assert_uint_eq(m->has_types, 1);
  const char *types[WM_WAIT_ANY_MAX];
  worker_frame_wait_any_types(m, types);
  ck_assert_str_eq(types[0], "approve");
  ck_assert_ptr_null(types[1]);
  ck_assert_str_eq(types[2], "reject");
  ck_assert_int_eq(m->deadline_ms, 1767398400000);
  ck_assert_uint_eq(m->wants_event, 1);
}

/* CHILD_START: name, binding, id (NULL: the engine draws one), params,
 * parent_close, wants_id. */
static void w_child_start(wire_buf *w) {
  wire_put_str(w, "part 1");
  wire_put_str(w, "PART");
  wire_put_str(w, NULL);
  wire_put_str(w, "{\"i\":1}");
  wire_put_u32(w, 1);
  wire_put_u32(w, 1);
}
static void c_child_start(const worker_frame *f) {
  const wf_child_start *m = &f->child_start;
  ck_assert_str_eq(m->name, "part 1");
  ck_assert_str_eq(m->binding, "PART");
  ck_assert_ptr_null(m->id);
  ck_assert_str_eq(m->params, "{\"i\":1}");
  ck_assert_uint_eq(m->parent_close, 1);
  ck_assert_uint_eq(m->wants_id, 1);
}

/* CHILD_WAIT: name, binding, id, wants_output. */
static void w_child_wait(wire_buf *w) {
  wire_put_str(w, "part done");
  wire_put_str(w, "PART");
  wire_put_str(w, "p-1");
  wire_put_u32(w, 0);
}
static void c_child_wait(const worker_frame *f) {
  const wf_child_wait *m = &f->child_wait;
  ck_assert_str_eq(m->name, "part done");
  ck_assert_str_eq(m->binding, "PART");
  ck_assert_str_eq(m->id, "p-1");
  ck_assert_uint_eq(m->wants_output, 0);
}

/* DO_ALL: name, max_in_flight, flags, n, n branches (each a DO's
 * configuration, its resource among it, fn, arg). */
static void w_do_all(wire_buf *w) {
  wire_put_str(w, "notify");
  wire_put_u32(w, 2);
  wire_put_u32(w, 1);
  wire_put_u32(w, 2);
  for (uint32_t i = 0; i < 2; i++) {
    wire_put_u32(w, i);
    wire_put_u32(w, i);
    wire_put_u32(w, 3);
    wire_put_str(w, i ? "1 second" : NULL);
    wire_put_u32(w, 2);
    wire_put_str(w, i ? "5 seconds" : NULL);
    wire_put_str(w, i ? NULL : "payments");
    wire_put_u64(w, 0x1000 + i);
    wire_put_u64(w, 0x2000 + i);
    wire_put_u32(w, i); /* the second has a rollback */
    if (i)
      w_rollback_fields(w);
  }
}
static void c_do_all(const worker_frame *f) {
  const wf_do_all *m = &f->do_all;
  ck_assert_str_eq(m->name, "notify");
  ck_assert_uint_eq(m->max_in_flight, 2);
  ck_assert_uint_eq(m->flags, 1);
  ck_assert_uint_eq(m->n, 2);
  const char *cursor = m->first;
  for (uint32_t i = 0; i < 2; i++) {
    wf_branch b;
    worker_frame_do_all_branch(&cursor, &b);
    ck_assert_uint_eq(b.has_config, i);
    ck_assert_uint_eq(b.has_retries, i);
    ck_assert_uint_eq(b.limit, 3);
    if (i)
      ck_assert_str_eq(b.delay, "1 second");
    else
      ck_assert_ptr_null(b.delay);
    ck_assert_uint_eq(b.backoff, 2);
    if (i)
      ck_assert_str_eq(b.timeout, "5 seconds");
    else
      ck_assert_ptr_null(b.timeout);
    if (i)
      ck_assert_ptr_null(b.resource);
    else
      ck_assert_str_eq(b.resource, "payments");
    ck_assert_uint_eq(b.fn, 0x1000 + i);
    ck_assert_uint_eq(b.arg, 0x2000 + i);
    ck_assert_uint_eq(b.has_rollback, i);
    if (i)
      c_rollback_fields(&b.rollback);
  }
}

static void w_nothing(wire_buf *w) { (void)w; }
static void c_nothing(const worker_frame *f) { (void)f; }

static void w_set_output(wire_buf *w) { wire_put_str(w, "{\"a\":1}"); }
static void c_set_output(const worker_frame *f) {
  ck_assert_str_eq(f->set_output.json, "{\"a\":1}");
}

static void w_fail(wire_buf *w) { wire_put_str(w, NULL); }
static void c_fail(const worker_frame *f) {
  ck_assert_ptr_null(f->vfail.message);
}

static void w_error_is(wire_buf *w) { wire_put_str(w, "card.declined"); }
static void c_error_is(const worker_frame *f) {
  ck_assert_str_eq(f->error_is.name, "card.declined");
}

static void w_set_attribute(wire_buf *w) {
  wire_put_str(w, "stage");
  wire_put_str(w, "\"packed\"");
}
static void c_set_attribute(const worker_frame *f) {
  ck_assert_str_eq(f->set_attribute.name, "stage");
  ck_assert_str_eq(f->set_attribute.json, "\"packed\"");
}

static void w_binding(wire_buf *w) { wire_put_str(w, "orders"); }
static void c_env_workflow(const worker_frame *f) {
  ck_assert_str_eq(f->env_workflow.binding, "orders");
}
static void c_env_queue(const worker_frame *f) {
  ck_assert_str_eq(f->env_queue.binding, "orders");
}

static void w_wf_create(wire_buf *w) {
  wire_put_str(w, "orders");
  wire_put_str(w, NULL);
  wire_put_str(w, "{}");
}
static void c_wf_create(const worker_frame *f) {
  ck_assert_str_eq(f->workflow_create.binding, "orders");
  ck_assert_ptr_null(f->workflow_create.id);
  ck_assert_str_eq(f->workflow_create.params, "{}");
}

static void w_wf_event(wire_buf *w) {
  wire_put_str(w, "orders");
  wire_put_str(w, "o-1");
  wire_put_str(w, "paid");
  wire_put_str(w, "[1]");
}
static void c_wf_event(const worker_frame *f) {
  ck_assert_str_eq(f->workflow_send_event.binding, "orders");
  ck_assert_str_eq(f->workflow_send_event.id, "o-1");
  ck_assert_str_eq(f->workflow_send_event.type, "paid");
  ck_assert_str_eq(f->workflow_send_event.payload, "[1]");
}

static void w_queue_send(wire_buf *w) {
  wire_put_str(w, "emails");
  wire_put_str(w, "\"hi\"");
  wire_put_i64(w, 1500);
}
static void c_queue_send(const worker_frame *f) {
  ck_assert_str_eq(f->queue_send.binding, "emails");
  ck_assert_str_eq(f->queue_send.json, "\"hi\"");
  ck_assert_int_eq(f->queue_send.delay_ms, 1500);
}

static void w_queue_batch(wire_buf *w) {
  wire_put_str(w, "emails");
  wire_put_i64(w, 0);
  wire_put_u32(w, 3);
  wire_put_str(w, "1");
  wire_put_str(w, NULL);
  wire_put_str(w, "[3]");
}
static void check_batch(const wf_queue_send_batch *b) {
  ck_assert_str_eq(b->binding, "emails");
  ck_assert_uint_eq(b->n, 3);
  const char *json[3];
  worker_frame_batch_json(b, json);
  ck_assert_str_eq(json[0], "1");
  ck_assert_ptr_null(json[1]);
  ck_assert_str_eq(json[2], "[3]");
}
static void c_queue_batch(const worker_frame *f) {
  check_batch(&f->queue_send_batch);
  ck_assert_ptr_null(f->queue_send_batch.traceparent);
}

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static void w_queue_traced(wire_buf *w) {
  w_queue_batch(w);
  wire_put_str(w, TP);
}
static void c_queue_traced(const worker_frame *f) {
  check_batch(&f->queue_send_traced);
  ck_assert_str_eq(f->queue_send_traced.traceparent, TP);
}

static void c_env_pipeline(const worker_frame *f) {
  ck_assert_str_eq(f->env_pipeline.binding, "orders");
}

static void w_pipeline_send(wire_buf *w) {
  wire_put_str(w, "EVENTS");
  wire_put_u32(w, 3);
  wire_put_str(w, "{\"a\":1}");
  wire_put_str(w, NULL);
  wire_put_str(w, "2");
}
static void c_pipeline_send(const worker_frame *f) {
  ck_assert_str_eq(f->pipeline_send.binding, "EVENTS");
  ck_assert_uint_eq(f->pipeline_send.n, 3);
  const char *records[3];
  worker_frame_pipeline_records(&f->pipeline_send, records);
  ck_assert_str_eq(records[0], "{\"a\":1}");
  ck_assert_ptr_null(records[1]);
  ck_assert_str_eq(records[2], "2");
}

static void w_log(wire_buf *w) {
  wire_put_u32(w, 99); /* a plugin's level is carried as given */
  wire_put_str(w, "hello");
}
static void c_log(const worker_frame *f) {
  ck_assert_uint_eq(f->vlog.level, 99);
  ck_assert_str_eq(f->vlog.text, "hello");
}

static void w_return(wire_buf *w) {
  wire_put_i64(w, -1);
  wire_put_u32(w, WM_RESULT_TOO_LARGE);
  wire_put_str(w, "123456789");
  wire_put_u32(w, 1);
  wire_put_u32(w, 0);
  wire_put_str(w, "boom");
}
static void c_return(const worker_frame *f) {
  ck_assert_int_eq(f->ret.rc, -1);
  ck_assert_uint_eq(f->ret.result_set, WM_RESULT_TOO_LARGE);
  ck_assert_str_eq(f->ret.result, "123456789");
  ck_assert_uint_eq(f->ret.failed, 1);
  ck_assert_uint_eq(f->ret.final, 0);
  ck_assert_str_eq(f->ret.message, "boom");
}

static void w_end(wire_buf *w) {
  wire_put_i64(w, 0);
  wire_put_str(w, "no such build");
}
static void c_end(const worker_frame *f) {
  ck_assert_int_eq(f->end.rc, 0);
  ck_assert_str_eq(f->end.why, "no such build");
  ck_assert_int_eq(f->end.has_marks, 0);
}

static void w_limit(wire_buf *w) {
  wire_put_u32(w, 2);
  wire_put_i64(w, 300 << 20);
  wire_put_i64(w, 256 << 20);
}
static void c_limit(const worker_frame *f) {
  ck_assert_uint_eq(f->limit.which, 2);
  ck_assert_int_eq(f->limit.used, 300 << 20);
  ck_assert_int_eq(f->limit.limit, 256 << 20);
}

/* The engine's frames, as worker_proxy.c and its handlers write them. */
static void w_run(wire_buf *w) {
  wire_put_str(w, "orders");
  wire_put_str(w, "/var/lib/duro/builds/ab12.so");
  wire_put_str(w, "ab12");
  wire_put_str(w, "Checkout");
  wire_put_str(w, "checkout");
  wire_put_str(w, "order-7");
  wire_put_str(w, NULL);
  wire_put_i64(w, 1765000000000);
}
static void c_run(const worker_frame *f) {
  ck_assert_str_eq(f->run.build.plugin, "orders");
  ck_assert_str_eq(f->run.build.path, "/var/lib/duro/builds/ab12.so");
  ck_assert_str_eq(f->run.build.hash, "ab12");
  ck_assert_str_eq(f->run.cls, "Checkout");
  ck_assert_str_eq(f->run.workflow, "checkout");
  ck_assert_str_eq(f->run.id, "order-7");
  ck_assert_ptr_null(f->run.params);
  ck_assert_int_eq(f->run.created_ms, 1765000000000);
}

static void w_call(wire_buf *w) {
  wire_put_u64(w, 0xabc);
  wire_put_u64(w, 0xdef);
  wire_put_u32(w, 3);
  wire_put_i64(w, 1765000005000);
  wire_put_str(w, "order-7/charge#1");
  wire_put_str(w, TP);
  wire_put_u64(w, 42);
  wire_put_i64(w, 987654);
  wire_put_u32(w, 1);
  wire_put_str(w, "{\"chargeId\":\"ch_1\"}");
}
static void c_call(const worker_frame *f) {
  ck_assert_uint_eq(f->call.fn, 0xabc);
  ck_assert_uint_eq(f->call.arg, 0xdef);
  ck_assert_uint_eq(f->call.number, 3);
  ck_assert_int_eq(f->call.deadline_ms, 1765000005000);
  ck_assert_str_eq(f->call.key, "order-7/charge#1");
  ck_assert_str_eq(f->call.traceparent, TP);
  ck_assert_uint_eq(f->call.seq, 42);
  ck_assert_int_eq(f->call.begin_by, 987654);
  ck_assert_uint_eq(f->call.rollback, 1);
  ck_assert_str_eq(f->call.output, "{\"chargeId\":\"ch_1\"}");
}

static void w_reply(wire_buf *w) {
  wire_put_i64(w, -3);
  wire_put_str(w, "{\"paid\":true}");
}
static void c_reply(const worker_frame *f) {
  ck_assert_int_eq(f->reply.rc, -3);
  ck_assert_str_eq(f->reply.text, "{\"paid\":true}");
}

static void w_queue_run(wire_buf *w) {
  wire_put_str(w, "mailer");
  wire_put_str(w, "/b/cd34.so");
  wire_put_str(w, "cd34");
  wire_put_str(w, "emails");
  wire_put_u32(w, 2);
  wire_put_i64(w, 11);
  wire_put_str(w, "{\"to\":\"a\"}");
  wire_put_u32(w, 1);
  wire_put_i64(w, 1765000000001);
  wire_put_str(w, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  wire_put_i64(w, 12);
  wire_put_str(w, NULL);
  wire_put_u32(w, 4);
  wire_put_i64(w, 1765000000002);
  wire_put_str(w, NULL);
}
static void c_queue_run(const worker_frame *f) {
  const wf_queue_run *q = &f->queue_run;
  ck_assert_str_eq(q->build.plugin, "mailer");
  ck_assert_str_eq(q->queue, "emails");
  ck_assert_uint_eq(q->n, 2);
  const char *cursor = q->first;
  wf_message m;
  worker_frame_queue_message(&cursor, &m);
  ck_assert_int_eq(m.id, 11);
  ck_assert_str_eq(m.body, "{\"to\":\"a\"}");
  ck_assert_uint_eq(m.attempts, 1);
  ck_assert_int_eq(m.sent_ms, 1765000000001);
  ck_assert_str_eq(m.traceparent,
                   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  worker_frame_queue_message(&cursor, &m);
  ck_assert_int_eq(m.id, 12);
  ck_assert_ptr_null(m.body);
  ck_assert_uint_eq(m.attempts, 4);
  ck_assert_int_eq(m.sent_ms, 1765000000002);
  ck_assert_ptr_null(m.traceparent);
}

static void w_cron_run(wire_buf *w) {
  wire_put_str(w, "reports");
  wire_put_str(w, "/b/ef56.so");
  wire_put_str(w, "ef56");
  wire_put_str(w, "0 9 * * 1");
  wire_put_i64(w, 1765184400000);
  wire_put_str(w, "Europe/Paris");
}
static void c_cron_run(const worker_frame *f) {
  ck_assert_str_eq(f->cron_run.build.hash, "ef56");
  ck_assert_str_eq(f->cron_run.cron, "0 9 * * 1");
  ck_assert_int_eq(f->cron_run.scheduled_ms, 1765184400000);
  ck_assert_str_eq(f->cron_run.timezone, "Europe/Paris");
}

static void w_tail_run(wire_buf *w) {
  wire_put_str(w, "audit");
  wire_put_str(w, "/b/ab12.so");
  wire_put_str(w, "ab12");
  wire_put_str(w, "[{\"instance\":\"o-1\"}]");
  wire_put_u32(w, 1);
  wire_put_i64(w, 7);
}
static void c_tail_run(const worker_frame *f) {
  ck_assert_str_eq(f->tail_run.build.plugin, "audit");
  ck_assert_str_eq(f->tail_run.items, "[{\"instance\":\"o-1\"}]");
  ck_assert_uint_eq(f->tail_run.n, 1);
  ck_assert_int_eq(f->tail_run.dropped, 7);
}

/* REPLY_ALL: rc, n, n × (result, error). */
static void w_reply_all(wire_buf *w) {
  wire_put_i64(w, 2);
  wire_put_u32(w, 2);
  wire_put_str(w, "\"r0\"");
  wire_put_str(w, NULL);
  wire_put_str(w, NULL);
  wire_put_str(w, "{\"name\":\"Error\"}");
}
static void c_reply_all(const worker_frame *f) {
  ck_assert_int_eq(f->reply_all.rc, 2);
  ck_assert_uint_eq(f->reply_all.n, 2);
  const char *cursor = f->reply_all.first, *result, *error;
  worker_frame_reply_all_item(&cursor, &result, &error);
  ck_assert_str_eq(result, "\"r0\"");
  ck_assert_ptr_null(error);
  worker_frame_reply_all_item(&cursor, &result, &error);
  ck_assert_ptr_null(result);
  ck_assert_str_eq(error, "{\"name\":\"Error\"}");
}

static const sample samples[] = {
    {WM_RUN, w_run, c_run},
    {WM_CALL, w_call, c_call},
    {WM_REPLY, w_reply, c_reply},
    {WM_QUEUE_RUN, w_queue_run, c_queue_run},
    {WM_CRON_RUN, w_cron_run, c_cron_run},
    {WM_REPLY_ALL, w_reply_all, c_reply_all},
    {WM_TAIL_RUN, w_tail_run, c_tail_run},
    {WM_DO, w_do, c_do},
    {WM_SLEEP, w_sleep, c_sleep},
    {WM_SLEEP_UNTIL, w_sleep_until, c_sleep_until},
    {WM_WAIT, w_wait, c_wait},
    {WM_STEP_ERROR, w_nothing, c_nothing},
    {WM_SET_OUTPUT, w_set_output, c_set_output},
    {WM_FAIL, w_fail, c_fail},
    {WM_ERROR_IS, w_error_is, c_error_is},
    {WM_ENV_WORKFLOW, w_binding, c_env_workflow},
    {WM_WF_CREATE, w_wf_create, c_wf_create},
    {WM_WF_EVENT, w_wf_event, c_wf_event},
    {WM_ENV_QUEUE, w_binding, c_env_queue},
    {WM_QUEUE_SEND, w_queue_send, c_queue_send},
    {WM_QUEUE_BATCH, w_queue_batch, c_queue_batch},
    {WM_LOG, w_log, c_log},
    {WM_CANCELLED, w_nothing, c_nothing},
    {WM_WAIT_ANY, w_wait_any, c_wait_any},
    {WM_CHILD_START, w_child_start, c_child_start},
    {WM_CHILD_WAIT, w_child_wait, c_child_wait},
    {WM_DO_ALL, w_do_all, c_do_all},
    {WM_DO_ROLLBACK, w_do_rollback, c_do_rollback},
    {WM_ROLLBACK, w_nothing, c_nothing},
    {WM_ENV_PIPELINE, w_binding, c_env_pipeline},
    {WM_PIPELINE_SEND, w_pipeline_send, c_pipeline_send},
    {WM_QUEUE_TRACED, w_queue_traced, c_queue_traced},
    {WM_SET_ATTR, w_set_attribute, c_set_attribute},
    {WM_RETURN, w_return, c_return},
    {WM_END, w_end, c_end},
    {WM_LIMIT, w_limit, c_limit},
};
#define N_SAMPLES (sizeof samples / sizeof samples[0])

/* Every kind from WM_DO to WM_LIMIT but the retired WM_CRASH, and the
 * engine's five. */
START_TEST(every_kind_has_a_sample) {
  ck_assert_uint_eq(N_SAMPLES, WM_LIMIT - WM_DO + WM_TAIL_RUN);
  for (uint32_t k = WM_RUN; k <= WM_LIMIT; k++) {
    int found = 0;
    for (size_t i = 0; i < N_SAMPLES; i++)
      found += samples[i].kind == k;
    int sent = k <= WM_TAIL_RUN || (k >= WM_DO && k != WM_CRASH);
    ck_assert_int_eq(found, sent);
  }
}
END_TEST

START_TEST(valid_frames_decode_field_for_field) {
  const sample *s = &samples[_i];
  wire_buf w = {0};
  s->write(&w);
  worker_frame f;
  decode_ok(s->kind, &w, &f);
  s->check(&f);
  ck_assert_str_eq(f.why, "");
  wire_buf_free(&w);
}
END_TEST

START_TEST(truncated_frames_refused) {
  const sample *s = &samples[_i];
  wire_buf w = {0};
  s->write(&w);
  for (size_t len = 0; len < w.len; len++) {
    worker_frame f;
    ck_assert_msg(decode(s->kind, w.data, len, &f) == -1,
                  "kind %u cut to %zu of %zu bytes decoded", s->kind, len,
                  w.len);
    ck_assert_msg(strstr(f.why, "runs past the frame's end") ||
                      strstr(f.why, "is more than the bytes left hold"),
                  "kind %u cut to %zu: %s", s->kind, len, f.why);
  }
  wire_buf_free(&w);
}
END_TEST

START_TEST(over_long_frames_refused) {
  const sample *s = &samples[_i];
  wire_buf w = {0};
  s->write(&w);
  wire_put_u8(&w, 0);
  /* an END may carry marks: its extra byte is a count cut short */
  refused(s->kind, &w,
          s->kind == WM_END ? "n runs past" : "1 bytes follow its last field");
  wire_put_u32(&w, 0);
  refused(s->kind, &w,
          s->kind == WM_END ? "1 bytes follow" : "5 bytes follow its last");
  wire_buf_free(&w);
}
END_TEST

START_TEST(unknown_kinds_refused) {
  uint32_t kinds[] = {0,         WM_RUN,   WM_CALL,      WM_REPLY, WM_TAIL_RUN,
                      WM_DO - 1, WM_CRASH, WM_LIMIT + 1, 1000,     UINT32_MAX};
  wire_buf w = {0};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    worker_frame f;
    ck_assert_int_eq(
        worker_frame_decode(kinds[i], (const uint8_t *)w.data, w.len, &f), -1);
    ck_assert_str_eq(f.why, "kind is none a worker sends");
    w_return(&w);
  }
  /* and the worker takes none of a worker's kinds from the engine */
  uint32_t theirs[] = {0,      WM_TAIL_RUN + 1, WM_DO, WM_RETURN,
                       WM_END, WM_LIMIT,        1000,  UINT32_MAX};
  for (size_t i = 0; i < sizeof theirs / sizeof theirs[0]; i++) {
    worker_frame f;
    w.len = 0;
    w_reply(&w);
    ck_assert_int_eq(worker_frame_decode_engine(
                         theirs[i], (const uint8_t *)w.data, w.len, &f),
                     -1);
    ck_assert_str_eq(f.why, "kind is none the engine sends");
  }
  wire_buf_free(&w);
}
END_TEST

/* A flag or a protocol enum out of range; a plugin's own values are not
 * judged here. */
START_TEST(bad_flags_and_enums_refused) {
  wire_buf w = {0};

  w_do(&w);
  memcpy(w.data + 4 + 7, &(uint32_t){2}, 4); /* has_config */
  refused(WM_DO, &w, "has_config is 2, not 0 or 1");
  w.len = 0;
  w_do(&w);
  memcpy(w.data + w.len - 4, &(uint32_t){UINT32_MAX}, 4);
  refused(WM_DO, &w, "wants_result is 4294967295, not 0 or 1");

  w.len = 0;
  w_wait(&w);
  memcpy(w.data + w.len - 4, &(uint32_t){3}, 4);
  refused(WM_WAIT, &w, "wants_event is 3, not 0 or 1");

  uint32_t result_sets[] = {WM_RESULT_NOT_BEGUN + 1, 1000};
  for (size_t i = 0; i < 2; i++) {
    w.len = 0;
    w_return(&w);
    memcpy(w.data + 8, &result_sets[i], 4);
    refused(WM_RETURN, &w, "result_set is");
  }
  w.len = 0;
  wire_put_i64(&w, 0);
  wire_put_u32(&w, 0);
  wire_put_str(&w, NULL);
  wire_put_u32(&w, 0);
  wire_put_u32(&w, 2); /* final */
  wire_put_str(&w, NULL);
  refused(WM_RETURN, &w, "final is 2, not 0 or 1");

  uint32_t whichs[] = {0, 4};
  for (size_t i = 0; i < 2; i++) {
    w.len = 0;
    w_limit(&w);
    memcpy(w.data, &whichs[i], 4);
    refused(WM_LIMIT, &w, "which is");
  }
  wire_buf_free(&w);
}
END_TEST

START_TEST(bad_strings_refused) {
  wire_buf w = {0};

  /* a binding is never NULL, nor a log line */
  wire_put_str(&w, NULL);
  refused(WM_ENV_WORKFLOW, &w, "binding is NULL");
  refused(WM_ENV_QUEUE, &w, "binding is NULL");
  wire_put_str(&w, "json");
  wire_put_i64(&w, 0);
  refused(WM_QUEUE_SEND, &w, "binding is NULL");
  w.len = 0;
  wire_put_u32(&w, 1);
  wire_put_str(&w, NULL);
  refused(WM_LOG, &w, "text is NULL");

  /* no NUL at its end, or one inside */
  w.len = 0;
  w_sleep(&w);
  w.data[w.len - 1] = 'x';
  refused(WM_SLEEP, &w, "duration is not NUL-terminated");
  w.len = 0;
  w_sleep(&w);
  w.data[4 + 1] = '\0'; /* "n\0p" */
  refused(WM_SLEEP, &w, "name has a NUL inside");

  /* a length past the end */
  w.len = 0;
  wire_put_u32(&w, 1000);
  wire_put(&w, "abc", 4);
  refused(WM_SET_OUTPUT, &w, "json runs past the frame's end");
  w.len = 0;
  wire_put_u32(&w, UINT32_MAX);
  refused(WM_ERROR_IS, &w, "name runs past the frame's end");

  /* the engine names the plugin, build and class it runs, always */
  w.len = 0;
  wire_put_str(&w, "orders");
  wire_put_str(&w, NULL);
  refused(WM_RUN, &w, "path is NULL");
  refused(WM_QUEUE_RUN, &w, "path is NULL");
  refused(WM_CRON_RUN, &w, "path is NULL");
  refused(WM_TAIL_RUN, &w, "path is NULL");
  w.len = 0;
  wire_put_str(&w, "audit");
  wire_put_str(&w, "/b/ab12.so");
  wire_put_str(&w, "ab12");
  wire_put_str(&w, NULL);
  refused(WM_TAIL_RUN, &w, "items is NULL");
  w.len = 0;
  w_run(&w);
  w.data[w.len - 9] = 'x'; /* params' NULL is a length: now a string */
  refused(WM_RUN, &w, "runs past the frame's end");
  wire_buf_free(&w);
}
END_TEST

START_TEST(counts_bounded_by_the_bytes_left) {
  wire_buf w = {0};
  wire_put_str(&w, "emails");
  wire_put_i64(&w, 0);
  wire_put_u32(&w, 3); /* 3 strings need 12 bytes at least */
  wire_put_str(&w, NULL);
  wire_put_str(&w, NULL);
  refused(WM_QUEUE_BATCH, &w, "n is more than the bytes left hold");
  wire_put_u32(&w, 0);
  worker_frame f;
  decode_ok(WM_QUEUE_BATCH, &w, &f);
  ck_assert_uint_eq(f.queue_send_batch.n, 3);
  const char *json[3] = {"x", "x", "x"};
  worker_frame_batch_json(&f.queue_send_batch, json);
  for (int i = 0; i < 3; i++)
    ck_assert_ptr_null(json[i]);

  w.len = 0;
  wire_put_str(&w, "emails");
  wire_put_i64(&w, 0);
  wire_put_u32(&w, UINT32_MAX);
  refused(WM_QUEUE_BATCH, &w, "n is more than the bytes left hold");

  w.len = 0;
  w_end(&w);
  wire_put_u32(&w, 2); /* two marks need 24 bytes */
  wire_put_u32(&w, WM_MARK_ACK);
  wire_put_i64(&w, 0);
  refused(WM_END, &w, "n is more than the bytes left hold");

  /* a queue handler's batch: 24 bytes a message at least */
  w.len = 0;
  wire_put_str(&w, "mailer");
  wire_put_str(&w, "/b/cd34.so");
  wire_put_str(&w, "cd34");
  wire_put_str(&w, "emails");
  wire_put_u32(&w, UINT32_MAX);
  wire_put_i64(&w, 1);
  refused(WM_QUEUE_RUN, &w, "n is more than the bytes left hold");

  /* a DO_ALL: 48 bytes a branch at least, and at most WM_PARALLEL_MAX;
   * none at all is a call the engine refuses, sent as such */
  w.len = 0;
  wire_put_str(&w, "b");
  wire_put_u32(&w, 0);
  wire_put_u32(&w, 0);
  wire_put_u32(&w, 1);
  for (int i = 0; i < 10; i++)
    wire_put_u32(&w, 0);
  refused(WM_DO_ALL, &w, "n is more than the bytes left hold");
  w.len = 0;
  wire_put_str(&w, "b");
  wire_put_u32(&w, 0);
  wire_put_u32(&w, 0);
  wire_put_u32(&w, WM_PARALLEL_MAX + 1);
  for (uint32_t i = 0; i < (WM_PARALLEL_MAX + 1) * 12; i++)
    wire_put_u32(&w, 0);
  refused(WM_DO_ALL, &w, "more branches than WM_PARALLEL_MAX");
  w.len = 0;
  wire_put_str(&w, "b");
  wire_put_u32(&w, 0);
  wire_put_u32(&w, 0);
  wire_put_u32(&w, 0);
  decode_ok(WM_DO_ALL, &w, &f);
  ck_assert_uint_eq(f.do_all.n, 0);
  /* a REPLY_ALL's answers: two strings' lengths each at least */
  w.len = 0;
  wire_put_i64(&w, 0);
  wire_put_u32(&w, 3);
  wire_put_str(&w, NULL);
  wire_put_str(&w, NULL);
  refused(WM_REPLY_ALL, &w, "n is more than the bytes left hold");
  wire_buf_free(&w);
}
END_TEST

/* A WAIT_ANY's list: without types (the plugin's NULL, or a count the
 * engine refuses) it is the count alone, any count; with them, at most
 * WM_WAIT_ANY_MAX, and no more than the bytes left hold; its flags are
 * 0 or 1. */
START_TEST(wait_any_lists) {
  wire_buf w = {0};
  worker_frame f;
  uint32_t counts[] = {0, 2, WM_WAIT_ANY_MAX + 1, UINT32_MAX};
  for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
    w.len = 0;
    wire_put_str(&w, NULL);
    wire_put_u32(&w, counts[i]);
    wire_put_u32(&w, 0);
    wire_put_i64(&w, -1);
    wire_put_u32(&w, 0);
    decode_ok(WM_WAIT_ANY, &w, &f);
    ck_assert_ptr_null(f.wait_any.name);
    ck_assert_uint_eq(f.wait_any.n, counts[i]);
    ck_assert_uint_eq(f.wait_any.has_types, 0);
    ck_assert_int_eq(f.wait_any.deadline_ms, -1);
  }

  /* an empty list with types: the engine says it needs one */
  w.len = 0;
  wire_put_str(&w, "r");
  wire_put_u32(&w, 0);
  wire_put_u32(&w, 1);
  wire_put_i64(&w, 0);
  wire_put_u32(&w, 0);
  decode_ok(WM_WAIT_ANY, &w, &f);
  ck_assert_uint_eq(f.wait_any.n, 0);

  /* more than WM_WAIT_ANY_MAX, though the bytes are there */
  w.len = 0;
  wire_put_str(&w, "r");
  wire_put_u32(&w, WM_WAIT_ANY_MAX + 1);
  wire_put_u32(&w, 1);
  for (int i = 0; i < WM_WAIT_ANY_MAX + 1; i++)
    wire_put_str(&w, "t");
  wire_put_i64(&w, 0);
  wire_put_u32(&w, 0);
  refused(WM_WAIT_ANY, &w, "n is 65, more types than WM_WAIT_ANY_MAX");

  /* a count past the bytes left */
  w.len = 0;
  wire_put_str(&w, "r");
  wire_put_u32(&w, 5);
  wire_put_u32(&w, 1);
  wire_put_str(&w, "t");
  wire_put_i64(&w, 0);
  refused(WM_WAIT_ANY, &w, "n is more than the bytes left hold");
  w.len = 0;
  wire_put_str(&w, "r");
  wire_put_u32(&w, 2);
  wire_put_u32(&w, 1);
  wire_put_str(&w, "t");
  wire_put_i64(&w, 0);
  wire_put_u32(&w, 0);
  refused(WM_WAIT_ANY, &w, "runs past the frame's end");

  /* a type without its NUL, or with one inside */
  w.len = 0;
  w_wait_any(&w);
  w.data[4 + 7 + 4 + 4 + 4 + 7] = 'x'; /* approve's NUL */
  refused(WM_WAIT_ANY, &w, "type");
  w.len = 0;
  w_wait_any(&w);
  w.data[4 + 7 + 4 + 4 + 4 + 2] = '\0';
  refused(WM_WAIT_ANY, &w, "type has a NUL inside");

  /* flags */
  w.len = 0;
  w_wait_any(&w);
  memcpy(w.data + 4 + 7 + 4, &(uint32_t){2}, 4);
  refused(WM_WAIT_ANY, &w, "has_types is 2, not 0 or 1");
  w.len = 0;
  w_wait_any(&w);
  memcpy(w.data + w.len - 4, &(uint32_t){7}, 4);
  refused(WM_WAIT_ANY, &w, "wants_event is 7, not 0 or 1");
  wire_buf_free(&w);
}
END_TEST

/* A queue handler's END: its marks read back; each cut short refused
 * (but where the marks begin: an END without marks is whole). */
START_TEST(end_with_marks) {
  wire_buf w = {0};
  w_end(&w);
  size_t bare = w.len;
  wire_put_u32(&w, 3);
  uint32_t marks[] = {WM_MARK_ACK, WM_MARK_NONE, WM_MARK_RETRY};
  int64_t delays[] = {0, 0, 60000};
  for (int i = 0; i < 3; i++) {
    wire_put_u32(&w, marks[i]);
    wire_put_i64(&w, delays[i]);
  }
  worker_frame f;
  decode_ok(WM_END, &w, &f);
  ck_assert_str_eq(f.end.why, "no such build");
  ck_assert_int_eq(f.end.has_marks, 1);
  ck_assert_uint_eq(f.end.n, 3);
  for (uint32_t i = 0; i < 3; i++) {
    uint32_t mark;
    int64_t delay;
    worker_frame_end_mark(&f.end, i, &mark, &delay);
    ck_assert_uint_eq(mark, marks[i]);
    ck_assert_int_eq(delay, delays[i]);
  }
  for (size_t len = 0; len < w.len; len++)
    ck_assert_int_eq(decode(WM_END, w.data, len, &f), len == bare ? 0 : -1);

  /* a mark out of range */
  memcpy(w.data + bare + 4 + 12, &(uint32_t){WM_MARK_RETRY + 1}, 4);
  refused(WM_END, &w, "mark is 3, out of range");

  /* none: a count of 0 */
  w.len = bare;
  wire_put_u32(&w, 0);
  decode_ok(WM_END, &w, &f);
  ck_assert_int_eq(f.end.has_marks, 1);
  ck_assert_uint_eq(f.end.n, 0);
  wire_buf_free(&w);
}
END_TEST

/* A refused frame leaves nothing decoded behind. */
START_TEST(refused_frame_has_no_fields) {
  wire_buf w = {0};
  w_wf_event(&w);
  wire_put_u8(&w, 1);
  worker_frame f;
  memset(&f, 0xa5, sizeof f);
  ck_assert_int_eq(decode(WM_WF_EVENT, w.data, w.len, &f), -1);
  ck_assert_ptr_null(f.workflow_send_event.binding);
  ck_assert_ptr_null(f.workflow_send_event.payload);
  ck_assert_uint_eq(f.kind, WM_WF_EVENT);
  wire_buf_free(&w);
}
END_TEST

static Suite *worker_frame_suite(void) {
  Suite *s = suite_create("worker_frame");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, every_kind_has_a_sample);
  tcase_add_loop_test(tc, valid_frames_decode_field_for_field, 0, N_SAMPLES);
  tcase_add_loop_test(tc, truncated_frames_refused, 0, N_SAMPLES);
  tcase_add_loop_test(tc, over_long_frames_refused, 0, N_SAMPLES);
  tcase_add_test(tc, unknown_kinds_refused);
  tcase_add_test(tc, bad_flags_and_enums_refused);
  tcase_add_test(tc, bad_strings_refused);
  tcase_add_test(tc, counts_bounded_by_the_bytes_left);
  tcase_add_test(tc, wait_any_lists);
  tcase_add_test(tc, end_with_marks);
  tcase_add_test(tc, refused_frame_has_no_fields);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(worker_frame_suite()); }
