/* bulk_internal.h — what the files of bulk/ share: a filter's search
 * attribute terms as a job keeps them, and the driver's thread woken
 * when a job is made. */
#ifndef DURO_BULK_INTERNAL_H
#define DURO_BULK_INTERNAL_H

#include "bulk.h"
#include "journal.h"

/* A filter's search attribute terms as a job's row keeps them, a line
 * each (malloc'ed; NULL for none). */
char *bulk_where_text(const duro_attr_filter *where, size_t n);
/* The terms of a job's row parsed again against `workflow`'s index into
 * where[] (at most DURO_ATTR_MAX; each cleared by the caller), *n of
 * them: 0, or the code of the first that no longer parses (its attribute
 * taken out of the index since), with why. */
int bulk_where_parse(duro_engine *e, const char *workflow, const char *text,
                     duro_attr_filter *where, size_t *n, char *why, size_t len);
/* A job was made: the driver's thread looks at once (bulk_driver.c). */
void bulk_wake(duro_engine *e);
/* 1 once the driver is stopping: a batch under way stops between two
 * instances (bulk_driver.c). */
int bulk_stopping(duro_engine *e);

#endif
