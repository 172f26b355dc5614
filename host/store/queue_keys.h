/* queue_keys.h — a push consumer's concurrency by key
 * (queues.consumers[].concurrency): which of a queue's visible messages
 * may be leased now.
 *
 * A message's key is the value at a JSON pointer into its body, as its
 * JSON text.  At most `limit` messages of one key are in a handler at
 * once, and a message waits behind the earlier ones of its key (sent
 * order: sent_ms, then seq) that are visible or waiting out a retry's
 * delay, so that with limit 1 a key's messages go one at a time in the
 * order sent.  A body without the key (or null there, or not JSON) is not
 * limited.
 *
 * Both backends store each message's key in messages.key, computed by the
 * keyed lease that first meets the message (NULL until then; on
 * PostgreSQL not while it is in a handler, whose settling host must not
 * wait for the lease) for the pointer recorded in queue_key_pointers: a lease
 * under another pointer (a consumer's key configured, or changed by a reload)
 * first clears the queue's keys, so a stored key is always the recorded
 * pointer's.  A lease then reads keys, not bodies, and passes over the keys
 * already at their limit in the index (queue_keys_full), never reading their
 * backlog.
 *
 * Nothing here is state: both backends feed it the rows of one
 * transaction (a lease) or one read (the held count) and free it, so
 * what a host forgets when it dies is only what the journal says again. */
#ifndef DURO_QUEUE_KEYS_H
#define DURO_QUEUE_KEYS_H

#include <stddef.h>
#include <stdint.h>

/* The stored key of a message without one (not limited): no key's JSON
 * text is "null", since a null value is no key. */
#define QUEUE_KEY_NONE "null"

typedef struct queue_keys queue_keys;

/* `pointer` (RFC 6901) is copied; limit >= 1; crypt (borrowed, may be
 * NULL) opens the bodies stored encrypted (journal_crypt.h): one that
 * does not open has no key. */
struct journal_crypt;
queue_keys *queue_keys_new(const char *pointer, uint32_t limit,
                           const struct journal_crypt *crypt);
void queue_keys_free(queue_keys *k);

/* The key of message `seq`: `stored` (its messages.key) when not NULL,
 * else computed from `body` (QUEUE_KEY_NONE when it has none) and kept
 * as a fill for the caller to store (queue_keys_fill).  Valid until
 * queue_keys_free. */
const char *queue_keys_key(queue_keys *k, int64_t seq, const char *stored,
                           const char *body);

/* The keys computed so far (queue_keys_key), i from 0 to n - 1: 1 with
 * fill i's message and key, 0 past the last. */
int queue_keys_fill(const queue_keys *k, size_t i, int64_t *seq,
                    const char **key);

/* A message that is not visible but holds its key's place: leased (in a
 * handler: it counts against the limit, whatever its order) or waiting
 * out a retry's delay (it holds back the later ones of its key).  `key`
 * as queue_keys_key gives it. */
void queue_keys_ahead(queue_keys *k, const char *key, int64_t sent_ms,
                      int64_t seq, int leased);

/* The keys that have `limit` messages in handlers (fed by
 * queue_keys_ahead): none of their visible messages may be leased now.
 * A JSON array of their keys' texts, to be passed over in the walk
 * (malloc'ed; "[]" when none). */
char *queue_keys_full(const queue_keys *k);

/* The next visible message, the caller going in sent order: 1 when it may
 * be leased now, 0 when its key is at its limit (held back).  Either way
 * it holds its place ahead of the later ones of its key. */
int queue_keys_admit(queue_keys *k, const char *key, int64_t sent_ms,
                     int64_t seq);

/* Messages queue_keys_admit held back so far. */
int64_t queue_keys_held(const queue_keys *k);

#endif
