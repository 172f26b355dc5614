/* instant.c — a point in time from its text (instant.h), the ISO 8601
 * form read by GLib. */
#include "instant.h"

#include <ctype.h>
#include <errno.h>
#include <glib.h>
#include <stdlib.h>

#include "duro.h"

int instant_parse(const char *text, int64_t *ms_out) {
  if (!text || !*text)
    return DURO_E_INVALID_ARGUMENT;
  const char *p = text;
  while (isdigit((unsigned char)*p))
    p++;
  if (!*p) { /* all digits: milliseconds */
    errno = 0;
    long long ms = strtoll(text, NULL, 10);
    if (errno)
      return DURO_E_INVALID_ARGUMENT;
    *ms_out = ms;
    return 0;
  }
  GTimeZone *utc = g_time_zone_new_utc();
  GDateTime *t = g_date_time_new_from_iso8601(text, utc);
  g_time_zone_unref(utc);
  if (!t)
    return DURO_E_INVALID_ARGUMENT;
  int64_t s = g_date_time_to_unix(t);
  int us = g_date_time_get_microsecond(t);
  g_date_time_unref(t);
  if (s < 0)
    return DURO_E_INVALID_ARGUMENT;
  *ms_out = s * 1000 + us / 1000;
  return 0;
}
