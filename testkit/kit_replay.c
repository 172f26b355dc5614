/* kit_replay.c — replays of real journals (duro-test.h): an instance
 * exported from a host ("duro-journal-1", views/view_journal.h) written
 * into the test's journal, and its journal replayed on the code the test
 * loaded (the engine's dry run, as `duro check --replay` does), or run on
 * it for real.
 *
 * An import writes the rows with the engine closed, through a journal of
 * its own on the test's file, and opens the engine again: the instance is
 * then recovered as a restarted host recovers its instances, with nothing
 * of the engine's memory to keep in step. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "journal.h"
#include "kit_internal.h"
#include "util.h"
#include "view_journal.h"

const char *duro_test_export(duro_test *t, const char *workflow,
                             const char *id) {
  json_t *doc = NULL;
  int rc = duro_instance_export(t->e, workflow, id, &doc);
  if (rc != 0) {
    kit_fail(t, rc, "export of %s/%s: %s", workflow, id, duro_err_name(rc));
    return kit_keep(t, KIT_KEEP_EXPORT, NULL);
  }
  char *text = json_dumps(doc, JSON_INDENT(2));
  json_decref(doc);
  return kit_keep(t, KIT_KEEP_EXPORT, text);
}

static const kit_workflow *registered(const duro_test *t, const char *name) {
  for (size_t i = 0; i < t->n_wfs; i++)
    if (!strcmp(t->wfs[i].name, name))
      return &t->wfs[i];
  return NULL;
}

/* The document parsed into rows; `src` names it in errors (the path, or
 * "the document" for text). */
static int read_document(duro_test *t, const char *path_or_json,
                         const char *src, journal_rows *rows,
                         int64_t *exported_ms) {
  json_error_t je;
  json_t *doc;
  if (path_or_json[strspn(path_or_json, " \t\r\n")] == '{') {
    doc = json_loads(path_or_json, 0, &je);
  } else {
    FILE *f = fopen(path_or_json, "r");
    if (!f)
      return kit_fail(t, DURO_E_IO, "%s: %s", src, strerror(errno));
    doc = json_loadf(f, 0, &je);
    fclose(f);
  }
  if (!doc)
    return kit_fail(t, DURO_E_INVALID_ARGUMENT,
                    "%s: not a JSON document (line %d, column %d: %s)", src,
                    je.line, je.column, je.text);
  char err[512];
  int rc = view_journal_parse(doc, rows, exported_ms, err, sizeof err);
  json_decref(doc);
  if (rc != 0)
    return kit_fail(t, rc, "%s: %s", src, err);
  return 0;
}

/* Imports the document; its workflow into *wf_out (the test's
 * registration's name, borrowed). */
static int import(duro_test *t, const char *path_or_json, const char **wf_out) {
  if (!path_or_json)
    return kit_fail(t, DURO_E_INVALID_ARGUMENT,
                    "no document: a path or the JSON text of an export");
  const char *src = path_or_json[strspn(path_or_json, " \t\r\n")] == '{'
                        ? "the document"
                        : path_or_json;
  journal_rows rows;
  int64_t exported_ms = 0;
  int rc = read_document(t, path_or_json, src, &rows, &exported_ms);
  if (rc != 0)
    return rc;
  const kit_workflow *w = registered(t, rows.inst.workflow);
  if (!w) {
    rc = kit_fail(t, DURO_E_WORKFLOW_NOT_FOUND,
                  "%s: workflow \"%s\" is not registered in this test: "
                  "duro_test_load its plugin under that name first",
                  src, rows.inst.workflow);
    journal_rows_free(&rows);
    return rc;
  }
  /* The point is the test's code: the instance runs on the build the
   * test loaded, not on the one it was pinned to where it came from. */
  free(rows.inst.build);
  rows.inst.build = xstrdup(w->build);
  kit_engine_close(t);
  journal *j = NULL;
  char err[512];
  rc = journal_open(t->db, 1, &j, err, sizeof err);
  if (rc != 0)
    kit_fail(t, rc, "the test's journal did not open: %s", err);
  else if ((rc = journal_rows_write(j, &rows, NULL)) != 0)
    kit_fail(t, rc, "%s: %s/%s: %s%s%s", src, rows.inst.workflow, rows.inst.id,
             rc == DURO_E_ALREADY_EXISTS ? "this test has that instance already"
                                         : duro_err_name(rc),
             rc == DURO_E_STORAGE ? ": " : "",
             rc == DURO_E_STORAGE ? journal_errmsg(j) : "");
  if (j)
    journal_close(j);
  int reopened = kit_engine_open(t);
  if (rc == 0 && reopened != 0)
    rc = reopened; /* t->err says why */
  if (rc == 0) {
    int64_t now = duro_clock_now(&t->clock);
    if (exported_ms > now)
      duro_clock_advance(&t->clock, exported_ms - now);
    *wf_out = w->name;
    kit_keep(t, KIT_KEEP_IMPORTED, xstrdup(rows.inst.id));
  }
  journal_rows_free(&rows);
  return rc;
}

int duro_test_import(duro_test *t, const char *path_or_json,
                     const char **id_out) {
  const char *wf;
  int rc = import(t, path_or_json, &wf);
  if (id_out)
    *id_out = rc == 0 ? t->strings[KIT_KEEP_IMPORTED] : NULL;
  return rc;
}

static void copy(char *dst, size_t len, const char *src) {
  snprintf(dst, len, "%s", src ? src : "");
}

int duro_test_replay(duro_test *t, const char *path_or_json,
                     duro_test_replay_report *r) {
  duro_test_replay_report none;
  r = r ? r : &none;
  memset(r, 0, sizeof *r);
  const char *wf;
  int rc = import(t, path_or_json, &wf);
  if (rc != 0)
    return rc;
  const char *id = t->strings[KIT_KEEP_IMPORTED];
  copy(r->workflow, sizeof r->workflow, wf);
  copy(r->id, sizeof r->id, id);
  /* The dry run replays every instance of the workflow in flight; this
   * one is among them unless it has ended. */
  duro_dry_run_report rep;
  rc = duro_engine_dry_run_report(t->e, wf, kit_run, &rep);
  if (rc != 0)
    return kit_fail(t, rc, "replay of %s/%s: %s", wf, id, duro_err_name(rc));
  const duro_dry_run_instance *one = NULL;
  for (size_t i = 0; i < rep.n && !one; i++)
    if (rep.v[i].id && !strcmp(rep.v[i].id, id))
      one = &rep.v[i];
  if (!one) {
    const char *st = duro_test_status(t, wf, id);
    rc = kit_fail(t, DURO_E_INVALID_ARGUMENT,
                  "replay of %s/%s: it is %s: an instance that has ended runs "
                  "no more code, so there is nothing to replay",
                  wf, id, st ? st : "gone");
  } else if (one->outcome == DURO_DRY_RUN_UNREADABLE) {
    rc = kit_fail(t, DURO_E_STORAGE, "replay of %s/%s: its journal: %s", wf, id,
                  one->error_message ? one->error_message : "unreadable");
  } else {
    copy(r->outcome, sizeof r->outcome,
         duro_dry_run_outcome_name(one->outcome));
    r->journaled = one->journaled;
    copy(r->next, sizeof r->next, one->next);
    if (one->outcome == DURO_DRY_RUN_DIVERGED) {
      copy(r->step, sizeof r->step, one->code_step);
      copy(r->journal_step, sizeof r->journal_step, one->journal_step);
      copy(r->message, sizeof r->message, one->error_message);
      rc = kit_fail(t, DURO_ERROR, "%s/%s diverged: %s", wf, id, r->message);
    }
  }
  duro_dry_run_report_clear(&rep);
  return rc;
}
