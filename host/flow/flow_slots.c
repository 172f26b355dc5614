/* flow_slots.c — a concurrency rule exact across the hosts of a shared
 * store (journal_slots_pass: PostgreSQL's advisory locks, which the
 * server gives back the moment a host's connection dies, kill -9
 * included).
 *
 * Each value of a concurrency rule's key has `limit` slots in the store.
 * A host runs an activation of that key only on a slot it holds, so no
 * more than `limit` run anywhere.  The gate (flow.c) counts as before,
 * and besides: an activation with no free slot of this host's parks in
 * the key's backlog as any other, and the key is listed; the scheduler's
 * pass (here, outside the engine's lock) takes slots for the listed keys
 * short of them and hands their waiters their turns in the backlog's
 * order, and gives back the slots a key no longer needs: every listed
 * key's takes and gives in one round trip (journal_slots_pass).  A slot that
 * comes free while waiters of its key wait on this host goes to the next
 * of them without a round trip.  A key short of slots because the other
 * hosts hold them all asks again every SLOTS_RETRY_MS.
 *
 * A slot handed to a waiter is promised to it until it is admitted, so
 * that a newcomer does not take it.  When the store's slots connection
 * was lost (its epoch moved on), every slot held before is gone with it:
 * the key counts none and takes them again.  Rates: flow_rates.c.
 *
 * The hosts take turns at a key.  A slot that frees goes to this host's
 * next waiter without a round trip, so a host holding every slot of a
 * key with a long backlog would serve it all before another host's
 * waiter of the key.  So a key short of slots marks itself short in the
 * store while it is, and a key holding all its slots with waiters of its
 * own asks every SLOTS_ASK_MS whether another host marks it: if one
 * does, the next slot that frees here is given back (yield), and this
 * host waits SLOTS_YIELD_MS before it takes again, in which the short
 * host, asking every SLOTS_RETRY_MS, takes it.  Hosts with waiters of one
 * key thus hand a slot back and forth, each its backlog in its own
 * order. */
#include <stdlib.h>
#include <string.h>

#include "flow_internal.h"
#include "journal.h"
#include "log.h"
#include "util.h"

#define SLOTS_RETRY_MS 50
#define SLOTS_ASK_MS 100
#define SLOTS_YIELD_MS 150

int flow_slots_room(const flow_state *fs, const flow_key *k, int mine) {
  if (!fs->shared)
    return 1;
  if (mine && k->promised)
    return k->running + k->promised <= k->held;
  /* a slot to give back is not handed to a waiter */
  return k->running + k->promised + (k->yield ? 1 : 0) < k->held;
}

void flow_slots_want(flow_state *fs, flow_rule *r, flow_key *k) {
  if (fs->shared && k->yield && k->running + k->promised < k->held) {
    k->retry_at = 0; /* the slot to give back is free: give it now */
    engine_gate_kick_locked(fs->e);
  }
  flow_slots_list(fs, r, k);
}

void flow_slots_list(flow_state *fs, flow_rule *r, flow_key *k) {
  if (!fs->shared || r->rate || k->listed)
    return;
  k->listed = 1;
  if (fs->n_slot_keys == fs->cap_slot_keys) {
    fs->cap_slot_keys = fs->cap_slot_keys ? 2 * fs->cap_slot_keys : 16;
    fs->slot_keys =
        xrealloc(fs->slot_keys, fs->cap_slot_keys * sizeof *fs->slot_keys);
  }
  fs->slot_keys[fs->n_slot_keys++] = (waiting_key){k, r};
  engine_gate_kick_locked(fs->e);
}

void flow_slots_free(flow_key *k) {
  free(k->slots);
  k->slots = NULL;
  k->held = k->cap_slots = 0;
}

/* The first of key k's slots in the store: a hash of its workflow, its
 * rule and its value, the low 20 bits clear for the slot's number. */
static int64_t slot_base(const flow_rule *r, const flow_key *k) {
  char *name = xasprintf("%s\x1f%u\x1f%s", r->workflow, r->index, k->value);
  int64_t h = map_hash_str(name);
  free(name);
  return (int64_t)((uint64_t)h & ~UINT64_C(0xFFFFF));
}

/* What the pass does for one key, outside the engine's lock. */
typedef struct slot_job {
  flow_key *key;
  flow_rule *rule;
  int64_t base;
  uint32_t *mine, *give, *got;
  size_t n_mine, n_give, n_got;
  uint32_t want;
  uint64_t epoch, pass_epoch, mark_epoch;
  int mark, marked, ask, contended; /* journal_slots_job's */
  int rc;
} slot_job;

typedef struct slots_pass_ctx {
  flow_state *fs;
  slot_job *jobs;
  size_t n_jobs;
  int64_t next; /* engine ms: when a key short of slots asks again */
} slots_pass_ctx;

/* Under the lock: the listed keys' jobs (each key busy until applied);
 * a key asking again later stays listed. */
static void collect(duro_engine *e, void *arg) {
  slots_pass_ctx *c = arg;
  flow_state *fs = c->fs;
  int64_t now = engine_now(e);
  c->jobs = xcalloc(fs->n_slot_keys ? fs->n_slot_keys : 1, sizeof *c->jobs);
  size_t kept = 0;
  for (size_t i = 0; i < fs->n_slot_keys; i++) {
    flow_key *k = fs->slot_keys[i].key;
    flow_rule *r = fs->slot_keys[i].rule;
    if (k->retry_at > now) {
      fs->slot_keys[kept++] = fs->slot_keys[i];
      if (k->retry_at < c->next)
        c->next = k->retry_at;
      continue;
    }
    k->listed = 0;
    uint32_t used = k->running + k->promised;
    uint32_t free_now = k->held > used ? k->held - used : 0;
    uint32_t want =
        k->backlog.n > free_now ? (uint32_t)k->backlog.n - free_now : 0;
    if (want > r->limit - k->held)
      want = r->limit - k->held;
    uint32_t spare = k->backlog.n ? 0 : free_now;
    if (k->backlog.n && k->yield && free_now) {
      spare = 1; /* another host's turn; this one's after a while */
      want = 0;
      k->yield = 0;
      k->retry_at = now + SLOTS_YIELD_MS;
    }
    /* short of slots and asking: marked; holding them all, with waiters:
     * does another host wait? */
    int mark = want > 0;
    int ask = k->backlog.n && k->held >= r->limit;
    if (!want && !spare && !ask && mark == k->marked) {
      flow_drop_if_idle(r, k, (double)now);
      continue;
    }
    slot_job *j = &c->jobs[c->n_jobs++];
    *j = (slot_job){.key = k,
                    .rule = r,
                    .base = slot_base(r, k),
                    .want = want,
                    .epoch = k->epoch,
                    .mark = mark,
                    .marked = k->marked,
                    .mark_epoch = k->mark_epoch,
                    .ask = ask};
    if (want) {
      j->mine = xmalloc((k->held ? k->held : 1) * sizeof *j->mine);
      if (k->held)
        memcpy(j->mine, k->slots, k->held * sizeof *j->mine);
      j->n_mine = k->held;
      j->got = xmalloc(want * sizeof *j->got);
    }
    if (spare) { /* out of the count now: nothing takes them meanwhile */
      j->give = xmalloc(spare * sizeof *j->give);
      k->held -= spare;
      memcpy(j->give, k->slots + k->held, spare * sizeof *j->give);
      j->n_give = spare;
    }
    k->busy = 1;
  }
  fs->n_slot_keys = kept;
}

/* Under the lock: what the store said, each key's waiters handed the
 * slots taken for them. */
static void apply(duro_engine *e, void *arg) {
  slots_pass_ctx *c = arg;
  flow_state *fs = c->fs;
  int64_t now = engine_now(e);
  for (size_t i = 0; i < c->n_jobs; i++) {
    slot_job *j = &c->jobs[i];
    flow_key *k = j->key;
    flow_rule *r = j->rule;
    k->busy = 0;
    if (j->rc == 0) {
      k->marked = j->marked;
      k->mark_epoch = j->pass_epoch;
      k->yield = j->contended && k->backlog.n && k->held >= r->limit;
    }
    if (j->want && j->rc == 0) {
      if (j->epoch != k->epoch) { /* the slots held before are gone */
        if (k->held)
          log_warn("flow control: the store's slots connection was lost; "
                   "%s's key %s takes its slots again",
                   r->workflow, k->value);
        k->held = 0;
        k->promised = 0;
        k->epoch = j->epoch;
      }
      if (k->held + j->n_got > k->cap_slots) {
        k->cap_slots = k->held + (uint32_t)j->n_got + 4;
        k->slots = xrealloc(k->slots, k->cap_slots * sizeof *k->slots);
      }
      if (j->n_got)
        memcpy(k->slots + k->held, j->got, j->n_got * sizeof *j->got);
      k->held += (uint32_t)j->n_got;
    }
    while (k->backlog.n && k->running < r->limit &&
           k->running + k->promised < k->held)
      flow_grant_turn(fs, r, k);
    if (k->backlog.n) { /* short: ask again soon; else, is another short? */
      int64_t at = now + (k->held < r->limit ? SLOTS_RETRY_MS : SLOTS_ASK_MS);
      if (k->retry_at < at) /* (not before a yield's wait is over) */
        k->retry_at = at;
      if (k->retry_at < c->next)
        c->next = k->retry_at;
      flow_slots_list(fs, r, k);
    } else if (k->held > k->running + k->promised || k->marked) {
      flow_slots_list(fs, r, k); /* spare again, or marked: next pass */
    }
    flow_drop_if_idle(r, k, (double)now);
  }
}

void flow_slots_pass(duro_engine *e, flow_state *fs, int64_t *next_ms) {
  slots_pass_ctx c = {.fs = fs, .next = INT64_MAX};
  engine_gate_run(e, collect, &c);
  /* every key's gives and takes in one round trip */
  journal_slots_job *sj = xcalloc(c.n_jobs ? c.n_jobs : 1, sizeof *sj);
  for (size_t k = 0; k < c.n_jobs; k++) {
    slot_job *j = &c.jobs[k];
    sj[k] = (journal_slots_job){.base = j->base,
                                .limit = j->rule->limit,
                                .want = j->want,
                                .mine = j->mine,
                                .n_mine = j->n_mine,
                                .give = j->give,
                                .n_give = j->n_give,
                                .give_epoch = j->epoch,
                                .got = j->got,
                                .mark = j->mark,
                                .marked = j->marked,
                                .mark_epoch = j->mark_epoch,
                                .ask = j->ask};
  }
  uint64_t epoch = 0;
  int rc = c.n_jobs
               ? journal_slots_pass(engine_journal(e), sj, c.n_jobs, &epoch)
               : 0;
  for (size_t k = 0; k < c.n_jobs; k++) {
    c.jobs[k].rc = rc;
    c.jobs[k].n_got = sj[k].n_got;
    c.jobs[k].marked = sj[k].marked;
    c.jobs[k].contended = sj[k].contended;
    c.jobs[k].pass_epoch = epoch;
    if (c.jobs[k].want)
      c.jobs[k].epoch = epoch;
  }
  free(sj);
  if (c.n_jobs)
    engine_gate_run(e, apply, &c);
  for (size_t i = 0; i < c.n_jobs; i++) {
    free(c.jobs[i].mine);
    free(c.jobs[i].give);
    free(c.jobs[i].got);
  }
  free(c.jobs);
  if (c.next < *next_ms)
    *next_ms = c.next;
}
