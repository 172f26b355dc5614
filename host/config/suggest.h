/* suggest.h — "did you mean": the known word nearest a misspelt one.
 *
 * Nearness is the optimal-string-alignment edit distance (insertions,
 * deletions, substitutions and swaps of neighbours, each 1), ignoring
 * ASCII case, and a word is offered only when it is close for its length:
 * one edit for words of up to 4 characters, two up to 9, three beyond.
 * Far guesses mislead more than no guess. */
#ifndef DURO_CONFIG_SUGGEST_H
#define DURO_CONFIG_SUGGEST_H

#include <stddef.h>

/* The candidate nearest `word` (`len` bytes, not NUL-terminated), the
 * first of them on a tie, or NULL when none is close.  The result is one
 * of `candidates`. */
const char *suggest_nearest(const char *word, size_t len,
                            const char *const *candidates, size_t n);

#endif
