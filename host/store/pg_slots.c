/* pg_slots.c — slots several hosts share (journal.h's
 * journal_slots_pass): flow control's concurrency across the hosts of one
 * database.
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
 * A pass gives back slots and takes others for several keys in one round
 * trip: a function of the session's own temporary schema unlocks the
 * former and loops over the slots this host does not hold with
 * pg_try_advisory_lock, so exactly the slots it returns are taken. */
#include <stdarg.h>
#include <string.h>

#include "log.h"
#include "pg_internal.h"

/* A pass of several keys in one round trip: req is
 * {"give": [slot's lock, ...], "take": [{"b": base, "l": limit,
 * "w": want, "m": [held, ...]}, ...]}, the answer each take's slots got,
 * in order: [[0, 2], [], ...]. */
static const char pass_fn[] =
    "CREATE OR REPLACE FUNCTION pg_temp.duro_slots_pass(req jsonb) "
    "RETURNS jsonb LANGUAGE plpgsql AS $$ "
    "DECLARE out jsonb := '[]'; t jsonb; got int[]; m int[]; "
    "BEGIN "
    "  PERFORM pg_advisory_unlock(g::bigint) "
    "    FROM jsonb_array_elements_text(req->'give') g; "
    "  FOR t IN SELECT * FROM jsonb_array_elements(req->'take') LOOP "
    "    m := ARRAY(SELECT jsonb_array_elements_text(t->'m')::int); "
    "    got := '{}'; "
    "    FOR i IN 0 .. (t->>'l')::int - 1 LOOP "
    "      EXIT WHEN coalesce(array_length(got, 1), 0) >= (t->>'w')::int; "
    "      IF NOT (i = ANY (m)) AND "
    "         pg_try_advisory_lock((t->>'b')::bigint + i) THEN "
    "        got := got || i; "
    "      END IF; "
    "    END LOOP; "
    "    out := out || jsonb_build_array(to_jsonb(got)); "
    "  END LOOP; "
    "  RETURN out; "
    "END $$";

PGconn *pg_slots_conn(pg_store *pg) {
  if (pg->slots && PQstatus(pg->slots) == CONNECTION_OK)
    return pg->slots;
  if (pg->slots) {
    PQfinish(pg->slots);
    pg->slots = NULL;
    pg->slots_epoch++; /* whatever it held went with it */
  }
  char err[256];
  PGconn *c = pg_connect(pg->conninfo, pg->synchronous_full, err, sizeof err);
  if (c && (pg_exec_cmd(c, pass_fn, err, sizeof err) ||
            pg_exec_cmd(c, pg_rates_fn, err, sizeof err))) {
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

/* A lost connection is made again at the next call (and its slots
 * counted lost). */
void pg_slots_failed(pg_store *pg, PGresult *r) {
  log_error("flow control's slots: %s", pg_failure_of(pg->slots, r));
  if (PQstatus(pg->slots) != CONNECTION_OK) {
    PQfinish(pg->slots);
    pg->slots = NULL;
    pg->slots_epoch++;
  }
}

/* Appends to a growing buffer (*buf of *cap bytes, *len used). */
static void put(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char **buf, size_t *len, size_t *cap, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*buf + *len, *cap - *len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < *cap - *len) {
      *len += (size_t)n;
      return;
    }
    *cap = 2 * *cap + (size_t)(n > 0 ? n : 0);
    *buf = xrealloc(*buf, *cap);
  }
}

/* The answer's arrays, in order, into the jobs that take. */
static void parse_pass(const char *s, journal_slots_job *jobs, size_t n) {
  size_t job = 0;
  int depth = 0;
  while (job < n && !jobs[job].want)
    job++;
  for (const char *p = s; *p && job < n; p++) {
    if (*p == '[') {
      depth++;
    } else if (*p == ']') {
      if (--depth == 1)
        for (job++; job < n && !jobs[job].want; job++)
          ;
    } else if (depth == 2 && *p >= '0' && *p <= '9') {
      char *end;
      unsigned long v = strtoul(p, &end, 10);
      if (jobs[job].n_got < jobs[job].want)
        jobs[job].got[jobs[job].n_got++] = (uint32_t)v;
      p = end - 1;
    }
  }
}

int pg_slots_pass(void *db, journal_slots_job *jobs, size_t n,
                  uint64_t *epoch) {
  pg_store *pg = db;
  size_t cap = 256, len = 0;
  char *req = xmalloc(cap);
  req[0] = '\0';
  pthread_mutex_lock(&pg->slots_mu);
  PGconn *c = pg_slots_conn(pg);
  put(&req, &len, &cap, "{\"give\":[");
  int first = 1;
  for (size_t i = 0; i < n; i++)
    /* of a connection lost since: the server gave them back already */
    for (size_t g = 0;
         jobs[i].give_epoch == pg->slots_epoch && g < jobs[i].n_give;
         g++, first = 0)
      put(&req, &len, &cap, "%s%" PRId64, first ? "" : ",",
          jobs[i].base + jobs[i].give[g]);
  put(&req, &len, &cap, "],\"take\":[");
  first = 1;
  for (size_t i = 0; i < n; i++) {
    if (!jobs[i].want)
      continue;
    put(&req, &len, &cap, "%s{\"b\":%" PRId64 ",\"l\":%u,\"w\":%u,\"m\":[",
        first ? "" : ",", jobs[i].base, jobs[i].limit, jobs[i].want);
    for (size_t m = 0; m < jobs[i].n_mine; m++)
      put(&req, &len, &cap, "%s%u", m ? "," : "", jobs[i].mine[m]);
    put(&req, &len, &cap, "]}");
    first = 0;
  }
  put(&req, &len, &cap, "]}");
  int rc = DURO_E_STORAGE;
  if (c) {
    const char *v[1] = {req};
    PGresult *r = PQexecParams(c, "SELECT pg_temp.duro_slots_pass($1::jsonb)",
                               1, NULL, v, NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
      parse_pass(PQgetvalue(r, 0, 0), jobs, n);
      rc = 0;
    } else {
      pg_slots_failed(pg, r);
    }
    PQclear(r);
  }
  *epoch = pg->slots_epoch;
  pthread_mutex_unlock(&pg->slots_mu);
  free(req);
  return rc;
}

void pg_slots_close(pg_store *pg) {
  if (pg->slots)
    PQfinish(pg->slots);
  pg->slots = NULL;
  pthread_mutex_destroy(&pg->slots_mu);
}
