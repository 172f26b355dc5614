/* queue_keys.h — a push consumer's concurrency by key
 * (queues.consumers[].concurrency): which of a queue's visible messages
 * may be leased now.
 *
 * A message's key is the value at a JSON pointer into its body.  At most
 * `limit` messages of one key are in a handler at once, and a message
 * waits behind the earlier ones of its key (sent order: sent_ms, then
 * seq) that are visible or waiting out a retry's delay, so that with
 * limit 1 a key's messages go one at a time in the order sent.  A body
 * without the key (or null there, or not JSON) is not limited.
 *
 * Nothing here is state: both backends feed it the rows of one
 * transaction (a lease) or one read (the held count) and free it, so
 * what a host forgets when it dies is only what the journal says again. */
#ifndef DURO_QUEUE_KEYS_H
#define DURO_QUEUE_KEYS_H

#include <stddef.h>
#include <stdint.h>

typedef struct queue_keys queue_keys;

/* `pointer` (RFC 6901) is copied; limit >= 1. */
queue_keys *queue_keys_new(const char *pointer, uint32_t limit);
void queue_keys_free(queue_keys *k);

/* A message that is not visible but holds its key's place: leased (in a
 * handler: it counts against the limit, whatever its order) or waiting
 * out a retry's delay (it holds back the later ones of its key). */
void queue_keys_ahead(queue_keys *k, const char *body, int64_t sent_ms,
                      int64_t seq, int leased);

/* The next visible message, the caller going in sent order: 1 when it may
 * be leased now, 0 when its key is at its limit (held back).  Either way
 * it holds its place ahead of the later ones of its key. */
int queue_keys_admit(queue_keys *k, const char *body, int64_t sent_ms,
                     int64_t seq);

/* Messages queue_keys_admit held back so far. */
int64_t queue_keys_held(const queue_keys *k);

#endif
