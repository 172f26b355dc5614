/* pg_slots.c — slots several hosts share (journal.h's journal_slots_take
 * and journal_slots_give): flow control's concurrency across the hosts
 * of one database.
 *
 * A rule's key has `limit` slots, slot i being the session advisory lock
 * base + i (base a hash of the workflow, the rule and the key's value,
 * its low 20 bits clear: a limit is at most 1,000,000).  A host holds a
 * slot while an activation of that key runs on it (or is about to), on a
 * connection of its own that holds nothing else.  Advisory locks belong
 * to their session, so a host that dies, kill -9 included, gives back
 * every slot it held the moment the server sees its connection close:
 * nothing to fence, nothing to clean.  If that connection is lost while
 * the host lives (a server restart), its slots are gone with it: the
 * epoch moves on, and the caller forgets what it thought it held.
 *
 * A take tries the slots this host does not hold, in order, in one round
 * trip: a function of the session's own temporary schema loops over them
 * with pg_try_advisory_lock, so exactly the slots it returns are taken. */
#include <string.h>

#include "log.h"
#include "pg_internal.h"

static const char take_fn[] =
    "CREATE OR REPLACE FUNCTION pg_temp.duro_slots_take(base bigint, "
    "lim int, mine int[], want int) RETURNS int[] LANGUAGE plpgsql AS $$ "
    "DECLARE got int[] := '{}'; "
    "BEGIN "
    "  FOR i IN 0 .. lim - 1 LOOP "
    "    EXIT WHEN coalesce(array_length(got, 1), 0) >= want; "
    "    IF NOT (i = ANY (mine)) AND pg_try_advisory_lock(base + i) THEN "
    "      got := got || i; "
    "    END IF; "
    "  END LOOP; "
    "  RETURN got; "
    "END $$";

/* The slots connection, made when missing (slots_mu held); NULL when the
 * server cannot be reached. */
static PGconn *slots_conn(pg_store *pg) {
  if (pg->slots && PQstatus(pg->slots) == CONNECTION_OK)
    return pg->slots;
  if (pg->slots) {
    PQfinish(pg->slots);
    pg->slots = NULL;
    pg->slots_epoch++; /* whatever it held went with it */
  }
  char err[256];
  PGconn *c = pg_connect(pg->conninfo, pg->synchronous_full, err, sizeof err);
  if (c && pg_exec_cmd(c, take_fn, err, sizeof err)) {
    PQfinish(c);
    c = NULL;
  }
  if (!c) {
    log_error("flow control's slots: %s", err);
    return NULL;
  }
  pg->slots = c;
  return c;
}

/* A statement of the slots connection failed: a lost connection is made
 * again at the next call (and its slots counted lost). */
static void slots_failed(pg_store *pg, PGresult *r) {
  log_error("flow control's slots: %s", pg_failure_of(pg->slots, r));
  if (PQstatus(pg->slots) != CONNECTION_OK) {
    PQfinish(pg->slots);
    pg->slots = NULL;
    pg->slots_epoch++;
  }
}

/* "{0,3,7}" into got[], at most `cap`. */
static size_t parse_ints(const char *s, uint32_t *got, size_t cap) {
  size_t n = 0;
  for (const char *p = s; p && *p && n < cap;) {
    if (*p >= '0' && *p <= '9') {
      char *end;
      got[n++] = (uint32_t)strtoul(p, &end, 10);
      p = end;
    } else {
      p++;
    }
  }
  return n;
}

int pg_slots_take(void *db, int64_t base, uint32_t limit, const uint32_t *mine,
                  size_t n_mine, uint32_t want, uint32_t *got, size_t *n_got,
                  uint64_t *epoch) {
  pg_store *pg = db;
  *n_got = 0;
  /* mine as an array literal: "{1,4}" */
  size_t cap = 2 + n_mine * 11, len = 0;
  char *arr = xmalloc(cap + 1);
  arr[len++] = '{';
  for (size_t i = 0; i < n_mine; i++)
    len += (size_t)snprintf(arr + len, cap + 1 - len, "%s%u", i ? "," : "",
                            mine[i]);
  arr[len++] = '}';
  arr[len] = '\0';
  params p = {.n = 0};
  p_i64(&p, base);
  p_i64(&p, limit);
  p_text(&p, arr);
  p_i64(&p, want);
  pthread_mutex_lock(&pg->slots_mu);
  PGconn *c = slots_conn(pg);
  int rc = DURO_E_STORAGE;
  if (c) {
    PGresult *r = PQexecParams(
        c,
        "SELECT pg_temp.duro_slots_take($1::bigint, $2::int, $3::int[], "
        "$4::int)",
        p.n, NULL, p.v, NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
      *n_got = parse_ints(PQgetvalue(r, 0, 0), got, want);
      rc = 0;
    } else {
      slots_failed(pg, r);
    }
    PQclear(r);
  }
  *epoch = pg->slots_epoch;
  pthread_mutex_unlock(&pg->slots_mu);
  free(arr);
  return rc;
}

int pg_slots_give(void *db, int64_t base, uint32_t slot, uint64_t epoch) {
  pg_store *pg = db;
  params p = {.n = 0};
  p_i64(&p, base + slot);
  pthread_mutex_lock(&pg->slots_mu);
  int rc = 0;
  /* of a connection lost since: the server gave it back already */
  if (epoch == pg->slots_epoch && pg->slots) {
    PGresult *r =
        PQexecParams(pg->slots, "SELECT pg_advisory_unlock($1::bigint)", p.n,
                     NULL, p.v, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      slots_failed(pg, r);
      rc = DURO_E_STORAGE;
    }
    PQclear(r);
  }
  pthread_mutex_unlock(&pg->slots_mu);
  return rc;
}

void pg_slots_close(pg_store *pg) {
  if (pg->slots)
    PQfinish(pg->slots);
  pg->slots = NULL;
  pthread_mutex_destroy(&pg->slots_mu);
}
