/* consumer.c — the consumers the engine runs itself: the no-code consumer
 * that turns each message of a queue into one workflow instance, and push
 * consumers that feed a plugin's queue handler batches of messages.
 *
 * It owns the list of consumers (guarded by its mutex, with the count of
 * batches each has in a handler) and the dispatch pass, run by the
 * scheduler thread or inline by tests, that leases batches for them.
 * Exactly one instance per job id comes from the journal, not from memory:
 * the instance insert and the message ack are one commit, so either both
 * happened or neither did, and a second delivery of the same job (a
 * duplicate send, an expired lease, a crash after the commit but before
 * anything else) finds the instance already there and only acks.  A
 * message whose body yields no usable id is retried through the queue's
 * ordinary retry, so max_retries and the dead-letter queue apply to it.
 * A push batch is leased before its handler runs and settled after it
 * returns, so a handler that dies leaves the lease to run out: delivery
 * is at least once.  The batch timer (max_batch_timeout) runs from the
 * time the oldest visible message became visible, which the journal
 * keeps: a restart does not start it over.
 * A handler on a thread of its own has its consumer's visibility timeout
 * to return, on the monotonic clock from just before the lease, which is
 * held a margin longer: the deadline, not the lease's end, settles a hung
 * batch, before another batch can lease its messages.  Past it the dispatch
 * pass gives up on the batch as the step watchdog gives up on a hung
 * attempt: the thread is left running in the plugin's code (nothing can
 * stop it safely), its messages are settled now — those it acked stay
 * acked, the rest are retried as a failed delivery, so the poisoned one
 * reaches the dead-letter queue after max_retries — its concurrency slot
 * is free for the next batch, and /healthz lists it until the thread
 * returns.  The batch's mutex is the handshake: the handler's return and
 * the deadline never both settle it, and a late return, its marks and
 * return code, changes nothing. */
#include <pthread.h>
#include <stdlib.h>

#include "consumer_internal.h"
#include "core.h"
#include "queue_internal.h"

void consumer_clear(wf_consumer *c) {
  free(c->queue);
  free(c->workflow);
  free(c->id_from);
  free(c->plugin);
  free(c->key);
}

uint32_t queue_consumers_wait(struct queue_consumers *c,
                              const struct timespec *until) {
  if (!c)
    return 0;
  pthread_mutex_lock(&c->mu);
  while (c->threads) {
    if (!until)
      pthread_cond_wait(&c->idle, &c->mu);
    else if (pthread_cond_timedwait(&c->idle, &c->mu, until) != 0)
      break;
  }
  uint32_t left = c->threads;
  pthread_mutex_unlock(&c->mu);
  return left;
}

void queue_consumers_free(struct queue_consumers *c) {
  if (!c)
    return;
  queue_consumers_wait(c, NULL); /* batches in a handler use the engine */
  pthread_cond_destroy(&c->idle);
  free(c->running);
  free(c->live);
  for (size_t i = 0; i < c->n; i++)
    consumer_clear(&c->v[i]);
  free(c->v);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* A copy of consumer i (the caller clears it), or 0 past the end: the
 * list is not held while a batch is handled. */
static int consumer_copy(struct queue_consumers *cs, size_t i,
                         wf_consumer *out) {
  pthread_mutex_lock(&cs->mu);
  int more = i < cs->n;
  if (more) {
    *out = cs->v[i];
    out->queue = xstrdup(cs->v[i].queue);
    out->workflow = cs->v[i].workflow ? xstrdup(cs->v[i].workflow) : NULL;
    out->id_from = cs->v[i].id_from ? xstrdup(cs->v[i].id_from) : NULL;
    out->plugin = cs->v[i].plugin ? xstrdup(cs->v[i].plugin) : NULL;
    out->key = cs->v[i].key ? xstrdup(cs->v[i].key) : NULL;
    out->opt.concurrency_key = out->key;
  }
  pthread_mutex_unlock(&cs->mu);
  return more;
}

size_t queue_consumers_dispatch(duro_engine *e, int64_t *next_ms) {
  struct queue_consumers *cs = queue_consumers_of(e);
  int64_t next = JOURNAL_NONE;
  /* First the deadlines: a slot a hung handler held is free for this
   * pass, and its messages are settled before their leases end. */
  int64_t deadline = cs ? consumer_handlers_watch(e, cs) : INT64_MAX;
  if (deadline != INT64_MAX)
    next = engine_now(e) + (deadline - engine_mono_ms(e));
  size_t handled = 0;
  wf_consumer c;
  for (size_t i = 0; cs && consumer_copy(cs, i, &c); i++) {
    int64_t due = JOURNAL_NONE;
    handled += c.workflow ? consumer_dispatch_workflow(e, &c, &due)
                          : consumer_dispatch_push(e, &c, &due);
    next = earlier(next, due);
    consumer_clear(&c);
  }
  /* and the deadlines of the batches this pass started: the next pass
   * must come by then even if nothing else wakes the scheduler */
  deadline = cs && handled ? consumer_handlers_watch(e, cs) : INT64_MAX;
  if (deadline != INT64_MAX)
    next = earlier(next, engine_now(e) + (deadline - engine_mono_ms(e)));
  if (next_ms)
    *next_ms = next;
  return handled;
}

size_t duro_queues_dispatch(duro_engine *e) {
  return queue_consumers_dispatch(e, NULL);
}
