/* pg_read_queue.c — the PostgreSQL backend's reads of queues: the stats
 * of each, what is ready for a consumer's dispatch, a token's leases, the
 * oldest messages peeked, and the counts of those dropped or
 * dead-lettered. */
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"
#include "queue_keys.h"

int pg_queue_stats_each(void *db, const char *queue, int64_t now_ms,
                        void (*fn)(void *ctx, const char *queue,
                                   const journal_queue_stats *st),
                        void *ctx) {
  params p = {0};
  p_text(&p, queue);
  p_i64(&p, now_ms);
  PGresult *r = pg_query(
      db,
      "SELECT queue, SUM((visible_ms<=$2)::int), SUM((visible_ms>$2 AND "
      "lease IS NULL)::int), SUM((visible_ms>$2 AND lease IS NOT NULL)::int), "
      "MIN(sent_ms), MIN(CASE WHEN visible_ms<=$2 THEN visible_ms END) "
      "FROM messages WHERE $1::text IS NULL OR queue=$1::text "
      "GROUP BY queue ORDER BY queue",
      &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++) {
    journal_queue_stats q = {get_i64(r, i, 1), get_i64(r, i, 2),
                             get_i64(r, i, 3), get_ms(r, i, 4),
                             get_ms(r, i, 5)};
    fn(ctx, get_str(r, i, 0), &q);
  }
  PQclear(r);
  return 0;
}

int pg_queue_ready(void *db, const char *queue, int64_t now_ms, uint32_t limit,
                   journal_queue_ready_info *out) {
  params p = {0};
  p_text(&p, queue);
  p_i64(&p, now_ms);
  p_i64(&p, limit);
  PGresult *r =
      pg_query(db,
               "SELECT COUNT(*), MIN(visible_ms) FROM (SELECT visible_ms FROM "
               "messages WHERE queue=$1 AND visible_ms<=$2 ORDER BY visible_ms "
               "LIMIT $3) AS ready",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  out->ready = (uint32_t)get_i64(r, 0, 0);
  out->oldest_visible_ms = get_ms(r, 0, 1);
  PQclear(r);
  params q = {0};
  p_text(&q, queue);
  p_i64(&q, now_ms);
  r = pg_query(db,
               "SELECT MIN(visible_ms) FROM messages WHERE queue=$1 AND "
               "visible_ms>$2",
               &q);
  if (!r)
    return DURO_E_STORAGE;
  out->next_visible_ms = get_ms(r, 0, 0);
  PQclear(r);
  return 0;
}

/* The token's leases: "<token>-<seq>" sorts between "<token>-" and
 * "<token>." bytewise (the columns' "C" collation). */
int pg_queue_leases(void *db, const char *queue, int64_t now_ms,
                    const char *token, void (*fn)(void *ctx, const char *lease),
                    void *ctx) {
  char *lo = xasprintf("%s-", token), *hi = xasprintf("%s.", token);
  params p = {0};
  p_text(&p, queue);
  p_i64(&p, now_ms);
  p_text(&p, lo);
  p_text(&p, hi);
  PGresult *r = pg_query(db,
                         "SELECT lease FROM messages WHERE queue=$1 AND "
                         "visible_ms>$2 AND lease>=$3 AND lease<$4",
                         &p);
  free(lo);
  free(hi);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_str(r, i, 0));
  PQclear(r);
  return 0;
}

/* As sqlite_read_queue.c: oldest sent first (messages_age), the lease only
 * while held. */
int pg_queue_peek(void *db, const char *queue, int64_t now_ms, size_t limit,
                  journal_message **out, size_t *n) {
  *out = NULL;
  *n = 0;
  params p = {0};
  p_text(&p, queue);
  p_i64(&p, now_ms);
  p_i64(&p, (int64_t)limit);
  PGresult *r = pg_query(db,
                         "SELECT seq, body, attempts, sent_ms, visible_ms, "
                         "CASE WHEN visible_ms>$2 THEN lease END, last_error "
                         "FROM messages WHERE queue=$1 "
                         "ORDER BY sent_ms, seq LIMIT $3",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  size_t rows = (size_t)PQntuples(r);
  journal_message *v = xcalloc(rows ? rows : 1, sizeof *v);
  for (size_t i = 0; i < rows && i < limit; i++) {
    journal_message *m = &v[(*n)++];
    m->seq = get_i64(r, (int)i, 0);
    m->queue = xstrdup(queue);
    m->body = get_text(r, (int)i, 1);
    m->attempts = (uint32_t)get_i64(r, (int)i, 2);
    m->sent_ms = get_i64(r, (int)i, 3);
    m->visible_ms = get_i64(r, (int)i, 4);
    m->lease = get_text(r, (int)i, 5);
    m->last_error = get_text(r, (int)i, 6);
  }
  PQclear(r);
  *out = v;
  return 0;
}

int pg_queue_counts_each(void *db,
                         void (*fn)(void *ctx, const char *queue,
                                    int64_t dropped, int64_t dead_lettered),
                         void *ctx) {
  params p = {0};
  PGresult *r = pg_query(
      db, "SELECT queue, dropped, dead_lettered FROM queue_counts", &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_str(r, i, 0), get_i64(r, i, 1), get_i64(r, i, 2));
  PQclear(r);
  return 0;
}

void pg_keys_ahead(const PGresult *r, queue_keys *keys) {
  for (int i = 0; i < PQntuples(r); i++) {
    int64_t seq = get_i64(r, i, 0);
    const char *key =
        queue_keys_key(keys, seq, get_str(r, i, 2), get_str(r, i, 3));
    queue_keys_ahead(keys, key, get_i64(r, i, 1), seq, (int)get_i64(r, i, 4));
  }
}

/* The walk of a keyed lease (pg_write_queue.c) over every visible
 * message, page by page on a reader: the same SQL, so the same rule, with
 * the stored keys when they are the pointer's (else each computed from
 * its body), and no key passed over, so that all the held are counted. */
int pg_queue_held(void *db, const char *queue, int64_t now_ms,
                  const char *pointer, uint32_t limit,
                  const struct journal_crypt *crypt, int64_t *held) {
  *held = 0;
  params p = {0};
  p_text(&p, queue);
  PGresult *r =
      pg_query(db, "SELECT pointer FROM queue_key_pointers WHERE queue=$1", &p);
  if (!r)
    return DURO_E_STORAGE;
  int current = PQntuples(r) == 1 && !strcmp(get_str(r, 0, 0), pointer);
  PQclear(r);
  p_i64(&p, now_ms);
  p_i64(&p, current);
  if (!(r = pg_query(db, PG_SQL_KEY_AHEAD, &p)))
    return DURO_E_STORAGE;
  queue_keys *keys = queue_keys_new(pointer, limit, crypt);
  pg_keys_ahead(r, keys);
  PQclear(r);
  int64_t after_sent = INT64_MIN, after_seq = 0;
  int rows = PG_KEY_PAGE, rc = 0;
  while (rows == PG_KEY_PAGE) {
    params q = {0};
    p_text(&q, queue);
    p_i64(&q, now_ms);
    p_i64(&q, after_sent);
    p_i64(&q, after_seq);
    p_i64(&q, PG_KEY_PAGE);
    p_i64(&q, current);
    p_text(&q, "[]");
    if (!(r = pg_query(db, PG_SQL_KEY_PAGE, &q))) {
      rc = DURO_E_STORAGE;
      break;
    }
    rows = PQntuples(r);
    for (int i = 0; i < rows; i++) {
      after_seq = get_i64(r, i, 0);
      after_sent = get_i64(r, i, 3);
      const char *key =
          queue_keys_key(keys, after_seq, get_str(r, i, 6), get_str(r, i, 2));
      queue_keys_admit(keys, key, after_sent, after_seq);
    }
    PQclear(r);
  }
  *held = rc ? 0 : queue_keys_held(keys);
  queue_keys_free(keys);
  return rc;
}
