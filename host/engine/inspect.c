/* inspect.c — reading instances: status, describe, list, and the
 * Prometheus metrics (to which each driver adds its series).
 *
 * Reads go to the journal (each thread has its own reader connection) and
 * never block activations.  What only memory knows is laid over the
 * stored rows: an instance an activation is running shows "running" (or
 * "waitingForPause", or "terminated" once a terminate is pending). */
#include <errno.h>
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
    if (__atomic_load_n(&ent->terminate_req, __ATOMIC_ACQUIRE))
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

static json_t *json_raw_or_null(const char *text) {
  if (!text)
    return json_null();
  json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
  return v ? v : json_string(text);
}

static json_t *json_ms(int64_t ms) {
  return ms == JOURNAL_NONE ? json_null() : json_integer(ms);
}

static void attempt_to_json(void *ctx, const char *key, uint32_t number,
                            int64_t started_ms, int64_t ended_ms,
                            const char *error, const char *build) {
  json_t *by_key = ctx;
  json_t *list = json_object_get(by_key, key);
  if (!list) {
    list = json_array();
    json_object_set_new(by_key, key, list);
  }
  json_array_append_new(
      list, json_pack("{s:I,s:o,s:o,s:o,s:s?}", "number", (json_int_t)number,
                      "started_ms", json_ms(started_ms), "ended_ms",
                      json_ms(ended_ms), "error", json_raw_or_null(error),
                      "build", build));
}

/* A step's attempts: the failed ones have rows of their own; the one that
 * succeeded is kept in the step row (journal.h) and rejoins them here.
 * Returns a new reference. */
static json_t *step_attempts(json_t *by_key, const journal_step *s) {
  json_t *list = json_object_get(by_key, s->key);
  list = list ? json_incref(list) : json_array();
  size_t n = json_array_size(list);
  json_t *lastn =
      n ? json_object_get(json_array_get(list, n - 1), "number") : NULL;
  int have_last = lastn && json_integer_value(lastn) == (json_int_t)s->attempts;
  if (s->type == DURO_STEP_DO && s->status == DURO_STEP_COMPLETE && !have_last)
    json_array_append_new(list, json_pack("{s:I,s:o,s:o,s:n,s:s?}", "number",
                                          (json_int_t)s->attempts, "started_ms",
                                          json_ms(s->attempt_started_ms),
                                          "ended_ms", json_ms(s->ended_ms),
                                          "error", "build", s->build));
  return list;
}

/* Adds the build of each attempt in `att` to `builds` (once each). */
static void note_builds(json_t *builds, json_t *att) {
  size_t i, k;
  json_t *a, *b;
  json_array_foreach(att, i, a) {
    const char *h = json_string_value(json_object_get(a, "build"));
    int seen = !h;
    json_array_foreach(builds, k, b) seen |=
        h && !strcmp(h, json_string_value(b));
    if (!seen)
      json_array_append_new(builds, json_string(h));
  }
}

/* The events the instance received, in arrival order, each with the key
 * of the step that consumed it (null: pending, no step took it yet).
 * Returns a new reference, or NULL when the journal could not be read. */
static json_t *events_json(duro_engine *e, int64_t rowid) {
  journal_event *ev = NULL;
  size_t n = 0;
  if (journal_events_all(e->j, rowid, &ev, &n) != 0)
    return NULL;
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(
        arr, json_pack("{s:s,s:o,s:I,s:o}", "type", ev[i].type, "payload",
                       json_raw_or_null(ev[i].payload), "sent_ms",
                       (json_int_t)ev[i].ts_ms, "consumed_by",
                       ev[i].consumed_by ? json_string(ev[i].consumed_by)
                                         : json_null()));
  journal_events_free(ev, n);
  return arr;
}

int duro_instance_describe(duro_engine *e, const char *workflow, const char *id,
                           json_t **out) {
  *out = NULL;
  journal_instance in = {0};
  int rc = engine_instance_get(e, workflow, id, &in);
  if (rc)
    return rc;
  journal_step *steps = NULL;
  size_t n = 0;
  json_t *attempts = json_object();
  json_t *events = NULL;
  rc = journal_steps_load(e->j, in.rowid, &steps, &n);
  if (rc == 0)
    rc = journal_attempts_each(e->j, in.rowid, attempt_to_json, attempts);
  if (rc == 0 && !(events = events_json(e, in.rowid)))
    rc = DURO_E_STORAGE;
  if (rc == 0) {
    json_t *arr = json_array(), *builds = json_array();
    for (size_t i = 0; i < n; i++) {
      journal_step *s = &steps[i];
      json_t *att = step_attempts(attempts, s);
      note_builds(builds, att);
      json_array_append_new(
          arr,
          json_pack("{s:s,s:s,s:I,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o}", "key",
                    s->key, "name", s->name, "count", (json_int_t)s->count,
                    "type", duro_step_kind_name(s->type), "status",
                    duro_step_status_name(s->status), "result",
                    json_raw_or_null(s->result), "error",
                    json_raw_or_null(s->error), "started_ms",
                    json_ms(s->started_ms), "ended_ms", json_ms(s->ended_ms),
                    "wake_ms", json_ms(s->wake_ms), "attempts", att));
    }
    duro_status live = engine_live_status(e, in.rowid, in.status);
    *out = json_pack(
        "{s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "id", in.id,
        "workflow", in.workflow, "status", duro_status_name(live), "params",
        json_raw_or_null(in.params), "output", json_raw_or_null(in.output),
        "error", json_raw_or_null(in.error), "created_ms",
        json_ms(in.created_ms), "started_ms", json_ms(in.started_ms),
        "ended_ms", json_ms(in.ended_ms), "wake_ms", json_ms(in.wake_ms),
        "steps", arr);
    /* The builds its attempts ran on, oldest first; more than one means
     * its code changed while it was in flight (versioning: latest, or a
     * restart on another build). */
    json_object_set_new(*out, "build",
                        in.build ? json_string(in.build) : json_null());
    json_object_set_new(*out, "builds", builds);
    /* How many times it was restarted: the "@n" of its idempotency keys. */
    json_object_set_new(*out, "restarts", json_integer(in.restarts));
    json_object_set_new(*out, "several_builds",
                        json_boolean(json_array_size(builds) > 1));
    json_object_set_new(*out, "events", events);
    /* The event type it is blocked on (a wait for an event), null when
     * it waits for none: what a sender needs to move it on.  Only a
     * waiting or paused row still waits; an ended or running one kept
     * the type of a wait it left. */
    int blocked = live == DURO_STATUS_WAITING || live == DURO_STATUS_PAUSED;
    json_object_set_new(*out, "wait_type",
                        blocked && in.wait_type ? json_string(in.wait_type)
                                                : json_null());
  }
  json_decref(attempts);
  journal_steps_free(steps, n);
  journal_instance_clear(&in);
  return rc;
}

int duro_instance_summary(duro_engine *e, const char *workflow, const char *id,
                          json_t **out) {
  *out = NULL;
  journal_instance in = {0};
  int rc = engine_instance_get(e, workflow, id, &in);
  if (rc == 0)
    *out = json_pack(
        "{s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o}", "id", in.id, "workflow",
        in.workflow, "status",
        duro_status_name(engine_live_status(e, in.rowid, in.status)), "output",
        json_raw_or_null(in.output), "error", json_raw_or_null(in.error),
        "created_ms", json_ms(in.created_ms), "started_ms",
        json_ms(in.started_ms), "ended_ms", json_ms(in.ended_ms));
  journal_instance_clear(&in);
  return rc;
}

typedef struct list_ctx {
  duro_engine *e;
  int filter; /* a duro_status, -1 = any */
  json_t *arr;
  size_t scanned;
  int64_t last;
} list_ctx;

/* Adds one row unless its live status no longer matches the filter (a
 * stored "waiting" instance an activation is running now). */
static void list_one(void *ctx, int64_t rowid, const char *id,
                     duro_status status, int64_t created_ms) {
  list_ctx *l = ctx;
  duro_status live = engine_live_status(l->e, rowid, status);
  l->scanned++;
  l->last = rowid;
  if (l->filter >= 0 && live != (duro_status)l->filter)
    return;
  json_array_append_new(l->arr, json_pack("{s:s,s:s,s:I}", "id", id, "status",
                                          duro_status_name(live), "created_ms",
                                          (json_int_t)created_ms));
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
  for (size_t i = 0; i < n && json_array_size(l->arr) < limit; i++) {
    journal_instance in = {0};
    if (journal_instance_get_rowid(e->j, rowids[i], &in) == 0 &&
        !strcmp(in.workflow, workflow))
      list_one(l, in.rowid, in.id, in.status, in.created_ms);
    journal_instance_clear(&in);
  }
  free(rowids);
  return 0;
}

int duro_instance_list(duro_engine *e, const char *workflow, int status,
                       size_t limit, const char *cursor, json_t **out) {
  *out = NULL;
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
      .e = e, .filter = status < 0 ? -1 : status, .arr = json_array()};
  int rc;
  if (status == DURO_STATUS_RUNNING || status == DURO_STATUS_WAITING_FOR_PAUSE)
    rc = list_active(e, workflow, &l, after, limit);
  else
    rc = journal_list(e->j, workflow, l.filter, after, limit, list_one, &l);
  if (rc) {
    json_decref(l.arr);
    return rc;
  }
  /* A full page of rows looked at means there may be more. */
  char next[32] = "";
  if (l.scanned == limit)
    snprintf(next, sizeof next, "%lld", (long long)l.last);
  *out = json_pack("{s:o,s:s?}", "instances", l.arr, "cursor",
                   next[0] ? next : NULL);
  return 0;
}

/* ---- metrics ----------------------------------------------------------------
 */

static void render_count(void *ctx, const char *workflow, duro_status status,
                         int64_t n) {
  fprintf(ctx, "duro_instances{workflow=\"%s\",status=\"%s\"} %lld\n", workflow,
          duro_status_name(status), (long long)n);
}

typedef struct wf_counts {
  const char *workflow;
  json_t *by_status;
} wf_counts;

static void count_of_workflow(void *ctx, const char *workflow,
                              duro_status status, int64_t n) {
  wf_counts *c = ctx;
  if (!strcmp(workflow, c->workflow))
    json_object_set_new(c->by_status, duro_status_name(status),
                        json_integer(n));
}

int duro_workflow_stats(duro_engine *e, const char *workflow, json_t **out) {
  *out = NULL;
  if (!engine_find_workflow(e, workflow))
    return DURO_E_WORKFLOW_NOT_FOUND;
  wf_counts c = {workflow, json_object()};
  int64_t oldest = JOURNAL_NONE;
  int rc = journal_count_by_status(e->j, count_of_workflow, &c);
  if (rc == 0)
    rc = journal_oldest_queued(e->j, workflow, &oldest);
  if (rc) {
    json_decref(c.by_status);
    return rc;
  }
  json_int_t queued = json_integer_value(
      json_object_get(c.by_status, duro_status_name(DURO_STATUS_QUEUED)));
  *out = json_pack("{s:s,s:o,s:I,s:I}", "name", workflow, "instances",
                   c.by_status, "backlog", queued, "oldest_queued_age_ms",
                   (json_int_t)(oldest == JOURNAL_NONE
                                    ? 0
                                    : duro_clock_now(e->clock) - oldest));
  return 0;
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
  fclose(out);
  return text;
}
