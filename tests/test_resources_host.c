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
 *    good with step.unknown_resource, its callback never run. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_run.h"
#include "http_client.h"
#include "proc.h"

#ifndef METERED_PLUGIN
#error "build with -DMETERED_PLUGIN=\"<path of libmetered.so>\""
#endif

#define WAIT_MS 60000

static void start_metered(host_run *h, const char *name) {
  char db[400];
  snprintf(db, sizeof db, "%s/var/%s.db", proc_tmp_dir, name);
  host_init(h, name);
  h->plugin_keys = "workers: 1\n    concurrency: 8";
  h->sections = "resources:\n"
                "  - { name: payments, concurrency: 2 }\n";
  host_write_config(h, db, "{ workers: 4 }", "metered", METERED_PLUGIN,
                    "      - { name: charge, binding: CHARGE, "
                    "class_name: Charge }\n"
                    "      - { name: refund, binding: REFUND, "
                    "class_name: Refund }\n"
                    "      - { name: lost, binding: LOST, "
                    "class_name: Lost }\n");
  host_start(h);
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

int main(void) {
  Suite *s = suite_create("resources_host");
  TCase *tc = tcase_create("resources_host");
  proc_fixtures(tc, "duro-resources");
  tcase_set_timeout(tc, 150);
  tcase_add_test(tc, a_resource_bounds_callbacks_in_a_worker);
  tcase_add_test(tc, an_undeclared_resource_fails_the_step);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
