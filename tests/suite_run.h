/* suite_run.h — how every suite's main ends: run the suite (Check's fork
 * mode comes from CK_FORK, set by meson) and exit non-zero when a case
 * failed. */
#ifndef DURO_TEST_SUITE_RUN_H
#define DURO_TEST_SUITE_RUN_H

#include <check.h>
#include <stdlib.h>

static inline int suite_run(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
