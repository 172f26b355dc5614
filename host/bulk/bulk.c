/* bulk.c — bulk actions' jobs made, read and cancelled (bulk.h): the
 * matches counted and the job's row written, a job's row shown as
 * duro_bulk_job, a workflow's recent jobs, a cancel. */
#include "bulk.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bulk_internal.h"
#include "core.h"
#include "error.h"
#include "util.h"

static const char *const action_names[] = {
    [DURO_BULK_TERMINATE] = "terminate", [DURO_BULK_RESTART] = "restart",
    [DURO_BULK_RESUME] = "resume",       [DURO_BULK_PAUSE] = "pause",
    [DURO_BULK_DELETE] = "delete",
};

const char *duro_bulk_action_name(duro_bulk_action a) {
  return (unsigned)a < sizeof action_names / sizeof *action_names
             ? action_names[a]
             : "unknown";
}

int duro_bulk_action_parse(const char *name) {
  for (size_t i = 0; name && i < sizeof action_names / sizeof *action_names;
       i++)
    if (!strcmp(name, action_names[i]))
      return (int)i;
  return -1;
}

char *bulk_where_text(const duro_attr_filter *where, size_t n) {
  static const char *const ops[] = {[DURO_ATTR_EQ] = ":",
                                    [DURO_ATTR_LT] = "<",
                                    [DURO_ATTR_LE] = "<=",
                                    [DURO_ATTR_GT] = ">",
                                    [DURO_ATTR_GE] = ">="};
  char *text = NULL;
  for (size_t i = 0; i < n; i++) {
    const duro_attr_filter *w = &where[i];
    char *term = w->str ? xasprintf("%s%s%s", w->name, ops[w->op], w->str)
                        : xasprintf("%s%s%.17g", w->name, ops[w->op], w->num);
    char *joined = text ? xasprintf("%s\n%s", text, term) : term;
    if (text) {
      free(text);
      free(term);
    }
    text = joined;
  }
  return text;
}

int bulk_where_parse(duro_engine *e, const char *workflow, const char *text,
                     duro_attr_filter *where, size_t *n, char *why,
                     size_t len) {
  *n = 0;
  for (const char *p = text; p && *p && *n < DURO_ATTR_MAX;) {
    const char *nl = strchr(p, '\n');
    char *term = nl ? xasprintf("%.*s", (int)(nl - p), p) : xstrdup(p);
    int rc = duro_list_where_parse(e, workflow, term, &where[*n], why, len);
    free(term);
    if (rc)
      return rc;
    (*n)++;
    p = nl ? nl + 1 : p + strlen(p);
  }
  return 0;
}

typedef struct count_ctx {
  int64_t n, last, newest;
} count_ctx;

static void count_one(void *ctx, const journal_list_row *row) {
  count_ctx *c = ctx;
  c->n++;
  c->last = row->rowid;
}

static void newest_one(void *ctx, const journal_list_row *row) {
  ((count_ctx *)ctx)->newest = row->rowid;
}

/* The matches below `cursor`, a page of the list at a time (the store's
 * listing: the same filter, the same indexes). */
static int count_matches(journal *j, const char *workflow,
                         const journal_list_filter *f, int64_t cursor,
                         int64_t *n) {
  *n = 0;
  for (;;) {
    count_ctx c = {0};
    int rc = journal_list(j, workflow, f, cursor, 1000, count_one, &c);
    if (rc)
      return rc;
    *n += c.n;
    if (c.n < 1000)
      return 0;
    cursor = c.last;
  }
}

/* The chosen ids as the store takes them, a JSON array (malloc'ed;
 * NULL for none). */
static char *ids_json(const duro_bulk_spec *spec) {
  if (!spec->n_ids)
    return NULL;
  json_t *a = json_array();
  for (size_t i = 0; i < spec->n_ids; i++)
    json_array_append_new(a, json_string(spec->ids[i]));
  char *text = json_dumps(a, JSON_COMPACT);
  json_decref(a);
  if (!text) /* out of memory: never a job on every instance instead */
    abort();
  return text;
}

int duro_bulk_create(duro_engine *e, const duro_bulk_spec *spec, int dry_run,
                     int64_t *id, int64_t *matched) {
  *id = 0;
  *matched = 0;
  if (!engine_find_workflow(e, spec->workflow))
    return DURO_E_WORKFLOW_NOT_FOUND;
  /* only an activation holds these: the store never has them */
  if (spec->filter.status == DURO_STATUS_RUNNING ||
      spec->filter.status == DURO_STATUS_WAITING_FOR_PAUSE ||
      duro_bulk_action_parse(duro_bulk_action_name(spec->action)) < 0 ||
      spec->n_ids > DURO_BULK_IDS)
    return DURO_E_INVALID_ARGUMENT;
  for (size_t i = 0; i < spec->n_ids; i++)
    if (!duro_instance_id_valid(spec->ids[i]))
      return DURO_E_INVALID_ARGUMENT;
  journal *j = engine_journal(e);
  /* The bound: the workflow's newest instance now.  Those made later
   * have higher rowids, and the walk never meets them. */
  static const journal_list_filter any = {.status = -1};
  count_ctx newest = {0};
  int rc = journal_list(j, spec->workflow, &any, 0, 1, newest_one, &newest);
  journal_list_filter f = engine_list_filter(&spec->filter);
  char *ids = ids_json(spec);
  f.ids = ids;
  if (rc == 0 && newest.newest)
    rc = count_matches(j, spec->workflow, &f, newest.newest + 1, matched);
  if (rc || dry_run) {
    free(ids);
    return rc;
  }
  journal_bulk row = {
      .workflow = (char *)spec->workflow,
      .action = (char *)duro_bulk_action_name(spec->action),
      .terminate = spec->terminate,
      .filter = f,
      .where_terms = bulk_where_text(spec->filter.where, spec->filter.n_where),
      .bound = newest.newest,
      .cursor = newest.newest + 1,
      .matched = *matched,
      .created_ms = engine_now(e),
      .host = journal_host(j)};
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_BULK_INSERT);
  op->bulk = &row;
  rc = journal_commit(j, &b);
  if (rc == 0)
    *id = op->out_rowid;
  journal_batch_free(&b);
  free(row.where_terms);
  free(ids);
  if (rc == 0)
    bulk_wake(e);
  return rc;
}

/* "<instance>\t<error>" lines into the job's errors. */
static void errors_parse(const char *text, duro_bulk_job *out) {
  for (const char *p = text; p && *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    const char *tab = memchr(p, '\t', len);
    if (tab) {
      out->errors =
          xrealloc(out->errors, (out->n_errors + 1) * sizeof *out->errors);
      out->errors[out->n_errors++] = (duro_bulk_error){
          .instance = xasprintf("%.*s", (int)(tab - p), p),
          .error =
              xasprintf("%.*s", (int)(len - (size_t)(tab - p) - 1), tab + 1)};
    }
    p = nl ? nl + 1 : p + len;
  }
}

/* The row as a duro_bulk_job, its strings taken. */
static void job_from_row(journal_bulk *row, duro_bulk_job *out) {
  *out = (duro_bulk_job){
      .id = row->id,
      .workflow = row->workflow,
      .action = row->action,
      .terminate = row->terminate,
      .filter = {.status = row->filter.status,
                 .prefix = row->filter.prefix,
                 .created_after = row->filter.created_after,
                 .created_before = row->filter.created_before,
                 .ended_after = row->filter.ended_after,
                 .ended_before = row->filter.ended_before},
      .where_terms = row->where_terms,
      .ids = (char *)row->filter.ids,
      .state = row->state,
      .matched = row->matched,
      .done = row->done,
      .failed = row->failed,
      .skipped = row->skipped,
      .created_ms = row->created_ms,
      .ended_ms = row->ended_ms == JOURNAL_NONE ? DURO_NO_TIME : row->ended_ms};
  errors_parse(row->errors, out);
  row->workflow = row->action = row->state = row->where_terms = NULL;
  row->filter.prefix = row->filter.ids = NULL;
  journal_bulk_clear(row);
}

void duro_bulk_job_free(duro_bulk_job *j) {
  free(j->workflow);
  free(j->action);
  free((char *)j->filter.prefix);
  free(j->state);
  free(j->where_terms);
  free(j->ids);
  for (size_t i = 0; i < j->n_errors; i++) {
    free(j->errors[i].instance);
    free(j->errors[i].error);
  }
  free(j->errors);
  *j = (duro_bulk_job){0};
}

int duro_bulk_get(duro_engine *e, int64_t id, duro_bulk_job *out) {
  *out = (duro_bulk_job){0};
  journal_bulk row;
  int rc = journal_bulk_get(engine_journal(e), id, &row);
  if (rc == 0)
    job_from_row(&row, out);
  return rc;
}

typedef struct list_ctx {
  duro_bulk_job *v;
  size_t n;
} list_ctx;

static void list_one(void *ctx, const journal_bulk *b) {
  list_ctx *l = ctx;
  journal_bulk copy = *b;
  copy.workflow = xstrdup(b->workflow);
  copy.action = xstrdup(b->action);
  copy.state = xstrdup(b->state);
  copy.filter.prefix = xstrdup_null(b->filter.prefix);
  copy.filter.ids = xstrdup_null(b->filter.ids);
  copy.errors = xstrdup_null(b->errors);
  copy.where_terms = xstrdup_null(b->where_terms);
  copy.plan = NULL;
  l->v = xrealloc(l->v, (l->n + 1) * sizeof *l->v);
  job_from_row(&copy, &l->v[l->n++]);
}

int duro_bulk_list(duro_engine *e, const char *workflow, size_t limit,
                   duro_bulk_job **out, size_t *n) {
  list_ctx l = {0};
  *out = NULL;
  *n = 0;
  if (!engine_find_workflow(e, workflow))
    return DURO_E_WORKFLOW_NOT_FOUND;
  int rc =
      journal_bulk_list(engine_journal(e), workflow, 0, limit, list_one, &l);
  if (rc) {
    for (size_t i = 0; i < l.n; i++)
      duro_bulk_job_free(&l.v[i]);
    free(l.v);
    return rc;
  }
  *out = l.v;
  *n = l.n;
  return 0;
}

int duro_bulk_cancel(duro_engine *e, int64_t id) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_BULK_CANCEL);
  op->rowid = id;
  op->ts_ms = engine_now(e);
  int rc = journal_commit(engine_journal(e), &b);
  int cancelled = op->out_rowid == 1;
  journal_batch_free(&b);
  if (rc || cancelled)
    return rc;
  journal_bulk row;
  rc = journal_bulk_get(engine_journal(e), id, &row);
  if (rc == 0)
    journal_bulk_clear(&row);
  return rc ? rc : DURO_E_INVALID_ARGUMENT; /* it had ended */
}
