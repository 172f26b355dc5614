/* test_fiber.c — fibers (host/base/fiber.c): a fiber runs until it
 * yields and resumes where it left off, on its own stack; a destroyed
 * fiber is kept for the next fiber_create, at most 1,024 of them, and
 * those the process did not need for a whole 10 s are unmapped (the
 * decay is driven here by the times passed to fiber_cache_trim, not by
 * waiting). */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"
#include "fiber.h"
#include "suite_run.h"

typedef struct {
  int steps;
  uintptr_t sp[2];
} trace;

static void two_halves(void *arg) {
  trace *t = arg;
  volatile char here;
  t->sp[0] = (uintptr_t)&here;
  t->steps = 1;
  fiber_yield();
  t->sp[1] = (uintptr_t)&here;
  t->steps = 2;
}

START_TEST(runs_until_it_yields_and_resumes_there) {
  fiber *f = fiber_create();
  ck_assert_ptr_nonnull(f);
  ck_assert(fiber_finished(f)); /* new: not started */
  trace t = {0};
  fiber_start(f, two_halves, &t);
  volatile char mine;
  fiber_resume(f);
  ck_assert_int_eq(t.steps, 1);
  ck_assert(!fiber_finished(f));
  /* its own stack, not this thread's */
  uintptr_t d = t.sp[0] > (uintptr_t)&mine ? t.sp[0] - (uintptr_t)&mine
                                           : (uintptr_t)&mine - t.sp[0];
  ck_assert_uint_gt(d, 64 * 1024);
  fiber_resume(f);
  ck_assert_int_eq(t.steps, 2);
  ck_assert(t.sp[1] == t.sp[0]); /* the same frame, resumed */
  ck_assert(fiber_finished(f));
  fiber_destroy(f);
}
END_TEST

START_TEST(a_destroyed_fiber_serves_the_next) {
  /* far past any period the destroys below start on their own clock */
  int64_t t0 = clock_mono_ms() + 3600 * 1000;
  fiber_cache_trim(t0);
  size_t before = fiber_cache_count();
  fiber *f[3];
  for (int i = 0; i < 3; i++)
    f[i] = fiber_create();
  for (int i = 0; i < 3; i++)
    fiber_destroy(f[i]);
  ck_assert_uint_eq(fiber_cache_count(), before + 3);
  fiber *again = fiber_create();
  ck_assert(again == f[2]); /* the last let go, its pages still mapped */
  ck_assert(fiber_finished(again));
  trace t = {0};
  fiber_start(again, two_halves, &t); /* usable as new */
  fiber_resume(again);
  fiber_resume(again);
  ck_assert_int_eq(t.steps, 2);
  fiber_destroy(again);
}
END_TEST

START_TEST(those_not_needed_for_a_period_are_unmapped) {
  int64_t t0 = clock_mono_ms() + 7200 * 1000;
  fiber_cache_trim(t0 - 10000); /* a period begins */
  fiber_cache_trim(t0);         /* ...and ends: what earlier cases left goes */
  ck_assert_uint_eq(fiber_cache_count(), 0);
  fiber *f[5];
  for (int i = 0; i < 5; i++)
    f[i] = fiber_create();
  for (int i = 0; i < 5; i++)
    fiber_destroy(f[i]);
  ck_assert_uint_eq(fiber_cache_count(), 5);
  fiber_cache_trim(t0 + 9999); /* not a whole period yet */
  ck_assert_uint_eq(fiber_cache_count(), 5);
  /* at its end only those cached all through it would go: none */
  fiber_cache_trim(t0 + 10000);
  ck_assert_uint_eq(fiber_cache_count(), 5);
  /* two are needed during the next period, and come back */
  fiber *a = fiber_create(), *b = fiber_create();
  fiber_destroy(a);
  fiber_destroy(b);
  fiber_cache_trim(t0 + 20000);
  ck_assert_uint_eq(fiber_cache_count(), 2); /* the 3 unused went */
  fiber_cache_trim(t0 + 30000); /* a whole period of no use at all */
  ck_assert_uint_eq(fiber_cache_count(), 0);
}
END_TEST

START_TEST(the_cache_is_bounded) {
  enum { N = 1100 };
  fiber **f = calloc(N, sizeof *f);
  for (int i = 0; i < N; i++)
    ck_assert_ptr_nonnull(f[i] = fiber_create());
  for (int i = 0; i < N; i++)
    fiber_destroy(f[i]); /* past the bound: unmapped at once */
  ck_assert_uint_eq(fiber_cache_count(), 1024);
  free(f);
}
END_TEST

/* A fiber let go while it waits (an activation never resumed) leaves
 * its frames' redzones in ASan's shadow; the pages mapped next at that
 * address must not inherit them. */
static void waits_for_ever(void *arg) {
  volatile char buf[256];
  buf[0] = 1;
  *(uintptr_t *)arg = (uintptr_t)buf;
  fiber_yield();
}

START_TEST(an_unmapped_stack_leaves_nothing_behind) {
  int64_t t0 = clock_mono_ms() + 10800 * 1000;
  fiber_cache_trim(t0 - 10000);
  fiber_cache_trim(t0);
  uintptr_t at = 0;
  fiber *f = fiber_create();
  fiber_start(f, waits_for_ever, &at);
  fiber_resume(f);
  fiber_destroy(f); /* never resumed */
  fiber_cache_trim(t0 + 10000);
  fiber_cache_trim(t0 + 20000);
  ck_assert_uint_eq(fiber_cache_count(), 0);
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void *want = (void *)(at & ~(uintptr_t)(page - 1));
  char *p = mmap(want, page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ck_assert_ptr_eq(p, want);
  memset(p, 7, page); /* ASan aborts here if the old redzones stayed */
  ck_assert_int_eq(p[at & (page - 1)], 7);
  munmap(p, page);
}
END_TEST

static Suite *fiber_suite(void) {
  Suite *s = suite_create("fiber");
  TCase *tc = tcase_create("fiber");
  tcase_add_test(tc, runs_until_it_yields_and_resumes_there);
  tcase_add_test(tc, a_destroyed_fiber_serves_the_next);
  tcase_add_test(tc, those_not_needed_for_a_period_are_unmapped);
  tcase_add_test(tc, the_cache_is_bounded);
  tcase_add_test(tc, an_unmapped_stack_leaves_nothing_behind);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(fiber_suite()); }
