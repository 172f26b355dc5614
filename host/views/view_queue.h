/* view_queue.h — the queues' answers as the JSON the HTTP routes send
 * (server/http/route_queues.c) and the tests read: each call is the typed
 * one of queue.h and the JSON built from its struct.  A message's body,
 * JSON text in the struct, is parsed into the answer (omitted when it is
 * not JSON).  Every *out is the caller's, NULL on an error. */
#ifndef DURO_VIEW_QUEUE_H
#define DURO_VIEW_QUEUE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "queue.h"

/* duro_queue_pull_messages: [{"id","lease_id","attempts","body",
 * "sent_ms","last_error"?}], oldest visible first. */
int duro_queue_pull(duro_engine *e, const char *queue, uint32_t batch_size,
                    int64_t visibility_ms, json_t **out, char *err,
                    size_t errlen);

/* duro_queue_peek_messages: [{"id","attempts","body","sent_ms",
 * "visible_ms","leased","last_error"?}] (no lease id). */
int duro_queue_peek(duro_engine *e, const char *queue, uint32_t limit,
                    json_t **out, char *err, size_t errlen);

/* duro_queue_redrive_messages: {"to", "moved": [{"id", "attempts",
 * "body", "sent_ms", "last_error"?, "new_id"}]}. */
int duro_queue_redrive(duro_engine *e, const char *queue, const char *to,
                       uint32_t batch_size, json_t **out, char *err,
                       size_t errlen);

/* duro_queue_settle: {"acked","retried","dead_lettered","dropped",
 * "errors": [{"lease_id","code","message"}]}. */
int duro_queue_ack(duro_engine *e, const char *queue, const char *const *acks,
                   size_t n_acks, const duro_queue_retry *retries,
                   size_t n_retries, json_t **result, char *err, size_t errlen);

/* duro_queue_stats_read: queue NULL: [{"name","ready","delayed",
 * "in_flight","oldest_age_ms","lag_ms","dropped","dead_lettered",
 * "max_retries","retry_delay_ms","dead_letter_queue"?,"consumer"?}] by
 * name; else that queue's object.  max_retries is null for a queue with
 * no retry limit; consumer is {"kind": "workflow", "workflow", "id_from",
 * "max_batch_size"} or {"kind": "handler", "max_batch_size",
 * "max_batch_timeout_ms", "max_concurrency", "visibility_timeout_ms"}. */
int duro_queue_stats(duro_engine *e, const char *queue, json_t **out);

#endif
