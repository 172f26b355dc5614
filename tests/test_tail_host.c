/* test_tail_host.c — tail handlers under a real `duro run` (DURO_BIN)
 * of the tailtap plugin (TAILTAP_PLUGIN), whose workflows it observes
 * itself (`tail_consumers: [tailtap]`) with its tail handler in a worker
 * process:
 *
 *  - items: an instance whose first attempt fails and one that errors
 *    give their activations' items, with the outcome, the status after
 *    each, the lines logged (by run() and by the step, with its key) and
 *    the failures, read from the file the handler writes;
 *  - contained: a handler that aborts its worker, and one that hangs
 *    past tail.timeout (its worker killed), each lose their batch
 *    (counted in /metrics); the host stays healthy, the instances they
 *    were about completed, and the next batch arrives, told how many
 *    items were lost. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_run.h"
#include "http_client.h"
#include "proc.h"

#ifndef TAILTAP_PLUGIN
#error "build with -DTAILTAP_PLUGIN=\"<path of libtailtap.so>\""
#endif

#define WAIT_MS 30000

static char out_path[600];

static void start_tailtap(host_run *h, const char *name) {
  char db[400];
  snprintf(db, sizeof db, "%s/var/%s.db", proc_tmp_dir, name);
  snprintf(out_path, sizeof out_path, "%s/%s.tail", proc_tmp_dir, name);
  host_init(h, name);
  host_setenv(h, "DURO_TAIL_OUT", out_path);
  h->plugin_keys = "tail_consumers: [tailtap]";
  h->sections = "tail: { max_batch_timeout: 100ms, timeout: 2s }\n";
  host_write_config(h, db, "{ workers: 2 }", "tailtap", TAILTAP_PLUGIN,
                    "      - { name: logged, binding: LOGGED, "
                    "class_name: Logged }\n");
  host_start(h);
}

static void create(host_run *h, const char *id, const char *params) {
  char body[256];
  snprintf(body, sizeof body, "{\"id\":\"%s\",\"params\":%s}", id, params);
  http_resp r;
  host_request(h, &r, "POST", "/workflows/logged/instances", body);
  ck_assert_msg(r.status == 201, "create %s: %ld %s", id, r.status,
                r.body ? r.body : "");
  http_resp_free(&r);
}

/* Every item the handler wrote so far, in order, and the dropped counts
 * its batches were told (summed). */
static json_t *items_written(uint64_t *told) {
  json_t *all = json_array();
  *told = 0;
  char *text = proc_slurp(out_path);
  for (char *line = text, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next)
      *next++ = '\0';
    unsigned long long n, dropped;
    int at = 0;
    if (sscanf(line, "%llu %llu %n", &n, &dropped, &at) != 2 || !at)
      continue;
    json_t *v = json_loads(line + at, 0, NULL);
    ck_assert_msg(json_is_array(v), "a batch not JSON: %s", line);
    ck_assert_uint_eq(json_array_size(v), n);
    json_array_extend(all, v);
    json_decref(v);
    *told += dropped;
  }
  free(text);
  return all;
}

/* The item of `id`'s activation that left it `status`, waited for. */
static json_t *item_of(const char *id, const char *status) {
  for (int64_t until = proc_now_ms() + WAIT_MS;; proc_sleep_ms(50)) {
    uint64_t told;
    json_t *all = items_written(&told);
    size_t i;
    json_t *it;
    json_array_foreach(all, i, it) {
      if (!strcmp(json_string_value(json_object_get(it, "instance")), id) &&
          !strcmp(json_string_value(json_object_get(it, "status")), status)) {
        json_incref(it);
        json_decref(all);
        return it;
      }
    }
    json_decref(all);
    ck_assert_msg(proc_now_ms() < until, "no item of %s ending %s", id, status);
  }
}

/* Whether one of `list`'s objects has `key` equal to `want`. */
static int has(const json_t *list, const char *key, const char *want) {
  size_t i;
  json_t *o;
  json_array_foreach(list, i, o) {
    const char *s = json_string_value(json_object_get(o, key));
    if (s && !strcmp(s, want))
      return 1;
  }
  return 0;
}

static long metric(const host_run *h, const char *series) {
  http_resp r;
  host_request(h, &r, "GET", "/metrics", NULL);
  const char *m = r.body ? strstr(r.body, series) : NULL;
  long v = m ? atol(m + strlen(series)) : -1;
  http_resp_free(&r);
  return v;
}

static void wait_metric(const host_run *h, const char *series, long want) {
  for (int64_t until = proc_now_ms() + WAIT_MS;; proc_sleep_ms(50)) {
    long v = metric(h, series);
    if (v >= want)
      return;
    ck_assert_msg(proc_now_ms() < until, "%s is %ld, not %ld", series + 1, v,
                  want);
  }
}

START_TEST(items_of_activations_in_a_worker) {
  host_run h;
  start_tailtap(&h, "items");
  create(&h, "ok1", "{\"flaky\":true}");
  create(&h, "e1", "{\"boom\":true}");

  json_t *first = item_of("ok1", "waiting"); /* its retry's back-off */
  ck_assert_str_eq(json_string_value(json_object_get(first, "outcome")), "ok");
  json_t *logs = json_object_get(first, "logs");
  ck_assert(has(logs, "message", "run of ok1"));
  ck_assert(has(logs, "message", "working, attempt 1"));
  ck_assert(has(logs, "step", "work#1"));
  ck_assert(has(json_object_get(first, "exceptions"), "message",
                "upstream timed out"));
  json_decref(first);

  json_t *done = item_of("ok1", "complete");
  ck_assert_str_eq(json_string_value(json_object_get(done, "outcome")), "ok");
  ck_assert(
      has(json_object_get(done, "logs"), "message", "working, attempt 2"));
  ck_assert_uint_eq(json_array_size(json_object_get(done, "exceptions")), 0);
  json_decref(done);

  json_t *err = item_of("e1", "errored");
  ck_assert_str_eq(json_string_value(json_object_get(err, "outcome")),
                   "exception");
  ck_assert(has(json_object_get(err, "exceptions"), "message",
                "boom: the card was refused"));
  ck_assert(has(json_object_get(err, "logs"), "level", "warn"));
  json_decref(err);

  ck_assert_int_ge(
      metric(&h, "\nduro_tail_items_delivered_total{consumer=\"tailtap\"} "),
      3);
  host_stop(&h, proc_now_ms() + 10000, 0);
}
END_TEST

START_TEST(a_crashing_or_hung_handler_is_contained) {
  host_run h;
  start_tailtap(&h, "contained");
  const char *failed =
      "\nduro_tail_batches_failed_total{consumer=\"tailtap\"} ";
  create(&h, "crash1", "{}");
  wait_metric(&h, failed, 1);
  json_decref(host_wait_status(&h, "logged", "crash1", "complete",
                               proc_now_ms() + WAIT_MS));
  create(&h, "after1", "{}");
  json_t *it = item_of("after1", "complete");
  json_decref(it);

  create(&h, "hang1", "{}");
  wait_metric(&h, failed, 2);
  host_wait_lines(&h, "ran past tail.timeout", 1, proc_now_ms() + WAIT_MS);
  create(&h, "after2", "{}");
  json_decref(item_of("after2", "complete"));

  /* what the two lost batches held was told to the batches after them */
  uint64_t told;
  json_t *all = items_written(&told);
  ck_assert_uint_ge(told, 2);
  ck_assert(!has(all, "instance", "crash1"));
  ck_assert(!has(all, "instance", "hang1"));
  json_decref(all);
  ck_assert_int_ge(
      metric(&h, "\nduro_tail_items_dropped_total{consumer=\"tailtap\"} "), 2);
  http_resp r;
  host_request(&h, &r, "GET", "/healthz", NULL);
  ck_assert_int_eq(r.status, 200);
  http_resp_free(&r);
  host_stop(&h, proc_now_ms() + 10000, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tail_host");
  TCase *tc = tcase_create("tail_host");
  proc_fixtures(tc, "duro-tail");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, items_of_activations_in_a_worker);
  tcase_add_test(tc, a_crashing_or_hung_handler_is_contained);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
