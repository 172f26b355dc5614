/* journal_rows.c — an instance's rows whole (journal.h's journal_rows):
 * read out of one journal for `duro workflows instances export`, and
 * written into another by the test kit's import.  Built on the journal's
 * reads and ops alone, so it works on every backend and knows no SQL. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "journal.h"
#include "util.h"

typedef struct attempts_acc {
  journal_attempt_row *v;
  size_t n, cap;
} attempts_acc;

static void collect_attempt(void *ctx, const char *key, uint32_t number,
                            int64_t started_ms, int64_t ended_ms,
                            const char *error, const char *build) {
  attempts_acc *acc = ctx;
  if (acc->n == acc->cap) {
    acc->cap = acc->cap ? 2 * acc->cap : 8;
    acc->v = xrealloc(acc->v, acc->cap * sizeof *acc->v);
  }
  acc->v[acc->n++] = (journal_attempt_row){.key = xstrdup(key),
                                           .number = number,
                                           .started_ms = started_ms,
                                           .ended_ms = ended_ms,
                                           .error = xstrdup_null(error),
                                           .build = xstrdup_null(build)};
}

int journal_rows_read(journal *j, const char *workflow, const char *id,
                      journal_rows *out) {
  memset(out, 0, sizeof *out);
  int rc = journal_instance_get(j, workflow, id, &out->inst);
  if (rc == 0 && out->inst.parent > 0) {
    journal_instance parent = {0};
    /* gone (its retention ran out) is no error: the child stands alone */
    if (journal_instance_get_rowid(j, out->inst.parent, &parent) == 0) {
      out->parent_workflow = parent.workflow;
      out->parent_id = parent.id;
      parent.workflow = parent.id = NULL;
    }
    journal_instance_clear(&parent);
  }
  if (rc == 0)
    rc = journal_steps_load(j, out->inst.rowid, &out->steps, &out->n_steps);
  attempts_acc acc = {0};
  if (rc == 0)
    rc = journal_attempts_each(j, out->inst.rowid, collect_attempt, &acc);
  out->attempts = acc.v;
  out->n_attempts = acc.n;
  if (rc == 0)
    rc = journal_events_all(j, out->inst.rowid, &out->events, &out->n_events);
  if (rc)
    journal_rows_free(out);
  return rc;
}

void journal_rows_free(journal_rows *r) {
  journal_instance_clear(&r->inst);
  free(r->parent_workflow);
  free(r->parent_id);
  journal_steps_free(r->steps, r->n_steps);
  for (size_t i = 0; i < r->n_attempts; i++) {
    free(r->attempts[i].key);
    free(r->attempts[i].error);
    free(r->attempts[i].build);
  }
  free(r->attempts);
  journal_events_free(r->events, r->n_events);
  memset(r, 0, sizeof *r);
}

/* Commits b and resets it: 0, the commit's error, or the first op's. */
static int commit_ops(journal *j, journal_batch *b) {
  int rc = journal_commit(j, b);
  for (size_t i = 0; i < b->n && rc == 0; i++)
    rc = b->ops[i].rc;
  return rc;
}

int journal_rows_write(journal *j, const journal_rows *r, int64_t *rowid) {
  journal_batch b = {0};
  /* 1. The row, not ended yet (an ended instance takes no events), its
   * parent left out: it is no instance of this journal. */
  journal_instance row = r->inst;
  row.status = DURO_STATUS_QUEUED;
  row.parent = 0;
  row.deadline_ms = r->inst.restarts > 0 ? JOURNAL_NONE : r->inst.deadline_ms;
  journal_batch_add(&b, JOP_INSTANCE_INSERT)->inst = &row;
  int rc = journal_commit(j, &b);
  if (rc == 0)
    rc = b.ops[0].rc;
  int64_t id = b.ops[0].out_rowid;
  journal_batch_reset(&b);
  if (rc) {
    journal_batch_free(&b);
    return rc;
  }
  /* 2. Its events, steps and failed attempts, then its state: the
   * restarts (each writes the deadline), the pin, a pending control, and
   * the row's mutable columns last. */
  for (size_t i = 0; i < r->n_events; i++) {
    journal_op *op = journal_batch_add(&b, JOP_EVENT_INSERT);
    op->rowid = id;
    op->event_type = r->events[i].type;
    op->event_payload = r->events[i].payload;
    op->ts_ms = r->events[i].ts_ms;
  }
  for (size_t i = 0; i < r->n_steps; i++) {
    journal_op *op = journal_batch_add(&b, JOP_STEP_PUT);
    op->rowid = id;
    op->step = &r->steps[i];
  }
  for (size_t i = 0; i < r->n_attempts; i++) {
    const journal_attempt_row *at = &r->attempts[i];
    journal_op *op = journal_batch_add(&b, JOP_ATTEMPT_PUT);
    op->rowid = id;
    op->attempt = (journal_attempt){.key = at->key,
                                    .number = at->number,
                                    .started_ms = at->started_ms,
                                    .ended_ms = at->ended_ms,
                                    .error = at->error,
                                    .build = at->build};
  }
  for (int64_t i = 0; i < r->inst.restarts; i++) {
    journal_op *op = journal_batch_add(&b, JOP_INSTANCE_RESTARTED);
    op->rowid = id;
    op->ts_ms = r->inst.deadline_ms;
  }
  if (r->inst.build) {
    journal_op *op = journal_batch_add(&b, JOP_INSTANCE_PIN);
    op->rowid = id;
    op->step_key = r->inst.build;
  }
  row = r->inst;
  row.rowid = id;
  if (row.control != JOURNAL_CONTROL_NONE) {
    journal_op *op = journal_batch_add(&b, JOP_INSTANCE_CONTROL);
    op->rowid = id;
    op->inst = &row;
  }
  journal_batch_add(&b, JOP_INSTANCE_SET)->inst = &row;
  rc = commit_ops(j, &b);
  /* 3. Which step took each event, now that the events have their seqs. */
  journal_batch ate = {0};
  for (size_t i = 0; i < r->n_events && rc == 0; i++) {
    if (!r->events[i].consumed_by)
      continue;
    journal_op *op = journal_batch_add(&ate, JOP_EVENT_CONSUME);
    op->event_seq = b.ops[i].out_rowid;
    op->step_key = r->events[i].consumed_by;
  }
  if (rc == 0 && ate.n)
    rc = commit_ops(j, &ate);
  journal_batch_free(&ate);
  journal_batch_free(&b);
  if (rc == 0 && rowid)
    *rowid = id;
  return rc;
}
