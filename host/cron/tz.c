/* tz.c — time zones for cron triggers, from the system's tz database
 * through GLib's GTimeZone, not a TZif parser of our own.
 *
 * A GTimeZone is an immutable value that GLib reads from
 * /usr/share/zoneinfo itself and shares, reference-counted, between
 * threads; finding the offset at an instant takes the zone explicitly.
 * So nothing here touches process state: not TZ, not tzset(), not the
 * environment that libpq, posix_spawn and plugins read from other
 * threads.  (glibc has no tzalloc()/localtime_rz() to do the same.)
 *
 * GLib and glibc both take an unknown zone name for UTC without a word,
 * so names are checked here first: relative, no "..", and naming a
 * regular file under ZONEINFO_DIR that starts with the TZif magic (the
 * directory also holds tables such as zone.tab, which are not zones). */
#include "tz.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "expr.h"

#define ZONEINFO_DIR "/usr/share/zoneinfo"

static bool refuse(char *err, size_t errlen, const char *fmt, const char *tz) {
  if (err && errlen)
    snprintf(err, errlen, fmt, tz);
  return false;
}

bool cron_tz_valid(const char *tz, char *err, size_t errlen) {
  if (!tz || strcmp(tz, "UTC") == 0)
    return true;
  if (!tz[0])
    return refuse(err, errlen, "empty time zone name%s", "");
  if (tz[0] == '/' || strstr(tz, ".."))
    return refuse(err, errlen,
                  "time zone \"%s\" must be a zone name such as "
                  "Europe/Berlin, not a path",
                  tz);
  for (const char *p = tz; *p; p++) {
    if (!(*p >= 'A' && *p <= 'Z') && !(*p >= 'a' && *p <= 'z') &&
        !(*p >= '0' && *p <= '9') && !strchr("/_+-", *p))
      return refuse(err, errlen,
                    "time zone \"%s\" has a character no zone "
                    "name has",
                    tz);
  }
  char path[512];
  if (snprintf(path, sizeof path, "%s/%s", ZONEINFO_DIR, tz) >=
      (int)sizeof path)
    return refuse(err, errlen, "time zone name \"%.64s...\" is too long", tz);
  struct stat st;
  char magic[4] = {0};
  FILE *f = NULL;
  if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
    f = fopen(path, "rbe");
  bool tzif = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "TZif", 4) == 0;
  if (f)
    fclose(f);
  if (!tzif)
    return refuse(err, errlen,
                  "unknown time zone \"%s\" (not in the system's time zone "
                  "database, " ZONEINFO_DIR ")",
                  tz);
  return true;
}

struct cron_zone {
  GTimeZone *tz;
};

cron_zone *cron_tz_open(const char *tz) {
  if (!tz || !cron_tz_valid(tz, NULL, 0))
    return NULL;
  GTimeZone *g = g_time_zone_new_identifier(tz);
  if (!g)
    return NULL;
  cron_zone *z = malloc(sizeof *z);
  if (!z) {
    g_time_zone_unref(g);
    return NULL;
  }
  z->tz = g;
  return z;
}

void cron_tz_close(cron_zone *z) {
  if (!z)
    return;
  g_time_zone_unref(z->tz);
  free(z);
}

int64_t cron_tz_offset(const cron_zone *z, int64_t t) {
  /* The interval holding instant t (universal time: never ambiguous). */
  int i = g_time_zone_find_interval(z->tz, G_TIME_TYPE_UNIVERSAL, t);
  return i < 0 ? 0 : g_time_zone_get_offset(z->tz, i);
}
