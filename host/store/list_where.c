/* list_where.c — the SQL of a list's search attributes (list_where.h). */
#include "list_where.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

size_t list_where_drive(const journal_list_filter *f) {
  for (size_t i = 0; i < f->n_where; i++)
    if (f->where[i].op == DURO_ATTR_EQ)
      return i;
  return 0;
}

const char *list_where_op(duro_attr_op op) {
  switch (op) {
  case DURO_ATTR_LT:
    return "<";
  case DURO_ATTR_LE:
    return "<=";
  case DURO_ATTR_GT:
    return ">";
  case DURO_ATTR_GE:
    return ">=";
  case DURO_ATTR_EQ:
    break;
  }
  return "=";
}

char *list_where_sql(const journal_list_filter *f, char mark, int first,
                     const char *text_cast, const char *num_cast, int walk) {
  size_t drive = walk ? f->n_where : list_where_drive(f);
  char *sql = xstrdup("");
  for (size_t k = 0; k < f->n_where; k++) {
    const duro_attr_filter *w = &f->where[k];
    int p = first + 2 * (int)k;
    const char *col = w->str ? "str" : "num";
    const char *cast = w->str ? text_cast : num_cast;
    char *term =
        k == drive
            ? xasprintf(" AND a.name=%c%d%s AND a.%s%s%c%d%s", mark, p,
                        text_cast, col, list_where_op(w->op), mark, p + 1, cast)
            : xasprintf(" AND EXISTS(SELECT 1 FROM attributes b WHERE "
                        "b.instance=i.rowid AND b.name=%c%d%s AND "
                        "b.%s%s%c%d%s)",
                        mark, p, text_cast, col, list_where_op(w->op), mark,
                        p + 1, cast);
    char *both = xasprintf("%s%s", sql, term);
    free(sql);
    free(term);
    sql = both;
  }
  return sql;
}
