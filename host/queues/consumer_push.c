/* consumer_push.c — a push consumer's pass: whether a batch should go
 * (a full one, or the oldest message waited max_batch_timeout; a free
 * max_concurrency slot), the batch named in the crash ledger and leased,
 * and run on a thread of its own watched by its deadline (or inline
 * without workers). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "altstack.h"
#include "consumer_internal.h"
#include "core.h"
#include "log.h"

/* Says in the crash ledger which batch is about to be leased, before the
 * lease commits: if the engine dies from then on — the handler crashing
 * it, or anything else — the next engine retries the batch at once
 * instead of waiting out the lease (the thread that runs the handler
 * binds the slot, so a crash in it is laid on this batch).  NULL when
 * there is no ledger or every slot is taken: the lease covers it. */
static ledger_slot *batch_slot(duro_engine *e, const wf_consumer *c,
                               const char *prefix) {
  ledger *l = engine_ledger(e);
  ledger_slot *sl =
      l && engine_workers(e) ? ledger_claim(l, LEDGER_IDLE) : NULL;
  if (!sl)
    return NULL;
  ledger_copy(sl->workflow, sizeof sl->workflow, c->queue);
  ledger_copy(sl->plugin, sizeof sl->plugin, c->plugin);
  ledger_copy(sl->key, sizeof sl->key, prefix);
  ledger_copy(sl->driver, sizeof sl->driver, queue_driver.name);
  sl->count = 0;
  sl->started_ms = engine_now(e);
  ledger_set_state(sl, LEDGER_HANDLER);
  return sl;
}

static void live_remove_locked(struct queue_consumers *cs,
                               duro_message_batch *b) {
  for (size_t i = 0; i < cs->n_live; i++)
    if (cs->live[i] == b) {
      cs->live[i] = cs->live[--cs->n_live];
      return;
    }
}

static void *batch_thread(void *arg) {
  duro_message_batch *b = arg;
  duro_engine *e = b->e;
  thread_altstack();
  ledger_thread_bind(engine_ledger(e), b->slot);
  consumer_batch_run(b);
  struct queue_consumers *cs = queue_consumers_of(e);
  pthread_mutex_lock(&cs->mu);
  live_remove_locked(cs, b); /* the deadline keeps off it from now */
  pthread_mutex_unlock(&cs->mu);
  ledger_release(engine_ledger(e), b->slot);
  consumer_batch_free(b);
  engine_kick_scheduler(e); /* a slot is free: more may go now */
  pthread_mutex_lock(&cs->mu);
  cs->threads--;
  pthread_cond_broadcast(&cs->idle);
  pthread_mutex_unlock(&cs->mu);
  return NULL;
}

/* Whether a batch should go now: a full one is there, or the oldest
 * visible message has waited max_batch_timeout since it became visible
 * (a time the journal keeps, so the wait is exact and survives a
 * restart).  Then takes one of the consumer's max_concurrency slots.
 * Else *due gets when to look again (JOURNAL_NONE: when kicked).  The
 * handler comes with its context in *ctx. */
static duro_queue_fn batch_due(duro_engine *e, const wf_consumer *c,
                               int64_t *due, int64_t *next_visible,
                               void **ctx) {
  int64_t now = engine_now(e);
  journal_queue_ready_info r = {0, JOURNAL_NONE, JOURNAL_NONE};
  *due = JOURNAL_NONE;
  if (journal_queue_ready(engine_journal(e), c->queue, now, c->batch, &r)) {
    *due = now + 1000; /* storage trouble: look again in a second */
    return NULL;
  }
  *next_visible = r.next_visible_ms;
  struct queue_consumers *cs = queue_consumers_of(e);
  duro_queue_fn fn = NULL;
  pthread_mutex_lock(&cs->mu);
  for (size_t i = 0; i < cs->n; i++) {
    wf_consumer *q = &cs->v[i];
    if (strcmp(q->queue, c->queue) != 0)
      continue;
    int64_t full_at = r.ready
                          ? r.oldest_visible_ms + q->opt.max_batch_timeout_ms
                          : JOURNAL_NONE;
    int go = r.ready >= q->batch || (r.ready > 0 && now >= full_at);
    if (q->in_flight >= q->opt.max_concurrency)
      go = 0; /* a batch's end kicks the scheduler */
    else if (!go)
      *due = earlier(full_at, r.next_visible_ms);
    if (go && q->handler) {
      q->in_flight++;
      fn = q->handler; /* the current build's, counted under the lock */
      *ctx = q->handler_ctx;
      consumer_running_add_locked(cs, fn, 1);
    }
  }
  pthread_mutex_unlock(&cs->mu);
  return fn;
}

/* Runs the batch on a thread of its own, watched by its deadline. */
static void batch_start(duro_engine *e, duro_message_batch *b) {
  struct queue_consumers *cs = queue_consumers_of(e);
  pthread_mutex_lock(&cs->mu);
  cs->threads++;
  cs->live = xrealloc(cs->live, (cs->n_live + 1) * sizeof *cs->live);
  cs->live[cs->n_live++] = b;
  pthread_mutex_unlock(&cs->mu);
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, batch_thread, b) != 0)
    batch_thread(b); /* no thread: this one runs it */
  pthread_attr_destroy(&attr);
}

size_t consumer_dispatch_push(duro_engine *e, const wf_consumer *c,
                              int64_t *due) {
  void *ctx = NULL;
  int64_t next_visible = JOURNAL_NONE;
  duro_queue_fn fn = batch_due(e, c, due, &next_visible, &ctx);
  if (!fn)
    return 0;
  journal_message *msgs = NULL;
  char err[256], prefix[QUEUE_LEASE_PREFIX];
  size_t n = 0;
  queue_lease_prefix(prefix);
  ledger_slot *slot = batch_slot(e, c, prefix);
  int threaded = engine_workers(e) > 0;
  int64_t timeout = c->opt.visibility_ms ? c->opt.visibility_ms
                                         : DURO_QUEUE_DEFAULT_VISIBILITY_MS;
  /* Read before the lease is taken, which is held a margin longer on a
   * thread: the deadline, not the lease's end, settles a hung batch. */
  int64_t started = engine_mono_ms(e);
  int64_t lease =
      threaded
          ? timeout + (timeout < SETTLE_MARGIN_MS ? timeout : SETTLE_MARGIN_MS)
          : timeout;
  if (queue_lease_by_key(
          e, c->queue, c->batch,
          lease < DURO_QUEUE_MAX_DELAY_MS ? lease : DURO_QUEUE_MAX_DELAY_MS,
          prefix, c->key, c->opt.concurrency_limit, &msgs, &n, err, sizeof err))
    log_error("queue %s: leasing a batch: %s", c->queue, err);
  /* Messages held for their key's turn: a batch's end kicks the
   * scheduler, and a retry's delay ending is the next visible time. */
  if (c->key && n < c->batch)
    *due = earlier(*due, next_visible);
  if (n == 0) {
    journal_messages_free(msgs, n);
    ledger_release(engine_ledger(e), slot);
    consumer_batch_done(e, c->queue, fn, 1, 0);
    return 0;
  }
  if (slot) {
    slot->count = (uint32_t)n;
    snprintf(slot->what, sizeof slot->what,
             "queue handler (queue \"%s\", a batch of %zu)", c->queue, n);
  }
  duro_message_batch *b = consumer_batch_new(e, c, fn, ctx, prefix, msgs, n);
  b->slot = slot;
  b->started_ms = started;
  b->timeout_ms = timeout;
  b->deadline_ms = started + timeout;
  /* A handler that returns by itself at its deadline is given most of
   * the lease's margin (a busy machine may be late to run its kill), not
   * all: the abandonment still settles the batch before another could
   * lease its messages. */
  b->abandon_ms = b->deadline_ms +
                  (c->opt.returns_at_deadline ? (lease - timeout) * 3 / 4 : 0);
  if (threaded) {
    batch_start(e, b);
  } else {
    consumer_batch_run(b);
    consumer_batch_free(b);
  }
  return n;
}
