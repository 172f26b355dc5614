/* sqlite_log.c — the SQLite backend's log lines of instances: a line
 * appended under the instance's next number (the oldest past the bound
 * deleted in the same transaction), and the lines read after a number. */
#include <sqlite3.h>

#include "sqlite_internal.h"
#include "util.h"

int sqlite_log_apply(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st = sq->ws[ST_LOG_APPEND];
  sqlite3_bind_int64(st, 1, op->rowid);
  sqlite3_bind_int64(st, 2, op->ts_ms);
  sqlite3_bind_int64(st, 3, op->from_seq);
  bind_text(st, 4, op->step_key);
  sqlite3_bind_int64(st, 5, op->event_seq);
  bind_text(st, 6, op->body);
  int s = sqlite3_step(st);
  int64_t n = s == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  if (s == SQLITE_ROW)
    s = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (s != SQLITE_DONE) {
    sqlite_set_err(sq->wr, NULL);
    return DURO_E_STORAGE;
  }
  op->out_rowid = n;
  if (n <= (int64_t)op->max_attempts)
    return 0;
  st = sq->ws[ST_LOG_TRIM];
  sqlite3_bind_int64(st, 1, op->rowid);
  sqlite3_bind_int64(st, 2, n - (int64_t)op->max_attempts);
  return sqlite_step_done(sq, st);
}

int sqlite_logs_read(void *db, int64_t rowid, int64_t after, size_t limit,
                     journal_log **out, size_t *n) {
  journal_log *v = NULL;
  size_t len = 0, cap = 0;
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT n,ts_ms,level,step,attempt,message FROM logs "
                   "WHERE instance=?1 AND n>?2 ORDER BY n LIMIT ?3");
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, rowid);
    sqlite3_bind_int64(q.st, 2, after);
    sqlite3_bind_int64(q.st, 3, (int64_t)limit);
    while (rd_row(&q)) {
      if (len == cap) {
        cap = cap ? cap * 2 : 16;
        v = xrealloc(v, cap * sizeof *v);
      }
      journal_log *o = &v[len++];
      o->n = sqlite3_column_int64(q.st, 0);
      o->ts_ms = sqlite3_column_int64(q.st, 1);
      o->level = sqlite3_column_int(q.st, 2);
      o->step = col_text(q.st, 3);
      o->attempt = (uint32_t)sqlite3_column_int64(q.st, 4);
      o->message = col_text(q.st, 5);
    }
  }
  if ((rc = rd_close(&q, rc))) {
    journal_logs_free(v, len);
    v = NULL;
    len = 0;
  }
  *out = v;
  *n = len;
  return rc;
}
