/* wake_cases.c — wake_cases.h: an instance waits with a wait_type; events
 * of types it lists wake it (JOP_WAKE_IF_WAITING at their send,
 * JOP_WAKE_IF_EVENT_PENDING at its final commit), and no other type
 * does, however close: a part of a listed type, one with more, one that
 * a LIKE pattern of a listed type would take. */
#include "wake_cases.h"

#include <check.h>
#include <stdio.h>

#include "duro.h"

static void commit_ok(journal *j, journal_batch *b) {
  int rc = journal_commit(j, b);
  ck_assert_msg(rc == 0, "commit: %d %s", rc, journal_errmsg(j));
}

static int64_t waiting(journal *j, const char *id, const char *wait_type) {
  journal_instance in = {.workflow = "wake",
                         .id = (char *)id,
                         .status = DURO_STATUS_QUEUED,
                         .params = "null",
                         .created_ms = 1,
                         .retention_ms = 1000};
  journal_batch b = {0};
  journal_batch_add(&b, JOP_INSTANCE_INSERT)->inst = &in;
  commit_ok(j, &b);
  int64_t rowid = b.ops[0].out_rowid;
  ck_assert_int_gt(rowid, 0);
  journal_batch_reset(&b);
  in = (journal_instance){.rowid = rowid,
                          .status = DURO_STATUS_WAITING,
                          .started_ms = 1,
                          .ended_ms = JOURNAL_NONE,
                          .wake_ms = 1000000,
                          .paused_ms = JOURNAL_NONE,
                          .wait_type = (char *)wait_type};
  journal_batch_add(&b, JOP_INSTANCE_SET)->inst = &in;
  commit_ok(j, &b);
  journal_batch_free(&b);
  return rowid;
}

static int64_t wake_of(journal *j, int64_t rowid) {
  journal_instance got = {0};
  ck_assert_int_eq(journal_instance_get_rowid(j, rowid, &got), 0);
  int64_t wake = got.wake_ms;
  journal_instance_clear(&got);
  return wake;
}

/* Sends an event of `type` as the engine does (its insert and the wake
 * it may cause, one commit): whether it woke the instance.  Its seq in
 * *seq when asked. */
static int send_wakes(journal *j, int64_t rowid, const char *type, int64_t ts,
                      int64_t *seq) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_EVENT_INSERT);
  op->rowid = rowid;
  op->event_type = (char *)type;
  op->event_payload = "null";
  op->ts_ms = ts;
  op = journal_batch_add(&b, JOP_WAKE_IF_WAITING);
  op->rowid = rowid;
  op->event_type = (char *)type;
  op->ts_ms = ts;
  commit_ok(j, &b);
  ck_assert_int_eq(b.ops[0].rc, 0);
  if (seq)
    *seq = b.ops[0].out_rowid;
  int woke = (int)b.ops[1].out_rowid;
  journal_batch_free(&b);
  ck_assert_int_eq(wake_of(j, rowid), woke ? ts : 1000000);
  return woke;
}

/* Whether an unconsumed event of a type it waits for is stored. */
static int pending_wakes(journal *j, int64_t rowid, int64_t ts) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_WAKE_IF_EVENT_PENDING);
  op->rowid = rowid;
  op->ts_ms = ts;
  commit_ok(j, &b);
  int woke = (int)b.ops[0].out_rowid;
  journal_batch_free(&b);
  return woke;
}

static void consume(journal *j, int64_t seq, const char *by) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_EVENT_CONSUME);
  op->event_seq = seq;
  op->step_key = (char *)by;
  commit_ok(j, &b);
  journal_batch_free(&b);
}

static const char *const near_misses[] = {
    "paid_",         "pai",    "aid",   "Paid",  "order",      "shipped",
    "orderXshipped", "order_", "paid|", "|paid", "paid|order", "order_shipped|",
};

void wake_cases_type_lists(journal *j) {
  /* a list: neither a near miss nor a part of it wakes it, nor is it
   * pending for its final commit */
  int64_t list = waiting(j, "list", "paid" JOURNAL_WAIT_SEP "order_shipped");
  for (size_t i = 0; i < sizeof near_misses / sizeof *near_misses; i++) {
    ck_assert_msg(!send_wakes(j, list, near_misses[i], 10 + (int64_t)i, NULL),
                  "\"%s\" woke a wait for paid|order_shipped", near_misses[i]);
    ck_assert_int_eq(pending_wakes(j, list, 100), 0);
  }
  /* its second type wakes it, and is pending until consumed */
  int64_t seq;
  ck_assert_int_eq(send_wakes(j, list, "order_shipped", 200, &seq), 1);
  ck_assert_int_eq(pending_wakes(j, list, 300), 1);
  ck_assert_int_eq(wake_of(j, list), 300);
  consume(j, seq, "review#1");
  ck_assert_int_eq(pending_wakes(j, list, 400), 0);
  /* and its first */
  int64_t again = waiting(j, "list2", "paid" JOURNAL_WAIT_SEP "order_shipped");
  ck_assert_int_eq(send_wakes(j, again, "paid", 500, NULL), 1);

  /* one type, as every wait before lists were (and rows written then) */
  int64_t one = waiting(j, "one", "paid");
  ck_assert_int_eq(send_wakes(j, one, "pai", 10, NULL), 0);
  ck_assert_int_eq(send_wakes(j, one, "paid.x", 11, NULL), 0);
  ck_assert_int_eq(pending_wakes(j, one, 12), 0);
  ck_assert_int_eq(send_wakes(j, one, "paid", 20, NULL), 1);

  /* a pattern's wildcards are letters like any other */
  int64_t like = waiting(j, "like", "a_c" JOURNAL_WAIT_SEP "100%");
  ck_assert_int_eq(send_wakes(j, like, "abc", 10, NULL), 0);
  ck_assert_int_eq(send_wakes(j, like, "1000", 11, NULL), 0);
  ck_assert_int_eq(pending_wakes(j, like, 12), 0);
  ck_assert_int_eq(send_wakes(j, like, "100%", 20, NULL), 1);

  /* an instance not waiting is never woken, whatever its wait_type */
  int64_t none = waiting(j, "none", NULL);
  ck_assert_int_eq(send_wakes(j, none, "paid", 10, NULL), 0);
  ck_assert_int_eq(pending_wakes(j, none, 11), 0);
}
