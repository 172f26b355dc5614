/* trigger_names.c — the name tables of the triggers' enums (trigger.h):
 * a tick's state as the journal stores it, a catch_up policy, the state
 * of a fire by hand. */
#include <stddef.h>
#include <string.h>

#include "trigger.h"

/* A tick's state as the journal stores it (and GET /crons shows it). */
static const char *const TICK_STATE[] = {
    [DURO_CRON_TICK_FIRED] = "fired",
    [DURO_CRON_TICK_COMPLETE] = "complete",
    [DURO_CRON_TICK_FAILED] = "failed",
    [DURO_CRON_TICK_MISSED] = "missed",
    [DURO_CRON_TICK_SKIPPED] = "skipped",
};
#define N_TICK_STATES (sizeof TICK_STATE / sizeof *TICK_STATE)

const char *duro_cron_tick_state_name(duro_cron_tick_state s) {
  return (size_t)s < N_TICK_STATES ? TICK_STATE[s] : "failed";
}

int duro_cron_tick_state_parse(const char *name, duro_cron_tick_state *out) {
  for (size_t i = 0; name && i < N_TICK_STATES; i++)
    if (!strcmp(TICK_STATE[i], name)) {
      *out = (duro_cron_tick_state)i;
      return 0;
    }
  return -1;
}

const char *duro_cron_catch_up_name(int catch_up) {
  static const char *const name[] = {
      [DURO_CRON_CATCH_UP_LATEST] = "latest",
      [DURO_CRON_CATCH_UP_NONE] = "none",
      [DURO_CRON_CATCH_UP_ALL] = "all",
  };
  return catch_up >= 0 && catch_up < 3 ? name[catch_up] : name[0];
}

const char *duro_cron_fire_state_name(duro_cron_fire_state s) {
  static const char *const name[] = {
      [DURO_CRON_FIRE_COMPLETE] = "complete",
      [DURO_CRON_FIRE_FAILED] = "failed",
      [DURO_CRON_FIRE_EXISTS] = "exists",
  };
  return (size_t)s < sizeof name / sizeof *name ? name[s] : "failed";
}
