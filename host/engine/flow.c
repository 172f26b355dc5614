/* flow.c — flow control by key: a workflow's concurrency rules
 * (limits.flow), each counting the activations that run at once per
 * value of a key read from the instance's params (`/customerId`: at most
 * 2 of each customer's), or of the whole workflow (no key).
 *
 * Like limits.concurrency, only running activations hold a slot: an
 * instance that sleeps or waits holds none.  An activation over a rule's
 * limit parks on that key's FIFO, taking no thread, and the next
 * activation of that key to end hands it its turn (first come, first
 * served per key, so a key with a long backlog delays no other key).  An
 * instance whose params lack a rule's key is not limited by that rule.
 *
 * Everything here is the engine's memory under its mu, rebuilt from the
 * journal after a restart: parked entries are queued rows, run again by
 * recovery, and admitted again here.  Per host: several hosts on one
 * PostgreSQL database each keep their own counts. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "json_pointer.h"
#include "util.h"

/* One value of a rule's key: how many of its activations run, and those
 * that wait for one of them to end. */
typedef struct flow_key {
  struct flow_key *next; /* the next key of the same hash */
  char *value;           /* the key's value as compact JSON text */
  uint32_t running;
  entry_fifo waiting;
} flow_key;

typedef struct flow_rule {
  char *pointer; /* NULL: the whole workflow is one key */
  uint32_t limit;
  idmap keys; /* hash of value -> flow_key chain */
} flow_rule;

struct flow_rules {
  flow_rule *v;
  size_t n;
};

flow_rules *flow_rules_new(const duro_flow_concurrency *rules, size_t n) {
  if (!n)
    return NULL;
  flow_rules *fr = xcalloc(1, sizeof *fr);
  fr->v = xcalloc(n, sizeof *fr->v);
  fr->n = n;
  for (size_t i = 0; i < n; i++) {
    fr->v[i].pointer = rules[i].key ? xstrdup(rules[i].key) : NULL;
    fr->v[i].limit = rules[i].limit;
  }
  return fr;
}

static void free_key(void *ctx, int64_t hash, void *val) {
  (void)ctx, (void)hash;
  for (flow_key *k = val, *next; k; k = next) {
    next = k->next;
    free(k->value);
    free(k);
  }
}

void flow_rules_free(flow_rules *fr) {
  if (!fr)
    return;
  for (size_t i = 0; i < fr->n; i++) {
    idmap_each(&fr->v[i].keys, free_key, NULL);
    idmap_free(&fr->v[i].keys);
    free(fr->v[i].pointer);
  }
  free(fr->v);
  free(fr);
}

/* FNV-1a 64 of the value, never 0 (idmap's keys are any int64). */
static int64_t hash_value(const char *s) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= UINT64_C(0x100000001b3);
  }
  return (int64_t)h;
}

/* The rule's key for `value`, made when `make` and missing, else NULL. */
static flow_key *key_of(flow_rule *r, const char *value, int make) {
  int64_t h = hash_value(value);
  flow_key *head = idmap_get(&r->keys, h);
  for (flow_key *k = head; k; k = k->next)
    if (!strcmp(k->value, value))
      return k;
  if (!make)
    return NULL;
  flow_key *k = xcalloc(1, sizeof *k);
  k->value = xstrdup(value);
  k->next = head;
  idmap_put(&r->keys, h, k);
  return k;
}

/* Forgets a key that nothing runs or waits on. */
static void drop_if_idle(flow_rule *r, flow_key *k) {
  if (k->running || k->waiting.n)
    return;
  int64_t h = hash_value(k->value);
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
  free(k->value);
  free(k);
}

/* The value of each rule's key in `params` (compact JSON text, "" for a
 * rule without a key, NULL when the params lack it), into values[]
 * (caller frees each). */
static void values_of(const flow_rules *fr, const char *params, char **values) {
  json_t *doc = params ? json_loads(params, JSON_DECODE_ANY, NULL) : NULL;
  for (size_t i = 0; i < fr->n; i++) {
    const char *ptr = fr->v[i].pointer;
    json_t *v = !ptr ? NULL : doc ? duro_json_pointer_get(doc, ptr) : NULL;
    values[i] = !ptr ? xstrdup("")
                : v  ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)
                     : NULL;
  }
  json_decref(doc);
}

int flow_admit_locked(duro_engine *e, wf_reg *wf, entry *ent,
                      const char *params) {
  (void)e;
  flow_rules *fr = wf->flow;
  char *values[DURO_FLOW_MAX_RULES];
  values_of(fr, params, values);
  flow_key *keys[DURO_FLOW_MAX_RULES] = {0};
  flow_key *full = NULL;
  flow_rule *full_rule = NULL;
  for (size_t i = 0; i < fr->n; i++) {
    if (!values[i])
      continue; /* its params lack the key: this rule does not limit it */
    keys[i] = key_of(&fr->v[i], values[i], 1);
    if (!full && keys[i]->running >= fr->v[i].limit) {
      full = keys[i];
      full_rule = &fr->v[i];
    }
  }
  if (full) {
    /* keys made for it alone go again; the one it waits on stays */
    for (size_t i = 0; i < fr->n; i++)
      if (keys[i] && keys[i] != full)
        drop_if_idle(&fr->v[i], keys[i]);
    ent->flow_waits = full;
    ent->flow_waits_rule = full_rule;
    fifo_push(&full->waiting, ent);
  } else {
    ent->flow_held = xcalloc(fr->n, sizeof *ent->flow_held);
    ent->n_flow_held = 0;
    for (size_t i = 0; i < fr->n; i++)
      if (keys[i]) {
        keys[i]->running++;
        ent->flow_held[ent->n_flow_held++] =
            (flow_hold){.key = keys[i], .rule = &fr->v[i]};
      }
  }
  for (size_t i = 0; i < fr->n; i++)
    free(values[i]);
  return full == NULL;
}

void flow_release_locked(duro_engine *e, entry *ent) {
  for (uint32_t i = 0; i < ent->n_flow_held; i++) {
    flow_key *k = ent->flow_held[i].key;
    k->running--;
    entry *next = fifo_pop(&k->waiting);
    if (next) {
      next->flow_waits = NULL;
      next->flow_waits_rule = NULL;
      runnable_push(e, next);
    }
    drop_if_idle(ent->flow_held[i].rule, k);
  }
  free(ent->flow_held);
  ent->flow_held = NULL;
  ent->n_flow_held = 0;
}

void flow_unpark_locked(entry *ent) {
  flow_key *k = ent->flow_waits;
  if (!k)
    return;
  fifo_remove(&k->waiting, ent);
  ent->flow_waits = NULL;
  drop_if_idle(ent->flow_waits_rule, k);
  ent->flow_waits_rule = NULL;
}

/* Hands every parked entry of fr's keys to fn (an engine closing). */
typedef struct each_ctx {
  void (*fn)(void *ctx, entry *ent);
  void *ctx;
} each_ctx;

static void drain_key(void *ctx, int64_t hash, void *val) {
  (void)hash;
  each_ctx *c = ctx;
  for (flow_key *k = val; k; k = k->next) {
    entry *ent;
    while ((ent = fifo_pop(&k->waiting))) {
      ent->flow_waits = NULL;
      ent->flow_waits_rule = NULL;
      c->fn(c->ctx, ent);
    }
  }
}

void flow_drain_locked(flow_rules *fr, void (*fn)(void *ctx, entry *ent),
                       void *ctx) {
  each_ctx c = {fn, ctx};
  for (size_t i = 0; fr && i < fr->n; i++)
    idmap_each(&fr->v[i].keys, drain_key, &c);
}
