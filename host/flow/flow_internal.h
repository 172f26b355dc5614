/* flow_internal.h — what the files of flow control share: a workflow's
 * rules as the driver counts them, each value of a rule's key and those
 * that wait for it, and the calls one file makes in another.
 *
 *   flow.c        the admission gate: admit, release, forget, a create
 *                 refused (on_excess: reject), the rates' turns
 *   backlog.c     the order of a key's waiters
 *   flow_slots.c  concurrency across the hosts of a shared store
 *   flow_rates.c  rates across the hosts of a shared store
 *   flow_show.c   what it shows: stats, why an instance waits, metrics
 *
 * Everything here is the engine's lock's (the gate's hooks run under it,
 * the rest through engine_gate_run). */
#ifndef DURO_FLOW_INTERNAL_H
#define DURO_FLOW_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "backlog.h"
#include "core.h"
#include "map.h"

/* An activation waiting for its key's turn. */
typedef struct flow_parked {
  backlog_waiter link; /* first: a waiter is its flow_parked */
  duro_gate_ticket *ticket;
  struct flow_key *key;
  struct flow_rule *rule;
  double since; /* engine ms it began to wait */
  int64_t rowid;
} flow_parked;

/* One value of a rule's key: how many of its activations run (a
 * concurrency rule) or when its next start may come (a rate rule), and
 * those that wait for their turn (backlog.h says in what order). */
typedef struct flow_key {
  struct flow_key *next; /* the next key of the same hash */
  char *value;           /* the key's value as compact JSON text */
  uint32_t running;
  uint32_t waiting; /* parked on it */
  double tat; /* a rate: its next start's time, engine ms, less the burst */
  backlog backlog;
  size_t waiting_at; /* a rate key with waiters: its place in `waiting` */
  /* A concurrency key across hosts (flow_slots.c): the numbers of the
   * slots this host holds, how many of them are promised to waiters
   * handed their turn and not admitted yet, the store's epoch they were
   * taken in; listed for the slots' pass, or in it (busy: not freed). */
  uint32_t *slots;
  uint32_t held, cap_slots, promised;
  uint64_t epoch;
  int listed, busy;
  int64_t retry_at; /* engine ms: when, short of slots, it asks again */
  /* The hosts' turns (flow_slots.c): whether this host marks the key as
   * short of its slots (and in which epoch), and whether, holding them
   * while another host marks it, it gives back the next that frees. */
  int marked, yield;
  uint64_t mark_epoch;
} flow_key;

typedef struct flow_rule {
  char *pointer; /* NULL: the whole workflow is one key */
  uint32_t limit;
  int rate;                     /* a rate rule, else a concurrency rule */
  uint32_t index;               /* its place among the workflow's rules */
  double interval_ms;           /* a rate: period / limit */
  double tolerance_ms;          /* a rate: (burst - 1) * interval */
  idmap keys;                   /* hash of value -> flow_key chain */
  const duro_flow_order *order; /* its workflow's (flow_rules.order) */
  const char *workflow;         /* its workflow's name (flow_rules') */
} flow_rule;

/* A workflow's rules, made from its limits at its first admission (they
 * change only with a restart): its concurrency rules, then its rates;
 * and the order their backlogs are served in (borrowed from the limits,
 * which the engine keeps while it runs). */
typedef struct flow_rules {
  char *workflow; /* the map's key */
  flow_rule *v;
  size_t n;
  const duro_flow_order *order;
  strmap weights; /* a fairness value -> (uintptr_t) its weight */
} flow_rules;
#define FLOW_MAX (2 * DURO_FLOW_MAX_RULES)

/* The slots an admitted activation holds, one a rule that limits it. */
typedef struct flow_hold {
  size_t n;
  struct {
    flow_key *key;
    flow_rule *rule;
  } v[DURO_FLOW_MAX_RULES];
} flow_hold;

/* A rate key with waiters, and its rule. */
typedef struct waiting_key {
  flow_key *key;
  flow_rule *rule;
} waiting_key;

typedef struct flow_state {
  duro_engine *e;
  strmap workflows; /* name -> flow_rules */
  idmap parked;     /* ticket -> flow_parked */
  idmap by_rowid;   /* an instance's rowid -> its flow_parked */
  /* rowid -> (uintptr_t) the rate rules whose start it was granted while
   * it waited, a bit a rule, until it is admitted */
  idmap granted;
  waiting_key *waiting; /* the rate keys with waiters */
  size_t n_waiting, cap_waiting;
  int64_t next_sweep; /* engine ms: idle rate keys forgotten then */
  int has_rates;      /* some workflow has a rate rule (atomic): the dispatch
                         takes the engine's lock only then */
  /* Across hosts (flow_slots.c): whether the store's hosts share slots,
   * and the concurrency keys that want slots or have spare ones. */
  int shared;
  waiting_key *slot_keys;
  size_t n_slot_keys, cap_slot_keys;
  int64_t slots_retry_at; /* engine ms: keys short of slots ask again */
} flow_state;

/* ---- flow.c ---- */

/* The rules of `workflow`, made at its first admission from its limits. */
flow_rules *flow_rules_of(flow_state *fs, const char *workflow,
                          const duro_workflow_limits *limits);
/* Forgets a key nothing runs, waits on, holds or lists. */
void flow_drop_if_idle(flow_rule *r, flow_key *k, double now);
/* Gives k's next waiter its turn on rule r (granted until admitted). */
void flow_grant_turn(flow_state *fs, const flow_rule *r, flow_key *k);
/* A place of concurrency key k came free: the next waiter gets it. */
void flow_hand_on(flow_state *fs, flow_rule *r, flow_key *k);

/* ---- flow_slots.c ---- */

/* Whether an activation of concurrency key k may run as far as the
 * hosts' shared slots go (1 on a store one host has to itself): a slot
 * this host holds is free, or, `mine`, promised to it. */
int flow_slots_room(const flow_state *fs, const flow_key *k, int mine);
/* k wants a slot more (it has waiters), or has one spare (none): it is
 * listed for the next pass. */
void flow_slots_list(flow_state *fs, flow_rule *r, flow_key *k);
/* Key k has waiters and no slot free for them: listed, and if a slot is
 * free that it gives back to another host, the pass made due. */
void flow_slots_want(flow_state *fs, flow_rule *r, flow_key *k);
/* The slots' pass, on the scheduler thread: slots taken for the keys
 * short of them (their waiters handed their turns), spare ones given
 * back; *next_ms lowered to when keys still short ask again. */
void flow_slots_pass(duro_engine *e, flow_state *fs, int64_t *next_ms);
/* Frees k's slot numbers (the store gives the slots back with the
 * host's session). */
void flow_slots_free(flow_key *k);

/* ---- flow_rates.c ---- */

/* The rates' pass across hosts, on the scheduler thread: the starts the
 * store allows taken for the keys with waiters and handed to them;
 * *next_ms lowered to when a key's next start may come.  Returns how
 * many it handed. */
size_t flow_rates_pass(duro_engine *e, flow_state *fs, int64_t *next_ms);

/* ---- flow_show.c ---- */

void flow_metrics(duro_engine *e, void *state, FILE *out);

#endif
