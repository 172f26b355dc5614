/* call_scope.c — a thread's stack of handler scopes (call_scope.h). */
#include "call_scope.h"

#include <stdlib.h>

#include "util.h"

static __thread call_scope *innermost;

void call_scope_open(call_scope *s) {
  *s = (call_scope){.outer = innermost};
  innermost = s;
}

void call_scope_close(call_scope *s) {
  for (size_t i = 0; i < s->n; i++)
    free(s->kept[i]);
  free(s->kept);
  innermost = s->outer;
  *s = (call_scope){0};
}

char *call_scope_keep(char *str) {
  call_scope *s = innermost;
  if (!str || !s) {
    free(str);
    return NULL;
  }
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 8;
    s->kept = xrealloc(s->kept, s->cap * sizeof *s->kept);
  }
  return s->kept[s->n++] = str;
}
