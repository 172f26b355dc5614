/* test_cron.c — cron triggers in the engine (cron/trigger.h), on a
 * virtual clock that starts at 2026-01-01T00:00:00Z (a Thursday).
 *
 * The handler form and the no-code form fire at their ticks and nowhere
 * else; nothing fires twice across a restart, nor after a crash right
 * after a fire (the tick row a dead engine left `fired` is found `failed`
 * and not fired again); ticks that passed while no engine ran are
 * recorded `missed` and fired late as catch_up says (none, latest, all
 * with its cap); a tick that comes while the previous tick's instance
 * runs is `skipped` under overlap: skip and fires under allow; ids are
 * built from the tick in the trigger's zone; the list shows the next
 * ticks, the last one and the counts; a fire outside the schedule (run
 * where ticks run); a reload's swap of the triggers keeps, adds and
 * removes them; bad registrations are refused. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "journal.h"
#include "suite_run.h"
#include "trigger.h"
#include "view_cron.h"

#define MIN (60 * 1000LL)
#define HOUR (60 * MIN)
#define DAY (24 * HOUR)

static harness H;

/* ---- the handler form ------------------------------------------------- */

static int64_t fired_at[64];
static char fired_cron[64][32];
static size_t n_fired;
static int handler_rc;

static int on_tick(const duro_scheduled_event *ev, duro_env *env) {
  (void)env;
  ck_assert_uint_eq(ev->size, sizeof(duro_scheduled_event));
  if (n_fired < 64) { /* the first 64 are kept; the rest counted */
    snprintf(fired_cron[n_fired], sizeof fired_cron[n_fired], "%s", ev->cron);
    fired_at[n_fired] = ev->scheduled_ms;
  }
  n_fired++;
  return handler_rc;
}

static void setup(void) {
  n_fired = 0;
  handler_rc = 0;
  harness_open(&H);
  harness_start(&H);
  harness_set_cron_handler(&H, "p", on_tick);
}

static void teardown(void) { harness_close(&H); }

static void add(const char *schedule, int catch_up, uint32_t max) {
  duro_cron_spec spec = {.plugin = "p",
                         .schedule = schedule,
                         .catch_up = catch_up,
                         .max_catch_up = max};
  harness_register_cron(&H, &spec);
}

/* The trigger's entry of duro_cron_list (caller decrefs). */
static json_t *listed(size_t i) {
  json_t *l = NULL;
  ck_assert_int_eq(duro_cron_list(H.e, &l), 0);
  json_t *o = json_incref(json_array_get(l, i));
  json_decref(l);
  ck_assert_ptr_nonnull(o);
  return o;
}

static json_int_t count(size_t i, const char *state) {
  json_t *o = listed(i);
  json_int_t n = json_integer_value(json_object_get(o, state));
  json_decref(o);
  return n;
}

/* A new trigger fires at its ticks from now on: every 15 minutes, the
 * first at 00:00, which is now. */
START_TEST(fires_at_its_ticks) {
  add("*/15 * * * *", DURO_CRON_CATCH_UP_LATEST, 0);
  harness_run(&H);
  ck_assert_uint_eq(n_fired, 1);
  ck_assert_int_eq(fired_at[0], T0_MS);
  ck_assert_str_eq(fired_cron[0], "*/15 * * * *");
  harness_advance(&H, 15 * MIN - 1);
  ck_assert_uint_eq(n_fired, 1);
  harness_advance(&H, 1);
  ck_assert_uint_eq(n_fired, 2);
  ck_assert_int_eq(fired_at[1], T0_MS + 15 * MIN);
  for (int k = 0; k < 4; k++)
    harness_advance(&H, 15 * MIN);
  ck_assert_uint_eq(n_fired, 6);
  ck_assert_int_eq(fired_at[5], T0_MS + 75 * MIN);
  ck_assert_int_eq(count(0, "complete"), 6);
  ck_assert_int_eq(count(0, "missed"), 0);
}
END_TEST

/* A handler that returns non-zero leaves its tick failed, not retried. */
START_TEST(failing_handler_is_recorded) {
  add("0 * * * *", DURO_CRON_CATCH_UP_LATEST, 0);
  handler_rc = 3;
  harness_run(&H);
  ck_assert_uint_eq(n_fired, 1);
  harness_advance(&H, 30 * MIN);
  ck_assert_uint_eq(n_fired, 1);
  json_t *o = listed(0);
  ck_assert_int_eq(json_integer_value(json_object_get(o, "failed")), 1);
  json_t *last = json_object_get(o, "last");
  ck_assert_str_eq(json_string_value(json_object_get(last, "state")), "failed");
  ck_assert_ptr_nonnull(
      strstr(json_string_value(json_object_get(last, "error")), "3"));
  json_decref(o);
}
END_TEST

/* A restart at the same moment fires nothing again; the next tick fires
 * once. */
START_TEST(nothing_twice_across_a_restart) {
  add("0 * * * *", DURO_CRON_CATCH_UP_LATEST, 0);
  harness_run(&H);
  ck_assert_uint_eq(n_fired, 1);
  harness_reopen(&H);
  harness_run(&H);
  ck_assert_uint_eq(n_fired, 1);
  harness_advance(&H, HOUR);
  ck_assert_uint_eq(n_fired, 2);
  harness_reopen(&H);
  harness_run(&H);
  ck_assert_uint_eq(n_fired, 2);
  ck_assert_int_eq(count(0, "complete"), 2);
}
END_TEST

/* A crash right after a fire: the dead engine left its tick `fired`
 * (claimed, the handler running).  The next engine records it failed and
 * does not fire it again. */
START_TEST(crash_after_a_fire_fires_nothing_twice) {
  add("0 * * * *", DURO_CRON_CATCH_UP_LATEST, 0);
  harness_run(&H); /* 00:00: the trigger is known */
  harness_reopen(&H);
  /* as a dead engine leaves it: 01:00 claimed, never settled */
  journal *j = harness_journal_open(&H);
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_CRON_TICK);
  op->queue = "p|0 * * * *|UTC||";
  op->visible_ms = T0_MS + HOUR;
  op->body = "fired";
  op->ts_ms = T0_MS + HOUR;
  ck_assert_int_eq(journal_commit(j, &b), 0);
  ck_assert_int_eq(b.ops[0].out_rowid, 1);
  journal_batch_free(&b);
  journal_close(j);
  duro_clock_advance(&H.clock, HOUR);
  harness_reopen(&H);
  harness_run(&H);
  ck_assert_uint_eq(n_fired, 1); /* only 00:00, before the crash */
  json_t *o = listed(0);
  json_t *last = json_object_get(o, "last");
  ck_assert_int_eq(json_integer_value(json_object_get(last, "tick_ms")),
                   T0_MS + HOUR);
  ck_assert_str_eq(json_string_value(json_object_get(last, "state")), "failed");
  ck_assert_ptr_nonnull(strstr(
      json_string_value(json_object_get(last, "error")), "host stopped"));
  json_decref(o);
  harness_advance(&H, HOUR);
  ck_assert_uint_eq(n_fired, 2);
  ck_assert_int_eq(fired_at[1], T0_MS + 2 * HOUR);
}
END_TEST

/* Down from 00:30 to 05:00 with an hourly trigger: 01:00-04:00 passed
 * with no host (05:00 is on time).  `policy` decides which fire late. */
static void down_five_hours(int policy, uint32_t max) {
  add("0 * * * *", policy, max);
  harness_run(&H); /* 00:00 */
  ck_assert_uint_eq(n_fired, 1);
  harness_advance(&H, 30 * MIN);
  harness_down_for(&H, 4 * HOUR + 30 * MIN);
  harness_run(&H);
}

START_TEST(missed_ticks_catch_up_none) {
  down_five_hours(DURO_CRON_CATCH_UP_NONE, 0);
  ck_assert_uint_eq(n_fired, 2); /* 00:00 and 05:00 */
  ck_assert_int_eq(fired_at[1], T0_MS + 5 * HOUR);
  ck_assert_int_eq(count(0, "missed"), 4);
}
END_TEST

START_TEST(missed_ticks_catch_up_latest) {
  down_five_hours(DURO_CRON_CATCH_UP_LATEST, 0);
  ck_assert_uint_eq(n_fired, 3); /* 00:00, 04:00 late, 05:00 */
  ck_assert_int_eq(fired_at[1], T0_MS + 4 * HOUR);
  ck_assert_int_eq(fired_at[2], T0_MS + 5 * HOUR);
  ck_assert_int_eq(count(0, "missed"), 3);
  ck_assert_int_eq(count(0, "complete"), 3);
}
END_TEST

START_TEST(missed_ticks_catch_up_all_capped) {
  down_five_hours(DURO_CRON_CATCH_UP_ALL, 2);
  ck_assert_uint_eq(n_fired, 4); /* 00:00, 03:00 and 04:00 late, 05:00 */
  ck_assert_int_eq(fired_at[1], T0_MS + 3 * HOUR);
  ck_assert_int_eq(fired_at[2], T0_MS + 4 * HOUR);
  ck_assert_int_eq(fired_at[3], T0_MS + 5 * HOUR);
  ck_assert_int_eq(count(0, "missed"), 2);
}
END_TEST

/* A host that could not fire for two hours (a machine asleep) treats the
 * ticks it slept through as missed, as after a stop. */
START_TEST(a_stall_is_like_a_stop) {
  add("*/15 * * * *", DURO_CRON_CATCH_UP_LATEST, 0);
  harness_run(&H); /* 00:00 */
  harness_advance(&H, 2 * HOUR);
  ck_assert_uint_eq(n_fired, 3); /* 00:00, 01:45 late, 02:00 */
  ck_assert_int_eq(fired_at[1], T0_MS + 105 * MIN);
  ck_assert_int_eq(fired_at[2], T0_MS + 2 * HOUR);
  ck_assert_int_eq(count(0, "missed"), 6);
}
END_TEST

/* A week down with an every-minute trigger: 10,080 ticks, the newest
 * 10,000 recorded one by one and the rest counted. */
START_TEST(many_missed_ticks_are_counted) {
  add("* * * * *", DURO_CRON_CATCH_UP_NONE, 0);
  harness_run(&H);
  harness_down_for(&H, 7 * DAY + 30 * 1000);
  harness_run(&H);
  /* 00:01 .. 7d 00:00 minus the one on time (7d 00:00 is 30 s old) */
  ck_assert_int_eq(count(0, "missed"), 7 * 24 * 60 - 1);
  ck_assert_uint_eq(n_fired, 2);
}
END_TEST

/* A week down under catch_up: all with the largest cap: the newest 10,000
 * ticks fire late, and the 79 older ones (beyond the rows kept) are
 * counted missed, not lost. */
START_TEST(a_week_down_catches_up_to_the_cap) {
  add("* * * * *", DURO_CRON_CATCH_UP_ALL, 10000);
  harness_run(&H);
  harness_down_for(&H, 7 * DAY + 30 * 1000);
  harness_run(&H);
  ck_assert_uint_eq(n_fired, 1 + 10000 + 1);
  ck_assert_int_eq(count(0, "missed"), 7 * 24 * 60 - 1 - 10000);
  ck_assert_int_eq(count(0, "complete"), 10002);
  ck_assert_int_eq(count(0, "skipped"), 0);
}
END_TEST

/* Tick rows older than 30 days are swept; the counts stay. */
START_TEST(old_ticks_are_swept_counts_stay) {
  add("0 */6 * * *", DURO_CRON_CATCH_UP_LATEST, 0);
  harness_run(&H);
  for (int k = 0; k < 32 * 4; k++)
    harness_advance(&H, 6 * HOUR);
  ck_assert_uint_eq(n_fired, 32 * 4 + 1);
  size_t deleted = 0;
  ck_assert_int_eq(duro_crons_sweep(H.e, &deleted), 0);
  ck_assert_uint_eq(deleted, 2 * 4); /* days 0 and 1: older than 30 days */
  ck_assert_int_eq(count(0, "complete"), 32 * 4 + 1);
  /* where the schedule stands is unchanged: the next tick fires once */
  harness_reopen(&H);
  harness_advance(&H, 6 * HOUR);
  ck_assert_uint_eq(n_fired, 32 * 4 + 2);
}
END_TEST

/* ---- the no-code form ------------------------------------------------- */

static duro_rc nightly(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  if (strstr(ev->params, "scheduled_ms") && strstr(ev->instance_id, "long"))
    DURO_TRY(duro_sleep(step, "work", "90 minutes"));
  return duro_set_output(step, ev->params);
}

static void add_flow(const char *schedule, const char *tz, const char *id,
                     int overlap_allow) {
  duro_cron_spec spec = {.plugin = "p",
                         .schedule = schedule,
                         .timezone = tz,
                         .workflow = "nightly",
                         .id = id,
                         .overlap_allow = overlap_allow};
  harness_register_cron(&H, &spec);
}

static const char *status_of(const char *id) {
  return harness_status(&H, "nightly", id);
}

/* One instance per tick, its id from the tick's date, its params the
 * schedule and the tick. */
START_TEST(no_code_creates_one_instance_per_tick) {
  harness_register(&H, "nightly", nightly);
  harness_reopen(&H);
  add_flow("0 3 * * *", NULL, "nightly-{date}", 0);
  harness_run(&H); /* known from 00:00 on */
  for (int d = 0; d < 3; d++)
    harness_advance(&H, DAY);
  ck_assert_str_eq(status_of("nightly-2026-01-01"), "complete");
  ck_assert_str_eq(status_of("nightly-2026-01-02"), "complete");
  ck_assert_str_eq(status_of("nightly-2026-01-03"), "complete");
  json_t *d = harness_describe(&H, "nightly", "nightly-2026-01-02");
  ck_assert_str_eq(
      json_string_value(json_object_get(json_object_get(d, "params"), "cron")),
      "0 3 * * *");
  ck_assert_int_eq(json_integer_value(json_object_get(
                       json_object_get(d, "params"), "scheduled_ms")),
                   T0_MS + DAY + 3 * HOUR);
  json_decref(d);
  json_t *o = listed(0);
  ck_assert_int_eq(json_integer_value(json_object_get(o, "complete")), 3);
  ck_assert_str_eq(json_string_value(
                       json_object_get(json_object_get(o, "last"), "instance")),
                   "nightly-2026-01-03");
  json_decref(o);
  /* restarts change nothing */
  harness_reopen(&H);
  harness_run(&H);
  json_t *l = NULL;
  ck_assert_int_eq(duro_instance_list(H.e, "nightly", NULL, 100, NULL, &l), 0);
  ck_assert_uint_eq(json_array_size(json_object_get(l, "instances")), 3);
  json_decref(l);
}
END_TEST

/* The config's params reach each instance beside the schedule and the
 * tick; a reload that changes them keeps the trigger, and the next tick's
 * instance gets the new ones; params that are no JSON object are
 * refused. */
START_TEST(no_code_params_reach_the_instance) {
  harness_register(&H, "nightly", nightly);
  harness_reopen(&H);
  duro_cron_spec spec = {.plugin = "p",
                         .schedule = "0 3 * * *",
                         .workflow = "nightly",
                         .id = "n-{date}",
                         .params = "{\"region\":\"eu\",\"limit\":100}"};
  harness_register_cron(&H, &spec);
  harness_run(&H);
  harness_advance(&H, DAY);
  json_t *d = harness_describe(&H, "nightly", "n-2026-01-01");
  json_t *p = json_object_get(d, "params");
  ck_assert_str_eq(json_string_value(json_object_get(p, "cron")), "0 3 * * *");
  ck_assert_int_eq(json_integer_value(json_object_get(p, "scheduled_ms")),
                   T0_MS + 3 * HOUR);
  ck_assert_str_eq(json_string_value(json_object_get(p, "region")), "eu");
  ck_assert_int_eq(json_integer_value(json_object_get(p, "limit")), 100);
  json_decref(d);

  char err[256];
  spec.params = "{\"region\":\"us\"}";
  ck_assert_int_eq(duro_cron_replace(H.e, &spec, 1, err, sizeof err), 0);
  harness_advance(&H, DAY);
  d = harness_describe(&H, "nightly", "n-2026-01-02");
  p = json_object_get(d, "params");
  ck_assert_str_eq(json_string_value(json_object_get(p, "region")), "us");
  ck_assert_ptr_null(json_object_get(p, "limit"));
  json_decref(d);
  ck_assert_int_eq(count(0, "complete"), 2); /* the same trigger */

  spec.params = "[1]";
  ck_assert_int_eq(duro_cron_replace(H.e, &spec, 1, err, sizeof err),
                   DURO_E_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(err, "params must be a JSON object"));
}
END_TEST

/* Midnight in Tokyo is 15:00 UTC the day before; the id carries Tokyo's
 * date and time. */
START_TEST(ids_use_the_trigger_zone) {
  harness_register(&H, "nightly", nightly);
  harness_reopen(&H);
  add_flow("0 0 * * *", "Asia/Tokyo", "tokyo-{datetime}", 0);
  harness_run(&H);
  harness_advance(&H, 15 * HOUR - 1);
  json_t *l = NULL;
  ck_assert_int_eq(duro_instance_list(H.e, "nightly", NULL, 10, NULL, &l), 0);
  ck_assert_uint_eq(json_array_size(json_object_get(l, "instances")), 0);
  json_decref(l);
  harness_advance(&H, 1);
  ck_assert_str_eq(status_of("tokyo-2026-01-02T00:00"), "complete");
}
END_TEST

/* Hourly ticks of an instance that runs 90 minutes: under skip the 01:00
 * tick finds 00:00's running and is skipped; under allow it starts. */
START_TEST(overlap_skip_and_allow) {
  harness_register(&H, "nightly", nightly);
  harness_reopen(&H);
  add_flow("0 * * * *", NULL, "long-{time}", 0);
  duro_cron_spec allow = {.plugin = "q",
                          .schedule = "0 * * * *",
                          .workflow = "nightly",
                          .id = "long-allow-{time}",
                          .overlap_allow = 1};
  harness_register_cron(&H, &allow);
  harness_run(&H);
  ck_assert_str_eq(status_of("long-0000"), "waiting");
  harness_advance(&H, HOUR);
  ck_assert_str_eq(status_of("long-0000"), "waiting");
  ck_assert_int_eq(count(0, "skipped"), 1);
  ck_assert_int_eq(count(1, "skipped"), 0);
  ck_assert_str_eq(status_of("long-allow-0100"), "waiting");
  harness_advance(&H, 30 * MIN); /* 00:00's ends at 01:30 */
  harness_advance(&H, 30 * MIN); /* so 02:00 fires */
  ck_assert_str_eq(status_of("long-0000"), "complete");
  ck_assert_str_eq(status_of("long-0200"), "waiting");
}
END_TEST

/* Hourly instances of 90 minutes, down from 00:30 to 05:00: under the
 * default overlap: skip, each late tick of the catch-up still starts its
 * instance (a burst of late ticks is not an overlap), and so does 05:00,
 * the on-time tick right after the outage. */
static void long_flows_after_an_outage(int catch_up) {
  harness_register(&H, "nightly", nightly);
  harness_reopen(&H);
  duro_cron_spec spec = {.plugin = "p",
                         .schedule = "0 * * * *",
                         .workflow = "nightly",
                         .id = "long-{time}",
                         .catch_up = catch_up};
  harness_register_cron(&H, &spec);
  harness_run(&H);
  ck_assert_str_eq(status_of("long-0000"), "waiting");
  harness_advance(&H, 30 * MIN);
  harness_down_for(&H, 4 * HOUR + 30 * MIN);
  harness_run(&H);
  ck_assert_str_eq(status_of("long-0500"), "waiting");
  ck_assert_int_eq(count(0, "skipped"), 0);
}

START_TEST(catch_up_all_is_no_overlap) {
  long_flows_after_an_outage(DURO_CRON_CATCH_UP_ALL);
  ck_assert_str_eq(status_of("long-0100"), "waiting");
  ck_assert_str_eq(status_of("long-0400"), "waiting");
  ck_assert_int_eq(count(0, "complete"), 1 + 4 + 1);
  ck_assert_int_eq(count(0, "missed"), 0);
}
END_TEST

START_TEST(catch_up_latest_keeps_the_on_time_tick) {
  long_flows_after_an_outage(DURO_CRON_CATCH_UP_LATEST);
  ck_assert_str_eq(status_of("long-0400"), "waiting");
  ck_assert_int_eq(count(0, "complete"), 1 + 1 + 1);
  ck_assert_int_eq(count(0, "missed"), 3);
  /* 06:00 comes while 05:00's instance runs: that is an overlap */
  harness_advance(&H, HOUR);
  ck_assert_int_eq(count(0, "skipped"), 1);
}
END_TEST

/* ---- operating -------------------------------------------------------- */

START_TEST(list_shows_the_next_ticks) {
  add("30 9 * * 2-6", DURO_CRON_CATCH_UP_LATEST, 0); /* Mon-Fri 09:30 */
  json_t *o = listed(0);
  json_t *next = json_object_get(o, "next");
  ck_assert_uint_eq(json_array_size(next), 5);
  /* Thu 1, Fri 2, Mon 5, Tue 6, Wed 7 January */
  static const int days[] = {0, 1, 4, 5, 6};
  for (size_t i = 0; i < 5; i++)
    ck_assert_int_eq(json_integer_value(json_array_get(next, i)),
                     T0_MS + days[i] * DAY + 9 * HOUR + 30 * MIN);
  ck_assert(json_is_null(json_object_get(o, "last")));
  ck_assert_str_eq(json_string_value(json_object_get(o, "catch_up")), "latest");
  ck_assert_str_eq(json_string_value(json_object_get(o, "overlap")), "skip");
  json_decref(o);
}
END_TEST

START_TEST(fire_now_outside_the_schedule) {
  add("0 3 * * *", DURO_CRON_CATCH_UP_LATEST, 0);
  harness_advance(&H, 10 * MIN + 5000);
  json_t *out = NULL;
  ck_assert_int_eq(duro_cron_fire_now(H.e, "0 3 * * *", &out), 0);
  ck_assert_uint_eq(n_fired, 1);
  ck_assert_int_eq(fired_at[0], T0_MS + 10 * MIN); /* this minute */
  ck_assert_str_eq(
      json_string_value(json_object_get(json_array_get(out, 0), "state")),
      "complete");
  json_decref(out);
  ck_assert_int_eq(duro_cron_fire_now(H.e, "0 4 * * *", &out),
                   DURO_E_CRON_NOT_FOUND);
  /* not a tick: nothing recorded */
  ck_assert_int_eq(count(0, "complete"), 0);
}
END_TEST

/* A fire by hand with workers runs where ticks run: on a handler thread
 * of its own (not the caller's, an HTTP pool thread in the host), counted
 * running while it runs, and still recorded as no tick. */
static pthread_t by_hand_thread;
static json_int_t by_hand_running = -1;

static int on_tick_by_hand(const duro_scheduled_event *ev, duro_env *env) {
  (void)ev;
  (void)env;
  by_hand_thread = pthread_self();
  by_hand_running = count(0, "running");
  return 0;
}

START_TEST(fire_now_runs_where_ticks_run) {
  harness_close(&H);
  harness_open_workers(&H, 2);
  harness_start(&H);
  harness_set_cron_handler(&H, "p", on_tick_by_hand);
  add("0 3 1 1 *", DURO_CRON_CATCH_UP_NONE, 0);
  json_t *out = NULL;
  ck_assert_int_eq(duro_cron_fire_now(H.e, "0 3 1 1 *", &out), 0);
  ck_assert_str_eq(
      json_string_value(json_object_get(json_array_get(out, 0), "state")),
      "complete");
  json_decref(out);
  ck_assert(!pthread_equal(by_hand_thread, pthread_self()));
  ck_assert_int_eq(by_hand_running, 1);
  ck_assert_int_eq(count(0, "running"), 0);
  ck_assert_int_eq(count(0, "complete"), 0);
}
END_TEST

/* A reload's swap: a trigger kept keeps its ticks and takes the new
 * policies, a new one starts from now, a removed one fires no more; a set
 * with one bad trigger changes nothing. */
START_TEST(replace_keeps_adds_and_removes) {
  add("*/15 * * * *", DURO_CRON_CATCH_UP_LATEST, 0);
  harness_run(&H);
  harness_advance(&H, MIN); /* past 00:00, the hourly one's first tick */
  ck_assert_uint_eq(n_fired, 1);
  char err[256];
  duro_cron_spec two[] = {
      {.plugin = "p", .schedule = "*/15 * * * *", .overlap_allow = 1},
      {.plugin = "p", .schedule = "0 * * * *"}};
  ck_assert_int_eq(duro_cron_replace(H.e, two, 2, err, sizeof err), 0);
  json_t *o = listed(0);
  ck_assert_str_eq(json_string_value(json_object_get(o, "overlap")), "allow");
  json_decref(o);
  o = listed(1);
  ck_assert_str_eq(json_string_value(json_object_get(o, "schedule")),
                   "0 * * * *");
  json_decref(o);
  harness_run(&H); /* the kept trigger does not fire 00:00 again */
  ck_assert_uint_eq(n_fired, 1);
  harness_advance(&H, 14 * MIN);
  ck_assert_uint_eq(n_fired, 2);
  ck_assert_int_eq(count(0, "complete"), 2);

  duro_cron_spec one[] = {{.plugin = "p", .schedule = "0 * * * *"}};
  ck_assert_int_eq(duro_cron_replace(H.e, one, 1, err, sizeof err), 0);
  json_t *l = NULL;
  ck_assert_int_eq(duro_cron_list(H.e, &l), 0);
  ck_assert_uint_eq(json_array_size(l), 1);
  json_decref(l);
  harness_advance(&H, 45 * MIN); /* 01:00: the hourly one only */
  ck_assert_uint_eq(n_fired, 3);
  ck_assert_str_eq(fired_cron[2], "0 * * * *");
  ck_assert_int_eq(fired_at[2], T0_MS + HOUR);

  duro_cron_spec bad[] = {{.plugin = "p", .schedule = "*/5 * * * *"},
                          {.plugin = "p", .schedule = "61 * * * *"}};
  ck_assert_int_eq(duro_cron_replace(H.e, bad, 2, err, sizeof err),
                   DURO_E_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(err, "61 * * * *"));
  ck_assert_int_eq(duro_cron_list(H.e, &l), 0);
  ck_assert_uint_eq(json_array_size(l), 1);
  json_decref(l);
}
END_TEST

static void *replacer(void *arg) {
  (void)arg;
  duro_cron_spec a[] = {{.plugin = "p", .schedule = "* * * * *"},
                        {.plugin = "p", .schedule = "*/2 * * * *"}};
  duro_cron_spec b[] = {{.plugin = "p", .schedule = "*/2 * * * *"},
                        {.plugin = "p", .schedule = "*/3 * * * *"}};
  char err[256];
  for (int i = 0; i < 300; i++)
    ck_assert_int_eq(duro_cron_replace(H.e, i % 2 ? b : a, 2, err, sizeof err),
                     0);
  return NULL;
}

/* Swaps while the dispatch and the listing walk the triggers: each walk
 * holds the set it took (a freed trigger would be a sanitizer report). */
START_TEST(replace_while_dispatching) {
  add("* * * * *", DURO_CRON_CATCH_UP_LATEST, 0);
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, replacer, NULL), 0);
  for (int i = 0; i < 300; i++) {
    harness_advance(&H, MIN);
    json_t *l = NULL;
    ck_assert_int_eq(duro_cron_list(H.e, &l), 0);
    /* one whole set or the other: the registered one, a, or b */
    size_t n = json_array_size(l);
    ck_assert(n == 1 || n == 2);
    json_decref(l);
  }
  pthread_join(th, NULL);
  ck_assert_uint_gt(n_fired, 0);
  json_t *o = listed(0);
  ck_assert_str_eq(json_string_value(json_object_get(o, "schedule")),
                   "*/2 * * * *");
  json_decref(o);
  o = listed(1);
  ck_assert_str_eq(json_string_value(json_object_get(o, "schedule")),
                   "*/3 * * * *");
  json_decref(o);
}
END_TEST

START_TEST(bad_registrations_are_refused) {
  char err[256];
  duro_cron_spec bad[] = {
      {.plugin = "p", .schedule = "61 * * * *"},
      {.plugin = "p", .schedule = "0 9 * * 0"},
      {.plugin = "p", .schedule = "* * * * *", .timezone = "Mars/Olympus"},
      {.plugin = "p",
       .schedule = "* * * * *",
       .workflow = "w",
       .id = "x-{month}"},
      {.plugin = "p", .schedule = "* * * * *", .workflow = "w", .id = "a b"},
      {.plugin = "p", .schedule = "0 0 30 2 *"},
  };
  static const char *const why[] = {"out of range", "1 = Sunday",
                                    "Mars/Olympus", "x-{month}",
                                    "a b",          "never fires"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ck_assert_int_eq(duro_cron_register(H.e, &bad[i], err, sizeof err),
                     DURO_E_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err, why[i]), "%zu: %s", i, err);
  }
  json_t *l = NULL;
  ck_assert_int_eq(duro_cron_list(H.e, &l), 0);
  ck_assert_uint_eq(json_array_size(l), 0);
  json_decref(l);
}
END_TEST

START_TEST(id_templates) {
  char out[128];
  int64_t t = T0_MS + 3 * HOUR + 5 * MIN;
  ck_assert_int_eq(cron_expand_id("n-{date}", t, NULL, out, sizeof out), 0);
  ck_assert_str_eq(out, "n-2026-01-01");
  ck_assert_int_eq(
      cron_expand_id("{datetime}.{time}", t, NULL, out, sizeof out), 0);
  ck_assert_str_eq(out, "2026-01-01T03:05.0305");
  ck_assert_int_eq(cron_expand_id("{ts}", t, NULL, out, sizeof out), 0);
  ck_assert_int_eq(strtoll(out, NULL, 10), t);
  ck_assert_int_eq(
      cron_expand_id("{date}", t, "America/New_York", out, sizeof out), 0);
  ck_assert_str_eq(out, "2025-12-31");
  ck_assert_int_eq(cron_expand_id("{nope}", t, NULL, out, sizeof out), -1);
  ck_assert_int_eq(cron_expand_id("{date", t, NULL, out, sizeof out), -1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cron");
  TCase *tc = tcase_create("triggers");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, fires_at_its_ticks);
  tcase_add_test(tc, failing_handler_is_recorded);
  tcase_add_test(tc, nothing_twice_across_a_restart);
  tcase_add_test(tc, crash_after_a_fire_fires_nothing_twice);
  tcase_add_test(tc, missed_ticks_catch_up_none);
  tcase_add_test(tc, missed_ticks_catch_up_latest);
  tcase_add_test(tc, missed_ticks_catch_up_all_capped);
  tcase_add_test(tc, many_missed_ticks_are_counted);
  tcase_add_test(tc, a_stall_is_like_a_stop);
  tcase_add_test(tc, a_week_down_catches_up_to_the_cap);
  tcase_add_test(tc, old_ticks_are_swept_counts_stay);
  tcase_add_test(tc, no_code_creates_one_instance_per_tick);
  tcase_add_test(tc, no_code_params_reach_the_instance);
  tcase_add_test(tc, ids_use_the_trigger_zone);
  tcase_add_test(tc, overlap_skip_and_allow);
  tcase_add_test(tc, catch_up_all_is_no_overlap);
  tcase_add_test(tc, catch_up_latest_keeps_the_on_time_tick);
  tcase_add_test(tc, list_shows_the_next_ticks);
  tcase_add_test(tc, replace_keeps_adds_and_removes);
  tcase_add_test(tc, replace_while_dispatching);
  tcase_add_test(tc, fire_now_outside_the_schedule);
  tcase_add_test(tc, fire_now_runs_where_ticks_run);
  tcase_add_test(tc, bad_registrations_are_refused);
  tcase_add_test(tc, id_templates);
  suite_add_tcase(s, tc);
  return suite_run(s);
}
