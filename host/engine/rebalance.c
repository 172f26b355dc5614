/* rebalance.c — this host's queued instances handed to idle hosts.
 *
 * An instance stays with the host that created it or took it over, so a
 * host that joins, or restarts, would get no share of work created
 * elsewhere.  So a host with a backlog looks, every REBALANCE_EVERY_MS,
 * at the counts the other live hosts left on their rows
 * (journal_hosts_idle; hosts_list.c says what they are), and hands each
 * whose own backlog is empty a share of its runnable FIFO: backlog / (idle
 * hosts + 1), at most REBALANCE_MAX a host a pass.
 *
 * Never on two hosts: only the owner moves an instance it holds, and only
 * one it holds idle.  The entries taken off the FIFO are marked
 * ENTRY_HANDOFF while the move commits: no activation begins on them
 * (they are on no FIFO), a control operation waits for them
 * (control_begin), an event's poke notes a rerun.  Those the store moved
 * (still queued, no control request: pg_handoff.c) are dropped here;
 * the others go back to the FIFO.  And every activation and control
 * operation reads its row's owner once it holds the instance (step.c,
 * control.c): one that found it mine keeps it (nothing moves an instance
 * held), one that acted on an owner read before a move finds the row
 * moved and does nothing (an activation) or asks the new owner (control).
 *
 * The receiver hears of it by a notice ({"h":[least rowid, count]}) and
 * reads the rows in as a backlog kept in the journal (engine_refill),
 * loading the builds they are pinned to first, as after a takeover; once
 * through them it renews its lease at once, so that its giver sees its
 * empty backlog soon.  A host given work is given more only after two
 * renewals of its own since. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "log.h"
#include "util.h"

#define REBALANCE_EVERY_MS 200
#define REBALANCE_MIN_BACKLOG 32 /* fewer queued: not worth a move */
#define REBALANCE_MAX 500

typedef struct idle_scan {
  duro_engine *e;
  int64_t to[REBALANCE_HOSTS], heartbeat_ms[REBALANCE_HOSTS];
  size_t n;
} idle_scan;

/* A host given work is asked again only once it renewed its lease twice
 * since (the first renewal may have been sent before it heard). */
static int gift_settled(duro_engine *e, int64_t host, int64_t heartbeat_ms) {
  engine_rebalance *rb = &e->rebalance;
  for (size_t i = 0; i < rb->n_gifts; i++) {
    if (rb->gifts[i].host != host)
      continue;
    if (heartbeat_ms != rb->gifts[i].heartbeat_ms) {
      rb->gifts[i].heartbeat_ms = heartbeat_ms;
      rb->gifts[i].renewals++;
    }
    if (rb->gifts[i].renewals < 2)
      return 0;
    rb->gifts[i] = rb->gifts[--rb->n_gifts];
    return 1;
  }
  return 1;
}

static void gift_note(duro_engine *e, int64_t host, int64_t heartbeat_ms) {
  engine_rebalance *rb = &e->rebalance;
  if (rb->n_gifts < REBALANCE_HOSTS)
    rb->gifts[rb->n_gifts++] = (engine_gift){host, heartbeat_ms, 0};
}

static void note_idle(void *ctx, const journal_host_row *row) {
  idle_scan *s = ctx;
  duro_host_counts c;
  if (s->n < REBALANCE_HOSTS && engine_host_counts_parse(row->counts, &c) &&
      c.backlog == 0 && gift_settled(s->e, row->id, row->heartbeat_ms)) {
    s->to[s->n] = row->id;
    s->heartbeat_ms[s->n++] = row->heartbeat_ms;
  }
}

static int rowid_cmp(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Takes up to `want` entries off the runnable FIFO's head (mu held), as
 * ENTRY_HANDOFF; one with a control request to apply or a rerun noted
 * stays, in its place, and so does one that holds or was promised what
 * this host shares out (a gate gave it its turn, a slot of its key, or a
 * workflow's concurrency counts it): handed away, that would never be
 * given back. */
static size_t take_queued_locked(duro_engine *e, entry **held, size_t want) {
  entry_fifo kept = {0};
  size_t n = 0;
  while (n < want && e->runnable.head) {
    entry *ent = fifo_pop(&e->runnable);
    if (ent->apply_control || ent->rerun || ent->gate_held ||
        ent->gate_granted || ent->counted) {
      fifo_push(&kept, ent);
      continue;
    }
    ent->state = ENTRY_HANDOFF;
    held[n++] = ent;
  }
  if (kept.head) { /* back at the head, in their order */
    kept.tail->next = e->runnable.head;
    e->runnable.head = kept.head;
    if (!e->runnable.tail)
      e->runnable.tail = kept.tail;
    e->runnable.n += kept.n;
  }
  return n;
}

/* Hands up to `want` queued instances to host `to`: how many moved. */
static size_t hand_to(duro_engine *e, int64_t to, size_t want) {
  entry **held = xmalloc(want * sizeof *held);
  int64_t *rowids = xmalloc(want * sizeof *rowids);
  int64_t *moved = xmalloc(want * sizeof *moved);
  pthread_mutex_lock(&e->mu);
  size_t n = e->stopping ? 0 : take_queued_locked(e, held, want);
  pthread_mutex_unlock(&e->mu);
  for (size_t i = 0; i < n; i++)
    rowids[i] = held[i]->rowid;
  size_t m = 0;
  if (n && journal_hand_off(e->j, rowids, n, to, moved, &m) != 0) {
    log_warn("handing queued instances to host %" PRId64 ": %s", to,
             journal_errmsg(e->j));
    m = 0;
  }
  qsort(moved, m, sizeof *moved, rowid_cmp);
  pthread_mutex_lock(&e->mu);
  for (size_t i = 0; i < n; i++) {
    if (bsearch(&held[i]->rowid, moved, m, sizeof *moved, rowid_cmp))
      entry_drop(e, held[i]); /* the other host's now */
    else
      runnable_push(e, held[i]);
  }
  pthread_cond_broadcast(&e->changed); /* a control operation waiting */
  pthread_mutex_unlock(&e->mu);
  free(held);
  free(rowids);
  free(moved);
  return m;
}

int64_t engine_rebalance_tick(duro_engine *e, int64_t mono) {
  engine_rebalance *rb = &e->rebalance;
  if (!journal_host(e->j))
    return INT64_MAX;
  if (__atomic_exchange_n(&rb->received, 0, __ATOMIC_ACQ_REL)) {
    rb->fed = 1;
    if (e->opt.on_takeover)
      e->opt.on_takeover(e->opt.ctx); /* the builds they are pinned to */
  }
  if (rb->fed) {
    /* Through what it was handed: its giver hears so at once (its
     * counts renewed now), not a third of a lease later. */
    pthread_mutex_lock(&e->mu);
    int empty = e->runnable.n + e->spilled == 0;
    pthread_mutex_unlock(&e->mu);
    if (empty) {
      rb->fed = 0;
      journal_renew_soon(e->j);
    }
  }
  if (mono < rb->next_ms)
    return rb->next_ms;
  rb->next_ms = mono + REBALANCE_EVERY_MS;
  pthread_mutex_lock(&e->mu);
  size_t backlog = e->stopping ? 0 : e->runnable.n;
  pthread_mutex_unlock(&e->mu);
  if (backlog < REBALANCE_MIN_BACKLOG)
    return rb->next_ms;
  idle_scan s = {.e = e};
  if (journal_hosts_idle(e->j, note_idle, &s) != 0) {
    log_warn("looking for idle hosts: %s", journal_errmsg(e->j));
    return rb->next_ms;
  }
  size_t share = backlog / (s.n + 1);
  if (share > REBALANCE_MAX)
    share = REBALANCE_MAX;
  for (size_t i = 0; i < s.n && share >= REBALANCE_MIN_BACKLOG / 2; i++) {
    size_t m = hand_to(e, s.to[i], share);
    if (m) {
      gift_note(e, s.to[i], s.heartbeat_ms[i]);
      log_info("handed %zu queued instance(s) to host %" PRId64
               ", which had none",
               m, s.to[i]);
    }
  }
  return rb->next_ms;
}

void engine_rebalance_received(duro_engine *e, int64_t least, int64_t n) {
  pthread_mutex_lock(&e->mu);
  if (least < e->spill_min)
    e->spill_min = least;
  e->spilled += (size_t)n;
  e->sched_kick = 1;
  pthread_cond_signal(&e->sched);
  pthread_mutex_unlock(&e->mu);
  __atomic_store_n(&e->rebalance.received, 1, __ATOMIC_RELEASE);
}
