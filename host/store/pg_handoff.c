/* pg_handoff.c — a host hands queued instances to an idle one (journal.h's
 * journal_hosts_idle and journal_hand_off).
 *
 * Only the owner moves its instances while it lives, and only those it
 * holds queued and idle (the engine took them off its runnable FIFO
 * first), so nothing it runs or controls changes hands.  The move is one
 * transaction under the giver's fence (its hosts row FOR SHARE, not dead):
 * rows still this host's, still queued, with no control request, go to a
 * host that is not dead, and that host is told in the same transaction
 * (its notice is sent at the commit).  A takeover racing with it (this
 * host found dead meanwhile) moves each row once: the rows' locks order
 * the two, and the second finds the owner changed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"
#include "util.h"

int pg_hosts_idle(void *db, void (*fn)(void *ctx, const journal_host_row *row),
                  void *ctx) {
  pg_store *pg = db;
  params p = {0};
  p_i64(&p, pg->host);
  PGresult *r =
      pg_query(pg,
               "SELECT id,(extract(epoch FROM heartbeat)*1000)::bigint,counts "
               "FROM hosts WHERE id<>$1 AND NOT dead AND heartbeat > now() - "
               "lease_ms * interval '1 millisecond' ORDER BY id",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++) {
    journal_host_row row = {
        .id = get_i64(r, i, 0),
        .heartbeat_ms = get_i64(r, i, 1),
        .counts = PQgetisnull(r, i, 2) ? NULL : PQgetvalue(r, i, 2)};
    fn(ctx, &row);
  }
  PQclear(r);
  return 0;
}

/* `rowids` as a PostgreSQL array's text, "{1,2,3}" (malloc'd). */
static char *array_of(const int64_t *rowids, size_t n) {
  size_t cap = 2 + n * 21, len = 0;
  char *s = xmalloc(cap);
  s[len++] = '{';
  for (size_t i = 0; i < n; i++)
    len += (size_t)snprintf(s + len, cap - len, "%s%" PRId64, i ? "," : "",
                            rowids[i]);
  s[len++] = '}';
  s[len] = '\0';
  return s;
}

int pg_hand_off(void *db, const int64_t *rowids, size_t n, int64_t to,
                int64_t *moved, size_t *n_moved) {
  pg_store *pg = db;
  *n_moved = 0;
  reader *rd = pg_reader_take(pg);
  if (!rd)
    return DURO_E_STORAGE;
  PGconn *c = rd->conn;
  int rc = DURO_E_STORAGE;
  PGresult *r = NULL;
  char *ids = array_of(rowids, n);
  if (pg_exec_cmd(c, "BEGIN", NULL, 0))
    goto out;
  params me = {0};
  p_i64(&me, pg->host);
  if (!(r = pg_tx_exec(
            c, "SELECT 1 FROM hosts WHERE id=$1 AND NOT dead FOR SHARE", &me)))
    goto out;
  int alive = PQntuples(r) == 1;
  PQclear(r);
  r = NULL;
  if (!alive) { /* its lease is lost: it moves nothing */
    PGresult *rb = PQexec(c, "ROLLBACK");
    PQclear(rb);
    rc = 0;
    goto out;
  }
  params q = {0};
  p_i64(&q, pg->host);
  p_i64(&q, to);
  p_text(&q, ids);
  if (!(r = pg_tx_exec(
            c,
            "UPDATE instances SET owner=$2 WHERE rowid=ANY($3::bigint[]) "
            "AND owner=$1 AND status='queued' AND control=0 AND "
            "EXISTS (SELECT 1 FROM hosts WHERE id=$2 AND NOT dead) "
            "RETURNING rowid",
            &q)))
    goto out;
  size_t got = (size_t)PQntuples(r);
  int64_t least = INT64_MAX;
  for (size_t i = 0; i < got && i < n; i++) {
    moved[i] = get_i64(r, (int)i, 0);
    if (moved[i] < least)
      least = moved[i];
  }
  PQclear(r);
  r = NULL;
  if (got) {
    char channel[40], text[64];
    snprintf(channel, sizeof channel, HOST_CHANNEL "%" PRId64, to);
    snprintf(text, sizeof text, "{\"h\":[%" PRId64 ",%zu]}", least, got);
    params t = {0};
    p_text(&t, channel);
    p_text(&t, text);
    if (!(r = pg_tx_exec(c, "SELECT pg_notify($1,$2)", &t)))
      goto out;
    PQclear(r);
    r = NULL;
  }
  if (pg_exec_cmd(c, "COMMIT", NULL, 0))
    goto out;
  *n_moved = got;
  rc = 0;
out:
  PQclear(r);
  free(ids);
  pg_reader_end(pg, rd, rc != 0);
  return rc;
}
