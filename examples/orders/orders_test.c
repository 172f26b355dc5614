/* orders_test.c — the order flow's tests, written with duro's test kit
 * (duro-test.h): each path of the workflow on a virtual clock (two days
 * of waiting take no time), a mocked card refusal, and a crash at every
 * step boundary.  A plain main, no test framework: each check that fails
 * prints the instance's journal and aborts.
 *
 *   cc orders_test.c $(pkg-config --cflags --libs duro-test) -o orders_test
 *   ./orders_test ./liborders.so */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duro-test.h"

static const char *plugin;

static const char *const order =
    "{\"orderId\":\"A-1\",\"email\":\"ada@example.com\",\"amount\":42.5}";

static duro_test *open_orders(void) {
  duro_test *t = duro_test_open();
  if (duro_test_load(t, plugin, "order-flow", "OrderFlow", NULL) != 0) {
    fprintf(stderr, "%s\n", duro_test_error_text(t));
    exit(1);
  }
  return t;
}

static void expect(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "orders_test: %s\n", what);
    abort();
  }
}

/* Approved: charged once, a grace hour, then three notices. */
static void approved(void) {
  duro_test *t = open_orders();
  duro_test_create(t, "order-flow", "o1", order);
  duro_test_run(t);
  DURO_TEST_ASSERT_STATUS(t, "order-flow", "o1", "waiting"); /* the review */
  duro_test_send_event(t, "order-flow", "o1", "approval",
                       "{\"approved\":true}");
  duro_test_run(t);
  DURO_TEST_ASSERT_STATUS(t, "order-flow", "o1", "waiting"); /* grace */
  duro_test_advance(t, "1 hour");
  DURO_TEST_ASSERT_STATUS(t, "order-flow", "o1", "complete");
  DURO_TEST_ASSERT_ATTEMPTS(t, "order-flow", "o1", "charge card#1", 1);
  const char *out = duro_test_output(t, "order-flow", "o1");
  expect(strstr(out, "\"approved\": true") || strstr(out, "\"approved\":true"),
         "approved output");
  expect(duro_test_calls(t, "order-flow", "notify") == 3, "three notices");
  duro_test_close(t);
}

/* A flaky card: the first attempt fails, the retry 10 s later charges. */
static void flaky_card(void) {
  duro_test *t = open_orders();
  duro_test_create(t, "order-flow", "o2",
                   "{\"orderId\":\"A-2\",\"email\":\"b@example.com\","
                   "\"amount\":5,\"flakyCard\":true}");
  duro_test_run(t);
  DURO_TEST_ASSERT_ATTEMPTS(t, "order-flow", "o2", "charge card#1", 1);
  duro_test_advance(t, "10s");
  DURO_TEST_ASSERT_ATTEMPTS(t, "order-flow", "o2", "charge card#1", 2);
  DURO_TEST_ASSERT_STATUS(t, "order-flow", "o2", "waiting"); /* the review */
  duro_test_close(t);
}

/* No review within two days: refunded, then released. */
static void review_times_out(void) {
  duro_test *t = open_orders();
  duro_test_create(t, "order-flow", "o3", order);
  duro_test_run(t);
  duro_test_advance(t, "2 days");
  DURO_TEST_ASSERT_STATUS(t, "order-flow", "o3", "complete");
  DURO_TEST_ASSERT_OUTPUT(
      t, "order-flow", "o3",
      "{\"approved\":false,\"reason\":\"review timed out\"}");
  expect(duro_test_step_result(t, "order-flow", "o3",
                               "charge card#1/rollback") != NULL,
         "the charge refunded");
  expect(duro_test_step_result(t, "order-flow", "o3",
                               "reserve stock#1/rollback") != NULL,
         "the stock released");
  duro_test_close(t);
}

/* The card provider refuses for good (mocked): the instance errors and
 * the stock is released. */
static void card_refused(void) {
  duro_test *t = open_orders();
  duro_test_mock_fail_final(t, "order-flow", "charge card", "card stolen");
  duro_test_create(t, "order-flow", "o4", order);
  duro_test_run_to_end(t, "order-flow", "o4", NULL);
  DURO_TEST_ASSERT_STATUS(t, "order-flow", "o4", "errored");
  expect(strstr(duro_test_error(t, "order-flow", "o4"), "card stolen") != NULL,
         "the refusal is the error");
  expect(duro_test_step_result(t, "order-flow", "o4",
                               "reserve stock#1/rollback") != NULL,
         "the stock released");
  duro_test_close(t);
}

/* A crash at every step boundary of the approved path. */
static void crash_everywhere(void) {
  duro_test *t = open_orders();
  const char *events[] = {"approval", "{\"approved\":true}", NULL};
  duro_test_crash_report r;
  size_t n = 0;
  if (duro_test_crash_everywhere(t, "order-flow", order, events, &n, &r) != 0) {
    fprintf(stderr, "orders_test: crash at boundary %zu (%s): %s\n", r.boundary,
            r.where, r.message);
    abort();
  }
  expect(n >= 15, "every boundary of five steps tried");
  printf("orders_test: %zu boundaries, each crashed and recovered\n", n);
  duro_test_close(t);
}

int main(int argc, char **argv) {
  plugin = argc > 1 ? argv[1] : "./liborders.so";
  approved();
  flaky_card();
  review_times_out();
  card_refused();
  crash_everywhere();
  printf("orders_test: all passed\n");
  return 0;
}
