/* sqlite_read_queue.c — the SQLite backend's reads of queues: the stats
 * of each, what is ready for a consumer's dispatch, a token's leases, the
 * oldest messages peeked, and the counts of those dropped or
 * dead-lettered. */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "queue_keys.h"
#include "sqlite_internal.h"

/* One pass over the queue's rows (or every row): the counts are sums of
 * conditions rather than separate index probes. */
int sqlite_queue_stats_each(void *db, const char *queue, int64_t now_ms,
                            void (*fn)(void *ctx, const char *queue,
                                       const journal_queue_stats *st),
                            void *ctx) {
  rd q;
  int rc = rd_open(
      &q, db,
      "SELECT queue, SUM(visible_ms<=?2), SUM(visible_ms>?2 AND lease IS "
      "NULL), SUM(visible_ms>?2 AND lease IS NOT NULL), MIN(sent_ms), "
      "MIN(CASE WHEN visible_ms<=?2 THEN visible_ms END) FROM messages "
      "WHERE ?1 IS NULL OR queue=?1 GROUP BY queue ORDER BY queue");
  if (rc == 0) {
    bind_text(q.st, 1, queue);
    sqlite3_bind_int64(q.st, 2, now_ms);
    while (rd_row(&q)) {
      sqlite3_stmt *st = q.st;
      journal_queue_stats t = {
          sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
          sqlite3_column_int64(st, 3), col_ms(st, 4), col_ms(st, 5)};
      fn(ctx, (const char *)sqlite3_column_text(st, 0), &t);
    }
  }
  return rd_close(&q, rc);
}

/* Two probes of messages_next, each reading at most `limit` + 1 rows:
 * what a consumer's dispatch asks on every pass, whatever the queue's
 * depth. */
static const char sql_queue_ready[] =
    "SELECT COUNT(*), MIN(visible_ms) FROM (SELECT visible_ms FROM messages "
    "WHERE queue=?1 AND visible_ms<=?2 ORDER BY visible_ms LIMIT ?3)";
static const char sql_queue_next[] =
    "SELECT MIN(visible_ms) FROM messages WHERE queue=?1 AND visible_ms>?2";

int sqlite_queue_ready(void *db, const char *queue, int64_t now_ms,
                       uint32_t limit, journal_queue_ready_info *out) {
  reader *r = sqlite_reader_take(db);
  sqlite3_stmt *st = NULL;
  int s = SQLITE_DONE;
  int rc = sqlite_prepare_rd(r, sql_queue_ready, &st);
  if (rc == 0) {
    bind_text(st, 1, queue);
    sqlite3_bind_int64(st, 2, now_ms);
    sqlite3_bind_int64(st, 3, limit);
    if ((s = sqlite3_step(st)) == SQLITE_ROW) {
      out->ready = (uint32_t)sqlite3_column_int64(st, 0);
      out->oldest_visible_ms = col_ms(st, 1);
      s = sqlite3_step(st);
    }
    rc = sqlite_rows_end(r, s);
    sqlite_release_rd(r, st);
  }
  if (rc == 0 && (rc = sqlite_prepare_rd(r, sql_queue_next, &st)) == 0) {
    bind_text(st, 1, queue);
    sqlite3_bind_int64(st, 2, now_ms);
    if ((s = sqlite3_step(st)) == SQLITE_ROW) {
      out->next_visible_ms = col_ms(st, 0);
      s = sqlite3_step(st);
    }
    rc = sqlite_rows_end(r, s);
    sqlite_release_rd(r, st);
  }
  return sqlite_reader_give(db, r, rc);
}

/* The queue's held messages (visible_ms after now: in flight, or
 * delayed, which hold no lease) on messages_next, with the token's
 * leases: "<token>-<seq>" sorts between "<token>-" and "<token>.". */
static const char sql_queue_leases[] =
    "SELECT lease FROM messages WHERE queue=?1 AND visible_ms>?2 AND "
    "lease>=?3 AND lease<?4";

int sqlite_queue_leases(void *db, const char *queue, int64_t now_ms,
                        const char *token,
                        void (*fn)(void *ctx, const char *lease), void *ctx) {
  rd q;
  int rc = rd_open(&q, db, sql_queue_leases);
  if (rc)
    return rd_close(&q, rc);
  char *lo = xasprintf("%s-", token), *hi = xasprintf("%s.", token);
  bind_text(q.st, 1, queue);
  sqlite3_bind_int64(q.st, 2, now_ms);
  bind_text(q.st, 3, lo);
  bind_text(q.st, 4, hi);
  while (rd_row(&q))
    fn(ctx, (const char *)sqlite3_column_text(q.st, 0));
  rc = rd_close(&q, rc);
  free(lo);
  free(hi);
  return rc;
}

/* On messages_age, so a deep queue costs `limit` rows.  The lease only
 * while held: an expired one names no holder any more. */
static const char sql_queue_peek[] =
    "SELECT seq, body, attempts, sent_ms, visible_ms, "
    "CASE WHEN visible_ms>?2 THEN lease END, last_error FROM messages "
    "WHERE queue=?1 ORDER BY sent_ms, seq LIMIT ?3";

int sqlite_queue_peek(void *db, const char *queue, int64_t now_ms, size_t limit,
                      journal_message **out, size_t *n) {
  *out = NULL;
  *n = 0;
  rd q;
  int rc = rd_open(&q, db, sql_queue_peek);
  if (rc)
    return rd_close(&q, rc);
  bind_text(q.st, 1, queue);
  sqlite3_bind_int64(q.st, 2, now_ms);
  sqlite3_bind_int64(q.st, 3, (sqlite3_int64)limit);
  journal_message *v = xcalloc(limit ? limit : 1, sizeof *v);
  while (*n < limit && rd_row(&q)) {
    sqlite3_stmt *st = q.st;
    journal_message *m = &v[(*n)++];
    m->seq = sqlite3_column_int64(st, 0);
    m->queue = xstrdup(queue);
    m->body = col_text(st, 1);
    m->attempts = (uint32_t)sqlite3_column_int64(st, 2);
    m->sent_ms = sqlite3_column_int64(st, 3);
    m->visible_ms = sqlite3_column_int64(st, 4);
    m->lease = col_text(st, 5);
    m->last_error = col_text(st, 6);
  }
  *out = v;
  return rd_close(&q, rc);
}

/* The pointer the queue's stored keys are of. */
static const char sql_queue_key_pointer[] =
    "SELECT pointer FROM queue_key_pointers WHERE queue=?1";

/* The walk of a keyed lease (sqlite_write_queue.c) over every visible
 * message, on a reader: the same statements, so the same rule, with the
 * stored keys when they are the pointer's (else each computed from its
 * body), and no key passed over, so that all the held are counted. */
int sqlite_queue_held(void *db, const char *queue, int64_t now_ms,
                      const char *pointer, uint32_t limit,
                      const struct journal_crypt *crypt, int64_t *held) {
  *held = 0;
  reader *r = sqlite_reader_take(db);
  sqlite3_stmt *ahead = NULL, *pick = NULL, *ptr = NULL;
  queue_keys *keys = queue_keys_new(pointer, limit, crypt);
  int current = 0, s = SQLITE_DONE;
  int rc = sqlite_prepare_rd(r, sql_queue_key_pointer, &ptr);
  if (rc == 0) {
    bind_text(ptr, 1, queue);
    if ((s = sqlite3_step(ptr)) == SQLITE_ROW) {
      current = !strcmp((const char *)sqlite3_column_text(ptr, 0), pointer);
      s = sqlite3_step(ptr);
    }
    rc = sqlite_rows_end(r, s);
  }
  if (rc == 0)
    rc = sqlite_prepare_rd(r, sqlite_write_sql[ST_MESSAGE_KEY_AHEAD], &ahead);
  if (rc == 0)
    rc = sqlite_prepare_rd(r, sqlite_write_sql[ST_MESSAGE_KEY_PICK], &pick);
  s = rc ? SQLITE_DONE : sqlite_keys_ahead(ahead, queue, now_ms, current, keys);
  if (rc == 0 && s == SQLITE_DONE) {
    bind_text(pick, 1, queue);
    sqlite3_bind_int64(pick, 2, now_ms);
    sqlite3_bind_int(pick, 3, current);
    bind_text(pick, 4, "[]");
    while ((s = sqlite3_step(pick)) == SQLITE_ROW) {
      int64_t seq = sqlite3_column_int64(pick, 0);
      const char *key = (const char *)sqlite3_column_text(pick, 6);
      if (!key) /* the body read only then */
        key = queue_keys_key(keys, seq, NULL,
                             (const char *)sqlite3_column_text(pick, 2));
      queue_keys_admit(keys, key, sqlite3_column_int64(pick, 3), seq);
    }
  }
  if (rc == 0)
    rc = sqlite_rows_end(r, s);
  *held = rc ? 0 : queue_keys_held(keys);
  queue_keys_free(keys);
  sqlite_release_rd(r, ptr);
  sqlite_release_rd(r, ahead);
  sqlite_release_rd(r, pick);
  return sqlite_reader_give(db, r, rc);
}

static const char sql_queue_counts[] =
    "SELECT queue, dropped, dead_lettered FROM queue_counts";

int sqlite_queue_counts_each(void *db,
                             void (*fn)(void *ctx, const char *queue,
                                        int64_t dropped, int64_t dead_lettered),
                             void *ctx) {
  rd q;
  int rc = rd_open(&q, db, sql_queue_counts);
  if (rc == 0)
    while (rd_row(&q))
      fn(ctx, (const char *)sqlite3_column_text(q.st, 0),
         sqlite3_column_int64(q.st, 1), sqlite3_column_int64(q.st, 2));
  return rd_close(&q, rc);
}
