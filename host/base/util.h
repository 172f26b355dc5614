/* util.h — allocation that aborts on out-of-memory, and small string
 * helpers.  The journal makes recovery from an abort possible, so callers
 * never handle a NULL from these. */
#ifndef DURO_UTIL_H
#define DURO_UTIL_H

#include <stdarg.h>
#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* xstrdup, or NULL for NULL. */
char *xstrdup_null(const char *s);
char *xstrndup(const char *s, size_t n);
/* A malloc'ed formatted string. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap);

#endif
