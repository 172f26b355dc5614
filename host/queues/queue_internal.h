/* queue_internal.h — what the queues' own files share and the rest of
 * the host does not call: the transactional send's ops, producer
 * bindings as a plugin holds them, the batch side of the plugin API, a
 * stopped batch's release, hung handlers, a consumer's settings, and
 * the freeing of the queues' state.  queue.h is the queues' API. */
#ifndef DURO_QUEUE_INTERNAL_H
#define DURO_QUEUE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "queue.h"

/* Checks a send (queue, sizes, delays) and appends its inserts to `b`, to
 * be committed with whatever else `b` holds (a step's result: a
 * transactional send).  The strings must live until `b` is committed. */
struct journal_batch;
int queue_send_ops(duro_engine *e, const char *queue,
                   const duro_queue_send_req *reqs, size_t n,
                   struct journal_batch *b, char *err, size_t errlen);

/* What duro_env_queue hands a plugin: lives as long as the engine. */
typedef struct queue_producer {
  duro_engine *engine;
  char *binding;
  const char *queue;
} queue_producer;
const queue_producer *queue_producer_find(duro_engine *e, const char *binding);

/* The batch side of the plugin API (consumer_api.c; queue_api_fill puts them
 * in the table). */
const char *queue_api_batch_queue(const duro_message_batch *b);
size_t queue_api_batch_size(const duro_message_batch *b);
const duro_message *queue_api_batch_message(const duro_message_batch *b,
                                            size_t i);
int queue_api_message_ack(duro_message_batch *b, size_t i);
int queue_api_message_retry(duro_message_batch *b, size_t i, int64_t delay_ms);
int queue_api_ack_all(duro_message_batch *b);
int queue_api_retry_all(duro_message_batch *b, int64_t delay_ms);

/* The batch of lease token `prefix` stopped in its handler
 * (the engine died): each message still leased is retried after delay_ms
 * (< 0: the queue's retry_delay) with `error` (JSON text), and is
 * dead-lettered or dropped when out of retries. */
int queue_batch_release(duro_engine *e, const char *queue, const char *prefix,
                        int64_t delay_ms, const char *error);

/* The abandoned batches whose handler has not returned yet, for /healthz
 * (queue_driver.c's health hook): *out, malloc'ed with its strings (the
 * caller's: it hands them to duro_health_add_hung_handlers), NULL and
 * *n 0 when none. */
void queue_handlers_hung(duro_engine *e, duro_hung_handler **out, size_t *n);

/* The settings of the engine-run consumer of `queue` into *out (caller
 * frees): 1 when it has one, else 0 with kind DURO_QUEUE_CONSUMER_NONE. */
int queue_consumer_settings(duro_engine *e, const char *queue,
                            duro_queue_consumer_settings *out);

struct queue_consumers;
/* Waits until no batch is in a handler, or until `until` (CLOCK_MONOTONIC;
 * NULL: no limit); returns the batches still in one. */
struct timespec;
uint32_t queue_consumers_wait(struct queue_consumers *c,
                              const struct timespec *until);
void queue_consumers_free(struct queue_consumers *c);

/* Frees the registry (duro_engine_close). */
struct queue_registry;
void queue_registry_free(struct queue_registry *r);

#endif
