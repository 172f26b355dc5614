/* template_test.c — tests of the template's workflow, written with duro's
 * test kit (duro-test.h): the plugin runs in this process on a virtual
 * clock, so its 10-second sleep takes no time, and a crash at every step
 * boundary checks that it keeps duro.h's rules.  `make test` builds and
 * runs it; each check that fails prints the instance's journal and
 * aborts.  Copy a block to test a path of your own. */
#include <stdio.h>

#include "duro-test.h"

/* Tests that write step callbacks of their own (the mock below) call
 * duro.h's functions: this binds them to the kit. */
DURO_TEST_API;

/* "start" reads the clock, so each run returns another time: pinned
 * here, the output is known and a run again after a crash returns the
 * same (the crash runs compare them). */
static int fixed_start(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_result(a, "{\"startedAt\":1767225600}");
}

int main(int argc, char **argv) {
  const char *plugin = argc > 1 ? argv[1] : "./libtemplate.so";
  duro_test *t = duro_test_open();
  if (duro_test_load(t, plugin, "hello", "Hello", NULL) != 0) {
    fprintf(stderr, "%s\n", duro_test_error_text(t));
    return 1;
  }
  duro_test_mock_fn(t, "hello", "start", fixed_start, NULL);

  /* The path: start, a 10-second rest, finish. */
  duro_test_create(t, "hello", "h1", "{\"name\":\"Ada\"}");
  duro_test_run(t);
  DURO_TEST_ASSERT_STATUS(t, "hello", "h1", "waiting"); /* resting */
  duro_test_advance(t, "10 seconds");
  DURO_TEST_ASSERT_STATUS(t, "hello", "h1", "complete");
  DURO_TEST_ASSERT_ATTEMPTS(t, "hello", "h1", "finish#1", 1);
  const char *out = duro_test_output(t, "hello", "h1");
  printf("template_test: output %s\n", out);

  /* A crash at every step boundary: the same output every time, no
   * completed step run again, the same steps on every replay. */
  duro_test_crash_report r;
  size_t n = 0;
  if (duro_test_crash_everywhere(t, "hello", "{\"name\":\"Ada\"}", NULL, &n,
                                 &r) != 0) {
    fprintf(stderr, "template_test: a crash at boundary %zu (%s): %s\n",
            r.boundary, r.where, r.message);
    return 1;
  }
  printf("template_test: %zu boundaries, each crashed and recovered\n", n);
  duro_test_close(t);
  printf("template_test: all passed\n");
  return 0;
}
