/* sqlite_write_queue.c — the SQLite backend's ops on queue messages: a
 * send, a lease of the visible ones (those out of attempts dropped or
 * dead-lettered), an ack, a retry, the expiry, and the counts of the
 * messages spent. */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "journal_crypt.h"
#include "journal_seal.h"
#include "queue_keys.h"
#include "sqlite_internal.h"

/* Counts n messages of `queue` out of retries (queue_counts): dropped,
 * or moved to its dead-letter queue. */
static int count_spent(sqlite_store *sq, const char *queue, int dead_lettered,
                       int64_t n) {
  sqlite3_stmt *st = sq->ws[ST_MESSAGES_DROPPED];
  bind_text(st, 1, queue);
  sqlite3_bind_int64(st, 2, dead_lettered ? 0 : n);
  sqlite3_bind_int64(st, 3, dead_lettered ? n : 0);
  return sqlite_step_done(sq, st);
}

int sqlite_keys_ahead(sqlite3_stmt *st, const char *queue, int64_t now_ms,
                      int current, queue_keys *keys) {
  bind_text(st, 1, queue);
  sqlite3_bind_int64(st, 2, now_ms);
  sqlite3_bind_int(st, 3, current);
  int s;
  while ((s = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t seq = sqlite3_column_int64(st, 0);
    const char *key =
        queue_keys_key(keys, seq, (const char *)sqlite3_column_text(st, 2),
                       (const char *)sqlite3_column_text(st, 3));
    queue_keys_ahead(keys, key, sqlite3_column_int64(st, 1), seq,
                     sqlite3_column_int(st, 4));
  }
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return s;
}

/* The queue's keys made the pointer's: when they are another's (or none
 * was recorded), cleared, to be computed again as leases meet them. */
static int keys_of_pointer(sqlite_store *sq, const char *queue,
                           const char *pointer) {
  sqlite3_stmt *st = sq->ws[ST_MESSAGE_KEY_POINTER];
  bind_text(st, 1, queue);
  int s = sqlite3_step(st);
  int same = s == SQLITE_ROW &&
             !strcmp((const char *)sqlite3_column_text(st, 0), pointer);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (s != SQLITE_ROW && s != SQLITE_DONE) {
    sqlite_set_err(sq->wr, NULL);
    return DURO_E_STORAGE;
  }
  if (same)
    return 0;
  st = sq->ws[ST_MESSAGE_KEYS_CLEAR];
  bind_text(st, 1, queue);
  int rc = sqlite_step_done(sq, st);
  if (rc)
    return rc;
  st = sq->ws[ST_MESSAGE_KEY_POINTER_SET];
  bind_text(st, 1, queue);
  bind_text(st, 2, pointer);
  return sqlite_step_done(sq, st);
}

/* What holds the keys' places, with the keys it meets computed; 0 or
 * DURO_E_STORAGE. */
static int keys_ahead(sqlite_store *sq, journal_op *op, queue_keys *keys) {
  int rc = keys_of_pointer(sq, op->queue, op->key_pointer);
  if (rc == 0 && sqlite_keys_ahead(sq->ws[ST_MESSAGE_KEY_AHEAD], op->queue,
                                   op->ts_ms, 1, keys) != SQLITE_DONE) {
    sqlite_set_err(sq->wr, NULL);
    rc = DURO_E_STORAGE;
  }
  return rc;
}

/* Stores the keys the walks computed. */
static int keys_fill(sqlite_store *sq, const queue_keys *keys) {
  int64_t seq;
  const char *key;
  int rc = 0;
  for (size_t i = 0; rc == 0 && queue_keys_fill(keys, i, &seq, &key); i++) {
    sqlite3_stmt *st = sq->ws[ST_MESSAGE_KEY_FILL];
    sqlite3_bind_int64(st, 1, seq);
    bind_text(st, 2, key);
    rc = sqlite_step_done(sq, st);
  }
  return rc;
}

/* Picks the visible messages first, then leases them one by one: an
 * UPDATE while the SELECT still walks the index it changes could meet a
 * row twice.  A keyed consumer's walk goes oldest sent first, passes over
 * the keys in handlers up to their limit without reading their rows, and
 * over the messages whose key comes to its limit in the walk. */
int sqlite_message_lease(sqlite_store *sq, journal_op *op) {
  queue_keys *keys = op->key_pointer ? queue_keys_new(op->key_pointer,
                                                      op->key_limit, op->crypt)
                                     : NULL;
  if (keys && keys_ahead(sq, op, keys)) {
    queue_keys_free(keys);
    op->messages = xcalloc(1, sizeof *op->messages);
    op->n_messages = 0;
    return DURO_E_STORAGE;
  }
  char *full = keys ? queue_keys_full(keys) : NULL;
  int s = SQLITE_DONE;
  sqlite3_stmt *st = sq->ws[keys ? ST_MESSAGE_KEY_PICK : ST_MESSAGE_PICK];
  bind_text(st, 1, op->queue);
  sqlite3_bind_int64(st, 2, op->ts_ms);
  if (keys) {
    sqlite3_bind_int(st, 3, 1);
    bind_text(st, 4, full);
  } else {
    sqlite3_bind_int64(st, 3, (sqlite3_int64)op->n_leases);
  }
  journal_message *v = xcalloc(op->n_leases ? op->n_leases : 1, sizeof *v);
  int64_t *spent = xcalloc(op->n_leases ? op->n_leases : 1, sizeof *spent);
  int64_t *parked = xcalloc(op->n_leases ? op->n_leases : 1, sizeof *parked);
  size_t n = 0, n_spent = 0, n_parked = 0;
  while (s == SQLITE_DONE && n + n_spent + n_parked < op->n_leases &&
         (s = sqlite3_step(st)) == SQLITE_ROW) {
    s = SQLITE_DONE; /* a row taken or passed over: go on */
    /* Under a key no longer listed: kept for when it is, not counted as
     * an attempt (out of attempts, it would be dropped). */
    const char *body = (const char *)sqlite3_column_text(st, 2),
               *last_error = (const char *)sqlite3_column_text(st, 4);
    if (!journal_crypt_listed(op->crypt, body) ||
        !journal_crypt_listed(op->crypt, last_error)) {
      parked[n_parked] = sqlite3_column_int64(st, 0);
      journal_note_parked(op->queue, parked[n_parked++],
                          journal_crypt_listed(op->crypt, body) ? last_error
                                                                : body);
      continue;
    }
    /* Delivered max_attempts times and the last lease ran out unacked:
     * an expired lease is a failed attempt too (a handler that crashes
     * the host never acks), so it goes the way of a spent retry. */
    if (op->max_attempts &&
        sqlite3_column_int64(st, 1) >= (int64_t)op->max_attempts) {
      spent[n_spent++] = sqlite3_column_int64(st, 0);
      continue;
    }
    if (keys) {
      int64_t seq = sqlite3_column_int64(st, 0);
      const char *key = (const char *)sqlite3_column_text(st, 6);
      if (!key) /* the body read only then */
        key = queue_keys_key(keys, seq, NULL,
                             (const char *)sqlite3_column_text(st, 2));
      if (!queue_keys_admit(keys, key, sqlite3_column_int64(st, 3), seq))
        continue;
    }
    journal_message *m = &v[n++];
    m->seq = sqlite3_column_int64(st, 0);
    m->attempts = (uint32_t)sqlite3_column_int64(st, 1) + 1;
    m->body = xstrdup((const char *)sqlite3_column_text(st, 2));
    m->sent_ms = sqlite3_column_int64(st, 3);
    const unsigned char *err = sqlite3_column_text(st, 4);
    m->last_error = err ? xstrdup((const char *)err) : NULL;
    m->traceparent = col_text(st, 5);
    m->queue = xstrdup(op->queue);
    m->lease = xasprintf("%s-%lld", op->lease_token, (long long)m->seq);
    m->visible_ms = op->visible_ms;
  }
  int rc = s != SQLITE_DONE;
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  free(full);
  op->messages = v;
  op->n_messages = n;
  if (rc) {
    queue_keys_free(keys);
    free(spent);
    free(parked);
    sqlite_set_err(sq->wr, NULL);
    return DURO_E_STORAGE;
  }
  rc = keys ? keys_fill(sq, keys) : 0;
  queue_keys_free(keys);
  for (size_t i = 0; i < n_parked && rc == 0; i++) {
    st = sq->ws[ST_MESSAGE_MOVE]; /* the same queue, later */
    sqlite3_bind_int64(st, 1, parked[i]);
    bind_text(st, 2, op->queue);
    sqlite3_bind_int64(st, 3, op->ts_ms + JOURNAL_PARKED_MS);
    rc = sqlite_step_done(sq, st);
  }
  free(parked);
  if (rc) {
    free(spent);
    return rc;
  }
  op->out_rowid = (int64_t)n_spent; /* dead-lettered or dropped */
  for (size_t i = 0; i < n_spent && rc == 0; i++) {
    st = sq->ws[op->dead_letter_queue ? ST_MESSAGE_MOVE : ST_MESSAGE_DELETE];
    sqlite3_bind_int64(st, 1, spent[i]);
    if (op->dead_letter_queue) {
      bind_text(st, 2, op->dead_letter_queue);
      sqlite3_bind_int64(st, 3, op->ts_ms);
      bind_text(st, 4,
                "{\"name\":\"queue.lease_expired\",\"message\":"
                "\"delivered max_retries + 1 times, never acked\"}");
    }
    rc = sqlite_step_done(sq, st);
  }
  if (rc == 0 && n_spent)
    rc = count_spent(sq, op->queue, op->dead_letter_queue != NULL,
                     (int64_t)n_spent);
  free(spent);
  if (rc)
    return rc;
  for (size_t i = 0; i < n; i++) {
    st = sq->ws[ST_MESSAGE_LEASE];
    sqlite3_bind_int64(st, 1, v[i].seq);
    bind_text(st, 2, v[i].lease);
    sqlite3_bind_int64(st, 3, op->visible_ms);
    if ((rc = sqlite_step_done(sq, st)))
      return rc;
  }
  return 0;
}

/* A retried message goes back to its queue after the delay, unless it
 * has had its max_attempts: then to the dead-letter queue (visible at
 * once, attempts and error kept), or it is dropped. */
int sqlite_message_retry(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st = sq->ws[ST_MESSAGE_HELD];
  bind_text(st, 1, op->lease);
  bind_text(st, 2, op->queue);
  sqlite3_bind_int64(st, 3, op->ts_ms);
  sqlite3_bind_int64(st, 4, journal_lease_seq(op->lease));
  int s = sqlite3_step(st);
  int64_t seq = s == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  int64_t attempts = s == SQLITE_ROW ? sqlite3_column_int64(st, 1) : 0;
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (s != SQLITE_ROW && s != SQLITE_DONE) {
    sqlite_set_err(sq->wr, NULL);
    return DURO_E_STORAGE;
  }
  if (s == SQLITE_DONE) {
    op->out_rowid = JOURNAL_RETRY_NOT_HELD;
    return 0;
  }
  int spent = attempts >= (int64_t)op->max_attempts;
  if (spent && !op->dead_letter_queue) {
    st = sq->ws[ST_MESSAGE_DELETE];
    sqlite3_bind_int64(st, 1, seq);
    op->out_rowid = JOURNAL_RETRY_DROPPED;
    int rc = sqlite_step_done(sq, st);
    return rc ? rc : count_spent(sq, op->queue, 0, 1);
  }
  st = sq->ws[ST_MESSAGE_MOVE];
  sqlite3_bind_int64(st, 1, seq);
  bind_text(st, 2, spent ? op->dead_letter_queue : op->queue);
  sqlite3_bind_int64(st, 3, spent ? op->ts_ms : op->visible_ms);
  bind_text(st, 4, op->error);
  op->out_rowid = spent ? JOURNAL_RETRY_DEAD_LETTERED : JOURNAL_RETRY_DELAYED;
  int rc = sqlite_step_done(sq, st);
  return rc || !spent ? rc : count_spent(sq, op->queue, 1, 1);
}

/* A queue's ops (a lease and a retry have their own functions). */
int sqlite_message_apply(sqlite_store *sq, journal_op *op) {
  sqlite3_stmt *st;
  int rc;
  switch (op->kind) {
  case JOP_MESSAGE_INSERT:
    st = sq->ws[ST_MESSAGE_INSERT];
    bind_text(st, 1, op->queue);
    bind_text(st, 2, op->body);
    sqlite3_bind_int64(st, 3, op->ts_ms);
    sqlite3_bind_int64(st, 4, op->visible_ms);
    bind_text(st, 5, op->traceparent);
    if ((rc = sqlite_step_done(sq, st)))
      return rc;
    op->out_rowid = sqlite3_last_insert_rowid(sq->wr);
    return 0;
  case JOP_MESSAGE_ACK:
    st = sq->ws[ST_MESSAGE_ACK];
    bind_text(st, 1, op->lease);
    bind_text(st, 2, op->queue);
    sqlite3_bind_int64(st, 3, op->ts_ms);
    sqlite3_bind_int64(st, 4, journal_lease_seq(op->lease));
    return sqlite_step_changes(sq, st, op);
  case JOP_MESSAGES_EXPIRE:
    st = sq->ws[ST_MESSAGES_EXPIRE];
    bind_text(st, 1, op->queue);
    sqlite3_bind_int64(st, 2, op->ts_ms);
    sqlite3_bind_int64(st, 3, op->from_seq);
    return sqlite_step_changes(sq, st, op);
  default:
    return DURO_E_INVALID_ARGUMENT;
  }
}
