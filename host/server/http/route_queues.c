/* route_queues.c — /queues: their counts (GET /queues[/{q}]), a look at
 * the oldest messages (GET /queues/{q}/messages), and sending, pulling,
 * acking, retrying and redriving messages (POST /queues/{q}/messages
 * [/batch|/pull|/ack|/redrive]), over the engine's queue API (queue.h), its
 * answers made JSON by views/view_queue.c. */
#include "http_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "queue.h"
#include "util.h"
#include "view_queue.h"

/* The JSON a message carries, as text (malloc'ed), or NULL when `o` has
 * no "body".  Fields other than body and delay_seconds are refused. */
static const char *read_message(json_t *o, duro_queue_send_req *m,
                                char **text) {
  *text = NULL;
  *m = (duro_queue_send_req){0};
  if (!json_is_object(o))
    return "a message must be a JSON object {\"body\", \"delay_seconds\"?}";
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    if (!strcmp(key, "delay_seconds")) {
      if (!json_is_integer(v))
        return "\"delay_seconds\" must be an integer number of seconds";
      json_int_t sec = json_integer_value(v);
      /* the engine names the range; this keeps the product in range */
      m->delay_ms = sec < -1 || sec > 1000000 ? -1 : sec * 1000;
    } else if (strcmp(key, "body") != 0) {
      return "a message has only \"body\" and \"delay_seconds\"";
    }
  }
  json_t *body = json_object_get(o, "body");
  if (!body)
    return "a message needs a \"body\"";
  *text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
  m->body = *text;
  return NULL;
}

static int queue_error(http_exchange *x, int rc, const char *err) {
  return send_error(x, status_of(rc), duro_err_name(rc), "%s",
                    err[0] ? err : duro_err_str(rc));
}

static int queue_send(http_server *s, http_exchange *x, const char *q) {
  int sent;
  json_t *body = parse_body(x, NULL, &sent);
  if (!body)
    return 0;
  duro_queue_send_req m;
  char *text;
  const char *bad = read_message(body, &m, &text);
  json_decref(body);
  if (bad) {
    free(text);
    return send_error(x, 400, "request.invalid", "%s", bad);
  }
  char err[256] = "";
  int64_t id = 0;
  m.traceparent = x->rq.traceparent;
  int rc = duro_queue_enqueue_batch(s->engine, q, &m, 1, &id, err, sizeof err);
  free(text);
  if (rc)
    return queue_error(x, rc, err);
  return send_json(x, 201, json_pack("{sI}", "id", (json_int_t)id));
}

static int queue_send_batch(http_server *s, http_exchange *x, const char *q) {
  int sent;
  json_t *body = parse_body(x, NULL, &sent);
  if (!body)
    return 0;
  json_t *list = json_object_get(body, "messages");
  if (!json_is_array(list) || json_object_size(body) != 1) {
    json_decref(body);
    return send_error(x, 400, "request.invalid",
                      "the body must be {\"messages\": [...]}");
  }
  size_t n = json_array_size(list);
  if (n > DURO_QUEUE_MAX_BATCH) { /* before copying any of them */
    json_decref(body);
    return send_error(x, 413, duro_err_name(DURO_E_BATCH_TOO_LARGE),
                      "%zu messages, over the limit of %d per batch", n,
                      DURO_QUEUE_MAX_BATCH);
  }
  duro_queue_send_req reqs[DURO_QUEUE_MAX_BATCH];
  char *texts[DURO_QUEUE_MAX_BATCH];
  const char *bad = NULL;
  size_t got = 0;
  for (; got < n && !bad; got++) {
    bad = read_message(json_array_get(list, got), &reqs[got], &texts[got]);
    reqs[got].traceparent = x->rq.traceparent;
  }
  json_decref(body);
  char err[256] = "";
  int64_t ids[DURO_QUEUE_MAX_BATCH];
  int rc = bad ? 0
               : duro_queue_enqueue_batch(s->engine, q, reqs, n, ids, err,
                                          sizeof err);
  for (size_t i = 0; i < got; i++)
    free(texts[i]);
  if (bad)
    return send_error(x, 400, "request.invalid", "message %zu: %s", got - 1,
                      bad);
  if (rc)
    return queue_error(x, rc, err);
  json_t *out = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(out, json_integer(ids[i]));
  return send_json(x, 201, json_pack("{so}", "ids", out));
}

/* An optional non-negative integer field of `o` into *out. */
static int read_count(json_t *o, const char *key, int64_t max, int64_t *out) {
  json_t *v = json_object_get(o, key);
  if (!v)
    return 0;
  if (!json_is_integer(v) || json_integer_value(v) < 0 ||
      json_integer_value(v) > max)
    return -1;
  *out = json_integer_value(v);
  return 0;
}

static int queue_pull(http_server *s, http_exchange *x, const char *q) {
  int sent;
  json_t *body = parse_body(x, json_object(), &sent);
  if (!body)
    return 0;
  int64_t batch = 10, visibility = 0;
  int bad =
      !json_is_object(body) ||
      read_count(body, "batch_size", INT32_MAX, &batch) ||
      read_count(body, "visibility_timeout_ms", INT64_MAX / 2, &visibility);
  json_decref(body);
  if (bad)
    return send_error(x, 400, "request.invalid",
                      "the body is {\"batch_size\"?: 1-100, "
                      "\"visibility_timeout_ms\"?: milliseconds}");
  char err[256] = "";
  json_t *msgs = NULL;
  int rc = duro_queue_pull(s->engine, q, (uint32_t)batch, visibility, &msgs,
                           err, sizeof err);
  if (rc)
    return queue_error(x, rc, err);
  return send_json(x, 200, json_pack("{so}", "messages", msgs));
}

/* GET /queues/{q}/messages?limit=N: the oldest messages, not leased. */
static int queue_peek(http_server *s, http_exchange *x, const char *q) {
  const char *limit = query_param(x, "limit");
  long lim = 20;
  if (limit) {
    char *end;
    lim = strtol(limit, &end, 10);
    if (!*limit || *end || lim < 1 || lim > DURO_QUEUE_MAX_BATCH)
      return send_error(x, 400, "request.invalid", "limit must be 1 to %d",
                        DURO_QUEUE_MAX_BATCH);
  }
  char err[256] = "";
  json_t *msgs = NULL;
  int rc = duro_queue_peek(s->engine, q, (uint32_t)lim, &msgs, err, sizeof err);
  if (rc)
    return queue_error(x, rc, err);
  return send_json(x, 200, json_pack("{so}", "messages", msgs));
}

/* POST /queues/{q}/messages/redrive: the oldest visible messages of a
 * dead-letter queue sent back, each as a new message, in one commit. */
static int queue_redrive(http_server *s, http_exchange *x, const char *q) {
  int sent;
  json_t *body = parse_body(x, json_object(), &sent);
  if (!body)
    return 0;
  int64_t batch = 10;
  json_t *to = json_object_get(body, "to");
  int bad = !json_is_object(body) ||
            read_count(body, "batch_size", INT32_MAX, &batch) ||
            (to && !json_is_string(to));
  if (bad) {
    json_decref(body);
    return send_error(x, 400, "request.invalid",
                      "the body is {\"batch_size\"?: 1-100, \"to\"?: queue}");
  }
  char err[256] = "";
  json_t *out = NULL;
  int rc = duro_queue_redrive(s->engine, q, to ? json_string_value(to) : NULL,
                              (uint32_t)batch, &out, err, sizeof err);
  json_decref(body); /* after the call: `to` is borrowed from it */
  if (rc)
    return queue_error(x, rc, err);
  return send_json(x, 200, out);
}

/* The lease ids of "acks" and the entries of "retries", borrowed from
 * `body`.  Returns a problem, or NULL. */
static const char *read_acks(json_t *body, const char ***acks, size_t *n_acks,
                             duro_queue_retry **retries, size_t *n_retries) {
  json_t *a = json_object_get(body, "acks"),
         *r = json_object_get(body, "retries");
  if (!json_is_object(body) ||
      json_object_size(body) != (size_t)(a != NULL) + (r != NULL) ||
      (a && !json_is_array(a)) || (r && !json_is_array(r)))
    return "the body is {\"acks\"?: [{\"lease_id\"}], \"retries\"?: "
           "[{\"lease_id\", \"delay_seconds\"?}]}";
  *n_acks = json_array_size(a);
  *n_retries = json_array_size(r);
  *acks = xcalloc(*n_acks + 1, sizeof **acks);
  *retries = xcalloc(*n_retries + 1, sizeof **retries);
  for (size_t i = 0; i < *n_acks; i++) {
    const char *id =
        json_string_value(json_object_get(json_array_get(a, i), "lease_id"));
    if (!id)
      return "each ack is {\"lease_id\": \"...\"}";
    (*acks)[i] = id;
  }
  for (size_t i = 0; i < *n_retries; i++) {
    json_t *o = json_array_get(r, i);
    duro_queue_retry *t = &(*retries)[i];
    t->lease_id = json_string_value(json_object_get(o, "lease_id"));
    int64_t sec = -1;
    json_t *d = json_object_get(o, "delay_seconds");
    if (d && read_count(o, "delay_seconds", 1000000, &sec))
      return "\"delay_seconds\" must be a non-negative integer";
    t->delay_ms = sec < 0 ? -1 : sec * 1000;
    if (!t->lease_id)
      return "each retry is {\"lease_id\": \"...\", \"delay_seconds\"?}";
  }
  return NULL;
}

static int queue_ack(http_server *s, http_exchange *x, const char *q) {
  int sent;
  json_t *body = parse_body(x, NULL, &sent);
  if (!body)
    return 0;
  const char **acks = NULL;
  duro_queue_retry *retries = NULL;
  size_t n_acks = 0, n_retries = 0;
  const char *bad = read_acks(body, &acks, &n_acks, &retries, &n_retries);
  char err[256] = "";
  json_t *result = NULL;
  int rc = bad ? 0
               : duro_queue_ack(s->engine, q, acks, n_acks, retries, n_retries,
                                &result, err, sizeof err);
  free(acks);
  free(retries);
  json_decref(body);
  if (bad)
    return send_error(x, 400, "request.invalid", "%s", bad);
  if (rc)
    return queue_error(x, rc, err);
  return send_json(x, 200, result);
}

/* GET /queues, GET /queues/{q}, GET /queues/{q}/messages (a look),
 * POST /queues/{q}/messages[/batch|/pull|/ack|/redrive]. */
int queues_route(http_server *s, http_exchange *x, char **seg, int n) {
  json_t *out = NULL;
  int rc;
  if (n == 1) {
    if (!method_is(x, "GET"))
      return wrong_method(x, "GET");
    rc = duro_queue_stats(s->engine, NULL, &out);
    return rc ? queue_error(x, rc, "")
              : send_json(x, 200, keys_filter_queues(x, out));
  }
  const char *q = seg[1];
  if (!name_valid(q) || !duro_queue_exists(s->engine, q))
    return send_error(x, 404, duro_err_name(DURO_E_QUEUE_NOT_FOUND),
                      "no queue named \"%s\"", name_valid(q) ? q : "?");
  if (n == 2) {
    if (!method_is(x, "GET"))
      return wrong_method(x, "GET");
    rc = duro_queue_stats(s->engine, q, &out);
    return rc ? queue_error(x, rc, "") : send_json(x, 200, out);
  }
  if (strcmp(seg[2], "messages") != 0 || n > 4)
    return send_error(x, 404, "route.not_found", "no route for %s %s",
                      x->rq.method, x->rq.path);
  if (n == 3 && method_is(x, "GET"))
    return queue_peek(s, x, q);
  if (!method_is(x, "POST"))
    return wrong_method(x, n == 3 ? "GET, POST" : "POST");
  if (n == 3)
    return queue_send(s, x, q);
  if (!strcmp(seg[3], "batch"))
    return queue_send_batch(s, x, q);
  if (!strcmp(seg[3], "pull"))
    return queue_pull(s, x, q);
  if (!strcmp(seg[3], "ack"))
    return queue_ack(s, x, q);
  if (!strcmp(seg[3], "redrive"))
    return queue_redrive(s, x, q);
  return send_error(x, 404, "route.not_found", "no route for %s %s",
                    x->rq.method, x->rq.path);
}
