/* clock.c — the system's clocks in milliseconds, and the real and the
 * virtual duro_clock over them (and a time as a UTC date). The virtual
 * clock is advanced only by the test that owns it, and read by the engine
 * under its lock: advancing it moves both readings, stepping its wall
 * moves one. */
#include "clock.h"

#include <stdio.h>
#include <time.h>

static int64_t read_ms(clockid_t clock_id) {
  struct timespec ts;
  clock_gettime(clock_id, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_mono_ms(void) { return read_ms(CLOCK_MONOTONIC); }
int64_t clock_wall_ms(void) { return read_ms(CLOCK_REALTIME); }
int64_t clock_boot_ms(void) { return read_ms(CLOCK_BOOTTIME); }

struct timespec clock_deadline(clockid_t clock_id, int64_t ms) {
  struct timespec t;
  clock_gettime(clock_id, &t);
  t.tv_sec += ms / 1000;
  t.tv_nsec += (ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

static int64_t real_now(duro_clock *c) {
  (void)c;
  return clock_wall_ms();
}

static int64_t real_mono(duro_clock *c) {
  (void)c;
  return clock_mono_ms();
}

static duro_clock real_clock = {.now_ms = real_now, .mono_ms = real_mono};

duro_clock *duro_clock_real(void) { return &real_clock; }

static int64_t virtual_mono(duro_clock *c) {
  return __atomic_load_n(&c->virtual_ms, __ATOMIC_ACQUIRE);
}

static int64_t virtual_now(duro_clock *c) {
  return virtual_mono(c) + __atomic_load_n(&c->wall_step_ms, __ATOMIC_ACQUIRE);
}

void duro_clock_virtual_init(duro_clock *c, int64_t start_ms) {
  c->now_ms = virtual_now;
  c->mono_ms = virtual_mono;
  c->virtual_ms = start_ms;
  c->wall_step_ms = 0;
}

void duro_clock_advance(duro_clock *c, int64_t ms) {
  __atomic_add_fetch(&c->virtual_ms, ms, __ATOMIC_ACQ_REL);
}

void duro_clock_step_wall(duro_clock *c, int64_t ms) {
  __atomic_add_fetch(&c->wall_step_ms, ms, __ATOMIC_ACQ_REL);
}

const char *clock_iso_utc(char buf[32], int64_t ms) {
  time_t t = (time_t)(ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000));
  struct tm tm;
  if (!gmtime_r(&t, &tm) || !strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
    snprintf(buf, 32, "%lld ms", (long long)ms);
  return buf;
}
