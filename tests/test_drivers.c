/* test_drivers.c — the engine's driver table (engine/driver.h): a feature
 * registered beside the built-in ones (queues, cron) gets each hook at the
 * engine's moments — dispatch on every scheduler pass, whose next time
 * bounds the pass's sleep; the bounded retention sweep, resumed on the
 * next pass while it says there is more; /healthz and GET /metrics; the
 * drain at stop and the free at close. */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "driver.h"
#include "harness.h"
#include "suite_run.h"
#include "view_health.h"

typedef struct counts {
  int dispatched, swept, healthy, metrics, drained, freed;
  int sweeps_more; /* sweeps that still say "more" */
  size_t budget;
  int64_t next_in_ms; /* the next due time dispatch names, from now */
} counts;

static counts seen;

static int t_dispatch(duro_engine *e, void *state, int64_t *next_ms) {
  counts *c = state;
  c->dispatched++;
  *next_ms = engine_now(e) + c->next_in_ms;
  return 0;
}

static int t_sweep(duro_engine *e, void *state, size_t budget) {
  (void)e;
  counts *c = state;
  c->swept++;
  c->budget = budget;
  return c->sweeps_more-- > 0;
}

static int t_health(duro_engine *e, void *state, duro_health_parts *parts) {
  (void)e;
  counts *c = state;
  c->healthy++;
  duro_health_add_text(parts, "test_driver", "stuck");
  return 1;
}

static void t_metrics(duro_engine *e, void *state, FILE *out) {
  (void)e;
  ((counts *)state)->metrics++;
  fputs("duro_test_driver_things 7\n", out);
}

static uint32_t t_drain(void *state, const struct timespec *until) {
  (void)until;
  ((counts *)state)->drained++;
  return 0;
}

static void t_free(void *state) { ((counts *)state)->freed++; }

static const duro_driver test_driver = {
    .name = "test",
    .dispatch = t_dispatch,
    .sweep = t_sweep,
    .health = t_health,
    .metrics = t_metrics,
    .drain = t_drain,
    .free = t_free,
};

START_TEST(a_registered_driver_gets_every_hook) {
  harness h;
  harness_open(&h);
  memset(&seen, 0, sizeof seen);
  seen.next_in_ms = 250;
  seen.sweeps_more = 1;
  ck_assert_int_eq(duro_engine_register_driver(h.e, &test_driver, &seen), 0);
  ck_assert_ptr_eq(duro_engine_driver_state(h.e, &test_driver), &seen);
  harness_start(&h);

  /* Its next time bounds the pass's sleep. */
  int64_t delay = duro_engine_scheduler_pass(h.e);
  ck_assert_int_eq(seen.dispatched, 1);
  ck_assert_int_le(delay, 250);
  ck_assert_int_eq(seen.swept, 0); /* the first sweep is 5 s away */

  /* The sweep reaches it after the built-in drivers' rows, and goes on
   * on the next pass while it says there is more. */
  duro_clock_advance(&h.clock, 6000);
  ck_assert_int_eq(duro_engine_scheduler_pass(h.e), 0); /* more to do */
  ck_assert_int_eq(seen.swept, 1);
  ck_assert_uint_gt(seen.budget, 0);
  duro_engine_scheduler_pass(h.e);
  ck_assert_int_eq(seen.swept, 2);
  duro_engine_scheduler_pass(h.e);
  ck_assert_int_eq(seen.swept, 2); /* done until the next minute */
  ck_assert_int_eq(seen.dispatched, 4);

  json_t *health = duro_engine_health(h.e);
  ck_assert_str_eq(json_string_value(json_object_get(health, "status")),
                   "degraded");
  ck_assert_str_eq(json_string_value(json_object_get(health, "test_driver")),
                   "stuck");
  json_decref(health);
  char *text = duro_engine_metrics(h.e);
  ck_assert_ptr_nonnull(strstr(text, "duro_test_driver_things 7\n"));
  free(text);

  harness_close(&h);
  ck_assert_int_ge(seen.drained, 1);
  ck_assert_int_eq(seen.freed, 1);
}
END_TEST

static const duro_driver idle_driver = {.name = "idle"};

START_TEST(the_table_is_bounded) {
  harness h;
  harness_open(&h);
  int rc = 0, n = 0;
  while ((rc = duro_engine_register_driver(h.e, &idle_driver, NULL)) == 0)
    n++;
  ck_assert_int_eq(rc, DURO_E_INVALID_ARGUMENT);
  /* queues, cron, children, pipelines, telemetry, tail, debounce,
   * singleton, flow, resources, bulk, keys, outcomes */
  int builtin = 0;
  while (duro_builtin_drivers[builtin])
    builtin++;
  ck_assert_int_eq(builtin, 13);
  ck_assert_int_eq(n, DURO_ENGINE_MAX_DRIVERS - builtin);
  harness_start(&h);
  duro_engine_scheduler_pass(h.e); /* hooks left NULL are skipped */
  harness_close(&h);
}
END_TEST

int main(void) {
  Suite *s = suite_create("drivers");
  TCase *tc = tcase_create("drivers");
  tcase_add_test(tc, a_registered_driver_gets_every_hook);
  tcase_add_test(tc, the_table_is_bounded);
  suite_add_tcase(s, tc);
  return suite_run(s);
}
