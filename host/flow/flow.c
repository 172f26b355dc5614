/* flow.c — flow control by key, the engine's admission gate (driver.h's
 * admit, release, forget): a workflow's concurrency rules
 * (limits.flow_concurrency), each counting the activations that run at
 * once per value of a key read from the instance's params (`/customerId`:
 * at most 2 of each customer's), or of the whole workflow (no key).
 *
 * Like limits.concurrency, only running activations hold a slot: an
 * instance that sleeps or waits holds none.  An activation over a rule's
 * limit parks on that key's FIFO, taking no thread, and the next
 * activation of that key to end hands it its turn (first come, first
 * served per key, so a key with a long backlog delays no other key).  An
 * instance whose params lack a rule's key is not limited by that rule.
 *
 * Everything here is memory under the engine's lock (the gate's hooks run
 * under it), rebuilt from the journal after a restart: parked activations
 * are queued rows, run again by recovery, and admitted again here.  Per
 * host: several hosts on one PostgreSQL database each keep their own
 * counts. */
#include "flow.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "json_pointer.h"
#include "map.h"
#include "util.h"

/* An activation waiting for its key's turn. */
typedef struct flow_parked {
  struct flow_parked *next;
  duro_gate_ticket *ticket;
  struct flow_key *key;
  struct flow_rule *rule;
} flow_parked;

/* One value of a rule's key: how many of its activations run, and those
 * that wait for one of them to end (first in, first out). */
typedef struct flow_key {
  struct flow_key *next; /* the next key of the same hash */
  char *value;           /* the key's value as compact JSON text */
  uint32_t running;
  flow_parked *head, *tail;
} flow_key;

typedef struct flow_rule {
  char *pointer; /* NULL: the whole workflow is one key */
  uint32_t limit;
  idmap keys; /* hash of value -> flow_key chain */
} flow_rule;

/* A workflow's rules, made from its limits at its first admission (they
 * change only with a restart). */
typedef struct flow_rules {
  char *workflow; /* the map's key */
  flow_rule *v;
  size_t n;
} flow_rules;

/* The slots an admitted activation holds, one a rule that limits it. */
typedef struct flow_hold {
  size_t n;
  struct {
    flow_key *key;
    flow_rule *rule;
  } v[DURO_FLOW_MAX_RULES];
} flow_hold;

typedef struct flow_state {
  strmap workflows; /* name -> flow_rules */
  idmap parked;     /* ticket -> flow_parked */
} flow_state;

static void *flow_create(duro_engine *e) {
  (void)e;
  return xcalloc(1, sizeof(flow_state));
}

static flow_rules *rules_of(flow_state *fs, const char *workflow,
                            const duro_workflow_limits *limits) {
  flow_rules *fr = strmap_get(&fs->workflows, workflow);
  if (fr)
    return fr;
  fr = xcalloc(1, sizeof *fr);
  fr->workflow = xstrdup(workflow);
  fr->n = limits->n_flow_concurrency;
  fr->v = xcalloc(fr->n ? fr->n : 1, sizeof *fr->v);
  for (size_t i = 0; i < fr->n; i++) {
    const duro_flow_concurrency *r = &limits->flow_concurrency[i];
    fr->v[i].pointer = r->key ? xstrdup(r->key) : NULL;
    fr->v[i].limit = r->limit;
  }
  strmap_put(&fs->workflows, fr->workflow, fr);
  return fr;
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

/* The rule's key for `value`, made when missing. */
static flow_key *key_of(flow_rule *r, const char *value) {
  int64_t h = hash_value(value);
  flow_key *head = idmap_get(&r->keys, h);
  for (flow_key *k = head; k; k = k->next)
    if (!strcmp(k->value, value))
      return k;
  flow_key *k = xcalloc(1, sizeof *k);
  k->value = xstrdup(value);
  k->next = head;
  idmap_put(&r->keys, h, k);
  return k;
}

/* Forgets a key that nothing runs or waits on. */
static void drop_if_idle(flow_rule *r, flow_key *k) {
  if (k->running || k->head)
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

static void park(flow_state *fs, flow_rule *r, flow_key *k,
                 duro_gate_ticket *ticket) {
  flow_parked *p = xcalloc(1, sizeof *p);
  *p = (flow_parked){.ticket = ticket, .key = k, .rule = r};
  if (k->tail)
    k->tail->next = p;
  else
    k->head = p;
  k->tail = p;
  idmap_put(&fs->parked, (int64_t)(intptr_t)ticket, p);
}

/* Takes p out of its key's FIFO and frees it. */
static void unpark(flow_state *fs, flow_parked *p) {
  flow_key *k = p->key;
  flow_parked **pp = &k->head, *prev = NULL;
  for (; *pp; prev = *pp, pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      if (k->tail == p)
        k->tail = prev;
      break;
    }
  idmap_del(&fs->parked, (int64_t)(intptr_t)p->ticket);
  free(p);
}

static int flow_admit(duro_engine *e, void *state, const char *workflow,
                      const duro_workflow_limits *limits, const char *params,
                      duro_gate_ticket *ticket, void **hold) {
  (void)e;
  flow_state *fs = state;
  flow_rules *fr = rules_of(fs, workflow, limits);
  char *values[DURO_FLOW_MAX_RULES];
  values_of(fr, params, values);
  flow_key *keys[DURO_FLOW_MAX_RULES] = {0};
  size_t full = fr->n;
  for (size_t i = 0; i < fr->n; i++) {
    if (!values[i])
      continue; /* its params lack the key: this rule does not limit it */
    keys[i] = key_of(&fr->v[i], values[i]);
    if (full == fr->n && keys[i]->running >= fr->v[i].limit)
      full = i;
  }
  for (size_t i = 0; i < fr->n; i++)
    free(values[i]);
  if (full < fr->n) {
    /* keys made for it alone go again; the one it waits on stays */
    for (size_t i = 0; i < fr->n; i++)
      if (keys[i] && i != full)
        drop_if_idle(&fr->v[i], keys[i]);
    park(fs, &fr->v[full], keys[full], ticket);
    return 0;
  }
  flow_hold *h = xcalloc(1, sizeof *h);
  for (size_t i = 0; i < fr->n; i++)
    if (keys[i]) {
      keys[i]->running++;
      h->v[h->n].key = keys[i];
      h->v[h->n++].rule = &fr->v[i];
    }
  *hold = h;
  return 1;
}

static void flow_release(duro_engine *e, void *state, void *hold) {
  flow_state *fs = state;
  flow_hold *h = hold;
  for (size_t i = 0; h && i < h->n; i++) {
    flow_key *k = h->v[i].key;
    k->running--;
    flow_parked *next = k->head;
    if (next) {
      duro_gate_ticket *t = next->ticket;
      unpark(fs, next);
      engine_gate_ready_locked(e, t);
    }
    drop_if_idle(h->v[i].rule, k);
  }
  free(h);
}

static void flow_forget(duro_engine *e, void *state, duro_gate_ticket *ticket) {
  (void)e;
  flow_state *fs = state;
  flow_parked *p = idmap_get(&fs->parked, (int64_t)(intptr_t)ticket);
  if (!p)
    return;
  flow_key *k = p->key;
  flow_rule *r = p->rule;
  unpark(fs, p);
  drop_if_idle(r, k);
}

static void free_key(void *ctx, int64_t hash, void *val) {
  (void)ctx, (void)hash;
  for (flow_key *k = val, *next; k; k = next) {
    next = k->next;
    for (flow_parked *p = k->head, *pn; p; p = pn) {
      pn = p->next;
      free(p); /* its ticket is the engine's, let go already */
    }
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
    free(fr->workflow);
    free(fr);
  }
  strmap_free(&fs->workflows);
  idmap_free(&fs->parked);
  free(fs);
}

const duro_driver flow_driver = {
    .name = "flow",
    .create = flow_create,
    .admit = flow_admit,
    .release = flow_release,
    .forget = flow_forget,
    .free = flow_free,
};
