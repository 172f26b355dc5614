/* log.c — formats log lines and writes each with one write(2), so lines
 * from worker threads never interleave. */
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static int threshold = -1;

static int level_from_env(void) {
  const char *v = getenv("DURO_LOG");
  if (!v)
    return DURO_LOG_INFO;
  if (!strcasecmp(v, "debug"))
    return DURO_LOG_DEBUG;
  if (!strcasecmp(v, "warn"))
    return DURO_LOG_WARN;
  if (!strcasecmp(v, "error"))
    return DURO_LOG_ERROR;
  return DURO_LOG_INFO;
}

/* Read and set from any thread: atomics, the environment read at most
 * once per race (both readers get the same value). */
void log_set_level(int level) {
  __atomic_store_n(&threshold, level, __ATOMIC_RELAXED);
}

int log_enabled(int level) {
  int t = __atomic_load_n(&threshold, __ATOMIC_RELAXED);
  if (t < 0) {
    t = level_from_env();
    __atomic_store_n(&threshold, t, __ATOMIC_RELAXED);
  }
  return level >= t;
}

void log_vwrite(int level, const char *where, const char *fmt, va_list ap) {
  static const char *const names[] = {"debug", "info", "warn", "error"};
  if (!log_enabled(level))
    return;
  char line[2048];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  int n = snprintf(line, sizeof line,
                   "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s%s",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                   tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                   names[level < 0   ? 0
                         : level > 3 ? 3
                                     : level],
                   where ? where : "", where ? ": " : "");
  if (n < 0 || (size_t)n >= sizeof line)
    n = 0;
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  if (m < 0)
    m = 0;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof line - 2)
    len = sizeof line - 2;
  line[len++] = '\n';
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w;
}

void log_write(int level, const char *where, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_vwrite(level, where, fmt, ap);
  va_end(ap);
}
