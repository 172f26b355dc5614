/* test_describe.c — `duro instances describe`'s report (host/cli/
 * describe.c) from the control plane's JSON, as a newcomer reads it:
 *
 *   value_cut_only_when_long   a value a little over its column is shown
 *                              whole; a long one is cut, saying where
 *   timed_out_wait_not_error   a waitForEvent whose timeout came (a branch
 *                              the workflow may take) reads "timed out",
 *                              not as an error
 *   wait_any_timed_out_or_waiting  the same for a waitAny; one waiting
 *                              says when it times out */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "describe.h"

/* The report of the instance whose one step is `step` (JSON). */
static char *report_of(const char *step) {
  char *text = NULL;
  size_t len = 0;
  char inst[4096];
  snprintf(inst, sizeof inst,
           "{\"id\":\"i1\",\"workflow\":\"wf\",\"status\":\"complete\","
           "\"params\":{},\"output\":null,\"error\":null,"
           "\"created_ms\":1000,\"started_ms\":1000,\"ended_ms\":9000,"
           "\"steps\":[%s],\"events\":[]}",
           step);
  json_error_t err;
  json_t *j = json_loads(inst, 0, &err);
  ck_assert_msg(j != NULL, "%s: %s", inst, err.text);
  FILE *out = open_memstream(&text, &len);
  describe_instance(out, j, 9000, 0);
  fclose(out);
  json_decref(j);
  return text;
}

/* A step "s" of `type` and `status` whose result is `result` (JSON). */
static char *step_with_result(const char *result) {
  char step[2048];
  snprintf(step, sizeof step,
           "{\"key\":\"s#1\",\"type\":\"do\",\"status\":\"complete\","
           "\"attempts\":[{\"number\":1,\"started_ms\":1000,"
           "\"ended_ms\":2000,\"error\":null}],\"started_ms\":1000,"
           "\"ended_ms\":2000,\"result\":%s,\"error\":null,"
           "\"wake_ms\":null}",
           result);
  return report_of(step);
}

START_TEST(value_cut_only_when_long) {
  /* 61 bytes in a 60-wide column: shown whole */
  char result[300];
  snprintf(result, sizeof result, "\"%059d\"", 7);
  char *text = step_with_result(result);
  ck_assert_msg(strstr(text, result) && !strstr(text, "cut at"), "%s", text);
  free(text);
  /* 202 bytes: cut at the column, saying so */
  snprintf(result, sizeof result, "\"%0200d\"", 7);
  text = step_with_result(result);
  ck_assert_msg(strstr(text, "(result cut at 59 of 202 bytes; --full shows "
                             "all)"),
                "%s", text);
  free(text);
}
END_TEST

START_TEST(timed_out_wait_not_error) {
  char *text = report_of(
      "{\"key\":\"review#1\",\"type\":\"waitForEvent\","
      "\"status\":\"errored\",\"attempts\":[],\"started_ms\":1000,"
      "\"ended_ms\":5000,\"result\":null,\"error\":{\"name\":"
      "\"TimeoutError\",\"message\":\"waitForEvent \\\"review\\\" timed out "
      "after 4s waiting for an event of type \\\"approval\\\"\"},"
      "\"wake_ms\":null}");
  const char *row = strstr(text, "  review#1 ");
  ck_assert_msg(row != NULL, "%s", text);
  ck_assert_msg(strstr(row, " timed out ") &&
                    strstr(row, "timed out after 4s waiting for an event of "
                                "type \"approval\"") &&
                    !strstr(row, "errored") && !strstr(row, "TimeoutError"),
                "%s", text);
  free(text);
}
END_TEST

/* The same for a waitAny at its deadline; one still waiting says when it
 * times out. */
START_TEST(wait_any_timed_out_or_waiting) {
  char *text = report_of(
      "{\"key\":\"review#1\",\"type\":\"waitAny\","
      "\"status\":\"errored\",\"attempts\":[],\"started_ms\":1000,"
      "\"ended_ms\":5000,\"result\":null,\"error\":{\"name\":"
      "\"TimeoutError\",\"message\":\"waitAny \\\"review#1\\\" timed out at "
      "its deadline 1970-01-01T00:00:05.000Z waiting for an event of type "
      "\\\"approve\\\" or \\\"reject\\\"\"},\"wake_ms\":null}");
  const char *row = strstr(text, "  review#1 ");
  ck_assert_msg(row != NULL, "%s", text);
  ck_assert_msg(strstr(row, " timed out ") &&
                    strstr(row, "waitAny \"review#1\" timed out at") &&
                    !strstr(row, "errored") && !strstr(row, "TimeoutError"),
                "%s", text);
  free(text);
  text = report_of("{\"key\":\"review#1\",\"type\":\"waitAny\","
                   "\"status\":\"waiting\",\"attempts\":[],"
                   "\"started_ms\":1000,\"ended_ms\":null,\"result\":null,"
                   "\"error\":null,\"wake_ms\":7200000}");
  row = strstr(text, "  review#1 ");
  ck_assert_msg(row && strstr(row, "times out 1970-01-01T02:00:00"), "%s",
                text);
  free(text);
}
END_TEST

int main(void) {
  Suite *s = suite_create("describe");
  TCase *tc = tcase_create("describe");
  tcase_add_test(tc, value_cut_only_when_long);
  tcase_add_test(tc, timed_out_wait_not_error);
  tcase_add_test(tc, wait_any_timed_out_or_waiting);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
