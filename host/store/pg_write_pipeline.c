/* pg_write_pipeline.c — the PostgreSQL backend's ops on pipelines, as
 * sqlite_write_pipeline.c: a pipeline declared, a send's records appended
 * under its next seqs, a batch's plan recorded or claimed, a batch done.  A
 * plan's UPDATE takes the pipeline's row lock, so of two hosts only one
 * records or claims it; the other's changes nothing. */
#include <libpq-fe.h>
#include <string.h>

#include "pg_internal.h"

/* The counter moved once and a send's records inserted in one
 * statement, whose row is the first record's seq (no row: the pipeline
 * is not declared). */
static int append(pg_store *pg, journal_op *op) {
  size_t len = strlen(op->body); /* the records' bytes, newlines included */
  if (!store_pipeline_lines_are(op->body, len, op->from_seq)) {
    op->rc = DURO_E_INVALID_ARGUMENT;
    return 0;
  }
  params p = {0};
  p_text(&p, op->queue);
  p_text(&p, op->body);
  p_i64(&p, op->from_seq);
  p_i64(&p, (int64_t)len);
  p_i64(&p, op->ts_ms);
  int inserted = 0;
  int rc =
      pg_write_returning(pg, ST_PIPELINE_APPEND, &p, &inserted, &op->out_rowid);
  if (rc == 0 && !inserted)
    op->rc = DURO_E_NOT_FOUND;
  return rc;
}

/* The counts and the plan, then the records, in one statement: the
 * records go only when the plan was still this host's. */
static int done(pg_store *pg, journal_op *op) {
  params p = {0};
  p_text(&p, op->queue);
  p_i64(&p, op->from_seq);
  p_i64(&p, op->event_seq);
  p_i64(&p, op->rowid);
  p_i64(&p, op->ts_ms);
  PGresult *r = pg_write_run(pg, ST_PIPELINE_DONE, &p);
  if (!r)
    return DURO_E_STORAGE;
  op->out_rowid = PQntuples(r) > 0 ? get_i64(r, 0, 0) : 0;
  PQclear(r);
  return 0;
}

int pg_pipeline_apply(pg_store *pg, journal_op *op) {
  params p = {0};
  switch (op->kind) {
  case JOP_PIPELINE_DECLARE:
    p_text(&p, op->queue);
    return pg_write_queue(pg, ST_PIPELINE_DECLARE, &p);
  case JOP_PIPELINE_APPEND:
    return append(pg, op);
  case JOP_PIPELINE_PLAN:
    p_text(&p, op->queue);
    p_i64(&p, op->from_seq);
    p_i64(&p, op->event_seq);
    p_i64(&p, op->ts_ms);
    p_i64(&p, op->rowid);
    p_i64(&p, op->visible_ms);
    return pg_write_changes(pg, ST_PIPELINE_PLAN, &p, op);
  case JOP_PIPELINE_CLAIM:
    p_text(&p, op->queue);
    p_i64(&p, op->rowid);
    p_i64(&p, op->ts_ms);
    p_i64(&p, op->visible_ms);
    return pg_write_changes(pg, ST_PIPELINE_CLAIM, &p, op);
  case JOP_PIPELINE_DONE:
    return done(pg, op);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}
