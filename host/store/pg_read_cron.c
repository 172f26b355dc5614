/* pg_read_cron.c — the PostgreSQL backend's reads of a cron trigger: its
 * state (since when, its newest tick, its counts) and its newest ticks. */
#include <libpq-fe.h>
#include <string.h>

#include "pg_internal.h"

int pg_cron_state(void *db, const char *trigger, journal_cron *out) {
  params p = {0};
  p_text(&p, trigger);
  memset(out, 0, sizeof *out);
  out->since_ms = out->last_tick_ms = JOURNAL_NONE;
  PGresult *r =
      pg_query(db,
               "SELECT since_ms, (SELECT MAX(tick_ms) FROM cron_ticks "
               "WHERE trigger=$1), complete, failed, missed, skipped "
               "FROM cron_triggers WHERE trigger=$1",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  if (PQntuples(r) > 0) {
    out->since_ms = get_i64(r, 0, 0);
    out->last_tick_ms = get_ms(r, 0, 1);
    out->complete = get_i64(r, 0, 2);
    out->failed = get_i64(r, 0, 3);
    out->missed = get_i64(r, 0, 4);
    out->skipped = get_i64(r, 0, 5);
  }
  PQclear(r);
  return 0;
}

int pg_cron_ticks(void *db, const char *trigger, const char *state,
                  size_t limit,
                  void (*fn)(void *ctx, const journal_cron_tick *t),
                  void *ctx) {
  params p = {0};
  p_text(&p, trigger);
  p_text(&p, state);
  p_i64(&p, (int64_t)limit);
  PGresult *r =
      pg_query(db,
               "SELECT tick_ms, state, fired_ms, instance, error FROM "
               "cron_ticks WHERE trigger=$1 AND ($2::text IS NULL OR "
               "state=$2::text) ORDER BY tick_ms DESC LIMIT $3",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++) {
    journal_cron_tick t = {get_i64(r, i, 0), get_str(r, i, 1), get_ms(r, i, 2),
                           get_str(r, i, 3), get_str(r, i, 4)};
    fn(ctx, &t);
  }
  PQclear(r);
  return 0;
}
