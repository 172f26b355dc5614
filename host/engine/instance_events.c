/* instance_events.c — an instance's history as a list of items read from
 * its journal rows, for its event stream (GET .../events/stream).
 *
 * The journal keeps rows, not a log: a step row is written when the step
 * ends or fails an attempt (a sleep or a wait when it begins), an attempt
 * row when an attempt fails, an event row when it comes.  Each item is
 * placed where its row was committed: `ms` the time its row records for
 * that commit, then its kind, then the step's call position (or the
 * event's sequence) and the attempt's number.  A do step's start comes
 * with its first commit (its first failure, or its end): that is when
 * the journal has it.
 *
 * A stream reads "what came after" an id, so an id is a cursor of two
 * parts ("ms-kind-a-b-e"): the place of the last item sent that is not an
 * event, and the sequence of the last event sent.  The instance's own
 * rows are written by one activation at a time, each stamped as it is
 * committed, so they come in place order; an event is stamped when its
 * request came and may commit after a later-stamped step row, so events
 * go by their sequence, which the journal gives in commit order.  Events
 * are sent in sequence order, among the other items where their places
 * put them: a read after an id misses none and repeats none, however a
 * late event and a step row raced.  (An id of the older form "ms-kind-a-b"
 * is read as the events up to that place sent.) */
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

/* An id: the place of the last item that is not an event, and the last
 * event's sequence (-1: an id of the older form, without it). */
static int parse_cursor(const char *s, place *out, int64_t *event_seq) {
  int used = 0;
  long long ms, a, b, e;
  int kind;
  *event_seq = -1;
  if (sscanf(s, "%lld-%d-%lld-%lld%n", &ms, &kind, &a, &b, &used) != 4)
    return -1;
  *out = (place){ms, kind, a, b};
  if (s[used] == '\0')
    return 0;
  int more = 0;
  if (sscanf(s + used, "-%lld%n", &e, &more) != 1 || s[used + more] != '\0' ||
      e < 0)
    return -1;
  *event_seq = e;
  return 0;
}

static int seq_cmp(const void *x, const void *y) {
  int64_t a = (*(const item *const *)x)->at.a,
          b = (*(const item *const *)y)->at.a;
  return a < b ? -1 : a > b;
}

/* The items after cursor (from, seq) in the order they are sent: by
 * place, but the events among them by sequence (pointers into l). */
static item **items_after(const items *l, const place *from, int64_t seq,
                          size_t *n) {
  item **v = xcalloc(l->n ? l->n : 1, sizeof *v), **ev;
  size_t k = 0, n_ev = 0;
  ev = xcalloc(l->n ? l->n : 1, sizeof *ev);
  for (size_t i = 0; i < l->n; i++) {
    const item *it = &l->v[i];
    int is_event = it->at.kind == K_EVENT;
    int fresh = is_event ? it->at.a > seq : place_cmp(&it->at, from) > 0;
    if (!fresh)
      continue;
    if (is_event)
      ev[n_ev++] = (item *)it;
    v[k++] = (item *)it;
  }
  qsort(ev, n_ev, sizeof *ev, seq_cmp);
  for (size_t i = 0, j = 0; i < k; i++)
    if (v[i]->at.kind == K_EVENT)
      v[i] = ev[j++];
  free(ev);
  *n = k;
  return v;
}

int duro_instance_events_since(duro_engine *e, const char *workflow,
                               const char *id, const char *after, size_t max,
                               json_t **out, int *ended) {
  *out = NULL;
  *ended = 0;
  place from = {INT64_MIN, 0, 0, 0};
  int64_t seq = 0; /* the last event sent: none yet */
  if (after && *after && parse_cursor(after, &from, &seq) != 0)
    return DURO_E_INVALID_ARGUMENT;
  journal_instance in = {0};
  int rc = engine_instance_get(e, workflow, id, &in);
  if (rc)
    return rc;
  items l = {0};
  rc = read_items(e, &in, &l);
  /* an id of the older form: the events up to its place were sent */
  for (size_t k = 0; seq < 0 && k <= l.n; k++)
    if (k == l.n || place_cmp(&l.v[k].at, &from) > 0) {
      seq = 0;
      for (size_t j = 0; j < k; j++)
        if (l.v[j].at.kind == K_EVENT && l.v[j].at.a > seq)
          seq = l.v[j].at.a;
    }
  size_t n = 0, i = 0;
  item **next = rc ? NULL : items_after(&l, &from, seq, &n);
  json_t *arr = json_array();
  for (; i < n && json_array_size(arr) < max; i++) {
    const item *it = next[i];
    if (it->at.kind == K_EVENT)
      seq = it->at.a;
    else
      from = it->at;
    char tag[128];
    snprintf(tag, sizeof tag, "%" PRId64 "-%d-%" PRId64 "-%" PRId64 "-%" PRId64,
             from.ms, from.kind, from.a, from.b, seq);
    json_array_append_new(arr, json_pack("{s:s, s:s, s:O}", "id", tag, "event",
                                         it->event, "data", it->data));
  }
  *ended = !rc && i == n && duro_status_ended(in.status);
  free(next);
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
