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
 * the code implies (error.h's names are the codes); a storage error is a
 * 503 with Retry-After, since the same request may succeed a moment later.
 *
 * Memory before authentication.  H2O 2.2 calls a handler only once a
 * request's whole body is in, so a token checked there comes after the
 * body was buffered.  Two things keep unauthenticated and oversized
 * requests from costing memory:
 *  - the gate: on a listener with a token, the first request of every
 *    connection is read here up to the end of its head (at most 64 KiB),
 *    parsed with H2O's own parser, and answered 401 at once when the token
 *    is missing or wrong; its body is never stored (it is read and thrown
 *    away while the answer is delivered).  With the right token, the bytes
 *    read so far and the socket go to H2O.  A 401 always closes the
 *    connection, so a client without the token never gets to a second
 *    request.  The dashboard's static files (a GET of "/" or "/ui/..."
 *    without a body) are the exception: they hold no data, and the page
 *    sends the token with the API calls it makes;
 *  - bounded reads: every read H2O makes goes through h2o_alloc_bounded,
 *    which refuses it (H2O then closes the connection) when the bytes all
 *    connections hold would pass the budget (http_budget), and, on a
 *    listener with a token, once the head of a later request on a kept
 *    connection shows a wrong token.
 * H2O refuses a Content-Length over http.max_body_bytes from the headers
 * (its 413 is rewritten as our JSON error) and stops a chunked body there.
 *
 * Lifecycle: http_start binds and listens; http_stop closes the listener;
 * the host runs the loop until http_in_flight() is 0, closes the remaining
 * handles (connections) and calls http_free, which disposes the H2O
 * context. */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define H2O_USE_LIBUV 1
#include <h2o.h>

#include "dashboard.h"
#include "duration.h"
#include "error.h"
#include "log.h"
#include "map.h"
#include "queue.h"
#include "reload.h"
#include "trigger.h"
#include "util.h"

#define MAX_SEGMENTS 8
#define MAX_BATCH 100
#define GATE_HEAD_MAX 65536    /* bytes of a head the gate reads */
#define GATE_LINGER_MS 2000    /* how long a refused body is read away */
#define BUDGET_MIN (64u << 20) /* http_budget: at least 64 MiB, */
#define BUDGET_BODIES 16       /* or this many bodies of the largest size */
#define BUSY_LOG_MS 10000      /* at most one "over the budget" line */
#define BIND_WAIT_MS 3000      /* http_bind: how long a taken port is retried */
#define BIND_RETRY_MS 20
/* The dashboard's pages: their own files only, never in a frame. */
#define DASHBOARD_CSP                                                          \
  "default-src 'none'; script-src 'self'; style-src 'self'; "                  \
  "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "                \
  "form-action 'none'; frame-ancestors 'none'"

/* picohttpparser, the parser H2O reads HTTP/1 with.  libh2o exports it
 * but Debian installs no header for it; these are its declarations, the
 * same since 2014.  The gate parses heads with it, so the gate and H2O
 * never read one head two ways. */
struct phr_header {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
};
int phr_parse_request(const char *buf, size_t len, const char **method,
                      size_t *method_len, const char **path, size_t *path_len,
                      int *minor_version, struct phr_header *headers,
                      size_t *num_headers, size_t last_len);

typedef struct http_conn http_conn;

struct http_server {
  duro_engine *engine;
  reloader *plugins; /* NULL: no plugin routes (tests, fuzzing) */
  h2o_globalconf_t config;
  h2o_context_t ctx;
  h2o_accept_ctx_t accept_ctx;
  uv_tcp_t listener;
  uv_prepare_t bound; /* rewraps H2O's reads before each poll */
  uv_timer_t sweep;   /* the gate's deadlines */
  int started;        /* the H2O context exists */
  int listening;
  int handles; /* bound, sweep and done_async, until their close callbacks
                 ran */
  int sweep_closed;
  int stopping;
  int port;
  char *token; /* NULL = no auth */
  /* Without a token, requests from browsers are checked (refuse_foreign):
   * the Host and Origin names that are the listener's own. */
  int guard;
  char *listen_host;  /* as http.listen gives it: "127.0.0.1", "[::1]" */
  int loopback_names; /* localhost, 127.0.0.1 and [::1] are its own */
  char **allowed;     /* http.allowed_hosts (borrowed from the config) */
  size_t n_allowed;
  size_t max_body;
  int64_t max_wait_ms; /* the longest ?wait= (http.max_wait) */
  size_t budget;
  size_t gate_bytes;   /* heads held by the gate */
  size_t h2o_bytes;    /* H2O's input buffers */
  size_t copied_bytes; /* bodies copied into exchanges */
  uint64_t busy_logged;
  size_t busy_refusals;
  /* Parked waits (GETs ?wait= whose timer runs): their connections' input
   * buffers, which H2O keeps until the answer, are counted here instead
   * of in the budget of requests being received, against a budget of
   * their own; past it a wait is answered 503. */
  size_t parked, parked_bytes;
  /* What /metrics shows, published by the loop before each poll (the
   * route runs on the pool). */
  size_t shown_parked, shown_parked_bytes, shown_bytes;
  /* Requests received past the token check, by method (REQ_*): a
   * client's round trips, as /metrics counts them (atomic: the loop
   * adds, the pool reads). */
  uint64_t requests[4];
  idmap by_sock;      /* H2O's socket -> its http_conn */
  http_conn *conns;   /* every open client connection */
  size_t connections; /* their number */
  size_t in_flight;   /* exchanges handed to the thread pool */
  /* Answers completed off the loop (a create's commit): the thread that
   * committed queues the exchange here and wakes the loop, which sends
   * it.  Open until the last exchange in flight is answered. */
  uv_async_t done_async;
  int done_open;
  pthread_mutex_t done_mu;
  struct http_exchange *done_head;
  /* GETs waiting for their instance to end whose timer runs (loop). */
  struct http_wait *waits;
  /* While stopping, answers stay in flight one more loop turn, so their
   * writes complete before the host closes the connections. */
  uv_idle_t linger;
  int linger_open;
  size_t lingering;
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
  int close;         /* close the connection after it */
  int dashboard;     /* a page: sent with the framing and script policy */
  char *body;        /* malloc'ed */
  size_t len;
} http_response;

typedef struct exchange_guard exchange_guard;
typedef struct http_wait http_wait;
typedef struct create_wait create_wait;

typedef struct http_exchange {
  uv_work_t work;
  http_server *s;
  /* Who must let go before the answer is sent (on the loop): the route's
   * run on the pool, and a commit the route handed it to. */
  int owners;
  struct http_exchange *next_done;
  h2o_req_t *req; /* NULL once H2O disposed it (the client went away) */
  exchange_guard *guard;
  http_wait *wait;        /* a GET ?wait= not yet answered, or NULL */
  create_wait *then_wait; /* a POST ?wait=: the wait after its commit */
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
  case 403:
    return "Forbidden";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 409:
    return "Conflict";
  case 413:
    return "Payload Too Large";
  case 415:
    return "Unsupported Media Type";
  case 417:
    return "Expectation Failed";
  case 431:
    return "Request Header Fields Too Large";
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

/* {"error":{"code","message"}} as text (malloc'ed). */
static char *error_text(const char *code, char *msg) {
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
  char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
  json_decref(body);
  return text ? text : xstrdup("{}");
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
  char *text = error_text(code, msg);
  free(msg);
  send_text(x, status, "application/json", text, strlen(text));
  free(text);
  return 0;
}

static int status_of(int rc) {
  switch (rc) {
  case DURO_E_NOT_FOUND:
  case DURO_E_WORKFLOW_NOT_FOUND:
  case DURO_E_QUEUE_NOT_FOUND:
    return 404;
  case DURO_E_MESSAGE_TOO_LARGE:
  case DURO_E_BATCH_TOO_LARGE:
    return 413;
  case DURO_E_ALREADY_EXISTS:
  case DURO_E_CANNOT_RESTART:
  case DURO_E_CANNOT_TERMINATE:
  case DURO_E_CANNOT_PAUSE:
  case DURO_E_CANNOT_RESUME:
  case DURO_E_INSTANCE_ENDED:
    return 409;
  case DURO_E_INVALID_ID:
  case DURO_E_INVALID_PARAMS:
  case DURO_E_INVALID_ARGUMENT:
  case DURO_E_INVALID_DURATION:
  case DURO_E_DUPLICATE_IN_BATCH:
  case DURO_E_INVALID_MESSAGE:
    return 400;
  /* A full disk or a failing write: nothing was done, and the engine
   * retries its own writes; the client should too (Retry-After). */
  case DURO_E_STORAGE:
  case DURO_E_HOST_UNAVAILABLE:
  case DURO_E_SHUTDOWN:
  case DURO_E_OVERLOADED:
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

/* Creations are answered when their commit is done, without a thread
 * waiting for it (on a served connection; a request without one, as in
 * http_serve, waits).  The route's thread returns at once, so creations
 * arriving meanwhile share the commit. */
static void exchange_complete(http_exchange *x);

typedef struct create_answer {
  http_exchange *x;
  char *wf, *id; /* for the error's message */
  int batch;
} create_answer;

/* POST /workflows/{wf}/instances?wait=DURATION: once the commit created
 * the instance, the exchange goes on as a GET ?wait= of it (wait_created),
 * answered 201 with its light status.  The create's own answer (201
 * queued) stands wherever that status cannot be read. */
struct create_wait {
  char *wf, *id; /* id: set once the commit created the instance */
  int64_t ms;    /* clamped to http.max_wait */
  int started;   /* the wait was handed to the pool */
  uv_work_t work;
};

static int wait_param(http_exchange *x, int64_t *ms);
static int wait_for_end(http_server *s, http_exchange *x, const char *wf,
                        const char *id, int64_t ms);
static int waits_full(http_server *s, h2o_req_t *req);
static void note_busy(http_server *s);

static void answer_created(create_answer *a, int rc, json_t *result) {
  http_exchange *x = a->x;
  if (rc) {
    send_engine_error(x, rc, a->wf, a->id);
  } else if (a->batch) {
    /* "rc" is the engine's internal code; clients get "code". */
    size_t i;
    json_t *err;
    json_array_foreach(json_object_get(result, "errors"), i, err)
        json_object_del(err, "rc");
    send_json(x, 200, json_incref(result));
  } else {
    json_t *one = json_array_get(json_object_get(result, "created"), 0);
    if (one && x->then_wait)
      x->then_wait->id = xstrdup(json_string_value(json_object_get(one, "id")));
    if (one)
      send_json(x, 201,
                json_pack("{s:O,s:s}", "id", json_object_get(one, "id"),
                          "status", "queued"));
    else
      send_engine_error(
          x,
          (int)json_integer_value(json_object_get(
              json_array_get(json_object_get(result, "errors"), 0), "rc")),
          a->wf, a->id);
  }
  json_decref(result);
}

static void on_created(void *ctx, int rc, json_t *result) {
  create_answer *a = ctx;
  http_exchange *x = a->x;
  answer_created(a, rc, result);
  free(a->wf);
  free(a->id);
  free(a);
  exchange_complete(x);
}

/* Hands the creations to the engine; the answer follows their commit. */
static int create_deferred(http_server *s, http_exchange *x, const char *wf,
                           const duro_create_req *reqs, size_t n, int batch) {
  create_answer *a = xcalloc(1, sizeof *a);
  *a = (create_answer){
      x, xstrdup(wf), !batch && reqs[0].id ? xstrdup(reqs[0].id) : NULL, batch};
  if (!x->req) { /* no loop to answer from: wait */
    json_t *result = NULL;
    int rc = duro_instance_create_batch(s->engine, wf, reqs, n, &result);
    answer_created(a, rc, result);
    if (x->then_wait && x->then_wait->id)
      wait_for_end(s, x, x->then_wait->wf, x->then_wait->id, 0);
  } else {
    x->owners++; /* before the commit can complete */
    int rc =
        duro_instance_create_batch_async(s->engine, wf, reqs, n, on_created, a);
    if (rc == 0)
      return 0; /* a is on_created's now */
    x->owners--;
    send_engine_error(x, rc, wf, a->id);
  }
  free(a->wf);
  free(a->id);
  free(a);
  return 0;
}

/* Before anything is created: a ?wait= that could not be parked is
 * answered 503 now, while a retry cannot create the instance twice.
 * Returns 1 when the request was answered. */
static int create_wait_prepare(http_server *s, http_exchange *x,
                               const char *wf) {
  int64_t ms;
  int given = wait_param(x, &ms);
  if (given <= 0)
    return given < 0;
  if (x->req && ms > 0 && waits_full(s, x->req)) {
    note_busy(s);
    send_error(x, 503, "server.busy",
               "%zu requests wait for their instance already; retry",
               s->parked);
    return 1;
  }
  x->then_wait = xcalloc(1, sizeof *x->then_wait);
  x->then_wait->wf = xstrdup(wf);
  x->then_wait->ms = ms;
  return 0;
}

static int create_one(http_server *s, http_exchange *x, const char *wf) {
  if (create_wait_prepare(s, x, wf))
    return 0;
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
  duro_create_req req = {
      .id = f.id, .params = f.params, .retention_ms = f.retention_ms};
  create_deferred(s, x, wf, &req, 1, 0);
  free(f.params);
  json_decref(body);
  return 0;
}

static int create_batch(http_server *s, http_exchange *x, const char *wf) {
  if (query_param(x, "wait"))
    return send_error(x, 400, "request.invalid",
                      "a batch is answered once created: wait for each "
                      "instance with GET .../instances/{id}?wait=");
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
  create_deferred(s, x, wf, reqs, n, 1);
  for (size_t i = 0; i < n; i++)
    free(f[i].params);
  json_decref(body);
  return 0;
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

/* The light status: the row without steps or attempts. */
static int summary(http_server *s, http_exchange *x, const char *wf,
                   const char *id) {
  json_t *out = NULL;
  int rc = duro_instance_summary(s->engine, wf, id, &out);
  if (rc && x->then_wait)
    return 0; /* the create's 201 stands: the instance exists */
  if (rc)
    return send_engine_error(x, rc, wf, id);
  return send_json(x, x->then_wait ? 201 : 200, out);
}

/* ---- GET ?wait=: answered when the instance ends --------------------------
 *
 * The route registers a watch (engine.h) and leaves the exchange
 * unanswered, holding one more owner.  Three things may end the wait, all
 * decided on the loop: the watch's call (from an engine thread, through
 * the done queue: wait_fired), the wait's timer, and the end of the
 * client or of the server (wait_timeout).  The first gives the watch back
 * and reads the light status on the pool (wait_answer); the answer goes
 * out once the timer's handle is closed.  A timeout whose cancel finds
 * the watch already called does nothing: that call is on its way to the
 * loop and answers.  A waiter holds no thread, only its exchange, a watch
 * and a timer. */

struct http_wait {
  http_exchange *x;
  const char *wf, *id; /* in x's request */
  duro_watch *watch;   /* NULL once given back */
  int64_t ms;
  uv_timer_t timer;
  int timer_open;  /* the timer was initialized (it is closed at the end) */
  int answering;   /* the status read is queued: the wait is over */
  http_conn *conn; /* parked on it (wait_park), or NULL */
  size_t cost;     /* its input buffer's bytes, in s->parked_bytes */
  http_wait *prev, *next; /* s->waits while the timer runs */
  uv_work_t read;
};

static void release(http_exchange *x);
static int wait_park(http_wait *w);
static void wait_unpark(http_wait *w);

/* An engine thread: the instance ended. */
static void on_instance_ended(void *ctx, const char *status) {
  (void)status; /* the answer reads the row, output and error included */
  exchange_complete(ctx);
}

static void wait_unlink(http_wait *w) {
  http_server *s = w->x->s;
  if (w->prev)
    w->prev->next = w->next;
  else if (s->waits == w)
    s->waits = w->next;
  if (w->next)
    w->next->prev = w->prev;
  w->prev = w->next = NULL;
}

static void wait_read(uv_work_t *r) {
  http_wait *w = r->data;
  summary(w->x->s, w->x, w->wf, w->id);
}

static void wait_closed(uv_handle_t *h) {
  http_wait *w = h->data;
  http_exchange *x = w->x;
  wait_unpark(w); /* before H2O reads the connection again */
  x->wait = NULL;
  free(w);
  release(x);
}

/* On the loop: the status is in x->rs; the timer's handle goes first, so
 * nothing of the wait is left once the exchange is released. */
static void wait_done(http_wait *w) {
  if (w->timer_open) {
    uv_close((uv_handle_t *)&w->timer, wait_closed);
    return;
  }
  w->timer.data = w; /* never initialized: only carries w */
  wait_closed((uv_handle_t *)&w->timer);
}

static void after_wait_read(uv_work_t *r, int status) {
  (void)status;
  wait_done(r->data);
}

/* On the loop, once: reads the light status on the pool to answer. */
static void wait_answer(http_wait *w) {
  w->answering = 1;
  if (w->timer_open) {
    uv_timer_stop(&w->timer);
    wait_unlink(w);
  }
  w->read.data = w;
  int rc =
      uv_queue_work(w->x->s->ctx.loop, &w->read, wait_read, after_wait_read);
  if (rc != 0) {
    send_error(w->x, 503, "server.busy", "the answer could not be queued: %s",
               uv_strerror(rc));
    wait_done(w);
  }
}

/* On the loop: the watch's call arrived. */
static void wait_fired(http_wait *w) {
  if (w->watch) {
    duro_watch_cancel(w->x->s->engine, w->watch); /* gives it back */
    w->watch = NULL;
  }
  if (!w->answering)
    wait_answer(w);
}

/* On the loop: the time ran out, the client went away, or the server
 * stops: answer with the status as it is. */
static void wait_timeout(http_wait *w) {
  if (w->answering || !w->watch)
    return; /* answered, or the watch's call is on its way */
  int fired = duro_watch_cancel(w->x->s->engine, w->watch);
  w->watch = NULL;
  if (!fired)
    wait_answer(w);
}

static void on_wait_timer(uv_timer_t *t) { wait_timeout(t->data); }

/* On the loop: the waits parked already hold their budget; this one is
 * answered 503 now (unless the watch's call, on its way, answers).  A
 * created instance's wait, past the check its create made, is answered
 * with the status as it is: a 503 would tell the client nothing was
 * created. */
static void wait_busy(http_wait *w) {
  http_server *s = w->x->s;
  int fired = duro_watch_cancel(s->engine, w->watch);
  w->watch = NULL;
  if (fired)
    return;
  note_busy(s);
  if (w->x->then_wait) {
    wait_answer(w);
    return;
  }
  w->answering = 1;
  send_error(w->x, 503, "server.busy",
             "%zu requests wait for their instance already; retry", s->parked);
  wait_done(w);
}

/* On the loop, after the route returned: times the wait. */
static void wait_arm(http_wait *w) {
  http_server *s = w->x->s;
  if (w->answering)
    return;
  if (!w->x->req || s->stopping) {
    wait_timeout(w);
    return;
  }
  if (wait_park(w) < 0) {
    wait_busy(w);
    return;
  }
  int rc = uv_timer_init(s->ctx.loop, &w->timer);
  if (rc == 0) {
    w->timer_open = 1;
    w->timer.data = w;
    rc = uv_timer_start(&w->timer, on_wait_timer, (uint64_t)w->ms, 0);
  }
  if (rc != 0) {
    wait_timeout(w);
    return;
  }
  w->next = s->waits;
  if (s->waits)
    s->waits->prev = w;
  s->waits = w;
}

/* The ?wait= duration, clamped to http.max_wait: 1 with *ms set, 0 when
 * there is none, -1 when it is not a duration (answered 400). */
static int wait_param(http_exchange *x, int64_t *ms) {
  const char *wait = query_param(x, "wait");
  if (!wait)
    return 0;
  if (duration_parse(wait, ms) != 0) {
    send_error(x, 400, "request.invalid",
               "wait must be a duration such as \"30s\", \"500ms\" "
               "or milliseconds");
    return -1;
  }
  if (*ms > x->s->max_wait_ms)
    *ms = x->s->max_wait_ms;
  return 1;
}

/* On the pool: watches the instance and leaves x unanswered (wait_arm
 * times it once the caller returned), or answers its light status now
 * when it has ended, the wait is 0 or there is no loop to answer from
 * later. */
static int wait_for_end(http_server *s, http_exchange *x, const char *wf,
                        const char *id, int64_t ms) {
  if (ms == 0 || !x->req)
    return summary(s, x, wf, id);
  http_wait *w = xcalloc(1, sizeof *w);
  *w = (http_wait){.x = x, .wf = wf, .id = id, .ms = ms};
  x->wait = w;
  x->owners++; /* before the watch can be called */
  int rc =
      duro_instance_watch(s->engine, wf, id, on_instance_ended, x, &w->watch);
  if (rc == 0)
    return 0; /* answered by the watch or the timer */
  x->owners--;
  x->wait = NULL;
  free(w);
  if (rc == DURO_WATCH_ENDED)
    return summary(s, x, wf, id);
  if (x->then_wait)
    return 0; /* the create's 201 stands: the instance exists */
  return send_engine_error(x, rc, wf, id);
}

/* GET /workflows/{wf}/instances/{id}[?wait=DURATION]: the whole
 * instance, or, with wait, its light status once it has ended or the
 * wait (at most http.max_wait) ran out. */
static int get_instance(http_server *s, http_exchange *x, const char *wf,
                        const char *id) {
  int64_t ms;
  int given = wait_param(x, &ms);
  if (given == 0)
    return describe(s, x, wf, id);
  return given < 0 ? 0 : wait_for_end(s, x, wf, id, ms);
}

static void run_wait_created(uv_work_t *r) {
  http_exchange *x = r->data;
  wait_for_end(x->s, x, x->then_wait->wf, x->then_wait->id, x->then_wait->ms);
}

static void after_route(uv_work_t *w, int status);

/* On the loop: the create's commit is done and created the instance; the
 * create's hold on x goes to the wait, which starts on the pool (the
 * watch reads the journal).  A client gone already gets no wait. */
static void wait_created(http_exchange *x) {
  create_wait *cw = x->then_wait;
  cw->started = 1;
  cw->work.data = x;
  if (!x->req || x->s->stopping ||
      uv_queue_work(x->s->ctx.loop, &cw->work, run_wait_created, after_route) !=
          0)
    release(x); /* with the create's answer */
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
    char *why;
    rc = duro_instance_restart_why(s->engine, wf, id, name, n, &why);
    if (rc == DURO_E_CANNOT_RESTART && why) {
      /* `name` points into `body`: format the reply before freeing it
       * (test_http caught a use-after-free here). */
      if (name)
        send_error(x, 409, duro_err_name(rc),
                   "%s/%s cannot be restarted from step \"%s\"#%u: %s", wf, id,
                   name, n, why);
      else
        send_error(x, 409, duro_err_name(rc), "%s/%s cannot be restarted: %s",
                   wf, id, why);
      free(why);
      json_decref(body);
      return 0;
    }
    free(why);
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

/* An event is answered 202 once it is on disk, without a thread waiting
 * for the commit (as a creation is). */
typedef struct event_answer {
  http_exchange *x;
  char *wf, *id, *type;
} event_answer;

/* status: the ended instance's, when known (NULL: an end that overtook
 * the event's commit). */
static void answer_event(event_answer *a, int rc, const char *status) {
  if (rc == DURO_E_INVALID_PARAMS)
    send_error(a->x, 400, duro_err_name(rc),
               "the event payload is over the size limit");
  else if (rc == DURO_E_INSTANCE_ENDED)
    send_error(a->x, 409, duro_err_name(rc),
               "%s/%s is %s: an ended instance takes no events (restart it "
               "first); the event was not stored",
               a->wf, a->id, status ? status : "ended");
  else if (rc)
    send_engine_error(a->x, rc, a->wf, a->id);
  else
    send_json(a->x, 202, json_pack("{s:s,s:s}", "id", a->id, "type", a->type));
}

static void event_answer_free(event_answer *a) {
  free(a->wf);
  free(a->id);
  free(a->type);
  free(a);
}

static void on_event_stored(void *ctx, int rc) {
  event_answer *a = ctx;
  http_exchange *x = a->x;
  answer_event(a, rc, NULL);
  event_answer_free(a);
  exchange_complete(x);
}

static int send_event(http_server *s, http_exchange *x, const char *wf,
                      const char *id, const char *type) {
  int sent;
  json_t *payload = parse_body(x, json_null(), &sent);
  if (!payload)
    return 0;
  char *text = json_dumps(payload, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(payload);
  event_answer *a = xcalloc(1, sizeof *a);
  *a = (event_answer){x, xstrdup(wf), xstrdup(id), xstrdup(type)};
  int rc;
  if (!x->req) { /* no loop to answer from: wait */
    rc = duro_instance_send_event(s->engine, wf, id, type, text);
  } else {
    x->owners++; /* before the commit can complete */
    rc = duro_instance_send_event_async(s->engine, wf, id, type, text,
                                        on_event_stored, a);
    if (rc == 0) {
      free(text);
      return 0; /* a is on_event_stored's now */
    }
    x->owners--;
  }
  free(text);
  duro_status now;
  int ended = rc == DURO_E_INSTANCE_ENDED &&
              duro_instance_status(s->engine, wf, id, &now) == 0;
  answer_event(a, rc, ended ? duro_status_name(now) : NULL);
  event_answer_free(a);
  return 0;
}

/* Each loaded plugin build, with the instances pinned to it. */
static char *plugin_metrics(http_server *s) {
  if (!s->plugins)
    return xstrdup("");
  json_t *list = reload_list(s->plugins);
  char *text = xstrdup("# HELP duro_plugin_build_instances Instances that "
                       "have not ended, pinned to each loaded build.\n"
                       "# TYPE duro_plugin_build_instances gauge\n");
  size_t i, k;
  json_t *p, *b;
  json_array_foreach(json_object_get(list, "plugins"), i, p) {
    json_array_foreach(json_object_get(p, "builds"), k, b) {
      char *line =
          xasprintf("%sduro_plugin_build_instances{plugin=\"%s\",build=\"%s\","
                    "newest=\"%d\"} %" JSON_INTEGER_FORMAT "\n",
                    text, json_string_value(json_object_get(p, "name")),
                    json_string_value(json_object_get(b, "build")),
                    json_is_true(json_object_get(b, "newest")),
                    json_integer_value(json_object_get(b, "instances")));
      free(text);
      text = line;
    }
  }
  json_decref(list);
  return text;
}

/* The listener's own gauges, as the loop last published them. */
enum { REQ_GET, REQ_POST, REQ_PATCH, REQ_OTHER };

static void count_request(http_server *s, const h2o_req_t *req) {
  static const char *const names[] = {"GET", "POST", "PATCH"};
  int m = REQ_OTHER;
  for (int i = 0; i < REQ_OTHER; i++)
    if (h2o_memis(req->method.base, req->method.len, names[i],
                  strlen(names[i])))
      m = i;
  __atomic_fetch_add(&s->requests[m], 1, __ATOMIC_RELAXED);
}

static uint64_t requests_of(http_server *s, int m) {
  return __atomic_load_n(&s->requests[m], __ATOMIC_RELAXED);
}

static char *http_metrics(http_server *s) {
  return xasprintf(
      "# HELP duro_http_requests_total Requests received (past the token "
      "check), by method.\n"
      "# TYPE duro_http_requests_total counter\n"
      "duro_http_requests_total{method=\"GET\"} %" PRIu64 "\n"
      "duro_http_requests_total{method=\"POST\"} %" PRIu64 "\n"
      "duro_http_requests_total{method=\"PATCH\"} %" PRIu64 "\n"
      "duro_http_requests_total{method=\"other\"} %" PRIu64 "\n"
      "# HELP duro_http_waiting GETs ?wait= waiting for their instance to "
      "end.\n"
      "# TYPE duro_http_waiting gauge\n"
      "duro_http_waiting %zu\n"
      "# HELP duro_http_waiting_bytes Bytes the waiting GETs' connections "
      "hold (their own budget).\n"
      "# TYPE duro_http_waiting_bytes gauge\n"
      "duro_http_waiting_bytes %zu\n"
      "# HELP duro_http_request_bytes Bytes of requests being received, "
      "against the request budget.\n"
      "# TYPE duro_http_request_bytes gauge\n"
      "duro_http_request_bytes %zu\n"
      "# HELP duro_http_budget_bytes Each of the two budgets, in bytes.\n"
      "# TYPE duro_http_budget_bytes gauge\n"
      "duro_http_budget_bytes %zu\n",
      requests_of(s, REQ_GET), requests_of(s, REQ_POST),
      requests_of(s, REQ_PATCH), requests_of(s, REQ_OTHER),
      __atomic_load_n(&s->shown_parked, __ATOMIC_RELAXED),
      __atomic_load_n(&s->shown_parked_bytes, __ATOMIC_RELAXED),
      __atomic_load_n(&s->shown_bytes, __ATOMIC_RELAXED),
      s->budget == SIZE_MAX ? 0 : s->budget);
}

static int metrics(http_server *s, http_exchange *x) {
  char *engine = duro_engine_metrics(s->engine);
  char *builds = plugin_metrics(s);
  char *own = http_metrics(s);
  char *text = xasprintf("%s%s%s", engine, builds, own);
  free(own);
  send_text(x, 200, "text/plain; version=0.0.4", text, strlen(text));
  free(engine);
  free(builds);
  free(text);
  return 0;
}

/* ---- dispatch
 * ----------------------------------------------------------------- */

static int name_is(const http_header *h, const char *name) {
  return h->name_len == strlen(name) &&
         strncasecmp(h->name, name, h->name_len) == 0;
}

/* The first header named `name`, or NULL (as H2O's lookup). */
static const http_header *header_of(const http_header *h, size_t n,
                                    const char *name) {
  for (size_t i = 0; i < n; i++)
    if (name_is(&h[i], name))
      return &h[i];
  return NULL;
}

/* "Authorization: Bearer <token>", compared in constant time in the
 * token's length: no early exit on the first differing byte. */
static int token_ok(const http_server *s, const http_header *h, size_t n) {
  if (!s->token)
    return 1;
  const http_header *a = header_of(h, n, "authorization");
  if (!a)
    return 0;
  static const char prefix[] = "Bearer ";
  size_t plen = sizeof prefix - 1, tlen = strlen(s->token);
  if (a->value_len != plen + tlen || strncasecmp(a->value, prefix, plen) != 0)
    return 0;
  unsigned char diff = 0;
  for (size_t k = 0; k < tlen; k++)
    diff |= (unsigned char)a->value[plen + k] ^ (unsigned char)s->token[k];
  return diff == 0;
}

/* A request for the dashboard's static files, which need no token (the
 * page asks for it and sends it with its API calls): a GET of "/" or
 * "/ui/..." without a body.  `path` may hold the query. */
static int public_request(const char *method, size_t method_len,
                          const char *path, size_t path_len,
                          const http_header *h, size_t n) {
  const char *q = memchr(path, '?', path_len);
  if (q)
    path_len = (size_t)(q - path);
  if (method_len != 3 || memcmp(method, "GET", 3) != 0 ||
      !dashboard_path(path, path_len))
    return 0;
  for (size_t i = 0; i < n; i++)
    if (name_is(&h[i], "transfer-encoding") ||
        (name_is(&h[i], "content-length") &&
         !(h[i].value_len == 1 && h[i].value[0] == '0')))
      return 0;
  return 1;
}

/* A Content-Length value as H2O reads it (digits only), or -1. */
static long long length_of(const http_header *h) {
  if (h->value_len == 0 || h->value_len > 18)
    return -1;
  long long v = 0;
  for (size_t i = 0; i < h->value_len; i++) {
    if (h->value[i] < '0' || h->value[i] > '9')
      return -1;
    v = v * 10 + (h->value[i] - '0');
  }
  return v;
}

/* A body whose length the headers give two ways.  H2O lets
 * Transfer-Encoding win over Content-Length and takes the first of two
 * Content-Lengths; a proxy in front may choose the other, and then the
 * bytes one reads as a body the other reads as a next request (request
 * smuggling, RFC 9112 6.3).  So such a request is refused, and its
 * connection closed.  Returns what is wrong, or NULL. */
static const char *framing_problem(const http_header *h, size_t n) {
  size_t te = 0, cl = 0;
  long long len = -1;
  for (size_t i = 0; i < n; i++) {
    if (name_is(&h[i], "transfer-encoding")) {
      te++;
    } else if (name_is(&h[i], "content-length")) {
      long long v = length_of(&h[i]);
      if (cl++ && v != len)
        return "the request has Content-Length headers that differ";
      len = v;
    }
  }
  if (te && cl)
    return "the request has both Transfer-Encoding and Content-Length";
  if (te > 1)
    return "the request has more than one Transfer-Encoding header";
  return NULL;
}

/* Segment `want` (0-based) of the path, split on '/' as split_path does,
 * by pointer and length (it may hold NUL bytes). */
static int segment_at(const char *p, size_t len, int want, const char **seg,
                      size_t *seg_len) {
  int k = 0;
  for (size_t i = 0; i < len;) {
    while (i < len && p[i] == '/')
      i++;
    if (i == len)
      break;
    size_t start = i;
    while (i < len && p[i] != '/')
      i++;
    if (k++ == want) {
      *seg = p + start;
      *seg_len = i - start;
      return 1;
    }
  }
  return 0;
}

static int segment_is(const char *p, size_t len, int at, const char *word) {
  const char *seg;
  size_t seg_len;
  return segment_at(p, len, at, &seg, &seg_len) && seg_len == strlen(word) &&
         memcmp(seg, word, seg_len) == 0;
}

/* A NUL byte in the path (%00 once decoded) would end the C strings the
 * routes work on, so "/instances/abc%00def" addressed instance "abc".
 * Refuses it, naming the instance id when that is the segment it is in.
 * Returns 1 when it answered. */
static int refuse_nul(http_exchange *x, const http_input *in) {
  const char *nul = memchr(in->path, '\0', in->path_len);
  if (nul) {
    const char *seg;
    size_t seg_len;
    int in_id = segment_at(in->path, in->path_len, 3, &seg, &seg_len) &&
                nul >= seg && nul < seg + seg_len &&
                segment_is(in->path, in->path_len, 0, "workflows") &&
                segment_is(in->path, in->path_len, 2, "instances");
    if (in_id)
      send_error(x, 400, duro_err_name(DURO_E_INVALID_ID),
                 "instance ids are 1-100 characters of A-Z a-z 0-9 _ . : -; "
                 "this one holds a NUL byte (%%00)");
    else
      send_error(x, 400, "request.invalid", "the path holds a NUL byte (%%00)");
    return 1;
  }
  if (in->query && memchr(in->query, '\0', in->query_len)) {
    send_error(x, 400, "request.invalid", "the query holds a NUL byte");
    return 1;
  }
  return 0;
}

/* ---- browsers, on a listener without a token -------------------------------
 *
 * Without a token any page a browser shows could reach the listener: a
 * form POST, a text/plain fetch or an <img> are sent cross-site without
 * asking, and a name of the attacker's that resolves to 127.0.0.1 (DNS
 * rebinding) even lets the page read the answers.  So, without a token:
 *  - the Host must be the listener's own (the address of http.listen;
 *    localhost, 127.0.0.1 and [::1] on loopback), with its port or none,
 *    or a name of http.allowed_hosts: a rebinding page sends its own;
 *  - a request that changes state (any method but GET, HEAD and OPTIONS,
 *    and /__scheduled) is refused when its Origin is another's, or, with
 *    none, when Sec-Fetch-Site says another site sent it;
 *  - its body, if any, must say Content-Type: application/json, which no
 *    page can send cross-site without a CORS preflight (never granted).
 * Clients other than browsers send no Origin and the Host they were
 * given; a request without a Host (HTTP/1.0) comes from no browser. */

typedef struct host_port {
  const char *name; /* not NUL-terminated */
  size_t len;
  long port; /* -1: none given */
} host_port;

/* Splits "name[:port]" or "[v6][:port]"; a trailing dot of the name is
 * dropped ("localhost." is localhost).  Returns -1 when it is neither. */
static int split_host(const char *v, size_t len, host_port *hp) {
  size_t n;
  if (len > 0 && v[0] == '[') {
    const char *e = memchr(v, ']', len);
    if (!e)
      return -1;
    n = (size_t)(e - v) + 1;
  } else {
    const char *c = memchr(v, ':', len);
    n = c ? (size_t)(c - v) : len;
  }
  *hp = (host_port){v, n, -1};
  if (n < len) {
    if (v[n] != ':' || len - n - 1 == 0 || len - n - 1 > 5)
      return -1;
    hp->port = 0;
    for (size_t i = n + 1; i < len; i++) {
      if (v[i] < '0' || v[i] > '9')
        return -1;
      hp->port = hp->port * 10 + (v[i] - '0');
    }
  }
  if (hp->len > 1 && hp->name[hp->len - 1] == '.')
    hp->len--;
  return hp->len > 0 ? 0 : -1;
}

static int name_eq(const host_port *hp, const char *name) {
  return strlen(name) == hp->len && strncasecmp(hp->name, name, hp->len) == 0;
}

static int own_name(const http_server *s, const host_port *hp) {
  return (s->listen_host && name_eq(hp, s->listen_host)) ||
         (s->loopback_names &&
          (name_eq(hp, "localhost") || name_eq(hp, "127.0.0.1") ||
           name_eq(hp, "[::1]")));
}

/* A name of http.allowed_hosts: one without a port allows any. */
static int allowed_name(const http_server *s, const host_port *hp, long port) {
  for (size_t i = 0; i < s->n_allowed; i++) {
    host_port e;
    const char *a = s->allowed[i];
    if (split_host(a, strlen(a), &e) == 0 && e.len == hp->len &&
        strncasecmp(e.name, hp->name, e.len) == 0 &&
        (e.port < 0 || e.port == port))
      return 1;
  }
  return 0;
}

static int host_ok(const http_server *s, const http_header *h) {
  host_port hp;
  if (split_host(h->value, h->value_len, &hp) != 0)
    return 0;
  if (own_name(s, &hp) && (hp.port < 0 || hp.port == s->port))
    return 1;
  return allowed_name(s, &hp, hp.port < 0 ? 80 : hp.port);
}

/* "http://name[:port]" of a page of ours ("null" is nobody's). */
static int origin_ok(const http_server *s, const http_header *h) {
  const char *v = h->value;
  size_t len = h->value_len;
  long port;
  if (len > 7 && strncasecmp(v, "http://", 7) == 0) {
    v += 7, len -= 7, port = 80;
  } else if (len > 8 && strncasecmp(v, "https://", 8) == 0) {
    v += 8, len -= 8, port = 443;
  } else {
    return 0;
  }
  host_port hp;
  if (split_host(v, len, &hp) != 0)
    return 0;
  if (hp.port >= 0)
    port = hp.port;
  return (own_name(s, &hp) && port == s->port) || allowed_name(s, &hp, port);
}

static int value_is(const http_header *h, const char *word) {
  return h && h->value_len == strlen(word) &&
         strncasecmp(h->value, word, h->value_len) == 0;
}

/* "application/json", with any parameters ("; charset=utf-8"). */
static int json_content_type(const http_header *h) {
  static const char want[] = "application/json";
  size_t n = sizeof want - 1;
  return h && h->value_len >= n && strncasecmp(h->value, want, n) == 0 &&
         (h->value_len == n || h->value[n] == ';' || h->value[n] == ' ');
}

static int changes_state(const http_input *in) {
  static const char sched[] = "/__scheduled";
  size_t m = in->method_len;
  const char *mt = in->method;
  int reads = (m == 3 && !memcmp(mt, "GET", 3)) ||
              (m == 4 && !memcmp(mt, "HEAD", 4)) ||
              (m == 7 && !memcmp(mt, "OPTIONS", 7));
  return !reads || (in->path_len == sizeof sched - 1 &&
                    !memcmp(in->path, sched, sizeof sched - 1));
}

/* Returns 1 when it answered (refuse_early). */
static int refuse_foreign(http_server *s, http_exchange *x,
                          const http_input *in) {
  const http_header *h = in->headers, *v;
  size_t n = in->n_headers;
  if (!s->guard)
    return 0;
  if ((v = header_of(h, n, "host")) && !host_ok(s, v)) {
    x->rs.close = 1;
    return send_error(x, 403, "request.forbidden_host",
                      "Host \"%.*s\" is not this listener's; a name it is "
                      "reached by goes in http.allowed_hosts",
                      (int)(v->value_len > 200 ? 200 : v->value_len), v->value),
           1;
  }
  if (!changes_state(in))
    return 0;
  const http_header *origin = header_of(h, n, "origin");
  const http_header *site = header_of(h, n, "sec-fetch-site");
  if (origin ? !origin_ok(s, origin)
             : value_is(site, "cross-site") || value_is(site, "same-site")) {
    x->rs.close = 1;
    return send_error(
               x, 403, "request.cross_origin",
               "a request that changes state is refused from another "
               "site's page (Origin \"%.*s\")",
               origin ? (int)(origin->value_len > 200 ? 200 : origin->value_len)
                      : 0,
               origin ? origin->value : ""),
           1;
  }
  const http_header *type = header_of(h, n, "content-type");
  int reads = in->method_len == 3 && !memcmp(in->method, "GET", 3);
  if (!reads && (in->body_len > 0 || type) && !json_content_type(type))
    return send_error(x, 415, "request.unsupported_media_type",
                      "a request body must be JSON, sent with "
                      "\"Content-Type: application/json\""),
           1;
  return 0;
}

/* The refusals that need no engine, answered on the loop: a missing or
 * wrong token, a stopping server, an ambiguous body length, a body over
 * the limit, a NUL in the path.  Returns 1 when it answered. */
static int refuse_early(http_server *s, http_exchange *x,
                        const http_input *in) {
  const char *bad;
  if (!token_ok(s, in->headers, in->n_headers) &&
      !public_request(in->method, in->method_len, in->path, in->path_len,
                      in->headers, in->n_headers)) {
    x->rs.close = 1;
    send_error(x, 401, "request.unauthorized",
               "a valid \"Authorization: Bearer\" token is required");
  } else if (s->stopping) {
    x->rs.close = 1;
    send_error(x, 503, duro_err_name(DURO_E_SHUTDOWN), "the host is stopping");
  } else if (refuse_foreign(s, x, in)) {
    /* answered */
  } else if ((bad = framing_problem(in->headers, in->n_headers))) {
    x->rs.close = 1;
    send_error(x, 400, "request.invalid", "%s", bad);
  } else if (in->body && in->body_len > s->max_body) {
    send_error(x, 413, "request.too_large",
               "the body is %zu bytes; the limit is %zu", in->body_len,
               s->max_body);
  } else {
    return refuse_nul(x, in);
  }
  return 1;
}

static int wrong_method(http_exchange *x, const char *allowed) {
  x->rs.allow = allowed;
  return send_error(x, 405, "request.method_not_allowed",
                    "%s is not allowed here; use %s", x->rq.method, allowed);
}

/* GET /plugins: each plugin and its loaded builds.  POST /plugins/reload
 * and /plugins/{name}/reload: load changed builds now (the reload runs on
 * this pool thread; the file watch and SIGHUP take the same lock). */
static int plugins_route(http_server *s, http_exchange *x, char **seg, int n) {
  if (!s->plugins)
    return send_error(x, 404, "route.not_found", "no plugins here");
  if (n == 1)
    return method_is(x, "GET") ? send_json(x, 200, reload_list(s->plugins))
                               : wrong_method(x, "GET");
  const char *name = n == 3 ? seg[1] : NULL;
  if (!((n == 2 && !strcmp(seg[1], "reload")) ||
        (n == 3 && !strcmp(seg[2], "reload"))))
    return send_error(x, 404, "route.not_found", "no route for %s %s",
                      x->rq.method, x->rq.path);
  if (!method_is(x, "POST"))
    return wrong_method(x, "POST");
  json_t *report = NULL;
  if (reload_plugins(s->plugins, name, &report) < 0) {
    json_decref(report);
    return send_error(x, 404, "plugin.not_found", "no plugin \"%s\"", name);
  }
  return send_json(x, 200, report);
}

/* Queues: sending, pulling and acking messages, and their counts. */

/* The JSON a message carries, as text (malloc'ed), or NULL when `o` has
 * no "body".  Fields other than body and delay_seconds are refused. */
static const char *read_message(json_t *o, duro_queue_send_req *m,
                                char **text) {
  *text = NULL;
  m->delay_ms = 0;
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
  int rc = duro_queue_enqueue(s->engine, q, m.body, m.delay_ms, &id, err,
                              sizeof err);
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
  for (; got < n && !bad; got++)
    bad = read_message(json_array_get(list, got), &reqs[got], &texts[got]);
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
static int queues_route(http_server *s, http_exchange *x, char **seg, int n) {
  json_t *out = NULL;
  int rc;
  if (n == 1) {
    if (!method_is(x, "GET"))
      return wrong_method(x, "GET");
    rc = duro_queue_stats(s->engine, NULL, &out);
    return rc ? queue_error(x, rc, "") : send_json(x, 200, out);
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

/* Cron triggers. */

static int hex_digit(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

/* Decodes a query value in place as a form does ('+' is a space, %XX a
 * byte): the query reaches the routes as sent, and the spaces of a cron
 * expression come as "+" (Cloudflare's examples) or "%20" (curl's
 * escaping, `duro cron trigger`).  Returns -1 on a broken escape or a NUL
 * byte. */
static int form_decode(char *s) {
  char *w = s;
  for (const char *r = s; *r; r++) {
    if (*r == '+') {
      *w++ = ' ';
    } else if (*r == '%') {
      int hi = hex_digit(r[1]), lo = hi < 0 ? -1 : hex_digit(r[2]);
      if (lo < 0 || (hi == 0 && lo == 0))
        return -1;
      *w++ = (char)(hi << 4 | lo);
      r += 2;
    } else {
      *w++ = *r;
    }
  }
  *w = '\0';
  return 0;
}

/* GET /workflows/{wf}: its instances by status and its backlog. */
static int workflow_route(http_server *s, http_exchange *x, const char *wf) {
  if (!method_is(x, "GET"))
    return wrong_method(x, "GET");
  json_t *out = NULL;
  int rc = name_valid(wf) ? duro_workflow_stats(s->engine, wf, &out)
                          : DURO_E_WORKFLOW_NOT_FOUND;
  if (rc)
    return send_engine_error(x, rc, wf, NULL);
  return send_json(x, 200, out);
}

/* POST /__scheduled?cron=EXPR (and GET, as Cloudflare's local dev takes
 * a plain curl): fires every trigger declared with exactly EXPR now, as
 * `wrangler dev --test-scheduled` does; this pool thread waits while the
 * handler runs where its ticks run. */
static int scheduled_route(http_server *s, http_exchange *x) {
  if (!method_is(x, "POST") && !method_is(x, "GET"))
    return wrong_method(x, "GET, POST");
  /* a copy the request owns: decoded in place */
  char *cron = (char *)query_param(x, "cron");
  if (!cron || !*cron)
    return send_error(x, 400, duro_err_name(DURO_E_INVALID_ARGUMENT),
                      "the cron expression is required: "
                      "/__scheduled?cron=0+3+*+*+*");
  if (form_decode(cron) < 0)
    return send_error(x, 400, duro_err_name(DURO_E_INVALID_ARGUMENT),
                      "the cron parameter holds a broken %%XX escape or a "
                      "NUL byte");
  json_t *out = NULL;
  int rc = duro_cron_fire_now(s->engine, cron, &out);
  if (rc == DURO_E_CRON_NOT_FOUND) {
    json_decref(out);
    return send_error(x, 404, duro_err_name(rc),
                      "no cron trigger has the expression \"%s\"", cron);
  }
  if (rc) {
    json_decref(out);
    return send_error(x, status_of(rc), duro_err_name(rc), "%s",
                      duro_err_str(rc));
  }
  return send_json(x, 200, out);
}

/* GET /crons: each trigger, its next ticks, its last one and its counts. */
static int crons_route(http_server *s, http_exchange *x) {
  if (!method_is(x, "GET"))
    return wrong_method(x, "GET");
  json_t *out = NULL;
  int rc = duro_cron_list(s->engine, &out);
  if (rc) {
    json_decref(out);
    return send_error(x, status_of(rc), duro_err_name(rc), "%s",
                      duro_err_str(rc));
  }
  return send_json(x, 200, out);
}

/* GET / and /ui/NAME: the dashboard's files, from the binary, with a
 * policy that lets no other page frame them and runs only their own
 * script. */
static int dashboard_route(http_exchange *x) {
  x->rs.dashboard = 1;
  if (!method_is(x, "GET"))
    return wrong_method(x, "GET");
  const dashboard_file *f = dashboard_find(x->rq.path);
  if (!f)
    return send_error(x, 404, "route.not_found", "no dashboard file %s",
                      x->rq.path);
  send_text(x, 200, f->type, (const char *)f->data, f->len);
  return 0;
}

static int route(http_server *s, http_exchange *x) {
  if (dashboard_path(x->rq.path, strlen(x->rq.path)))
    return dashboard_route(x);
  char *seg[MAX_SEGMENTS];
  int n = split_path(x, seg);
  /* 200 while the host serves; "degraded" names hung attempts. */
  if (n == 1 && !strcmp(seg[0], "healthz"))
    return method_is(x, "GET")
               ? send_json(x, 200, duro_engine_health(s->engine))
               : wrong_method(x, "GET");
  if (n == 1 && !strcmp(seg[0], "metrics"))
    return method_is(x, "GET") ? metrics(s, x) : wrong_method(x, "GET");
  /* The engine's counters per 10 s over the last 10 minutes. */
  if (n == 2 && !strcmp(seg[0], "metrics") && !strcmp(seg[1], "history"))
    return method_is(x, "GET")
               ? send_json(x, 200, duro_engine_metrics_history(s->engine))
               : wrong_method(x, "GET");
  if (n >= 1 && !strcmp(seg[0], "plugins"))
    return plugins_route(s, x, seg, n);
  if (n >= 1 && !strcmp(seg[0], "queues"))
    return queues_route(s, x, seg, n);
  if (n == 1 && !strcmp(seg[0], "crons"))
    return crons_route(s, x);
  if (n == 1 && !strcmp(seg[0], "__scheduled"))
    return scheduled_route(s, x);
  if (n == 2 && !strcmp(seg[0], "workflows"))
    return workflow_route(s, x, seg[1]);
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
    return method_is(x, "GET") ? get_instance(s, x, wf, id)
                               : wrong_method(x, "GET");
  if (n == 5 && !strcmp(seg[4], "status")) {
    if (method_is(x, "GET"))
      return summary(s, x, wf, id);
    return method_is(x, "PATCH") ? change_status(s, x, wf, id)
                                 : wrong_method(x, "GET, PATCH");
  }
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

static void on_handle_closed(uv_handle_t *h);

static http_exchange *exchange_new(http_server *s, const http_input *in) {
  http_exchange *x = xcalloc(1, sizeof *x);
  x->s = s;
  x->rq.method = xstrndup(in->method, in->method_len);
  x->rq.path = xstrndup(in->path, in->path_len);
  if (in->query)
    x->rq.query = xstrndup(in->query, in->query_len);
  return x;
}

/* Copies the body for the route: H2O's copy goes with its request, which
 * a client that goes away takes with it while the route still runs. */
static void exchange_take_body(http_exchange *x, const http_input *in) {
  if (!in->body)
    return;
  x->rq.body = xmalloc(in->body_len + 1);
  memcpy(x->rq.body, in->body, in->body_len);
  x->rq.body[in->body_len] = '\0';
  x->rq.body_len = in->body_len;
  x->s->copied_bytes += in->body_len;
}

static void exchange_free(http_exchange *x) {
  http_request *rq = &x->rq;
  x->s->copied_bytes -= rq->body_len;
  free(rq->method);
  free(rq->path);
  free(rq->query);
  free(rq->body);
  free(rq->segments);
  for (size_t i = 0; i < rq->n_params; i++)
    free(rq->params[i]);
  free(x->rs.body);
  if (x->then_wait) {
    free(x->then_wait->wf);
    free(x->then_wait->id);
    free(x->then_wait);
  }
  free(x);
}

static void on_guard_dispose(void *p) {
  exchange_guard *g = p;
  if (!g->x)
    return;
  g->x->req = NULL;
  /* A waiting GET whose client went away ends now (one whose route is
   * still running ends when it returns: wait_arm). */
  if (g->x->wait && g->x->wait->timer_open)
    wait_timeout(g->x->wait);
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
  if (rs->dashboard) {
    static const char *const page[][2] = {
        {"content-security-policy", DASHBOARD_CSP},
        {"x-frame-options", "DENY"},
        {"x-content-type-options", "nosniff"}};
    for (size_t i = 0; i < sizeof page / sizeof page[0]; i++)
      h2o_add_header_by_str(&req->pool, &req->res.headers, page[i][0],
                            strlen(page[i][0]), 0, NULL, page[i][1],
                            strlen(page[i][1]));
  }
  if (req->res.status == 503)
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL,
                   H2O_STRLIT("1"));
  if (rs->close)
    req->http1_is_persistent = 0;
  /* h2o_send_inline leaves the length unset, and H2O's chunked encoder
   * then closes the connection after any answer but 200: with the length
   * known, a 201 or a 404 keeps the connection open too. */
  req->res.content_length = rs->body ? rs->len : 0;
  h2o_send_inline(req, rs->body ? rs->body : "", rs->body ? rs->len : 0);
}

static void run_route(uv_work_t *w) {
  http_exchange *x = w->data;
  route(x->s, x);
}

static void close_done_async(http_server *s) {
  if (s->done_open) {
    s->done_open = 0;
    uv_close((uv_handle_t *)&s->done_async, on_handle_closed);
  }
  if (s->linger_open) {
    s->linger_open = 0;
    uv_close((uv_handle_t *)&s->linger, on_handle_closed);
  }
}

/* The turn after answers were written at shutdown: their writes have
 * completed (libuv reports them before idle handles run). */
static void on_linger(uv_idle_t *h) {
  http_server *s = h->data;
  uv_idle_stop(h);
  s->in_flight -= s->lingering;
  s->lingering = 0;
  if (s->in_flight == 0)
    close_done_async(s);
}

/* On the loop: the last owner let go of the exchange: answer it. */
static void release(http_exchange *x) {
  if (--x->owners > 0)
    return;
  http_server *s = x->s;
  int wrote = x->req != NULL;
  respond(x);
  exchange_free(x);
  if (s->stopping && wrote && s->linger_open &&
      uv_idle_start(&s->linger, on_linger) == 0) {
    s->lingering++;
    return;
  }
  s->in_flight--;
  if (s->stopping && s->in_flight == 0)
    close_done_async(s);
}

static void after_route(uv_work_t *w, int status) {
  (void)status; /* the loop never cancels work */
  http_exchange *x = w->data;
  if (x->wait)
    wait_arm(x->wait);
  release(x);
}

/* Any thread: the answer of a deferred exchange is written. */
static void exchange_complete(http_exchange *x) {
  http_server *s = x->s;
  pthread_mutex_lock(&s->done_mu);
  x->next_done = s->done_head;
  s->done_head = x;
  pthread_mutex_unlock(&s->done_mu);
  uv_async_send(&s->done_async);
}

static void on_done_async(uv_async_t *a) {
  http_server *s = a->data;
  pthread_mutex_lock(&s->done_mu);
  http_exchange *x = s->done_head;
  s->done_head = NULL;
  pthread_mutex_unlock(&s->done_mu);
  while (x) {
    http_exchange *next = x->next_done;
    if (x->wait) /* a watch's call: the only way a waiting GET gets here */
      wait_fired(x->wait);
    else if (x->then_wait && x->then_wait->id && !x->then_wait->started)
      wait_created(x); /* the create's commit */
    else
      release(x);
    x = next;
  }
}

static size_t buffered(const http_server *s) {
  return s->gate_bytes + s->h2o_bytes + s->copied_bytes;
}

/* Counts a refusal for the budget and says so in the log, at most once
 * per BUSY_LOG_MS. */
static void note_busy(http_server *s) {
  s->busy_refusals++;
  uint64_t now = s->started ? uv_now(s->ctx.loop) : 0;
  if (s->started && now - s->busy_logged >= BUSY_LOG_MS) {
    log_warn("http: %zu read(s) or request(s) refused: requests being "
             "received hold %zu bytes, %zu waiting GETs %zu bytes; the "
             "budget of each is %zu",
             s->busy_refusals, buffered(s), s->parked, s->parked_bytes,
             s->budget);
    s->busy_logged = now;
    s->busy_refusals = 0;
  }
}

/* The headers of H2O's request as they were sent.  H2O keeps neither
 * Content-Length nor Transfer-Encoding among req->headers, so the head is
 * parsed again from the connection's input buffer, where it stays until
 * the answer is sent (H2O then consumes it); the method and path must
 * come out as H2O read them.  Returns the count, or -1. */
static int raw_headers(h2o_req_t *req, http_header *out) {
  h2o_socket_t *sock = req->conn->callbacks->get_socket
                           ? req->conn->callbacks->get_socket(req->conn)
                           : NULL;
  if (!sock || !sock->input || !sock->input->bytes)
    return -1;
  size_t len = sock->input->size;
  if (len > H2O_MAX_REQLEN)
    len = H2O_MAX_REQLEN;
  struct phr_header h[HTTP_MAX_HEADERS];
  size_t n = HTTP_MAX_HEADERS, mlen, plen;
  const char *m, *p;
  int minor;
  int r = phr_parse_request(sock->input->bytes, len, &m, &mlen, &p, &plen,
                            &minor, h, &n, 0);
  if (r <= 0 || mlen != req->input.method.len ||
      memcmp(m, req->input.method.base, mlen) != 0 ||
      plen != req->input.path.len || memcmp(p, req->input.path.base, plen))
    return -1;
  for (size_t i = 0; i < n; i++)
    out[i] =
        (http_header){h[i].name, h[i].name_len, h[i].value, h[i].value_len};
  return (int)n;
}

/* Creations run on the loop itself: parsing their body costs less than
 * two thread hops, and their commit goes to the journal's writer thread,
 * so the loop never waits for a disk.  Everything else may read or wait:
 * the pool. */
static int on_the_loop(http_exchange *x) {
  if (dashboard_path(x->rq.path, strlen(x->rq.path)))
    return 1; /* a copy from memory */
  char *seg[MAX_SEGMENTS];
  int n = split_path(x, seg); /* as route() reads it */
  return method_is(x, "POST") &&
         (n == 3 || (n == 4 && !strcmp(seg[3], "batch"))) &&
         !strcmp(seg[0], "workflows") && !strcmp(seg[2], "instances");
}

static int on_req(h2o_handler_t *self, h2o_req_t *req) {
  http_server *s = ((route_handler *)self)->server;
  http_header hdrs[HTTP_MAX_HEADERS];
  int n = raw_headers(req, hdrs);
  http_input in = {.method = req->method.base,
                   .method_len = req->method.len,
                   .path = req->path_normalized.base,
                   .path_len = req->path_normalized.len,
                   .headers = hdrs,
                   .n_headers = n > 0 ? (size_t)n : 0,
                   .body = req->entity.base,
                   .body_len = req->entity.base ? req->entity.len : 0};
  if (req->query_at != SIZE_MAX) {
    in.query = req->path.base + req->query_at + 1;
    in.query_len = req->path.len - req->query_at - 1;
  }
  http_exchange *x = exchange_new(s, &in);
  x->req = req;
  count_request(s, req);
  if (n < 0) {
    x->rs.close = 1;
    send_error(x, 400, "request.invalid", "the request head is malformed");
  } else if (!refuse_early(s, x, &in)) {
    if (in.body_len && buffered(s) + in.body_len > s->budget) {
      note_busy(s);
      send_error(x, 503, "server.busy",
                 "the host holds too many request bodies; retry");
    } else {
      exchange_take_body(x, &in);
      x->guard =
          h2o_mem_alloc_shared(&req->pool, sizeof *x->guard, on_guard_dispose);
      x->guard->x = x;
      x->work.data = x;
      x->owners = 1;
      if (on_the_loop(x)) {
        s->in_flight++;
        route(s, x);
        release(x);
        return 0;
      }
      int rc = uv_queue_work(s->ctx.loop, &x->work, run_route, after_route);
      if (rc == 0) {
        s->in_flight++;
        return 0;
      }
      /* Counted in flight, it would keep the host's shutdown waiting for
       * an answer that never comes. */
      log_error("http: cannot queue a request: %s", uv_strerror(rc));
      send_error(x, 503, "server.busy", "the request could not be queued: %s",
                 uv_strerror(rc));
    }
  }
  respond(x);
  exchange_free(x);
  return 0;
}

size_t http_in_flight(const http_server *s) { return s ? s->in_flight : 0; }

/* ---- one request without sockets ----------------------------------------- */

http_server *http_server_new(duro_engine *e, const char *token,
                             size_t max_body) {
  http_server *s = xcalloc(1, sizeof *s);
  pthread_mutex_init(&s->done_mu, NULL);
  s->engine = e;
  s->token = token ? xstrdup(token) : NULL;
  s->max_body = max_body;
  s->max_wait_ms = 60 * 1000;
  s->budget = SIZE_MAX;
  return s;
}

void http_serve(http_server *s, const http_input *in, http_output *out) {
  http_exchange *x = exchange_new(s, in);
  if (!refuse_early(s, x, in)) {
    exchange_take_body(x, in);
    route(s, x);
  }
  http_response *rs = &x->rs;
  *out = (http_output){.status = rs->status ? rs->status : 500,
                       .content_type = rs->type ? rs->type : "application/json",
                       .allow = rs->allow,
                       .close = rs->close,
                       .body = rs->body,
                       .len = rs->len};
  out->retry_after = out->status == 503;
  rs->body = NULL;
  exchange_free(x);
}

void http_output_free(http_output *out) {
  free(out->body);
  out->body = NULL;
}

int http_parse_head(const char *buf, size_t len, http_input *in,
                    http_header *hdrs, char **path_out) {
  struct phr_header h[HTTP_MAX_HEADERS];
  size_t n = HTTP_MAX_HEADERS;
  const char *path;
  size_t path_len;
  int minor;
  memset(in, 0, sizeof *in);
  *path_out = NULL;
  if (len > H2O_MAX_REQLEN) /* H2O reads no further for a head */
    len = H2O_MAX_REQLEN;
  int r = phr_parse_request(buf, len, &in->method, &in->method_len, &path,
                            &path_len, &minor, h, &n, 0);
  if (r < 0)
    return r;
  for (size_t i = 0; i < n; i++)
    hdrs[i] =
        (http_header){h[i].name, h[i].name_len, h[i].value, h[i].value_len};
  in->headers = hdrs;
  in->n_headers = n;
  h2o_mem_pool_t pool;
  h2o_mem_init_pool(&pool);
  size_t query_at = SIZE_MAX, *norm = NULL;
  h2o_iovec_t norm_path =
      h2o_url_normalize_path(&pool, path, path_len, &query_at, &norm);
  *path_out = xmalloc(norm_path.len + 1);
  memcpy(*path_out, norm_path.base, norm_path.len);
  (*path_out)[norm_path.len] = '\0';
  in->path = *path_out;
  in->path_len = norm_path.len;
  if (query_at != SIZE_MAX) {
    in->query = path + query_at + 1;
    in->query_len = path_len - query_at - 1;
  }
  h2o_mem_clear_pool(&pool);
  return r;
}

/* ---- H2O's own refusals as JSON -------------------------------------------
 */

/* H2O answers some requests itself before any handler runs (a
 * Content-Length over the limit, broken chunked encoding, an unknown
 * Expect, a path outside "/"), in text/plain.  A filter on the host's
 * fallback path, which those answers go through, rewrites them as our
 * {"error":{"code","message"}}. */
typedef struct json_filter {
  h2o_filter_t super;
  http_server *server;
} json_filter;

typedef struct json_ostream {
  h2o_ostream_t super;
  http_server *server;
} json_ostream;

static void json_error_send(h2o_ostream_t *self, h2o_req_t *req,
                            h2o_iovec_t *bufs, size_t bufcnt,
                            h2o_send_state_t state) {
  http_server *s = ((json_ostream *)self)->server;
  if (bufcnt == 0) {
    h2o_ostream_send_next(self, req, bufs, bufcnt, state);
    return;
  }
  int st = req->res.status;
  const char *code = st == 413   ? "request.too_large"
                     : st == 404 ? "route.not_found"
                                 : "request.invalid";
  char *msg = st == 413 ? xasprintf("the body is over the limit of %zu bytes",
                                    s->max_body)
                        : xasprintf("%.*s", (int)bufs[0].len, bufs[0].base);
  char *text = error_text(code, msg);
  free(msg);
  h2o_iovec_t body = h2o_strdup(&req->pool, text, strlen(text));
  free(text);
  req->res.content_length = body.len; /* headers are not written yet */
  h2o_ostream_send_next(self, req, &body, 1, state);
}

static void on_setup_json_errors(h2o_filter_t *self, h2o_req_t *req,
                                 h2o_ostream_t **slot) {
  ssize_t i = h2o_find_header(&req->res.headers, H2O_TOKEN_CONTENT_TYPE, -1);
  if (req->res.status >= 400 && i >= 0) {
    req->res.headers.entries[i].value =
        h2o_iovec_init(H2O_STRLIT("application/json"));
    json_ostream *o = (json_ostream *)h2o_add_ostream(req, sizeof *o, slot);
    o->super.do_send = json_error_send;
    o->server = ((json_filter *)self)->server;
    slot = &o->super.next;
  }
  h2o_setup_next_ostream(req, slot);
}

/* ---- connections: the gate and the budget ---------------------------------
 */

typedef enum conn_state {
  CONN_GATE,     /* the gate reads the first head */
  CONN_REFUSING, /* the gate writes its refusal */
  CONN_LINGER,   /* ... and reads the body away until the client is done */
  CONN_H2O,      /* H2O serves it */
} conn_state;

/* A client connection.  H2O owns the handle's `data` once it has the
 * socket, so the server pointer rides beside the handle. */
struct http_conn {
  uv_tcp_t tcp; /* first: libuv's callbacks get this pointer */
  http_server *server;
  http_conn *prev, *next; /* server->conns */
  conn_state state;
  h2o_socket_t *sock;    /* CONN_H2O */
  uv_alloc_cb h2o_alloc; /* H2O's, which h2o_alloc_bounded wraps */
  size_t counted;        /* of sock->input, in server->h2o_bytes */
  const char *checked;   /* the head at this address had the token */
  const char *tried;     /* an incomplete head at this address ... */
  size_t tried_len;      /* ... was this long */
  char *head;            /* CONN_GATE: the bytes read so far */
  size_t head_len, head_cap;
  uint64_t deadline; /* uv_now: CONN_GATE, CONN_LINGER */
  size_t drained;    /* CONN_LINGER: bytes thrown away */
  char *reply;       /* CONN_REFUSING */
  http_wait *parked; /* CONN_H2O: the wait parked on it, or NULL */
  int watching;      /* parked, and read here to see the client go */
  uv_write_t write;
  uv_shutdown_t shutdown;
};

/* Where lingering connections read the bodies they throw away. */
static char drain[16384];

/* What an H2O input buffer holds in memory. */
static size_t input_bytes(const h2o_buffer_t *b) {
  return b && b->bytes ? offsetof(h2o_buffer_t, _buf) + b->capacity : 0;
}

static void gate_forget_head(http_conn *c) {
  c->server->gate_bytes -= c->head_cap;
  free(c->head);
  c->head = NULL;
  c->head_len = c->head_cap = 0;
}

static void on_conn_closed(uv_handle_t *handle) {
  http_conn *c = (http_conn *)handle;
  http_server *s = c->server;
  if (c->sock)
    idmap_del(&s->by_sock, (int64_t)(intptr_t)c->sock);
  if (c->parked) { /* its wait ends as its request goes (on_guard_dispose) */
    s->parked--;
    s->parked_bytes -= c->parked->cost;
    c->parked->conn = NULL;
  }
  if (c->prev)
    c->prev->next = c->next;
  else
    s->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  s->connections--;
  s->h2o_bytes -= c->counted; /* H2O freed the buffer with its socket */
  gate_forget_head(c);
  free(c->reply);
  free(c);
}

/* Closes a connection the gate still holds (H2O closes its own). */
static void gate_close(http_conn *c) {
  if (!uv_is_closing((uv_handle_t *)&c->tcp))
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* Whether the head at the start of an H2O connection's input may be read
 * further: on a listener with a token, not once a complete head shows a
 * missing or wrong one (the gate saw the first request of the connection;
 * this catches the later ones on a kept connection, before their body). */
static int h2o_head_allowed(http_conn *c) {
  h2o_buffer_t *in = c->sock->input;
  if (!c->server->token || !in || !in->bytes || c->checked == in->bytes)
    return 1;
  struct phr_header h[HTTP_MAX_HEADERS];
  http_header hh[HTTP_MAX_HEADERS];
  size_t n = HTTP_MAX_HEADERS, mlen, plen;
  const char *m, *p;
  int minor;
  /* Told the length it had last time, the parser first looks for the end
   * of the head in the new bytes only: a head sent a byte at a time costs
   * no more than one sent at once. */
  size_t last =
      c->tried == in->bytes && c->tried_len <= in->size ? c->tried_len : 0;
  int r = phr_parse_request(in->bytes, in->size, &m, &mlen, &p, &plen, &minor,
                            h, &n, last);
  c->tried = in->bytes;
  c->tried_len = in->size;
  if (r <= 0)
    return 1; /* incomplete, or H2O refuses it (400) */
  for (size_t i = 0; i < n; i++)
    hh[i] = (http_header){h[i].name, h[i].name_len, h[i].value, h[i].value_len};
  if (!token_ok(c->server, hh, n) && !public_request(m, mlen, p, plen, hh, n))
    return 0;
  c->checked = in->bytes;
  return 1;
}

/* Every read H2O makes: H2O's allocation, then a refusal (libuv hands
 * H2O UV_ENOBUFS and H2O closes the connection) when the buffer grew past
 * the budget, or the head shows a wrong token. */
static void h2o_alloc_bounded(uv_handle_t *handle, size_t suggested,
                              uv_buf_t *buf) {
  http_conn *c = (http_conn *)handle;
  http_server *s = c->server;
  c->h2o_alloc(handle, suggested, buf);
  size_t now = input_bytes(c->sock->input);
  int grew = now > c->counted;
  s->h2o_bytes = s->h2o_bytes - c->counted + now;
  c->counted = now;
  if (grew && buffered(s) > s->budget) {
    note_busy(s);
    *buf = uv_buf_init(NULL, 0);
  } else if (!h2o_head_allowed(c)) {
    *buf = uv_buf_init(NULL, 0);
  }
}

/* H2O starts reading with its own allocator each time it reads a new
 * request; wrap it again.  Only the loop calls uv_read_start. */
static void bound_reads(http_conn *c) {
  uv_stream_t *st = (uv_stream_t *)&c->tcp;
  if (c->state == CONN_H2O && !c->watching &&
      !uv_is_closing((uv_handle_t *)st) && st->alloc_cb &&
      st->alloc_cb != h2o_alloc_bounded) {
    c->h2o_alloc = st->alloc_cb;
    st->alloc_cb = h2o_alloc_bounded;
  }
}

/* Before each poll of the loop, where every read happens: the exact bytes
 * H2O holds (it frees a buffer when a request is answered), and the reads
 * H2O started since (after an answer it reads the next request). */
static void on_prepare(uv_prepare_t *p) {
  http_server *s = p->data;
  size_t total = 0;
  for (http_conn *c = s->conns; c; c = c->next) {
    if (c->state != CONN_H2O || c->parked ||
        uv_is_closing((uv_handle_t *)&c->tcp))
      continue;
    c->counted = input_bytes(c->sock->input);
    total += c->counted;
    bound_reads(c);
  }
  for (http_conn *c = s->conns; c; c = c->next)
    if (c->state == CONN_H2O && uv_is_closing((uv_handle_t *)&c->tcp))
      total += c->counted; /* subtracted when its close callback runs */
  s->h2o_bytes = total;
  __atomic_store_n(&s->shown_parked, s->parked, __ATOMIC_RELAXED);
  __atomic_store_n(&s->shown_parked_bytes, s->parked_bytes, __ATOMIC_RELAXED);
  __atomic_store_n(&s->shown_bytes, buffered(s), __ATOMIC_RELAXED);
}

/* ---- parked waits ----------------------------------------------------------
 *
 * H2O stops reading a connection while its request is being answered and
 * keeps the request's bytes in the input buffer until the answer is out.
 * For a GET ?wait= that is up to http.max_wait, so a parked wait's buffer
 * is taken out of the budget of requests being received (a flood of
 * waits locked every other client out) and counted against a budget of
 * its own.  Meanwhile the connection is read here: a client that goes
 * away ends its wait at once (H2O, not reading, would only notice when
 * the answer is written), and bytes it sends (a pipelined request) are
 * left in H2O's buffer for after the answer. */

/* H2O's own allocation: room at the end of its input buffer. */
static void park_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  http_conn *c = (http_conn *)handle;
  c->h2o_alloc(handle, suggested, buf);
}

static void park_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  http_conn *c = (http_conn *)st;
  (void)buf;
  if (n == 0)
    return;
  uv_read_stop(st);
  c->watching = 0;
  http_wait *w = c->parked;
  if (n > 0) { /* as H2O's read callback would count them */
    c->sock->input->size += (size_t)n;
    size_t now = input_bytes(c->sock->input);
    c->server->parked_bytes += now - w->cost;
    w->cost = now;
    return;
  }
  if (!w->answering) { /* the client is gone: nobody reads the answer */
    w->x->rs.close = 1;
    wait_timeout(w);
  }
}

/* The connection a request came on, if it is ours, open and not parked. */
static http_conn *conn_of(http_server *s, h2o_req_t *req, h2o_socket_t **sock) {
  *sock = req->conn->callbacks->get_socket
              ? req->conn->callbacks->get_socket(req->conn)
              : NULL;
  http_conn *c =
      *sock ? idmap_get(&s->by_sock, (int64_t)(intptr_t)*sock) : NULL;
  if (!c || c->parked || uv_is_closing((uv_handle_t *)&c->tcp))
    return NULL;
  return c;
}

/* On the loop: 1 when a wait of this request could not be parked now. */
static int waits_full(http_server *s, h2o_req_t *req) {
  h2o_socket_t *sock;
  http_conn *c = conn_of(s, req, &sock);
  return c && s->parked_bytes + input_bytes(sock->input) > s->budget;
}

/* On the loop, when a wait is armed: takes its connection's buffer out of
 * the request budget.  Returns -1 when the parked waits hold their budget
 * already. */
static int wait_park(http_wait *w) {
  http_server *s = w->x->s;
  h2o_socket_t *sock;
  http_conn *c = conn_of(s, w->x->req, &sock);
  if (!c)
    return 0;
  size_t cost = input_bytes(sock->input);
  if (s->parked_bytes + cost > s->budget)
    return -1;
  s->h2o_bytes -= c->counted;
  c->counted = 0;
  c->parked = w;
  w->conn = c;
  w->cost = cost;
  s->parked++;
  s->parked_bytes += cost;
  /* UV_EALREADY: H2O reads it still, and sees the client go itself. */
  if (c->h2o_alloc &&
      uv_read_start((uv_stream_t *)&c->tcp, park_alloc, park_read) == 0)
    c->watching = 1;
  return 0;
}

/* The wait is over: its buffer counts as H2O's again. */
static void wait_unpark(http_wait *w) {
  http_conn *c = w->conn;
  if (!c)
    return;
  http_server *s = c->server;
  int closing = uv_is_closing((uv_handle_t *)&c->tcp);
  if (c->watching && !closing)
    uv_read_stop((uv_stream_t *)&c->tcp);
  c->watching = 0;
  c->parked = NULL;
  w->conn = NULL;
  s->parked--;
  s->parked_bytes -= w->cost;
  if (!closing) { /* a closing one's buffer is gone with H2O's socket */
    c->counted = input_bytes(c->sock->input);
    s->h2o_bytes += c->counted;
  }
}

/* Hands the connection to H2O with the bytes the gate read (or none). */
static void hand_over(http_conn *c) {
  http_server *s = c->server;
  uv_read_stop((uv_stream_t *)&c->tcp);
  h2o_socket_t *sock =
      h2o_uv_socket_create((uv_stream_t *)&c->tcp, on_conn_closed);
  if (c->head_len) {
    h2o_iovec_t room = h2o_buffer_reserve(&sock->input, c->head_len);
    memcpy(room.base, c->head, c->head_len);
    sock->input->size += c->head_len;
  }
  gate_forget_head(c);
  c->sock = sock;
  idmap_put(&s->by_sock, (int64_t)(intptr_t)sock, c);
  c->state = CONN_H2O;
  c->counted = input_bytes(sock->input);
  s->h2o_bytes += c->counted;
  h2o_accept(&s->accept_ctx, sock);
  bound_reads(c);
}

static void on_shutdown(uv_shutdown_t *r, int status) {
  (void)r;
  (void)status;
}

static void gate_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf);
static void gate_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);

/* The refusal is out: the client reads it once it has sent its body, so
 * the body is read and thrown away for a while (closing with unread bytes
 * would reset the connection, and the answer with it). */
static void on_refusal_written(uv_write_t *w, int status) {
  http_conn *c = (http_conn *)w->handle;
  free(c->reply);
  c->reply = NULL;
  if (uv_is_closing((uv_handle_t *)&c->tcp))
    return;
  c->state = CONN_LINGER;
  c->deadline = uv_now(c->tcp.loop) + GATE_LINGER_MS;
  if (status != 0 ||
      uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) != 0 ||
      uv_read_start((uv_stream_t *)&c->tcp, gate_alloc, gate_read) != 0)
    gate_close(c);
}

/* Answers the gate's connection with `status` and closes it. */
static void gate_refuse(http_conn *c, int status, const char *code,
                        const char *msg) {
  uv_read_stop((uv_stream_t *)&c->tcp);
  gate_forget_head(c);
  char *m = xstrdup(msg);
  char *body = error_text(code, m);
  free(m);
  c->reply = xasprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                       "Content-Length: %zu\r\nConnection: close\r\n%s\r\n%s",
                       status, reason_of(status), strlen(body),
                       status == 503 ? "Retry-After: 1\r\n" : "", body);
  free(body);
  c->state = CONN_REFUSING;
  uv_buf_t b = uv_buf_init(c->reply, (unsigned)strlen(c->reply));
  if (uv_write(&c->write, (uv_stream_t *)&c->tcp, &b, 1, on_refusal_written))
    gate_close(c);
}

static void gate_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  http_conn *c = (http_conn *)handle;
  http_server *s = c->server;
  (void)suggested;
  if (c->state == CONN_LINGER) {
    *buf = uv_buf_init(drain, sizeof drain);
    return;
  }
  if (c->head_len == c->head_cap) {
    size_t cap = c->head_cap ? c->head_cap * 2 : 4096;
    if (cap > GATE_HEAD_MAX || buffered(s) + cap - c->head_cap > s->budget) {
      *buf = uv_buf_init(NULL, 0); /* gate_read refuses */
      return;
    }
    c->head = xrealloc(c->head, cap);
    s->gate_bytes += cap - c->head_cap;
    c->head_cap = cap;
  }
  *buf =
      uv_buf_init(c->head + c->head_len, (unsigned)(c->head_cap - c->head_len));
}

static void gate_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  http_conn *c = (http_conn *)st;
  http_server *s = c->server;
  (void)buf;
  if (c->state == CONN_LINGER) {
    /* A body of any size the routes accept is read to its end. */
    if (n < 0 || (c->drained += (size_t)n) > s->max_body + GATE_HEAD_MAX)
      gate_close(c);
    return;
  }
  if (n == UV_ENOBUFS) {
    if (c->head_cap * 2 > GATE_HEAD_MAX) {
      char msg[96];
      snprintf(msg, sizeof msg, "the request head is over %d bytes",
               GATE_HEAD_MAX);
      gate_refuse(c, 431, "request.too_large", msg);
    } else {
      note_busy(s);
      gate_refuse(c, 503, "server.busy",
                  "the host holds too many requests; retry");
    }
    return;
  }
  if (n < 0) {
    gate_close(c);
    return;
  }
  size_t before = c->head_len;
  c->head_len += (size_t)n;
  struct phr_header h[HTTP_MAX_HEADERS];
  http_header hh[HTTP_MAX_HEADERS];
  size_t nh = HTTP_MAX_HEADERS, mlen, plen;
  const char *m, *p;
  int minor;
  int r = phr_parse_request(c->head, c->head_len, &m, &mlen, &p, &plen, &minor,
                            h, &nh, before);
  if (r == -2)
    return; /* more to come; gate_alloc bounds it */
  if (r == -1) {
    hand_over(c); /* H2O answers malformed input (400) and closes */
    return;
  }
  for (size_t i = 0; i < nh; i++)
    hh[i] = (http_header){h[i].name, h[i].name_len, h[i].value, h[i].value_len};
  if (token_ok(s, hh, nh) || public_request(m, mlen, p, plen, hh, nh))
    hand_over(c);
  else
    gate_refuse(c, 401, "request.unauthorized",
                "a valid \"Authorization: Bearer\" token is required");
}

/* Once a second: gate connections past their deadline (a head that never
 * completes, a refused client still sending) are closed. */
static void on_sweep(uv_timer_t *t) {
  http_server *s = t->data;
  uint64_t now = uv_now(t->loop);
  for (http_conn *c = s->conns; c; c = c->next)
    if ((c->state == CONN_GATE || c->state == CONN_LINGER) &&
        now >= c->deadline)
      gate_close(c);
}

static void on_accept(uv_stream_t *listener, int status) {
  http_server *s = listener->data;
  if (status != 0) {
    log_warn("http: accept: %s", uv_strerror(status));
    return;
  }
  http_conn *c = xcalloc(1, sizeof *c);
  c->server = s;
  int rc = uv_tcp_init(listener->loop, &c->tcp);
  if (rc != 0) {
    log_error("http: cannot take a connection: %s", uv_strerror(rc));
    free(c);
    return;
  }
  c->next = s->conns;
  if (s->conns)
    s->conns->prev = c;
  s->conns = c;
  s->connections++;
  if ((rc = uv_accept(listener, (uv_stream_t *)&c->tcp)) != 0) {
    log_warn("http: accept: %s", uv_strerror(rc));
    gate_close(c);
    return;
  }
  if (buffered(s) >= s->budget) {
    /* Answered, not reset: H2O would close it at its first read. */
    note_busy(s);
    c->state = CONN_GATE;
    gate_refuse(c, 503, "server.busy",
                "the host holds too many requests being received; retry");
    return;
  }
  if (!s->token) {
    hand_over(c);
    return;
  }
  c->state = CONN_GATE;
  c->deadline = uv_now(listener->loop) + s->config.http1.req_timeout;
  if (uv_read_start((uv_stream_t *)&c->tcp, gate_alloc, gate_read) != 0)
    gate_close(c);
}

size_t http_budget(const http_server *s) { return s->budget; }

/* ---- listening
 * ------------------------------------------------------------------- */

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

void http_attach_plugins(http_server *s, reloader *plugins) {
  s->plugins = plugins;
}

/* One socket bound to `addr` and listening, or -1 with errno set. */
static int bind_once(const struct sockaddr_storage *addr) {
  int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1;
  socklen_t alen = addr->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                               : sizeof(struct sockaddr_in);
  if (fd < 0)
    return -1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
      bind(fd, (const struct sockaddr *)addr, alen) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int http_bind(const config *cfg, int *fd_out, char *err, size_t errlen) {
  const char *where = cfg->http.listen ? cfg->http.listen : "127.0.0.1:8787";
  struct sockaddr_storage addr;
  const char *token;
  if (resolve(cfg, &addr, &token, err, errlen) != 0)
    return -1;
  /* A host started right after the last one was killed (kill -9, then a
   * supervisor that restarts at once) finds the port still taken: the
   * killed supervisor's engine dies with it, but some milliseconds later,
   * and holds the listening socket until then.  So the port is asked for
   * again for a while, as the storage lock is; SO_REUSEPORT would instead
   * let two live hosts share it. */
  int fd, waited = 0;
  while ((fd = bind_once(&addr)) < 0 && errno == EADDRINUSE &&
         waited < BIND_WAIT_MS) {
    struct timespec ts = {0, BIND_RETRY_MS * 1000000L};
    nanosleep(&ts, NULL);
    waited += BIND_RETRY_MS;
  }
  if (fd < 0) {
    snprintf(err, errlen, "%s: cannot listen on %s: %s", cfg->file, where,
             strerror(errno));
    return -1;
  }
  *fd_out = fd;
  return 0;
}

/* Without a token: the names a request's Host may give (refuse_foreign). */
static void guard_browsers(http_server *s, const config *cfg,
                           const char *listen) {
  struct sockaddr_storage addr;
  int loopback = 0;
  if (s->token || parse_listen(listen, &addr, &loopback) != 0)
    return;
  s->guard = 1;
  s->listen_host = xstrndup(listen, (size_t)(strrchr(listen, ':') - listen));
  int any =
      addr.ss_family == AF_INET6
          ? IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&addr)->sin6_addr)
          : ((struct sockaddr_in *)&addr)->sin_addr.s_addr == INADDR_ANY;
  s->loopback_names = loopback || any; /* a wildcard takes loopback too */
  s->allowed = cfg->http.allowed_hosts;
  s->n_allowed = cfg->http.n_allowed_hosts;
}

int http_start(uv_loop_t *loop, duro_engine *e, const config *cfg,
               int listen_fd, http_server **out, char *err, size_t errlen) {
  const char *listen = cfg->http.listen ? cfg->http.listen : "127.0.0.1:8787";
  struct sockaddr_storage addr;
  const char *token;
  if (resolve(cfg, &addr, &token, err, errlen) != 0)
    return -1;

  size_t max_body = cfg->http.max_body_bytes > 0
                        ? (size_t)cfg->http.max_body_bytes
                        : 1024 * 1024;
  http_server *s = http_server_new(e, token, max_body);
  s->max_wait_ms = cfg->http.max_wait_ms;
  guard_browsers(s, cfg, listen);
  s->budget = max_body * BUDGET_BODIES > BUDGET_MIN ? max_body * BUDGET_BODIES
                                                    : BUDGET_MIN;
  h2o_config_init(&s->config);
  /* H2O refuses a larger Content-Length from the headers, and stops a
   * chunked body there (H2O counts a chunked body's last byte as over,
   * hence the + 1; our own check answers one byte over). */
  s->config.max_request_entity_size = s->max_body + 1;
  /* HTTP/1.1 only: an h2c connection would carry many streams, each
   * buffering a body, past the gate and outside the budget. */
  s->config.http1.upgrade_to_http2 = 0;
  h2o_hostconf_t *host = h2o_config_register_host(
      &s->config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
  h2o_pathconf_t *path = h2o_config_register_path(host, "/", 0);
  route_handler *h =
      (route_handler *)h2o_create_handler(path, sizeof(route_handler));
  h->super.on_req = on_req;
  h->server = s;
  json_filter *f =
      (json_filter *)h2o_create_filter(&host->fallback_path, sizeof *f);
  f->super.on_setup_ostream = on_setup_json_errors;
  f->server = s;
  h2o_context_init(&s->ctx, loop, &s->config);
  s->started = 1;
  s->accept_ctx.ctx = &s->ctx;
  s->accept_ctx.hosts = s->config.hosts;
  *out = s; /* on failure, the caller frees it once the loop ran */

  /* Neither handle keeps the loop running on its own. */
  int rc = uv_prepare_init(loop, &s->bound);
  if (rc == 0) {
    s->handles++;
    s->bound.data = s;
    uv_unref((uv_handle_t *)&s->bound);
    rc = uv_prepare_start(&s->bound, on_prepare);
  }
  if (rc == 0 && (rc = uv_timer_init(loop, &s->sweep)) == 0) {
    s->handles++;
    s->sweep.data = s;
    uv_unref((uv_handle_t *)&s->sweep);
    rc = uv_timer_start(&s->sweep, on_sweep, 1000, 1000);
  }
  if (rc == 0 &&
      (rc = uv_async_init(loop, &s->done_async, on_done_async)) == 0) {
    s->handles++;
    s->done_open = 1;
    s->done_async.data = s;
    uv_unref((uv_handle_t *)&s->done_async);
  }
  if (rc == 0 && (rc = uv_idle_init(loop, &s->linger)) == 0) {
    s->handles++;
    s->linger_open = 1;
    s->linger.data = s; /* active only while answers linger */
  }
  if (rc != 0) {
    snprintf(err, errlen, "%s: cannot start serving HTTP: %s", cfg->file,
             uv_strerror(rc));
    return -1;
  }
  rc = uv_tcp_init(loop, &s->listener);
  if (rc != 0) {
    snprintf(err, errlen, "%s: cannot listen on %s: %s", cfg->file, listen,
             uv_strerror(rc));
    return -1;
  }
  s->listener.data = s;
  s->listening = 1; /* http_stop closes it */
  rc = listen_fd >= 0 ? uv_tcp_open(&s->listener, listen_fd)
                      : uv_tcp_bind(&s->listener, (struct sockaddr *)&addr, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&s->listener, SOMAXCONN, on_accept);
  struct sockaddr_storage bound;
  int blen = sizeof bound;
  if (rc == 0)
    rc = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen);
  if (rc != 0) {
    snprintf(err, errlen, "%s: cannot listen on %s: %s", cfg->file, listen,
             uv_strerror(rc));
    return -1;
  }
  s->port = ntohs(bound.ss_family == AF_INET6
                      ? ((struct sockaddr_in6 *)&bound)->sin6_port
                      : ((struct sockaddr_in *)&bound)->sin_port);
  return 0;
}

int http_port(const http_server *s) { return s->port; }

static void on_handle_closed(uv_handle_t *h) {
  http_server *s = h->data;
  s->handles--;
}

void http_stop(http_server *s) {
  if (!s)
    return;
  s->stopping = 1;
  if (s->listening) {
    uv_close((uv_handle_t *)&s->listener, NULL);
    s->listening = 0;
  }
  if (s->handles >= 2 && !s->sweep_closed) {
    uv_close((uv_handle_t *)&s->bound, on_handle_closed);
    uv_close((uv_handle_t *)&s->sweep, on_handle_closed);
    s->sweep_closed = 1;
  } else if (s->handles == 1 && !s->done_open) {
    uv_close((uv_handle_t *)&s->bound, on_handle_closed);
  }
  /* Waiting GETs are answered now, with the status as it is. */
  for (http_wait *w = s->waits, *next; w; w = next) {
    next = w->next;
    wait_timeout(w);
  }
  /* Deferred answers still coming keep it open (release closes it). */
  if (s->in_flight == 0)
    close_done_async(s);
  /* Heads not yet read will not be served. */
  for (http_conn *c = s->conns; c; c = c->next)
    if (c->state != CONN_H2O)
      gate_close(c);
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
  if (s->started && (s->connections > 0 || s->handles > 0)) {
    if (s->connections > 0)
      log_warn("http: %zu connection(s) still open at shutdown",
               s->connections);
    left_to_exit = s;
    return;
  }
  if (s->started) {
    h2o_context_dispose(&s->ctx);
    h2o_config_dispose(&s->config);
  }
  pthread_mutex_destroy(&s->done_mu);
  idmap_free(&s->by_sock);
  free(s->listen_host);
  free(s->token);
  free(s);
}
