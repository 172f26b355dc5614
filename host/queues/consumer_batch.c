/* consumer_batch.c — a push consumer's batch: made from its leased
 * messages, run in its handler, and settled by the handler's marks and
 * return code in one commit (the verdict); the handlers counted while
 * batches are inside them, and a queue's max_concurrency slots. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "call_scope.h"
#include "consumer_internal.h"
#include "core.h"
#include "log.h"

/* Takes the messages' bodies and leases; frees the rest of `msgs`. */
duro_message_batch *consumer_batch_new(duro_engine *e, const wf_consumer *c,
                                       duro_queue_fn fn, void *ctx,
                                       const char *prefix,
                                       journal_message *msgs, size_t n) {
  duro_message_batch *b = xcalloc(1, sizeof *b);
  *b = (duro_message_batch){.e = e,
                            .queue = xstrdup(c->queue),
                            .plugin = c->plugin ? xstrdup(c->plugin) : NULL,
                            .handler = fn,
                            .handler_ctx = ctx,
                            .n = n,
                            .msgs = xcalloc(n, sizeof *b->msgs),
                            .leases = xcalloc(n, sizeof *b->leases),
                            .mark = xcalloc(n, sizeof *b->mark),
                            .delay = xcalloc(n, sizeof *b->delay)};
  snprintf(b->prefix, sizeof b->prefix, "%s", prefix);
  pthread_mutex_init(&b->mu, NULL);
  for (size_t i = 0; i < n; i++) {
    journal_message *m = &msgs[i];
    b->leases[i] = m->lease;
    b->msgs[i] = (duro_message){.size = sizeof(duro_message),
                                .id = m->seq,
                                .body = m->body,
                                .attempts = m->attempts,
                                .sent_ms = m->sent_ms,
                                .traceparent = m->traceparent};
    m->lease = m->body = m->traceparent = NULL;
  }
  journal_messages_free(msgs, n);
  return b;
}

void consumer_batch_free(duro_message_batch *b) {
  for (size_t i = 0; i < b->n; i++) {
    free((char *)b->msgs[i].body);
    free((char *)b->msgs[i].traceparent);
    free(b->leases[i]);
  }
  free(b->msgs);
  free(b->leases);
  free(b->mark);
  free(b->delay);
  free(b->queue);
  free(b->plugin);
  pthread_mutex_destroy(&b->mu);
  free(b);
}

/* The batch's messages by their marks, the unmarked ones acked or retried
 * with `why` (JSON text, copied) as `unmarked` says; with `copy` the
 * leases are copied, for a verdict that outlives the batch. */
verdict consumer_verdict_of(const duro_message_batch *b, int unmarked,
                            const char *why, int copy) {
  verdict v = {.e = b->e,
               .queue = xstrdup(b->queue),
               .n = b->n,
               .acks = xcalloc(b->n, sizeof *v.acks),
               .retries = xcalloc(b->n, sizeof *v.retries),
               .reason = xstrdup(why),
               .owned = copy ? xcalloc(b->n, sizeof *v.owned) : NULL};
  for (size_t i = 0; i < b->n; i++) {
    const char *lease =
        copy ? (v.owned[i] = xstrdup(b->leases[i])) : b->leases[i];
    int mark = b->mark[i] ? b->mark[i] : unmarked;
    if (mark == MARK_ACK)
      v.acks[v.na++] = lease;
    else
      v.retries[v.nr++] = (duro_queue_retry){
          lease, b->mark[i] ? b->delay[i] : -1,
          b->mark[i] ? "\"retried by the queue handler\"" : v.reason};
  }
  return v;
}

/* Commits the verdict (one commit) and frees it. */
void consumer_verdict_settle(verdict *v) {
  duro_queue_ack_result res;
  char err[256];
  if (duro_queue_settle(v->e, v->queue, v->acks, v->na, v->retries, v->nr, &res,
                        err, sizeof err))
    log_error("queue %s: settling a batch of %zu: %s", v->queue, v->n, err);
  else if (res.n_errors)
    /* Their leases ended first: they come back with the attempt counted. */
    log_warn("queue %s: settling a batch of %zu: %zu lease(s) had ended",
             v->queue, v->n, res.n_errors);
  duro_queue_ack_result_free(&res);
  for (size_t i = 0; v->owned && i < v->n; i++)
    free(v->owned[i]);
  free(v->owned);
  free(v->reason);
  free(v->retries);
  free(v->acks);
  free(v->queue);
}

/* Acks and retries the messages by their marks, the unmarked ones by the
 * handler's return code (retried with the reason its env gave, if any),
 * in one commit. */
static void batch_settle(duro_message_batch *b, int rc, const duro_env *env) {
  char why[80];
  snprintf(why, sizeof why, "\"the queue handler returned %d\"", rc);
  char *err = env->failure ? error_json(env->failure_name, env->failure) : NULL;
  verdict v = consumer_verdict_of(b, rc == 0 ? MARK_ACK : MARK_RETRY,
                                  err ? err : why, 0);
  consumer_verdict_settle(&v);
  free(err);
}

/* Counts a batch in or out of handler fn (cs->mu held). */
void consumer_running_add_locked(struct queue_consumers *cs, duro_queue_fn fn,
                                 int delta) {
  for (size_t i = 0; i < cs->n_running; i++)
    if (cs->running[i].fn == fn) {
      cs->running[i].n += (uint32_t)delta;
      return;
    }
  cs->running =
      xrealloc(cs->running, (cs->n_running + 1) * sizeof *cs->running);
  cs->running[cs->n_running++] = (struct running){fn, (uint32_t)delta};
}

int duro_queue_handler_running(duro_engine *e, duro_queue_fn fn) {
  struct queue_consumers *cs = queue_consumers_of(e);
  int busy = 0;
  if (!cs || !fn)
    return 0;
  pthread_mutex_lock(&cs->mu);
  for (size_t i = 0; i < cs->n_running; i++)
    busy |= cs->running[i].fn == fn && cs->running[i].n > 0;
  pthread_mutex_unlock(&cs->mu);
  return busy;
}

/* One of the queue's max_concurrency slots is free (cs->mu held). */
void consumer_slot_free_locked(struct queue_consumers *cs, const char *queue) {
  for (size_t i = 0; i < cs->n; i++)
    if (!strcmp(cs->v[i].queue, queue) && cs->v[i].in_flight)
      cs->v[i].in_flight--;
}

/* The batch left handler fn: its slot (unless the deadline freed it
 * already) is free for the next one. */
void consumer_batch_done(duro_engine *e, const char *queue, duro_queue_fn fn,
                         int slot, int was_hung) {
  struct queue_consumers *cs = queue_consumers_of(e);
  pthread_mutex_lock(&cs->mu);
  if (slot)
    consumer_slot_free_locked(cs, queue);
  if (was_hung && cs->hung && --cs->hung <= engine_max_hung(e))
    cs->hung_cap_logged = 0;
  consumer_running_add_locked(cs, fn, -1);
  pthread_mutex_unlock(&cs->mu);
}

/* The batch's deadline on CLOCK_MONOTONIC (the engine's clock may be a
 * test's virtual one): a stand-in for a worker's handler kills its
 * process past it. */
static int64_t batch_deadline_real(const duro_message_batch *b) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  return now + (b->deadline_ms - engine_mono_ms(b->e));
}

void consumer_batch_run(duro_message_batch *b) {
  duro_env env = {.engine = b->e,
                  .ctx = b->handler_ctx,
                  .deadline_ms = batch_deadline_real(b),
                  .timeout_ms = b->timeout_ms};
  call_scope scope; /* what the handler's JSON accessors return */
  call_scope_open(&scope);
  int rc = b->handler(b, &env);
  call_scope_close(&scope);
  pthread_mutex_lock(&b->mu);
  int abandoned = b->abandoned, slot_kept = b->slot_kept;
  b->settled = 1;
  pthread_mutex_unlock(&b->mu);
  if (abandoned) {
    /* Its messages were settled at the deadline: another batch may hold
     * them now. */
    log_write(DURO_LOG_WARN, NULL,
              "queue %s: an abandoned queue handler returned after %lld ms; "
              "its return code and marks are discarded",
              b->queue, (long long)(engine_mono_ms(b->e) - b->started_ms));
  } else {
    batch_settle(b, rc, &env);
  }
  free(env.failure);
  consumer_batch_done(b->e, b->queue, b->handler, !abandoned || slot_kept,
                      abandoned);
}
