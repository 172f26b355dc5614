/* view_bulk.c — bulk actions' jobs made JSON (view_bulk.h). */
#include "view_bulk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *duro_bulk_filter_json(const duro_list_filter *f) {
  json_t *o = json_object();
  if (f->status >= 0)
    json_object_set_new(o, "status", json_string(duro_status_name(f->status)));
  if (f->prefix && *f->prefix)
    json_object_set_new(o, "prefix", json_string(f->prefix));
  const struct {
    const char *name;
    int64_t ms;
  } times[] = {{"created_after", f->created_after},
               {"created_before", f->created_before},
               {"ended_after", f->ended_after},
               {"ended_before", f->ended_before}};
  for (size_t i = 0; i < sizeof times / sizeof *times; i++)
    if (times[i].ms)
      json_object_set_new(o, times[i].name, json_integer(times[i].ms));
  return o;
}

/* The job's search attribute terms, a line each, as filter.where. */
static void where_json(json_t *filter, const char *terms) {
  if (!terms || !*terms)
    return;
  json_t *a = json_array();
  for (const char *p = terms; *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    json_array_append_new(a, json_stringn(p, len));
    p += len + (nl != NULL);
  }
  json_object_set_new(filter, "where", a);
}

static json_t *job_json(const duro_bulk_job *j) {
  char id[24];
  snprintf(id, sizeof id, "%lld", (long long)j->id);
  json_t *errors = json_array();
  for (size_t i = 0; i < j->n_errors; i++)
    json_array_append_new(errors, json_pack("{s:s, s:s}", "instance",
                                            j->errors[i].instance, "error",
                                            j->errors[i].error));
  json_t *o = json_pack(
      "{s:s, s:s, s:s, s:o, s:s, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "id", id,
      "workflow", j->workflow, "action", j->action, "filter",
      duro_bulk_filter_json(&j->filter), "state", j->state, "matched",
      (json_int_t)j->matched, "done", (json_int_t)j->done, "failed",
      (json_int_t)j->failed, "skipped", (json_int_t)j->skipped, "created_ms",
      (json_int_t)j->created_ms, "ended_ms",
      j->ended_ms == DURO_NO_TIME ? json_null() : json_integer(j->ended_ms),
      "errors", errors);
  where_json(json_object_get(o, "filter"), j->where_terms);
  if (j->ids) /* its chosen instances, the array it was given */
    json_object_set_new(json_object_get(o, "filter"), "ids",
                        json_loads(j->ids, 0, NULL));
  if (!strcmp(j->action, "delete"))
    json_object_set_new(o, "terminate", json_boolean(j->terminate));
  return o;
}

int duro_bulk_job_json(duro_engine *e, int64_t id, json_t **out) {
  *out = NULL;
  duro_bulk_job j;
  int rc = duro_bulk_get(e, id, &j);
  if (rc)
    return rc;
  *out = job_json(&j);
  duro_bulk_job_free(&j);
  return 0;
}

int duro_bulk_list_json(duro_engine *e, const char *workflow, size_t limit,
                        json_t **out) {
  *out = NULL;
  duro_bulk_job *v;
  size_t n;
  int rc = duro_bulk_list(e, workflow, limit, &v, &n);
  if (rc)
    return rc;
  json_t *jobs = json_array();
  for (size_t i = 0; i < n; i++) {
    json_array_append_new(jobs, job_json(&v[i]));
    duro_bulk_job_free(&v[i]);
  }
  free(v);
  *out = json_pack("{s:o}", "jobs", jobs);
  return 0;
}
