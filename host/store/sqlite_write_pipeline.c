/* sqlite_write_pipeline.c — the SQLite backend's ops on pipelines: a
 * pipeline declared, a send's records appended under its next seqs, a
 * batch's plan recorded or claimed, and a batch done (its records
 * deleted, counted written, the plan cleared). */
#include <limits.h>
#include <sqlite3.h>
#include <string.h>

#include "sqlite_internal.h"

/* The send's seqs: the pipeline's counter moved on once by n, and its
 * records one row, in the same transaction. */
static int append(sqlite_store *sq, journal_op *op) {
  size_t len = strlen(op->body); /* the records' bytes, newlines included */
  int64_t n = op->from_seq;
  if (len > INT_MAX || !store_pipeline_lines_are(op->body, len, op->from_seq)) {
    op->rc = DURO_E_INVALID_ARGUMENT;
    return 0;
  }
  sqlite3_stmt *st = sq->ws[ST_PIPELINE_NEXT];
  bind_text(st, 1, op->queue);
  sqlite3_bind_int64(st, 2, (int64_t)len);
  sqlite3_bind_int64(st, 3, n);
  int s = sqlite3_step(st);
  int64_t last = s == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  if (s == SQLITE_ROW)
    s = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (s != SQLITE_DONE) {
    sqlite_set_err(sq->wr, NULL);
    return DURO_E_STORAGE;
  }
  if (!last) {
    op->rc = DURO_E_NOT_FOUND;
    return 0;
  }
  op->out_rowid = last - n + 1;
  st = sq->ws[ST_PIPELINE_RECORD];
  bind_text(st, 1, op->queue);
  sqlite3_bind_int64(st, 2, op->out_rowid);
  sqlite3_bind_int64(st, 3, last);
  sqlite3_bind_text(st, 4, op->body, (int)len, SQLITE_STATIC);
  sqlite3_bind_int64(st, 5, (int64_t)len);
  sqlite3_bind_int64(st, 6, op->ts_ms);
  return sqlite_step_done(sq, st);
}

/* The counts move and the plan clears only while the plan is this
 * host's; then its records go. */
static int done(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st = sq->ws[ST_PIPELINE_DONE];
  bind_text(st, 1, op->queue);
  sqlite3_bind_int64(st, 2, op->from_seq);
  sqlite3_bind_int64(st, 3, op->event_seq);
  sqlite3_bind_int64(st, 4, op->rowid);
  sqlite3_bind_int64(st, 5, op->ts_ms);
  int rc = sqlite_step_changes(sq, st, op);
  if (rc || !op->out_rowid)
    return rc;
  st = sq->ws[ST_PIPELINE_DELETE];
  bind_text(st, 1, op->queue);
  sqlite3_bind_int64(st, 2, op->from_seq);
  sqlite3_bind_int64(st, 3, op->event_seq);
  return sqlite_step_done(sq, st);
}

int sqlite_pipeline_apply(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st;
  switch (op->kind) {
  case JOP_PIPELINE_DECLARE:
    st = sq->ws[ST_PIPELINE_DECLARE];
    bind_text(st, 1, op->queue);
    return sqlite_step_done(sq, st);
  case JOP_PIPELINE_APPEND:
    return append(sq, op);
  case JOP_PIPELINE_PLAN:
    st = sq->ws[ST_PIPELINE_PLAN];
    bind_text(st, 1, op->queue);
    sqlite3_bind_int64(st, 2, op->from_seq);
    sqlite3_bind_int64(st, 3, op->event_seq);
    sqlite3_bind_int64(st, 4, op->ts_ms);
    sqlite3_bind_int64(st, 5, op->rowid);
    sqlite3_bind_int64(st, 6, op->visible_ms);
    return sqlite_step_changes(sq, st, op);
  case JOP_PIPELINE_CLAIM:
    st = sq->ws[ST_PIPELINE_CLAIM];
    bind_text(st, 1, op->queue);
    sqlite3_bind_int64(st, 2, op->rowid);
    sqlite3_bind_int64(st, 3, op->ts_ms);
    sqlite3_bind_int64(st, 4, op->visible_ms);
    return sqlite_step_changes(sq, st, op);
  case JOP_PIPELINE_DONE:
    return done(sq, op);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}
