/* pg_read_instance.c — the PostgreSQL backend's reads of one instance:
 * its row (by name or rowid), its steps, its attempts and its events;
 * and the last step of each instance of a list's page. */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"

#define INSTANCE_COLS                                                          \
  "rowid,workflow,id,status,params,output,error,created_ms,started_ms,"        \
  "ended_ms,wake_ms,paused_ms,wait_type,control,retention_ms,build,restarts,"  \
  "owner,deadline_ms,parent,parent_close,traceparent"

static void read_instance(const PGresult *r, journal_instance *o) {
  o->rowid = get_i64(r, 0, 0);
  o->workflow = get_text(r, 0, 1);
  o->id = get_text(r, 0, 2);
  o->status = get_status(r, 0, 3);
  o->params = get_text(r, 0, 4);
  o->output = get_text(r, 0, 5);
  o->error = get_text(r, 0, 6);
  o->created_ms = get_ms(r, 0, 7);
  o->started_ms = get_ms(r, 0, 8);
  o->ended_ms = get_ms(r, 0, 9);
  o->wake_ms = get_ms(r, 0, 10);
  o->paused_ms = get_ms(r, 0, 11);
  o->wait_type = get_text(r, 0, 12);
  o->control = (int)get_i64(r, 0, 13);
  o->retention_ms = get_i64(r, 0, 14);
  o->build = get_text(r, 0, 15);
  o->restarts = get_i64(r, 0, 16);
  o->owner = get_i64(r, 0, 17);
  o->deadline_ms = get_ms(r, 0, 18);
  o->parent = PQgetisnull(r, 0, 19) ? 0 : get_i64(r, 0, 19);
  o->parent_close = (int)get_i64(r, 0, 20);
  o->traceparent = get_text(r, 0, 21);
}

static int instance_query(pg_store *pg, const char *sql, const params *p,
                          journal_instance *out) {
  PGresult *r = pg_query(pg, sql, p);
  if (!r)
    return DURO_E_STORAGE;
  int rc = DURO_E_NOT_FOUND;
  if (PQntuples(r) > 0) {
    read_instance(r, out);
    rc = 0;
  }
  PQclear(r);
  return rc;
}

int pg_instance_get(void *db, const char *workflow, const char *id,
                    journal_instance *out) {
  params p = {0};
  p_text(&p, workflow);
  p_text(&p, id);
  return instance_query(
      db, "SELECT " INSTANCE_COLS " FROM instances WHERE workflow=$1 AND id=$2",
      &p, out);
}

int pg_instance_get_rowid(void *db, int64_t rowid, journal_instance *out) {
  params p = {0};
  p_i64(&p, rowid);
  return instance_query(
      db, "SELECT " INSTANCE_COLS " FROM instances WHERE rowid=$1", &p, out);
}

int pg_steps_load(void *db, int64_t rowid, journal_step **out, size_t *n) {
  params p = {0};
  p_i64(&p, rowid);
  *out = NULL;
  *n = 0;
  PGresult *r = pg_query(db,
                         "SELECT key,name,count,seq,type,status,result,error,"
                         "attempts,started_ms,ended_ms,wake_ms,"
                         "attempt_started_ms,build FROM steps "
                         "WHERE instance=$1 ORDER BY seq",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  int rows = PQntuples(r);
  journal_step *v = rows ? xcalloc((size_t)rows, sizeof *v) : NULL;
  for (int i = 0; i < rows; i++) {
    journal_step *o = &v[i];
    o->key = get_text(r, i, 0);
    o->name = get_text(r, i, 1);
    o->count = (uint32_t)get_i64(r, i, 2);
    o->seq = get_i64(r, i, 3);
    o->type = (duro_step_kind)duro_step_kind_parse(get_str(r, i, 4));
    o->status = (duro_step_status)duro_step_status_parse(get_str(r, i, 5));
    o->result = get_text(r, i, 6);
    o->error = get_text(r, i, 7);
    o->attempts = (uint32_t)get_i64(r, i, 8);
    o->started_ms = get_ms(r, i, 9);
    o->ended_ms = get_ms(r, i, 10);
    o->wake_ms = get_ms(r, i, 11);
    o->attempt_started_ms = get_ms(r, i, 12);
    o->build = get_text(r, i, 13);
  }
  PQclear(r);
  *out = v;
  *n = (size_t)rows;
  return 0;
}

int pg_attempts_each(void *db, int64_t rowid,
                     void (*fn)(void *ctx, const char *key, uint32_t number,
                                int64_t started_ms, int64_t ended_ms,
                                const char *error, const char *build),
                     void *ctx) {
  params p = {0};
  p_i64(&p, rowid);
  PGresult *r = pg_query(db,
                         "SELECT key,number,started_ms,ended_ms,error,build "
                         "FROM attempts WHERE instance=$1 ORDER BY key,number",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_str(r, i, 0), (uint32_t)get_i64(r, i, 1), get_ms(r, i, 2),
       get_ms(r, i, 3), get_str(r, i, 4), get_str(r, i, 5));
  PQclear(r);
  return 0;
}

/* The events of instance `rowid` that `sql` selects, as seq, type,
 * payload, ts_ms and consumed_by, in its order. */
static int read_events(void *db, const char *sql, int64_t rowid,
                       journal_event **out, size_t *n) {
  params p = {0};
  p_i64(&p, rowid);
  *out = NULL;
  *n = 0;
  PGresult *r = pg_query(db, sql, &p);
  if (!r)
    return DURO_E_STORAGE;
  int rows = PQntuples(r);
  journal_event *v = rows ? xcalloc((size_t)rows, sizeof *v) : NULL;
  for (int i = 0; i < rows; i++) {
    v[i].seq = get_i64(r, i, 0);
    v[i].type = get_text(r, i, 1);
    v[i].payload = get_text(r, i, 2);
    v[i].ts_ms = get_i64(r, i, 3);
    v[i].consumed_by = get_text(r, i, 4);
  }
  PQclear(r);
  *out = v;
  *n = (size_t)rows;
  return 0;
}

int pg_events_pending(void *db, int64_t rowid, journal_event **out, size_t *n) {
  return read_events(db,
                     "SELECT seq,type,payload,ts_ms,consumed_by FROM events "
                     "WHERE instance=$1 AND consumed_by IS NULL ORDER BY seq",
                     rowid, out, n);
}

int pg_events_all(void *db, int64_t rowid, journal_event **out, size_t *n) {
  return read_events(db,
                     "SELECT seq,type,payload,ts_ms,consumed_by FROM events "
                     "WHERE instance=$1 ORDER BY seq",
                     rowid, out, n);
}

int pg_attributes(void *db, int64_t rowid,
                  void (*fn)(void *ctx, const duro_attr *a), void *ctx) {
  params p = {0};
  p_i64(&p, rowid);
  PGresult *r = pg_query(db,
                         "SELECT name,str,num FROM attributes WHERE "
                         "instance=$1 ORDER BY name",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++) {
    duro_attr a = {
        .name = (char *)get_str(r, i, 0),
        .str = (char *)get_str(r, i, 1),
        .num = PQgetisnull(r, i, 2) ? 0 : strtod(PQgetvalue(r, i, 2), NULL)};
    fn(ctx, &a);
  }
  PQclear(r);
  return 0;
}

int pg_last_steps(void *db, const int64_t *rowids, size_t n,
                  void (*fn)(void *ctx, const journal_last_step *s),
                  void *ctx) {
  char *list = xmalloc(n * 21 + 3), *at = list;
  *at++ = '{';
  for (size_t i = 0; i < n; i++)
    at += sprintf(at, "%s%lld", i ? "," : "", (long long)rowids[i]);
  strcpy(at, "}");
  params p = {0};
  p_text(&p, list);
  /* each instance's steps by the primary key, the highest seq first */
  PGresult *r = pg_query(db,
                         "SELECT DISTINCT ON (instance) instance,key,name,"
                         "type,status,attempts,wake_ms FROM steps WHERE "
                         "instance=ANY($1::bigint[]) ORDER BY instance, seq "
                         "DESC",
                         &p);
  free(list);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++) {
    journal_last_step s = {
        .rowid = get_i64(r, i, 0),
        .key = get_str(r, i, 1),
        .name = get_str(r, i, 2),
        .type = (duro_step_kind)duro_step_kind_parse(get_str(r, i, 3)),
        .status = (duro_step_status)duro_step_status_parse(get_str(r, i, 4)),
        .attempts = (uint32_t)get_i64(r, i, 5),
        .wake_ms = get_ms(r, i, 6)};
    fn(ctx, &s);
  }
  PQclear(r);
  return 0;
}
