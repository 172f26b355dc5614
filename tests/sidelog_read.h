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

/* An engine process stopped (SIGSTOP) from `stopped_ns` (wall clock, ns)
 * on, and let go later. */
typedef struct sidelog_freeze {
  int pid;
  long long stopped_ns;
} sidelog_freeze;

/* sidelog_assert_no_rerun, but for one kind of "exec" after a "seen": a
 * callback of a frozen engine whose token (taken as the callback began)
 * is older than the freeze.  It was under way when the process stopped,
 * began under a lease that held, and wrote its record once let go: no
 * fence can stop what a callback does once it runs.  One begun after the
 * freeze is still a failure. */
void sidelog_assert_no_rerun_but_frozen(const char *path,
                                        const sidelog_freeze *fz, size_t n);

#endif
