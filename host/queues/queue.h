/* queue.h — durable queues in the engine's journal (Cloudflare Queues'
 * model): producers send JSON messages, consumers pull them under a lease
 * and ack or retry each one.
 *
 * A queue is registered (from the config) on an open engine.  Every
 * message lives in the journal, so one acknowledged by send survives a
 * crash; a pulled message is invisible until its lease expires, then is
 * delivered again with attempts + 1.  A message retried after
 * max_retries + 1 attempts goes to the queue's dead-letter queue, or is
 * dropped (and counted) when it has none.  Time is the engine's clock.
 *
 * All functions return 0 or a negative DURO_E_* code; where an `err`
 * buffer is taken it receives a sentence naming the limit broken.  They
 * answer in structs (a message body is the JSON text sent, as data):
 * views/view_queue.h makes the JSON the HTTP routes send of them. */
#ifndef DURO_QUEUE_H
#define DURO_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "duro.h"
#include "engine.h"

/* Cloudflare's limits, in its decimal units: 128 KB and 256 KB. */
#define DURO_QUEUE_MAX_BODY 128000        /* bytes of one body */
#define DURO_QUEUE_MAX_BATCH 100          /* messages in one send */
#define DURO_QUEUE_MAX_BATCH_BYTES 256000 /* bodies of one send */
#define DURO_QUEUE_MAX_DELAY_MS (12LL * 3600 * 1000)
#define DURO_QUEUE_DEFAULT_VISIBILITY_MS 30000
#define DURO_QUEUE_DEFAULT_RETENTION_MS (4LL * 24 * 3600 * 1000)

/* max_retries of a queue no consumer consumes (a dead-letter queue that
 * is only pulled over HTTP): its messages are out of attempts already, and
 * a pull must not drop them. */
#define DURO_QUEUE_NO_RETRY_LIMIT INT32_MAX

typedef struct duro_queue_options {
  int32_t max_retries;     /* < 0 = 3 */
  int64_t retry_delay_ms;  /* a retry's delay when it gives none */
  const char *dead_letter; /* NULL = drop messages out of retries */
  int64_t retention_ms;    /* 0 = 4 days */
} duro_queue_options;

/* Registers queue `name` (copied, with the options; opt NULL = defaults).
 * Registering a name again replaces its options. */
int duro_queue_register(duro_engine *e, const char *name,
                        const duro_queue_options *opt);

/* 1 when the queue is registered. */
int duro_queue_exists(duro_engine *e, const char *name);

typedef struct duro_queue_send_req {
  const char *body; /* JSON text */
  int64_t delay_ms; /* 0..12 h before it can be pulled */
  /* its sender's W3C traceparent, or NULL (borrowed, as body is); an
   * invalid one is dropped */
  const char *traceparent;
} duro_queue_send_req;

/* Sends one message; *id (may be NULL) receives its id. */
int duro_queue_enqueue(duro_engine *e, const char *queue, const char *body,
                       int64_t delay_ms, int64_t *id, char *err, size_t errlen);

/* Sends up to 100 messages of at most 256,000 bytes together in one
 * commit, or none of them; ids[i] (ids may be NULL) receives message i's
 * id. */
int duro_queue_enqueue_batch(duro_engine *e, const char *queue,
                             const duro_queue_send_req *reqs, size_t n,
                             int64_t *ids, char *err, size_t errlen);

/* Producer bindings (a plugin's queues.producers): `binding` sends to
 * registered `queue`.  One namespace for the engine; bind before start. */
int duro_queue_bind(duro_engine *e, const char *binding, const char *queue);

/* A message as a pull, a peek or a redrive hands it out; the strings are
 * the list's. */
typedef struct duro_queue_message {
  int64_t id;
  char *lease_id;    /* a pull's: the lease to ack or retry; else NULL */
  uint32_t attempts; /* deliveries so far (a pull's: this one counted) */
  char *body;        /* the JSON text sent */
  int64_t sent_ms;
  int64_t visible_ms; /* when it is or becomes visible (a pull's: when its
                         lease ends; a redrive's: 0) */
  int leased;         /* a pull holds it now (1 in a pull's) */
  char *last_error;   /* the last retry's error (JSON text), NULL = none */
  int64_t new_id;     /* a redrive's: its id in the queue it went to */
  char *traceparent;  /* its sender's trace context, NULL = none (a pull's) */
} duro_queue_message;

typedef struct duro_queue_message_list {
  duro_queue_message *v;
  size_t n;
} duro_queue_message_list;

/* Frees the messages and empties the list. */
void duro_queue_message_list_free(duro_queue_message_list *l);

/* Leases up to batch_size (1..100) visible messages for visibility_ms
 * (1 ms..12 h; 0 = 30 s).  *out (caller frees; empty on an error): the
 * messages with their lease ids, oldest visible first. */
int duro_queue_pull_messages(duro_engine *e, const char *queue,
                             uint32_t batch_size, int64_t visibility_ms,
                             duro_queue_message_list *out, char *err,
                             size_t errlen);

/* Up to `limit` (1..100) messages of the queue, oldest sent first,
 * without leasing them: nothing about them changes.  *out (caller frees):
 * each with visible_ms and leased, and no lease id (a browser must not
 * ack another's lease). */
int duro_queue_peek_messages(duro_engine *e, const char *queue, uint32_t limit,
                             duro_queue_message_list *out, char *err,
                             size_t errlen);

/* The leases of one pull share a random token: lease id
 * "<token>-<seq>" for message seq, so the crash ledger can name a whole
 * batch in one field (consumer_push.c).  QUEUE_LEASE_PREFIX counts the NUL. */
#define QUEUE_LEASE_PREFIX 33
void queue_lease_prefix(char out[QUEUE_LEASE_PREFIX]);
/* duro_queue_pull_messages in the journal's rows, with the leases' token
 * `prefix` (NULL: a new one): *msgs (caller frees with
 * journal_messages_free) gets *n messages. */
struct journal_message;
int queue_lease(duro_engine *e, const char *queue, uint32_t batch_size,
                int64_t visibility_ms, const char *prefix,
                struct journal_message **msgs, size_t *n, char *err,
                size_t errlen);
/* The same for a push consumer with concurrency by key (key_pointer NULL:
 * none): oldest sent first, passing over the messages whose key has
 * key_limit in handlers or earlier ones waiting (store/queue_keys.h). */
int queue_lease_by_key(duro_engine *e, const char *queue, uint32_t batch_size,
                       int64_t visibility_ms, const char *prefix,
                       const char *key_pointer, uint32_t key_limit,
                       struct journal_message **msgs, size_t *n, char *err,
                       size_t errlen);

typedef struct duro_queue_retry {
  const char *lease_id;
  int64_t delay_ms;  /* < 0 = the queue's retry_delay */
  const char *error; /* why (JSON text kept as last_error), may be NULL */
} duro_queue_retry;

/* What a redrive did: the queue the messages went to, and each message
 * moved (id, new_id, body, sent_ms, last_error, and its attempts before
 * the move). */
typedef struct duro_queue_redrive_result {
  char *to;
  duro_queue_message_list moved;
} duro_queue_redrive_result;
void duro_queue_redrive_result_free(duro_queue_redrive_result *r);

/* Sends up to batch_size (1-100) of the oldest visible messages of
 * `queue` (a dead-letter queue) back to `to`, or, when `to` is NULL, to
 * the one queue whose consumer dead-letters into `queue`: each becomes a
 * new message of `to` with no attempts, and leaves `queue` in the same
 * commit.  Its attempts are not counted against `queue`'s retries.
 * *out: caller frees (empty on an error).  DURO_E_QUEUE_NOT_FOUND for an
 * unknown queue or target, DURO_E_INVALID_ARGUMENT when `to` is needed
 * (no queue or several dead-letter into `queue`) or is `queue`. */
int duro_queue_redrive_messages(duro_engine *e, const char *queue,
                                const char *to, uint32_t batch_size,
                                duro_queue_redrive_result *out, char *err,
                                size_t errlen);

/* A lease an ack or a retry named that holds no message: unknown, already
 * acked or retried, or expired. */
typedef struct duro_queue_lease_error {
  char *lease_id;
  int code;            /* DURO_E_LEASE_NOT_HELD */
  const char *message; /* the sentence saying why (static) */
} duro_queue_lease_error;

/* What an ack and retry commit did: the acks and retries in their order,
 * each counted by its outcome or listed in errors. */
typedef struct duro_queue_ack_result {
  int64_t acked, retried, dead_lettered, dropped;
  duro_queue_lease_error *errors;
  size_t n_errors;
} duro_queue_ack_result;
void duro_queue_ack_result_free(duro_queue_ack_result *r);

/* Acks (deletes) and retries leased messages in one commit.  *result:
 * caller frees (empty on an error); an error in it for each lease that is
 * unknown or expired. */
int duro_queue_settle(duro_engine *e, const char *queue,
                      const char *const *acks, size_t n_acks,
                      const duro_queue_retry *retries, size_t n_retries,
                      duro_queue_ack_result *result, char *err, size_t errlen);

/* The kind of engine-run consumer a queue has, with its one name table
 * (duro_queue_consumer_kind_name: "workflow", "handler"; NULL for
 * none). */
typedef enum duro_queue_consumer_kind {
  DURO_QUEUE_CONSUMER_NONE = 0,
  DURO_QUEUE_CONSUMER_WORKFLOW, /* duro_queue_consume_workflow */
  DURO_QUEUE_CONSUMER_HANDLER,  /* duro_queue_consume */
} duro_queue_consumer_kind;
const char *duro_queue_consumer_kind_name(duro_queue_consumer_kind k);

/* The settings of a queue's engine-run consumer, defaults applied. */
typedef struct duro_queue_consumer_settings {
  duro_queue_consumer_kind kind;
  char *workflow, *id_from; /* a workflow consumer's */
  uint32_t max_batch_size;
  /* a handler's: */
  int64_t max_batch_timeout_ms;
  uint32_t max_concurrency;
  int64_t visibility_timeout_ms;
  char *concurrency_key; /* a handler's concurrency by key: NULL = none */
  uint32_t concurrency_limit;
} duro_queue_consumer_settings;
void duro_queue_consumer_settings_free(duro_queue_consumer_settings *s);

/* One queue's counts and options.  lag_ms: how long the oldest ready
 * message has been waiting for a consumer since it became visible (0 when
 * none is ready; oldest_age_ms 0 when the queue is empty); dropped and
 * dead_lettered count messages out of retries since the database
 * began. */
typedef struct duro_queue_stat {
  char *name;
  int64_t ready, delayed, in_flight;
  int64_t oldest_age_ms, lag_ms;
  int64_t dropped, dead_lettered;
  /* ready messages waiting for their key's turn (a consumer with
   * concurrency by key; 0 without) */
  int64_t held;
  int32_t max_retries; /* DURO_QUEUE_NO_RETRY_LIMIT: no retry limit */
  int64_t retry_delay_ms;
  char *dead_letter_queue;               /* NULL: none */
  duro_queue_consumer_settings consumer; /* kind NONE: none */
} duro_queue_stat;

typedef struct duro_queue_stat_list {
  duro_queue_stat *v;
  size_t n;
} duro_queue_stat_list;
void duro_queue_stat_list_free(duro_queue_stat_list *l);

/* queue NULL: every registered queue, by name; else that queue alone
 * (DURO_E_QUEUE_NOT_FOUND when it is not registered).  *out: caller frees
 * (empty on an error). */
int duro_queue_stats_read(duro_engine *e, const char *queue,
                          duro_queue_stat_list *out);

/* Deletes messages older than their queue's retention, at most `max` of
 * them (0: no bound); *deleted (may be NULL) receives how many.  Returns
 * 1 when it stopped at `max` with more perhaps due, 0 when done, or a
 * negative DURO_E_* code.  The engine's retention sweep calls it once a
 * scheduler pass until it returns 0. */
int duro_queues_sweep(duro_engine *e, size_t max, size_t *deleted);

/* ---- consumers the engine runs itself (consumer*.c) --------------------- */

/* The no-code consumer: every message of `queue` creates one instance of
 * `workflow` whose id is the string or number at JSON pointer `id_from`
 * (RFC 6901) in the body and whose params are the body; the message is
 * acked in the same commit as the creation, so a message delivered or
 * sent twice finds the instance existing and is acked as a no-op.  A body
 * without a usable id is retried (then dead-lettered) with the reason.
 * Messages are leased max_batch_size (1..100; 0 = 10) at a time.  The
 * queue must be registered; a queue has one such consumer (registering
 * it again replaces it). */
int duro_queue_consume_workflow(duro_engine *e, const char *queue,
                                const char *workflow, const char *id_from,
                                uint32_t max_batch_size);

/* A push consumer: `handler` (a plugin's queue handler) gets the queue's
 * messages in batches of up to max_batch_size, or fewer once the first
 * visible message seen waited max_batch_timeout_ms; at most
 * max_concurrency batches run at once (on threads of their own when the
 * engine has workers, else inline in duro_queues_dispatch).  A batch is
 * leased for visibility_ms: a handler that dies leaves it leased, and it
 * comes back when the lease ends.  Marks and return code decide each
 * message's fate (duro.h, duro_queue_fn).  A handler on a thread that has
 * not returned after visibility_ms is abandoned (consumer_deadline.c): its
 * batch (leased up to a second longer for this) is settled as a failed
 * delivery, its slot freed, its late return discarded.  A queue has one
 * consumer: this replaces a workflow consumer of the queue, and the
 * reverse. */
typedef struct duro_queue_consumer_opts {
  uint32_t max_batch_size;      /* 1..100; 0 = 10 */
  int64_t max_batch_timeout_ms; /* 0 = deliver what is there */
  uint32_t max_concurrency;     /* 0 = 250 */
  int64_t visibility_ms;        /* 0 = 30 s */
  const char *plugin;           /* the handler's, named in crash reports */
  void *handler_ctx;            /* the handler's env->ctx (not owned) */
  /* The handler returns by itself at its deadline (a worker's stand-in
   * kills its process then): it is abandoned only if it is still in a
   * grace later, so its slot, freed by its return, is never handed to a
   * delivery into the process being killed. */
  int returns_at_deadline;
  /* Concurrency by key: at most concurrency_limit (>= 1) messages whose
   * bodies hold the same value at JSON pointer concurrency_key are in the
   * handler at once, and a message waits for the earlier ones of its key
   * (store/queue_keys.h).  NULL = no limit by key. */
  const char *concurrency_key;
  uint32_t concurrency_limit;
} duro_queue_consumer_opts;
int duro_queue_consume(duro_engine *e, const char *queue, duro_queue_fn handler,
                       const duro_queue_consumer_opts *opt);

/* Stops feeding the queue to its engine-run consumer (a new build without
 * a queue handler); batches in the handler finish.  DURO_E_QUEUE_NOT_FOUND
 * when it had none. */
int duro_queue_unconsume(duro_engine *e, const char *queue);

/* 1 while a batch runs inside handler fn: its plugin build must stay
 * loaded. */
int duro_queue_handler_running(duro_engine *e, duro_queue_fn fn);

/* Puts the queues' calls in the plugin API table (api.c assembles it):
 * duro_env_queue, the sends, and the batch calls below.  queue_api.c. */
void queue_api_fill(duro_api *t);

/* Leases and handles one batch of each engine-run consumer's visible
 * messages; returns how many messages it handled.  The scheduler thread
 * calls it (workers > 0); tests on the virtual clock call it inline. */
size_t duro_queues_dispatch(duro_engine *e);
/* The same; *next_ms (may be NULL) gets when a consumer has work next (a
 * batch timeout ending, a delayed or leased message becoming visible), in
 * the engine clock's ms, JOURNAL_NONE (INT64_MIN) when only a send or a
 * batch's end will make some. */
size_t queue_consumers_dispatch(duro_engine *e, int64_t *next_ms);

#endif
