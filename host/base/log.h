/* log.h — one line per event on stderr: time, level, what it is about,
 * message; as text ("time level where: message") or, with
 * log_set_format(LOG_JSON), one JSON object a line whose fields are the
 * line's context (workflow, instance, step, attempt, plugin, build,
 * key).
 * The level threshold comes from DURO_LOG (debug|info|warn|error), the
 * format from DURO_LOG_FORMAT (text|json) unless set: `duro run` sets
 * both its own and, through the environment, its processes'. */
#ifndef DURO_LOG_H
#define DURO_LOG_H

#include <stdarg.h>

#include "duro.h"

/* What a line is about; every member may be NULL (attempt 0): a line has
 * the fields that apply.  `source` names a part of the host ("supervisor",
 * "plugin") for lines about no instance. */
typedef struct log_ctx {
  const char *source;
  const char *workflow, *instance;
  const char *step;
  unsigned attempt;
  const char *plugin, *build;
  const char *key; /* the API key of a control request (its audit line) */
} log_ctx;

enum { LOG_TEXT = 0, LOG_JSON = 1 };

void log_set_level(int level);
/* "debug", "info", "warn" or "error": a DURO_LOG_* level's name, as log
 * lines, the log routes and tail items write it. */
const char *log_level_name(int level);
int log_enabled(int level);
/* LOG_TEXT or LOG_JSON, for this process; log_export_format() also puts
 * it in the environment for the processes it starts (call it before any
 * thread). */
void log_set_format(int format);
void log_export_format(int format);
int log_format(void);

void log_at(int level, const log_ctx *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void log_vat(int level, const log_ctx *at, const char *fmt, va_list ap);
/* A line about `where`, a part of the host (log_ctx.source). */
void log_write(int level, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void log_vwrite(int level, const char *where, const char *fmt, va_list ap);

#define log_info(...) log_write(DURO_LOG_INFO, NULL, __VA_ARGS__)
#define log_warn(...) log_write(DURO_LOG_WARN, NULL, __VA_ARGS__)
#define log_error(...) log_write(DURO_LOG_ERROR, NULL, __VA_ARGS__)

#endif
