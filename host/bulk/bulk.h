/* bulk.h — bulk actions (a driver, engine/driver.h): one action
 * (terminate, restart, resume, pause, delete) on every instance of a
 * workflow that passes a filter, as the list of its instances filters
 * them, carried out in the background in bounded batches.
 *
 * A job is a row of the journal (journal_bulk): its filter and action,
 * the walk's bound (the workflow's newest rowid when the job was made:
 * the job sees only the instances that existed then) and cursor, its
 * counts and its state, written with each batch, so a job goes on where
 * it stood after a restart of the host, or on another host of a shared
 * store once the one that ran it died.  Old ended jobs go with the
 * retention sweep. */
#ifndef DURO_BULK_H
#define DURO_BULK_H

#include <stddef.h>
#include <stdint.h>

#include "driver.h"
#include "engine.h"

extern const duro_driver bulk_driver;

typedef enum duro_bulk_action {
  DURO_BULK_TERMINATE,
  DURO_BULK_RESTART,
  DURO_BULK_RESUME,
  DURO_BULK_PAUSE,
  DURO_BULK_DELETE,
} duro_bulk_action;

/* The action's name, and the action of a name (-1: none). */
const char *duro_bulk_action_name(duro_bulk_action a);
int duro_bulk_action_parse(const char *name);

/* Instances a job acts on at most per batch. */
#define DURO_BULK_BATCH 100
/* Threads a batch's instances are acted on with at once (besides the
 * driver's own): their commits share fsyncs. */
#define DURO_BULK_HELPERS 7
/* How many failures a job keeps (errors), the first ones. */
#define DURO_BULK_ERRORS 10
/* How long an ended job is kept before the retention sweep takes it. */
#define DURO_BULK_RETENTION_MS (7LL * 24 * 3600 * 1000)

/* Instances a job may name (duro_bulk_spec's ids) at most. */
#define DURO_BULK_IDS 1000

/* What to make: filter as the list takes it (its status a stored one:
 * not running nor waitingForPause, which only an activation holds), and
 * for delete whether live instances are terminated first.  With ids (1
 * to DURO_BULK_IDS valid instance ids) only those of them that pass the
 * filter: the instances a person chose on a page. */
typedef struct duro_bulk_spec {
  const char *workflow;
  duro_bulk_action action;
  duro_list_filter filter;
  int terminate;
  const char *const *ids;
  size_t n_ids;
} duro_bulk_spec;

/* Counts the instances spec's filter passes now; with dry_run that is
 * all, else a job is made (its id into *id) that acts on them.
 * DURO_E_WORKFLOW_NOT_FOUND, DURO_E_INVALID_ARGUMENT (a status never
 * stored), DURO_E_STORAGE. */
int duro_bulk_create(duro_engine *e, const duro_bulk_spec *spec, int dry_run,
                     int64_t *id, int64_t *matched);

/* A job as the routes show it. */
typedef struct duro_bulk_error {
  char *instance, *error;
} duro_bulk_error;

typedef struct duro_bulk_job {
  int64_t id;
  char *workflow;
  char *action;
  int terminate;
  duro_list_filter filter; /* its prefix owned; no `where`: */
  char *where_terms;       /* its search attribute terms, a line each */
  char *ids;               /* its chosen instances, a JSON array; NULL: any */
  char *state;             /* running, done, cancelled */
  int64_t matched, done, failed, skipped;
  int64_t created_ms, ended_ms; /* ended_ms DURO_NO_TIME while running */
  duro_bulk_error *errors;
  size_t n_errors;
} duro_bulk_job;

void duro_bulk_job_free(duro_bulk_job *j);
/* Job `id` into *out: 0, DURO_E_NOT_FOUND, DURO_E_STORAGE. */
int duro_bulk_get(duro_engine *e, int64_t id, duro_bulk_job *out);
/* A workflow's newest `limit` jobs into *out, *n of them (caller frees
 * each and the array). */
int duro_bulk_list(duro_engine *e, const char *workflow, size_t limit,
                   duro_bulk_job **out, size_t *n);
/* Cancels a running job: it stops after the batch under way.  0,
 * DURO_E_NOT_FOUND, DURO_E_INVALID_ARGUMENT when it has ended (done or
 * cancelled already), DURO_E_STORAGE. */
int duro_bulk_cancel(duro_engine *e, int64_t id);

/* One pass: a batch of every running job this host runs (or takes over).
 * How many instances it acted on or looked at: the driver's thread runs
 * it, and a test on a virtual clock. */
size_t duro_bulk_pass(duro_engine *e);
/* Deletes up to `limit` jobs that ended more than DURO_BULK_RETENTION_MS
 * ago: how many (the retention sweep's part, and a test's). */
size_t duro_bulk_sweep(duro_engine *e, size_t limit);

#endif
