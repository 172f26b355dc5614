/* pg_write_queue.c — the PostgreSQL backend's ops on queue messages: a
 * send, a lease of the visible ones (those out of attempts dropped or
 * dead-lettered), an ack, a retry, the expiry, and the counts of the
 * messages spent. */
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>

#include "journal_crypt.h"
#include "journal_seal.h"
#include "pg_internal.h"
#include "queue_keys.h"

static int count_spent(pg_store *pg, const char *queue, int dead_lettered,
                       int64_t n) {
  params p = {0};
  p_text(&p, queue);
  p_i64(&p, dead_lettered ? 0 : n);
  p_i64(&p, dead_lettered ? n : 0);
  return pg_write_queue(pg, ST_MESSAGES_DROPPED, &p);
}

/* Row i of a pick (seq, attempts, body, sent_ms, last_error,
 * traceparent) as a message leased by op. */
static void take_row(const PGresult *r, int i, const journal_op *op,
                     journal_message *m) {
  m->seq = get_i64(r, i, 0);
  m->attempts = (uint32_t)get_i64(r, i, 1) + 1;
  m->body = get_text(r, i, 2);
  m->sent_ms = get_i64(r, i, 3);
  m->last_error = get_text(r, i, 4);
  m->traceparent = get_text(r, i, 5);
  m->queue = xstrdup(op->queue);
  m->lease = xasprintf("%s-%lld", op->lease_token, (long long)m->seq);
  m->visible_ms = op->visible_ms;
}

static int spent_row(const PGresult *r, int i, const journal_op *op) {
  return op->max_attempts && get_i64(r, i, 1) >= (int64_t)op->max_attempts;
}

/* What a pick found: the messages it leases, those out of attempts, and
 * those whose body or last error is under a key op->crypt does not list
 * (kept for when it is: neither leased nor counted as an attempt). */
typedef struct picked {
  journal_message *v;
  size_t n;
  int64_t *spent;
  size_t n_spent;
  int64_t *parked;
  size_t n_parked;
} picked;

static int pick_full(const picked *k, const journal_op *op) {
  return k->n + k->n_spent + k->n_parked >= op->n_leases;
}

/* Whether row i of a pick waits for its key (then noted in k). */
static int parked_row(const PGresult *r, int i, const journal_op *op,
                      picked *k) {
  const char *body = get_str(r, i, 2), *last_error = get_str(r, i, 4);
  int body_ok = journal_crypt_listed(op->crypt, body);
  if (body_ok && journal_crypt_listed(op->crypt, last_error))
    return 0;
  k->parked[k->n_parked] = get_i64(r, i, 0);
  journal_note_parked(op->queue, k->parked[k->n_parked++],
                      body_ok ? last_error : body);
  return 1;
}

/* The unkeyed pick: the oldest visible, row-locked. */
static int pick(pg_store *pg, journal_op *op, picked *k) {
  params p = {0};
  p_text(&p, op->queue);
  p_i64(&p, op->ts_ms);
  p_i64(&p, (int64_t)op->n_leases);
  PGresult *r = pg_write_run(pg, ST_MESSAGE_PICK, &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r) && !pick_full(k, op); i++)
    if (parked_row(r, i, op, k))
      continue;
    else if (spent_row(r, i, op))
      k->spent[k->n_spent++] = get_i64(r, i, 0);
    else
      take_row(r, i, op, &k->v[k->n++]);
  PQclear(r);
  return 0;
}

/* Stores the keys the walks computed, in one statement. */
static int keys_fill(pg_store *pg, const journal_op *op,
                     const queue_keys *keys) {
  int64_t seq;
  const char *key;
  if (!queue_keys_fill(keys, 0, &seq, &key))
    return 0;
  json_t *fills = json_object();
  for (size_t i = 0; queue_keys_fill(keys, i, &seq, &key); i++) {
    char id[24];
    snprintf(id, sizeof id, "%lld", (long long)seq);
    json_object_set_new(fills, id, json_string(key));
  }
  char *text = json_dumps(fills, JSON_COMPACT);
  json_decref(fills);
  params p = {0};
  p_text(&p, text);
  p_text(&p, op->queue);
  p_i64(&p, op->ts_ms);
  int rc = text ? pg_write_queue(pg, ST_MESSAGE_KEY_FILL, &p) : 0;
  free(text);
  return rc;
}

/* A keyed consumer's pick (queue_keys.h): under the queue's lock, its
 * keys made the pointer's, what holds the keys' places, then pages of the
 * visible messages oldest sent first until the batch is full, without
 * those of the keys in handlers up to their limit, passing over those
 * whose key comes to its limit in the walk; the keys computed on the way
 * stored. */
static int pick_keyed(pg_store *pg, journal_op *op, picked *k) {
  params p = {0};
  p_text(&p, op->queue);
  PGresult *r = pg_write_run(pg, ST_MESSAGE_KEY_LOCK, &p);
  if (!r)
    return DURO_E_STORAGE;
  PQclear(r);
  p_text(&p, op->key_pointer);
  if (pg_write_queue(pg, ST_MESSAGE_KEY_POINTER, &p))
    return DURO_E_STORAGE;
  p.n = 1;
  p_i64(&p, op->ts_ms);
  p_i64(&p, 1); /* the keys are the pointer's */
  if (!(r = pg_write_run(pg, ST_MESSAGE_KEY_AHEAD, &p)))
    return DURO_E_STORAGE;
  queue_keys *keys = queue_keys_new(op->key_pointer, op->key_limit, op->crypt);
  pg_keys_ahead(r, keys);
  PQclear(r);
  char *full = queue_keys_full(keys);
  int64_t after_sent = INT64_MIN, after_seq = 0;
  int rows = PG_KEY_PAGE, rc = 0;
  while (rc == 0 && rows == PG_KEY_PAGE && !pick_full(k, op)) {
    params q = {0};
    p_text(&q, op->queue);
    p_i64(&q, op->ts_ms);
    p_i64(&q, after_sent);
    p_i64(&q, after_seq);
    p_i64(&q, PG_KEY_PAGE);
    p_i64(&q, 1);
    p_text(&q, full);
    if (!(r = pg_write_run(pg, ST_MESSAGE_KEY_PAGE, &q))) {
      rc = DURO_E_STORAGE;
      break;
    }
    rows = PQntuples(r);
    for (int i = 0; i < rows && !pick_full(k, op); i++) {
      after_seq = get_i64(r, i, 0);
      after_sent = get_i64(r, i, 3);
      if (parked_row(r, i, op, k))
        continue;
      if (spent_row(r, i, op)) {
        k->spent[k->n_spent++] = after_seq;
        continue;
      }
      const char *key =
          queue_keys_key(keys, after_seq, get_str(r, i, 6), get_str(r, i, 2));
      if (queue_keys_admit(keys, key, after_sent, after_seq))
        take_row(r, i, op, &k->v[k->n++]);
    }
    PQclear(r);
  }
  if (rc == 0)
    rc = keys_fill(pg, op, keys);
  free(full);
  queue_keys_free(keys);
  return rc;
}

static void message_clear(journal_message *m) {
  free(m->queue);
  free(m->body);
  free(m->lease);
  free(m->last_error);
  free(m->traceparent);
}

/* Leases the keyed pick's messages in one statement, keeping those no one
 * leased since they were read. */
static int lease_keyed(pg_store *pg, journal_op *op) {
  journal_message *v = op->messages;
  size_t n = op->n_messages;
  if (n == 0)
    return 0;
  size_t cap = n * 24 + 3, len = 0;
  char *ids = xcalloc(1, cap);
  ids[len++] = '{';
  for (size_t i = 0; i < n; i++)
    len += (size_t)snprintf(ids + len, cap - len, "%s%lld", i ? "," : "",
                            (long long)v[i].seq);
  snprintf(ids + len, cap - len, "}");
  params p = {0};
  p_text(&p, ids);
  p_text(&p, op->lease_token);
  p_i64(&p, op->visible_ms);
  p_text(&p, op->queue);
  p_i64(&p, op->ts_ms);
  PGresult *r = pg_write_run(pg, ST_MESSAGE_KEY_LEASE, &p);
  free(ids);
  if (!r)
    return DURO_E_STORAGE;
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    int held = 0;
    for (int k = 0; k < PQntuples(r) && !held; k++)
      held = get_i64(r, k, 0) == v[i].seq;
    if (held)
      v[kept++] = v[i];
    else
      message_clear(&v[i]);
  }
  PQclear(r);
  op->n_messages = kept;
  return 0;
}

/* As sqlite_write_queue.c: the visible messages are picked first, those
 * out of attempts go to the dead-letter queue (or are dropped), then the
 * others are leased. */
int pg_message_lease(pg_store *pg, journal_op *op) {
  size_t cap = op->n_leases ? op->n_leases : 1;
  picked k = {.v = xcalloc(cap, sizeof *k.v),
              .spent = xcalloc(cap, sizeof *k.spent),
              .parked = xcalloc(cap, sizeof *k.parked)};
  journal_message *v = k.v;
  op->messages = v;
  int rc = op->key_pointer ? pick_keyed(pg, op, &k) : pick(pg, op, &k);
  size_t n = k.n, n_spent = k.n_spent;
  int64_t *spent = k.spent;
  op->n_messages = n;
  for (size_t i = 0; i < k.n_parked && rc == 0; i++) {
    params q = {0}; /* the same queue, later */
    p_i64(&q, k.parked[i]);
    p_text(&q, op->queue);
    p_i64(&q, op->ts_ms + JOURNAL_PARKED_MS);
    p_text(&q, NULL); /* its last error kept */
    rc = pg_write_queue(pg, ST_MESSAGE_MOVE, &q);
  }
  free(k.parked);
  op->out_rowid = (int64_t)n_spent; /* dead-lettered or dropped */
  for (size_t i = 0; i < n_spent && rc == 0; i++) {
    params q = {0};
    p_i64(&q, spent[i]);
    if (op->dead_letter_queue) {
      p_text(&q, op->dead_letter_queue);
      p_i64(&q, op->ts_ms);
      p_text(&q, "{\"name\":\"queue.lease_expired\",\"message\":"
                 "\"delivered max_retries + 1 times, never acked\"}");
    }
    rc = pg_write_queue(
        pg, op->dead_letter_queue ? ST_MESSAGE_MOVE : ST_MESSAGE_DELETE, &q);
  }
  if (rc == 0 && n_spent)
    rc = count_spent(pg, op->queue, op->dead_letter_queue != NULL,
                     (int64_t)n_spent);
  free(spent);
  if (rc == 0 && op->key_pointer)
    return lease_keyed(pg, op);
  for (size_t i = 0; i < n && rc == 0; i++) {
    params q = {0};
    p_i64(&q, v[i].seq);
    p_text(&q, v[i].lease);
    p_i64(&q, op->visible_ms);
    rc = pg_write_queue(pg, ST_MESSAGE_LEASE, &q);
  }
  return rc;
}

int pg_message_retry(pg_store *pg, journal_op *op) {
  params p = {0};
  p_text(&p, op->lease);
  p_text(&p, op->queue);
  p_i64(&p, op->ts_ms);
  p_i64(&p, journal_lease_seq(op->lease));
  PGresult *r = pg_write_run(pg, ST_MESSAGE_HELD, &p);
  if (!r)
    return DURO_E_STORAGE;
  if (PQntuples(r) == 0) {
    PQclear(r);
    op->out_rowid = JOURNAL_RETRY_NOT_HELD;
    return 0;
  }
  int64_t seq = get_i64(r, 0, 0), attempts = get_i64(r, 0, 1);
  PQclear(r);
  int spent = attempts >= (int64_t)op->max_attempts;
  params q = {0};
  p_i64(&q, seq);
  if (spent && !op->dead_letter_queue) {
    op->out_rowid = JOURNAL_RETRY_DROPPED;
    int rc = pg_write_queue(pg, ST_MESSAGE_DELETE, &q);
    return rc ? rc : count_spent(pg, op->queue, 0, 1);
  }
  p_text(&q, spent ? op->dead_letter_queue : op->queue);
  p_i64(&q, spent ? op->ts_ms : op->visible_ms);
  p_text(&q, op->error);
  op->out_rowid = spent ? JOURNAL_RETRY_DEAD_LETTERED : JOURNAL_RETRY_DELAYED;
  int rc = pg_write_queue(pg, ST_MESSAGE_MOVE, &q);
  return rc || !spent ? rc : count_spent(pg, op->queue, 1, 1);
}

/* A queue's ops (a lease and a retry have their own functions). */
int pg_message_apply(pg_store *pg, journal_op *op) {
  params p = {0};
  int inserted = 0;
  switch (op->kind) {
  case JOP_MESSAGE_INSERT:
    p_text(&p, op->queue);
    p_text(&p, op->body);
    p_i64(&p, op->ts_ms);
    p_i64(&p, op->visible_ms);
    p_text(&p, op->traceparent);
    return pg_write_returning(pg, ST_MESSAGE_INSERT, &p, &inserted,
                              &op->out_rowid);
  case JOP_MESSAGE_ACK:
    p_text(&p, op->lease);
    p_text(&p, op->queue);
    p_i64(&p, op->ts_ms);
    p_i64(&p, journal_lease_seq(op->lease));
    return pg_write_changes(pg, ST_MESSAGE_ACK, &p, op);
  case JOP_MESSAGES_EXPIRE:
    p_text(&p, op->queue);
    p_i64(&p, op->ts_ms);
    p_i64(&p, op->from_seq);
    return pg_write_changes(pg, ST_MESSAGES_EXPIRE, &p, op);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}
