/* test_resources_host.c — shared resources under a real `duro run`
 * (DURO_BIN) of the metered plugin (METERED_PLUGIN), its code in one
 * worker process that may run 8 callbacks at once:
 *
 *  - bounded: twenty instances of two workflows whose steps name
 *    "payments" (concurrency 2 in the config's `resources:`) all
 *    complete, and no callback ever saw a third inside with it (the
 *    plugin counts them in its process and returns the most it saw),
 *    though it saw two: the resource, not the plugin's bound, held them;
 *  - undeclared: a step naming a resource the config lacks fails for
 *    good with step.unknown_resource, its callback never run;
 *  - killed: "payments" of concurrency 1 held by a step inside its
 *    callback, another instance waiting for it; the engine killed -9 and
 *    restarted by the supervisor: nothing stays held (the attempt died
 *    with it), the waiter is woken at the start, and once the step lets
 *    go both complete and /metrics shows none held or waiting. */
#include <check.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_run.h"
#include "http_client.h"
#include "proc.h"

#ifndef METERED_PLUGIN
#error "build with -DMETERED_PLUGIN=\"<path of libmetered.so>\""
#endif

#define WAIT_MS 60000

static char hold_path[600];

static void start_metered_with(host_run *h, const char *name,
                               const char *resources) {
  char db[400];
  snprintf(db, sizeof db, "%s/var/%s.db", proc_tmp_dir, name);
  snprintf(hold_path, sizeof hold_path, "%s/%s.hold", proc_tmp_dir, name);
  host_init(h, name);
  host_setenv(h, "METERED_HOLD", hold_path);
  h->plugin_keys = "workers: 1\n    concurrency: 8";
  h->sections = resources;
  host_write_config(h, db, "{ workers: 4 }", "metered", METERED_PLUGIN,
                    "      - { name: charge, binding: CHARGE, "
                    "class_name: Charge }\n"
                    "      - { name: refund, binding: REFUND, "
                    "class_name: Refund }\n"
                    "      - { name: lost, binding: LOST, "
                    "class_name: Lost }\n"
                    "      - { name: hold, binding: HOLD, "
                    "class_name: Hold }\n");
  host_start(h);
}

static void start_metered(host_run *h, const char *name) {
  start_metered_with(h, name,
                     "resources:\n"
                     "  - { name: payments, concurrency: 2 }\n");
}

static long metric(const host_run *h, const char *series) {
  http_resp r;
  host_request(h, &r, "GET", "/metrics", NULL);
  const char *m = r.body ? strstr(r.body, series) : NULL;
  long v = m ? atol(m + strlen(series)) : -1;
  http_resp_free(&r);
  return v;
}

static void create(host_run *h, const char *wf, const char *id) {
  char path[128], body[128];
  snprintf(path, sizeof path, "/workflows/%s/instances", wf);
  snprintf(body, sizeof body, "{\"id\":\"%s\"}", id);
  http_resp r;
  host_request(h, &r, "POST", path, body);
  ck_assert_msg(r.status == 201, "create %s/%s: %ld %s", wf, id, r.status,
                r.body ? r.body : "");
  http_resp_free(&r);
}

START_TEST(a_resource_bounds_callbacks_in_a_worker) {
  host_run h;
  start_metered(&h, "bounded");
  enum { PER_WF = 10 };
  char id[32];
  for (int i = 0; i < PER_WF; i++) {
    snprintf(id, sizeof id, "c%d", i);
    create(&h, "charge", id);
    snprintf(id, sizeof id, "r%d", i);
    create(&h, "refund", id);
  }
  long most = 0;
  for (int i = 0; i < 2 * PER_WF; i++) {
    const char *wf = i % 2 ? "refund" : "charge";
    snprintf(id, sizeof id, "%c%d", wf[0], i / 2);
    json_t *d =
        host_wait_status(&h, wf, id, "complete", proc_now_ms() + WAIT_MS);
    long seen = (long)json_integer_value(json_object_get(d, "output"));
    ck_assert_msg(seen >= 1 && seen <= 2,
                  "%s/%s saw %ld callbacks inside at once", wf, id, seen);
    if (seen > most)
      most = seen;
    json_decref(d);
  }
  ck_assert_int_eq(most, 2);
  /* nothing held or waiting once they all ended */
  http_resp r;
  host_request(&h, &r, "GET", "/metrics", NULL);
  assert_contains(r.body, "duro_resource_running{resource=\"payments\"} 0\n");
  assert_contains(r.body, "duro_resource_waiting{resource=\"payments\"} 0\n");
  http_resp_free(&r);
  host_stop(&h, proc_now_ms() + 10000, 0);
}
END_TEST

START_TEST(an_undeclared_resource_fails_the_step) {
  host_run h;
  start_metered(&h, "undeclared");
  create(&h, "lost", "l1");
  json_t *d =
      host_wait_status(&h, "lost", "l1", "errored", proc_now_ms() + WAIT_MS);
  json_t *err = json_object_get(d, "error");
  ck_assert_str_eq(json_string_value(json_object_get(err, "name")),
                   "step.unknown_resource");
  const char *msg = json_string_value(json_object_get(err, "message"));
  ck_assert_ptr_nonnull(strstr(msg, "\"nosuch\""));
  json_decref(d);
  host_stop(&h, proc_now_ms() + 10000, 0);
}
END_TEST

START_TEST(a_kill_holds_nothing) {
  host_run h;
  start_metered_with(&h, "killed",
                     "resources:\n"
                     "  - { name: payments, concurrency: 1 }\n");
  FILE *f = fopen(hold_path, "w");
  ck_assert_ptr_nonnull(f);
  fclose(f);
  create(&h, "hold", "h1");
  json_t *d =
      host_wait_status(&h, "hold", "h1", "running", proc_now_ms() + WAIT_MS);
  json_decref(d);
  for (int64_t until = proc_now_ms() + WAIT_MS;
       metric(&h, "duro_resource_running{resource=\"payments\"} ") != 1;
       proc_sleep_ms(20))
    ck_assert_msg(proc_now_ms() < until, "h1's step never went inside");
  create(&h, "charge", "c1");
  d = host_wait_status(&h, "charge", "c1", "waiting", proc_now_ms() + WAIT_MS);
  ck_assert_str_eq(json_string_value(json_object_get(d, "wait_type")),
                   "resource");
  json_decref(d);

  /* kill -9, the supervisor starts another engine */
  pid_t engine = host_last_engine(&h);
  ck_assert_int_eq(kill(engine, SIGKILL), 0);
  ck_assert(host_wait_gone(engine, 10000));
  for (int64_t until = proc_now_ms() + WAIT_MS;; proc_sleep_ms(50)) {
    http_resp r = {0};
    int up = host_request_try(&h, &r, "GET", "/healthz", NULL) == 0 &&
             r.status == 200;
    http_resp_free(&r);
    if (up)
      break;
    ck_assert_msg(proc_now_ms() < until, "the engine did not come back");
  }
  unlink(hold_path); /* h1's next attempt goes through */
  d = host_wait_status(&h, "hold", "h1", "complete", proc_now_ms() + WAIT_MS);
  json_decref(d);
  d = host_wait_status(&h, "charge", "c1", "complete", proc_now_ms() + WAIT_MS);
  json_decref(d);
  ck_assert_int_eq(metric(&h, "duro_resource_running{resource=\"payments\"} "),
                   0);
  ck_assert_int_eq(metric(&h, "duro_resource_waiting{resource=\"payments\"} "),
                   0);
  host_stop(&h, proc_now_ms() + 10000, 1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("resources_host");
  TCase *tc = tcase_create("resources_host");
  proc_fixtures(tc, "duro-resources");
  tcase_set_timeout(tc, 150);
  tcase_add_test(tc, a_resource_bounds_callbacks_in_a_worker);
  tcase_add_test(tc, an_undeclared_resource_fails_the_step);
  tcase_add_test(tc, a_kill_holds_nothing);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
