/* sqlite_bulk.c — bulk actions' jobs in the SQLite backend (journal.h's
 * journal_bulk): a job's row inserted, its progress and end written, a
 * cancel, a claim (every running job is the one host's), the sweep of
 * old ended jobs, and the reads of one job and of a workflow's. */
#include <sqlite3.h>
#include <stdlib.h>

#include "sqlite_internal.h"

static int insert(sqlite_store *sq, journal_op *op) {
  const journal_bulk *b = op->bulk;
  sqlite3_stmt *st = sq->ws[ST_BULK_INSERT];
  bind_text(st, 1, b->workflow);
  bind_text(st, 2, b->action);
  sqlite3_bind_int(st, 3, b->terminate);
  bind_text(st, 4,
            b->filter.status < 0 ? NULL : duro_status_name(b->filter.status));
  bind_text(st, 5,
            b->filter.prefix && *b->filter.prefix ? b->filter.prefix : NULL);
  sqlite3_bind_int64(st, 6, b->filter.created_after);
  sqlite3_bind_int64(st, 7, b->filter.created_before);
  sqlite3_bind_int64(st, 8, b->filter.ended_after);
  sqlite3_bind_int64(st, 9, b->filter.ended_before);
  sqlite3_bind_int64(st, 10, b->bound);
  sqlite3_bind_int64(st, 11, b->cursor);
  sqlite3_bind_int64(st, 12, b->matched);
  sqlite3_bind_int64(st, 13, b->created_ms);
  sqlite3_bind_int64(st, 14, b->host);
  bind_text(st, 15, b->where_terms);
  bind_text(st, 16, b->filter.ids);
  int rc = sqlite_step_done(sq, st);
  if (rc == 0)
    op->out_rowid = sqlite3_last_insert_rowid(sq->wr);
  return rc;
}

static int progress(sqlite_store *sq, journal_op *op) {
  const journal_bulk *b = op->bulk;
  sqlite3_stmt *st = sq->ws[ST_BULK_PROGRESS];
  sqlite3_bind_int64(st, 1, b->id);
  sqlite3_bind_int64(st, 2, b->host);
  sqlite3_bind_int64(st, 3, b->cursor);
  sqlite3_bind_int64(st, 4, b->done);
  sqlite3_bind_int64(st, 5, b->failed);
  sqlite3_bind_int64(st, 6, b->skipped);
  bind_text(st, 7, b->errors);
  bind_text(st, 8, b->plan);
  bind_text(st, 9, b->state);
  bind_ms(st, 10, b->ended_ms);
  return sqlite_step_changes(sq, st, op);
}

int sqlite_bulk_apply(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st;
  switch (op->kind) {
  case JOP_BULK_INSERT:
    return insert(sq, op);
  case JOP_BULK_PROGRESS:
    return progress(sq, op);
  case JOP_BULK_CANCEL:
    st = sq->ws[ST_BULK_CANCEL];
    sqlite3_bind_int64(st, 1, op->rowid);
    sqlite3_bind_int64(st, 2, op->ts_ms);
    return sqlite_step_changes(sq, st, op);
  case JOP_BULK_CLAIM:
    st = sq->ws[ST_BULK_CLAIM];
    sqlite3_bind_int64(st, 1, op->rowid);
    sqlite3_bind_int64(st, 2, op->from_seq);
    return sqlite_step_changes(sq, st, op);
  case JOP_BULK_SWEEP:
    st = sq->ws[ST_BULK_SWEEP];
    sqlite3_bind_int64(st, 1, op->ts_ms);
    sqlite3_bind_int64(st, 2, op->from_seq);
    return sqlite_step_changes(sq, st, op);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

#define BULK_COLUMNS                                                           \
  "SELECT id,workflow,action,terminate,status,prefix,created_after,"           \
  "created_before,ended_after,ended_before,bound,below,matched,done,failed,"   \
  "skipped,state,created_ms,ended_ms,host,errors,plan,where_terms,ids FROM "   \
  "bulk_jobs "

/* The row at the statement's cursor into *b (its strings copied). */
static void read_row(sqlite3_stmt *st, journal_bulk *b) {
  const char *status = col_name(st, 4);
  *b = (journal_bulk){
      .id = sqlite3_column_int64(st, 0),
      .workflow = col_text(st, 1),
      .action = col_text(st, 2),
      .terminate = sqlite3_column_int(st, 3),
      .filter = {.status = status ? duro_status_parse(status) : -1,
                 .prefix = col_text(st, 5),
                 .created_after = sqlite3_column_int64(st, 6),
                 .created_before = sqlite3_column_int64(st, 7),
                 .ended_after = sqlite3_column_int64(st, 8),
                 .ended_before = sqlite3_column_int64(st, 9),
                 .ids = col_text(st, 23)},
      .bound = sqlite3_column_int64(st, 10),
      .cursor = sqlite3_column_int64(st, 11),
      .matched = sqlite3_column_int64(st, 12),
      .done = sqlite3_column_int64(st, 13),
      .failed = sqlite3_column_int64(st, 14),
      .skipped = sqlite3_column_int64(st, 15),
      .state = col_text(st, 16),
      .created_ms = sqlite3_column_int64(st, 17),
      .ended_ms = col_ms(st, 18),
      .host = sqlite3_column_int64(st, 19),
      .errors = col_text(st, 20),
      .plan = col_text(st, 21),
      .where_terms = col_text(st, 22)};
}

int sqlite_bulk_get(void *db, int64_t id, journal_bulk *out) {
  rd q;
  int rc = rd_open(&q, db, BULK_COLUMNS "WHERE id=?1");
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, id);
    if (rd_row(&q))
      read_row(q.st, out);
    else
      rc = DURO_E_NOT_FOUND;
  }
  return rd_close(&q, rc);
}

int sqlite_bulk_list(void *db, const char *workflow, int running, size_t limit,
                     void (*fn)(void *ctx, const journal_bulk *b), void *ctx) {
  rd q;
  int rc = rd_open(&q, db,
                   BULK_COLUMNS "WHERE (?1 IS NULL OR workflow=?1) AND "
                                "(?2=0 OR state='running') "
                                "ORDER BY id DESC LIMIT ?3");
  if (rc == 0) {
    bind_text(q.st, 1, workflow);
    sqlite3_bind_int(q.st, 2, running);
    sqlite3_bind_int64(q.st, 3, (int64_t)limit);
    while (rd_row(&q)) {
      journal_bulk b;
      read_row(q.st, &b);
      fn(ctx, &b);
      journal_bulk_clear(&b);
    }
  }
  return rd_close(&q, rc);
}
