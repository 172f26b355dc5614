/* view_queue.c — JSON of the queues' answers (view_queue.h): the keys and
 * their order the HTTP API has always sent, built from queue.h's structs.
 * Nothing here decides anything: a call that fails returns its code and
 * no JSON. */
#include "view_queue.h"

#include <stdlib.h>

#include "error.h"

/* The body as JSON: NULL (its key omitted) when the text is not JSON. */
static json_t *body_json(const char *text) {
  return text ? json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) : NULL;
}

static void last_error(json_t *o, const duro_queue_message *m) {
  if (m->last_error)
    json_object_set_new(o, "last_error", json_string(m->last_error));
}

static json_t *pulled_json(const duro_queue_message *m) {
  json_t *o =
      json_pack("{sI,ss,sI,so*,sI}", "id", (json_int_t)m->id, "lease_id",
                m->lease_id, "attempts", (json_int_t)m->attempts, "body",
                body_json(m->body), "sent_ms", (json_int_t)m->sent_ms);
  last_error(o, m);
  return o;
}

static json_t *peeked_json(const duro_queue_message *m) {
  json_t *o =
      json_pack("{sI,sI,so*,sI,sI,sb}", "id", (json_int_t)m->id, "attempts",
                (json_int_t)m->attempts, "body", body_json(m->body), "sent_ms",
                (json_int_t)m->sent_ms, "visible_ms", (json_int_t)m->visible_ms,
                "leased", m->leased);
  last_error(o, m);
  return o;
}

static json_t *moved_json(const duro_queue_message *m) {
  json_t *o = json_pack("{sI,sI,so*,sI}", "id", (json_int_t)m->id, "attempts",
                        (json_int_t)m->attempts, "body", body_json(m->body),
                        "sent_ms", (json_int_t)m->sent_ms);
  last_error(o, m);
  json_object_set_new(o, "new_id", json_integer(m->new_id));
  return o;
}

static json_t *messages_json(const duro_queue_message_list *l,
                             json_t *(*one)(const duro_queue_message *)) {
  json_t *a = json_array();
  for (size_t i = 0; i < l->n; i++)
    json_array_append_new(a, one(&l->v[i]));
  return a;
}

int duro_queue_pull(duro_engine *e, const char *queue, uint32_t batch_size,
                    int64_t visibility_ms, json_t **out, char *err,
                    size_t errlen) {
  duro_queue_message_list l;
  int rc = duro_queue_pull_messages(e, queue, batch_size, visibility_ms, &l,
                                    err, errlen);
  *out = rc ? NULL : messages_json(&l, pulled_json);
  duro_queue_message_list_free(&l);
  return rc;
}

int duro_queue_peek(duro_engine *e, const char *queue, uint32_t limit,
                    json_t **out, char *err, size_t errlen) {
  duro_queue_message_list l;
  int rc = duro_queue_peek_messages(e, queue, limit, &l, err, errlen);
  *out = rc ? NULL : messages_json(&l, peeked_json);
  duro_queue_message_list_free(&l);
  return rc;
}

int duro_queue_redrive(duro_engine *e, const char *queue, const char *to,
                       uint32_t batch_size, json_t **out, char *err,
                       size_t errlen) {
  duro_queue_redrive_result r;
  int rc =
      duro_queue_redrive_messages(e, queue, to, batch_size, &r, err, errlen);
  *out = rc ? NULL
            : json_pack("{s:s,s:o}", "to", r.to, "moved",
                        messages_json(&r.moved, moved_json));
  duro_queue_redrive_result_free(&r);
  return rc;
}

int duro_queue_ack(duro_engine *e, const char *queue, const char *const *acks,
                   size_t n_acks, const duro_queue_retry *retries,
                   size_t n_retries, json_t **result, char *err,
                   size_t errlen) {
  duro_queue_ack_result r;
  *result = NULL;
  int rc = duro_queue_settle(e, queue, acks, n_acks, retries, n_retries, &r,
                             err, errlen);
  if (rc == 0) {
    json_t *errors = json_array();
    for (size_t i = 0; i < r.n_errors; i++)
      json_array_append_new(errors, json_pack("{ss,ss,ss}", "lease_id",
                                              r.errors[i].lease_id, "code",
                                              duro_err_name(r.errors[i].code),
                                              "message", r.errors[i].message));
    *result = json_pack("{sI,sI,sI,sI,so}", "acked", (json_int_t)r.acked,
                        "retried", (json_int_t)r.retried, "dead_lettered",
                        (json_int_t)r.dead_lettered, "dropped",
                        (json_int_t)r.dropped, "errors", errors);
  }
  duro_queue_ack_result_free(&r);
  return rc;
}

static json_t *consumer_json(const duro_queue_consumer_settings *c) {
  const char *kind = duro_queue_consumer_kind_name(c->kind);
  if (c->kind == DURO_QUEUE_CONSUMER_WORKFLOW)
    return json_pack("{ss,ss,ss,sI}", "kind", kind, "workflow", c->workflow,
                     "id_from", c->id_from, "max_batch_size",
                     (json_int_t)c->max_batch_size);
  json_t *o = json_pack("{ss,sI,sI,sI,sI}", "kind", kind, "max_batch_size",
                        (json_int_t)c->max_batch_size, "max_batch_timeout_ms",
                        (json_int_t)c->max_batch_timeout_ms, "max_concurrency",
                        (json_int_t)c->max_concurrency, "visibility_timeout_ms",
                        (json_int_t)c->visibility_timeout_ms);
  if (c->concurrency_key)
    json_object_set_new(o, "concurrency",
                        json_pack("{ss,sI}", "key", c->concurrency_key, "limit",
                                  (json_int_t)c->concurrency_limit));
  return o;
}

static json_t *stat_json(const duro_queue_stat *q) {
  json_t *o = json_pack(
      "{ss,sI,sI,sI,sI,sI,sI,sI,so,sI}", "name", q->name, "ready",
      (json_int_t)q->ready, "delayed", (json_int_t)q->delayed, "in_flight",
      (json_int_t)q->in_flight, "oldest_age_ms", (json_int_t)q->oldest_age_ms,
      "lag_ms", (json_int_t)q->lag_ms, "dropped", (json_int_t)q->dropped,
      "dead_lettered", (json_int_t)q->dead_lettered, "max_retries",
      q->max_retries == DURO_QUEUE_NO_RETRY_LIMIT
          ? json_null()
          : json_integer(q->max_retries),
      "retry_delay_ms", (json_int_t)q->retry_delay_ms);
  if (q->dead_letter_queue)
    json_object_set_new(o, "dead_letter_queue",
                        json_string(q->dead_letter_queue));
  if (q->consumer.kind != DURO_QUEUE_CONSUMER_NONE)
    json_object_set_new(o, "consumer", consumer_json(&q->consumer));
  if (q->consumer.concurrency_key) /* ready ones waiting for their key */
    json_object_set_new(o, "held", json_integer(q->held));
  return o;
}

int duro_queue_stats(duro_engine *e, const char *queue, json_t **out) {
  duro_queue_stat_list l;
  *out = NULL;
  int rc = duro_queue_stats_read(e, queue, &l);
  if (rc == 0 && queue) {
    *out = stat_json(&l.v[0]);
  } else if (rc == 0) {
    *out = json_array();
    for (size_t i = 0; i < l.n; i++)
      json_array_append_new(*out, stat_json(&l.v[i]));
  }
  duro_queue_stat_list_free(&l);
  return rc;
}
