/* pg_read_pipeline.c — the PostgreSQL backend's reads of a pipeline: its
 * row with the oldest record waiting, and its sends in seq order. */
#include <libpq-fe.h>
#include <string.h>

#include "pg_internal.h"

int pg_pipeline_get(void *db, const char *pipeline, journal_pipeline *out) {
  params p = {0};
  p_text(&p, pipeline);
  memset(out, 0, sizeof *out);
  PGresult *r = pg_query(
      db,
      "SELECT next_seq, accepted, accepted_bytes, written, written_bytes, "
      "files, backlog_bytes, last_flush_ms, plan_first, plan_last, plan_ms, "
      "plan_host, plan_until, (SELECT sent_ms FROM pipeline_records WHERE "
      "pipeline=$1 ORDER BY seq LIMIT 1) FROM pipelines WHERE pipeline=$1",
      &p);
  if (!r)
    return DURO_E_STORAGE;
  int found = PQntuples(r) > 0;
  if (found) {
    out->next_seq = get_i64(r, 0, 0);
    out->accepted = get_i64(r, 0, 1);
    out->accepted_bytes = get_i64(r, 0, 2);
    out->written = get_i64(r, 0, 3);
    out->written_bytes = get_i64(r, 0, 4);
    out->files = get_i64(r, 0, 5);
    out->backlog_bytes = get_i64(r, 0, 6);
    out->last_flush_ms = get_ms(r, 0, 7);
    out->plan_first = get_i64(r, 0, 8); /* NULL: 0 */
    out->plan_last = get_i64(r, 0, 9);
    out->plan_ms = get_i64(r, 0, 10);
    out->plan_host = get_i64(r, 0, 11);
    out->plan_until = get_i64(r, 0, 12);
    out->oldest_ms = get_ms(r, 0, 13);
    out->backlog = out->accepted - out->written;
  }
  PQclear(r);
  return found ? 0 : DURO_E_NOT_FOUND;
}

/* The sends from the one holding $2 (the last at or before it) to $3. */
int pg_pipeline_sends(void *db, const char *pipeline, int64_t from_seq,
                      int64_t to_seq, size_t limit, int with_body,
                      int (*fn)(void *ctx, const journal_pipeline_send *s),
                      void *ctx) {
  params p = {0};
  p_text(&p, pipeline);
  p_i64(&p, from_seq);
  p_i64(&p, to_seq);
  p_i64(&p, (int64_t)limit);
  p_text(&p, with_body ? "t" : "f");
  PGresult *r = pg_query(
      db,
      "SELECT seq, last, bytes, sent_ms, CASE WHEN $5::boolean THEN body END "
      "FROM pipeline_records WHERE pipeline=$1 AND seq>=COALESCE((SELECT "
      "MAX(seq) FROM pipeline_records WHERE pipeline=$1 AND seq<=$2), $2) "
      "AND seq<=$3 ORDER BY seq LIMIT $4",
      &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++) {
    journal_pipeline_send s = {
        .first = get_i64(r, i, 0),
        .last = get_i64(r, i, 1),
        .bytes = get_i64(r, i, 2),
        .sent_ms = get_i64(r, i, 3),
        .body = get_str(r, i, 4),
        .len = (size_t)PQgetlength(r, i, 4),
    };
    if (fn(ctx, &s))
      break;
  }
  PQclear(r);
  return 0;
}
