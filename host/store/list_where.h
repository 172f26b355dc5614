/* list_where.h — the SQL of a list's search attributes (journal.h's
 * journal_list_filter.where), which both backends splice into their
 * listing: one term walks its index, the others are checked on each row
 * it finds. */
#ifndef DURO_LIST_WHERE_H
#define DURO_LIST_WHERE_H

#include <stddef.h>

#include "journal.h"

/* The term an index walks: the first equality, else the first. */
size_t list_where_drive(const journal_list_filter *f);

/* A term's comparison as SQL: "=", "<", ... */
const char *list_where_op(duro_attr_op op);

/* The conditions for every term of f->where, as SQL (malloc'ed), on `a`
 * (the attributes row the walk is at) joined to its instance `i`: the
 * driving term's on `a` itself, each other's an EXISTS on instance
 * i.rowid; with `walk` (the instances walked, no `a`) every term's an
 * EXISTS.  Term k's name is parameter first + 2k and its value
 * first + 2k + 1, written `mark` then the number ('?' for SQLite, '$'
 * for PostgreSQL); `text_cast` and `num_cast` follow a string's and a
 * number's value parameter ("" or "::text"). */
char *list_where_sql(const journal_list_filter *f, char mark, int first,
                     const char *text_cast, const char *num_cast, int walk);

#endif
