/* pg_write_cron.c — the PostgreSQL backend's ops on cron triggers: a
 * trigger's start, its ticks claimed and settled (each counted by its
 * state), the missed ones counted, and the sweep of old ticks. */
#include "pg_internal.h"

static int cron_count(pg_store *pg, const char *trigger, const char *state) {
  params p = {0};
  p_text(&p, trigger);
  p_text(&p, state);
  return pg_write_queue(pg, ST_CRON_COUNT, &p);
}

/* A tick row's write; a row it changed counts in its state. */
static int cron_tick_written(pg_store *pg, int which, const params *p,
                             journal_op *op) {
  int rc = pg_write_changes(pg, which, p, op);
  return rc || !op->out_rowid ? rc : cron_count(pg, op->queue, op->body);
}

/* A cron trigger's ops: its start, its ticks, their sweep. */
int pg_cron_apply(pg_store *pg, journal_op *op) {
  params p = {0};
  switch (op->kind) {
  case JOP_CRON_SINCE:
    p_text(&p, op->queue);
    p_i64(&p, op->ts_ms);
    return pg_write_queue(pg, ST_CRON_SINCE, &p);
  case JOP_CRON_TICK:
    p_text(&p, op->queue);
    p_i64(&p, op->visible_ms);
    p_text(&p, op->body);
    p_ms(&p, op->ts_ms);
    p_text(&p, op->lease);
    p_text(&p, op->error);
    return cron_tick_written(pg, ST_CRON_TICK, &p, op);
  case JOP_CRON_TICK_SET:
    p_text(&p, op->queue);
    p_i64(&p, op->visible_ms);
    p_text(&p, op->body);
    p_text(&p, op->error);
    return cron_tick_written(pg, ST_CRON_TICK_SET, &p, op);
  case JOP_CRON_SWEEP:
    p_i64(&p, op->ts_ms);
    return pg_write_changes(pg, ST_CRON_SWEEP, &p, op);
  case JOP_CRON_MISSED_EXTRA:
    p_text(&p, op->queue);
    p_i64(&p, op->from_seq);
    return pg_write_queue(pg, ST_CRON_MISSED_EXTRA, &p);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}
