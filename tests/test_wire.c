/* test_wire.c — journal_wire.c: batches and rows survive the trip through
 * bytes field for field, for every op kind; a decoded activation batch
 * commits to a real journal exactly as the batch it came from; and no
 * truncated or scribbled-on buffer is read past its end or taken as a
 * batch (ASan watches the reads). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "duro.h"
#include "journal.h"
#include "journal_wire.h"
#include "suite_run.h"

/* ---- random rows and ops (a fixed seed: a failure is repeatable) ---- */

static unsigned seed = 12345;

static uint32_t rnd(void) { return (uint32_t)rand_r(&seed); }

static int64_t rnd_i64(void) {
  switch (rnd() % 4) {
  case 0:
    return JOURNAL_NONE;
  case 1:
    return -(int64_t)rnd();
  default:
    return ((int64_t)rnd() << 31) | rnd();
  }
}

/* NULL, "", or a string with any byte but NUL (UTF-8 or not). */
static char *rnd_str(void) {
  uint32_t k = rnd() % 5;
  if (k == 0)
    return NULL;
  size_t n = k == 1 ? 0 : rnd() % 40;
  char *s = malloc(n + 1);
  for (size_t i = 0; i < n; i++)
    s[i] = (char)(1 + rnd() % 255);
  s[n] = '\0';
  return s;
}

static void rnd_instance(journal_instance *in) {
  *in = (journal_instance){.rowid = rnd_i64(),
                           .workflow = rnd_str(),
                           .id = rnd_str(),
                           .status = (duro_status)(rnd() % 8),
                           .params = rnd_str(),
                           .output = rnd_str(),
                           .error = rnd_str(),
                           .created_ms = rnd_i64(),
                           .started_ms = rnd_i64(),
                           .ended_ms = rnd_i64(),
                           .wake_ms = rnd_i64(),
                           .paused_ms = rnd_i64(),
                           .wait_type = rnd_str(),
                           .control = (int)(rnd() % 3),
                           .retention_ms = rnd_i64(),
                           .build = rnd_str(),
                           .restarts = rnd_i64(),
                           .owner = rnd_i64(),
                           .traceparent = rnd_str()};
}

static void rnd_step(journal_step *s) {
  *s = (journal_step){.key = rnd_str(),
                      .name = rnd_str(),
                      .count = rnd(),
                      .seq = rnd_i64(),
                      .type = (duro_step_kind)(rnd() % 3),
                      .status = (duro_step_status)(rnd() % 4),
                      .result = rnd_str(),
                      .error = rnd_str(),
                      .attempts = rnd(),
                      .started_ms = rnd_i64(),
                      .ended_ms = rnd_i64(),
                      .wake_ms = rnd_i64(),
                      .attempt_started_ms = rnd_i64(),
                      .build = rnd_str()};
}

/* An op of `kind` with every field random; its rows and strings go to b
 * (journal_batch_own), as a writer's would live until the commit. */
static void rnd_op(journal_batch *b, journal_op_kind kind) {
  journal_op *op = journal_batch_add(b, kind);
#define S(field)                                                               \
  do {                                                                         \
    char *s_ = rnd_str();                                                      \
    op->field = s_ ? journal_batch_own(b, s_) : NULL;                          \
  } while (0)
  op->rowid = rnd_i64();
  if (rnd() % 2) {
    journal_instance *in = journal_batch_own(b, malloc(sizeof *in));
    rnd_instance(in);
    char *strs[] = {in->workflow, in->id,        in->params, in->output,
                    in->error,    in->wait_type, in->build,  in->traceparent};
    for (size_t i = 0; i < 8; i++)
      if (strs[i])
        journal_batch_own(b, strs[i]);
    op->inst = in;
  }
  if (rnd() % 2) {
    journal_step *s = journal_batch_own(b, malloc(sizeof *s));
    rnd_step(s);
    char *strs[] = {s->key, s->name, s->result, s->error, s->build};
    for (size_t i = 0; i < 5; i++)
      if (strs[i])
        journal_batch_own(b, strs[i]);
    op->step = s;
  }
  S(attempt.key);
  op->attempt.number = rnd();
  op->attempt.started_ms = rnd_i64();
  op->attempt.ended_ms = rnd_i64();
  S(attempt.error);
  S(attempt.build);
  op->from_seq = rnd_i64();
  op->event_seq = rnd_i64();
  S(event_type);
  S(event_payload);
  S(step_key);
  op->ts_ms = rnd_i64();
  op->clear_control = (int)(rnd() % 2);
  S(queue);
  S(body);
  S(lease);
  S(error);
  S(dead_letter_queue);
  op->visible_ms = rnd_i64();
  op->max_attempts = rnd();
  S(lease_token);
  op->n_leases = rnd() % 1000;
  S(traceparent);
#undef S
}

/* ---- comparing ---- */

static void same_str(const char *a, const char *b, const char *what) {
  if (!a || !b)
    ck_assert_msg(a == b, "%s: one is NULL, the other \"%s\"", what, a ? a : b);
  else
    ck_assert_msg(!strcmp(a, b), "%s differs", what);
}

static void same_instance(const journal_instance *a,
                          const journal_instance *b) {
  ck_assert_int_eq(a->rowid, b->rowid);
  same_str(a->workflow, b->workflow, "workflow");
  same_str(a->id, b->id, "id");
  ck_assert_int_eq(a->status, b->status);
  same_str(a->params, b->params, "params");
  same_str(a->output, b->output, "output");
  same_str(a->error, b->error, "error");
  ck_assert_int_eq(a->created_ms, b->created_ms);
  ck_assert_int_eq(a->started_ms, b->started_ms);
  ck_assert_int_eq(a->ended_ms, b->ended_ms);
  ck_assert_int_eq(a->wake_ms, b->wake_ms);
  ck_assert_int_eq(a->paused_ms, b->paused_ms);
  same_str(a->wait_type, b->wait_type, "wait_type");
  ck_assert_int_eq(a->control, b->control);
  ck_assert_int_eq(a->retention_ms, b->retention_ms);
  same_str(a->build, b->build, "build");
  ck_assert_int_eq(a->restarts, b->restarts);
  ck_assert_int_eq(a->owner, b->owner);
  same_str(a->traceparent, b->traceparent, "traceparent");
}

static void same_step(const journal_step *a, const journal_step *b) {
  same_str(a->key, b->key, "step key");
  same_str(a->name, b->name, "step name");
  ck_assert_uint_eq(a->count, b->count);
  ck_assert_int_eq(a->seq, b->seq);
  ck_assert_int_eq(a->type, b->type);
  ck_assert_int_eq(a->status, b->status);
  same_str(a->result, b->result, "step result");
  same_str(a->error, b->error, "step error");
  ck_assert_uint_eq(a->attempts, b->attempts);
  ck_assert_int_eq(a->started_ms, b->started_ms);
  ck_assert_int_eq(a->ended_ms, b->ended_ms);
  ck_assert_int_eq(a->wake_ms, b->wake_ms);
  ck_assert_int_eq(a->attempt_started_ms, b->attempt_started_ms);
  same_str(a->build, b->build, "step build");
}

static void same_op(const journal_op *a, const journal_op *b) {
  ck_assert_int_eq(a->kind, b->kind);
  ck_assert_int_eq(a->rowid, b->rowid);
  ck_assert_int_eq(a->inst != NULL, b->inst != NULL);
  if (a->inst)
    same_instance(a->inst, b->inst);
  ck_assert_int_eq(a->step != NULL, b->step != NULL);
  if (a->step)
    same_step(a->step, b->step);
  same_str(a->attempt.key, b->attempt.key, "attempt key");
  ck_assert_uint_eq(a->attempt.number, b->attempt.number);
  ck_assert_int_eq(a->attempt.started_ms, b->attempt.started_ms);
  ck_assert_int_eq(a->attempt.ended_ms, b->attempt.ended_ms);
  same_str(a->attempt.error, b->attempt.error, "attempt error");
  same_str(a->attempt.build, b->attempt.build, "attempt build");
  ck_assert_int_eq(a->from_seq, b->from_seq);
  ck_assert_int_eq(a->event_seq, b->event_seq);
  same_str(a->event_type, b->event_type, "event_type");
  same_str(a->event_payload, b->event_payload, "event_payload");
  same_str(a->step_key, b->step_key, "step_key");
  ck_assert_int_eq(a->ts_ms, b->ts_ms);
  ck_assert_int_eq(a->clear_control, b->clear_control);
  same_str(a->queue, b->queue, "queue");
  same_str(a->body, b->body, "body");
  same_str(a->lease, b->lease, "lease");
  same_str(a->error, b->error, "error");
  same_str(a->dead_letter_queue, b->dead_letter_queue, "dead_letter_queue");
  ck_assert_int_eq(a->visible_ms, b->visible_ms);
  ck_assert_uint_eq(a->max_attempts, b->max_attempts);
  same_str(a->lease_token, b->lease_token, "lease_token");
  ck_assert_uint_eq(a->n_leases, b->n_leases);
  same_str(a->traceparent, b->traceparent, "op traceparent");
}

/* ---- cases ---- */

/* Every op kind, many times over, with every field random. */
START_TEST(batch_round_trip_every_kind) {
  for (int round = 0; round < 50; round++) {
    journal_batch b = {0}, got = {0};
    for (int k = 0; k <= (int)JOP_MESSAGES_EXPIRE; k++)
      rnd_op(&b, (journal_op_kind)k);
    wire_buf w = {0};
    journal_wire_batch(&w, &b);
    ck_assert_int_eq(journal_wire_batch_read(w.data, w.len, &got), 0);
    ck_assert_uint_eq(got.n, b.n);
    for (size_t i = 0; i < b.n; i++)
      same_op(&b.ops[i], &got.ops[i]);
    wire_buf_free(&w);
    journal_batch_free(&b);
    journal_batch_free(&got);
  }
}
END_TEST

/* Each prefix of a batch is refused and leaves nothing behind; a byte
 * past its end too. */
START_TEST(batch_truncated_refused) {
  journal_batch b = {0}, got = {0};
  for (int k = 0; k <= (int)JOP_MESSAGES_EXPIRE; k++)
    rnd_op(&b, (journal_op_kind)k);
  wire_buf w = {0};
  journal_wire_batch(&w, &b);
  for (size_t len = 0; len < w.len; len++) {
    /* A copy of exactly len bytes, so ASan sees a read past it. */
    char *cut = malloc(len ? len : 1);
    memcpy(cut, w.data, len);
    ck_assert_int_eq(journal_wire_batch_read(cut, len, &got),
                     DURO_E_INVALID_ARGUMENT);
    ck_assert_uint_eq(got.n, 0);
    free(cut);
  }
  char *longer = malloc(w.len + 1);
  memcpy(longer, w.data, w.len);
  longer[w.len] = 0;
  ck_assert_int_eq(journal_wire_batch_read(longer, w.len + 1, &got),
                   DURO_E_INVALID_ARGUMENT);
  free(longer);
  wire_buf_free(&w);
  journal_batch_free(&b);
  journal_batch_free(&got);
}
END_TEST

/* Bytes changed at random: decoded or refused, never read out of bounds,
 * never an enum out of its range. */
START_TEST(batch_scribbled_on) {
  journal_batch b = {0}, got = {0};
  for (int k = 0; k <= (int)JOP_MESSAGES_EXPIRE; k++)
    rnd_op(&b, (journal_op_kind)k);
  wire_buf w = {0};
  journal_wire_batch(&w, &b);
  int refused = 0;
  for (int round = 0; round < 2000; round++) {
    char *bytes = malloc(w.len);
    memcpy(bytes, w.data, w.len);
    for (int flips = 1 + (int)(rnd() % 4); flips > 0; flips--)
      bytes[rnd() % w.len] = (char)rnd();
    int rc = journal_wire_batch_read(bytes, w.len, &got);
    if (rc) {
      refused++;
      ck_assert_int_eq(rc, DURO_E_INVALID_ARGUMENT);
      ck_assert_uint_eq(got.n, 0);
    }
    for (size_t i = 0; !rc && i < got.n; i++) {
      ck_assert_int_le(got.ops[i].kind, JOP_MESSAGES_EXPIRE);
      if (got.ops[i].inst)
        ck_assert_int_le(got.ops[i].inst->status, DURO_STATUS_COMPLETE);
    }
    free(bytes);
  }
  ck_assert_int_gt(refused, 0); /* the checks do refuse garbage */
  wire_buf_free(&w);
  journal_batch_free(&b);
  journal_batch_free(&got);
}
END_TEST

START_TEST(results_round_trip) {
  journal_batch b = {0}, sent = {0};
  for (int i = 0; i < 20; i++) {
    journal_op *op = journal_batch_add(&b, JOP_STEP_PUT);
    op->rc = i % 3 ? 0 : DURO_E_ALREADY_EXISTS;
    op->out_rowid = rnd_i64();
    op->out_owner = rnd_i64();
    journal_batch_add(&sent, JOP_STEP_PUT);
  }
  wire_buf w = {0};
  journal_wire_results(&w, &b);
  ck_assert_int_eq(journal_wire_results_read(w.data, w.len - 1, &sent),
                   DURO_E_INVALID_ARGUMENT);
  ck_assert_int_eq(sent.ops[0].rc, 0); /* a bad buffer changes nothing */
  ck_assert_int_eq(journal_wire_results_read(w.data, w.len, &sent), 0);
  for (size_t i = 0; i < b.n; i++) {
    ck_assert_int_eq(sent.ops[i].rc, b.ops[i].rc);
    ck_assert_int_eq(sent.ops[i].out_rowid, b.ops[i].out_rowid);
    ck_assert_int_eq(sent.ops[i].out_owner, b.ops[i].out_owner);
  }
  journal_batch_add(&sent, JOP_STEP_PUT); /* a batch of another size */
  ck_assert_int_eq(journal_wire_results_read(w.data, w.len, &sent),
                   DURO_E_INVALID_ARGUMENT);
  wire_buf_free(&w);
  journal_batch_free(&b);
  journal_batch_free(&sent);
}
END_TEST

/* The rows an activation starts from: an instance, its steps, its
 * events, one after another in one buffer. */
START_TEST(rows_round_trip) {
  journal_instance in;
  rnd_instance(&in);
  journal_step steps[6];
  for (int i = 0; i < 6; i++)
    rnd_step(&steps[i]);
  journal_event ev[3];
  for (int i = 0; i < 3; i++)
    ev[i] = (journal_event){.seq = rnd_i64(),
                            .type = rnd_str(),
                            .payload = rnd_str(),
                            .ts_ms = rnd_i64(),
                            .consumed_by = rnd_str()};
  wire_buf w = {0};
  journal_wire_instance(&w, &in);
  journal_wire_steps(&w, steps, 6);
  journal_wire_events(&w, ev, 3);

  wire_reader r;
  wire_reader_init(&r, w.data, w.len);
  journal_instance gin;
  journal_step *gs = NULL;
  journal_event *ge = NULL;
  size_t ns = 0, ne = 0;
  ck_assert_int_eq(journal_wire_instance_read(&r, &gin), 0);
  ck_assert_int_eq(journal_wire_steps_read(&r, &gs, &ns), 0);
  ck_assert_int_eq(journal_wire_events_read(&r, &ge, &ne), 0);
  ck_assert_ptr_eq(r.p, r.end);
  same_instance(&in, &gin);
  ck_assert_uint_eq(ns, 6);
  for (int i = 0; i < 6; i++)
    same_step(&steps[i], &gs[i]);
  ck_assert_uint_eq(ne, 3);
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(ge[i].seq, ev[i].seq);
    same_str(ge[i].type, ev[i].type, "event type");
    same_str(ge[i].payload, ev[i].payload, "payload");
    ck_assert_int_eq(ge[i].ts_ms, ev[i].ts_ms);
    same_str(ge[i].consumed_by, ev[i].consumed_by, "consumed_by");
  }
  journal_instance_clear(&gin);
  journal_steps_free(gs, ns);
  journal_events_free(ge, ne);

  /* Cut short anywhere: refused, nothing leaked (ASan's leak check). */
  for (size_t len = 0; len < w.len; len += 7) {
    wire_reader_init(&r, w.data, len);
    int rc = journal_wire_instance_read(&r, &gin);
    if (rc) {
      ck_assert_ptr_null(gin.workflow);
    } else {
      rc = journal_wire_steps_read(&r, &gs, &ns);
      if (rc == 0) {
        rc = journal_wire_events_read(&r, &ge, &ne);
        if (rc == 0)
          journal_events_free(ge, ne);
        journal_steps_free(gs, ns);
      }
      journal_instance_clear(&gin);
    }
    ck_assert_int_eq(rc, DURO_E_INVALID_ARGUMENT);
  }
  journal_instance_clear(&in);
  for (int i = 0; i < 6; i++) {
    journal_step *s = &steps[i];
    free(s->key), free(s->name), free(s->result), free(s->error);
    free(s->build);
  }
  for (int i = 0; i < 3; i++)
    free(ev[i].type), free(ev[i].payload), free(ev[i].consumed_by);
  wire_buf_free(&w);
}
END_TEST

/* ---- a decoded batch commits as its original does ---- */

static journal *open_journal(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  journal *j = NULL;
  char err[256];
  ck_assert_msg(journal_open(path, 0, &j, err, sizeof err) == 0, "%s", err);
  return j;
}

/* An activation's first batch: the instance created, then (a second
 * batch, its rowid known) a completed step, a failed attempt before it,
 * an event consumed, and a queue message sent from the step. */
static int64_t commit_activation(journal *j, int through_wire) {
  journal_instance in = {.workflow = "orders",
                         .id = "o-1",
                         .status = DURO_STATUS_QUEUED,
                         .params = "{\"n\":1}",
                         .created_ms = 1000,
                         .started_ms = JOURNAL_NONE,
                         .ended_ms = JOURNAL_NONE,
                         .wake_ms = JOURNAL_NONE,
                         .paused_ms = JOURNAL_NONE,
                         .retention_ms = 86400000};
  journal_batch b = {0}, got = {0};
  journal_op *op = journal_batch_add(&b, JOP_INSTANCE_INSERT);
  op->inst = &in;
  journal_batch *c = &b;
  wire_buf w = {0};
  if (through_wire) {
    journal_wire_batch(&w, &b);
    ck_assert_int_eq(journal_wire_batch_read(w.data, w.len, &got), 0);
    c = &got;
  }
  ck_assert_int_eq(journal_commit(j, c), 0);
  ck_assert_int_eq(c->ops[0].rc, 0);
  int64_t rowid = c->ops[0].out_rowid;
  if (through_wire) { /* the answer goes back the same way */
    wire_buf r = {0};
    journal_wire_results(&r, &got);
    ck_assert_int_eq(journal_wire_results_read(r.data, r.len, &b), 0);
    ck_assert_int_eq(b.ops[0].out_rowid, rowid);
    wire_buf_free(&r);
  }
  journal_batch_reset(&b);
  journal_batch_reset(&got);
  w.len = 0;

  journal_step s = {.key = "charge#1",
                    .name = "charge",
                    .count = 1,
                    .seq = 1,
                    .type = DURO_STEP_DO,
                    .status = DURO_STEP_COMPLETE,
                    .result = "{\"ok\":true}",
                    .attempts = 2,
                    .started_ms = 1100,
                    .ended_ms = 1300,
                    .wake_ms = JOURNAL_NONE,
                    .attempt_started_ms = 1250,
                    .build = "b1"};
  op = journal_batch_add(&b, JOP_ATTEMPT_PUT);
  op->rowid = rowid;
  op->attempt = (journal_attempt){.key = "charge#1",
                                  .number = 1,
                                  .started_ms = 1100,
                                  .ended_ms = 1200,
                                  .error = "{\"name\":\"Error\",\"message\":"
                                           "\"declined\"}",
                                  .build = "b1"};
  op = journal_batch_add(&b, JOP_STEP_PUT);
  op->rowid = rowid;
  op->step = &s;
  op = journal_batch_add(&b, JOP_MESSAGE_INSERT);
  op->queue = "receipts";
  op->body = "{\"order\":\"o-1\"}";
  op->ts_ms = 1300;
  op->visible_ms = 1300;
  c = &b;
  if (through_wire) {
    journal_wire_batch(&w, &b);
    ck_assert_int_eq(journal_wire_batch_read(w.data, w.len, &got), 0);
    c = &got;
  }
  ck_assert_int_eq(journal_commit(j, c), 0);
  for (size_t i = 0; i < c->n; i++)
    ck_assert_int_eq(c->ops[i].rc, 0);
  wire_buf_free(&w);
  journal_batch_free(&b);
  journal_batch_free(&got);
  return rowid;
}

START_TEST(decoded_batch_commits_the_same) {
  char dir[] = "/tmp/duro-wire-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  journal *direct = open_journal(dir, "direct.db");
  journal *wired = open_journal(dir, "wired.db");
  int64_t r1 = commit_activation(direct, 0);
  int64_t r2 = commit_activation(wired, 1);

  journal_instance a = {0}, b = {0};
  ck_assert_int_eq(journal_instance_get_rowid(direct, r1, &a), 0);
  ck_assert_int_eq(journal_instance_get_rowid(wired, r2, &b), 0);
  same_instance(&a, &b);
  journal_step *sa = NULL, *sb = NULL;
  size_t na = 0, nb = 0;
  ck_assert_int_eq(journal_steps_load(direct, r1, &sa, &na), 0);
  ck_assert_int_eq(journal_steps_load(wired, r2, &sb, &nb), 0);
  ck_assert_uint_eq(na, 1);
  ck_assert_uint_eq(nb, na);
  same_step(&sa[0], &sb[0]);
  ck_assert_str_eq(sb[0].result, "{\"ok\":true}");

  journal_instance_clear(&a);
  journal_instance_clear(&b);
  journal_steps_free(sa, na);
  journal_steps_free(sb, nb);
  journal_close(direct);
  journal_close(wired);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *wire_suite(void) {
  Suite *s = suite_create("wire");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, batch_round_trip_every_kind);
  tcase_add_test(tc, batch_truncated_refused);
  tcase_add_test(tc, batch_scribbled_on);
  tcase_add_test(tc, results_round_trip);
  tcase_add_test(tc, rows_round_trip);
  tcase_add_test(tc, decoded_batch_commits_the_same);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(wire_suite()); }
