/* instance_events.c — an instance's history as a list of items read from
 * its journal rows, for its event stream (GET .../events/stream).
 *
 * The journal keeps rows, not a log: a step row is written when the step
 * ends or fails an attempt (a sleep or a wait when it begins), an attempt
 * row when an attempt fails, an event row when it comes.  Each item is
 * placed where its row was committed: `ms` the time its row records for
 * that commit, then its kind, then the step's call position (or the
 * event's sequence) and the attempt's number.  Its id spells that place
 * ("ms-kind-a-b"), so the same rows give the same ids after a restart and
 * a read after an id returns what came later.  A do step's start comes
 * with its first commit (its first failure, or its end): that is when
 * the journal has it. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "error.h"
#include "util.h"

/* Kinds in the order items of one millisecond come. */
enum {
  K_CREATED,
  K_EVENT,
  K_STEP_STARTED,
  K_SLEEP,
  K_ATTEMPT_FAILED,
  K_STEP_ENDED,
  K_PAUSED,
  K_ENDED
};

typedef struct place {
  int64_t ms;
  int kind;
  int64_t a, b;
} place;

typedef struct item {
  place at;
  const char *event;
  json_t *data;
} item;

typedef struct items {
  item *v;
  size_t n, cap;
  const journal_step *steps;
  strmap by_key;   /* step key → its index + 1 */
  int64_t *firsts; /* by step: its first failed attempt's end, or NONE */
} items;

static int place_cmp(const place *x, const place *y) {
  if (x->ms != y->ms)
    return x->ms < y->ms ? -1 : 1;
  if (x->kind != y->kind)
    return x->kind < y->kind ? -1 : 1;
  if (x->a != y->a)
    return x->a < y->a ? -1 : 1;
  if (x->b != y->b)
    return x->b < y->b ? -1 : 1;
  return 0;
}

static int item_cmp(const void *x, const void *y) {
  return place_cmp(&((const item *)x)->at, &((const item *)y)->at);
}

static void add(items *l, place at, const char *event, json_t *data) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    l->v = xrealloc(l->v, l->cap * sizeof *l->v);
  }
  json_object_set_new(data, "time_ms", json_integer(at.ms));
  l->v[l->n++] = (item){.at = at, .event = event, .data = data};
}

/* A stored error ({"name","message"}) as JSON, or its text. */
static json_t *error_value(const char *error) {
  json_t *v = error ? json_loads(error, 0, NULL) : NULL;
  return v ? v : error ? json_string(error) : json_null();
}

/* Each failed attempt; the first of a step places a do step's start. */
static void on_attempt(void *ctx, const char *key, uint32_t number,
                       int64_t started_ms, int64_t ended_ms, const char *error,
                       const char *build) {
  items *l = ctx;
  (void)started_ms, (void)build;
  uintptr_t k = (uintptr_t)strmap_get(&l->by_key, key);
  if (!k || !error)
    return;
  const journal_step *s = &l->steps[k - 1];
  if (number == 1)
    l->firsts[k - 1] = ended_ms;
  add(l, (place){ended_ms, K_ATTEMPT_FAILED, s->seq, number}, "attempt_failed",
      json_pack("{s:s, s:I, s:o}", "step", key, "attempt", (json_int_t)number,
                "error", error_value(error)));
}

static void add_step(items *l, const journal_step *s,
                     int64_t first_failure_ms) {
  if (s->type == DURO_STEP_SLEEP) {
    add(l, (place){s->started_ms, K_SLEEP, s->seq, 0}, "sleep",
        json_pack("{s:s, s:s, s:I}", "step", s->key, "name", s->name, "wake_ms",
                  (json_int_t)s->wake_ms));
  } else {
    /* a do step's row is first written at its first failure or its end */
    int64_t at = s->type != DURO_STEP_DO            ? s->started_ms
                 : first_failure_ms != JOURNAL_NONE ? first_failure_ms
                                                    : s->ended_ms;
    add(l, (place){at, K_STEP_STARTED, s->seq, 0}, "step_started",
        json_pack("{s:s, s:s, s:s, s:I}", "step", s->key, "name", s->name,
                  "kind", duro_step_kind_name(s->type), "started_ms",
                  (json_int_t)s->started_ms));
  }
  if (s->status == DURO_STEP_WAITING)
    return;
  json_t *d = json_pack("{s:s, s:s}", "step", s->key, "status",
                        duro_step_status_name(s->status));
  if (s->status == DURO_STEP_ERRORED || s->status == DURO_STEP_CANCELLED)
    json_object_set_new(d, "error", error_value(s->error));
  add(l, (place){s->ended_ms, K_STEP_ENDED, s->seq, 0}, "step_ended", d);
}

/* Every item of the instance, sorted. */
static int read_items(duro_engine *e, const journal_instance *in, items *l) {
  journal_step *steps = NULL;
  size_t n_steps = 0;
  int rc = journal_steps_load(e->j, in->rowid, &steps, &n_steps);
  if (rc)
    return rc;
  l->steps = steps;
  l->firsts = xcalloc(n_steps ? n_steps : 1, sizeof *l->firsts);
  for (size_t i = 0; i < n_steps; i++) {
    l->firsts[i] = JOURNAL_NONE;
    strmap_put(&l->by_key, steps[i].key, (void *)(uintptr_t)(i + 1));
  }
  add(l, (place){in->created_ms, K_CREATED, 0, 0}, "status",
      json_pack("{s:s}", "status", "queued"));
  rc = journal_attempts_each(e->j, in->rowid, on_attempt, l);
  for (size_t i = 0; i < n_steps; i++)
    add_step(l, &steps[i], l->firsts[i]);
  journal_event *ev = NULL;
  size_t n_ev = 0;
  if (!rc)
    rc = journal_events_all(e->j, in->rowid, &ev, &n_ev);
  for (size_t i = 0; i < n_ev; i++)
    add(l, (place){ev[i].ts_ms, K_EVENT, ev[i].seq, 0}, "event_received",
        json_pack("{s:s, s:I}", "type", ev[i].type, "seq",
                  (json_int_t)ev[i].seq));
  journal_events_free(ev, n_ev);
  if (in->status == DURO_STATUS_PAUSED && in->paused_ms != JOURNAL_NONE)
    add(l, (place){in->paused_ms, K_PAUSED, 0, 0}, "status",
        json_pack("{s:s}", "status", "paused"));
  if (duro_status_ended(in->status)) {
    json_t *d = json_pack("{s:s}", "status", duro_status_name(in->status));
    if (in->error)
      json_object_set_new(d, "error", error_value(in->error));
    add(l, (place){in->ended_ms, K_ENDED, 0, 0}, "status", d);
  }
  qsort(l->v, l->n, sizeof *l->v, item_cmp);
  strmap_free(&l->by_key);
  free(l->firsts);
  journal_steps_free(steps, n_steps);
  l->steps = NULL;
  return rc;
}

static int parse_place(const char *s, place *out) {
  int used = 0;
  long long ms, a, b;
  int kind;
  if (sscanf(s, "%lld-%d-%lld-%lld%n", &ms, &kind, &a, &b, &used) != 4 ||
      s[used] != '\0')
    return -1;
  *out = (place){ms, kind, a, b};
  return 0;
}

int duro_instance_events_since(duro_engine *e, const char *workflow,
                               const char *id, const char *after, size_t max,
                               json_t **out, int *ended) {
  *out = NULL;
  *ended = 0;
  place from = {INT64_MIN, 0, 0, 0};
  int from_start = !after || !*after;
  if (!from_start && parse_place(after, &from) != 0)
    return DURO_E_INVALID_ARGUMENT;
  journal_instance in = {0};
  int rc = engine_instance_get(e, workflow, id, &in);
  if (rc)
    return rc;
  items l = {0};
  rc = read_items(e, &in, &l);
  json_t *arr = json_array();
  size_t i = 0;
  while (i < l.n && !from_start && place_cmp(&l.v[i].at, &from) <= 0)
    i++;
  for (; !rc && i < l.n && json_array_size(arr) < max; i++) {
    char tag[96];
    snprintf(tag, sizeof tag, "%" PRId64 "-%d-%" PRId64 "-%" PRId64,
             l.v[i].at.ms, l.v[i].at.kind, l.v[i].at.a, l.v[i].at.b);
    json_array_append_new(arr, json_pack("{s:s, s:s, s:O}", "id", tag, "event",
                                         l.v[i].event, "data", l.v[i].data));
  }
  *ended = !rc && i == l.n && duro_status_ended(in.status);
  for (size_t k = 0; k < l.n; k++)
    json_decref(l.v[k].data);
  free(l.v);
  journal_instance_clear(&in);
  if (rc) {
    json_decref(arr);
    return rc;
  }
  *out = arr;
  return 0;
}

int duro_engine_store_shared(duro_engine *e) { return journal_host(e->j) != 0; }
