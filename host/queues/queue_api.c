/* queue_api.c — the queues' part of the plugin API table: a plugin's
 * producer bindings (duro_env_queue) and its sends, and the calls a queue
 * handler makes on its batch (consumer_api.c).
 *
 * A send is a side effect: inside a step callback it is checked at once
 * and its inserts join the attempt's commit (step.h), so the messages are
 * sent exactly once, with the step's result; in run() outside a callback
 * it is refused (it would repeat on every replay); anywhere else (a
 * plugin's init, a queue or cron handler) it is committed at once. */
#include "core.h"
#include "log.h"
#include "queue.h"
#include "queue_internal.h"
#include "step.h"

static duro_queue *api_env_queue(duro_env *env, const char *binding) {
  return (duro_queue *)queue_producer_find(env->engine, binding);
}

static int api_queue_send_traced(duro_queue *q, const char *const *json,
                                 size_t n, int64_t delay_ms,
                                 const char *traceparent) {
  const queue_producer *p = (const queue_producer *)q;
  if (!p)
    return DURO_E_QUEUE_NOT_FOUND;
  if (!json || n == 0 || n > DURO_QUEUE_MAX_BATCH)
    return n > DURO_QUEUE_MAX_BATCH ? DURO_E_BATCH_TOO_LARGE
                                    : DURO_E_INVALID_ARGUMENT;
  duro_attempt *at = step_current_attempt();
  const log_ctx *where = step_current_log();
  if (where && !at) {
    log_at(DURO_LOG_WARN, where,
           "queue send to \"%s\" outside a step callback refused: it "
           "would repeat on every replay",
           p->queue);
    return DURO_E_INVALID_ARGUMENT;
  }
  duro_queue_send_req reqs[DURO_QUEUE_MAX_BATCH];
  for (size_t i = 0; i < n; i++)
    reqs[i] = (duro_queue_send_req){
        .body = at ? attempt_strdup(at, json[i]) : json[i],
        .delay_ms = delay_ms,
        .traceparent =
            at && traceparent ? attempt_strdup(at, traceparent) : traceparent};
  char err[256];
  int rc = at ? queue_send_ops(p->engine, p->queue, reqs, n,
                               attempt_effects(at), err, sizeof err)
              : duro_queue_enqueue_batch(p->engine, p->queue, reqs, n, NULL,
                                         err, sizeof err);
  if (rc)
    log_at(DURO_LOG_WARN, where ? where : &(log_ctx){.source = "plugin"},
           "queue send refused: %s", err);
  return rc;
}

static int api_queue_send_batch(duro_queue *q, const char *const *json,
                                size_t n, int64_t delay_ms) {
  return api_queue_send_traced(q, json, n, delay_ms, NULL);
}

static int api_queue_send(duro_queue *q, const char *json, int64_t delay_ms) {
  return api_queue_send_batch(q, &json, 1, delay_ms);
}

void queue_api_fill(duro_api *t) {
  t->env_queue = api_env_queue;
  t->queue_send = api_queue_send;
  t->queue_send_batch = api_queue_send_batch;
  t->queue_send_traced = api_queue_send_traced;
  t->batch_queue = queue_api_batch_queue;
  t->batch_size = queue_api_batch_size;
  t->batch_message = queue_api_batch_message;
  t->message_ack = queue_api_message_ack;
  t->message_retry = queue_api_message_retry;
  t->ack_all = queue_api_ack_all;
  t->retry_all = queue_api_retry_all;
}
