/* call_scope.h — the memory a plugin's queue or cron handler is handed
 * while it runs on an engine thread: the strings duro.h's JSON accessors
 * return there.  The handler's runner opens a scope on its thread before
 * the call and closes it after, freeing what was kept; scopes nest.  (An
 * activation's strings live in its arena instead: run() moves between
 * threads as a fiber, a handler does not.) */
#ifndef DURO_CALL_SCOPE_H
#define DURO_CALL_SCOPE_H

#include <stddef.h>

typedef struct call_scope {
  struct call_scope *outer;
  char **kept;
  size_t n, cap;
} call_scope;

void call_scope_open(call_scope *s);
/* Frees what was kept in s; s must be the thread's innermost scope. */
void call_scope_close(call_scope *s);
/* Moves malloc'ed `str` into the thread's innermost scope and returns
 * it; with no scope open, frees it and returns NULL. */
char *call_scope_keep(char *str);

#endif
