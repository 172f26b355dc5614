/* test_keys_host.c — a key rotation as an operator runs it, on a real
 * `duro run` (DURO_BIN, tests/host_run.h) of the order-flow example
 * (ORDERS_PLUGIN):
 *
 *  - without storage.encryption, POST /storage/keys/rotate is 409 keys.none and
 *    `duro keys list` says values are stored in the clear;
 *  - orders made under key k1 wait for their review; the host restarted
 *    with k2 active and k1 kept: `duro keys count` finds values under k1,
 *    `duro keys rotate` follows the rotation to its end (GET /storage/keys
 * shows it done, with what it rewrote), and a count then finds none under k1;
 *  - the host restarted with k2 alone: every order reads in the clear
 *    and one completes on its review. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_run.h"
#include "http_client.h"
#include "proc.h"

#ifndef ORDERS_PLUGIN
#error "build with -DORDERS_PLUGIN=\"<path of liborders.so>\""
#endif

#define WF "order-flow"
#define ORDERS 20
#define SETTLE_MS 60000

/* Writes H's config: the journal in the case's directory, `encryption`
 * (YAML lines under storage:, or "") and the order-flow example. */
static void write_config(host_run *H, const char *encryption) {
  FILE *f = fopen(H->config, "w");
  ck_assert_msg(f != NULL, "%s: %s", H->config, strerror(errno));
  fprintf(f,
          "storage:\n"
          "  path: %s/var/duro.db\n"
          "  synchronous: normal\n"
          "%s"
          "http: { listen: \"127.0.0.1:0\" }\n"
          "engine: { workers: 2 }\n"
          "plugins:\n"
          "  - name: orders\n"
          "    path: %s\n"
          "    workflows:\n"
          "      - { name: order-flow, binding: ORDER_FLOW,"
          " class_name: OrderFlow }\n",
          proc_tmp_dir, encryption, ORDERS_PLUGIN);
  ck_assert(fclose(f) == 0);
}

static void start(host_run *H, const char *encryption) {
  host_init(H, "keys");
  write_config(H, encryption);
  host_start(H);
}

/* `duro keys VERB`: its exit code must be `want`; its output (caller
 * frees). */
static char *keys_cli(const host_run *H, const char *verb, int want) {
  const char *const args[] = {"keys", verb, NULL};
  char *out = NULL;
  int rc = host_cli_verb(H, args, &out);
  ck_assert_msg(rc == want, "duro keys %s: exit %d, expected %d:\n%s", verb, rc,
                want, out ? out : "");
  return out;
}

#define K1_ONLY                                                                \
  "  encryption:\n"                                                            \
  "    keys: [{ id: k1, key_env: DURO_TEST_K1 }]\n"                            \
  "    active: k1\n"
#define K1_K2                                                                  \
  "  encryption:\n"                                                            \
  "    keys: [{ id: k1, key_env: DURO_TEST_K1 },"                              \
  " { id: k2, key_env: DURO_TEST_K2 }]\n"                                      \
  "    active: k2\n"
#define K2_ONLY                                                                \
  "  encryption:\n"                                                            \
  "    keys: [{ id: k2, key_env: DURO_TEST_K2 }]\n"                            \
  "    active: k2\n"

START_TEST(rotate_then_drop_the_old_key) {
  /* the processes the host starts inherit the keys' variables */
  setenv("DURO_TEST_K1",
         "1111111111111111111111111111111111111111111111111111111111111111", 1);
  setenv("DURO_TEST_K2",
         "2222222222222222222222222222222222222222222222222222222222222222", 1);
  host_run H;
  start(&H, "");
  http_resp r;
  host_request(&H, &r, "POST", "/storage/keys/rotate", NULL);
  ck_assert_int_eq(r.status, 409);
  ck_assert_str_eq(jstr(r.json, "error.code"), "keys.none");
  http_resp_free(&r);
  char *out = keys_cli(&H, "list", 0);
  assert_contains(out, "values are stored in the clear");
  free(out);
  host_stop(&H, proc_now_ms() + 20000, 0);

  start(&H, K1_ONLY);
  char body[256], path[128];
  for (int i = 0; i < ORDERS; i++) {
    snprintf(body, sizeof body,
             "{\"id\":\"o%d\",\"params\":{\"orderId\":\"o%d\","
             "\"email\":\"secret-%d@example.com\",\"amount\":5,"
             "\"graceSeconds\":0}}",
             i, i, i);
    host_request(&H, &r, "POST", "/workflows/" WF "/instances", body);
    ck_assert_msg(r.status == 201 || r.status == 200, "%ld %s", r.status,
                  r.body);
    http_resp_free(&r);
  }
  for (int i = 0; i < ORDERS; i++) {
    char id[16];
    snprintf(id, sizeof id, "o%d", i);
    json_decref(
        host_wait_status(&H, WF, id, "waiting", proc_now_ms() + SETTLE_MS));
  }
  host_stop(&H, proc_now_ms() + 20000, 0);

  start(&H, K1_K2);
  out = keys_cli(&H, "count", 0);
  assert_contains(out, "count, done");
  assert_contains(out, "under k1: ");
  ck_assert_ptr_null(strstr(out, "under k2"));
  free(out);
  out = keys_cli(&H, "rotate", 0);
  assert_contains(out, "rotation to k2, done");
  assert_contains(out, "0 left unopened");
  free(out);
  host_request(&H, &r, "GET", "/storage/keys", NULL);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(jstr(r.json, "active"), "k2");
  ck_assert_str_eq(jstr(r.json, "run.kind"), "rotation");
  ck_assert_str_eq(jstr(r.json, "run.state"), "done");
  ck_assert_int_ge(json_integer_value(jget(r.json, "run.rewritten")),
                   ORDERS * 2); /* params and more, of every order */
  http_resp_free(&r);
  out = keys_cli(&H, "count", 0);
  ck_assert_ptr_null(strstr(out, "under k1"));
  assert_contains(out, "under k2: ");
  assert_contains(out, "in the clear: 0");
  free(out);
  out = keys_cli(&H, "list", 0);
  assert_contains(out, "k2  (active)");
  free(out);
  host_stop(&H, proc_now_ms() + 20000, 0);

  /* k1 gone: everything reads */
  start(&H, K2_ONLY);
  for (int i = 0; i < ORDERS; i++) {
    char id[16], email[64];
    snprintf(id, sizeof id, "o%d", i);
    snprintf(email, sizeof email, "secret-%d@example.com", i);
    json_t *d = host_describe(&H, WF, id);
    ck_assert_str_eq(jstr(d, "params.email"), email);
    json_decref(d);
  }
  snprintf(path, sizeof path, "/workflows/" WF "/instances/o0/events/approval");
  host_request(&H, &r, "POST", path, "{\"approved\":true}");
  ck_assert_msg(r.status == 200 || r.status == 202, "%ld %s", r.status, r.body);
  http_resp_free(&r);
  json_decref(
      host_wait_status(&H, WF, "o0", "complete", proc_now_ms() + SETTLE_MS));
  host_stop(&H, proc_now_ms() + 20000, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("keys_host");
  TCase *tc = tcase_create("keys_host");
  proc_fixtures(tc, "duro-keys");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, rotate_then_drop_the_old_key);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
