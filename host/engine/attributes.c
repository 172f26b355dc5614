/* attributes.c — instances' search attributes (base/attr.h) on the
 * engine's side: a workflow's index copied at its registration, the
 * values a create's params give (written by the insert, in the create's
 * own commit), set from run() (duro_set_attribute: a commit of its
 * own before it returns), a list's `where` parsed against the index,
 * and an instance's stored values read and matched. */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "error.h"
#include "json_pointer.h"
#include "log.h"
#include "step_internal.h"
#include "util.h"

void engine_index_copy(duro_workflow_limits *l) {
  if (!l->n_index) {
    l->index = NULL;
    return;
  }
  duro_attr_decl *v = xcalloc(l->n_index, sizeof *v);
  for (size_t i = 0; i < l->n_index; i++)
    v[i] = (duro_attr_decl){.name = xstrdup(l->index[i].name),
                            .from = xstrdup_null(l->index[i].from),
                            .type = l->index[i].type};
  l->index = v;
}

void engine_index_free(duro_workflow_limits *l) {
  for (size_t i = 0; i < l->n_index; i++) {
    free((char *)l->index[i].name);
    free((char *)l->index[i].from);
  }
  free((duro_attr_decl *)l->index);
  l->index = NULL;
  l->n_index = 0;
}

const duro_attr_decl *engine_attr_decl(const wf_reg *wf, const char *name) {
  return duro_attr_decl_find(wf->limits.index, wf->limits.n_index, name);
}

/* Only a workflow whose index takes values from the params parses them:
 * one without pays nothing at create.  A value missing or of another
 * type gives no attribute. */
duro_attr *engine_attrs_of_params(const wf_reg *wf, const char *params,
                                  journal_batch *b, size_t *n) {
  *n = 0;
  const duro_workflow_limits *l = &wf->limits;
  size_t from = 0;
  for (size_t i = 0; i < l->n_index; i++)
    from += l->index[i].from != NULL;
  if (!from || !params)
    return NULL;
  json_t *doc = json_loads(params, JSON_DECODE_ANY, NULL);
  if (!doc)
    return NULL;
  duro_attr *v = NULL;
  for (size_t i = 0; i < l->n_index; i++) {
    const duro_attr_decl *d = &l->index[i];
    json_t *at = d->from ? duro_json_pointer_get(doc, d->from) : NULL;
    duro_attr a = {.name = (char *)d->name};
    if (!at || duro_attr_from_json(at, d->type, &a) < 0)
      continue;
    if (!v)
      v = journal_batch_own(b, xcalloc(from, sizeof *v));
    if (a.str)
      journal_batch_own(b, a.str);
    v[(*n)++] = a;
  }
  json_decref(doc);
  return v;
}

typedef struct attrs_read {
  duro_attr *v;
  size_t n;
} attrs_read;

static void keep_attr(void *ctx, const duro_attr *a) {
  attrs_read *r = ctx;
  r->v = xrealloc(r->v, (r->n + 1) * sizeof *r->v);
  r->v[r->n++] = (duro_attr){
      .name = xstrdup(a->name), .str = xstrdup_null(a->str), .num = a->num};
}

static void attrs_free(duro_attr *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(v[i].name);
    free(v[i].str);
  }
  free(v);
}

int engine_attrs_read(duro_engine *e, int64_t rowid, duro_attr **out,
                      size_t *n) {
  attrs_read r = {0};
  int rc = journal_attributes(e->j, rowid, keep_attr, &r);
  if (rc) {
    attrs_free(r.v, r.n);
    r = (attrs_read){0};
  }
  *out = r.v;
  *n = r.n;
  return rc;
}

void engine_attrs_free(duro_attr *v, size_t n) { attrs_free(v, n); }

int engine_attrs_pass(duro_engine *e, int64_t rowid,
                      const duro_list_filter *f) {
  if (!f->n_where)
    return 1;
  duro_attr *v;
  size_t n;
  if (engine_attrs_read(e, rowid, &v, &n))
    return 0;
  int pass = 1;
  for (size_t k = 0; pass && k < f->n_where; k++) {
    int found = 0;
    for (size_t i = 0; !found && i < n; i++)
      found = duro_attr_passes(&f->where[k], &v[i]);
    pass = found;
  }
  attrs_free(v, n);
  return pass;
}

int duro_list_where_parse(duro_engine *e, const char *workflow,
                          const char *text, duro_attr_filter *out, char *err,
                          size_t errlen) {
  *out = (duro_attr_filter){0};
  const wf_reg *wf = engine_find_workflow(e, workflow);
  if (!wf)
    return DURO_E_WORKFLOW_NOT_FOUND;
  if (duro_attr_where_parse(text, wf->limits.index, wf->limits.n_index, out,
                            err, errlen) < 0)
    return DURO_E_INVALID_ARGUMENT;
  return 0;
}

/* On disk before it returns: the code after it may act on the value
 * being searchable.  A replayed run() writes it again, the same value
 * over itself; a dry run writes nothing. */
int step_set_attribute(duro_step *a, const char *name, const char *json) {
  const duro_attr_decl *d = engine_attr_decl(a->wf, name);
  if (!d) {
    log_at(DURO_LOG_WARN, &a->log,
           "duro_set_attribute: \"%s\" is not an attribute of the "
           "workflow's index",
           name ? name : "(null)");
    return DURO_E_ATTRIBUTE_UNKNOWN;
  }
  json_t *v = json ? json_loads(json, JSON_DECODE_ANY, NULL) : NULL;
  duro_attr attr = {.name = (char *)d->name};
  int bad = !v || duro_attr_from_json(v, d->type, &attr) < 0;
  json_decref(v);
  if (bad) {
    log_at(DURO_LOG_WARN, &a->log,
           "duro_set_attribute: \"%s\" takes a %s, not %.80s", d->name,
           d->type == DURO_ATTR_STRING ? "JSON string of at most 256 bytes"
                                       : "JSON number",
           json ? json : "(null)");
    return DURO_E_INVALID_ARGUMENT;
  }
  if (a->dry || a->suspended) {
    free(attr.str);
    return 0;
  }
  journal_op *op = journal_batch_add(&a->batch, JOP_ATTRIBUTE_SET);
  op->rowid = a->inst.rowid;
  op->attr = journal_batch_own(&a->batch, xmalloc(sizeof attr));
  *(duro_attr *)op->attr = attr;
  if (attr.str)
    journal_batch_own(&a->batch, attr.str);
  return step_flush(a) ? DURO_E_STORAGE : 0;
}
