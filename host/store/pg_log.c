/* pg_log.c — the PostgreSQL backend's log lines of instances, as
 * sqlite_log.c: a line appended under the instance's next number (the
 * oldest past the bound deleted in the same statement), and the lines
 * read after a number. */
#include <libpq-fe.h>

#include "pg_internal.h"
#include "util.h"

int pg_log_apply(pg_store *pg, journal_op *op) {
  params p = {0};
  p_i64(&p, op->rowid);
  p_i64(&p, op->ts_ms);
  p_i64(&p, op->from_seq);
  p_text(&p, op->step_key);
  p_i64(&p, op->event_seq);
  p_text(&p, op->body);
  p_i64(&p, (int64_t)op->max_attempts);
  /* queued with the group's other writes: nobody waits on its number */
  return pg_write_queue(pg, ST_LOG_APPEND, &p);
}

int pg_logs_read(void *db, int64_t rowid, int64_t after, size_t limit,
                 journal_log **out, size_t *n) {
  params p = {0};
  p_i64(&p, rowid);
  p_i64(&p, after);
  p_i64(&p, (int64_t)limit);
  *out = NULL;
  *n = 0;
  PGresult *r = pg_query(db,
                         "SELECT n,ts_ms,level,step,attempt,message FROM logs "
                         "WHERE instance=$1 AND n>$2 ORDER BY n LIMIT $3",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  int rows = PQntuples(r);
  journal_log *v = rows ? xcalloc((size_t)rows, sizeof *v) : NULL;
  for (int i = 0; i < rows; i++) {
    v[i].n = get_i64(r, i, 0);
    v[i].ts_ms = get_i64(r, i, 1);
    v[i].level = (int)get_i64(r, i, 2);
    v[i].step = get_text(r, i, 3);
    v[i].attempt = (uint32_t)get_i64(r, i, 4);
    v[i].message = get_text(r, i, 5);
  }
  PQclear(r);
  *out = v;
  *n = (size_t)rows;
  return 0;
}
