/* flow_rates.c — a rate rule exact across the hosts of a shared store
 * (journal_rates_take: a row a key in PostgreSQL, its theoretical
 * arrival time, which every host's starts advance).
 *
 * On a shared store no start of a rate rule's key is taken from this
 * host's own count: the activation parks in its key's backlog (flow.c's
 * admit), and the scheduler's pass (here, outside the engine's lock)
 * asks the store for as many starts as each key has waiters, every key
 * whose next start may have come in one round trip, and hands the
 * starts it got to the key's waiters in the backlog's order.  The key's
 * time as the store answered it says when to ask again; another host's
 * starts may have moved it on meanwhile, and then the store gives none
 * and says the later time.  A pass that comes late makes up at most a
 * hundredth of a period's starts, as on one host.  A store that cannot
 * be reached gives none: the waiters wait, and it is asked again in
 * RATES_RETRY_MS. */
#include <stdlib.h>
#include <string.h>

#include "flow_internal.h"
#include "journal.h"
#include "util.h"

#define RATES_RETRY_MS 50

/* Key k of rate rule r in the store: a hash of its workflow, its rule and
 * its value (the slots' hash, flow_slots.c, takes the same name). */
static int64_t rate_key(const flow_rule *r, const flow_key *k) {
  char *name = xasprintf("%s\x1f%u\x1f%s", r->workflow, r->index, k->value);
  int64_t h = map_hash_str(name);
  free(name);
  return h;
}

typedef struct rates_pass_ctx {
  flow_state *fs;
  waiting_key *keys; /* the keys asked for, busy until applied */
  journal_rates_job *jobs;
  size_t n;
  double now;
  int rc;
  int64_t next; /* engine ms: when a key's next start may come */
  size_t started;
} rates_pass_ctx;

static void lower(int64_t *next, double due) {
  int64_t at = (int64_t)due + ((double)(int64_t)due < due);
  if (at < *next)
    *next = at;
}

/* Under the lock: the keys with waiters whose next start may have come. */
static void collect(duro_engine *e, void *arg) {
  rates_pass_ctx *c = arg;
  flow_state *fs = c->fs;
  c->now = (double)engine_now(e);
  c->keys = xcalloc(fs->n_waiting ? fs->n_waiting : 1, sizeof *c->keys);
  c->jobs = xcalloc(fs->n_waiting ? fs->n_waiting : 1, sizeof *c->jobs);
  for (size_t w = 0; w < fs->n_waiting; w++) {
    flow_key *k = fs->waiting[w].key;
    flow_rule *r = fs->waiting[w].rule;
    if (k->busy || !k->backlog.n)
      continue;
    if (c->now < k->tat - r->tolerance_ms) {
      lower(&c->next, k->tat - r->tolerance_ms);
      continue;
    }
    const flow_parked *first = (const flow_parked *)backlog_next(&k->backlog);
    double catch_up = c->now - r->interval_ms * r->limit / 100;
    double at = first && first->since > catch_up ? first->since : catch_up;
    c->keys[c->n] = fs->waiting[w];
    c->jobs[c->n++] = (journal_rates_job){.key = rate_key(r, k),
                                          .interval_ms = r->interval_ms,
                                          .tolerance_ms = r->tolerance_ms,
                                          .at_ms = at,
                                          .want = (uint32_t)k->backlog.n};
    k->busy = 1;
  }
}

/* Under the lock: each key's starts handed to its waiters, its time as
 * the store said. */
static void apply(duro_engine *e, void *arg) {
  rates_pass_ctx *c = arg;
  flow_state *fs = c->fs;
  double now = (double)engine_now(e);
  for (size_t i = 0; i < c->n; i++) {
    flow_key *k = c->keys[i].key;
    flow_rule *r = c->keys[i].rule;
    k->busy = 0;
    if (c->rc) {
      lower(&c->next, now + RATES_RETRY_MS);
      continue;
    }
    k->tat = c->jobs[i].tat;
    /* starts beyond its waiters now (one terminated meanwhile) are lost:
     * fewer starts, never more */
    for (uint32_t g = 0; g < c->jobs[i].got && k->backlog.n; g++) {
      flow_grant_turn(fs, r, k);
      c->started++;
    }
    if (k->backlog.n)
      lower(&c->next, k->tat - r->tolerance_ms);
    flow_drop_if_idle(r, k, now);
  }
}

size_t flow_rates_pass(duro_engine *e, flow_state *fs, int64_t *next_ms) {
  rates_pass_ctx c = {.fs = fs, .next = INT64_MAX};
  engine_gate_run(e, collect, &c);
  if (c.n) {
    c.rc = journal_rates_take(engine_journal(e), c.now, c.jobs, c.n);
    engine_gate_run(e, apply, &c);
  }
  free(c.keys);
  free(c.jobs);
  if (c.next < *next_ms)
    *next_ms = c.next;
  return c.started;
}
