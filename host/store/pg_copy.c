/* pg_copy.c — copying a journal into PostgreSQL (migrate.c): each
 * table's rows counted, imported by COPY, and its key's sequence set to
 * go on from the highest key copied.  On the writer connection, inside
 * the group transaction pg_begin opened: the copy is one transaction, all
 * or nothing.  Table and column names come from the schema's list
 * (migrate.h), never from the user. */
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"

int pg_table_count(void *db, const store_table *t, int64_t *n) {
  pg_store *pg = db;
  if (pg_write_finish(pg, NULL, NULL))
    return DURO_E_STORAGE;
  char *sql = xasprintf("SELECT COUNT(*) FROM %s", t->name);
  PGresult *r = PQexec(pg->wr, sql);
  free(sql);
  int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
  if (ok)
    *n = get_i64(r, 0, 0);
  else
    pg_set_err(t->name, PQresultErrorMessage(r));
  PQclear(r);
  return ok ? 0 : DURO_E_STORAGE;
}

/* COPY's text format, buffered: rows are sent to the server 64 KiB at a
 * time rather than one message each. */
typedef struct copy_in {
  pg_store *pg;
  size_t n_columns;
  char *buf;
  size_t len, cap;
  int64_t rows;
} copy_in;

#define COPY_CHUNK 65536

static void copy_byte(copy_in *c, char ch) {
  if (c->len == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 2 * COPY_CHUNK;
    c->buf = xrealloc(c->buf, c->cap);
  }
  c->buf[c->len++] = ch;
}

static int copy_flush(copy_in *c) {
  if (c->len && PQputCopyData(c->pg->wr, c->buf, (int)c->len) != 1) {
    pg_set_err("COPY", PQerrorMessage(c->pg->wr));
    return DURO_E_STORAGE;
  }
  c->len = 0;
  return 0;
}

/* One row: values separated by tabs, NULL as \N, and the characters
 * COPY gives a meaning (backslash, tab, newline, return) escaped. */
static int copy_row(void *ctx, const char *const *values) {
  copy_in *c = ctx;
  for (size_t i = 0; i < c->n_columns; i++) {
    if (i)
      copy_byte(c, '\t');
    const char *v = values[i];
    if (!v) {
      copy_byte(c, '\\');
      copy_byte(c, 'N');
      continue;
    }
    for (; *v; v++) {
      char esc = *v == '\\'   ? '\\'
                 : *v == '\t' ? 't'
                 : *v == '\n' ? 'n'
                 : *v == '\r' ? 'r'
                              : 0;
      if (esc) {
        copy_byte(c, '\\');
        copy_byte(c, esc);
      } else {
        copy_byte(c, *v);
      }
    }
  }
  copy_byte(c, '\n');
  c->rows++;
  return c->len >= COPY_CHUNK ? copy_flush(c) : 0;
}

int pg_table_import(void *db, const store_table *t,
                    int (*produce)(void *ctx, store_row_fn put, void *put_ctx),
                    void *ctx, int64_t *n) {
  pg_store *pg = db;
  /* COPY cannot run in pipeline mode: any queued writes are read first. */
  if (pg_write_finish(pg, NULL, NULL))
    return DURO_E_STORAGE;
  /* duro's text is UTF-8, whatever the database's default client
   * encoding. */
  if (pg_exec_cmd(pg->wr, "SET client_encoding='UTF8'", NULL, 0))
    return DURO_E_STORAGE;
  char *sql = xasprintf("COPY %s(%s) FROM STDIN", t->name, t->columns);
  PGresult *r = PQexec(pg->wr, sql);
  free(sql);
  if (PQresultStatus(r) != PGRES_COPY_IN) {
    pg_set_err(t->name, PQresultErrorMessage(r));
    PQclear(r);
    return DURO_E_STORAGE;
  }
  PQclear(r);
  copy_in c = {.pg = pg, .n_columns = t->n_columns};
  int rc = produce(ctx, copy_row, &c);
  if (rc == 0)
    rc = copy_flush(&c);
  free(c.buf);
  /* A producer that failed ends the COPY with an error: the server
   * discards the rows, and the transaction is left to roll back.  Its
   * message is the producer's, so the server's is not recorded over
   * it. */
  int ended = PQputCopyEnd(pg->wr, rc ? "the copy was abandoned" : NULL) == 1;
  int ok = ended;
  while ((r = PQgetResult(pg->wr)) != NULL) {
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      if (ok && rc == 0)
        pg_set_err(t->name, PQresultErrorMessage(r));
      ok = 0;
    }
    PQclear(r);
  }
  if (!ended && rc == 0)
    pg_set_err("COPY", PQerrorMessage(pg->wr));
  if (rc)
    return rc;
  if (!ok)
    return DURO_E_STORAGE;
  *n = c.rows;
  return 0;
}

int pg_key_continue(void *db, const store_table *t, int64_t high) {
  pg_store *pg = db;
  if (pg_write_finish(pg, NULL, NULL))
    return DURO_E_STORAGE;
  /* setval(seq, v, true): the next value is v + 1; with nothing to go
   * past, setval(seq, 1, false) makes it 1. */
  char *sql =
      xasprintf("SELECT setval(pg_get_serial_sequence('%s','%s'), "
                "GREATEST(%" PRId64 ", COALESCE(MAX(%s),0), 1), "
                "GREATEST(%" PRId64 ", COALESCE(MAX(%s),0)) > 0) FROM %s",
                t->name, t->serial, high, t->serial, high, t->serial, t->name);
  int rc = pg_exec_cmd(pg->wr, sql, NULL, 0);
  free(sql);
  return rc;
}
