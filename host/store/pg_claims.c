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
 * racing for it meet the index, which refuses the second. */
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

int pg_claim_take(void *db, const char *workflow, const char *key,
                  const char *id, char **holder) {
  pg_store *pg = db;
  int rc = DURO_E_STORAGE;
  pthread_mutex_lock(&pg->slots_mu);
  PGconn *c = pg_slots_conn(pg);
  if (c) {
    const char *v[3] = {workflow, key, id};
    PGresult *r = PQexecParams(c, take_sql, 3, NULL, v, NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK)
      rc = PQntuples(r) == 1 ? 0 : DURO_E_BUSY;
    else if (is_unique_violation(r))
      rc = DURO_E_BUSY; /* another host's take committed first */
    else
      pg_slots_failed(pg, r);
    PQclear(r);
  }
  pthread_mutex_unlock(&pg->slots_mu);
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
