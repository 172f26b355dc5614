/* sqlite_write_cron.c — the SQLite backend's ops on cron triggers: a
 * trigger's start, its ticks claimed and settled (each counted by its
 * state), the missed ones counted, and the sweep of old ticks. */
#include <sqlite3.h>

#include "sqlite_internal.h"

/* Counts a tick of the trigger by its state (cron_triggers). */
static int cron_count(sqlite_store *sq, const char *trigger,
                      const char *state) {
  sqlite3_stmt *st = sq->ws[ST_CRON_COUNT];
  bind_text(st, 1, trigger);
  bind_text(st, 2, state);
  return sqlite_step_done(sq, st);
}

/* Runs a tick row's write; a row it changed counts in its state. */
static int cron_tick_written(sqlite_store *sq, sqlite3_stmt *st,
                             journal_op *op) {
  int rc = sqlite_step_changes(sq, st, op);
  return rc || !op->out_rowid ? rc : cron_count(sq, op->queue, op->body);
}

/* A cron trigger's ops: its start, its ticks, their sweep. */
int sqlite_cron_apply(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st;
  switch (op->kind) {
  case JOP_CRON_SINCE:
    st = sq->ws[ST_CRON_SINCE];
    bind_text(st, 1, op->queue);
    sqlite3_bind_int64(st, 2, op->ts_ms);
    return sqlite_step_done(sq, st);
  case JOP_CRON_TICK:
    st = sq->ws[ST_CRON_TICK];
    bind_text(st, 1, op->queue);
    sqlite3_bind_int64(st, 2, op->visible_ms);
    bind_text(st, 3, op->body);
    bind_ms(st, 4, op->ts_ms);
    bind_text(st, 5, op->lease);
    bind_text(st, 6, op->error);
    return cron_tick_written(sq, st, op);
  case JOP_CRON_TICK_SET:
    st = sq->ws[ST_CRON_TICK_SET];
    bind_text(st, 1, op->queue);
    sqlite3_bind_int64(st, 2, op->visible_ms);
    bind_text(st, 3, op->body);
    bind_text(st, 4, op->error);
    return cron_tick_written(sq, st, op);
  case JOP_CRON_SWEEP:
    st = sq->ws[ST_CRON_SWEEP];
    sqlite3_bind_int64(st, 1, op->ts_ms);
    return sqlite_step_changes(sq, st, op);
  case JOP_CRON_MISSED_EXTRA:
    st = sq->ws[ST_CRON_MISSED_EXTRA];
    bind_text(st, 1, op->queue);
    sqlite3_bind_int64(st, 2, op->from_seq);
    return sqlite_step_done(sq, st);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}
