/* log.c — formats log lines, as text or as JSON objects built with
 * jansson from the line's context, and writes each with one write(2), so
 * lines from worker threads never interleave. */
#include "log.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX 2048

static int threshold = -1;
static int format = -1;

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

void log_set_format(int f) { __atomic_store_n(&format, f, __ATOMIC_RELAXED); }

void log_export_format(int f) {
  log_set_format(f);
  setenv("DURO_LOG_FORMAT", f == LOG_JSON ? "json" : "text", 1);
}

int log_format(void) {
  int f = __atomic_load_n(&format, __ATOMIC_RELAXED);
  if (f < 0) {
    const char *v = getenv("DURO_LOG_FORMAT");
    f = v && !strcasecmp(v, "json") ? LOG_JSON : LOG_TEXT;
    __atomic_store_n(&format, f, __ATOMIC_RELAXED);
  }
  return f;
}

const char *log_level_name(int level) {
  static const char *const names[] = {"debug", "info", "warn", "error"};
  return names[level < 0 ? 0 : level > 3 ? 3 : level];
}

/* RFC 3339, UTC, milliseconds: the seconds by strftime, then the ms. */
static void format_time(char *out, size_t len) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(out, len, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + n, len - n, ".%03dZ", (int)(ts.tv_nsec / 1000000));
}

/* The text form of a context: "workflow/instance step attempt N", or the
 * source; empty when there is neither. */
static void format_where(char *out, size_t len, const log_ctx *at) {
  out[0] = '\0';
  if (!at)
    return;
  if (at->workflow && at->instance) {
    if (at->step && at->attempt)
      snprintf(out, len, "%s/%s %s attempt %u", at->workflow, at->instance,
               at->step, at->attempt);
    else
      snprintf(out, len, "%s/%s", at->workflow, at->instance);
  } else if (at->source) {
    snprintf(out, len, "%s", at->source);
  }
}

static void write_line(char *line, size_t len) {
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w;
}

static void write_text(int level, const log_ctx *at, const char *message) {
  char when[40], where[512], line[LOG_LINE_MAX];
  format_time(when, sizeof when);
  format_where(where, sizeof where, at);
  int n = snprintf(line, sizeof line, "%s %-5s %s%s%s", when,
                   log_level_name(level), where, where[0] ? ": " : "", message);
  size_t len = n < 0 ? 0 : (size_t)n;
  if (len > sizeof line - 2)
    len = sizeof line - 2;
  line[len++] = '\n';
  write_line(line, len);
}

static void set_str(json_t *o, const char *key, const char *v) {
  if (v)
    json_object_set_new(o, key, json_string(v));
}

static void write_json(int level, const log_ctx *at, char *message) {
  char when[40];
  format_time(when, sizeof when);
  json_t *o = json_object();
  json_object_set_new(o, "time", json_string(when));
  json_object_set_new(o, "level", json_string(log_level_name(level)));
  /* jansson takes only UTF-8 (a message cut to size may end mid-
   * character): what it refuses is kept with its other bytes as '?' */
  json_t *m = json_string(message);
  if (!m) {
    for (char *c = message; *c; c++)
      if ((unsigned char)*c >= 0x80)
        *c = '?';
    m = json_string(message);
  }
  json_object_set_new(o, "message", m ? m : json_string(""));
  if (at) {
    set_str(o, "source", at->source);
    set_str(o, "workflow", at->workflow);
    set_str(o, "instance", at->instance);
    set_str(o, "step", at->step);
    if (at->attempt)
      json_object_set_new(o, "attempt", json_integer(at->attempt));
    set_str(o, "plugin", at->plugin);
    set_str(o, "build", at->build);
    set_str(o, "key", at->key);
  }
  char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
  json_decref(o);
  if (!s)
    return;
  size_t len = strlen(s);
  char *line = malloc(len + 1);
  if (line) {
    memcpy(line, s, len);
    line[len] = '\n';
    write_line(line, len + 1);
    free(line);
  }
  free(s);
}

void log_vat(int level, const log_ctx *at, const char *fmt, va_list ap) {
  if (!log_enabled(level))
    return;
  char message[LOG_LINE_MAX];
  int m = vsnprintf(message, sizeof message, fmt, ap);
  if (m < 0)
    message[0] = '\0';
  if (log_format() == LOG_JSON)
    write_json(level, at, message);
  else
    write_text(level, at, message);
}

void log_at(int level, const log_ctx *at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_vat(level, at, fmt, ap);
  va_end(ap);
}

void log_vwrite(int level, const char *where, const char *fmt, va_list ap) {
  log_ctx at = {.source = where};
  log_vat(level, &at, fmt, ap);
}

void log_write(int level, const char *where, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_vwrite(level, where, fmt, ap);
  va_end(ap);
}
