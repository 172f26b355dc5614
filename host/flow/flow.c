/* flow.c — flow control by key, the engine's admission gate (driver.h's
 * admit, release, forget): a workflow's concurrency rules
 * (limits.flow_concurrency), each counting the activations that run at
 * once per value of a key read from the instance's params (`/customerId`:
 * at most 2 of each customer's), or of the whole workflow (no key); and
 * its rate rules (limits.flow_rate), each spacing the starts of
 * instances per value of a key (at most `limit` a `period`, `burst` at
 * once): the generic cell rate algorithm, a key's next start time (its
 * "theoretical arrival time") moved on by period/limit at each start.
 *
 * Like limits.concurrency, only running activations hold a slot: an
 * instance that sleeps or waits holds none.  An activation over a rule's
 * limit parks on that key's backlog, taking no thread, and the next
 * activation of that key to end hands the turn on (in the backlog's
 * order, backlog.h; a key with a long backlog delays no other key).  The
 * one given a turn is remembered by rowid (`granted`) until it is
 * admitted, so that those waiting behind it do not send it back.  An
 * instance whose params lack a rule's key is not limited by that rule.
 *
 * An instance over a rate waits in its key's backlog too; the scheduler's
 * pass (this driver's dispatch) hands the head its start when the key's
 * time comes, the start counted then, so a newcomer cannot take the turn
 * of one that waited (a granted start is remembered by rowid until the
 * instance is admitted).  Only starts are paced: an instance's later
 * activations (after a sleep, an event) pass.
 *
 * Everything here is memory under the engine's lock (the gate's hooks run
 * under it, the dispatch through engine_gate_run), rebuilt from the
 * journal after a restart: parked activations are queued rows, run again
 * by recovery, and admitted again here (a rate's spacing starts afresh).
 * Several hosts on one PostgreSQL database: a concurrency rule holds
 * across them (flow_slots.c), and so does a rate (flow_rates.c; with
 * on_excess: reject, a create's check counts per host). */
#include "flow.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "flow_internal.h"
#include "journal.h"
#include "json_pointer.h"
#include "util.h"

#define SWEEP_EVERY_MS 10000

static void *flow_create(duro_engine *e) {
  flow_state *fs = xcalloc(1, sizeof *fs);
  fs->e = e;
  return fs;
}

flow_rules *flow_rules_of(flow_state *fs, const char *workflow,
                          const duro_workflow_limits *limits) {
  flow_rules *fr = strmap_get(&fs->workflows, workflow);
  if (fr)
    return fr;
  fr = xcalloc(1, sizeof *fr);
  fr->workflow = xstrdup(workflow);
  size_t nc = limits->n_flow_concurrency, nr = limits->n_flow_rate;
  fr->n = nc + nr;
  fr->v = xcalloc(fr->n ? fr->n : 1, sizeof *fr->v);
  for (size_t i = 0; i < nc; i++) {
    const duro_flow_concurrency *r = &limits->flow_concurrency[i];
    fr->v[i].pointer = xstrdup_null(r->key);
    fr->v[i].limit = r->limit;
  }
  for (size_t i = 0; i < nr; i++) {
    const duro_flow_rate *r = &limits->flow_rate[i];
    flow_rule *fl = &fr->v[nc + i];
    fl->pointer = xstrdup_null(r->key);
    fl->limit = r->limit;
    fl->rate = 1;
    fl->interval_ms = (double)r->period_ms / (r->limit ? r->limit : 1);
    fl->tolerance_ms = ((r->burst ? r->burst : 1) - 1) * fl->interval_ms;
  }
  for (size_t i = 0; i < fr->n; i++)
    fr->v[i].index = (uint32_t)i;
  fr->order = &limits->flow_order;
  for (size_t i = 0; i < fr->n; i++) {
    fr->v[i].order = fr->order;
    fr->v[i].workflow = fr->workflow;
  }
  for (size_t i = 0; i < fr->order->n_weights; i++)
    strmap_put(&fr->weights, fr->order->weights[i].value,
               (void *)(uintptr_t)fr->order->weights[i].weight);
  if (nr)
    __atomic_store_n(&fs->has_rates, 1, __ATOMIC_RELEASE);
  strmap_put(&fs->workflows, fr->workflow, fr);
  return fr;
}

/* The rule's key for `value`, made when missing. */
static flow_key *key_of(flow_rule *r, const char *value) {
  int64_t h = map_hash_str(value);
  flow_key *head = idmap_get(&r->keys, h);
  for (flow_key *k = head; k; k = k->next)
    if (!strcmp(k->value, value))
      return k;
  flow_key *k = xcalloc(1, sizeof *k);
  k->value = xstrdup(value);
  k->tat = -1e300; /* never started: a start may come at once */
  k->next = head;
  idmap_put(&r->keys, h, k);
  return k;
}

/* Forgets a key that nothing runs or waits on, that holds no slot of
 * the hosts' and is in no slots' pass (and, for a rate, whose next start
 * is not in the future: it is then as a new key). */
void flow_drop_if_idle(flow_rule *r, flow_key *k, double now) {
  if (k->running || k->backlog.n || (r->rate && k->tat > now) || k->held ||
      k->promised || k->listed || k->busy || k->marked)
    return;
  int64_t h = map_hash_str(k->value);
  flow_key *head = idmap_get(&r->keys, h);
  if (head == k) {
    if (k->next)
      idmap_put(&r->keys, h, k->next);
    else
      idmap_del(&r->keys, h);
  } else {
    for (flow_key *p = head; p; p = p->next)
      if (p->next == k) {
        p->next = k->next;
        break;
      }
  }
  backlog_clear(&k->backlog, NULL, NULL);
  flow_slots_free(k);
  free(k->value);
  free(k);
}

/* Where an instance waits in a key's backlog (backlog.h): its fairness
 * lane, that lane's weight, its priority. */
typedef struct flow_place {
  char *lane; /* the fairness key's value as compact JSON text, or "" */
  uint32_t weight;
  int64_t priority;
} flow_place;

/* The place of the instance of `doc` (its params) in fr's backlogs. */
static void place_of(const flow_rules *fr, json_t *doc, flow_place *out) {
  const duro_flow_order *o = fr->order;
  json_t *prio = o->priority_key && doc
                     ? duro_json_pointer_get(doc, o->priority_key)
                     : NULL;
  json_int_t n = json_is_integer(prio) ? json_integer_value(prio) : 0;
  out->priority = json_is_integer(prio) && n >= -DURO_FLOW_PRIORITY_MAX &&
                          n <= DURO_FLOW_PRIORITY_MAX
                      ? (int64_t)n
                      : o->priority_default;
  json_t *fair = o->fairness_key && doc
                     ? duro_json_pointer_get(doc, o->fairness_key)
                     : NULL;
  out->lane =
      fair ? json_dumps(fair, JSON_COMPACT | JSON_ENCODE_ANY) : xstrdup("");
  /* a weight names a string value by its text, another by its JSON */
  const char *named =
      json_is_string(fair) ? json_string_value(fair) : out->lane;
  uintptr_t w = (uintptr_t)strmap_get(&fr->weights, named);
  out->weight = w ? (uint32_t)w : 1;
}

/* The value of each rule's key in `doc`, the params (compact JSON
 * text, "" for a rule without a key, NULL when the params lack it), into
 * values[] (caller frees each). */
static void values_of(const flow_rules *fr, json_t *doc, char **values) {
  for (size_t i = 0; i < fr->n; i++) {
    const char *ptr = fr->v[i].pointer;
    json_t *v = !ptr ? NULL : doc ? duro_json_pointer_get(doc, ptr) : NULL;
    values[i] = !ptr ? xstrdup("")
                : v  ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)
                     : NULL;
  }
}

static json_t *params_doc(const char *params) {
  return params ? json_loads(params, JSON_DECODE_ANY, NULL) : NULL;
}

static void park(flow_state *fs, flow_rule *r, flow_key *k,
                 duro_gate_ticket *ticket, const flow_place *place) {
  flow_parked *p = xcalloc(1, sizeof *p);
  *p = (flow_parked){.ticket = ticket,
                     .key = k,
                     .rule = r,
                     .since = (double)engine_now(fs->e),
                     .rowid = engine_gate_ticket_rowid(ticket)};
  if (r->rate && !k->backlog.n) {
    /* the dispatch looks at it from now on: it says when its turn comes */
    engine_gate_kick_locked(fs->e);
    if (fs->n_waiting == fs->cap_waiting) {
      fs->cap_waiting = fs->cap_waiting ? 2 * fs->cap_waiting : 16;
      fs->waiting =
          xrealloc(fs->waiting, fs->cap_waiting * sizeof *fs->waiting);
    }
    k->waiting_at = fs->n_waiting;
    fs->waiting[fs->n_waiting++] = (waiting_key){k, r};
  }
  backlog_push(&k->backlog, &p->link, place->lane, place->weight,
               place->priority);
  k->waiting++;
  idmap_put(&fs->parked, (int64_t)(intptr_t)ticket, p);
  idmap_put(&fs->by_rowid, p->rowid, p);
}

/* p, out of its key's backlog already, forgotten and freed. */
static void unparked(flow_state *fs, flow_parked *p) {
  flow_key *k = p->key;
  if (p->rule->rate && !k->backlog.n) { /* no waiter left: out of `waiting` */
    waiting_key last = fs->waiting[--fs->n_waiting];
    if (last.key != k) {
      fs->waiting[k->waiting_at] = last;
      last.key->waiting_at = k->waiting_at;
    }
  }
  k->waiting--;
  idmap_del(&fs->parked, (int64_t)(intptr_t)p->ticket);
  if (idmap_get(&fs->by_rowid, p->rowid) == p)
    idmap_del(&fs->by_rowid, p->rowid);
  free(p);
}

/* The waiter whose turn is next on k, or NULL. */
static flow_parked *next_of(const flow_key *k) {
  return (flow_parked *)backlog_next(&k->backlog);
}

/* Gives k's next waiter its turn on rule r: out of the backlog (its
 * lane charged), remembered by rowid as granted until it is admitted,
 * and made runnable. */
void flow_grant_turn(flow_state *fs, const flow_rule *r, flow_key *k) {
  flow_parked *p = (flow_parked *)backlog_take(&k->backlog);
  if (!r->rate && fs->shared)
    k->promised++; /* the slot it will run on (flow_slots.c) */
  duro_gate_ticket *t = p->ticket;
  uintptr_t g = (uintptr_t)idmap_get(&fs->granted, p->rowid);
  idmap_put(&fs->granted, p->rowid, (void *)(g | ((uintptr_t)1 << r->index)));
  unparked(fs, p);
  engine_gate_ready_locked(fs->e, t);
}

/* Whether a start of rate key k may come at `now`. */
static int rate_open(const flow_rule *r, const flow_key *k, double now) {
  return now >= k->tat - r->tolerance_ms;
}

/* A start of rate key k counted, of one that came at `at` (now, or when
 * a waiter began to wait, within the catch-up rates_pass allows). */
static void rate_take(const flow_rule *r, flow_key *k, double at) {
  k->tat = (k->tat > at ? k->tat : at) + r->interval_ms;
}

/* Gives the next waiter of concurrency key k its turn, a slot of k
 * being free: it is made runnable, and granted the key (so that it is
 * not sent to the back again by the waiters behind it). */
void flow_hand_on(flow_state *fs, flow_rule *r, flow_key *k) {
  if (!k->backlog.n || k->running >= r->limit)
    return;
  if (flow_slots_room(fs, k, 0))
    flow_grant_turn(fs, r, k);
  else /* short of the hosts' slots: take one, or give one back */
    flow_slots_want(fs, r, k);
}

static int flow_admit(duro_engine *e, void *state, const char *workflow,
                      const duro_workflow_limits *limits, int64_t rowid,
                      const char *params, int first, duro_gate_ticket *ticket,
                      void **hold) {
  flow_state *fs = state;
  double now = (double)engine_now(e);
  __atomic_store_n(&fs->shared, journal_slots_shared(engine_journal(e)),
                   __ATOMIC_RELEASE);
  flow_rules *fr = flow_rules_of(fs, workflow, limits);
  char *values[FLOW_MAX];
  json_t *doc = params_doc(params);
  values_of(fr, doc, values);
  uintptr_t granted = (uintptr_t)idmap_get(&fs->granted, rowid);
  flow_key *keys[FLOW_MAX] = {0};
  size_t full = fr->n;
  for (size_t i = 0; i < fr->n; i++) {
    const flow_rule *r = &fr->v[i];
    int mine = (granted >> i) & 1; /* its turn came on this rule */
    /* its params lack the key: this rule does not limit it; a rate
     * limits only starts, and not one granted already */
    if (!values[i] || (r->rate && (!first || mine || limits->flow_reject)))
      continue; /* (with on_excess: reject, a rate counts at the create) */
    keys[i] = key_of(&fr->v[i], values[i]);
    /* those waiting go first, unless its turn came */
    int queue = keys[i]->backlog.n && !mine;
    /* across hosts a rate's starts come from the store, on the pass */
    int blocked = r->rate ? queue || fs->shared || !rate_open(r, keys[i], now)
                          : queue || keys[i]->running >= r->limit ||
                                !flow_slots_room(fs, keys[i], mine);
    /* a concurrency rule first: a start is not spent on one that waits */
    if (blocked && (full == fr->n || (!r->rate && fr->v[full].rate)))
      full = i;
  }
  for (size_t i = 0; i < fr->n; i++)
    free(values[i]);
  if (full < fr->n) {
    flow_place place;
    place_of(fr, doc, &place);
    json_decref(doc);
    park(fs, &fr->v[full], keys[full], ticket, &place);
    free(place.lane);
    flow_slots_list(fs, &fr->v[full], keys[full]); /* it may want a slot */
    /* a concurrency turn it was given and cannot use goes to the next
     * waiter; its rates' starts granted stay its own */
    uintptr_t rates = 0;
    for (size_t i = 0; i < fr->n; i++) {
      if (!((granted >> i) & 1))
        continue;
      if (fr->v[i].rate) {
        rates |= (uintptr_t)1 << i;
      } else if (keys[i]) {
        if (fs->shared && keys[i]->promised)
          keys[i]->promised--; /* its slot goes on with the turn */
        flow_hand_on(fs, &fr->v[i], keys[i]);
      }
    }
    if (rates)
      idmap_put(&fs->granted, rowid, (void *)rates);
    else if (granted)
      idmap_del(&fs->granted, rowid);
    /* keys made for it alone go again; the one it waits on stays */
    for (size_t i = 0; i < fr->n; i++)
      if (keys[i] && i != full)
        flow_drop_if_idle(&fr->v[i], keys[i], now);
    return 0;
  }
  json_decref(doc);
  if (granted)
    idmap_del(&fs->granted, rowid);
  flow_hold *h = xcalloc(1, sizeof *h);
  for (size_t i = 0; i < fr->n; i++) {
    if (!keys[i])
      continue;
    if (fr->v[i].rate) {
      rate_take(&fr->v[i], keys[i], now);
      continue;
    }
    keys[i]->running++;
    if (fs->shared && ((granted >> i) & 1) && keys[i]->promised)
      keys[i]->promised--; /* it runs on the slot promised to it */
    h->v[h->n].key = keys[i];
    h->v[h->n++].rule = &fr->v[i];
  }
  *hold = h;
  return 1;
}

/* on_excess: reject: a create over any rule is refused, with when to
 * try again; one taken counts against its rates (a start now). */
static int flow_check_create(duro_engine *e, void *state, const char *workflow,
                             const duro_workflow_limits *limits,
                             const char *params, int64_t *retry_after_ms) {
  flow_state *fs = state;
  double now = (double)engine_now(e);
  flow_rules *fr = flow_rules_of(fs, workflow, limits);
  char *values[FLOW_MAX];
  json_t *doc = params_doc(params);
  values_of(fr, doc, values);
  json_decref(doc);
  flow_key *keys[FLOW_MAX] = {0};
  double wait = 0;
  for (size_t i = 0; i < fr->n; i++) {
    const flow_rule *r = &fr->v[i];
    if (!values[i])
      continue;
    keys[i] = key_of(&fr->v[i], values[i]);
    double w = 0;
    if (r->rate && !rate_open(r, keys[i], now))
      w = keys[i]->tat - r->tolerance_ms - now;
    else if (!r->rate && (keys[i]->running >= r->limit || keys[i]->backlog.n))
      w = 1000; /* a slot frees when one ends: a second is a guess */
    if (w > wait)
      wait = w;
  }
  for (size_t i = 0; i < fr->n; i++)
    free(values[i]);
  int refused = wait > 0;
  for (size_t i = 0; i < fr->n; i++) {
    if (!keys[i])
      continue;
    if (!refused && fr->v[i].rate)
      rate_take(&fr->v[i], keys[i], now);
    flow_drop_if_idle(&fr->v[i], keys[i], now);
  }
  *retry_after_ms =
      refused ? (int64_t)wait + ((double)(int64_t)wait < wait) : 0;
  return refused ? DURO_E_FLOW_REJECTED : 0;
}

static void flow_release(duro_engine *e, void *state, void *hold) {
  flow_state *fs = state;
  flow_hold *h = hold;
  double now = (double)engine_now(e);
  for (size_t i = 0; h && i < h->n; i++) {
    flow_key *k = h->v[i].key;
    k->running--;
    flow_hand_on(fs, h->v[i].rule, k);
    if (!k->backlog.n && k->held > k->running + k->promised)
      flow_slots_list(fs, h->v[i].rule, k); /* spare: give it back */
    flow_drop_if_idle(h->v[i].rule, k, now);
  }
  free(h);
}

static void flow_forget(duro_engine *e, void *state, duro_gate_ticket *ticket) {
  flow_state *fs = state;
  flow_parked *p = idmap_get(&fs->parked, (int64_t)(intptr_t)ticket);
  if (!p)
    return;
  flow_key *k = p->key;
  flow_rule *r = p->rule;
  idmap_del(&fs->granted, p->rowid); /* a start granted goes with it */
  backlog_remove(&k->backlog, &p->link);
  unparked(fs, p);
  flow_drop_if_idle(r, k, (double)engine_now(e));
}

/* ---- the rates' turns, on the scheduler's pass ---- */

typedef struct pass {
  flow_state *fs;
  int64_t next; /* engine ms: when a waiter's start comes next */
  size_t started;
} pass;

typedef struct idle_list {
  flow_key **v;
  size_t n, cap;
  double now;
} idle_list;

static void collect_idle(void *ctx, int64_t hash, void *val) {
  (void)hash;
  idle_list *l = ctx;
  for (flow_key *k = val; k; k = k->next) {
    if (k->running || k->backlog.n || k->tat > l->now)
      continue;
    if (l->n == l->cap) {
      l->cap = l->cap ? 2 * l->cap : 64;
      l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = k;
  }
}

/* Forgets rate rule r's keys whose next start is past: a new key is the
 * same, so a tenant that came once does not stay in memory. */
static void sweep_rule(flow_rule *r, double now) {
  idle_list l = {.now = now};
  idmap_each(&r->keys, collect_idle, &l);
  for (size_t i = 0; i < l.n; i++)
    flow_drop_if_idle(r, l.v[i], now);
  free(l.v);
}

static void rates_pass(duro_engine *e, void *ctx) {
  pass *p = ctx;
  flow_state *fs = p->fs;
  double now = (double)engine_now(e);
  /* across hosts the store's starts are handed out (flow_rates.c) */
  for (size_t w = 0; !fs->shared && w < fs->n_waiting;) {
    flow_key *k = fs->waiting[w].key;
    flow_rule *r = fs->waiting[w].rule;
    /* a pass that comes late makes up the starts due meanwhile, but
     * never more than a hundredth of a period's worth: no period's
     * window sees more than 1 % over the limit */
    double catch_up = now - r->interval_ms * r->limit / 100;
    while (k->backlog.n && rate_open(r, k, now)) {
      double since = next_of(k)->since;
      rate_take(r, k, since > catch_up ? since : catch_up);
      flow_grant_turn(fs, r, k); /* may move another key into place w */
      p->started++;
    }
    if (w < fs->n_waiting && fs->waiting[w].key == k) {
      double due = k->tat - r->tolerance_ms;
      int64_t at = (int64_t)due + ((double)(int64_t)due < due);
      if (at < p->next)
        p->next = at;
      w++;
    }
  }
  if ((int64_t)now >= fs->next_sweep) {
    for (size_t i = 0; i < fs->workflows.cap; i++) {
      flow_rules *fr = fs->workflows.vals[i];
      for (size_t r = 0; fs->workflows.keys[i] && fr && r < fr->n; r++)
        if (fr->v[r].rate)
          sweep_rule(&fr->v[r], now);
    }
    fs->next_sweep = (int64_t)now + SWEEP_EVERY_MS;
  }
}

static int flow_dispatch(duro_engine *e, void *state, int64_t *next_ms) {
  flow_state *fs = state;
  *next_ms = INT64_MAX;
  if (__atomic_load_n(&fs->shared, __ATOMIC_ACQUIRE))
    flow_slots_pass(e, fs, next_ms);
  if (!__atomic_load_n(&fs->has_rates, __ATOMIC_ACQUIRE))
    return 0;
  if (__atomic_load_n(&fs->shared, __ATOMIC_ACQUIRE))
    flow_rates_pass(e, fs, next_ms);
  pass p = {.fs = fs, .next = INT64_MAX};
  engine_gate_run(e, rates_pass, &p);
  if (p.next < *next_ms)
    *next_ms = p.next;
  return 0;
}

size_t duro_flow_dispatch(duro_engine *e) {
  flow_state *fs = duro_engine_driver_state(e, &flow_driver);
  if (!fs)
    return 0;
  int64_t next = INT64_MAX;
  size_t started = 0;
  if (__atomic_load_n(&fs->shared, __ATOMIC_ACQUIRE)) {
    flow_slots_pass(e, fs, &next);
    started = flow_rates_pass(e, fs, &next);
  }
  pass p = {.fs = fs, .next = INT64_MAX};
  engine_gate_run(e, rates_pass, &p);
  return started + p.started;
}

static void free_parked(backlog_waiter *w, void *ctx) {
  (void)ctx;
  free(w); /* its flow_parked; the ticket is the engine's, let go already */
}

static void free_key(void *ctx, int64_t hash, void *val) {
  (void)ctx, (void)hash;
  for (flow_key *k = val, *next; k; k = next) {
    next = k->next;
    backlog_clear(&k->backlog, free_parked, NULL);
    flow_slots_free(k);
    free(k->value);
    free(k);
  }
}

static void flow_free(void *state) {
  flow_state *fs = state;
  for (size_t i = 0; i < fs->workflows.cap; i++) {
    flow_rules *fr = fs->workflows.vals[i];
    if (!fs->workflows.keys[i] || !fr)
      continue;
    for (size_t r = 0; r < fr->n; r++) {
      idmap_each(&fr->v[r].keys, free_key, NULL);
      idmap_free(&fr->v[r].keys);
      free(fr->v[r].pointer);
    }
    free(fr->v);
    strmap_free(&fr->weights);
    free(fr->workflow);
    free(fr);
  }
  strmap_free(&fs->workflows);
  idmap_free(&fs->parked);
  idmap_free(&fs->by_rowid);
  idmap_free(&fs->granted);
  free(fs->waiting);
  free(fs->slot_keys);
  free(fs);
}

const duro_driver flow_driver = {
    .name = "flow",
    .create = flow_create,
    .dispatch = flow_dispatch,
    .admit = flow_admit,
    .check_create = flow_check_create,
    .release = flow_release,
    .forget = flow_forget,
    .metrics = flow_metrics,
    .free = flow_free,
};
