/* util.c — allocation wrappers that abort with a message on out-of-memory. */
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t n) {
  fprintf(stderr, "duro: out of memory allocating %zu bytes\n", n);
  abort();
}

void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p)
    oom(n);
  return p;
}

void *xcalloc(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p)
    oom(count * size);
  return p;
}

void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q)
    oom(n);
  return q;
}

char *xstrdup(const char *s) { return xstrndup(s, strlen(s)); }

char *xstrdup_null(const char *s) { return s ? xstrdup(s) : NULL; }

char *xstrndup(const char *s, size_t n) {
  size_t len = strnlen(s, n);
  char *p = xmalloc(len + 1);
  memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

/* GCC 12 with -fsanitize=undefined sees a NULL `fmt` on the sanitizer's
 * own check path and reports "null format string"; fmt is never NULL. */
#if defined(__GNUC__) && !defined(__clang__) /* clang has no such warning */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
char *xvasprintf(const char *fmt, va_list ap) {
  char small[128];
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap2);
  va_end(ap2);
  if (n < 0)
    n = 0;
  char *p = xmalloc((size_t)n + 1);
  if ((size_t)n < sizeof small)
    memcpy(p, small, (size_t)n + 1);
  else
    vsnprintf(p, (size_t)n + 1, fmt, ap);
  return p;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

char *xasprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *p = xvasprintf(fmt, ap);
  va_end(ap);
  return p;
}
