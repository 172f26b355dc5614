/* suggest.c — the nearest known word to a misspelt one (see suggest.h). */
#include "suggest.h"

#include <string.h>

/* Longer words are not compared at all: no key is near that long, and a
 * hostile megabyte of key must not cost a megabyte-squared. */
#define WORD_MAX 64

/* The edits allowed between a word and a candidate `len` long. */
static size_t allowed(size_t len) { return len <= 4 ? 1 : len <= 9 ? 2 : 3; }

static char lower(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

/* Optimal string alignment distance between a[0..n) and b[0..m), both at
 * most WORD_MAX, over three rows of the usual table. */
static size_t distance(const char *a, size_t n, const char *b, size_t m) {
  size_t rows[3][WORD_MAX + 1];
  size_t *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
  for (size_t j = 0; j <= m; j++)
    prev[j] = j;
  for (size_t i = 1; i <= n; i++) {
    cur[0] = i;
    for (size_t j = 1; j <= m; j++) {
      size_t cost = lower(a[i - 1]) != lower(b[j - 1]);
      size_t best = prev[j - 1] + cost; /* substitute (or keep) */
      if (prev[j] + 1 < best)
        best = prev[j] + 1; /* delete a[i-1] */
      if (cur[j - 1] + 1 < best)
        best = cur[j - 1] + 1; /* insert b[j-1] */
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1]) && prev2[j - 2] + 1 < best)
        best = prev2[j - 2] + 1; /* swap neighbours */
      cur[j] = best;
    }
    size_t *t = prev2;
    prev2 = prev;
    prev = cur;
    cur = t;
  }
  return prev[m];
}

const char *suggest_nearest(const char *word, size_t len,
                            const char *const *candidates, size_t n) {
  const char *best = NULL;
  size_t best_d = 0;
  if (len > WORD_MAX)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    size_t m = strlen(candidates[i]);
    size_t limit = allowed(m > len ? m : len);
    size_t gap = m > len ? m - len : len - m;
    if (m > WORD_MAX || gap > limit)
      continue;
    size_t d = distance(word, len, candidates[i], m);
    if (d <= limit && (!best || d < best_d)) {
      best = candidates[i];
      best_d = d;
    }
  }
  return best;
}
