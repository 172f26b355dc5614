/* pg_rates.c — rates several hosts share (journal.h's
 * journal_rates_take): flow control's rate rules, and shared resources'
 * rates, across the hosts of one database.
 *
 * Each key of a rate rule, and each resource with a rate, has a row of
 * flow_rates: its theoretical arrival time (tat), as the generic cell
 * rate algorithm keeps it, on the hosts' clocks.  A host takes starts
 * for the keys its waiters wait on, several keys in one round trip: a
 * function of the slots connection's temporary schema locks each key's
 * row (in ascending key order, so two hosts taking the same keys never
 * deadlock), takes what the rate allows now and writes the row back, all
 * in the one transaction of its call.
 * So no two hosts ever take the same start, and a host that dies holds
 * nothing: a rate is only a time.  Rows of keys long idle are deleted a
 * few at a time (a missing row is an idle key's, tat 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pg_internal.h"

/* Rows whose tat is this far past are an idle key's: deleted. */
#define IDLE_MS "86400000"

/* req is {"now": ms, "keys": [{"k": key, "w": want, "i": interval,
 * "t": tolerance, "a": at}, ...]} with its keys in ascending order; the
 * answer "got tat got tat ...", a pair a key, in order. */
const char pg_rates_fn[] =
    "CREATE OR REPLACE FUNCTION pg_temp.duro_rates_take(req jsonb) "
    "RETURNS text LANGUAGE plpgsql AS $$ "
    "DECLARE out text := ''; t jsonb; v_tat float8; v_got int; v_key bigint; "
    "  v_now float8 := (req->>'now')::float8; "
    "BEGIN "
    "  FOR t IN SELECT * FROM jsonb_array_elements(req->'keys') LOOP "
    "    v_key := (t->>'k')::bigint; "
    "    INSERT INTO flow_rates(key, tat) VALUES (v_key, 0) "
    "      ON CONFLICT (key) DO NOTHING; "
    "    SELECT r.tat INTO v_tat FROM flow_rates r WHERE r.key = v_key "
    "      FOR UPDATE; "
    "    v_got := 0; "
    "    WHILE v_got < (t->>'w')::int AND "
    "          v_now >= v_tat - (t->>'t')::float8 LOOP "
    "      v_tat := greatest(v_tat, (t->>'a')::float8) + (t->>'i')::float8; "
    "      v_got := v_got + 1; "
    "    END LOOP; "
    "    IF v_got > 0 THEN "
    "      UPDATE flow_rates SET tat = v_tat WHERE key = v_key; "
    "    END IF; "
    "    out := out || v_got || ' ' || v_tat || ' '; "
    "  END LOOP; "
    "  DELETE FROM flow_rates WHERE ctid IN (SELECT ctid FROM flow_rates "
    "    WHERE tat < v_now - " IDLE_MS " LIMIT 64 FOR UPDATE SKIP LOCKED); "
    "  RETURN out; "
    "END $$";

static int by_key(const void *a, const void *b) {
  int64_t x = (*(journal_rates_job *const *)a)->key,
          y = (*(journal_rates_job *const *)b)->key;
  return (x > y) - (x < y);
}

int pg_rates_take(void *db, double now_ms, journal_rates_job *jobs, size_t n) {
  pg_store *pg = db;
  if (n == 0)
    return 0;
  /* the keys in ascending order; two jobs of one key take in turn */
  journal_rates_job **order = xcalloc(n, sizeof *order);
  for (size_t i = 0; i < n; i++)
    order[i] = &jobs[i];
  qsort(order, n, sizeof *order, by_key);
  char *req = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&req, &len);
  if (!f)
    abort(); /* out of memory, as xmalloc would */
  fprintf(f, "{\"now\":%.17g,\"keys\":[", now_ms);
  for (size_t i = 0; i < n; i++)
    fprintf(f,
            "%s{\"k\":%" PRId64 ",\"w\":%u,\"i\":%.17g,\"t\":%.17g,"
            "\"a\":%.17g}",
            i ? "," : "", order[i]->key, order[i]->want, order[i]->interval_ms,
            order[i]->tolerance_ms, order[i]->at_ms);
  fputs("]}", f);
  fclose(f);
  int rc = DURO_E_STORAGE;
  pthread_mutex_lock(&pg->slots_mu);
  PGconn *c = pg_slots_conn(pg);
  if (c) {
    const char *v[1] = {req};
    PGresult *r = PQexecParams(c, "SELECT pg_temp.duro_rates_take($1::jsonb)",
                               1, NULL, v, NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
      const char *p = PQgetvalue(r, 0, 0);
      rc = 0;
      for (size_t i = 0; i < n && rc == 0; i++) {
        char *end;
        unsigned long got = strtoul(p, &end, 10);
        double tat = end != p ? strtod(end, &end) : 0;
        if (end == p) {
          log_error("flow control's rates: an answer cut short: %s",
                    PQgetvalue(r, 0, 0));
          rc = DURO_E_STORAGE;
          break;
        }
        order[i]->got = got < order[i]->want ? (uint32_t)got : order[i]->want;
        order[i]->tat = tat;
        p = end;
      }
    } else {
      pg_slots_failed(pg, r);
    }
    PQclear(r);
  }
  pthread_mutex_unlock(&pg->slots_mu);
  if (rc)
    for (size_t i = 0; i < n; i++)
      jobs[i].got = 0;
  free(order);
  free(req);
  return rc;
}
