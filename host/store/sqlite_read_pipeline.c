/* sqlite_read_pipeline.c — the SQLite backend's reads of a pipeline: its
 * row with the oldest record waiting, and its records in seq order. */
#include <sqlite3.h>
#include <string.h>

#include "sqlite_internal.h"

static const char sql_pipeline_get[] =
    "SELECT next_seq, accepted, accepted_bytes, written, written_bytes, "
    "files, backlog_bytes, last_flush_ms, plan_first, plan_last, plan_ms, "
    "plan_host, plan_until, (SELECT sent_ms FROM pipeline_records WHERE "
    "pipeline=?1 ORDER BY seq LIMIT 1) FROM pipelines WHERE pipeline=?1";

int sqlite_pipeline_get(void *db, const char *pipeline, journal_pipeline *out) {
  memset(out, 0, sizeof *out);
  rd q;
  int found = 0;
  int rc = rd_open(&q, db, sql_pipeline_get);
  if (rc == 0) {
    bind_text(q.st, 1, pipeline);
    if (rd_row(&q)) {
      sqlite3_stmt *st = q.st;
      found = 1;
      out->next_seq = sqlite3_column_int64(st, 0);
      out->accepted = sqlite3_column_int64(st, 1);
      out->accepted_bytes = sqlite3_column_int64(st, 2);
      out->written = sqlite3_column_int64(st, 3);
      out->written_bytes = sqlite3_column_int64(st, 4);
      out->files = sqlite3_column_int64(st, 5);
      out->backlog_bytes = sqlite3_column_int64(st, 6);
      out->last_flush_ms = col_ms(st, 7);
      out->plan_first = sqlite3_column_int64(st, 8); /* NULL: 0 */
      out->plan_last = sqlite3_column_int64(st, 9);
      out->plan_ms = sqlite3_column_int64(st, 10);
      out->plan_host = sqlite3_column_int64(st, 11);
      out->plan_until = sqlite3_column_int64(st, 12);
      out->oldest_ms = col_ms(st, 13);
      out->backlog = out->accepted - out->written;
      rd_row(&q);
    }
  }
  rc = rd_close(&q, rc);
  return rc ? rc : found ? 0 : DURO_E_NOT_FOUND;
}

/* The sends from the one holding ?2 (the last at or before it) to ?3. */
static const char sql_pipeline_sends[] =
    "SELECT seq, last, bytes, sent_ms, CASE WHEN ?5 THEN body END FROM "
    "pipeline_records WHERE pipeline=?1 AND seq>=COALESCE((SELECT MAX(seq) "
    "FROM pipeline_records WHERE pipeline=?1 AND seq<=?2), ?2) AND seq<=?3 "
    "ORDER BY seq LIMIT ?4";

int sqlite_pipeline_sends(void *db, const char *pipeline, int64_t from_seq,
                          int64_t to_seq, size_t limit, int with_body,
                          int (*fn)(void *ctx, const journal_pipeline_send *s),
                          void *ctx) {
  rd q;
  int rc = rd_open(&q, db, sql_pipeline_sends);
  if (rc == 0) {
    bind_text(q.st, 1, pipeline);
    sqlite3_bind_int64(q.st, 2, from_seq);
    sqlite3_bind_int64(q.st, 3, to_seq);
    sqlite3_bind_int64(q.st, 4, (sqlite3_int64)limit);
    sqlite3_bind_int(q.st, 5, with_body);
    while (rd_row(&q)) {
      sqlite3_stmt *st = q.st;
      journal_pipeline_send s = {
          .first = sqlite3_column_int64(st, 0),
          .last = sqlite3_column_int64(st, 1),
          .bytes = sqlite3_column_int64(st, 2),
          .sent_ms = sqlite3_column_int64(st, 3),
          .body = (const char *)sqlite3_column_text(st, 4),
      };
      s.len = (size_t)sqlite3_column_bytes(st, 4);
      if (fn(ctx, &s))
        break;
    }
  }
  return rd_close(&q, rc);
}
