/* kit_clock.c — the wall clock plugin code reads under the test kit.
 *
 * Plugin code (run(), and a step's callback) reads the test's virtual
 * clock: a step that records the time records the test's time, the same
 * on every run, so outputs can be compared and asserted on.  In a crash
 * run's recovering process, run() code outside any step reads it a day
 * and a second later, so that run() code that branches on the clock
 * (duro.h's rule 3) takes another path there and the replay's check sees
 * it.  A step's callback there reads the time its attempt began in the
 * first run (the restart's delays would move it), so what it records is
 * what the first run recorded.  The host's own code
 * reads the real clock, as always.
 *
 * The test program links this library before the C library, so these
 * definitions of time(), gettimeofday() and clock_gettime() are the ones
 * a plugin loaded later binds to. */
#include <dlfcn.h>
#include <stddef.h>
#include <sys/time.h>
#include <time.h>

#include "kit_internal.h"

static int64_t shift_s;
static _Thread_local int where; /* KIT_HOST, KIT_RUN or KIT_STEP */
static _Thread_local int64_t pinned = -1;

void kit_clock_pin(int64_t ms) { pinned = ms; }

void kit_clock_shift(int64_t offset_s) { shift_s = offset_s; }

int kit_clock_enter(int code) {
  int was = where;
  where = code;
  return was;
}

void kit_clock_leave(int was) { where = was; }

typedef int clock_gettime_fn(clockid_t, struct timespec *);

static clock_gettime_fn *real_clock_gettime(void) {
  static clock_gettime_fn *real;
  if (!real)
    real = (clock_gettime_fn *)dlsym(RTLD_NEXT, "clock_gettime");
  return real;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  duro_test *t = kit_current;
  if (where == KIT_HOST || !t ||
      (id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE))
    return real_clock_gettime()(id, ts);
  int64_t ms = where == KIT_STEP && pinned >= 0 ? pinned : duro_test_now_ms(t);
  if (where == KIT_RUN)
    ms += shift_s * 1000;
  ts->tv_sec = (time_t)(ms / 1000);
  ts->tv_nsec = (long)(ms % 1000) * 1000000L;
  return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
  (void)tz;
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
    return -1;
  /* the C library declares tv non-NULL */
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

time_t time(time_t *out) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
    return (time_t)-1;
  if (out)
    *out = ts.tv_sec;
  return ts.tv_sec;
}
