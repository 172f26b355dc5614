/* step_arena.h — the activation's arena: a bump allocator over 4 KiB
 * chunks (bigger requests get a chunk of their own), freed whole when the
 * activation ends.  Everything the activation hands to the plugin lives
 * in it.  Static inline: every step call makes its key here (included by
 * step_internal.h, after duro_step, whose arena it is). */
#ifndef DURO_STEP_ARENA_H
#define DURO_STEP_ARENA_H

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static inline void *arena_alloc(duro_step *a, size_t n) {
  size_t align = sizeof(max_align_t);
  n = (n + align - 1) / align * align;
  arena_blk *b = a->arena;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
    b = xmalloc(sizeof *b + cap);
    b->next = a->arena;
    b->used = 0;
    b->cap = cap;
    a->arena = b;
  }
  void *p = (char *)b->data + b->used;
  b->used += n;
  return p;
}

static inline char *arena_strdup(duro_step *a, const char *s) {
  if (!s)
    return NULL;
  size_t n = strlen(s) + 1;
  return memcpy(arena_alloc(a, n), s, n);
}

/* Moves a malloc'ed string into the arena. */
static inline char *arena_take(duro_step *a, char *s) {
  char *copy = arena_strdup(a, s);
  free(s);
  return copy;
}

static inline char *arena_printf(duro_step *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline char *arena_printf(duro_step *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = xvasprintf(fmt, ap);
  va_end(ap);
  return arena_take(a, s);
}

static inline void arena_free(duro_step *a) {
  for (arena_blk *b = a->arena, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  a->arena = NULL;
}

#endif
