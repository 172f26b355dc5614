/* bulk_internal.h — what the files of bulk/ share: the filter as the
 * store takes it, and the driver's thread woken when a job is made. */
#ifndef DURO_BULK_INTERNAL_H
#define DURO_BULK_INTERNAL_H

#include "bulk.h"
#include "journal.h"

/* f as journal_list takes it (its prefix borrowed). */
journal_list_filter bulk_store_filter(const duro_list_filter *f);
/* A job was made: the driver's thread looks at once (bulk_driver.c). */
void bulk_wake(duro_engine *e);
/* 1 once the driver is stopping: a batch under way stops between two
 * instances (bulk_driver.c). */
int bulk_stopping(duro_engine *e);

#endif
