/* step_dry.c — a dry run: an instance's journal replayed on another
 * build's run(), which writes nothing and runs no callback; it stops at
 * the first step call that would (dry_stop), diverges, or completes. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "step_internal.h"

/* The name and message of error JSON `text` ({"name","message"}, as
 * error_json writes it) into out. */
static void dry_run_error(const char *text, duro_dry_run_instance *out) {
  json_t *o = json_loads(text, 0, NULL);
  const char *name = json_string_value(json_object_get(o, "name"));
  const char *msg = json_string_value(json_object_get(o, "message"));
  out->error_name = name ? xstrdup(name) : NULL;
  out->error_message = msg ? xstrdup(msg) : NULL;
  json_decref(o);
}

void activation_dry_run(duro_engine *e, wf_reg *wf, int64_t rowid,
                        duro_run_fn run, duro_dry_run_instance *out) {
  *out = (duro_dry_run_instance){.rowid = rowid};
  duro_step *a = xcalloc(1, sizeof *a);
  a->e = e;
  a->wf = wf;
  a->dry = 1;
  a->replaying = 1;
  int rc = journal_instance_get_rowid(e->j, rowid, &a->inst);
  if (rc == 0)
    rc = activation_load_journal(a);
  if (rc) {
    out->outcome = DURO_DRY_RUN_UNREADABLE;
    out->error_message = xstrdup(journal_errmsg(e->j));
    a->wf = NULL;
    activation_free(a);
    return;
  }
  a->where = arena_printf(a, "%s/%s", a->inst.workflow, a->inst.id);
  duro_event ev = activation_event_of(a);
  duro_env env = {.engine = e};
  step_running_act = a;
  duro_rc r = run(a, &ev, &env);
  step_running_act = NULL;
  int diverged = a->suspended && a->reason == SUSPEND_DIVERGED;
  out->outcome = diverged ? DURO_DRY_RUN_DIVERGED
                 : a->suspended && a->reason == SUSPEND_DRY
                     ? DURO_DRY_RUN_REPLAYS
                 : r == DURO_OK ? DURO_DRY_RUN_COMPLETES
                                : DURO_DRY_RUN_REPLAYS;
  out->id = xstrdup(a->inst.id);
  out->journaled = a->n_steps;
  out->next = a->dry_next ? xstrdup(a->dry_next) : NULL;
  if (diverged && a->last_error)
    dry_run_error(a->last_error, out);
  if (diverged && a->dry_code_key)
    out->code_step = xstrdup(a->dry_code_key);
  if (diverged && a->dry_journal_key)
    out->journal_step = xstrdup(a->dry_journal_key);
  a->wf = NULL; /* no build was acquired */
  activation_free(a);
}
