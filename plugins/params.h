/* params.h — reading an integer out of an instance's params in the test
 * plugins (chain, chaos): {"steps": 40, "hold_ms": 300}.  A plain scan,
 * not a JSON parser: the tests write these params themselves.  Header-only
 * (static inline), so each plugin stays one .so built from its own .c. */
#ifndef DURO_PLUGINS_PARAMS_H
#define DURO_PLUGINS_PARAMS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The integer after "key": in params, or fallback when there is none. */
static inline int param_int(const char *params, const char *key, int fallback) {
  char pattern[32];
  snprintf(pattern, sizeof pattern, "\"%s\":", key);
  const char *p = strstr(params, pattern);
  return p ? atoi(p + strlen(pattern)) : fallback;
}

#endif
