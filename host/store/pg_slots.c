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
#include <jansson.h>
#include <string.h>

#include "log.h"
#include "pg_internal.h"

/* A pass of several keys in one round trip: req is
 * {"give": [slot's lock, ...], "take": [{"b": base, "l": limit,
 * "w": want, "m": [held, ...], "h": mark, "c": marked, "q": ask}, ...]},
 * the answer each take's slots got, whether it is marked after, and
 * whether another host marks it, in order:
 * [{"g": [0, 2], "m": false, "x": true}, ...].  A key's mark is the
 * advisory lock base + 0xFFFFF, above every slot's (a limit is at most
 * 1,000,000), held shared by the hosts short of its slots; another
 * host's mark is
 * seen as the exclusive lock refused: this host's own shared one does
 * not stand in its way. */
static const char pass_fn[] =
    "CREATE OR REPLACE FUNCTION pg_temp.duro_slots_pass(req jsonb) "
    "RETURNS jsonb LANGUAGE plpgsql AS $$ "
    "DECLARE out jsonb := '[]'; t jsonb; got int[]; m int[]; b bigint; "
    "  mk bigint; marked boolean; contended boolean; "
    "BEGIN "
    "  PERFORM pg_advisory_unlock(g::bigint) "
    "    FROM jsonb_array_elements_text(req->'give') g; "
    "  FOR t IN SELECT * FROM jsonb_array_elements(req->'take') LOOP "
    "    b := (t->>'b')::bigint; "
    "    mk := b + 1048575; "
    "    m := ARRAY(SELECT jsonb_array_elements_text(t->'m')::int); "
    "    got := '{}'; "
    "    FOR i IN 0 .. (t->>'l')::int - 1 LOOP "
    "      EXIT WHEN coalesce(array_length(got, 1), 0) >= (t->>'w')::int; "
    "      IF NOT (i = ANY (m)) AND pg_try_advisory_lock(b + i) THEN "
    "        got := got || i; "
    "      END IF; "
    "    END LOOP; "
    "    marked := (t->>'c')::boolean; "
    "    IF (t->>'h')::boolean AND NOT marked THEN "
    "      marked := pg_try_advisory_lock_shared(mk); "
    "    ELSIF NOT (t->>'h')::boolean AND marked THEN "
    "      PERFORM pg_advisory_unlock_shared(mk); "
    "      marked := false; "
    "    END IF; "
    "    contended := false; "
    "    IF (t->>'q')::boolean THEN "
    "      IF pg_try_advisory_lock(mk) THEN "
    "        PERFORM pg_advisory_unlock(mk); "
    "      ELSE "
    "        contended := true; "
    "      END IF; "
    "    END IF; "
    "    out := out || jsonb_build_array(jsonb_build_object('g', "
    "      to_jsonb(got), 'm', marked, 'x', contended)); "
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

/* Whether job j is in the pass's takes: it takes, or its mark changes,
 * or it asks. */
static int in_takes(const journal_slots_job *j, int marked) {
  return j->want || j->ask || (j->mark != 0) != marked;
}

/* The answer's objects, in order, into the jobs in the takes. */
static int parse_pass(const char *s, journal_slots_job *jobs, size_t n,
                      const int *marked) {
  json_t *out = json_loads(s, 0, NULL);
  size_t at = 0;
  for (size_t i = 0; out && i < n; i++) {
    if (!in_takes(&jobs[i], marked[i])) {
      jobs[i].marked = marked[i];
      continue;
    }
    json_t *o = json_array_get(out, at++), *g = json_object_get(o, "g");
    size_t k;
    json_t *v;
    json_array_foreach(g, k, v) {
      if (jobs[i].n_got < jobs[i].want)
        jobs[i].got[jobs[i].n_got++] = (uint32_t)json_integer_value(v);
    }
    jobs[i].marked = json_is_true(json_object_get(o, "m"));
    jobs[i].contended = json_is_true(json_object_get(o, "x"));
  }
  int ok = out && at == json_array_size(out);
  json_decref(out);
  return ok ? 0 : DURO_E_STORAGE;
}

int pg_slots_pass(void *db, journal_slots_job *jobs, size_t n,
                  uint64_t *epoch) {
  pg_store *pg = db;
  json_t *give = json_array(), *take = json_array();
  int *marked = xcalloc(n ? n : 1, sizeof *marked);
  pthread_mutex_lock(&pg->slots_mu);
  PGconn *c = pg_slots_conn(pg);
  for (size_t i = 0; i < n; i++) {
    const journal_slots_job *j = &jobs[i];
    /* of a connection lost since: the server gave them back already */
    for (size_t g = 0; j->give_epoch == pg->slots_epoch && g < j->n_give; g++)
      json_array_append_new(give, json_integer(j->base + j->give[g]));
    marked[i] = j->marked && j->mark_epoch == pg->slots_epoch;
    if (!in_takes(j, marked[i]))
      continue;
    json_t *mine = json_array();
    for (size_t m = 0; m < j->n_mine; m++)
      json_array_append_new(mine, json_integer(j->mine[m]));
    json_array_append_new(
        take,
        json_pack("{sI sI sI so sb sb sb}", "b", (json_int_t)j->base, "l",
                  (json_int_t)j->limit, "w", (json_int_t)j->want, "m", mine,
                  "h", j->mark != 0, "c", marked[i], "q", j->ask != 0));
  }
  json_t *doc = json_pack("{so so}", "give", give, "take", take);
  char *req = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  int rc = DURO_E_STORAGE;
  if (c && req) {
    const char *v[1] = {req};
    PGresult *r = PQexecParams(c, "SELECT pg_temp.duro_slots_pass($1::jsonb)",
                               1, NULL, v, NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
      rc = parse_pass(PQgetvalue(r, 0, 0), jobs, n, marked);
    else
      pg_slots_failed(pg, r);
    PQclear(r);
  }
  *epoch = pg->slots_epoch;
  pthread_mutex_unlock(&pg->slots_mu);
  free(req);
  free(marked);
  return rc;
}

void pg_slots_close(pg_store *pg) {
  if (pg->slots)
    PQfinish(pg->slots);
  pg->slots = NULL;
  pthread_mutex_destroy(&pg->slots_mu);
}
