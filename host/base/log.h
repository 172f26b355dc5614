/* log.h — one line per event on stderr: time, level, where, message.
 * The level threshold comes from DURO_LOG (debug|info|warn|error). */
#ifndef DURO_LOG_H
#define DURO_LOG_H

#include <stdarg.h>

#include "duro.h"

void log_set_level(int level);
int log_enabled(int level);
void log_write(int level, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void log_vwrite(int level, const char *where, const char *fmt, va_list ap);

#define log_info(...) log_write(DURO_LOG_INFO, NULL, __VA_ARGS__)
#define log_warn(...) log_write(DURO_LOG_WARN, NULL, __VA_ARGS__)
#define log_error(...) log_write(DURO_LOG_ERROR, NULL, __VA_ARGS__)

#endif
