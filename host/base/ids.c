/* ids.c — the syntax check of instance ids (ids.h).  The characters are
 * the ones a URL path segment carries unescaped and a shell word needs no
 * quoting for, so an id reads the same in a route, a log line and a
 * command line. */
#include "ids.h"

#include <stddef.h>

int duro_instance_id_valid(const char *id) {
  size_t n = 0;
  for (const char *p = id; p && *p; p++, n++) {
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':' ||
          c == '-'))
      return 0;
  }
  return id && n >= 1 && n <= 100;
}
