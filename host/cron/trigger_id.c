/* trigger_id.c — a no-code trigger's instance id made from its template
 * and a tick: {date}, {time} and {datetime} in the trigger's zone, {ts}
 * the tick's milliseconds. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "trigger.h"
#include "tz.h"

/* The tick's wall-clock fields in the trigger's zone. */
static void local_tm(int64_t tick_ms, const char *tz, struct tm *out) {
  time_t t = (time_t)(tick_ms / 1000);
  cron_zone *z = tz ? cron_tz_open(tz) : NULL;
  if (z) {
    t += (time_t)cron_tz_offset(z, (int64_t)t);
    cron_tz_close(z);
  }
  gmtime_r(&t, out);
}

int cron_expand_id(const char *tmpl, int64_t tick_ms, const char *tz, char *out,
                   size_t len) {
  struct tm tm;
  local_tm(tick_ms, tz, &tm);
  size_t n = 0;
  for (const char *p = tmpl; *p; p++) {
    char piece[32];
    const char *add = piece;
    if (*p != '{') {
      piece[0] = *p;
      piece[1] = '\0';
    } else {
      const char *end = strchr(p, '}');
      if (!end)
        return -1;
      size_t k = (size_t)(end - p - 1);
      if (k == 4 && !strncmp(p + 1, "date", 4))
        strftime(piece, sizeof piece, "%Y-%m-%d", &tm);
      else if (k == 4 && !strncmp(p + 1, "time", 4))
        strftime(piece, sizeof piece, "%H%M", &tm);
      else if (k == 8 && !strncmp(p + 1, "datetime", 8))
        strftime(piece, sizeof piece, "%Y-%m-%dT%H:%M", &tm);
      else if (k == 2 && !strncmp(p + 1, "ts", 2))
        snprintf(piece, sizeof piece, "%lld", (long long)tick_ms);
      else
        return -1;
      p = end;
    }
    size_t m = strlen(add);
    if (n + m >= len)
      return -1;
    memcpy(out + n, add, m);
    n += m;
  }
  out[n] = '\0';
  return duro_instance_id_valid(out) ? 0 : -1;
}
