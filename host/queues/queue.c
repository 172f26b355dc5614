/* queue.c — durable queues: the registry of queues and their consumer
 * options, validation of what producers send, and the pull / ack / retry
 * cycle, all stored as messages rows of the engine's journal.
 *
 * The journal is the only state of a message: a lease is a column, its
 * expiry the message's visible_ms, so nothing here needs recovery after a
 * crash and an expired lease needs no timer (the message is simply
 * visible again).  Memory holds only the registry (names and options,
 * guarded by its mutex); even the count of messages dropped is a row,
 * written by the commit that drops them.
 * Invariant: a send is validated whole before anything is written, and a
 * batch is written in one commit, so it is stored entirely or not at all.
 * It lives beside the engine (core.h) because it writes the
 * engine's journal and reads the engine's clock.  It answers in queue.h's
 * structs; the JSON of them is views/view_queue.c's (a body is only
 * parsed here to refuse one that is not JSON). */
#include "queue.h"
#include "queue_driver.h"
#include "queue_internal.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core.h"
#include "error.h"
#include "trace_ids.h"
#include "util.h"

#define DEFAULT_MAX_RETRIES 3
#define EXPIRE_CHUNK 1000 /* messages deleted per sweep transaction */

typedef struct queue_reg {
  char *name;
  duro_queue_options opt; /* dead_letter owned */
} queue_reg;

struct queue_registry {
  pthread_mutex_t mu;
  queue_reg *v;
  size_t n;
  queue_producer **bindings; /* stable pointers: plugins hold them */
  size_t n_bindings;
};

static struct queue_registry *registry(duro_engine *e) {
  queue_state *s = queue_state_of(e);
  /* Created once and never replaced: a send reads it without a lock. */
  struct queue_registry *r = __atomic_load_n(&s->queues, __ATOMIC_ACQUIRE);
  if (r)
    return r;
  pthread_mutex_lock(&s->mu);
  if (!s->queues) {
    r = xcalloc(1, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    __atomic_store_n(&s->queues, r, __ATOMIC_RELEASE);
  }
  r = s->queues;
  pthread_mutex_unlock(&s->mu);
  return r;
}

static queue_reg *find_locked(struct queue_registry *r, const char *name) {
  for (size_t i = 0; i < r->n; i++)
    if (strcmp(r->v[i].name, name) == 0)
      return &r->v[i];
  return NULL;
}

void queue_registry_free(struct queue_registry *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->n; i++) {
    free(r->v[i].name);
    free((char *)r->v[i].opt.dead_letter);
  }
  free(r->v);
  for (size_t i = 0; i < r->n_bindings; i++) {
    free(r->bindings[i]->binding);
    free(r->bindings[i]);
  }
  free(r->bindings);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

int duro_queue_register(duro_engine *e, const char *name,
                        const duro_queue_options *opt) {
  /* names are copied into fixed buffers by the sweep and ack */
  if (!name || !*name || strlen(name) > 255 ||
      (opt && opt->dead_letter && strlen(opt->dead_letter) > 255))
    return DURO_E_INVALID_ARGUMENT;
  duro_queue_options o = opt ? *opt : (duro_queue_options){.max_retries = -1};
  if (o.max_retries < 0)
    o.max_retries = DEFAULT_MAX_RETRIES;
  if (o.retention_ms <= 0)
    o.retention_ms = DURO_QUEUE_DEFAULT_RETENTION_MS;
  if (o.retry_delay_ms < 0 || o.retry_delay_ms > DURO_QUEUE_MAX_DELAY_MS)
    return DURO_E_INVALID_ARGUMENT;
  o.dead_letter = o.dead_letter ? xstrdup(o.dead_letter) : NULL;
  struct queue_registry *r = registry(e);
  pthread_mutex_lock(&r->mu);
  queue_reg *q = find_locked(r, name);
  if (!q) {
    r->v = xrealloc(r->v, (r->n + 1) * sizeof *r->v);
    q = &r->v[r->n++];
    *q = (queue_reg){.name = xstrdup(name)};
  } else {
    free((char *)q->opt.dead_letter);
  }
  q->opt = o;
  pthread_mutex_unlock(&r->mu);
  return 0;
}

int duro_queue_bind(duro_engine *e, const char *binding, const char *queue) {
  struct queue_registry *r = registry(e);
  pthread_mutex_lock(&r->mu);
  queue_reg *q = queue ? find_locked(r, queue) : NULL;
  int rc = q && binding ? 0 : DURO_E_QUEUE_NOT_FOUND;
  for (size_t i = 0; rc == 0 && i < r->n_bindings; i++)
    if (!strcmp(r->bindings[i]->binding, binding)) {
      r->bindings[i]->queue = q->name;
      binding = NULL;
      break;
    }
  if (rc == 0 && binding) {
    queue_producer *p = xcalloc(1, sizeof *p);
    *p = (queue_producer){
        .engine = e, .binding = xstrdup(binding), .queue = q->name};
    r->bindings =
        xrealloc(r->bindings, (r->n_bindings + 1) * sizeof *r->bindings);
    r->bindings[r->n_bindings++] = p;
  }
  pthread_mutex_unlock(&r->mu);
  return rc;
}

const queue_producer *queue_producer_find(duro_engine *e, const char *binding) {
  struct queue_registry *r = registry(e);
  const queue_producer *p = NULL;
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; binding && i < r->n_bindings && !p; i++)
    if (!strcmp(r->bindings[i]->binding, binding))
      p = r->bindings[i];
  pthread_mutex_unlock(&r->mu);
  return p;
}

/* Copies the queue's options (dead_letter into dlq, when given).  Returns
 * DURO_E_QUEUE_NOT_FOUND for an unregistered name. */
static int queue_options(duro_engine *e, const char *name,
                         duro_queue_options *out, char *dlq, size_t dlqlen) {
  struct queue_registry *r = registry(e);
  pthread_mutex_lock(&r->mu);
  queue_reg *q = name ? find_locked(r, name) : NULL;
  if (q) {
    *out = q->opt;
    if (dlq)
      snprintf(dlq, dlqlen, "%s", q->opt.dead_letter ? q->opt.dead_letter : "");
    out->dead_letter = dlq && q->opt.dead_letter ? dlq : NULL;
  }
  pthread_mutex_unlock(&r->mu);
  return q ? 0 : DURO_E_QUEUE_NOT_FOUND;
}

int duro_queue_exists(duro_engine *e, const char *name) {
  duro_queue_options o;
  return queue_options(e, name, &o, NULL, 0) == 0;
}

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return rc;
}

static int not_found(char *err, size_t errlen, const char *queue) {
  return fail(err, errlen, DURO_E_QUEUE_NOT_FOUND, "no queue named '%s'",
              queue ? queue : "");
}

/* ---- send -------------------------------------------------------------- */

/* One message: what the limits say, in the words the producer needs. */
static int check_message(const duro_queue_send_req *m, size_t index, char *err,
                         size_t errlen) {
  char where[40] = "";
  if (index != SIZE_MAX)
    snprintf(where, sizeof where, "message %zu: ", index);
  if (!m->body)
    return fail(err, errlen, DURO_E_INVALID_MESSAGE, "%sno body", where);
  size_t len = strlen(m->body);
  if (len > DURO_QUEUE_MAX_BODY)
    return fail(err, errlen, DURO_E_MESSAGE_TOO_LARGE,
                "%s%sbody is %zu bytes, more than the %d-byte limit", where,
                *where ? "" : "message ", len, DURO_QUEUE_MAX_BODY);
  json_error_t jerr;
  json_t *v = json_loads(m->body, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
  if (!v)
    return fail(err, errlen, DURO_E_INVALID_MESSAGE,
                "%sbody is not valid JSON: %s", where, jerr.text);
  json_decref(v);
  if (m->delay_ms < 0 || m->delay_ms > DURO_QUEUE_MAX_DELAY_MS)
    return fail(err, errlen, DURO_E_INVALID_ARGUMENT,
                "%sdelay must be between 0 and 43200 seconds (12 hours)",
                where);
  return 0;
}

int queue_send_ops(duro_engine *e, const char *queue,
                   const duro_queue_send_req *reqs, size_t n, journal_batch *b,
                   char *err, size_t errlen) {
  duro_queue_options o;
  if (queue_options(e, queue, &o, NULL, 0) != 0)
    return not_found(err, errlen, queue);
  if (n == 0)
    return fail(err, errlen, DURO_E_INVALID_ARGUMENT, "no messages to send");
  if (n > DURO_QUEUE_MAX_BATCH)
    return fail(err, errlen, DURO_E_BATCH_TOO_LARGE,
                "%zu messages, over the limit of %d per batch", n,
                DURO_QUEUE_MAX_BATCH);
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    int rc = check_message(&reqs[i], n > 1 ? i : SIZE_MAX, err, errlen);
    if (rc)
      return rc;
    total += strlen(reqs[i].body);
  }
  if (total > DURO_QUEUE_MAX_BATCH_BYTES)
    return fail(err, errlen, DURO_E_BATCH_TOO_LARGE,
                "the batch's bodies are %zu bytes, more than the %d-byte "
                "limit",
                total, DURO_QUEUE_MAX_BATCH_BYTES);
  int64_t now = engine_now(e);
  for (size_t i = 0; i < n; i++) {
    journal_op *op = journal_batch_add(b, JOP_MESSAGE_INSERT);
    op->queue = queue;
    op->body = reqs[i].body;
    op->ts_ms = now;
    op->visible_ms = now + reqs[i].delay_ms;
    trace_parent tp; /* an invalid one is dropped, as the spec says */
    op->traceparent = traceparent_parse(reqs[i].traceparent, &tp)
                          ? reqs[i].traceparent
                          : NULL;
  }
  return 0;
}

int duro_queue_enqueue_batch(duro_engine *e, const char *queue,
                             const duro_queue_send_req *reqs, size_t n,
                             int64_t *ids, char *err, size_t errlen) {
  journal_batch b = {0};
  int rc = queue_send_ops(e, queue, reqs, n, &b, err, errlen);
  if (rc) {
    journal_batch_free(&b);
    return rc;
  }
  rc = journal_commit(engine_journal(e), &b);
  if (rc == 0 && queue_consumers_of(e))
    engine_kick_scheduler(e); /* an engine-run consumer may take it now */
  for (size_t i = 0; i < n && ids; i++)
    ids[i] = rc ? 0 : b.ops[i].out_rowid;
  journal_batch_free(&b);
  if (rc)
    return fail(err, errlen, rc, "%s", journal_errmsg(engine_journal(e)));
  return 0;
}

int duro_queue_enqueue(duro_engine *e, const char *queue, const char *body,
                       int64_t delay_ms, int64_t *id, char *err,
                       size_t errlen) {
  duro_queue_send_req one = {.body = body, .delay_ms = delay_ms};
  return duro_queue_enqueue_batch(e, queue, &one, 1, id, err, errlen);
}

/* ---- pull and ack -------------------------------------------------------- */

/* 128 random bits, hex: a lease id cannot be guessed, only handed out
 * (the seq after it says which message it holds). */
static void lease_id(char out[QUEUE_LEASE_PREFIX]) {
  unsigned char b[16];
  if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
    fprintf(stderr, "duro: getrandom failed\n");
    abort();
  }
  for (int i = 0; i < 16; i++)
    snprintf(out + 2 * i, 3, "%02x", b[i]);
}

void queue_lease_prefix(char out[QUEUE_LEASE_PREFIX]) { lease_id(out); }

void duro_queue_message_list_free(duro_queue_message_list *l) {
  for (size_t i = 0; l && i < l->n; i++) {
    free(l->v[i].lease_id);
    free(l->v[i].body);
    free(l->v[i].last_error);
    free(l->v[i].traceparent);
  }
  if (l) {
    free(l->v);
    *l = (duro_queue_message_list){0};
  }
}

/* The rows as the list's messages: their strings are taken (the rows
 * still need journal_messages_free), the lease ids only `with_lease`. */
static void messages_take(duro_queue_message_list *out, journal_message *m,
                          size_t n, int with_lease) {
  out->v = n ? xcalloc(n, sizeof *out->v) : NULL;
  out->n = n;
  for (size_t i = 0; i < n; i++) {
    out->v[i] = (duro_queue_message){.id = m[i].seq,
                                     .lease_id = with_lease ? m[i].lease : NULL,
                                     .attempts = m[i].attempts,
                                     .body = m[i].body,
                                     .sent_ms = m[i].sent_ms,
                                     .visible_ms = m[i].visible_ms,
                                     .leased = m[i].lease != NULL,
                                     .last_error = m[i].last_error,
                                     .traceparent = m[i].traceparent};
    if (with_lease)
      m[i].lease = NULL;
    m[i].body = m[i].last_error = m[i].traceparent = NULL;
  }
}

int duro_queue_pull_messages(duro_engine *e, const char *queue,
                             uint32_t batch_size, int64_t visibility_ms,
                             duro_queue_message_list *out, char *err,
                             size_t errlen) {
  journal_message *m = NULL;
  size_t n = 0;
  *out = (duro_queue_message_list){0};
  int rc = queue_lease(e, queue, batch_size, visibility_ms, NULL, &m, &n, err,
                       errlen);
  if (rc == 0)
    messages_take(out, m, n, 1);
  journal_messages_free(m, n);
  return rc;
}

int queue_lease(duro_engine *e, const char *queue, uint32_t batch_size,
                int64_t visibility_ms, const char *prefix,
                journal_message **msgs, size_t *n, char *err, size_t errlen) {
  return queue_lease_by_key(e, queue, batch_size, visibility_ms, prefix, NULL,
                            0, msgs, n, err, errlen);
}

int queue_lease_by_key(duro_engine *e, const char *queue, uint32_t batch_size,
                       int64_t visibility_ms, const char *prefix,
                       const char *key_pointer, uint32_t key_limit,
                       journal_message **msgs, size_t *n, char *err,
                       size_t errlen) {
  *msgs = NULL;
  *n = 0;
  duro_queue_options o;
  if (queue_options(e, queue, &o, NULL, 0) != 0)
    return not_found(err, errlen, queue);
  if (batch_size < 1 || batch_size > DURO_QUEUE_MAX_BATCH)
    return fail(err, errlen, DURO_E_INVALID_ARGUMENT,
                "batch_size must be between 1 and %d", DURO_QUEUE_MAX_BATCH);
  if (visibility_ms == 0)
    visibility_ms = DURO_QUEUE_DEFAULT_VISIBILITY_MS;
  if (visibility_ms < 0 || visibility_ms > DURO_QUEUE_MAX_DELAY_MS)
    return fail(err, errlen, DURO_E_INVALID_ARGUMENT,
                "the visibility timeout must be between 1 ms and 12 hours");
  char token[QUEUE_LEASE_PREFIX];
  if (!prefix)
    lease_id(token);
  int64_t now = engine_now(e);
  journal_batch b = {0};
  char dlq[256];
  queue_options(e, queue, &o, dlq, sizeof dlq);
  journal_op *op = journal_batch_add(&b, JOP_MESSAGE_LEASE);
  op->queue = queue;
  op->ts_ms = now;
  op->visible_ms = now + visibility_ms;
  op->lease_token = prefix ? prefix : token;
  op->n_leases = batch_size;
  op->max_attempts = (uint32_t)o.max_retries + 1;
  op->dead_letter_queue = *dlq ? dlq : NULL;
  op->key_pointer = key_pointer;
  op->key_limit = key_limit;
  int rc = journal_commit(engine_journal(e), &b);
  op = &b.ops[0];
  if (rc == 0) {
    *msgs = op->messages;
    *n = op->n_messages;
  } else {
    journal_messages_free(op->messages, op->n_messages);
  }
  journal_batch_free(&b);
  if (rc)
    return fail(err, errlen, rc, "%s", journal_errmsg(engine_journal(e)));
  return 0;
}

/* ---- peek ---------------------------------------------------------------- */

int duro_queue_peek_messages(duro_engine *e, const char *queue, uint32_t limit,
                             duro_queue_message_list *out, char *err,
                             size_t errlen) {
  *out = (duro_queue_message_list){0};
  if (!duro_queue_exists(e, queue))
    return not_found(err, errlen, queue);
  if (limit < 1 || limit > DURO_QUEUE_MAX_BATCH)
    return fail(err, errlen, DURO_E_INVALID_ARGUMENT,
                "limit must be between 1 and %d", DURO_QUEUE_MAX_BATCH);
  journal_message *m = NULL;
  size_t n = 0;
  int rc = journal_queue_peek(engine_journal(e), queue, engine_now(e), limit,
                              &m, &n);
  /* Not the lease id: that would let a browser ack another's lease. */
  if (rc == 0)
    messages_take(out, m, n, 0);
  journal_messages_free(m, n);
  if (rc)
    return fail(err, errlen, rc, "%s", journal_errmsg(engine_journal(e)));
  return 0;
}

/* The one queue whose consumer dead-letters into `dlq`, copied into `to`
 * (256 bytes).  DURO_E_INVALID_ARGUMENT when none or several do. */
static int redrive_source(duro_engine *e, const char *dlq, char *to, int *n) {
  struct queue_registry *r = registry(e);
  *n = 0;
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < r->n; i++)
    if (r->v[i].opt.dead_letter && !strcmp(r->v[i].opt.dead_letter, dlq) &&
        (*n)++ == 0)
      snprintf(to, 256, "%s", r->v[i].name);
  pthread_mutex_unlock(&r->mu);
  return *n == 1 ? 0 : DURO_E_INVALID_ARGUMENT;
}

void duro_queue_redrive_result_free(duro_queue_redrive_result *r) {
  if (!r)
    return;
  free(r->to);
  duro_queue_message_list_free(&r->moved);
  r->to = NULL;
}

int duro_queue_redrive_messages(duro_engine *e, const char *queue,
                                const char *to, uint32_t batch_size,
                                duro_queue_redrive_result *out, char *err,
                                size_t errlen) {
  *out = (duro_queue_redrive_result){0};
  char target[256];
  int n_sources;
  if (!duro_queue_exists(e, queue))
    return not_found(err, errlen, queue);
  if (to && !duro_queue_exists(e, to))
    return not_found(err, errlen, to);
  if (!to && redrive_source(e, queue, target, &n_sources) != 0)
    return fail(err, errlen, DURO_E_INVALID_ARGUMENT,
                "%d queues dead-letter into \"%s\": name the queue to "
                "send its messages to (\"to\")",
                n_sources, queue);
  if (!to)
    to = target;
  if (!strcmp(to, queue))
    return fail(err, errlen, DURO_E_INVALID_ARGUMENT,
                "a queue's messages cannot be sent back to itself");
  if (batch_size < 1 || batch_size > DURO_QUEUE_MAX_BATCH)
    return fail(err, errlen, DURO_E_INVALID_ARGUMENT,
                "batch_size must be between 1 and %d", DURO_QUEUE_MAX_BATCH);
  /* First a lease with no attempt limit, so that none of these messages,
   * spent by definition, is dropped or moved on by it; then the move, one
   * commit.  A crash between the two leaves them where they were. */
  char token[QUEUE_LEASE_PREFIX];
  lease_id(token);
  int64_t now = engine_now(e);
  journal_batch lease = {0};
  journal_op *op = journal_batch_add(&lease, JOP_MESSAGE_LEASE);
  op->queue = queue;
  op->ts_ms = now;
  op->visible_ms = now + DURO_QUEUE_DEFAULT_VISIBILITY_MS;
  op->lease_token = token;
  op->n_leases = batch_size;
  int rc = journal_commit(engine_journal(e), &lease);
  journal_message *m = lease.ops[0].messages;
  size_t n = lease.ops[0].n_messages;
  journal_batch move = {0};
  for (size_t i = 0; rc == 0 && i < n; i++) {
    op = journal_batch_add(&move, JOP_MESSAGE_INSERT);
    op->queue = to;
    op->body = m[i].body;
    op->ts_ms = now;
    op->visible_ms = now;
    op->traceparent = m[i].traceparent; /* its sender's trace goes along */
    op = journal_batch_add(&move, JOP_MESSAGE_ACK);
    op->queue = queue;
    op->lease = m[i].lease;
    op->ts_ms = now;
  }
  if (rc == 0 && n)
    rc = journal_commit(engine_journal(e), &move);
  if (rc == 0) {
    out->to = xstrdup(to);
    messages_take(&out->moved, m, n, 0);
    for (size_t i = 0; i < n; i++) {
      duro_queue_message *o = &out->moved.v[i];
      o->attempts--; /* the lease above is not a delivery */
      o->visible_ms = o->leased = 0;
      o->new_id = move.ops[2 * i].out_rowid;
    }
    if (n && queue_consumers_of(e))
      engine_kick_scheduler(e); /* an engine-run consumer may take them now */
  }
  journal_batch_free(&move);
  journal_messages_free(m, n);
  journal_batch_free(&lease);
  if (rc)
    return fail(err, errlen, rc, "%s", journal_errmsg(engine_journal(e)));
  return 0;
}

void duro_queue_ack_result_free(duro_queue_ack_result *r) {
  for (size_t i = 0; r && i < r->n_errors; i++)
    free(r->errors[i].lease_id);
  if (r) {
    free(r->errors);
    *r = (duro_queue_ack_result){0};
  }
}

/* The outcome of the ops; the retries follow the acks. */
static void ack_result(const journal_batch *b, size_t n_acks,
                       duro_queue_ack_result *r) {
  for (size_t i = 0; i < b->n; i++) {
    const journal_op *op = &b->ops[i];
    if (i < n_acks && op->out_rowid) {
      r->acked++;
    } else if (i >= n_acks && op->out_rowid == JOURNAL_RETRY_DELAYED) {
      r->retried++;
    } else if (i >= n_acks && op->out_rowid == JOURNAL_RETRY_DEAD_LETTERED) {
      r->dead_lettered++;
    } else if (i >= n_acks && op->out_rowid == JOURNAL_RETRY_DROPPED) {
      r->dropped++;
    } else {
      if (!r->errors)
        r->errors = xcalloc(b->n, sizeof *r->errors);
      r->errors[r->n_errors++] = (duro_queue_lease_error){
          .lease_id = xstrdup(op->lease),
          .code = DURO_E_LEASE_NOT_HELD,
          .message = "no message holds this lease: unknown, already acked "
                     "or retried, or expired"};
    }
  }
}

static int check_retries(const duro_queue_retry *retries, size_t n, char *err,
                         size_t errlen) {
  for (size_t i = 0; i < n; i++) {
    if (!retries[i].lease_id)
      return fail(err, errlen, DURO_E_INVALID_ARGUMENT,
                  "retry %zu: no lease_id", i);
    if (retries[i].delay_ms > DURO_QUEUE_MAX_DELAY_MS)
      return fail(err, errlen, DURO_E_INVALID_ARGUMENT,
                  "retry %zu: delay must be between 0 and 43200 seconds "
                  "(12 hours)",
                  i);
  }
  return 0;
}

int duro_queue_settle(duro_engine *e, const char *queue,
                      const char *const *acks, size_t n_acks,
                      const duro_queue_retry *retries, size_t n_retries,
                      duro_queue_ack_result *result, char *err, size_t errlen) {
  *result = (duro_queue_ack_result){0};
  duro_queue_options o;
  char dlq[256];
  if (queue_options(e, queue, &o, dlq, sizeof dlq) != 0)
    return not_found(err, errlen, queue);
  int rc = check_retries(retries, n_retries, err, errlen);
  for (size_t i = 0; i < n_acks && !rc; i++)
    if (!acks[i])
      rc =
          fail(err, errlen, DURO_E_INVALID_ARGUMENT, "ack %zu: no lease_id", i);
  if (rc)
    return rc;
  int64_t now = engine_now(e);
  journal_batch b = {0};
  for (size_t i = 0; i < n_acks; i++) {
    journal_op *op = journal_batch_add(&b, JOP_MESSAGE_ACK);
    op->queue = queue;
    op->lease = acks[i];
    op->ts_ms = now;
  }
  for (size_t i = 0; i < n_retries; i++) {
    const duro_queue_retry *r = &retries[i];
    journal_op *op = journal_batch_add(&b, JOP_MESSAGE_RETRY);
    op->queue = queue;
    op->lease = r->lease_id;
    op->ts_ms = now;
    op->visible_ms = now + (r->delay_ms < 0 ? o.retry_delay_ms : r->delay_ms);
    op->error = r->error;
    op->max_attempts = (uint32_t)o.max_retries + 1;
    op->dead_letter_queue = o.dead_letter;
  }
  rc = journal_commit(engine_journal(e), &b);
  if (rc == 0)
    ack_result(&b, n_acks, result);
  journal_batch_free(&b);
  if (rc)
    return fail(err, errlen, rc, "%s", journal_errmsg(engine_journal(e)));
  return 0;
}

/* ---- stats and retention ------------------------------------------------- */

void duro_queue_stat_list_free(duro_queue_stat_list *l) {
  for (size_t i = 0; l && i < l->n; i++) {
    free(l->v[i].name);
    free(l->v[i].dead_letter_queue);
    duro_queue_consumer_settings_free(&l->v[i].consumer);
  }
  if (l) {
    free(l->v);
    *l = (duro_queue_stat_list){0};
  }
}

typedef struct stats_ctx {
  duro_queue_stat_list *list; /* sorted by name */
  int64_t now;
} stats_ctx;

static int cmp_stat(const void *a, const void *b) {
  return strcmp(((const duro_queue_stat *)a)->name,
                ((const duro_queue_stat *)b)->name);
}

/* The registered queue's entry; NULL for messages of a queue no longer
 * declared. */
static duro_queue_stat *stat_of(stats_ctx *c, const char *queue) {
  duro_queue_stat key = {.name = (char *)queue};
  return c->list->n
             ? bsearch(&key, c->list->v, c->list->n, sizeof key, cmp_stat)
             : NULL;
}

static void stats_row(void *ctx, const char *queue,
                      const journal_queue_stats *st) {
  stats_ctx *c = ctx;
  duro_queue_stat *o = stat_of(c, queue);
  if (!o)
    return;
  o->ready = st->ready;
  o->delayed = st->delayed;
  o->in_flight = st->in_flight;
  if (st->oldest_sent_ms != JOURNAL_NONE)
    o->oldest_age_ms = c->now - st->oldest_sent_ms;
  if (st->oldest_ready_ms != JOURNAL_NONE)
    o->lag_ms = c->now - st->oldest_ready_ms;
}

static void counts_row(void *ctx, const char *queue, int64_t dropped,
                       int64_t dead_lettered) {
  stats_ctx *c = ctx;
  duro_queue_stat *o = stat_of(c, queue);
  if (!o)
    return;
  o->dropped = dropped;
  o->dead_lettered = dead_lettered;
}

/* Registered queues (or the one named), each with zero counts, by name. */
static void stats_skeleton(duro_engine *e, const char *queue,
                           duro_queue_stat_list *out) {
  struct queue_registry *r = registry(e);
  pthread_mutex_lock(&r->mu);
  out->v = xcalloc(r->n ? r->n : 1, sizeof *out->v);
  for (size_t i = 0; i < r->n; i++) {
    if (queue && strcmp(queue, r->v[i].name) != 0)
      continue;
    const duro_queue_options *o = &r->v[i].opt;
    out->v[out->n++] = (duro_queue_stat){
        .name = xstrdup(r->v[i].name),
        .max_retries = o->max_retries,
        .retry_delay_ms = o->retry_delay_ms,
        .dead_letter_queue = o->dead_letter ? xstrdup(o->dead_letter) : NULL};
  }
  pthread_mutex_unlock(&r->mu);
  /* The consumers have their own lock: not taken inside this one. */
  for (size_t i = 0; i < out->n; i++)
    queue_consumer_settings(e, out->v[i].name, &out->v[i].consumer);
  if (out->n > 1)
    qsort(out->v, out->n, sizeof *out->v, cmp_stat);
}

int duro_queue_stats_read(duro_engine *e, const char *queue,
                          duro_queue_stat_list *out) {
  *out = (duro_queue_stat_list){0};
  stats_skeleton(e, queue, out);
  if (queue && out->n == 0) {
    duro_queue_stat_list_free(out);
    return DURO_E_QUEUE_NOT_FOUND;
  }
  stats_ctx c = {out, engine_now(e)};
  int rc =
      journal_queue_stats_each(engine_journal(e), queue, c.now, stats_row, &c);
  if (rc == 0)
    rc = journal_queue_counts_each(engine_journal(e), counts_row, &c);
  /* Only a keyed consumer's queue has messages held: a walk of its
   * visible ones by the rule its leases follow. */
  for (size_t i = 0; rc == 0 && i < out->n; i++) {
    const duro_queue_consumer_settings *k = &out->v[i].consumer;
    if (k->concurrency_key && out->v[i].ready)
      rc = journal_queue_held(engine_journal(e), out->v[i].name, c.now,
                              k->concurrency_key, k->concurrency_limit,
                              &out->v[i].held);
  }
  if (rc)
    duro_queue_stat_list_free(out);
  return rc;
}

int duro_queues_sweep(duro_engine *e, size_t max, size_t *deleted) {
  size_t total = 0;
  int rc = 0, more_due = 0;
  struct queue_registry *r = registry(e);
  int64_t now = engine_now(e);
  for (size_t i = 0; rc == 0; i++) {
    char name[256];
    int64_t retention = 0;
    pthread_mutex_lock(&r->mu);
    int more = i < r->n;
    if (more) {
      snprintf(name, sizeof name, "%s", r->v[i].name);
      retention = r->v[i].opt.retention_ms;
    }
    pthread_mutex_unlock(&r->mu);
    if (!more)
      break;
    for (;;) { /* bounded transactions */
      size_t chunk = EXPIRE_CHUNK;
      if (max && max - total < chunk)
        chunk = max - total;
      journal_batch b = {0};
      journal_op *op = journal_batch_add(&b, JOP_MESSAGES_EXPIRE);
      op->queue = name;
      op->ts_ms = now - retention;
      op->from_seq = (int64_t)chunk;
      rc = journal_commit(engine_journal(e), &b);
      size_t n = rc ? 0 : (size_t)op->out_rowid;
      journal_batch_free(&b);
      total += n;
      if (rc || n < chunk)
        break;
      if (max && total >= max) {
        more_due = 1; /* this queue may hold more: the next call */
        break;
      }
    }
    if (more_due)
      break;
  }
  if (deleted)
    *deleted = total;
  return rc ? rc : more_due;
}
