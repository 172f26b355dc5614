/* http.c — the control plane: HTTP JSON routes over the engine's lifecycle
 * API, served by H2O (libh2o, built for libuv) on the host's loop.
 *
 * H2O parses HTTP, buffers request bodies and writes responses
 * asynchronously, so a slow client never holds the loop.  The loop copies
 * each request into an exchange and hands it to libuv's thread pool, where
 * the route runs its engine calls (journal reads, group commits); the
 * answer goes back to H2O on the loop.  So the loop never waits for SQLite
 * or an fsync, and concurrent writes from many clients share commits.  If
 * the client goes away first, H2O disposes its request and the answer is
 * dropped.  Every error is {"error":{"code","message"}} with the status
 * the code implies (error.h's names are the codes).
 *
 * Lifecycle: http_start binds and listens; http_stop closes the listener;
 * the host runs the loop until http_in_flight() is 0, closes the remaining
 * handles (connections) and calls http_free, which disposes the H2O
 * context. */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define H2O_USE_LIBUV 1
#include <h2o.h>

#include "duration.h"
#include "error.h"
#include "log.h"
#include "util.h"

#define MAX_SEGMENTS 8
#define MAX_BATCH 100

struct http_server {
  duro_engine *engine;
  h2o_globalconf_t config;
  h2o_context_t ctx;
  h2o_accept_ctx_t accept_ctx;
  uv_tcp_t listener;
  int listening;
  int port;
  char *token; /* NULL = no auth */
  size_t max_body;
  size_t connections; /* open client connections */
  size_t in_flight;   /* exchanges handed to the thread pool */
};

/* A request as the routes see it: copied off H2O's request on the loop,
 * so they can run on a pool thread. */
typedef struct http_request {
  char *method; /* NUL-terminated copies */
  char *path;   /* normalized, without the query */
  char *query;  /* after '?', or NULL */
  char *body;
  size_t body_len;
  char *segments;  /* the path, split in place by split_path */
  char *params[4]; /* query values handed out by query_param */
  size_t n_params;
} http_request;

/* The answer the route wrote, sent by the loop. */
typedef struct http_response {
  int status;
  const char *type;  /* static */
  const char *allow; /* static, for 405 */
  char *body;        /* malloc'ed */
  size_t len;
} http_response;

typedef struct exchange_guard exchange_guard;

typedef struct http_exchange {
  uv_work_t work;
  http_server *s;
  h2o_req_t *req; /* NULL once H2O disposed it (the client went away) */
  exchange_guard *guard;
  http_request rq;
  http_response rs;
} http_exchange;

/* Lives in the request's memory pool: H2O disposes it with the request,
 * which tells the exchange its request is gone. */
struct exchange_guard {
  http_exchange *x;
};

typedef struct route_handler {
  h2o_handler_t super; /* first: H2O hands us this pointer */
  http_server *server;
} route_handler;

/* ---- responses ------------------------------------------------------------
 */

static const char *reason_of(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 201:
    return "Created";
  case 202:
    return "Accepted";
  case 400:
    return "Bad Request";
  case 401:
    return "Unauthorized";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 409:
    return "Conflict";
  case 413:
    return "Payload Too Large";
  case 503:
    return "Service Unavailable";
  default:
    return "Internal Server Error";
  }
}

static void send_text(http_exchange *x, int status, const char *type,
                      const char *body, size_t len) {
  http_response *rs = &x->rs;
  rs->status = status;
  rs->type = type;
  free(rs->body);
  rs->body = xstrndup(body, len);
  rs->len = len;
}

/* Sends `body` as JSON and drops the reference. */
static int send_json(http_exchange *x, int status, json_t *body) {
  char *text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(body);
  if (!text) {
    send_text(x, 500, "application/json", "{}", 2);
    return 0;
  }
  send_text(x, status, "application/json", text, strlen(text));
  free(text);
  return 0;
}

static int send_error(http_exchange *x, int status, const char *code,
                      const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int send_error(http_exchange *x, int status, const char *code,
                      const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = xvasprintf(fmt, ap);
  va_end(ap);
  json_t *body =
      json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
  if (!body) {
    /* The message echoes the request (method, path, query), which may not
     * be UTF-8; jansson refuses that and the reply was a 500 "{}"
     * (test_http).  Send it with the non-ASCII bytes replaced. */
    for (char *p = msg; *p; p++)
      if ((unsigned char)*p >= 0x80)
        *p = '?';
    body = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
  }
  free(msg);
  return send_json(x, status, body);
}

static int status_of(int rc) {
  switch (rc) {
  case DURO_E_NOT_FOUND:
  case DURO_E_WORKFLOW_NOT_FOUND:
    return 404;
  case DURO_E_ALREADY_EXISTS:
  case DURO_E_CANNOT_RESTART:
  case DURO_E_CANNOT_TERMINATE:
  case DURO_E_CANNOT_PAUSE:
  case DURO_E_CANNOT_RESUME:
    return 409;
  case DURO_E_INVALID_ID:
  case DURO_E_INVALID_PARAMS:
  case DURO_E_INVALID_ARGUMENT:
  case DURO_E_INVALID_DURATION:
  case DURO_E_DUPLICATE_IN_BATCH:
    return 400;
  case DURO_E_SHUTDOWN:
    return 503;
  default:
    return 500;
  }
}

/* An engine error, with the names involved in the message. */
static int send_engine_error(http_exchange *x, int rc, const char *wf,
                             const char *id) {
  if (rc == DURO_E_WORKFLOW_NOT_FOUND)
    return send_error(x, 404, duro_err_name(rc), "no workflow named \"%s\"",
                      wf);
  if (id && rc != DURO_E_INVALID_ID)
    return send_error(x, status_of(rc), duro_err_name(rc), "%s: %s/%s",
                      duro_err_str(rc), wf, id);
  return send_error(x, status_of(rc), duro_err_name(rc), "%s",
                    duro_err_str(rc));
}

/* ---- request parsing -------------------------------------------------------
 */

static int method_is(const http_exchange *x, const char *m) {
  return strcmp(x->rq.method, m) == 0;
}

/* Splits the path into at most MAX_SEGMENTS segments (owned by the
 * request).  Returns the count, or -1 when there are more. */
static int split_path(http_exchange *x, char **seg) {
  free(x->rq.segments);
  x->rq.segments = xstrdup(x->rq.path);
  int n = 0;
  char *save = NULL;
  for (char *t = strtok_r(x->rq.segments, "/", &save); t;
       t = strtok_r(NULL, "/", &save)) {
    if (n == MAX_SEGMENTS)
      return -1;
    seg[n++] = t;
  }
  return n;
}

/* The value of `key` in the query string (owned by the request), or
 * NULL. */
static const char *query_param(http_exchange *x, const char *key) {
  http_request *rq = &x->rq;
  if (!rq->query || rq->n_params == sizeof rq->params / sizeof *rq->params)
    return NULL;
  const char *q = rq->query;
  size_t len = strlen(q);
  size_t klen = strlen(key);
  while (len > 0) {
    const char *amp = memchr(q, '&', len);
    size_t part = amp ? (size_t)(amp - q) : len;
    if (part > klen && q[klen] == '=' && memcmp(q, key, klen) == 0)
      return rq->params[rq->n_params++] =
                 xstrndup(q + klen + 1, part - klen - 1);
    if (!amp)
      break;
    len -= part + 1;
    q = amp + 1;
  }
  return NULL;
}

/* Parses the body as JSON.  An empty body is `empty` (may be NULL = an
 * error).  On failure sends 400 and returns NULL. */
static json_t *parse_body(http_exchange *x, json_t *empty, int *sent) {
  *sent = 0;
  if (!x->rq.body || x->rq.body_len == 0) {
    if (empty)
      return empty;
    *sent = 1;
    send_error(x, 400, "request.invalid_json", "a JSON body is required");
    return NULL;
  }
  json_decref(empty);
  json_error_t jerr;
  json_t *v = json_loadb(x->rq.body, x->rq.body_len,
                         JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
  if (!v) {
    *sent = 1;
    send_error(x, 400, "request.invalid_json",
               "the body is not valid JSON: %s at line %d, column %d",
               jerr.text, jerr.line, jerr.column);
  }
  return v;
}

static int name_valid(const char *s) { return duro_instance_id_valid(s); }

/* ---- instance creation ------------------------------------------------------
 */

typedef struct create_fields {
  const char *id;
  char *params; /* malloc'ed JSON text, or NULL */
  int64_t retention_ms;
  char problem[160];
} create_fields;

static const char *read_create_fields(json_t *o, create_fields *f);

/* Reads {id?, params?, retention?} into f.  Returns NULL, or a message
 * (pool-allocated) saying what is wrong; then f->params is freed (it
 * leaked when a bad field followed "params": test_http). */
static const char *read_create(json_t *o, create_fields *f) {
  const char *bad = read_create_fields(o, f);
  if (bad) {
    free(f->params);
    f->params = NULL;
  }
  return bad;
}

static const char *read_create_fields(json_t *o, create_fields *f) {
  memset(f, 0, sizeof *f);
  f->retention_ms = -1;
  if (!json_is_object(o))
    return "an instance must be a JSON object";
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    if (!strcmp(key, "id")) {
      if (!json_is_string(v))
        return "\"id\" must be a string";
      f->id = json_string_value(v);
    } else if (!strcmp(key, "params")) {
      free(f->params);
      f->params = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    } else if (!strcmp(key, "retention")) {
      if (json_is_integer(v) && json_integer_value(v) >= 0)
        f->retention_ms = json_integer_value(v);
      else if (!json_is_string(v) ||
               duration_parse(json_string_value(v), &f->retention_ms) != 0)
        return "\"retention\" must be a duration such as \"30d\" or a "
               "number of milliseconds";
    } else {
      free(f->params);
      f->params = NULL;
      snprintf(f->problem, sizeof f->problem, "unknown field \"%.100s\"", key);
      return f->problem;
    }
  }
  return NULL;
}

static int create_one(http_server *s, http_exchange *x, const char *wf) {
  int sent;
  json_t *body = parse_body(x, json_object(), &sent);
  if (!body)
    return 0;
  create_fields f;
  const char *bad = read_create(body, &f);
  if (bad) {
    json_decref(body);
    return send_error(x, 400, "request.invalid", "%s", bad);
  }
  if (f.id && !duro_instance_id_valid(f.id)) {
    json_decref(body);
    free(f.params);
    return send_error(
        x, 400, duro_err_name(DURO_E_INVALID_ID),
        "instance ids are 1-100 characters of A-Z a-z 0-9 _ . : -");
  }
  char *id = NULL;
  int rc =
      duro_instance_create(s->engine, wf, f.id, f.params, f.retention_ms, &id);
  if (rc) {
    send_engine_error(x, rc, wf, f.id);
  } else {
    send_json(x, 201, json_pack("{s:s,s:s}", "id", id, "status", "queued"));
  }
  free(id);
  free(f.params);
  json_decref(body);
  return 0;
}

static int create_batch(http_server *s, http_exchange *x, const char *wf) {
  int sent;
  json_t *body = parse_body(x, NULL, &sent);
  if (!body)
    return 0;
  json_t *list = json_object_get(body, "instances");
  if (!json_is_array(list) || json_object_size(body) != 1) {
    json_decref(body);
    return send_error(x, 400, "request.invalid",
                      "the body must be {\"instances\": [...]}");
  }
  size_t n = json_array_size(list);
  if (n == 0 || n > MAX_BATCH) {
    json_decref(body);
    return send_error(x, 400, "request.invalid",
                      "a batch holds 1 to %d instances, not %zu", MAX_BATCH, n);
  }
  duro_create_req reqs[MAX_BATCH];
  create_fields f[MAX_BATCH];
  size_t parsed = 0;
  const char *bad = NULL;
  for (; parsed < n && !bad; parsed++) {
    bad = read_create(json_array_get(list, parsed), &f[parsed]);
    reqs[parsed] = (duro_create_req){.id = f[parsed].id,
                                     .params = f[parsed].params,
                                     .retention_ms = f[parsed].retention_ms};
  }
  if (bad) {
    for (size_t i = 0; i < parsed; i++)
      free(f[i].params);
    json_decref(body);
    return send_error(x, 400, "request.invalid", "instances[%zu]: %s",
                      parsed - 1, bad);
  }
  json_t *result = NULL;
  int rc = duro_instance_create_batch(s->engine, wf, reqs, n, &result);
  for (size_t i = 0; i < n; i++)
    free(f[i].params);
  json_decref(body);
  if (rc)
    return send_engine_error(x, rc, wf, NULL);
  /* "rc" is the engine's internal code; clients get "code". */
  size_t i;
  json_t *err;
  json_array_foreach(json_object_get(result, "errors"), i, err)
      json_object_del(err, "rc");
  return send_json(x, 200, result);
}

/* ---- the other routes -------------------------------------------------------
 */

static int list_instances(http_server *s, http_exchange *x, const char *wf) {
  const char *status = query_param(x, "status");
  const char *limit = query_param(x, "limit");
  const char *cursor = query_param(x, "cursor");
  int st = -1;
  if (status && *status && (st = duro_status_parse(status)) < 0)
    return send_error(x, 400, "request.invalid", "unknown status \"%s\"",
                      status);
  long lim = 100;
  if (limit) {
    char *end;
    lim = strtol(limit, &end, 10);
    if (*end || lim < 1 || lim > 1000)
      return send_error(x, 400, "request.invalid", "limit must be 1 to 1000");
  }
  json_t *out = NULL;
  int rc = duro_instance_list(s->engine, wf, st, (size_t)lim, cursor, &out);
  if (rc == DURO_E_INVALID_ARGUMENT)
    return send_error(x, 400, "request.invalid", "invalid cursor");
  if (rc)
    return send_engine_error(x, rc, wf, NULL);
  return send_json(x, 200, out);
}

static int describe(http_server *s, http_exchange *x, const char *wf,
                    const char *id) {
  json_t *out = NULL;
  int rc = duro_instance_describe(s->engine, wf, id, &out);
  if (rc)
    return send_engine_error(x, rc, wf, id);
  return send_json(x, 200, out);
}

static int change_status(http_server *s, http_exchange *x, const char *wf,
                         const char *id) {
  int sent;
  json_t *body = parse_body(x, NULL, &sent);
  if (!body)
    return 0;
  const char *action = json_string_value(json_object_get(body, "status"));
  json_t *from = json_object_get(body, "from");
  int rc;
  if (!action) {
    rc = -1;
  } else if (!strcmp(action, "pause")) {
    rc = duro_instance_pause(s->engine, wf, id);
  } else if (!strcmp(action, "resume")) {
    rc = duro_instance_resume(s->engine, wf, id);
  } else if (!strcmp(action, "terminate")) {
    rc = duro_instance_terminate(s->engine, wf, id);
  } else if (!strcmp(action, "restart")) {
    const char *name = json_string_value(json_object_get(from, "name"));
    json_t *count = json_object_get(from, "count");
    if ((from && !name) ||
        (count && (!json_is_integer(count) || json_integer_value(count) < 1))) {
      json_decref(body);
      return send_error(x, 400, "request.invalid",
                        "\"from\" must be {\"name\": string, \"count\"?: "
                        "integer >= 1}");
    }
    uint32_t n = count ? (uint32_t)json_integer_value(count) : 1;
    rc = duro_instance_restart(s->engine, wf, id, name, n);
    if (rc == DURO_E_CANNOT_RESTART && name) {
      /* `name` points into `body`: format the reply before freeing it
       * (test_http caught a use-after-free here). */
      send_error(x, 409, duro_err_name(rc),
                 "%s/%s cannot be restarted from step \"%s\"#%u: "
                 "the journal has no such step, or the instance has "
                 "not ended",
                 wf, id, name, n);
      json_decref(body);
      return 0;
    }
  } else {
    rc = -1;
  }
  json_decref(body);
  if (rc == -1)
    return send_error(x, 400, "request.invalid",
                      "\"status\" must be pause, resume, terminate or "
                      "restart");
  if (rc)
    return send_engine_error(x, rc, wf, id);
  duro_status now;
  rc = duro_instance_status(s->engine, wf, id, &now);
  if (rc)
    return send_engine_error(x, rc, wf, id);
  return send_json(
      x, 200,
      json_pack("{s:s,s:s}", "id", id, "status", duro_status_name(now)));
}

static int send_event(http_server *s, http_exchange *x, const char *wf,
                      const char *id, const char *type) {
  int sent;
  json_t *payload = parse_body(x, json_null(), &sent);
  if (!payload)
    return 0;
  char *text = json_dumps(payload, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(payload);
  int rc = duro_instance_send_event(s->engine, wf, id, type, text);
  free(text);
  if (rc == DURO_E_INVALID_PARAMS)
    return send_error(x, 400, duro_err_name(rc),
                      "the event payload is over the size limit");
  if (rc)
    return send_engine_error(x, rc, wf, id);
  return send_json(x, 202, json_pack("{s:s,s:s}", "id", id, "type", type));
}

static int metrics(http_server *s, http_exchange *x) {
  char *text = duro_engine_metrics(s->engine);
  send_text(x, 200, "text/plain; version=0.0.4", text, strlen(text));
  free(text);
  return 0;
}

/* ---- dispatch
 * ----------------------------------------------------------------- */

/* Constant time in the token's length: no early exit on the first
 * differing byte. */
static int token_matches(const http_server *s, h2o_req_t *req) {
  ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, -1);
  if (i < 0)
    return 0;
  h2o_iovec_t v = req->headers.entries[i].value;
  static const char prefix[] = "Bearer ";
  size_t plen = sizeof prefix - 1, tlen = strlen(s->token);
  if (v.len != plen + tlen || strncasecmp(v.base, prefix, plen) != 0)
    return 0;
  unsigned char diff = 0;
  for (size_t k = 0; k < tlen; k++)
    diff |= (unsigned char)v.base[plen + k] ^ (unsigned char)s->token[k];
  return diff == 0;
}

static int wrong_method(http_exchange *x, const char *allowed) {
  x->rs.allow = allowed;
  return send_error(x, 405, "request.method_not_allowed",
                    "%s is not allowed here; use %s", x->rq.method, allowed);
}

static int route(http_server *s, http_exchange *x) {
  char *seg[MAX_SEGMENTS];
  int n = split_path(x, seg);
  /* 200 while the host serves; "degraded" names hung attempts. */
  if (n == 1 && !strcmp(seg[0], "healthz"))
    return method_is(x, "GET")
               ? send_json(x, 200, duro_engine_health(s->engine))
               : wrong_method(x, "GET");
  if (n == 1 && !strcmp(seg[0], "metrics"))
    return method_is(x, "GET") ? metrics(s, x) : wrong_method(x, "GET");
  if (n < 3 || strcmp(seg[0], "workflows") != 0 ||
      strcmp(seg[2], "instances") != 0)
    return send_error(x, 404, "route.not_found", "no route for %s %s",
                      x->rq.method, x->rq.path);
  const char *wf = seg[1];
  if (!name_valid(wf))
    return send_error(x, 404, duro_err_name(DURO_E_WORKFLOW_NOT_FOUND),
                      "invalid workflow name");
  if (n == 3) {
    if (method_is(x, "POST"))
      return create_one(s, x, wf);
    if (method_is(x, "GET"))
      return list_instances(s, x, wf);
    return wrong_method(x, "GET, POST");
  }
  const char *id = seg[3];
  if (n == 4 && !strcmp(id, "batch") && method_is(x, "POST"))
    return create_batch(s, x, wf);
  if (!duro_instance_id_valid(id))
    return send_error(
        x, 400, duro_err_name(DURO_E_INVALID_ID),
        "instance ids are 1-100 characters of A-Z a-z 0-9 _ . : -");
  if (n == 4)
    return method_is(x, "GET") ? describe(s, x, wf, id)
                               : wrong_method(x, "GET");
  if (n == 5 && !strcmp(seg[4], "status"))
    return method_is(x, "PATCH") ? change_status(s, x, wf, id)
                                 : wrong_method(x, "PATCH");
  if (n == 6 && !strcmp(seg[4], "events")) {
    if (!name_valid(seg[5]))
      return send_error(
          x, 400, "request.invalid",
          "event types are 1-100 characters of A-Z a-z 0-9 _ . : -");
    return method_is(x, "POST") ? send_event(s, x, wf, id, seg[5])
                                : wrong_method(x, "POST");
  }
  return send_error(x, 404, "route.not_found", "no route for %s %s",
                    x->rq.method, x->rq.path);
}

/* ---- exchanges: the loop hands requests to the pool and back ------------ */

static void exchange_free(http_exchange *x) {
  http_request *rq = &x->rq;
  free(rq->method);
  free(rq->path);
  free(rq->query);
  free(rq->body);
  free(rq->segments);
  for (size_t i = 0; i < rq->n_params; i++)
    free(rq->params[i]);
  free(x->rs.body);
  free(x);
}

static void on_guard_dispose(void *p) {
  exchange_guard *g = p;
  if (g->x)
    g->x->req = NULL;
}

/* On the loop: hands the answer to H2O, unless the client is gone. */
static void respond(http_exchange *x) {
  h2o_req_t *req = x->req;
  if (!req)
    return;
  if (x->guard)
    x->guard->x = NULL;
  http_response *rs = &x->rs;
  req->res.status = rs->status ? rs->status : 500;
  req->res.reason = reason_of(req->res.status);
  const char *type = rs->type ? rs->type : "application/json";
  h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                 type, strlen(type));
  if (rs->allow)
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL,
                   rs->allow, strlen(rs->allow));
  h2o_send_inline(req, rs->body ? rs->body : "", rs->body ? rs->len : 0);
}

static void run_route(uv_work_t *w) {
  http_exchange *x = w->data;
  route(x->s, x);
}

static void after_route(uv_work_t *w, int status) {
  http_exchange *x = w->data;
  (void)status; /* the loop never cancels work */
  respond(x);
  x->s->in_flight--;
  exchange_free(x);
}

static char *iov_dup(h2o_iovec_t v) { return xstrndup(v.base, v.len); }

static int on_req(h2o_handler_t *self, h2o_req_t *req) {
  http_server *s = ((route_handler *)self)->server;
  http_exchange *x = xcalloc(1, sizeof *x);
  x->s = s;
  x->req = req;
  x->rq.method = iov_dup(req->method);
  x->rq.path = iov_dup(req->path_normalized);
  if (req->query_at != SIZE_MAX)
    x->rq.query = xstrndup(req->path.base + req->query_at + 1,
                           req->path.len - req->query_at - 1);
  /* Refusals that need no engine are answered here, on the loop. */
  if (s->token && !token_matches(s, req)) {
    send_error(x, 401, "request.unauthorized",
               "a valid \"Authorization: Bearer\" token is required");
  } else if (req->entity.base && req->entity.len > s->max_body) {
    send_error(x, 413, "request.too_large",
               "the body is %zu bytes; the limit is %zu", req->entity.len,
               s->max_body);
  } else {
    if (req->entity.base) {
      x->rq.body = xmalloc(req->entity.len + 1);
      memcpy(x->rq.body, req->entity.base, req->entity.len);
      x->rq.body[req->entity.len] = '\0';
      x->rq.body_len = req->entity.len;
    }
    x->guard =
        h2o_mem_alloc_shared(&req->pool, sizeof *x->guard, on_guard_dispose);
    x->guard->x = x;
    x->work.data = x;
    s->in_flight++;
    uv_queue_work(s->ctx.loop, &x->work, run_route, after_route);
    return 0;
  }
  respond(x);
  exchange_free(x);
  return 0;
}

size_t http_in_flight(const http_server *s) { return s ? s->in_flight : 0; }

/* ---- listening
 * ------------------------------------------------------------------- */

/* A client connection.  H2O owns the handle's `data`, so the server
 * pointer rides beside the handle. */
typedef struct http_conn {
  uv_tcp_t tcp; /* first: the close callback gets this pointer */
  http_server *server;
} http_conn;

static void on_conn_closed(uv_handle_t *handle) {
  http_conn *c = (http_conn *)handle;
  c->server->connections--;
  free(c);
}

static void on_accept(uv_stream_t *listener, int status) {
  http_server *s = listener->data;
  if (status != 0)
    return;
  http_conn *c = h2o_mem_alloc(sizeof *c);
  c->server = s;
  uv_tcp_init(listener->loop, &c->tcp);
  s->connections++;
  if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
    return;
  }
  h2o_socket_t *sock =
      h2o_uv_socket_create((uv_stream_t *)&c->tcp, on_conn_closed);
  h2o_accept(&s->accept_ctx, sock);
}

/* "127.0.0.1:8787", "[::1]:8787", "localhost:8787". */
static int parse_listen(const char *listen, struct sockaddr_storage *addr,
                        int *loopback) {
  const char *colon = strrchr(listen, ':');
  if (!colon || colon == listen)
    return -1;
  char host[64];
  size_t hl = (size_t)(colon - listen);
  if (listen[0] == '[' && colon[-1] == ']') {
    listen++;
    hl -= 2;
  }
  if (hl >= sizeof host)
    return -1;
  memcpy(host, listen, hl);
  host[hl] = '\0';
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end || port < 0 || port > 65535)
    return -1;
  if (!strcmp(host, "localhost"))
    strcpy(host, "127.0.0.1");
  struct sockaddr_in *v4 = (struct sockaddr_in *)addr;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)addr;
  if (uv_ip4_addr(host, (int)port, v4) == 0) {
    *loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    return 0;
  }
  if (uv_ip6_addr(host, (int)port, v6) == 0) {
    *loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
    return 0;
  }
  return -1;
}

/* The listen address and the token the config asks for, checked against
 * the bind policy.  *token_out is from the environment (not copied). */
static int resolve(const config *cfg, struct sockaddr_storage *addr,
                   const char **token_out, char *err, size_t errlen) {
  const char *listen = cfg->http.listen ? cfg->http.listen : "127.0.0.1:8787";
  int loopback = 0;
  const config_pos *lp = &cfg->http.listen_pos, *tp = &cfg->http.token_env_pos;
  if (parse_listen(listen, addr, &loopback) != 0) {
    snprintf(err, errlen, "%s:%d:%d: http.listen \"%s\" is not host:port",
             cfg->file, lp->line, lp->column, listen);
    return -1;
  }
  const char *token = NULL;
  if (cfg->http.token_env) {
    token = getenv(cfg->http.token_env);
    if (!token || !*token) {
      snprintf(err, errlen,
               "%s:%d:%d: http.token_env names %s, which is not set or empty",
               cfg->file, tp->line, tp->column, cfg->http.token_env);
      return -1;
    }
  }
  if (!loopback && !token && !cfg->http.allow_insecure) {
    snprintf(err, errlen,
             "%s:%d:%d: http.listen %s is not a loopback address: set "
             "http.token_env (or http.allow_insecure: true)",
             cfg->file, lp->line, lp->column, listen);
    return -1;
  }
  *token_out = token;
  return 0;
}

int http_check(const config *cfg, char *err, size_t errlen) {
  struct sockaddr_storage addr;
  const char *token;
  return resolve(cfg, &addr, &token, err, errlen);
}

void http_attach(http_server *s, duro_engine *e) { s->engine = e; }

int http_bind(const config *cfg, int *fd_out, char *err, size_t errlen) {
  const char *where = cfg->http.listen ? cfg->http.listen : "127.0.0.1:8787";
  struct sockaddr_storage addr;
  const char *token;
  if (resolve(cfg, &addr, &token, err, errlen) != 0)
    return -1;
  int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1;
  socklen_t alen = addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                              : sizeof(struct sockaddr_in);
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
      bind(fd, (struct sockaddr *)&addr, alen) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    snprintf(err, errlen, "%s: cannot listen on %s: %s", cfg->file, where,
             strerror(errno));
    if (fd >= 0)
      close(fd);
    return -1;
  }
  *fd_out = fd;
  return 0;
}

int http_start(uv_loop_t *loop, duro_engine *e, const config *cfg,
               int listen_fd, http_server **out, char *err, size_t errlen) {
  const char *listen = cfg->http.listen ? cfg->http.listen : "127.0.0.1:8787";
  struct sockaddr_storage addr;
  const char *token;
  if (resolve(cfg, &addr, &token, err, errlen) != 0)
    return -1;

  http_server *s = xcalloc(1, sizeof *s);
  s->engine = e;
  s->token = token ? xstrdup(token) : NULL;
  s->max_body = cfg->http.max_body_bytes > 0 ? (size_t)cfg->http.max_body_bytes
                                             : 1024 * 1024;
  h2o_config_init(&s->config);
  /* H2O refuses bodies past its own limit with a plain-text 413; keep that
   * limit above ours so clients get the JSON error in the common case. */
  s->config.max_request_entity_size = s->max_body * 2 + 65536;
  h2o_hostconf_t *host = h2o_config_register_host(
      &s->config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
  h2o_pathconf_t *path = h2o_config_register_path(host, "/", 0);
  route_handler *h =
      (route_handler *)h2o_create_handler(path, sizeof(route_handler));
  h->super.on_req = on_req;
  h->server = s;
  h2o_context_init(&s->ctx, loop, &s->config);
  s->accept_ctx.ctx = &s->ctx;
  s->accept_ctx.hosts = s->config.hosts;

  uv_tcp_init(loop, &s->listener);
  s->listener.data = s;
  int rc = listen_fd >= 0
               ? uv_tcp_open(&s->listener, listen_fd)
               : uv_tcp_bind(&s->listener, (struct sockaddr *)&addr, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&s->listener, SOMAXCONN, on_accept);
  if (rc != 0) {
    snprintf(err, errlen, "%s: cannot listen on %s: %s", cfg->file, listen,
             uv_strerror(rc));
    uv_close((uv_handle_t *)&s->listener, NULL);
    *out = s; /* the caller frees it once the loop closed the handle */
    return -1;
  }
  s->listening = 1;
  struct sockaddr_storage bound;
  int blen = sizeof bound;
  uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen);
  s->port = ntohs(bound.ss_family == AF_INET6
                      ? ((struct sockaddr_in6 *)&bound)->sin6_port
                      : ((struct sockaddr_in *)&bound)->sin_port);
  *out = s;
  return 0;
}

int http_port(const http_server *s) { return s->port; }

void http_stop(http_server *s) {
  if (s && s->listening) {
    uv_close((uv_handle_t *)&s->listener, NULL);
    s->listening = 0;
  }
}

/* H2O 2.2 asserts when a context is disposed with connections still open
 * (a client holding a keep-alive connection at shutdown).  The process is
 * about to exit then, so the context is left to it, kept reachable here. */
static http_server *volatile left_to_exit; /* volatile: a store to a
   never-read static is otherwise dropped at -O2, and LSan then reported
   the context and the open connections (test_http) */

void http_free(http_server *s) {
  if (!s)
    return;
  if (s->connections > 0) {
    log_warn("http: %zu connection(s) still open at shutdown", s->connections);
    left_to_exit = s;
    return;
  }
  h2o_context_dispose(&s->ctx);
  h2o_config_dispose(&s->config);
  free(s->token);
  free(s);
}
