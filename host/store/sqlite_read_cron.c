/* sqlite_read_cron.c — the SQLite backend's reads of a cron trigger: its
 * state (since when, its newest tick, its counts) and its newest ticks. */
#include <sqlite3.h>
#include <string.h>

#include "sqlite_internal.h"

static const char sql_cron_state[] =
    "SELECT since_ms, (SELECT MAX(tick_ms) FROM cron_ticks WHERE trigger=?1),"
    " complete, failed, missed, skipped FROM cron_triggers WHERE trigger=?1";

int sqlite_cron_state(void *db, const char *trigger, journal_cron *out) {
  memset(out, 0, sizeof *out);
  out->since_ms = out->last_tick_ms = JOURNAL_NONE;
  rd q;
  int rc = rd_open(&q, db, sql_cron_state);
  if (rc == 0) {
    bind_text(q.st, 1, trigger);
    if (rd_row(&q)) {
      sqlite3_stmt *st = q.st;
      out->since_ms = sqlite3_column_int64(st, 0);
      out->last_tick_ms = col_ms(st, 1);
      out->complete = sqlite3_column_int64(st, 2);
      out->failed = sqlite3_column_int64(st, 3);
      out->missed = sqlite3_column_int64(st, 4);
      out->skipped = sqlite3_column_int64(st, 5);
      rd_row(&q);
    }
  }
  return rd_close(&q, rc);
}

static const char sql_cron_ticks[] =
    "SELECT tick_ms, state, fired_ms, instance, error FROM cron_ticks WHERE "
    "trigger=?1 AND (?2 IS NULL OR state=?2) ORDER BY tick_ms DESC LIMIT ?3";

int sqlite_cron_ticks(void *db, const char *trigger, const char *state,
                      size_t limit,
                      void (*fn)(void *ctx, const journal_cron_tick *t),
                      void *ctx) {
  rd q;
  int rc = rd_open(&q, db, sql_cron_ticks);
  if (rc == 0) {
    bind_text(q.st, 1, trigger);
    bind_text(q.st, 2, state);
    sqlite3_bind_int64(q.st, 3, (sqlite3_int64)limit);
    while (rd_row(&q)) {
      sqlite3_stmt *st = q.st;
      journal_cron_tick t = {
          sqlite3_column_int64(st, 0), (const char *)sqlite3_column_text(st, 1),
          col_ms(st, 2), (const char *)sqlite3_column_text(st, 3),
          (const char *)sqlite3_column_text(st, 4)};
      fn(ctx, &t);
    }
  }
  return rd_close(&q, rc);
}
