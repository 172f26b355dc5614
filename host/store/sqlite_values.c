/* sqlite_values.c — the SQLite backend's scan of the values encrypted at
 * rest (backend.h values_each) and their rewrite (JOP_VALUE_RESEAL), for
 * the key rotation (journal_rekey.h).  A scan takes a page of instances
 * in rowid order, then the rows of theirs the other tables hold by the
 * same range of instance rowids, each table's primary key (or index)
 * leading with the instance. */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "journal_crypt.h"
#include "sqlite_internal.h"

/* Whether `stored` is a value to hand on: not NULL, and not starting
 * with skip. */
static int wanted(const char *stored, const char *skip) {
  return stored && (!skip || strncmp(stored, skip, strlen(skip)) != 0);
}

/* A column's value skipped by the scan's SQL already when it starts with
 * ?3 (a page of a big table need not come back whole). */
#define SKIP(col) "(?3 IS NULL OR substr(" col ",1,length(?3))<>?3)"

typedef struct scan {
  reader *r;
  const char *skip;
  journal_value_fn fn;
  void *ctx;
  int stopped; /* fn asked to stop */
} scan;

static int hand(scan *s, int field, int64_t rowid, const char *name,
                int64_t number, const char *stored) {
  if (s->stopped || !wanted(stored, s->skip))
    return 0;
  journal_value v = {.field = field,
                     .rowid = rowid,
                     .name = name,
                     .number = number,
                     .stored = stored};
  s->stopped = s->fn(s->ctx, &v) != 0;
  return 0;
}

/* Runs `sql` over instances (?1, ?2] and hands each row on with row_fn. */
static int child_rows(scan *s, const char *sql, int64_t after, int64_t last,
                      void (*row_fn)(scan *s, sqlite3_stmt *st)) {
  sqlite3_stmt *st;
  int rc = sqlite_prepare_rd(s->r, sql, &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, after);
  sqlite3_bind_int64(st, 2, last);
  bind_text(st, 3, s->skip);
  int q = SQLITE_DONE;
  while (!s->stopped && (q = sqlite3_step(st)) == SQLITE_ROW)
    row_fn(s, st);
  rc = s->stopped ? 0 : sqlite_rows_end(s->r, q);
  sqlite_release_rd(s->r, st);
  return rc;
}

static const char *text(sqlite3_stmt *st, int i) {
  return (const char *)sqlite3_column_text(st, i);
}

static void step_row(scan *s, sqlite3_stmt *st) {
  int64_t rowid = sqlite3_column_int64(st, 0);
  hand(s, JOURNAL_FIELD_STEP_RESULT, rowid, text(st, 1), 0, text(st, 2));
  hand(s, JOURNAL_FIELD_STEP_ERROR, rowid, text(st, 1), 0, text(st, 3));
}

static void attempt_row(scan *s, sqlite3_stmt *st) {
  hand(s, JOURNAL_FIELD_ATTEMPT_ERROR, sqlite3_column_int64(st, 0), text(st, 1),
       sqlite3_column_int64(st, 2), text(st, 3));
}

static void event_row(scan *s, sqlite3_stmt *st) {
  hand(s, JOURNAL_FIELD_EVENT, sqlite3_column_int64(st, 0), NULL,
       sqlite3_column_int64(st, 1), text(st, 2));
}

static void log_row(scan *s, sqlite3_stmt *st) {
  hand(s, JOURNAL_FIELD_LOG, sqlite3_column_int64(st, 0), NULL,
       sqlite3_column_int64(st, 1), text(st, 2));
}

static int instances_page(scan *s, int64_t after, size_t limit, int64_t *last) {
  sqlite3_stmt *st;
  int rc = sqlite_prepare_rd(s->r,
                             "SELECT rowid,workflow,params,output,error FROM "
                             "instances WHERE rowid>?1 ORDER BY rowid LIMIT ?2",
                             &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, after);
  sqlite3_bind_int64(st, 2, (int64_t)limit);
  int q = SQLITE_DONE;
  while (!s->stopped && (q = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t rowid = sqlite3_column_int64(st, 0);
    hand(s, JOURNAL_FIELD_PARAMS, rowid, text(st, 1), 0, text(st, 2));
    hand(s, JOURNAL_FIELD_OUTPUT, rowid, NULL, 0, text(st, 3));
    hand(s, JOURNAL_FIELD_ERROR, rowid, NULL, 0, text(st, 4));
    *last = rowid;
  }
  rc = s->stopped ? 0 : sqlite_rows_end(s->r, q);
  sqlite_release_rd(s->r, st);
  if (rc || s->stopped || *last == after)
    return rc;
  rc = child_rows(
      s,
      "SELECT instance,key,result,error FROM steps WHERE "
      "instance>?1 AND instance<=?2 AND ((result IS NOT NULL "
      "AND " SKIP("result") ") OR (error IS NOT NULL AND " SKIP("error") "))",
      after, *last, step_row);
  if (rc == 0)
    rc = child_rows(s,
                    "SELECT instance,key,number,error FROM attempts WHERE "
                    "instance>?1 AND instance<=?2 AND error IS NOT NULL "
                    "AND " SKIP("error"),
                    after, *last, attempt_row);
  if (rc == 0)
    rc = child_rows(s,
                    "SELECT instance,seq,payload FROM events WHERE "
                    "instance>?1 AND instance<=?2 AND " SKIP("payload"),
                    after, *last, event_row);
  if (rc == 0)
    rc = child_rows(s,
                    "SELECT instance,n,message FROM logs WHERE "
                    "instance>?1 AND instance<=?2 AND " SKIP("message"),
                    after, *last, log_row);
  return rc;
}

static int messages_page(scan *s, int64_t after, size_t limit, int64_t *last) {
  sqlite3_stmt *st;
  int rc = sqlite_prepare_rd(s->r,
                             "SELECT seq,body,last_error FROM messages WHERE "
                             "seq>?1 ORDER BY seq LIMIT ?2",
                             &st);
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, after);
  sqlite3_bind_int64(st, 2, (int64_t)limit);
  int q = SQLITE_DONE;
  while (!s->stopped && (q = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t seq = sqlite3_column_int64(st, 0);
    hand(s, JOURNAL_FIELD_MESSAGE, 0, NULL, seq, text(st, 1));
    hand(s, JOURNAL_FIELD_MESSAGE_ERROR, 0, NULL, seq, text(st, 2));
    *last = seq;
  }
  rc = s->stopped ? 0 : sqlite_rows_end(s->r, q);
  sqlite_release_rd(s->r, st);
  return rc;
}

int sqlite_values_each(void *db, int which, int64_t after, size_t limit,
                       const char *skip, journal_value_fn fn, void *ctx,
                       int64_t *last) {
  scan s = {.skip = skip, .fn = fn, .ctx = ctx};
  *last = after;
  if (!(s.r = sqlite_reader_take(db)))
    return DURO_E_STORAGE;
  int rc = which == JOURNAL_VALUES_MESSAGES
               ? messages_page(&s, after, limit, last)
               : instances_page(&s, after, limit, last);
  return sqlite_reader_give(db, s.r, rc);
}

int sqlite_value_reseal(sqlite_store *sq, journal_op *op) {
  const journal_value *v = op->value;
  /* after the new and old text: what finds its row */
  int places = journal_value_places(v->field);
  if (!places)
    return DURO_E_INVALID_ARGUMENT;
  sqlite3_stmt *st = sq->ws[ST_RESEAL_PARAMS + v->field];
  int i = 3;
  bind_text(st, 1, op->body);
  bind_text(st, 2, v->stored);
  if (places & JOURNAL_AT_ROWID)
    sqlite3_bind_int64(st, i++, v->rowid);
  if (places & JOURNAL_AT_NAME)
    bind_text(st, i++, v->name);
  if (places & JOURNAL_AT_NUMBER)
    sqlite3_bind_int64(st, i++, v->number);
  return sqlite_step_changes(sq, st, op);
}
