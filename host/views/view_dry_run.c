/* view_dry_run.c — a dry run of another build as JSON (view_dry_run.h),
 * keys in the order they always came. */
#include "view_dry_run.h"

static json_t *instance_json(const duro_dry_run_instance *in) {
  const char *status = duro_dry_run_outcome_name(in->outcome);
  if (in->outcome == DURO_DRY_RUN_UNREADABLE)
    return json_pack("{s:I,s:s,s:s}", "rowid", (json_int_t)in->rowid, "status",
                     status, "error",
                     in->error_message ? in->error_message : "");
  json_t *o =
      json_pack("{s:s,s:s,s:I,s:s?}", "id", in->id, "status", status,
                "journaled", (json_int_t)in->journaled, "next", in->next);
  if (in->outcome == DURO_DRY_RUN_DIVERGED && in->error_name &&
      in->error_message)
    json_object_set_new(o, "error",
                        json_pack("{s:s,s:s}", "name", in->error_name,
                                  "message", in->error_message));
  return o;
}

json_t *view_dry_run(const duro_dry_run_report *r) {
  json_t *list = json_array();
  for (size_t i = 0; i < r->n; i++)
    json_array_append_new(list, instance_json(&r->v[i]));
  return json_pack("{s:s,s:o,s:I}", "workflow", r->workflow, "instances", list,
                   "diverged", (json_int_t)r->diverged);
}

int duro_engine_dry_run(duro_engine *e, const char *workflow, duro_run_fn run,
                        json_t **report) {
  duro_dry_run_report r;
  int rc = duro_engine_dry_run_report(e, workflow, run, &r);
  *report = rc ? NULL : view_dry_run(&r);
  duro_dry_run_report_clear(&r);
  return rc;
}
