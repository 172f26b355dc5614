/* inspect.c — reading instances: the status, an instance with its steps,
 * attempts and events (duro_instance_info), a page of a list and a
 * workflow's counts, as engine.h's structs (their JSON is views/), and
 * the Prometheus metrics (to which each driver adds its series).
 *
 * Reads go to the journal (each thread has its own reader connection) and
 * never block activations.  What only memory knows is laid over the
 * stored rows: an instance an activation is running shows "running" (or
 * "waitingForPause", or "terminated" once a terminate is pending). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "error.h"
#include "util.h"

/* ---- inspection
 * -------------------------------------------------------------- */

duro_status engine_live_status(duro_engine *e, int64_t rowid,
                               duro_status stored) {
  duro_status s = stored;
  pthread_mutex_lock(&e->mu);
  entry *ent = idmap_get(&e->entries, rowid);
  if (ent && ent->state == ENTRY_ACTIVE &&
      __atomic_load_n(&ent->admitted, __ATOMIC_ACQUIRE)) {
    /* a terminate with rollbacks runs them first: running until then */
    if (__atomic_load_n(&ent->terminate_req, __ATOMIC_ACQUIRE) &&
        !__atomic_load_n(&ent->rollback_req, __ATOMIC_ACQUIRE))
      s = DURO_STATUS_TERMINATED;
    else if (__atomic_load_n(&ent->pause_req, __ATOMIC_ACQUIRE))
      s = DURO_STATUS_WAITING_FOR_PAUSE;
    else
      s = DURO_STATUS_RUNNING;
  }
  pthread_mutex_unlock(&e->mu);
  return s;
}

int duro_instance_status(duro_engine *e, const char *workflow, const char *id,
                         duro_status *out) {
  if (!engine_find_workflow(e, workflow))
    return DURO_E_WORKFLOW_NOT_FOUND;
  journal_instance in = {0};
  int rc = journal_instance_get(e->j, workflow, id, &in);
  if (rc == 0)
    *out = engine_live_status(e, in.rowid, in.status);
  journal_instance_clear(&in);
  return rc;
}

_Static_assert(DURO_NO_TIME == JOURNAL_NONE,
               "the journal's times are handed on as they are");

/* Takes a string the journal's row owns (the row no longer frees it). */
static char *take(char **s) {
  char *v = *s;
  *s = NULL;
  return v;
}

/* The row's fields as a reader sees them, taken from *in. */
static void info_from_row(duro_engine *e, journal_instance *in,
                          duro_instance_info *out) {
  out->id = take(&in->id);
  out->workflow = take(&in->workflow);
  out->status = engine_live_status(e, in->rowid, in->status);
  out->params = take(&in->params);
  out->output = take(&in->output);
  out->error = take(&in->error);
  out->created_ms = in->created_ms;
  out->started_ms = in->started_ms;
  out->ended_ms = in->ended_ms;
  out->wake_ms = in->wake_ms;
  out->deadline_ms = in->deadline_ms > 0 ? in->deadline_ms : DURO_NO_TIME;
}

/* The failed attempts, as the journal orders them (by key, then
 * number): a run of one key each, found by its key in `first`. */
typedef struct attempt_rows {
  char **keys;
  duro_attempt_info *v;
  size_t n, cap;
  strmap first; /* key -> 1 + the index its run begins at */
} attempt_rows;

static void attempt_row(void *ctx, const char *key, uint32_t number,
                        int64_t started_ms, int64_t ended_ms, const char *error,
                        const char *build) {
  attempt_rows *r = ctx;
  if (r->n == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 16;
    r->keys = xrealloc(r->keys, r->cap * sizeof *r->keys);
    r->v = xrealloc(r->v, r->cap * sizeof *r->v);
  }
  r->keys[r->n] = xstrdup(key);
  r->v[r->n++] = (duro_attempt_info){.number = number,
                                     .outcome = duro_attempt_outcome_of(error),
                                     .started_ms = started_ms,
                                     .ended_ms = ended_ms,
                                     .error = error ? xstrdup(error) : NULL,
                                     .build = build ? xstrdup(build) : NULL};
}

static void attempt_rows_index(attempt_rows *r) {
  for (size_t i = 0; i < r->n; i++)
    if (i == 0 || strcmp(r->keys[i], r->keys[i - 1]))
      strmap_put(&r->first, r->keys[i], (void *)(uintptr_t)(i + 1));
}

static void attempt_rows_free(attempt_rows *r) {
  strmap_free(&r->first);
  for (size_t i = 0; i < r->n; i++) {
    free(r->keys[i]);
    free(r->v[i].error);
    free(r->v[i].build);
  }
  free(r->keys);
  free(r->v);
}

/* A step's attempts: the failed ones have rows of their own (moved out of
 * `rows`); the one that succeeded is kept in the step row (journal.h) and
 * rejoins them here. */
static void step_attempts(attempt_rows *rows, const journal_step *s,
                          duro_step_info *out) {
  size_t first = (size_t)(uintptr_t)strmap_get(&rows->first, s->key), n = 0;
  if (first--)
    while (first + n < rows->n && !strcmp(rows->keys[first + n], s->key))
      n++;
  int have_last = n && rows->v[first + n - 1].number == s->attempts;
  /* a rollback is attempted as a do step is */
  size_t succeeded =
      (s->type == DURO_STEP_DO || s->type == DURO_STEP_ROLLBACK) &&
      s->status == DURO_STEP_COMPLETE && !have_last;
  out->n_attempts = n + succeeded;
  out->attempts =
      xcalloc(out->n_attempts ? out->n_attempts : 1, sizeof *out->attempts);
  for (size_t i = 0; i < n; i++) {
    out->attempts[i] = rows->v[first + i];
    rows->v[first + i] = (duro_attempt_info){0};
  }
  if (succeeded)
    out->attempts[n] =
        (duro_attempt_info){.number = s->attempts,
                            .outcome = DURO_ATTEMPT_SUCCEEDED,
                            .started_ms = s->attempt_started_ms,
                            .ended_ms = s->ended_ms,
                            .build = s->build ? xstrdup(s->build) : NULL};
}

static void step_from_row(journal_step *s, attempt_rows *rows,
                          duro_step_info *out) {
  step_attempts(rows, s, out);
  out->key = take(&s->key);
  out->name = take(&s->name);
  out->count = s->count;
  out->kind = s->type;
  out->status = s->status;
  out->result = take(&s->result);
  out->error = take(&s->error);
  out->started_ms = s->started_ms;
  out->ended_ms = s->ended_ms;
  out->wake_ms = s->wake_ms;
}

/* Adds the build of each of the step's attempts to the instance's list
 * (once each). */
static void note_builds(duro_instance_info *in, const duro_step_info *s) {
  for (size_t i = 0; i < s->n_attempts; i++) {
    const char *h = s->attempts[i].build;
    int seen = !h;
    for (size_t k = 0; k < in->n_builds && !seen; k++)
      seen = !strcmp(h, in->builds[k]);
    if (!seen) {
      in->builds =
          xrealloc(in->builds, (in->n_builds + 1) * sizeof *in->builds);
      in->builds[in->n_builds++] = xstrdup(h);
    }
  }
}

/* The events the instance received, in arrival order, each with the key
 * of the step that consumed it (NULL: pending, no step took it yet). */
static int read_events(duro_engine *e, int64_t rowid, duro_instance_info *out) {
  journal_event *ev = NULL;
  size_t n = 0;
  if (journal_events_all(e->j, rowid, &ev, &n) != 0)
    return DURO_E_STORAGE;
  out->events = xcalloc(n ? n : 1, sizeof *out->events);
  for (size_t i = 0; i < n; i++)
    out->events[i] = (duro_event_info){.type = take(&ev[i].type),
                                       .payload = take(&ev[i].payload),
                                       .sent_ms = ev[i].ts_ms,
                                       .consumed_by = take(&ev[i].consumed_by)};
  out->n_events = n;
  journal_events_free(ev, n);
  return 0;
}

/* The steps, their attempts and the builds they ran on. */
static int read_steps(duro_engine *e, int64_t rowid, duro_instance_info *out) {
  journal_step *steps = NULL;
  size_t n = 0;
  attempt_rows rows = {0};
  int rc = journal_steps_load(e->j, rowid, &steps, &n);
  if (rc == 0)
    rc = journal_attempts_each(e->j, rowid, attempt_row, &rows);
  if (rc == 0) {
    attempt_rows_index(&rows);
    out->steps = xcalloc(n ? n : 1, sizeof *out->steps);
    for (size_t i = 0; i < n; i++) {
      step_from_row(&steps[i], &rows, &out->steps[i]);
      note_builds(out, &out->steps[i]);
    }
    out->n_steps = n;
  }
  attempt_rows_free(&rows);
  journal_steps_free(steps, n);
  return rc;
}

static void add_child(void *ctx, int64_t rowid, const char *workflow,
                      const char *id, duro_status status) {
  duro_instance_info *out = ctx;
  (void)rowid;
  out->children =
      xrealloc(out->children, (out->n_children + 1) * sizeof *out->children);
  out->children[out->n_children++] = (duro_instance_ref){
      .workflow = xstrdup(workflow), .id = xstrdup(id), .status = status};
}

/* Its parent (by the row's link) and its children. */
static int read_family(duro_engine *e, const journal_instance *in,
                       duro_instance_info *out) {
  if (in->parent > 0) {
    journal_instance p = {0};
    if (journal_instance_get_rowid(e->j, in->parent, &p) == 0) {
      out->parent_workflow = take(&p.workflow);
      out->parent_id = take(&p.id);
    }
    journal_instance_clear(&p);
  }
  return journal_children_each(e->j, in->rowid, add_child, out);
}

int duro_instance_read(duro_engine *e, const char *workflow, const char *id,
                       duro_instance_info *out) {
  *out = (duro_instance_info){0};
  journal_instance in = {0};
  int rc = engine_instance_get(e, workflow, id, &in);
  if (rc == 0)
    rc = read_steps(e, in.rowid, out);
  if (rc == 0)
    rc = read_events(e, in.rowid, out);
  if (rc == 0) {
    info_from_row(e, &in, out);
    out->build = take(&in.build);
    out->restarts = in.restarts;
    rc = read_family(e, &in, out);
    if (rc == 0)
      rc = engine_attrs_read(e, in.rowid, &out->attrs, &out->n_attrs);
    /* Only a waiting or paused row still waits; an ended or running one
     * kept the type of a wait it left. */
    if (out->status == DURO_STATUS_WAITING || out->status == DURO_STATUS_PAUSED)
      out->wait_type = take(&in.wait_type);
  }
  journal_instance_clear(&in);
  if (rc)
    duro_instance_info_free(out);
  return rc;
}

int duro_instance_read_summary(duro_engine *e, const char *workflow,
                               const char *id, duro_instance_info *out) {
  *out = (duro_instance_info){0};
  journal_instance in = {0};
  int rc = engine_instance_get(e, workflow, id, &in);
  if (rc == 0)
    info_from_row(e, &in, out);
  journal_instance_clear(&in);
  return rc;
}

int duro_instance_rows(duro_engine *e, const char *workflow, const char *id,
                       journal_rows *out, int64_t *read_ms) {
  memset(out, 0, sizeof *out);
  if (!engine_find_workflow(e, workflow))
    return DURO_E_WORKFLOW_NOT_FOUND;
  if (!duro_instance_id_valid(id))
    return DURO_E_INVALID_ID;
  int rc = journal_rows_read(e->j, workflow, id, out);
  if (rc == 0 && read_ms)
    *read_ms = duro_clock_now(e->clock);
  return rc;
}

void duro_instance_info_free(duro_instance_info *in) {
  engine_attrs_free(in->attrs, in->n_attrs);
  for (size_t i = 0; i < in->n_children; i++) {
    free(in->children[i].workflow);
    free(in->children[i].id);
  }
  free(in->children);
  free(in->parent_workflow);
  free(in->parent_id);
  for (size_t i = 0; i < in->n_steps; i++) {
    duro_step_info *s = &in->steps[i];
    for (size_t k = 0; k < s->n_attempts; k++) {
      free(s->attempts[k].error);
      free(s->attempts[k].build);
    }
    free(s->attempts);
    free(s->key);
    free(s->name);
    free(s->result);
    free(s->error);
  }
  free(in->steps);
  for (size_t i = 0; i < in->n_builds; i++)
    free(in->builds[i]);
  free(in->builds);
  for (size_t i = 0; i < in->n_events; i++) {
    free(in->events[i].type);
    free(in->events[i].payload);
    free(in->events[i].consumed_by);
  }
  free(in->events);
  free(in->id);
  free(in->workflow);
  free(in->params);
  free(in->output);
  free(in->error);
  free(in->build);
  free(in->wait_type);
  *in = (duro_instance_info){0};
}

typedef struct list_ctx {
  duro_engine *e;
  int filter;                /* a duro_status, -1 = any */
  const duro_list_filter *f; /* the rest (list_active tests it in memory) */
  duro_instance_page *page;
  int64_t *rowids; /* each row's of the page, for its last step */
  size_t cap;
  size_t scanned;
  int64_t last;
} list_ctx;

/* Adds one row unless its live status no longer matches the filter (a
 * stored "waiting" instance an activation is running now). */
static void list_one(void *ctx, const journal_list_row *row) {
  list_ctx *l = ctx;
  duro_instance_page *p = l->page;
  duro_status live = engine_live_status(l->e, row->rowid, row->status);
  l->scanned++;
  l->last = row->rowid;
  if (l->filter >= 0 && live != (duro_status)l->filter)
    return;
  if (p->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    p->v = xrealloc(p->v, l->cap * sizeof *p->v);
    l->rowids = xrealloc(l->rowids, l->cap * sizeof *l->rowids);
  }
  l->rowids[p->n] = row->rowid;
  p->v[p->n++] =
      (duro_instance_brief){.id = xstrdup(row->id),
                            .status = live,
                            .created_ms = row->created_ms,
                            .started_ms = row->started_ms,
                            .ended_ms = row->ended_ms,
                            .wait_type = xstrdup_null(row->wait_type),
                            .step_wake_ms = DURO_NO_TIME};
}

/* A page row's last step, found by its rowid (a page is at most 1000). */
static void last_step_one(void *ctx, const journal_last_step *s) {
  list_ctx *l = ctx;
  for (size_t i = 0; i < l->page->n; i++) {
    if (l->rowids[i] != s->rowid)
      continue;
    duro_instance_brief *b = &l->page->v[i];
    free(b->step_key);
    free(b->step_name);
    b->step_key = xstrdup(s->key);
    b->step_name = xstrdup(s->name);
    b->step_type = s->type;
    b->step_status = s->status;
    b->step_attempts = s->attempts;
    b->step_wake_ms = s->wake_ms; /* JOURNAL_NONE is DURO_NO_TIME */
    return;
  }
}

static int cmp_rowid_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x < y) - (x > y);
}

typedef struct active_ctx {
  int64_t *rowids;
  size_t n;
  int64_t after;
} active_ctx;

static void collect_active(void *ctx, int64_t rowid, void *val) {
  active_ctx *c = ctx;
  const entry *ent = val;
  if (ent->state == ENTRY_ACTIVE &&
      __atomic_load_n(&ent->admitted, __ATOMIC_ACQUIRE) &&
      (!c->after || rowid < c->after))
    c->rowids[c->n++] = rowid;
}

/* Whether an instance read whole passes a filter's bounds (the store
 * tests them itself in journal_list). */
static int passes(const duro_list_filter *f, const journal_instance *in) {
  if (f->prefix && *f->prefix &&
      strncmp(in->id, f->prefix, strlen(f->prefix)) != 0)
    return 0;
  if ((f->created_after && in->created_ms < f->created_after) ||
      (f->created_before && in->created_ms >= f->created_before))
    return 0;
  if ((f->ended_after || f->ended_before) && in->ended_ms == JOURNAL_NONE)
    return 0;
  return !(f->ended_after && in->ended_ms < f->ended_after) &&
         !(f->ended_before && in->ended_ms >= f->ended_before);
}

/* "running" and "waitingForPause" are never stored: they are the instances
 * an activation holds now, found in memory. */
static int list_active(duro_engine *e, const char *workflow, list_ctx *l,
                       int64_t after, size_t limit) {
  pthread_mutex_lock(&e->mu);
  active_ctx c = {.rowids = xcalloc(e->entries.len + 1, sizeof(int64_t)),
                  .after = after};
  idmap_each(&e->entries, collect_active, &c);
  pthread_mutex_unlock(&e->mu);
  int64_t *rowids = c.rowids;
  size_t n = c.n;
  qsort(rowids, n, sizeof *rowids, cmp_rowid_desc);
  for (size_t i = 0; i < n && l->page->n < limit; i++) {
    journal_instance in = {0};
    if (journal_instance_get_rowid(e->j, rowids[i], &in) == 0 &&
        !strcmp(in.workflow, workflow) && passes(l->f, &in) &&
        engine_attrs_pass(e, in.rowid, l->f)) {
      journal_list_row row = {.rowid = in.rowid,
                              .id = in.id,
                              .status = in.status,
                              .created_ms = in.created_ms,
                              .started_ms = in.started_ms,
                              .ended_ms = in.ended_ms,
                              .wait_type = in.wait_type};
      list_one(l, &row);
    }
    journal_instance_clear(&in);
  }
  free(rowids);
  return 0;
}

journal_list_filter engine_list_filter(const duro_list_filter *f) {
  return (journal_list_filter){.status = f->status,
                               .prefix = f->prefix,
                               .created_after = f->created_after,
                               .created_before = f->created_before,
                               .ended_after = f->ended_after,
                               .ended_before = f->ended_before,
                               .where = f->where,
                               .n_where = f->n_where};
}

int duro_instance_list_page(duro_engine *e, const char *workflow,
                            const duro_list_filter *filter, size_t limit,
                            const char *cursor, duro_instance_page *out) {
  static const duro_list_filter all = {.status = -1};
  const duro_list_filter *f = filter ? filter : &all;
  int status = f->status;
  *out = (duro_instance_page){0};
  if (!engine_find_workflow(e, workflow))
    return DURO_E_WORKFLOW_NOT_FOUND;
  int64_t after = 0;
  if (cursor && *cursor) {
    char *end;
    errno = 0;
    after = strtoll(cursor, &end, 10);
    if (errno || *end || after <= 0)
      return DURO_E_INVALID_ARGUMENT;
  }
  if (limit == 0 || limit > 1000)
    limit = 1000;
  list_ctx l = {
      .e = e, .filter = status < 0 ? -1 : status, .f = f, .page = out};
  int rc;
  if (status == DURO_STATUS_RUNNING ||
      status == DURO_STATUS_WAITING_FOR_PAUSE) {
    rc = list_active(e, workflow, &l, after, limit);
  } else {
    journal_list_filter jf = engine_list_filter(f);
    jf.status = l.filter;
    rc = journal_list(e->j, workflow, &jf, after, limit, list_one, &l);
  }
  /* each row's step, one read for the page: computed here, so a step's
   * commit writes nothing for the list */
  if (!rc)
    rc = journal_last_steps(e->j, l.rowids, out->n, last_step_one, &l);
  free(l.rowids);
  if (rc) {
    duro_instance_page_free(out);
    return rc;
  }
  /* A full page of rows looked at means there may be more. */
  if (l.scanned == limit)
    snprintf(out->cursor, sizeof out->cursor, "%lld", (long long)l.last);
  return 0;
}

void duro_instance_page_free(duro_instance_page *p) {
  for (size_t i = 0; i < p->n; i++) {
    free(p->v[i].id);
    free(p->v[i].wait_type);
    free(p->v[i].step_key);
    free(p->v[i].step_name);
  }
  free(p->v);
  *p = (duro_instance_page){0};
}

/* ---- metrics ----------------------------------------------------------------
 */

static void render_count(void *ctx, const char *workflow, duro_status status,
                         int64_t n) {
  fprintf(ctx, "duro_instances{workflow=\"%s\",status=\"%s\"} %lld\n", workflow,
          duro_status_name(status), (long long)n);
}

static void count_of_workflow(void *ctx, const char *workflow,
                              duro_status status, int64_t n) {
  duro_workflow_counts *c = ctx;
  if (strcmp(workflow, c->name))
    return;
  size_t i = 0;
  while (i < c->n && c->v[i].status != status)
    i++;
  if (i == c->n) /* a status told twice keeps its place, the last count */
    c->v = xrealloc(c->v, ++c->n * sizeof *c->v);
  c->v[i] = (duro_status_count){status, n};
  if (status == DURO_STATUS_QUEUED)
    c->backlog = n;
}

int duro_workflow_counts_read(duro_engine *e, const char *workflow,
                              duro_workflow_counts *out) {
  *out = (duro_workflow_counts){0};
  if (!engine_find_workflow(e, workflow))
    return DURO_E_WORKFLOW_NOT_FOUND;
  out->name = xstrdup(workflow);
  int64_t oldest = JOURNAL_NONE;
  int rc = journal_count_by_status(e->j, count_of_workflow, out);
  if (rc == 0)
    rc = journal_oldest_queued(e->j, workflow, &oldest);
  if (rc) {
    duro_workflow_counts_free(out);
    return rc;
  }
  out->oldest_queued_age_ms =
      oldest == JOURNAL_NONE ? 0 : duro_clock_now(e->clock) - oldest;
  return 0;
}

void duro_workflow_counts_free(duro_workflow_counts *c) {
  free(c->name);
  free(c->v);
  *c = (duro_workflow_counts){0};
}

size_t duro_engine_in_flight(duro_engine *e) {
  pthread_mutex_lock(&e->mu);
  size_t n = e->entries.len + e->spilled; /* the backlog in rows too */
  pthread_mutex_unlock(&e->mu);
  return n;
}

void duro_engine_journal_stats(duro_engine *e, duro_journal_stats *out) {
  const metrics_hist *h = journal_commit_latency(e->j);
  out->commits = __atomic_load_n(&h->count, __ATOMIC_RELAXED);
  out->commit_us = __atomic_load_n(&h->sum_us, __ATOMIC_RELAXED);
  out->batches = journal_batches_committed(e->j);
}

char *duro_engine_metrics(duro_engine *e) {
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  if (!out) {
    fprintf(stderr, "duro: out of memory\n");
    abort();
  }
  fprintf(out, "# HELP duro_instances Instances by workflow and stored "
               "status (running ones show as queued or waiting).\n"
               "# TYPE duro_instances gauge\n");
  journal_count_by_status(e->j, render_count, out);
  pthread_mutex_lock(&e->mu);
  size_t active = e->entries.len, queued = 0;
  for (entry *ent = e->runnable.head; ent; ent = ent->next)
    queued++;
  uint32_t hung = e->stuck;
  size_t backlog = e->runnable.n + e->spilled, spilled = e->spilled;
  pthread_mutex_unlock(&e->mu);
  int64_t oldest = JOURNAL_NONE;
  if (backlog)
    journal_oldest_queued(e->j, NULL, &oldest);
  fprintf(out,
          "# HELP duro_backlog Instances queued for a worker, in memory or "
          "(past engine limits) only in the journal.\n"
          "# TYPE duro_backlog gauge\nduro_backlog %zu\n"
          "# HELP duro_backlog_in_journal Queued instances kept only as "
          "rows until workers free up.\n"
          "# TYPE duro_backlog_in_journal gauge\nduro_backlog_in_journal "
          "%zu\n"
          "# HELP duro_backlog_oldest_age_seconds How long the oldest queued "
          "instance has waited.\n"
          "# TYPE duro_backlog_oldest_age_seconds gauge\n"
          "duro_backlog_oldest_age_seconds %.3f\n",
          backlog, spilled,
          oldest == JOURNAL_NONE
              ? 0.0
              : (double)(duro_clock_now(e->clock) - oldest) / 1000.0);
  fprintf(out,
          "# HELP duro_runnable Instances queued for a worker.\n"
          "# TYPE duro_runnable gauge\nduro_runnable %zu\n"
          "# HELP duro_in_flight Instances runnable, running or under "
          "a control operation.\n# TYPE duro_in_flight gauge\n"
          "duro_in_flight %zu\n"
          "# HELP duro_attempts_hung Attempts given up on past their "
          "timeout whose callbacks still run (each holds a thread).\n"
          "# TYPE duro_attempts_hung gauge\nduro_attempts_hung %u\n",
          queued, active, hung);
  const struct {
    const char *name, *help;
    const uint64_t *value;
  } counters[] = {
      {"duro_activations_total", "Activations (calls of a workflow's run).",
       &e->m.activations},
      {"duro_steps_completed_total", "duro_do steps completed and journaled.",
       &e->m.steps_completed},
      {"duro_attempts_failed_total", "Failed duro_do attempts.",
       &e->m.attempts_failed},
      {"duro_retries_total", "Retries scheduled after a failed attempt.",
       &e->m.retries_scheduled},
      {"duro_instances_created_total", "Instances created.",
       &e->m.instances_created},
      {"duro_events_sent_total", "Events stored.", &e->m.events_sent},
  };
  for (size_t i = 0; i < sizeof counters / sizeof *counters; i++)
    metrics_counter_render(
        out, counters[i].name, counters[i].help,
        __atomic_load_n(counters[i].value, __ATOMIC_RELAXED));
  metrics_hist_render(out, "duro_step_attempt_seconds",
                      "Wall time of duro_do attempts.", &e->m.attempt_us);
  metrics_hist_render(out, "duro_journal_commit_seconds",
                      "Journal group commits (one fsync each with "
                      "synchronous=full).",
                      journal_commit_latency(e->j));
  metrics_counter_render(out, "duro_journal_batches_total",
                         "Write batches committed (several share a commit).",
                         journal_batches_committed(e->j));
  engine_drivers_metrics(e, out); /* queues, cron triggers */
  engine_hosts_metrics(e, out);   /* the other hosts of a shared store */
  fclose(out);
  return text;
}
