/* pg_claims.c — claim keys several hosts share (journal.h's
 * journal_claim_holder and journal_claim_take): flow.singleton's one
 * live instance a key across the hosts of one database.
 *
 * A live instance's row may hold a claim key (instances.claim_key); a
 * unique index over (workflow, claim_key) lets one row of a workflow
 * hold a key at a time, and storing an ended status clears it.  A
 * create in skip mode inserts its row with the key; an instance in queue
 * mode (or one no create claimed: a cron tick's, a child) takes it
 * before it starts.  The take is one statement on the slots connection:
 * it sets the key on its row unless another row holds it, and two hosts
 * racing for it meet the index, which refuses the second.
 *
 * flow.debounce's pending instance holds its key the same way, from its
 * insert until its start is due: a create of the key on any host merges
 * into that row (journal_claim_merge), and the host that owns it lets go
 * of the key in the statement that finds it due (journal_claim_release),
 * so that a merge either lands before the start, in the params it reads,
 * or finds no pending instance and creates another. */
#include <jansson.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"
#include "status.h"

int pg_claim_holder(void *db, const char *workflow, const char *key,
                    char **id) {
  params p = {0};
  p_text(&p, workflow);
  p_text(&p, key);
  PGresult *r = pg_query(db,
                         "SELECT id FROM instances WHERE workflow=$1 AND "
                         "claim_key=$2",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  int rc = DURO_E_NOT_FOUND;
  if (PQntuples(r) > 0) {
    *id = xstrdup(PQgetvalue(r, 0, 0));
    rc = 0;
  }
  PQclear(r);
  return rc;
}

/* 1 row: taken (or held already); 0 rows: another row holds it, or `id`
 * is not live (told apart by a second look). */
static const char take_sql[] =
    "UPDATE instances SET claim_key=$2 WHERE workflow=$1 AND id=$3 AND "
    "status NOT IN ('complete','errored','terminated') AND "
    "(claim_key=$2 OR NOT EXISTS (SELECT 1 FROM instances o WHERE "
    "o.workflow=$1 AND o.claim_key=$2 AND o.id<>$3)) RETURNING id";

static int is_unique_violation(const PGresult *r) {
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  return state && !strcmp(state, "23505");
}

/* The statement on the slots connection (its lock held while it runs):
 * its result, NULL after a failure of the connection or the statement
 * (said in the log), or of the unique index when `unique` is not NULL
 * (*unique set then, nothing logged: a race lost, not a failure). */
static PGresult *slots_exec(pg_store *pg, const char *sql, int n,
                            const char *const *v, int *unique) {
  pthread_mutex_lock(&pg->slots_mu);
  PGconn *c = pg_slots_conn(pg);
  PGresult *r = c ? PQexecParams(c, sql, n, NULL, v, NULL, NULL, 0) : NULL;
  if (c && PQresultStatus(r) != PGRES_TUPLES_OK) {
    if (unique && is_unique_violation(r))
      *unique = 1;
    else
      pg_slots_failed(pg, r);
    PQclear(r);
    r = NULL;
  }
  pthread_mutex_unlock(&pg->slots_mu);
  return r;
}

int pg_claim_take(void *db, const char *workflow, const char *key,
                  const char *id, char **holder) {
  const char *v[3] = {workflow, key, id};
  int unique = 0; /* another host's take committed first */
  PGresult *r = slots_exec(db, take_sql, 3, v, &unique);
  int rc = !r && !unique            ? DURO_E_STORAGE
           : r && PQntuples(r) == 1 ? 0
                                    : DURO_E_BUSY;
  PQclear(r);
  if (rc != DURO_E_BUSY)
    return rc;
  /* who holds it; none: `id` itself is not live, or the holder ended */
  int found = pg_claim_holder(db, workflow, key, holder);
  if (found == DURO_E_STORAGE)
    return DURO_E_STORAGE;
  if (found == DURO_E_NOT_FOUND) {
    journal_instance in = {0};
    int got = pg_instance_get(db, workflow, id, &in);
    int live = got == 0 && !duro_status_ended(in.status);
    journal_instance_clear(&in);
    if (got == DURO_E_STORAGE)
      return DURO_E_STORAGE;
    return live ? DURO_E_BUSY : DURO_E_NOT_FOUND;
  }
  return DURO_E_BUSY;
}

/* The params and, in the same statement, the search attributes they
 * give ($7, [{name, str, num}]): those named there set, the others gone
 * (it has not started, so run() set none). */
static const char merge_sql[] =
    "WITH m AS (UPDATE instances SET params=$3, wake_ms=CASE WHEN "
    "$6::bigint > 0 THEN LEAST($4::bigint + $5::bigint, created_ms + "
    "$6::bigint) ELSE $4::bigint + $5::bigint END WHERE workflow=$1 AND "
    "claim_key=$2 AND status IN ('queued','paused') AND started_ms IS NULL "
    "RETURNING rowid, id, workflow), "
    "a AS (SELECT * FROM jsonb_to_recordset($7::jsonb) AS a(name text, str "
    "text, num double precision)), "
    "d AS (DELETE FROM attributes WHERE instance IN (SELECT rowid FROM m) "
    "AND name NOT IN (SELECT name FROM a)), "
    "s AS (INSERT INTO attributes(instance,name,workflow,str,num) SELECT "
    "m.rowid, a.name, m.workflow, a.str, a.num FROM m, a ON "
    "CONFLICT(instance,name) DO UPDATE SET str=excluded.str, "
    "num=excluded.num) "
    "SELECT id FROM m";

/* attrs as merge_sql's $7 (malloc'ed). */
static char *attrs_json(const duro_attr *attrs, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(
        a,
        json_pack("{s:s, s:o, s:o}", "name", attrs[i].name, "str",
                  attrs[i].str ? json_string(attrs[i].str) : json_null(), "num",
                  attrs[i].str ? json_null() : json_real(attrs[i].num)));
  char *text = json_dumps(a, JSON_COMPACT);
  json_decref(a);
  if (!text) /* out of memory */
    abort();
  return text;
}

int pg_claim_merge(void *db, const char *workflow, const char *key,
                   const char *params, const duro_attr *attrs, size_t n_attrs,
                   const journal_claim_due *due, char **id) {
  char now[24], period[24], max_wait[24];
  snprintf(now, sizeof now, "%" PRId64, due->now_ms);
  snprintf(period, sizeof period, "%" PRId64, due->period_ms);
  snprintf(max_wait, sizeof max_wait, "%" PRId64, due->max_wait_ms);
  char *attributes = attrs_json(attrs, n_attrs);
  const char *v[7] = {workflow,  key,    params ? params : "null",
                      now,       period, max_wait,
                      attributes};
  PGresult *r = slots_exec(db, merge_sql, 7, v, NULL);
  free(attributes);
  if (!r)
    return DURO_E_STORAGE;
  int rc = DURO_E_NOT_FOUND;
  if (PQntuples(r) == 1) {
    *id = xstrdup(PQgetvalue(r, 0, 0));
    rc = 0;
  }
  PQclear(r);
  return rc;
}

static const char release_sql[] =
    "UPDATE instances SET claim_key=NULL WHERE workflow=$1 AND id=$2 AND "
    "claim_key IS NOT NULL AND (wake_ms IS NULL OR wake_ms <= $3::bigint) "
    "RETURNING params";

int pg_claim_release(void *db, const char *workflow, const char *id,
                     int64_t now_ms, char **params_out, int64_t *wake_ms) {
  char now[24];
  snprintf(now, sizeof now, "%" PRId64, now_ms);
  const char *v[3] = {workflow, id, now};
  PGresult *r = slots_exec(db, release_sql, 3, v, NULL);
  if (!r)
    return DURO_E_STORAGE;
  if (PQntuples(r) == 1) {
    *params_out = get_text(r, 0, 0);
    PQclear(r);
    return 0;
  }
  PQclear(r);
  /* not let go of: a merge moved its start on, or it holds no key */
  params p = {0};
  p_text(&p, workflow);
  p_text(&p, id);
  r = pg_query(db,
               "SELECT wake_ms, params FROM instances WHERE workflow=$1 AND "
               "id=$2 AND claim_key IS NOT NULL",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  int rc = DURO_E_NOT_FOUND;
  if (PQntuples(r) == 1) {
    *wake_ms = get_ms(r, 0, 0);
    *params_out = get_text(r, 0, 1);
    rc = DURO_E_BUSY;
  }
  PQclear(r);
  return rc;
}
