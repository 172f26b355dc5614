/* step_deadline.c — an instance's deadline (its workflow's or its
 * create's `timeout`, counted from its creation, or from a restart):
 * looked at where an activation starts and at every step boundary, an
 * attempt's timeout cut to what is left of it, and a wait's wake brought
 * forward to it (activation_finish), so that an instance ends errored
 * instance.timed_out at its deadline whatever it is doing then: queued,
 * waiting, between steps or inside a callback.  A paused instance stays
 * paused; it ends so when resumed.  A workflow whose on_timeout is
 * rollback runs the rollbacks of the completed steps first (an unwind,
 * step_rollback.c).  An unwind, that one or a terminate's or a
 * restart's, is past the deadline: none of its rollbacks is cut short by
 * it, each has its own retries and timeout. */
#include <stdlib.h>

#include "clock.h"
#include "error.h"
#include "step_internal.h"

const char *deadline_error(duro_step *a) {
  char when[32];
  char *msg = xasprintf("the instance passed its deadline (%s)",
                        clock_iso_utc(when, a->inst.deadline_ms));
  const char *e = arena_take(a, error_json(DURO_ERR_TIMED_OUT, msg));
  free(msg);
  return e;
}

int deadline_passed(duro_step *a) {
  if (a->inst.deadline_ms <= 0 || now_ms(a) < a->inst.deadline_ms)
    return 0;
  a->last_error = deadline_error(a);
  a->suspended = 1;
  a->reason = SUSPEND_TIMED_OUT;
  return 1;
}

int deadline_unwinds(duro_step *a) {
  return a->inst.deadline_ms > 0 && now_ms(a) >= a->inst.deadline_ms &&
         __atomic_load_n(&a->wf->limits.rollback_on_timeout, __ATOMIC_RELAXED);
}

int64_t deadline_cap(const duro_step *a, int64_t now, int64_t timeout_ms,
                     int *cut) {
  *cut = 0;
  /* an unwind's rollbacks are past the deadline: each has its own timeout */
  if (a->inst.deadline_ms <= 0 || a->unwind ||
      a->inst.deadline_ms - now >= timeout_ms)
    return timeout_ms;
  *cut = 1;
  return a->inst.deadline_ms > now ? a->inst.deadline_ms - now : 0;
}

int64_t deadline_wake(const duro_step *a, int64_t wake_ms) {
  if (a->inst.deadline_ms <= 0 || a->unwind)
    return wake_ms;
  if (wake_ms == JOURNAL_NONE || wake_ms > a->inst.deadline_ms)
    return a->inst.deadline_ms;
  return wake_ms;
}
