/* sqlite_copy.c — copying the SQLite journal out (migrate.c): the
 * schema's version of a file, each table's rows counted and exported, and
 * the highest key a table used.  On the writer connection: the copy runs
 * on one thread, with no host. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

#include "sqlite_internal.h"

int sqlite_schema_version(const char *path, char *version, size_t n, char *err,
                          size_t errlen) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int rc = DURO_E_NOT_FOUND;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='schema'", -1,
                         &st, NULL) != SQLITE_OK) {
    snprintf(err, errlen, "%s", db ? sqlite3_errmsg(db) : "out of memory");
  } else if (sqlite3_step(st) != SQLITE_ROW || !sqlite3_column_text(st, 0)) {
    snprintf(err, errlen, "no schema row in its meta table");
  } else {
    snprintf(version, n, "%s", (const char *)sqlite3_column_text(st, 0));
    rc = 0;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rc;
}

int sqlite_table_count(void *db, const store_table *t, int64_t *n) {
  sqlite_store *sq = db;
  char *sql = xasprintf("SELECT COUNT(*) FROM %s", t->name);
  sqlite3_stmt *st = NULL;
  int rc = DURO_E_STORAGE;
  *n = 0;
  if (sqlite3_prepare_v2(sq->wr, sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    *n = sqlite3_column_int64(st, 0);
    rc = 0;
  } else {
    sqlite_set_err(sq->wr, t->name);
  }
  sqlite3_finalize(st);
  free(sql);
  return rc;
}

/* The highest key ever used: an AUTOINCREMENT table remembers it in
 * sqlite_sequence even once its rows are deleted; for the others it is
 * their greatest key, which SQLite itself goes on from. */
static int key_high(sqlite_store *sq, const store_table *t, int64_t *high) {
  char *sql = xasprintf("SELECT MAX(COALESCE((SELECT MAX(%s) FROM %s),0),"
                        "COALESCE((SELECT seq FROM sqlite_sequence WHERE "
                        "name='%s'),0))",
                        t->serial, t->name, t->name);
  sqlite3_stmt *st = NULL;
  int rc = DURO_E_STORAGE;
  if (sqlite3_prepare_v2(sq->wr, sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    *high = sqlite3_column_int64(st, 0);
    rc = 0;
  } else {
    sqlite_set_err(sq->wr, t->name);
  }
  sqlite3_finalize(st);
  free(sql);
  return rc;
}

int sqlite_table_export(void *db, const store_table *t, int64_t *high,
                        store_row_fn put, void *put_ctx) {
  sqlite_store *sq = db;
  if (t->serial && key_high(sq, t, high))
    return DURO_E_STORAGE;
  char *sql = xasprintf("SELECT %s FROM %s", t->columns, t->name);
  sqlite3_stmt *st = NULL;
  const char **values = xcalloc(t->n_columns, sizeof *values);
  int rc = 0, s = SQLITE_DONE;
  if (sqlite3_prepare_v2(sq->wr, sql, -1, &st, NULL) != SQLITE_OK ||
      (size_t)sqlite3_column_count(st) != t->n_columns) {
    sqlite_set_err(sq->wr, t->name);
    rc = DURO_E_STORAGE;
    goto done;
  }
  while (rc == 0 && (s = sqlite3_step(st)) == SQLITE_ROW) {
    for (size_t i = 0; i < t->n_columns; i++)
      values[i] = (const char *)sqlite3_column_text(st, (int)i);
    rc = put(put_ctx, values);
  }
  if (rc == 0 && s != SQLITE_DONE) {
    sqlite_set_err(sq->wr, t->name);
    rc = DURO_E_STORAGE;
  }
done:
  sqlite3_finalize(st);
  free(values);
  free(sql);
  return rc;
}
