/* pg_values.c — the PostgreSQL backend's scan of the values encrypted at
 * rest (backend.h values_each) and their rewrite (JOP_VALUE_RESEAL), as
 * sqlite_values.c: a page of instances in rowid order, then the rows of
 * theirs the other tables hold by the same range of instance rowids.
 * The values already under the skipped prefix stay on the server. */
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "journal_crypt.h"
#include "pg_internal.h"

#define SKIP(col)                                                              \
  "($3::text IS NULL OR left(" col ",length($3::text))<>$3::text)"

typedef struct scan {
  const char *skip;
  journal_value_fn fn;
  void *ctx;
  int stopped; /* fn asked to stop */
} scan;

static void hand(scan *s, int field, int64_t rowid, const char *name,
                 int64_t number, const char *stored) {
  if (s->stopped || !stored ||
      (s->skip && strncmp(stored, s->skip, strlen(s->skip)) == 0))
    return;
  journal_value v = {.field = field,
                     .rowid = rowid,
                     .name = name,
                     .number = number,
                     .stored = stored};
  s->stopped = s->fn(s->ctx, &v) != 0;
}

/* Runs `sql` over instances ($1, $2] and hands each row on with row_fn. */
static int child_rows(pg_store *pg, scan *s, const char *sql, int64_t after,
                      int64_t last,
                      void (*row_fn)(scan *s, const PGresult *r, int i)) {
  params p = {0};
  p_i64(&p, after);
  p_i64(&p, last);
  p_text(&p, s->skip);
  PGresult *r = pg_query(pg, sql, &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r) && !s->stopped; i++)
    row_fn(s, r, i);
  PQclear(r);
  return 0;
}

static void step_row(scan *s, const PGresult *r, int i) {
  int64_t rowid = get_i64(r, i, 0);
  hand(s, JOURNAL_FIELD_STEP_RESULT, rowid, get_str(r, i, 1), 0,
       get_str(r, i, 2));
  hand(s, JOURNAL_FIELD_STEP_ERROR, rowid, get_str(r, i, 1), 0,
       get_str(r, i, 3));
}

static void attempt_row(scan *s, const PGresult *r, int i) {
  hand(s, JOURNAL_FIELD_ATTEMPT_ERROR, get_i64(r, i, 0), get_str(r, i, 1),
       get_i64(r, i, 2), get_str(r, i, 3));
}

static void event_row(scan *s, const PGresult *r, int i) {
  hand(s, JOURNAL_FIELD_EVENT, get_i64(r, i, 0), NULL, get_i64(r, i, 1),
       get_str(r, i, 2));
}

static void log_row(scan *s, const PGresult *r, int i) {
  hand(s, JOURNAL_FIELD_LOG, get_i64(r, i, 0), NULL, get_i64(r, i, 1),
       get_str(r, i, 2));
}

static int instances_page(pg_store *pg, scan *s, int64_t after, size_t limit,
                          int64_t *last) {
  params p = {0};
  p_i64(&p, after);
  p_i64(&p, (int64_t)limit);
  PGresult *r = pg_query(pg,
                         "SELECT rowid,workflow,params,output,error FROM "
                         "instances WHERE rowid>$1 ORDER BY rowid LIMIT $2",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r) && !s->stopped; i++) {
    int64_t rowid = get_i64(r, i, 0);
    hand(s, JOURNAL_FIELD_PARAMS, rowid, get_str(r, i, 1), 0, get_str(r, i, 2));
    hand(s, JOURNAL_FIELD_OUTPUT, rowid, NULL, 0, get_str(r, i, 3));
    hand(s, JOURNAL_FIELD_ERROR, rowid, NULL, 0, get_str(r, i, 4));
    *last = rowid;
  }
  PQclear(r);
  if (s->stopped || *last == after)
    return 0;
  int rc = child_rows(
      pg, s,
      "SELECT instance,key,result,error FROM steps WHERE instance>$1 AND "
      "instance<=$2 AND ((result IS NOT NULL AND " SKIP(
          "result") ") OR (error IS NOT NULL AND " SKIP("error") "))",
      after, *last, step_row);
  if (rc == 0)
    rc = child_rows(pg, s,
                    "SELECT instance,key,number,error FROM attempts WHERE "
                    "instance>$1 AND instance<=$2 AND error IS NOT NULL "
                    "AND " SKIP("error"),
                    after, *last, attempt_row);
  if (rc == 0)
    rc = child_rows(pg, s,
                    "SELECT instance,seq,payload FROM events WHERE "
                    "instance>$1 AND instance<=$2 AND " SKIP("payload"),
                    after, *last, event_row);
  if (rc == 0)
    rc = child_rows(pg, s,
                    "SELECT instance,n,message FROM logs WHERE "
                    "instance>$1 AND instance<=$2 AND " SKIP("message"),
                    after, *last, log_row);
  return rc;
}

static int messages_page(pg_store *pg, scan *s, int64_t after, size_t limit,
                         int64_t *last) {
  params p = {0};
  p_i64(&p, after);
  p_i64(&p, (int64_t)limit);
  PGresult *r = pg_query(pg,
                         "SELECT seq,body,last_error FROM messages WHERE "
                         "seq>$1 ORDER BY seq LIMIT $2",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r) && !s->stopped; i++) {
    int64_t seq = get_i64(r, i, 0);
    hand(s, JOURNAL_FIELD_MESSAGE, 0, NULL, seq, get_str(r, i, 1));
    hand(s, JOURNAL_FIELD_MESSAGE_ERROR, 0, NULL, seq, get_str(r, i, 2));
    *last = seq;
  }
  PQclear(r);
  return 0;
}

int pg_values_each(void *db, int which, int64_t after, size_t limit,
                   const char *skip, journal_value_fn fn, void *ctx,
                   int64_t *last) {
  scan s = {.skip = skip, .fn = fn, .ctx = ctx};
  *last = after;
  return which == JOURNAL_VALUES_MESSAGES
             ? messages_page(db, &s, after, limit, last)
             : instances_page(db, &s, after, limit, last);
}

int pg_value_reseal(pg_store *pg, journal_op *op) {
  const journal_value *v = op->value;
  /* after the new and old text: what finds its row */
  int places = journal_value_places(v->field);
  if (!places)
    return DURO_E_INVALID_ARGUMENT;
  params p = {0};
  p_text(&p, op->body);
  p_text(&p, v->stored);
  if (places & JOURNAL_AT_ROWID)
    p_i64(&p, v->rowid);
  if (places & JOURNAL_AT_NAME)
    p_text(&p, v->name);
  if (places & JOURNAL_AT_NUMBER)
    p_i64(&p, v->number);
  /* pipelined with the group's other writes (a page is a thousand of
   * them): out_rowid is filled when their results are read */
  return pg_write_queue_counted(pg, ST_RESEAL_PARAMS + v->field, &p,
                                &op->out_rowid);
}
