/* errlist.h — the errors of one refused config, in file order, as a
 * compiler lists them.
 *
 * Each error is one line, "file:line:column: what is wrong", kept with its
 * position.  The list keeps the ERRLIST_MAX earliest in the file, whatever
 * order they were found in (the checks across the whole file come after
 * the walk, yet their errors are placed among the others): one found
 * later at an earlier position takes the place of the last kept one, and
 * every error past the cap only counts, so a file of a million bad
 * entries costs no more memory than one of fifty.  Errors at the same
 * position keep the order they were found in. */
#ifndef DURO_CONFIG_ERRLIST_H
#define DURO_CONFIG_ERRLIST_H

#include <stddef.h>
#include <stdio.h>

#define ERRLIST_MAX 50

typedef struct errlist_item {
  int line, column; /* 1-based; 0:0 for an error of the whole file */
  char *text;       /* the whole line, without a newline */
} errlist_item;

typedef struct errlist {
  errlist_item items[ERRLIST_MAX];
  size_t n;    /* kept, in items[0..n) by position */
  size_t more; /* found past the cap and not kept */
} errlist;

/* Adds `text` (malloc'ed; the list owns it from here) at line:column. */
void errlist_add(errlist *l, int line, int column, char *text);

/* Every error found, kept or not. */
size_t errlist_total(const errlist *l);

/* The kept lines, each ended by '\n', then "and N more errors" when some
 * were past the cap. */
void errlist_print(const errlist *l, FILE *out);

/* The last line of a report: "1 error in FILE", "N errors in FILE". */
void errlist_print_count(FILE *out, size_t n, const char *file);

/* errlist_print(), then the count of every error found in `file`. */
void errlist_report(const errlist *l, FILE *out, const char *file);

/* The same lines joined by '\n' (no last newline) into buf, cut to len
 * and always terminated when len > 0. */
void errlist_join(const errlist *l, char *buf, size_t len);

/* Releases the texts; the list is empty again. */
void errlist_clear(errlist *l);

#endif
