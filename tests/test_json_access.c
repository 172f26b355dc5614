/* test_json_access.c — duro.h's JSON accessors: json_access.c's reads at
 * a JSON pointer and its pack format, then the API members an in-process
 * workflow calls (the engine's table, harness.h): what they return lives
 * in the activation's arena across replays, in a cron handler's scope, and
 * is NULL outside any. */
#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json_access.h"
#include "suite_run.h"
#include "trigger.h"

static const char *doc =
    "{\"a\":{\"b~c\":\"tilde\",\"d/e\":\"slash\"},\"n\":[10,-3,2.5],"
    "\"big\":9223372036854775807,"
    "\"t\":true,\"f\":false,\"z\":null,\"s\":\"q\\\"\\u00e9\",\"e\":1e2}";

START_TEST(reads_at_pointers) {
  char *s = json_access_string(doc, "/a/b~0c");
  ck_assert_str_eq(s, "tilde");
  free(s);
  s = json_access_string(doc, "/a/d~1e");
  ck_assert_str_eq(s, "slash");
  free(s);
  s = json_access_string(doc, "/s");
  ck_assert_str_eq(s, "q\"\xc3\xa9");
  free(s);
  /* absent, of another type, a bad pointer, not JSON: NULL */
  ck_assert_ptr_null(json_access_string(doc, "/missing"));
  ck_assert_ptr_null(json_access_string(doc, "/t"));
  ck_assert_ptr_null(json_access_string(doc, "a"));
  ck_assert_ptr_null(json_access_string("{\"a\":", "/a"));
  ck_assert_ptr_null(json_access_string(NULL, "/a"));

  int64_t i = 7;
  ck_assert_int_eq(json_access_integer(doc, "/n/1", &i), 1);
  ck_assert_int_eq(i, -3);
  ck_assert_int_eq(json_access_integer(doc, "/big", &i), 1);
  ck_assert_int_eq(i, INT64_MAX);
  i = 7;
  ck_assert_int_eq(json_access_integer(doc, "/n/2", &i), 0); /* 2.5 */
  ck_assert_int_eq(json_access_integer(doc, "/e", &i), 0);   /* 1e2 */
  ck_assert_int_eq(json_access_integer(doc, "/n/3", &i), 0); /* past */
  ck_assert_int_eq(json_access_integer(doc, "/n/01", &i), 0);
  /* 2^63 is past what jansson reads: the whole text is refused */
  ck_assert_int_eq(json_access_integer("{\"o\":9223372036854775808}", "/o", &i),
                   0);
  ck_assert_int_eq(i, 7);

  double d = 0;
  ck_assert_int_eq(json_access_number(doc, "/n/2", &d), 1);
  ck_assert(d == 2.5);
  ck_assert_int_eq(json_access_number(doc, "/n/0", &d), 1);
  ck_assert(d == 10);
  ck_assert_int_eq(json_access_number(doc, "/s", &d), 0);

  int b = 5;
  ck_assert_int_eq(json_access_boolean(doc, "/t", &b), 1);
  ck_assert_int_eq(b, 1);
  ck_assert_int_eq(json_access_boolean(doc, "/f", &b), 1);
  ck_assert_int_eq(b, 0);
  b = 5;
  ck_assert_int_eq(json_access_boolean(doc, "/z", &b), 0);
  ck_assert_int_eq(b, 5);

  s = json_access_value(doc, "/a");
  ck_assert_str_eq(s, "{\"b~c\":\"tilde\",\"d/e\":\"slash\"}");
  free(s);
  s = json_access_value(doc, "/z");
  ck_assert_str_eq(s, "null");
  free(s);
  s = json_access_value("[1, 2]", "");
  ck_assert_str_eq(s, "[1,2]");
  free(s);
  ck_assert_ptr_null(json_access_value(doc, "/nothing"));
}
END_TEST

static char *pack(char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = json_access_vpack(fmt, ap, err, len);
  va_end(ap);
  return s;
}

START_TEST(packs_a_format) {
  char err[256];
  char *s =
      pack(err, sizeof err, "{s:s, s:i, s:I, s:f, s:b, s:n, s:[s s]}", "name",
           "he said \"hi\"\n", "i", -4, "I", (int64_t)INT64_MIN, "f", 19.99,
           "b", 3, "nothing", "list", "x", (const char *)NULL);
  ck_assert_msg(s != NULL, "%s", err);
  ck_assert_str_eq(s, "{\"name\":\"he said \\\"hi\\\"\\n\",\"i\":-4,"
                      "\"I\":-9223372036854775808,\"f\":19.99,\"b\":true,"
                      "\"nothing\":null,\"list\":[\"x\",null]}");
  free(s);
  /* j: JSON text put in as it is parsed; a double that needs 17 digits
   * keeps them */
  s = pack(err, sizeof err, "[j, j, f]", "{\"k\": [1, 2.5]}",
           (const char *)NULL, 0.1 + 0.2);
  ck_assert_msg(s != NULL, "%s", err);
  ck_assert_str_eq(s, "[{\"k\":[1,2.5]},null,0.30000000000000004]");
  free(s);
  s = pack(err, sizeof err, "s", "alone");
  ck_assert_str_eq(s, "\"alone\"");
  free(s);

  /* what is wrong, and where */
  ck_assert_ptr_null(pack(err, sizeof err, "{s:s", "k", "v"));
  ck_assert_ptr_nonnull(strstr(err, "unterminated '{'"));
  ck_assert_ptr_null(pack(err, sizeof err, "{i:s}", 1, "v"));
  ck_assert_ptr_nonnull(strstr(err, "expected 's' for a key"));
  ck_assert_ptr_null(pack(err, sizeof err, "[s, x]", "v"));
  ck_assert_ptr_nonnull(strstr(err, "an unknown conversion at offset 4"));
  ck_assert_ptr_null(pack(err, sizeof err, "j", "{nope"));
  ck_assert_ptr_nonnull(strstr(err, "'j' given text that is not JSON"));
  ck_assert_ptr_null(pack(err, sizeof err, "s", "\xff\xfe"));
  ck_assert_ptr_nonnull(strstr(err, "not UTF-8"));
  ck_assert_ptr_null(pack(err, sizeof err, "f", 1.0 / 0.0));
  ck_assert_ptr_nonnull(strstr(err, "NaN or infinite"));
  ck_assert_ptr_null(pack(err, sizeof err, "s s", "a", "b"));
  ck_assert_ptr_nonnull(strstr(err, "text after the value"));
  ck_assert_ptr_null(pack(err, sizeof err, "{s:s}", (const char *)NULL, "v"));
  ck_assert_ptr_nonnull(strstr(err, "a NULL key"));
  ck_assert_ptr_null(pack(err, sizeof err, ""));
  ck_assert_ptr_nonnull(strstr(err, "ends before its value"));
}
END_TEST

/* ---- through the engine's API table ---- */

static harness H;

static void setup(void) { harness_open(&H); }
static void teardown(void) { harness_close(&H); }

/* A callback builds its result from what run() read out of the params. */
static int greet(duro_attempt *a, void *arg) {
  const char *name = arg;
  return duro_attempt_result(
      a, duro_json_pack("{s:s, s:I}", "greeting", name, "attempt",
                        (int64_t)duro_attempt_number(a)));
}

static duro_rc greeter(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  const char *name = duro_json_string(ev->params, "/who/name");
  int64_t times = 0;
  duro_json_integer(ev->params, "/times", &times);
  if (!name)
    return duro_fail(step, "params.who.name must be a string");
  const char *hello;
  DURO_TRY(duro_do(step, "greet", NULL, greet, (void *)name, &hello));
  /* across the sleep's suspension the activation ends: the next one
   * reads everything again, its strings in its own arena */
  DURO_TRY(duro_sleep(step, "rest", "1 hour"));
  const char *greeting = duro_json_string(hello, "/greeting");
  return duro_set_output(step,
                         duro_json_pack("{s:s, s:I, s:j}", "again", greeting,
                                        "times", times, "step", hello));
}

START_TEST(engine_activation_owns_what_they_return) {
  harness_register(&H, "greeter", greeter);
  harness_start(&H);
  ck_assert_int_eq(duro_instance_create(H.e, "greeter", "g1",
                                        "{\"who\":{\"name\":\"Ada \\\"L\\\"\"},"
                                        "\"times\":3}",
                                        -1, NULL),
                   0);
  ck_assert_int_eq(duro_instance_create(H.e, "greeter", "g2",
                                        "{\"who\":{\"name\":7}}", -1, NULL),
                   0);
  harness_run(&H);
  harness_advance(&H, 3600 * 1000);
  json_t *d = harness_describe(&H, "greeter", "g1");
  ck_assert_str_eq(json_string_value(json_object_get(d, "status")), "complete");
  json_t *out = json_object_get(d, "output");
  ck_assert_str_eq(json_string_value(json_object_get(out, "again")),
                   "Ada \"L\"");
  ck_assert_int_eq(json_integer_value(json_object_get(out, "times")), 3);
  json_t *step = json_object_get(out, "step");
  ck_assert_str_eq(json_string_value(json_object_get(step, "greeting")),
                   "Ada \"L\"");
  ck_assert_int_eq(json_integer_value(json_object_get(step, "attempt")), 1);
  json_decref(d);
  ck_assert_str_eq(harness_status(&H, "greeter", "g2"), "errored");

  /* outside run(), a callback or a handler: nothing owns it, NULL */
  ck_assert_ptr_null(duro_json_string("{\"a\":\"b\"}", "/a"));
  ck_assert_ptr_null(duro_json_pack("{s:s}", "a", "b"));
  int64_t v = 0;
  ck_assert_int_eq(duro_json_integer("{\"a\":2}", "/a", &v), 1);
  ck_assert_int_eq(v, 2);
}
END_TEST

/* A cron handler packs the params of the instance it starts: its strings
 * live in the handler's scope until it returns. */
static int on_tick(const duro_scheduled_event *ev, duro_env *env) {
  duro_workflow *wf = duro_env_workflow(env, "GREETER");
  const char *params = duro_json_pack("{s:{s:s}, s:I}", "who", "name", ev->cron,
                                      "times", ev->scheduled_ms);
  if (!wf || !params)
    return 1;
  return duro_workflow_create(wf, "from-cron", params);
}

START_TEST(cron_handler_scope_owns_what_they_return) {
  harness_register_binding(&H, "greeter", "GREETER", greeter);
  static const duro_cron_spec spec = {.plugin = "p", .schedule = "0 * * * *"};
  harness_register_cron(&H, &spec);
  harness_set_cron_handler(&H, "p", on_tick);
  harness_start(&H);
  harness_advance(&H, 3600 * 1000);
  harness_advance(&H, 3600 * 1000);
  json_t *d = harness_describe(&H, "greeter", "from-cron");
  json_t *out = json_object_get(d, "output");
  ck_assert_msg(out && json_is_object(out), "status %s",
                json_string_value(json_object_get(d, "status")));
  ck_assert_str_eq(json_string_value(json_object_get(out, "again")),
                   "0 * * * *");
  ck_assert_int_eq(json_integer_value(json_object_get(out, "times")),
                   T0_MS + 3600 * 1000);
  json_decref(d);
}
END_TEST

static Suite *json_access_suite(void) {
  Suite *s = suite_create("json_access");
  TCase *tc = tcase_create("json_access");
  tcase_add_test(tc, reads_at_pointers);
  tcase_add_test(tc, packs_a_format);
  suite_add_tcase(s, tc);
  tc = tcase_create("api");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, engine_activation_owns_what_they_return);
  tcase_add_test(tc, cron_handler_scope_owns_what_they_return);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(json_access_suite()); }
