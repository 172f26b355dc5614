/* clock.h — where the engine gets the time.
 *
 * The engine never calls clock_gettime directly: it asks a duro_clock, so a
 * test can use a virtual clock and jump days without waiting.  A clock has
 * two readings: the wall (Unix time, what the journal stores) and a
 * monotonic one for intervals (timeouts, deadlines), which a step of the
 * wall clock (NTP, an operator) does not move. */
#ifndef DURO_CLOCK_H
#define DURO_CLOCK_H

#include <stdint.h>
#include <time.h>

typedef struct duro_clock {
  int64_t (*now_ms)(struct duro_clock *c);  /* Unix time in milliseconds */
  int64_t (*mono_ms)(struct duro_clock *c); /* for intervals only */
  int64_t virtual_ms;                       /* used by the virtual clock */
  int64_t wall_step_ms;                     /* its wall's steps, summed */
} duro_clock;

/* The wall clock (CLOCK_REALTIME, CLOCK_MONOTONIC). Shared, stateless. */
duro_clock *duro_clock_real(void);

/* A virtual clock starting at `start_ms`; advance it with
 * duro_clock_advance(). Caller owns the struct. */
void duro_clock_virtual_init(duro_clock *c, int64_t start_ms);
void duro_clock_advance(duro_clock *c, int64_t ms);
/* Steps the virtual clock's wall reading by `ms` (either way) and not its
 * monotonic one, as settimeofday or NTP step a real wall clock. */
void duro_clock_step_wall(duro_clock *c, int64_t ms);

/* The system's clocks read in milliseconds, for what times itself outside
 * an engine (a host's start, a probe, the CLI's waits): the engine's own
 * timing asks its duro_clock, which a test can make virtual. */
int64_t clock_mono_ms(void); /* CLOCK_MONOTONIC: intervals */
int64_t clock_wall_ms(void); /* CLOCK_REALTIME: Unix time */
/* CLOCK_BOOTTIME: also counts the time the process (or the machine) was
 * stopped, which a lease held against other hosts must count. */
int64_t clock_boot_ms(void);

/* `ms` from now on `clock_id`, as pthread_cond_timedwait takes it: the
 * clock is the one the condition variable was made with. */
struct timespec clock_deadline(clockid_t clock_id, int64_t ms);

/* Unix ms `ms` as "2026-01-02T03:04:05Z" (UTC, whole seconds, rounded
 * down) into buf, which it returns; "<ms> ms" should the date not fit. */
const char *clock_iso_utc(char buf[32], int64_t ms);

static inline int64_t duro_clock_now(duro_clock *c) { return c->now_ms(c); }
static inline int64_t duro_clock_mono(duro_clock *c) { return c->mono_ms(c); }

#endif
