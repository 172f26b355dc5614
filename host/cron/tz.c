/* tz.c — time zones for cron triggers, from the system's tz database
 * through the C library (TZ, tzset(), localtime_r()), not a TZif parser
 * of our own.
 *
 * TZ is process-global, so every use is serialized behind one mutex and
 * the previous value is restored afterwards.  Nothing else in host/ reads
 * local time: it works in UTC with gmtime_r() and timegm(), which ignore
 * TZ, so switching it here cannot disturb them.  Keep it that way: a
 * localtime(), mktime() or tzset() anywhere else in host/ would race with
 * this module.
 *
 * glibc takes an unknown zone name for UTC without a word, so names are
 * checked here first: relative, no "..", and naming a regular file under
 * ZONEINFO_DIR that starts with the TZif magic (the directory also holds
 * tables such as zone.tab, which are not zones). */
#include "tz.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "expr.h"

#define ZONEINFO_DIR "/usr/share/zoneinfo"

static pthread_mutex_t tz_mutex = PTHREAD_MUTEX_INITIALIZER;
/* The TZ to restore: owned, and only touched under tz_mutex. */
static char *saved_tz;
static bool had_tz;

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
    f = fopen(path, "rb");
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

bool cron_tz_enter(const char *tz) {
  if (!tz || !cron_tz_valid(tz, NULL, 0))
    return false;
  char value[512];
  /* The leading colon makes glibc read the file, never parse the name as
   * a POSIX TZ rule such as "EST5EDT". */
  snprintf(value, sizeof value, ":%s", tz);
  pthread_mutex_lock(&tz_mutex);
  const char *old = getenv("TZ");
  had_tz = old != NULL;
  saved_tz = old ? strdup(old) : NULL;
  if ((had_tz && !saved_tz) || setenv("TZ", value, 1) != 0) {
    free(saved_tz);
    saved_tz = NULL;
    pthread_mutex_unlock(&tz_mutex);
    return false;
  }
  tzset();
  return true;
}

void cron_tz_leave(void) {
  if (had_tz)
    setenv("TZ", saved_tz, 1);
  else
    unsetenv("TZ");
  tzset();
  free(saved_tz);
  saved_tz = NULL;
  pthread_mutex_unlock(&tz_mutex);
}

int64_t cron_tz_offset(int64_t t) {
  time_t tt = (time_t)t;
  struct tm tm;
  if (!localtime_r(&tt, &tm))
    return 0;
  return tm.tm_gmtoff;
}
