/* pipeline.c — the pipelines' registry (the driver's state), the sends
 * that append records to the journal, and the stats GET /pipelines shows. */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "duro.h"
#include "journal.h"
#include "json_pointer.h"
#include "pipeline_internal.h"
#include "util.h"

pipeline_state *pipeline_state_of(duro_engine *e) {
  return duro_engine_driver_state(e, &pipeline_driver);
}

pipeline *pipeline_find(duro_engine *e, const char *name) {
  pipeline_state *s = pipeline_state_of(e);
  for (size_t i = 0; s && i < s->n; i++)
    if (strcmp(s->v[i].name, name) == 0)
      return &s->v[i];
  return NULL;
}

int duro_pipeline_exists(duro_engine *e, const char *name) {
  return pipeline_find(e, name) != NULL;
}

void pipeline_set_error(pipeline *p, const char *msg) {
  pthread_mutex_lock(&p->mu);
  free(p->last_error);
  p->last_error = msg ? xstrdup(msg) : NULL;
  if (msg)
    p->errors++;
  pthread_mutex_unlock(&p->mu);
}

/* A csv pipeline's columns: at least one, each a key or (from '/') a
 * JSON pointer; a jsonl pipeline has none. */
static int columns_valid(const duro_pipeline_options *o) {
  if (o->format != DURO_PIPELINE_CSV)
    return o->format == DURO_PIPELINE_JSONL && o->n_columns == 0;
  if (o->n_columns == 0 || !o->columns)
    return 0;
  for (size_t i = 0; i < o->n_columns; i++)
    if (!o->columns[i] || !o->columns[i][0] ||
        (o->columns[i][0] == '/' && !duro_json_pointer_valid(o->columns[i])))
      return 0;
  return 1;
}

int duro_pipeline_objects_only(duro_engine *e, const char *name) {
  pipeline *p = pipeline_find(e, name);
  return p && p->o.format == DURO_PIPELINE_CSV;
}

/* Its row in the journal is made here, once: a send counts on it. */
int duro_pipeline_register(duro_engine *e, const char *name,
                           const duro_pipeline_options *o) {
  pipeline_state *s = pipeline_state_of(e);
  int s3 = o && o->s3.endpoint;
  if (!s || !name || !o || !o->dir == !s3 || !o->partition ||
      o->roll_size <= 0 ||
      (s3 && (!o->s3.bucket || !o->s3.region || !o->s3.access_key ||
              !o->s3.secret_key)) ||
      !columns_valid(o))
    return DURO_E_INVALID_ARGUMENT;
  if (pipeline_find(e, name))
    return DURO_E_ALREADY_EXISTS;
  journal_batch b = {0};
  journal_batch_add(&b, JOP_PIPELINE_DECLARE)->queue = name;
  int rc = journal_commit(engine_journal(e), &b);
  journal_batch_free(&b);
  if (rc)
    return rc;
  s->v = xrealloc(s->v, (s->n + 1) * sizeof *s->v);
  pipeline *p = &s->v[s->n++];
  memset(p, 0, sizeof *p);
  p->engine = e;
  p->name = xstrdup(name);
  p->o = *o;
  p->o.dir = o->dir ? xstrdup(o->dir) : NULL;
  p->o.partition = xstrdup(o->partition);
  if (o->n_columns) {
    char **cols = xcalloc(o->n_columns, sizeof *cols);
    for (size_t i = 0; i < o->n_columns; i++)
      cols[i] = xstrdup(o->columns[i]);
    p->o.columns = (const char *const *)cols;
  }
  if (p->o.max_retry_delay_ms <= 0)
    p->o.max_retry_delay_ms = PIPELINE_RETRY_MAX_MS;
  p->backlog_read_ms = INT64_MIN;
  if (s3) {
    p->o.s3.endpoint = xstrdup(o->s3.endpoint);
    p->o.s3.bucket = xstrdup(o->s3.bucket);
    p->o.s3.prefix = xstrdup(o->s3.prefix ? o->s3.prefix : "");
    p->o.s3.region = xstrdup(o->s3.region);
    p->o.s3.access_key = xstrdup(o->s3.access_key);
    p->o.s3.secret_key = xstrdup(o->s3.secret_key);
    pipeline_s3_init(); /* here, before the threads that upload */
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_mutex_init(&p->flush_mu, NULL);
  return 0;
}

/* Refuses a send of `bytes` while p's backlog is past its bound, and
 * counts it in p's view of the backlog otherwise (a send that then fails
 * to commit is counted until the next read).  The journal is read only
 * when that view is old or over the bound, so a send never reads it while
 * the backlog is well under: a refusal always follows a read.  Checked
 * before the commit, so a bound a few sends may cross at once by a send
 * each: what it bounds is the disk.  *after: the backlog counting this
 * send. */
static int backlog_check(duro_engine *e, pipeline *p, int64_t bytes,
                         int64_t *after) {
  int64_t now = engine_now(e);
  pthread_mutex_lock(&p->mu);
  int fresh = p->backlog_read_ms != INT64_MIN && now >= p->backlog_read_ms &&
              now - p->backlog_read_ms < PIPELINE_BACKLOG_READ_MS &&
              p->backlog_bytes < p->o.max_backlog;
  pthread_mutex_unlock(&p->mu);
  if (!fresh) {
    journal_pipeline st;
    int rc = journal_pipeline_get(engine_journal(e), p->name, &st);
    if (rc)
      return rc == DURO_E_NOT_FOUND ? DURO_E_STORAGE : rc;
    pthread_mutex_lock(&p->mu);
    p->backlog_bytes = st.backlog_bytes;
    p->backlog_read_ms = now;
    pthread_mutex_unlock(&p->mu);
  }
  pthread_mutex_lock(&p->mu);
  int over = p->backlog_bytes >= p->o.max_backlog;
  if (!over)
    p->backlog_bytes += bytes;
  *after = p->backlog_bytes;
  pthread_mutex_unlock(&p->mu);
  return over ? DURO_E_OVERLOADED : 0;
}

char *pipeline_lines(const char *const *records, size_t n, size_t *len) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++)
    total += strlen(records[i]) + 1;
  char *lines = xmalloc(total + 1), *at = lines;
  for (size_t i = 0; i < n; i++) {
    size_t k = strlen(records[i]);
    if (memchr(records[i], '\n', k)) {
      free(lines);
      return NULL;
    }
    memcpy(at, records[i], k);
    at[k] = '\n';
    at += k + 1;
  }
  *at = '\0';
  *len = total;
  return lines;
}

/* One op for the whole send (journal.h): its records' seqs are reserved
 * at once and inserted by one prepared statement, where an op a record
 * cost two statements each. */
static int append_op(duro_engine *e, pipeline *p, const char *lines, size_t n,
                     size_t len, journal_batch *b, int64_t *after) {
  int rc = backlog_check(e, p, (int64_t)len, after);
  if (rc)
    return rc;
  journal_op *op = journal_batch_add(b, JOP_PIPELINE_APPEND);
  op->queue = p->name;
  op->body = lines;
  op->from_seq = (int64_t)n;
  op->ts_ms = engine_now(e);
  return 0;
}

int pipeline_append_op(duro_engine *e, pipeline *p, const char *lines, size_t n,
                       size_t len, journal_batch *b) {
  int64_t after;
  return append_op(e, p, lines, n, len, b, &after);
}

int duro_pipeline_append(duro_engine *e, const char *name,
                         const char *const *records, size_t n,
                         int64_t *first_seq) {
  pipeline *p = pipeline_find(e, name);
  if (!p)
    return DURO_E_NOT_FOUND;
  if (n == 0)
    return 0;
  /* Compact JSON: an object is the only value that starts with '{'. */
  for (size_t i = 0; p->o.format == DURO_PIPELINE_CSV && i < n; i++)
    if (records[i][0] != '{')
      return DURO_E_INVALID_MESSAGE;
  size_t len = 0;
  char *lines = pipeline_lines(records, n, &len);
  if (!lines)
    return DURO_E_INVALID_MESSAGE;
  journal_batch b = {0};
  journal_batch_own(&b, lines);
  int64_t after = 0;
  int rc = append_op(e, p, lines, n, len, &b, &after);
  if (rc == 0)
    rc = journal_commit(engine_journal(e), &b);
  if (rc == 0 && b.ops[0].rc)
    rc = b.ops[0].rc;
  if (rc == 0 && first_seq)
    *first_seq = b.ops[0].out_rowid;
  journal_batch_free(&b);
  /* A file's worth waits: the next pass wakes the flusher to write it. */
  if (rc == 0 && after >= p->o.roll_size)
    engine_kick_scheduler(e);
  return rc;
}

int duro_pipeline_bind(duro_engine *e, const char *binding, const char *name) {
  pipeline *p = pipeline_find(e, name);
  if (!p || !binding)
    return p ? DURO_E_INVALID_ARGUMENT : DURO_E_NOT_FOUND;
  if (pipeline_bound(e, binding))
    return DURO_E_ALREADY_EXISTS;
  free(p->binding);
  p->binding = xstrdup(binding);
  return 0;
}

pipeline *pipeline_bound(duro_engine *e, const char *binding) {
  pipeline_state *s = pipeline_state_of(e);
  for (size_t i = 0; s && binding && i < s->n; i++)
    if (s->v[i].binding && strcmp(s->v[i].binding, binding) == 0)
      return &s->v[i];
  return NULL;
}

typedef struct peek_ctx {
  int (*fn)(void *ctx, const char *record);
  void *ctx;
} peek_ctx;

static int peek_one(void *ctx, int64_t seq, const char *body, int64_t bytes,
                    int64_t sent_ms) {
  (void)seq, (void)bytes, (void)sent_ms;
  const peek_ctx *pc = ctx;
  return pc->fn(pc->ctx, body);
}

int duro_pipeline_peek(duro_engine *e, const char *name, size_t limit,
                       int (*fn)(void *ctx, const char *record), void *ctx) {
  if (!pipeline_find(e, name))
    return DURO_E_NOT_FOUND;
  peek_ctx pc = {fn, ctx};
  return journal_pipeline_records(engine_journal(e), name, 1, INT64_MAX, limit,
                                  peek_one, &pc);
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const duro_pipeline_stat *)a)->name,
                ((const duro_pipeline_stat *)b)->name);
}

int duro_pipeline_stats_read(duro_engine *e, const char *name,
                             duro_pipeline_stat_list *out) {
  pipeline_state *s = pipeline_state_of(e);
  out->v = xcalloc(s->n ? s->n : 1, sizeof *out->v);
  out->n = 0;
  if (name && !pipeline_find(e, name))
    return DURO_E_NOT_FOUND;
  for (size_t i = 0; i < s->n; i++) {
    pipeline *p = &s->v[i];
    if (name && strcmp(p->name, name) != 0)
      continue;
    journal_pipeline st;
    int rc = journal_pipeline_get(engine_journal(e), p->name, &st);
    if (rc)
      return rc == DURO_E_NOT_FOUND ? DURO_E_STORAGE : rc;
    duro_pipeline_stat *t = &out->v[out->n++];
    t->name = xstrdup(p->name);
    t->options = &p->o;
    t->accepted = st.accepted;
    t->accepted_bytes = st.accepted_bytes;
    t->written = st.written;
    t->written_bytes = st.written_bytes;
    t->files = st.files;
    t->backlog = st.backlog;
    t->backlog_bytes = st.backlog_bytes;
    t->oldest_ms = st.oldest_ms;
    t->last_flush_ms = st.last_flush_ms;
    t->plan_first = st.plan_first;
    t->plan_last = st.plan_last;
    pthread_mutex_lock(&p->mu);
    t->last_error = p->last_error ? xstrdup(p->last_error) : NULL;
    t->write_errors = p->errors;
    pthread_mutex_unlock(&p->mu);
  }
  qsort(out->v, out->n, sizeof *out->v, by_name);
  return 0;
}

void duro_pipeline_stat_list_free(duro_pipeline_stat_list *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->v[i].name);
    free(l->v[i].last_error);
  }
  free(l->v);
  l->v = NULL;
  l->n = 0;
}
