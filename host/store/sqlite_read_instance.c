/* sqlite_read_instance.c — the SQLite backend's reads of one instance:
 * its row (by name or rowid), its steps, its attempts and its events;
 * and the last step of each instance of a list's page. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite_internal.h"

#define INSTANCE_COLS                                                          \
  "rowid,workflow,id,status,params,output,error,created_ms,started_ms,"        \
  "ended_ms,wake_ms,paused_ms,wait_type,control,retention_ms,build,restarts,"  \
  "deadline_ms,parent,parent_close,traceparent"

static void read_instance(sqlite3_stmt *st, journal_instance *o) {
  o->rowid = sqlite3_column_int64(st, 0);
  o->workflow = col_text(st, 1);
  o->id = col_text(st, 2);
  o->status = col_status(st, 3);
  o->params = col_text(st, 4);
  o->output = col_text(st, 5);
  o->error = col_text(st, 6);
  o->created_ms = col_ms(st, 7);
  o->started_ms = col_ms(st, 8);
  o->ended_ms = col_ms(st, 9);
  o->wake_ms = col_ms(st, 10);
  o->paused_ms = col_ms(st, 11);
  o->wait_type = col_text(st, 12);
  o->control = sqlite3_column_int(st, 13);
  o->retention_ms = sqlite3_column_int64(st, 14);
  o->build = col_text(st, 15);
  o->restarts = sqlite3_column_int64(st, 16);
  o->deadline_ms = col_ms(st, 17);
  o->parent = sqlite3_column_int64(st, 18); /* NULL reads 0 */
  o->parent_close = sqlite3_column_int(st, 19);
  o->traceparent = col_text(st, 20);
}

static int instance_query(void *db, const char *sql, int64_t rowid,
                          const char *workflow, const char *id,
                          journal_instance *out) {
  rd q;
  int rc = rd_open(&q, db, sql);
  if (rc == 0) {
    if (workflow) {
      bind_text(q.st, 1, workflow);
      bind_text(q.st, 2, id);
    } else {
      sqlite3_bind_int64(q.st, 1, rowid);
    }
    if (rd_row(&q))
      read_instance(q.st, out);
    else if (q.s == SQLITE_DONE)
      rc = DURO_E_NOT_FOUND;
  }
  return rd_close(&q, rc);
}

int sqlite_instance_get(void *db, const char *workflow, const char *id,
                        journal_instance *out) {
  return instance_query(
      db, "SELECT " INSTANCE_COLS " FROM instances WHERE workflow=?1 AND id=?2",
      0, workflow, id, out);
}

int sqlite_instance_get_rowid(void *db, int64_t rowid, journal_instance *out) {
  return instance_query(
      db, "SELECT " INSTANCE_COLS " FROM instances WHERE rowid=?1", rowid, NULL,
      NULL, out);
}

int sqlite_steps_load(void *db, int64_t rowid, journal_step **out, size_t *n) {
  journal_step *v = NULL;
  size_t len = 0, cap = 0;
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT key,name,count,seq,type,status,result,error,"
                   "attempts,started_ms,ended_ms,wake_ms,"
                   "attempt_started_ms,build FROM steps "
                   "WHERE instance=?1 ORDER BY seq");
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, rowid);
    while (rd_row(&q)) {
      if (len == cap) {
        cap = cap ? cap * 2 : 16;
        v = xrealloc(v, cap * sizeof *v);
      }
      sqlite3_stmt *st = q.st;
      journal_step *o = &v[len++];
      o->key = col_text(st, 0);
      o->name = col_text(st, 1);
      o->count = (uint32_t)sqlite3_column_int64(st, 2);
      o->seq = sqlite3_column_int64(st, 3);
      o->type = (duro_step_kind)duro_step_kind_parse(col_name(st, 4));
      o->status = (duro_step_status)duro_step_status_parse(col_name(st, 5));
      o->result = col_text(st, 6);
      o->error = col_text(st, 7);
      o->attempts = (uint32_t)sqlite3_column_int64(st, 8);
      o->started_ms = col_ms(st, 9);
      o->ended_ms = col_ms(st, 10);
      o->wake_ms = col_ms(st, 11);
      o->attempt_started_ms = col_ms(st, 12);
      o->build = col_text(st, 13);
    }
  }
  if ((rc = rd_close(&q, rc))) {
    journal_steps_free(v, len);
    v = NULL;
    len = 0;
  }
  *out = v;
  *n = len;
  return rc;
}

int sqlite_attempts_each(void *db, int64_t rowid,
                         void (*fn)(void *ctx, const char *key, uint32_t number,
                                    int64_t started_ms, int64_t ended_ms,
                                    const char *error, const char *build),
                         void *ctx) {
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT key,number,started_ms,ended_ms,error,build "
                   "FROM attempts WHERE instance=?1 ORDER BY key,number");
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, rowid);
    while (rd_row(&q))
      fn(ctx, (const char *)sqlite3_column_text(q.st, 0),
         (uint32_t)sqlite3_column_int64(q.st, 1), col_ms(q.st, 2),
         col_ms(q.st, 3), (const char *)sqlite3_column_text(q.st, 4),
         (const char *)sqlite3_column_text(q.st, 5));
  }
  return rd_close(&q, rc);
}

/* The instance's events that `sql` selects (seq, type, payload, ts_ms,
 * consumed_by; ?1 the instance), in its order. */
static int read_events(void *db, const char *sql, int64_t rowid,
                       journal_event **out, size_t *n) {
  journal_event *v = NULL;
  size_t len = 0, cap = 0;
  rd q;
  int rc = rd_open(&q, db, sql);
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, rowid);
    while (rd_row(&q)) {
      if (len == cap) {
        cap = cap ? cap * 2 : 8;
        v = xrealloc(v, cap * sizeof *v);
      }
      journal_event *o = &v[len++];
      o->seq = sqlite3_column_int64(q.st, 0);
      o->type = col_text(q.st, 1);
      o->payload = col_text(q.st, 2);
      o->ts_ms = sqlite3_column_int64(q.st, 3);
      o->consumed_by = col_text(q.st, 4);
    }
  }
  if ((rc = rd_close(&q, rc))) {
    journal_events_free(v, len);
    v = NULL;
    len = 0;
  }
  *out = v;
  *n = len;
  return rc;
}

int sqlite_events_pending(void *db, int64_t rowid, journal_event **out,
                          size_t *n) {
  return read_events(db,
                     "SELECT seq,type,payload,ts_ms,consumed_by FROM events "
                     "WHERE instance=?1 AND consumed_by IS NULL ORDER BY seq",
                     rowid, out, n);
}

int sqlite_events_all(void *db, int64_t rowid, journal_event **out, size_t *n) {
  return read_events(db,
                     "SELECT seq,type,payload,ts_ms,consumed_by FROM events "
                     "WHERE instance=?1 ORDER BY seq",
                     rowid, out, n);
}

int sqlite_attributes(void *db, int64_t rowid,
                      void (*fn)(void *ctx, const duro_attr *a), void *ctx) {
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT name,str,num FROM attributes WHERE instance=?1 "
                   "ORDER BY name");
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, rowid);
    while (rd_row(&q)) {
      duro_attr a = {.name = (char *)sqlite3_column_text(q.st, 0),
                     .str = (char *)sqlite3_column_text(q.st, 1),
                     .num = sqlite3_column_double(q.st, 2)};
      fn(ctx, &a);
    }
  }
  return rd_close(&q, rc);
}

/* rowids as a JSON array, for json_each (malloc'ed). */
static char *rowids_json(const int64_t *rowids, size_t n) {
  char *s = xmalloc(n * 21 + 3), *p = s;
  *p++ = '[';
  for (size_t i = 0; i < n; i++)
    p += sprintf(p, "%s%lld", i ? "," : "", (long long)rowids[i]);
  strcpy(p, "]");
  return s;
}

int sqlite_last_steps(void *db, const int64_t *rowids, size_t n,
                      void (*fn)(void *ctx, const journal_last_step *s),
                      void *ctx) {
  rd q;
  /* each instance's steps by the primary key, the row of the highest
   * seq kept (SQLite's bare columns beside MAX) */
  int rc = rd_open(&q, db,
                   "SELECT instance,key,name,type,status,attempts,wake_ms,"
                   "MAX(seq) FROM steps WHERE instance IN (SELECT value FROM "
                   "json_each(?1)) GROUP BY instance");
  char *list = rowids_json(rowids, n);
  if (rc == 0) {
    sqlite3_bind_text(q.st, 1, list, -1, SQLITE_STATIC);
    while (rd_row(&q)) {
      journal_last_step s = {
          .rowid = sqlite3_column_int64(q.st, 0),
          .key = col_name(q.st, 1),
          .name = col_name(q.st, 2),
          .type = (duro_step_kind)duro_step_kind_parse(col_name(q.st, 3)),
          .status = (duro_step_status)duro_step_status_parse(col_name(q.st, 4)),
          .attempts = (uint32_t)sqlite3_column_int64(q.st, 5),
          .wake_ms = col_ms(q.st, 6)};
      fn(ctx, &s);
    }
  }
  rc = rd_close(&q, rc);
  free(list);
  return rc;
}
