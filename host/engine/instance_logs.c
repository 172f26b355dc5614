/* instance_logs.c — an instance's log lines: what its plugin code logs
 * (duro_log from run() or a step callback, in the engine or in a worker
 * process) kept in the journal with the instance, and read back.
 *
 * A line is queued to the journal's group commit as it is logged, never
 * waited for: the commit queue is first in, first out, so a line is on
 * disk no later than the step commit its code makes next, and a kill -9
 * loses at most lines logged after the last committed step.  The journal
 * numbers the lines per instance and deletes the oldest past the
 * workflow's limits.logs in the same transaction. */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "step_internal.h"
#include "util.h"

/* The longest line kept: a longer one is cut there (its end marked). */
#define LOG_LINE_MAX 8192

typedef struct kept_line {
  journal_batch b;
  char *step, *message;
} kept_line;

static void kept_done(void *ctx, int rc) {
  (void)rc; /* a line lost to a failing disk is not worth more */
  kept_line *k = ctx;
  journal_batch_free(&k->b);
  free(k->step);
  free(k->message);
  free(k);
}

void engine_log_keep(duro_step *a, const char *step, uint32_t attempt,
                     int level, char *message) {
  if (!a || a->dry || a->inst.rowid <= 0) {
    free(message);
    return;
  }
  kept_line *k = xcalloc(1, sizeof *k);
  if (strlen(message) > LOG_LINE_MAX) {
    static const char cut[] = " [cut]";
    message = xrealloc(message, LOG_LINE_MAX + sizeof cut);
    memcpy(message + LOG_LINE_MAX, cut, sizeof cut);
  }
  k->message = message; /* ours now */
  activation_trace_log(a, engine_now(a->e), level, step, attempt, message);
  k->step = step ? xstrdup(step) : NULL;
  journal_op *op = journal_batch_add(&k->b, JOP_LOG_APPEND);
  op->rowid = a->inst.rowid;
  op->ts_ms = engine_now(a->e);
  op->from_seq = level;
  op->step_key = k->step;
  op->event_seq = attempt;
  op->body = k->message;
  op->max_attempts = __atomic_load_n(&a->wf->limits.max_logs, __ATOMIC_RELAXED);
  journal_commit_background(a->e->j, &k->b, kept_done, k);
}

int duro_instance_logs(duro_engine *e, const char *workflow, const char *id,
                       int64_t after, size_t limit, duro_log_list *out) {
  out->v = NULL;
  out->n = 0;
  journal_instance in = {0};
  int rc = engine_instance_get(e, workflow, id, &in);
  if (rc)
    return rc;
  journal_log *v = NULL;
  size_t n = 0;
  rc = journal_logs_read(e->j, in.rowid, after, limit, &v, &n);
  journal_instance_clear(&in);
  if (rc)
    return rc;
  /* the same fields: the strings move over */
  out->v = n ? xcalloc(n, sizeof *out->v) : NULL;
  for (size_t i = 0; i < n; i++)
    out->v[i] = (duro_log_line){.n = v[i].n,
                                .time_ms = v[i].ts_ms,
                                .level = v[i].level,
                                .step = v[i].step,
                                .attempt = v[i].attempt,
                                .message = v[i].message};
  out->n = n;
  free(v);
  return 0;
}

void duro_log_list_free(duro_log_list *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->v[i].step);
    free(l->v[i].message);
  }
  free(l->v);
  l->v = NULL;
  l->n = 0;
}
