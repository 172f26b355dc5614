/* consumer_api.c — the plugin's side of a batch (duro.h, minor 2): its
 * queue, size and messages, and each message marked acked or retried
 * (refused once the batch was abandoned). */
#include <pthread.h>

#include "consumer_internal.h"
#include "queue_internal.h"

const char *queue_api_batch_queue(const duro_message_batch *b) {
  return b ? b->queue : NULL;
}

size_t queue_api_batch_size(const duro_message_batch *b) {
  return b ? b->n : 0;
}

const duro_message *queue_api_batch_message(const duro_message_batch *b,
                                            size_t i) {
  return b && i < b->n ? &b->msgs[i] : NULL;
}

/* Refused once the batch was abandoned: its leases are settled. */
static int mark(duro_message_batch *b, size_t i, int how, int64_t delay_ms) {
  if (!b || i >= b->n || delay_ms > DURO_QUEUE_MAX_DELAY_MS)
    return DURO_E_INVALID_ARGUMENT;
  pthread_mutex_lock(&b->mu);
  int rc = b->abandoned ? DURO_E_LEASE_NOT_HELD : 0;
  if (rc == 0) {
    b->mark[i] = how;
    b->delay[i] = delay_ms;
  }
  pthread_mutex_unlock(&b->mu);
  return rc;
}

int queue_api_message_ack(duro_message_batch *b, size_t i) {
  return mark(b, i, MARK_ACK, 0);
}

int queue_api_message_retry(duro_message_batch *b, size_t i, int64_t delay_ms) {
  return mark(b, i, MARK_RETRY, delay_ms);
}

int queue_api_ack_all(duro_message_batch *b) {
  int rc = b ? 0 : DURO_E_INVALID_ARGUMENT;
  for (size_t i = 0; b && i < b->n && !rc; i++)
    rc = mark(b, i, MARK_ACK, 0);
  return rc;
}

int queue_api_retry_all(duro_message_batch *b, int64_t delay_ms) {
  int rc = b ? 0 : DURO_E_INVALID_ARGUMENT;
  for (size_t i = 0; b && i < b->n && !rc; i++)
    rc = mark(b, i, MARK_RETRY, delay_ms);
  return rc;
}
