/* pg_bulk.c — bulk actions' jobs in the PostgreSQL backend (journal.h's
 * journal_bulk), as sqlite_bulk.c; here several hosts share them: a
 * job's row names the host that runs it, and another host claims it
 * only once that host is found dead by the takeover of instances
 * (pg_hosts.c), or is gone. */
#include <libpq-fe.h>
#include <stdlib.h>

#include "pg_internal.h"

static int insert(pg_store *pg, journal_op *op) {
  const journal_bulk *b = op->bulk;
  params p = {0};
  p_text(&p, b->workflow);
  p_text(&p, b->action);
  p_i64(&p, b->terminate);
  p_text(&p, b->filter.status < 0 ? NULL : duro_status_name(b->filter.status));
  p_text(&p, b->filter.prefix && *b->filter.prefix ? b->filter.prefix : NULL);
  p_i64(&p, b->filter.created_after);
  p_i64(&p, b->filter.created_before);
  p_i64(&p, b->filter.ended_after);
  p_i64(&p, b->filter.ended_before);
  p_i64(&p, b->bound);
  p_i64(&p, b->cursor);
  p_i64(&p, b->matched);
  p_i64(&p, b->created_ms);
  p_i64(&p, b->host);
  p_text(&p, b->where_terms);
  p_text(&p, b->filter.ids);
  int inserted = 0;
  return pg_write_returning(pg, ST_BULK_INSERT, &p, &inserted, &op->out_rowid);
}

static int progress(pg_store *pg, journal_op *op) {
  const journal_bulk *b = op->bulk;
  params p = {0};
  p_i64(&p, b->id);
  p_i64(&p, b->host);
  p_i64(&p, b->cursor);
  p_i64(&p, b->done);
  p_i64(&p, b->failed);
  p_i64(&p, b->skipped);
  p_text(&p, b->errors);
  p_text(&p, b->plan);
  p_text(&p, b->state);
  p_ms(&p, b->ended_ms);
  return pg_write_changes(pg, ST_BULK_PROGRESS, &p, op);
}

int pg_bulk_apply(pg_store *pg, journal_op *op) {
  params p = {0};
  switch (op->kind) {
  case JOP_BULK_INSERT:
    return insert(pg, op);
  case JOP_BULK_PROGRESS:
    return progress(pg, op);
  case JOP_BULK_CANCEL:
    p_i64(&p, op->rowid);
    p_i64(&p, op->ts_ms);
    return pg_write_changes(pg, ST_BULK_CANCEL, &p, op);
  case JOP_BULK_CLAIM:
    p_i64(&p, op->rowid);
    p_i64(&p, op->from_seq);
    return pg_write_changes(pg, ST_BULK_CLAIM, &p, op);
  case JOP_BULK_SWEEP:
    p_i64(&p, op->ts_ms);
    p_i64(&p, op->from_seq);
    return pg_write_changes(pg, ST_BULK_SWEEP, &p, op);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}

#define BULK_COLUMNS                                                           \
  "SELECT id,workflow,action,terminate,status,prefix,created_after,"           \
  "created_before,ended_after,ended_before,bound,below,matched,done,failed,"   \
  "skipped,state,created_ms,ended_ms,host,errors,plan,where_terms,ids FROM "   \
  "bulk_jobs "

static void read_row(const PGresult *r, int i, journal_bulk *b) {
  const char *status = get_str(r, i, 4);
  *b = (journal_bulk){
      .id = get_i64(r, i, 0),
      .workflow = get_text(r, i, 1),
      .action = get_text(r, i, 2),
      .terminate = (int)get_i64(r, i, 3),
      .filter = {.status = status ? duro_status_parse(status) : -1,
                 .prefix = get_text(r, i, 5),
                 .created_after = get_i64(r, i, 6),
                 .created_before = get_i64(r, i, 7),
                 .ended_after = get_i64(r, i, 8),
                 .ended_before = get_i64(r, i, 9),
                 .ids = get_text(r, i, 23)},
      .bound = get_i64(r, i, 10),
      .cursor = get_i64(r, i, 11),
      .matched = get_i64(r, i, 12),
      .done = get_i64(r, i, 13),
      .failed = get_i64(r, i, 14),
      .skipped = get_i64(r, i, 15),
      .state = get_text(r, i, 16),
      .created_ms = get_i64(r, i, 17),
      .ended_ms = get_ms(r, i, 18),
      .host = get_i64(r, i, 19),
      .errors = get_text(r, i, 20),
      .plan = get_text(r, i, 21),
      .where_terms = get_text(r, i, 22)};
}

int pg_bulk_get(void *db, int64_t id, journal_bulk *out) {
  params p = {0};
  p_i64(&p, id);
  PGresult *r = pg_query(db, BULK_COLUMNS "WHERE id=$1", &p);
  if (!r)
    return DURO_E_STORAGE;
  int rc = PQntuples(r) == 1 ? 0 : DURO_E_NOT_FOUND;
  if (rc == 0)
    read_row(r, 0, out);
  PQclear(r);
  return rc;
}

int pg_bulk_list(void *db, const char *workflow, int running, size_t limit,
                 void (*fn)(void *ctx, const journal_bulk *b), void *ctx) {
  params p = {0};
  p_text(&p, workflow);
  p_i64(&p, running);
  p_i64(&p, (int64_t)limit);
  PGresult *r = pg_query(db,
                         BULK_COLUMNS "WHERE ($1::text IS NULL OR workflow=$1) "
                                      "AND ($2::int=0 OR state='running') "
                                      "ORDER BY id DESC LIMIT $3",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++) {
    journal_bulk b;
    read_row(r, i, &b);
    fn(ctx, &b);
    journal_bulk_clear(&b);
  }
  PQclear(r);
  return 0;
}
