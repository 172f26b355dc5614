/* engine_runnable.c — the entries and the runnable set: an entry taken
 * and dropped, the FIFOs, a queued entry pushed, popped and removed, the
 * concurrency slots of a workflow (admission, release), the backlog kept
 * as rows beyond max_runnable and refilled, the due wakes polled, an
 * instance poked by an event, and an activation's end (its entry
 * removed or requeued).
 *
 * The database is the truth.  In memory the engine keeps only `entries`
 * for instances that are runnable, running or under a control operation
 * (engine_internal.h states the invariant), and a FIFO of runnable ones.  A
 * waiting instance is a row with a wake time; poll_due() turns rows whose
 * time has come into runnable entries.  `polled_through` remembers how far
 * it has looked, so the next timer is the smallest wake above it. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "core.h"
#include "engine_internal.h"
#include "log.h"
#include "util.h"

#define DUE_BATCH 1024

/* ---- entries and the runnable FIFO (call with mu held) --------------------
 */

entry *entry_take(duro_engine *e, int64_t rowid, int state) {
  entry *ent = xcalloc(1, sizeof *ent);
  ent->rowid = rowid;
  ent->state = state;
  idmap_put(&e->entries, rowid, ent);
  return ent;
}

void entry_drop(duro_engine *e, entry *ent) {
  idmap_del(&e->entries, ent->rowid);
  free(ent->dispatch);
  free(ent);
  /* After a burst (a million instances created at once) the map and the
   * freed entries would keep the peak's memory: give it back once idle. */
  if (e->entries.len == 0 && e->entries.cap > 65536) {
    idmap_free(&e->entries);
    malloc_trim(0);
  }
  pthread_cond_broadcast(&e->changed);
}

void fifo_push(entry_fifo *q, entry *ent) {
  ent->next = NULL;
  if (q->tail)
    q->tail->next = ent;
  else
    q->head = ent;
  q->tail = ent;
  q->n++;
}

entry *fifo_pop(entry_fifo *q) {
  entry *ent = q->head;
  if (ent) {
    q->n--;
    q->head = ent->next;
    if (!q->head)
      q->tail = NULL;
    ent->next = NULL;
  }
  return ent;
}

void fifo_remove(entry_fifo *q, entry *ent) {
  entry **pp = &q->head, *prev = NULL;
  for (; *pp; prev = *pp, pp = &(*pp)->next)
    if (*pp == ent) {
      *pp = ent->next;
      if (q->tail == ent)
        q->tail = prev;
      ent->next = NULL;
      q->n--;
      return;
    }
}

void runnable_push(duro_engine *e, entry *ent) {
  ent->state = ENTRY_QUEUED;
  fifo_push(&e->runnable, ent);
  pthread_cond_signal(&e->work);
}

entry *runnable_pop(duro_engine *e) {
  entry *ent = fifo_pop(&e->runnable);
  /* Draining: the scheduler pulls in the backlog kept only as rows. */
  if (ent && e->spill_min != INT64_MAX &&
      e->runnable.n == e->max_runnable / 2) {
    e->sched_kick = 1;
    pthread_cond_signal(&e->sched);
  }
  return ent;
}

/* Takes a queued entry out of whichever FIFO holds it. */
void runnable_remove(duro_engine *e, entry *ent) {
  if (ent->state == ENTRY_RETRY) {
    fifo_remove(&e->retrying, ent);
  } else if (ent->deferred_in) {
    fifo_remove(&ent->deferred_in->deferred, ent);
    ent->deferred_in = NULL;
  } else if (ent->gate_parked) {
    engine_gate_forget_locked(e, ent);
  } else {
    fifo_remove(&e->runnable, ent);
  }
}

int engine_activation_admit(duro_engine *e, entry *ent, wf_reg *wf,
                            const char *params, int first) {
  if (!wf->limits.concurrency && !wf->gated) {
    /* no limit, nothing to count: keep mu out of the hot path */
    __atomic_store_n(&ent->admitted, 1, __ATOMIC_RELEASE);
    return 1;
  }
  int admitted = 1;
  pthread_mutex_lock(&e->mu);
  /* A pause or terminate that came while it started is applied now, not
   * parked with it until its turn (which a long run may never give). */
  int control = __atomic_load_n(&ent->terminate_req, __ATOMIC_ACQUIRE)
                    ? (__atomic_load_n(&ent->rollback_req, __ATOMIC_ACQUIRE)
                           ? JOURNAL_CONTROL_TERMINATE_ROLLBACK
                           : JOURNAL_CONTROL_TERMINATE)
                : __atomic_load_n(&ent->pause_req, __ATOMIC_ACQUIRE)
                    ? JOURNAL_CONTROL_PAUSE
                    : 0;
  int full = wf->limits.concurrency && wf->running >= wf->limits.concurrency;
  if (control && full) {
    ent->apply_control = control;
    runnable_push(e, ent);
    admitted = 0;
  } else if (full) {
    ent->state = ENTRY_QUEUED;
    ent->deferred_in = wf;
    fifo_push(&wf->deferred, ent);
    admitted = 0;
  } else if (wf->gated &&
             !engine_gate_admit_locked(e, wf, ent, params, first)) {
    ent->state = ENTRY_QUEUED; /* parked by the gate until its turn */
    admitted = 0;
    if (control) { /* not parked after all: the request is applied */
      engine_gate_forget_locked(e, ent);
      ent->apply_control = control;
      runnable_push(e, ent);
    }
  } else {
    if (wf->limits.concurrency) {
      wf->running++;
      ent->counted = wf;
    }
    __atomic_store_n(&ent->admitted, 1, __ATOMIC_RELEASE);
  }
  if (!admitted)
    pthread_cond_broadcast(&e->changed);
  pthread_mutex_unlock(&e->mu);
  return admitted;
}

/* Gives back the activation's concurrency slot and lets one parked
 * instance of the workflow run. */
void release_slot_locked(duro_engine *e, entry *ent) {
  engine_gate_release_locked(e, ent);
  wf_reg *wf = ent->counted;
  if (!wf)
    return;
  ent->counted = NULL;
  wf->running--;
  entry *next = fifo_pop(&wf->deferred);
  if (next) {
    next->deferred_in = NULL;
    runnable_push(e, next);
  }
}

/* Queues an instance that has no entry; an existing entry gets `rerun`. */
static void make_runnable_locked(duro_engine *e, int64_t rowid) {
  entry *ent = idmap_get(&e->entries, rowid);
  if (!ent)
    runnable_push(e, entry_take(e, rowid, ENTRY_QUEUED));
  else if (ent->state != ENTRY_QUEUED)
    ent->rerun = 1;
}

/* A new queued instance: runnable in memory while the FIFO holds fewer
 * than max_runnable, else a row the scheduler pulls in later, so a
 * burst of creations costs rows, not memory. */
void engine_queue_new_locked(duro_engine *e, int64_t rowid) {
  if (e->runnable.n >= e->max_runnable && !idmap_get(&e->entries, rowid)) {
    if (rowid < e->spill_min)
      e->spill_min = rowid;
    e->spilled++;
    return;
  }
  make_runnable_locked(e, rowid);
}

size_t engine_backlog(duro_engine *e) {
  pthread_mutex_lock(&e->mu);
  size_t n = e->runnable.n + e->spilled;
  pthread_mutex_unlock(&e->mu);
  return n;
}

/* The scheduler: queued rows from spill_min on, in rowid order, become
 * runnable until the FIFO is half full again. */
void engine_refill(duro_engine *e) {
  enum { PAGE = 1000 };
  int64_t rowids[PAGE];
  for (;;) {
    pthread_mutex_lock(&e->mu);
    int64_t from = e->spill_min;
    size_t room = e->runnable.n < e->max_runnable / 2
                      ? e->max_runnable / 2 - e->runnable.n
                      : 0;
    if (from == INT64_MAX || room == 0 || e->stopping) {
      pthread_mutex_unlock(&e->mu);
      return;
    }
    e->spill_min = INT64_MAX; /* refusals meanwhile set it again */
    pthread_mutex_unlock(&e->mu);
    size_t limit = room < PAGE ? room : PAGE, n = 0;
    int rc = journal_queued_from(e->j, from, limit, rowids, &n);
    pthread_mutex_lock(&e->mu);
    if (rc) {
      if (from < e->spill_min)
        e->spill_min = from; /* look again next pass */
      pthread_mutex_unlock(&e->mu);
      log_error("reading the backlog: %s", journal_errmsg(e->j));
      return;
    }
    for (size_t i = 0; i < n; i++)
      if (!idmap_get(&e->entries, rowids[i])) {
        runnable_push(e, entry_take(e, rowids[i], ENTRY_QUEUED));
        if (e->spilled)
          e->spilled--;
      }
    if (n == limit && rowids[n - 1] + 1 < e->spill_min)
      e->spill_min = rowids[n - 1] + 1; /* more may follow */
    else if (n < limit && e->spill_min == INT64_MAX)
      e->spilled = 0; /* the rows are all in: nothing left behind */
    pthread_cond_broadcast(&e->work);
    pthread_mutex_unlock(&e->mu);
    if (n < limit)
      return;
  }
}

/* ---- due wakes and events ------------------------------------------------ */

void duro_engine_poll_due(duro_engine *e) {
  int64_t now = duro_clock_now(e->clock);
  int64_t rowids[DUE_BATCH], wakes[DUE_BATCH];
  int64_t after;
  pthread_mutex_lock(&e->mu);
  /* The clock stepped back: what was looked at up to the old time is
   * looked at again as it comes due (queued ones are skipped below). */
  if (now < e->polled_through)
    e->polled_through = now;
  after = e->polled_through;
  pthread_mutex_unlock(&e->mu);
  for (;;) {
    size_t n = 0;
    if (journal_due(e->j, after, now, DUE_BATCH, rowids, wakes, &n) != 0) {
      /* Never move the watermark past wakes that were not read. */
      log_error("reading due wakes: %s", journal_errmsg(e->j));
      return;
    }
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < n; i++)
      if (!idmap_get(&e->entries, rowids[i]))
        runnable_push(e, entry_take(e, rowids[i], ENTRY_QUEUED));
    pthread_mutex_unlock(&e->mu);
    if (n < DUE_BATCH)
      break;
    /* Rows sharing the last wake time are looked at again; those already
     * queued are skipped above. */
    after = wakes[n - 1] - 1;
  }
  pthread_mutex_lock(&e->mu);
  if (now > e->polled_through)
    e->polled_through = now;
  pthread_mutex_unlock(&e->mu);
}

int64_t duro_engine_next_wake(duro_engine *e) {
  pthread_mutex_lock(&e->mu);
  int64_t after = e->polled_through;
  pthread_mutex_unlock(&e->mu);
  int64_t w;
  if (journal_next_wake(e->j, after, &w) != 0)
    return duro_clock_now(e->clock) + 1000; /* look again in a second */
  return w == JOURNAL_NONE ? INT64_MAX : w;
}

void engine_event_stored(duro_engine *e, const journal_op *wake) {
  metrics_add(&e->m.events_sent, 1);
  /* Another host runs it: the commit sent that host a notice. */
  if (wake->out_owner == journal_host(e->j))
    engine_instance_poke(e, wake->rowid, wake->out_rowid > 0);
}

void engine_batch_woke(duro_engine *e, const journal_batch *b) {
  for (size_t i = 0; i < b->n; i++)
    if (b->ops[i].kind == JOP_WAKE_IF_WAITING)
      engine_event_stored(e, &b->ops[i]);
}

void engine_instance_poke(duro_engine *e, int64_t rowid, int woke) {
  pthread_mutex_lock(&e->mu);
  entry *ent = idmap_get(&e->entries, rowid);
  if (ent) {
    if (ent->state != ENTRY_QUEUED)
      ent->rerun = 1;
  } else if (woke) {
    runnable_push(e, entry_take(e, rowid, ENTRY_QUEUED));
  }
  pthread_mutex_unlock(&e->mu);
}

void engine_instance_wake(duro_engine *e, int64_t rowid) {
  engine_instance_poke(e, rowid, 1);
}

/* ---- an activation ended ------------------------------------------------- */

void engine_activation_done(duro_engine *e, entry *ent, duro_status status,
                            int64_t wake_ms, int may_commit) {
  int notify = 0, control = 0;
  int64_t rowid = ent->rowid; /* ent may be gone below */
  pthread_mutex_lock(&e->mu);
  release_slot_locked(e, ent);
  int64_t now = duro_clock_now(e->clock);
  /* A due wake runs now.  After the clock stepped back the watermark is
   * reset rather than trusted (the poll looks again from now), so a sleep
   * still in the future is never run early, and never spins. */
  if (now < e->polled_through)
    e->polled_through = now;
  int64_t horizon = now;
  int ended = status == ENGINE_STATUS_NONE || duro_status_ended(status);
  /* A request that arrived after the activation's last step boundary. */
  if (!ended && ent->terminate_req && status != DURO_STATUS_TERMINATED)
    control = __atomic_load_n(&ent->rollback_req, __ATOMIC_ACQUIRE)
                  ? JOURNAL_CONTROL_TERMINATE_ROLLBACK
                  : JOURNAL_CONTROL_TERMINATE;
  else if (!ended && ent->pause_req && status != DURO_STATUS_PAUSED)
    control = JOURNAL_CONTROL_PAUSE;
  if (control && !may_commit) {
    ent->apply_control = control;
    runnable_push(e, ent);
    control = 0;
  } else if (control) {
    ent->state = ENTRY_CONTROL;
  } else if ((status == DURO_STATUS_QUEUED && !e->stopping) ||
             (status == DURO_STATUS_WAITING &&
              (ent->rerun ||
               (wake_ms != JOURNAL_NONE && wake_ms <= horizon)))) {
    ent->rerun = 0;
    runnable_push(e, ent);
    pthread_cond_broadcast(&e->changed);
  } else {
    notify = status == DURO_STATUS_WAITING;
    entry_drop(e, ent);
  }
  pthread_mutex_unlock(&e->mu);
  if (control)
    control_on_entry(e, ent, control);
  if (notify) {
    engine_kick_scheduler(e);
    if (e->opt.on_wake_change)
      e->opt.on_wake_change(e->opt.ctx);
  }
  if (duro_status_ended(status)) {
    engine_watch_fire(e, rowid, duro_status_name(status));
    if (e->opt.on_instance_end)
      e->opt.on_instance_end(e->opt.ctx, status);
  }
}
