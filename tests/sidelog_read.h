/* sidelog_read.h — what the suites read of the test plugins' side-effect
 * log (plugins/sidelog.h): its records, how many steps have one of a kind,
 * and the check that no completed step ran again.
 *
 * Failures are Check assertions: call from test cases. */
#ifndef DURO_TEST_SIDELOG_READ_H
#define DURO_TEST_SIDELOG_READ_H

#include <stddef.h>

typedef struct sidelog_rec {
  char kind[8], inst[32], token[40];
  int index;
} sidelog_rec;

/* The records of the log at `path` (malloc'ed, *n of them). */
sidelog_rec *sidelog_read(const char *path, size_t *n);

/* How many distinct steps (instance, index) have a `kind` record. */
size_t sidelog_steps(const char *path, const char *kind);

/* No step callback ran after its step had completed (an "exec" after a
 * "seen" of the same step), every "seen" carries the token of an earlier
 * "exec" of its step, and a step's result never changed (every "seen" of
 * it carries the same token). */
void sidelog_assert_no_rerun(const char *path);

#endif
