/* errlist.c — a refused config's errors, the earliest ERRLIST_MAX kept in
 * file order (see errlist.h). */
#include "errlist.h"

#include <stdlib.h>
#include <string.h>

static int before(int line, int column, const errlist_item *it) {
  return line < it->line || (line == it->line && column < it->column);
}

void errlist_add(errlist *l, int line, int column, char *text) {
  /* After every kept error at or before this position: equal positions
   * stay in the order they were found. */
  size_t at = l->n;
  while (at > 0 && before(line, column, &l->items[at - 1]))
    at--;
  if (at == ERRLIST_MAX) {
    l->more++;
    free(text);
    return;
  }
  if (l->n == ERRLIST_MAX) { /* the last kept one gives way */
    free(l->items[ERRLIST_MAX - 1].text);
    l->n--;
    l->more++;
  }
  memmove(&l->items[at + 1], &l->items[at], (l->n - at) * sizeof l->items[0]);
  l->items[at] = (errlist_item){line, column, text};
  l->n++;
}

size_t errlist_total(const errlist *l) { return l->n + l->more; }

void errlist_print(const errlist *l, FILE *out) {
  for (size_t i = 0; i < l->n; i++)
    fprintf(out, "%s\n", l->items[i].text);
  if (l->more)
    fprintf(out, "and %zu more error%s\n", l->more, l->more == 1 ? "" : "s");
}

void errlist_print_count(FILE *out, size_t n, const char *file) {
  fprintf(out, "%zu error%s in %s\n", n, n == 1 ? "" : "s", file);
}

void errlist_report(const errlist *l, FILE *out, const char *file) {
  errlist_print(l, out);
  errlist_print_count(out, errlist_total(l), file);
}

void errlist_join(const errlist *l, char *buf, size_t len) {
  size_t o = 0;
  if (!buf || len == 0)
    return;
  buf[0] = '\0';
  for (size_t i = 0; i < l->n && o + 1 < len; i++) {
    int n = snprintf(buf + o, len - o, "%s%s", i ? "\n" : "", l->items[i].text);
    if (n < 0)
      break;
    o += (size_t)n;
  }
  if (l->more && o + 1 < len)
    snprintf(buf + o, len - o, "\nand %zu more error%s", l->more,
             l->more == 1 ? "" : "s");
}

void errlist_clear(errlist *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->items[i].text);
  l->n = 0;
  l->more = 0;
}
