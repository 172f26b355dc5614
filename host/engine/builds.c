/* builds.c — the builds of each workflow, for hot reload.
 *
 * A workflow may have several builds loaded at once: the newest, which new
 * instances start on (and every activation runs under versioning:
 * latest), and older ones that instances pinned to them still need
 * (versioning: pinned, the default).  A build is identified by the content
 * hash of its .so; the host loads and unloads the code, the engine only
 * keeps run() pointers and counts who uses them, so the host never
 * unloads code an activation is running or an instance will need.
 *
 * The array only grows at the end (a newer build) and loses members on
 * retirement; wf_build structs are freed only when retired, after their
 * count of running activations reached zero under builds_mu. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "error.h"
#include "log.h"
#include "util.h"

static int same_hash(const char *a, const char *b) {
  return a == b || (a && b && !strcmp(a, b));
}

static wf_build *find_locked(wf_reg *wf, const char *hash) {
  for (size_t i = 0; i < wf->n_builds; i++)
    if (same_hash(wf->builds[i]->hash, hash))
      return wf->builds[i];
  return NULL;
}

int duro_engine_add_build(duro_engine *e, const char *workflow,
                          const char *hash, duro_run_fn run, int newest) {
  wf_reg *wf = engine_find_workflow(e, workflow);
  if (!wf || !run)
    return wf ? DURO_E_INVALID_ARGUMENT : DURO_E_WORKFLOW_NOT_FOUND;
  pthread_mutex_lock(&wf->builds_mu);
  wf_build *b = find_locked(wf, hash);
  if (b) {
    /* Known: it only moves to the newest place (a rollback). */
    size_t i = 0;
    while (wf->builds[i] != b)
      i++;
    if (newest) {
      memmove(&wf->builds[i], &wf->builds[i + 1],
              (wf->n_builds - i - 1) * sizeof *wf->builds);
      wf->builds[wf->n_builds - 1] = b;
    }
  } else {
    b = xcalloc(1, sizeof *b);
    b->hash = hash ? xstrdup(hash) : NULL;
    b->run = run;
    wf->builds = xrealloc(wf->builds, (wf->n_builds + 1) * sizeof *wf->builds);
    if (newest || wf->n_builds == 0) {
      wf->builds[wf->n_builds] = b;
    } else {
      /* An older build goes before the newest. */
      wf->builds[wf->n_builds] = wf->builds[wf->n_builds - 1];
      wf->builds[wf->n_builds - 1] = b;
    }
    wf->n_builds++;
  }
  pthread_mutex_unlock(&wf->builds_mu);
  return 0;
}

int duro_engine_build_set_step_config_size(duro_engine *e, const char *workflow,
                                           const char *hash, uint16_t size) {
  wf_reg *wf = engine_find_workflow(e, workflow);
  if (!wf)
    return DURO_E_WORKFLOW_NOT_FOUND;
  pthread_mutex_lock(&wf->builds_mu);
  wf_build *b = find_locked(wf, hash);
  if (b)
    b->step_config_size = size;
  pthread_mutex_unlock(&wf->builds_mu);
  return b ? 0 : DURO_E_NOT_FOUND;
}

int duro_engine_build_set_ctx(duro_engine *e, const char *workflow,
                              const char *hash, void *ctx) {
  wf_reg *wf = engine_find_workflow(e, workflow);
  if (!wf)
    return DURO_E_WORKFLOW_NOT_FOUND;
  pthread_mutex_lock(&wf->builds_mu);
  wf_build *b = find_locked(wf, hash);
  if (b)
    b->ctx = ctx;
  pthread_mutex_unlock(&wf->builds_mu);
  return b ? 0 : DURO_E_NOT_FOUND;
}

int duro_engine_build_attempts(duro_engine *e, const char *workflow,
                               const char *hash, uint64_t *n) {
  *n = 0;
  wf_reg *wf = engine_find_workflow(e, workflow);
  if (!wf)
    return DURO_E_WORKFLOW_NOT_FOUND;
  pthread_mutex_lock(&wf->builds_mu);
  wf_build *b = find_locked(wf, hash);
  if (b)
    *n = __atomic_load_n(&b->attempts, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&wf->builds_mu);
  return b ? 0 : DURO_E_NOT_FOUND;
}

wf_build *build_acquire(wf_reg *wf, const char *pinned) {
  pthread_mutex_lock(&wf->builds_mu);
  wf_build *b = NULL;
  if (!wf->limits.versioning_latest && pinned)
    b = find_locked(wf, pinned);
  else if (wf->n_builds)
    b = wf->builds[wf->n_builds - 1];
  if (b) {
    b->running++;
    b->acquired++;
  }
  pthread_mutex_unlock(&wf->builds_mu);
  return b;
}

void build_release(wf_reg *wf, wf_build *b) {
  if (!b)
    return;
  pthread_mutex_lock(&wf->builds_mu);
  b->running--;
  pthread_mutex_unlock(&wf->builds_mu);
}

const char *build_newest_hash(wf_reg *wf) {
  pthread_mutex_lock(&wf->builds_mu);
  const char *h = wf->n_builds ? wf->builds[wf->n_builds - 1]->hash : NULL;
  pthread_mutex_unlock(&wf->builds_mu);
  return h;
}

int duro_engine_retire_build(duro_engine *e, const char *workflow,
                             const char *hash) {
  return duro_engine_retire_build_all(e, &workflow, 1, hash);
}

/* Step 1 of a retirement: whether build `hash` of each workflow that has
 * it is idle (not the newest, no activation on it), noting in seen[i]
 * how often it was acquired (UINT64_MAX: the workflow lacks it).  Returns
 * 0, DURO_E_BUSY, or DURO_E_NOT_FOUND when no workflow has it. */
static int retire_idle(wf_reg *const *wfs, size_t n, const char *hash,
                       uint64_t *seen) {
  size_t found = 0;
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    pthread_mutex_lock(&wfs[i]->builds_mu);
    wf_build *b = find_locked(wfs[i], hash);
    seen[i] = b ? b->acquired : UINT64_MAX;
    if (b && (b == wfs[i]->builds[wfs[i]->n_builds - 1] || b->running))
      rc = DURO_E_BUSY;
    found += b != NULL;
    pthread_mutex_unlock(&wfs[i]->builds_mu);
  }
  return rc ? rc : found ? 0 : DURO_E_NOT_FOUND;
}

/* Step 3, under every workflow's lock at once: the build is dropped from
 * all of them if none acquired or added it since step 1. */
static int retire_drop(wf_reg *const *wfs, size_t n, const char *hash,
                       const uint64_t *seen) {
  int rc = 0;
  for (size_t i = 0; i < n; i++)
    pthread_mutex_lock(&wfs[i]->builds_mu);
  for (size_t i = 0; i < n && rc == 0; i++) {
    wf_build *b = find_locked(wfs[i], hash);
    if (b ? b->acquired != seen[i] || b->running ||
                b == wfs[i]->builds[wfs[i]->n_builds - 1]
          : seen[i] != UINT64_MAX)
      rc = DURO_E_BUSY;
  }
  for (size_t i = 0; i < n && rc == 0; i++) {
    wf_build *b = find_locked(wfs[i], hash);
    if (!b)
      continue;
    size_t at = 0;
    while (wfs[i]->builds[at] != b)
      at++;
    memmove(&wfs[i]->builds[at], &wfs[i]->builds[at + 1],
            (wfs[i]->n_builds - at - 1) * sizeof *wfs[i]->builds);
    wfs[i]->n_builds--;
    free(b->hash);
    free(b);
  }
  for (size_t i = n; i-- > 0;)
    pthread_mutex_unlock(&wfs[i]->builds_mu);
  return rc;
}

int duro_engine_retire_build_all(duro_engine *e, const char *const *workflows,
                                 size_t n, const char *hash) {
  wf_reg **wfs = xcalloc(n ? n : 1, sizeof *wfs);
  uint64_t *seen = xcalloc(n ? n : 1, sizeof *seen);
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++)
    if (!(wfs[i] = engine_find_workflow(e, workflows[i])))
      rc = DURO_E_WORKFLOW_NOT_FOUND;
  if (rc == 0)
    rc = retire_idle(wfs, n, hash, seen);
  /* Pinned by an instance that has not ended: it will run again on it.
   * A pin that appears meanwhile (a restart from a step, which holds the
   * build while it writes the pin) is an acquisition step 3 sees.  A
   * workflow that lacks the build counts too: its pinned instances need
   * the code kept loaded, to be given it again. */
  for (size_t i = 0; i < n && rc == 0; i++) {
    int pinned = 0;
    rc = journal_build_pinned(e->j, workflows[i], hash, &pinned);
    if (rc == 0 && pinned)
      rc = DURO_E_BUSY;
  }
  if (rc == 0)
    rc = retire_drop(wfs, n, hash, seen);
  free(seen);
  free(wfs);
  return rc;
}

int duro_engine_build_share(duro_engine *e, const char *hash,
                            const char *plugin, const char *path) {
  return journal_build_put(e->j, hash, plugin, path, duro_clock_now(e->clock));
}

int duro_engine_build_fetch(duro_engine *e, const char *hash,
                            const char *path) {
  return journal_build_get(e->j, hash, path);
}

int duro_engine_builds_prune(duro_engine *e, int64_t unseen_ms, size_t *n) {
  return journal_builds_prune(e->j, duro_clock_now(e->clock) - unseen_ms, n);
}

int duro_engine_pinned_builds(duro_engine *e,
                              void (*fn)(void *ctx, const char *workflow,
                                         const char *build, int64_t n),
                              void *ctx) {
  return journal_pinned_builds(e->j, fn, ctx);
}

void builds_free(wf_reg *wf) {
  for (size_t i = 0; i < wf->n_builds; i++) {
    free(wf->builds[i]->hash);
    free(wf->builds[i]);
  }
  free(wf->builds);
  wf->builds = NULL;
  wf->n_builds = 0;
  holds_free(wf);
  pthread_mutex_destroy(&wf->builds_mu);
}

/* ---- a dry run of another build ------------------------------------------ */

typedef struct rowids {
  int64_t *v;
  size_t n;
  int64_t last;
} rowids;

static void collect_rowid(void *ctx, const journal_list_row *row) {
  rowids *r = ctx;
  r->v = xrealloc(r->v, (r->n + 1) * sizeof *r->v);
  r->v[r->n++] = row->rowid;
  r->last = row->rowid;
}

const char *duro_dry_run_outcome_name(duro_dry_run_outcome o) {
  static const char *const name[] = {
      [DURO_DRY_RUN_REPLAYS] = "replays",
      [DURO_DRY_RUN_COMPLETES] = "completes",
      [DURO_DRY_RUN_DIVERGED] = "diverged",
      [DURO_DRY_RUN_UNREADABLE] = "unreadable",
  };
  return (size_t)o < sizeof name / sizeof *name ? name[o] : "unreadable";
}

int duro_engine_dry_run_report(duro_engine *e, const char *workflow,
                               duro_run_fn run, duro_dry_run_report *out) {
  *out = (duro_dry_run_report){0};
  wf_reg *wf = engine_find_workflow(e, workflow);
  if (!wf)
    return DURO_E_WORKFLOW_NOT_FOUND;
  /* In flight: every stored status that has not ended (a running instance
   * is stored queued or waiting). */
  static const duro_status live[] = {DURO_STATUS_QUEUED, DURO_STATUS_WAITING,
                                     DURO_STATUS_PAUSED};
  rowids ids = {0};
  int rc = 0;
  for (size_t s = 0; s < 3 && rc == 0; s++) {
    ids.last = 0;
    for (;;) {
      size_t before = ids.n;
      journal_list_filter f = {.status = (int)live[s]};
      rc =
          journal_list(e->j, workflow, &f, ids.last, 1000, collect_rowid, &ids);
      if (rc || ids.n - before < 1000)
        break;
    }
  }
  if (rc == 0) {
    out->workflow = xstrdup(workflow);
    out->v = xcalloc(ids.n ? ids.n : 1, sizeof *out->v);
  }
  for (size_t i = 0; i < ids.n && rc == 0; i++) {
    activation_dry_run(e, wf, ids.v[i], run, &out->v[out->n]);
    out->diverged += out->v[out->n++].outcome == DURO_DRY_RUN_DIVERGED;
  }
  free(ids.v);
  return rc;
}

void duro_dry_run_report_clear(duro_dry_run_report *r) {
  for (size_t i = 0; i < r->n; i++) {
    free(r->v[i].id);
    free(r->v[i].next);
    free(r->v[i].error_name);
    free(r->v[i].error_message);
    free(r->v[i].code_step);
    free(r->v[i].journal_step);
  }
  free(r->v);
  free(r->workflow);
  *r = (duro_dry_run_report){0};
}
