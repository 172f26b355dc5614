/* migrate.h — copying an embedded SQLite journal into PostgreSQL
 * (`duro migrate`), so that a host that started small can grow without
 * losing its instances.
 *
 * The copy reads the source through the SQLite backend (read-only) and
 * bulk-loads every table of schema 13 into the target through the
 * PostgreSQL backend (backend.h's table_export, table_import and
 * key_continue), in one PostgreSQL transaction: all rows or none.  Keys
 * are kept as they are (steps, attempts and events name their instance
 * by its rowid), and the numbered keys go on past the highest value the
 * source ever used, so that no message id or event seq is handed out
 * twice.  The caller stops any host first and holds the source's storage
 * lock (lock.h) for the duration. */
#ifndef DURO_MIGRATE_H
#define DURO_MIGRATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"

/* The schema the copy knows: a source or target at another version is
 * refused. */
#define MIGRATE_SCHEMA 13

/* Every table of schema 13 but `meta` (each side keeps its own schema
 * row), in the order they are copied. */
extern const store_table migrate_tables[];
extern const size_t migrate_n_tables;

/* Copies the SQLite journal at `from` into the PostgreSQL database
 * `to` (a libpq connection string), printing a line per table copied and
 * the time taken to `out`.  Returns 0, or -1 with why in err: the source
 * is missing, not a duro journal or at another schema; the target
 * already holds rows (their counts); the build has no PostgreSQL; or a
 * database failed (then the target holds no row of the copy). */
int migrate_copy(const char *from, const char *to, FILE *out, char *err,
                 size_t errlen);

#endif
