/* http_internal.h — what the files of the HTTP server share (http.h is
 * its interface to the host): the server, a connection, the exchange a
 * request becomes, and the helpers the routes answer with.  Everything
 * here runs on the loop unless it says the pool. */
#ifndef DURO_HTTP_INTERNAL_H
#define DURO_HTTP_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define H2O_USE_LIBUV 1
#include <h2o.h>

#include "http.h"
#include "map.h"
#include "reload.h"

#define MAX_SEGMENTS 8

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

/* An API key (http_keys.c): its token's SHA-256, what it may do
 * (CONFIG_SCOPE_* bits) and the workflows and queues it may touch (NULL:
 * any).  Owned by the server. */
#define KEY_DIGEST 32
#define KEY_ALL_SCOPES                                                         \
  (CONFIG_SCOPE_READ | CONFIG_SCOPE_EVENTS | CONFIG_SCOPE_OPERATE |            \
   CONFIG_SCOPE_ADMIN)
typedef struct http_key {
  char *name;
  unsigned char digest[KEY_DIGEST];
  unsigned scopes;
  char **workflows;
  size_t n_workflows;
  char **queues;
  size_t n_queues;
} http_key;

/* http.tls's files, as SIGHUP reads them again (owned copies). */
typedef struct tls_files {
  char *cert, *key, *client_ca;
} tls_files;

struct http_server {
  duro_engine *engine;
  reloader *plugins;       /* NULL: no plugin routes (tests, fuzzing) */
  struct breaker *breaker; /* NULL: no holds (tests, fuzzing) */
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
  http_key *keys; /* none: no auth */
  size_t n_keys;
  tls_files tls; /* accept_ctx.ssl_ctx is built from them; NULL cert: none */
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
  /* Event streams begun (http_stream.c, loop). */
  struct http_stream *streams;
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
  char *content_type;  /* the Content-Type header's value, or NULL */
  char *segments;      /* the path, split in place by split_path */
  char *params[32];    /* query values handed out by query_param */
  char *last_event_id; /* the Last-Event-ID header, or NULL */
  char *traceparent;   /* the traceparent header as sent, or NULL */
  size_t n_params;
} http_request;

/* The answer the route wrote, sent by the loop. */
typedef struct http_response {
  int status;
  const char *type;  /* static */
  const char *allow; /* static, for 405 */
  int close;         /* close the connection after it */
  int dashboard;     /* a page: sent with the framing and script policy */
  int retry_after_s; /* a 429's Retry-After (a 503's is 1) */
  char *body;        /* malloc'ed */
  size_t len;
} http_response;

typedef struct exchange_guard exchange_guard;
typedef struct http_wait http_wait;
typedef struct create_wait create_wait;
typedef struct http_stream http_stream;

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
  http_stream *stream;    /* an event stream (http_stream.c), or NULL */
  const http_key *key;    /* whose token it carries (the server's), or NULL */
  int streamed;           /* its response was begun: nothing to answer */
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

/* POST /workflows/{wf}/instances?wait=DURATION: once the commit created
 * the instance, the exchange goes on as a GET ?wait= of it (wait_created),
 * answered 201 with its light status.  The create's own answer (201
 * queued) stands wherever that status cannot be read. */
struct create_wait {
  char *wf, *id; /* id: set once the commit created the instance */
  int64_t ms;    /* clamped to http.max_wait */
  int started;   /* the wait was handed to the pool */
  int skipped;   /* DURO_CREATE_*: the create answered by its key's live
                   instance (flow.singleton, flow.debounce), id that one */
  uv_work_t work;
};

/* A GET ?wait= not yet answered (http_wait.c). */
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

/* GET .../events/stream (http_stream.c): what it sent last, and what of
 * it is in flight, all on the loop but `dirty`, `queued` and `begun`. */
struct http_stream {
  http_exchange *x;
  char *wf, *id;
  char last[96]; /* the last id sent or asked after ("": none) */
  duro_changes *changes;
  h2o_generator_t gen;
  char *out; /* the chunk read, then being written (malloc'ed) */
  size_t out_len;
  int ended;   /* the instance ended and out holds its last items */
  int read_rc; /* the pool's read */
  int reading; /* a read is on the pool */
  int writing; /* a chunk is with H2O until on_proceed */
  int finishing, released, done;
  int dirty;  /* atomic: the rows changed since the last read began */
  int queued; /* atomic: a wake is on the done queue */
  int begun;  /* atomic: stream_begin ran, wakes go to the loop */
  uv_work_t read;
  uv_timer_t poll; /* a shared store's: reads now and then */
  int poll_open;
  http_stream *prev, *next; /* s->streams */
};

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

/* ---- http.c -------------------------------------------------------------- */

/* The pool, or the calling thread for http_serve: answers x. */
int http_route(http_server *s, http_exchange *x);
void http_handle_closed(uv_handle_t *h);

/* ---- http_exchange.c ----------------------------------------------------- */

int exchange_on_req(h2o_handler_t *self, h2o_req_t *req);
/* The last owner let go of the exchange: answer it. */
void exchange_release(http_exchange *x);
/* uv_queue_work's after callback of a route. */
void exchange_after_route(uv_work_t *w, int status);
/* Any thread: the answer of a deferred exchange is written. */
void exchange_complete(http_exchange *x);
void exchange_close_done(http_server *s);
void exchange_on_done(uv_async_t *a);

/* ---- http_gate.c --------------------------------------------------------- */

/* What an H2O input buffer holds in memory. */
size_t gate_input_bytes(const h2o_buffer_t *b);
void gate_close(http_conn *c);
void gate_on_prepare(uv_prepare_t *p);
void gate_on_sweep(uv_timer_t *t);
void gate_on_accept(uv_stream_t *listener, int status);

/* ---- http_guard.c -------------------------------------------------------- */

int guard_token_ok(const http_server *s, const http_header *h, size_t n);
int guard_public_request(const char *method, size_t method_len,
                         const char *path, size_t path_len,
                         const http_header *h, size_t n);
int guard_refuse_early(http_server *s, http_exchange *x, const http_input *in);
/* The bytes requests being received hold, against s->budget. */
size_t guard_buffered(const http_server *s);
void guard_note_busy(http_server *s);

/* ---- http_keys.c --------------------------------------------------------- */

/* Adds a key of `token` (hashed; not kept); lists (NULL: none) gives its
 * workflows and queues, copied. */
void keys_add(http_server *s, const char *name, const char *token,
              unsigned scopes, const config_api_key *lists);
void keys_free(http_server *s);
/* The keys of http.token_env and http.keys into s (NULL: only checks),
 * each token from its variable: 0, or -1 with err naming an unset one
 * and where the config names it. */
int keys_from_config(http_server *s, const config *cfg, char *err,
                     size_t errlen);
/* The key whose token the Authorization header carries, or NULL. */
const http_key *keys_match(const http_server *s, const http_header *h,
                           size_t n);
/* The pool (or the loop, for creations): 1 after answering 403 when
 * x->key may not make the request split_path gave seg[0, n) of. */
int keys_authorize(http_server *s, http_exchange *x, char **seg, int n);
/* Whether key k (NULL: a listener without keys) may see workflow wf
 * (queue `queue`): on its list, or it has none. */
int keys_see_workflow(const http_key *k, const char *wf);
int keys_see_queue(const http_key *k, const char *queue);
/* The pool: 1 after answering 403 request.forbidden_workflow naming wf
 * when x's key may not touch it (a bulk job's workflow, which its path
 * does not name), else 0. */
int keys_refuse_workflow(http_exchange *x, const char *wf);
/* The loop, as the answer goes: the audit line of a request that changes
 * state, naming its key. */
void keys_audit(http_exchange *x, int status);

/* ---- key_views.c --------------------------------------------------------- */

/* The listings across workflows and queues, each taken and returned less
 * what x's key may not see (as they are for a key without lists). */
json_t *keys_filter_queues(const http_exchange *x, json_t *queues);
json_t *keys_filter_crons(const http_exchange *x, json_t *crons);
json_t *keys_filter_plugins(http_server *s, const http_exchange *x,
                            json_t *list);
json_t *keys_filter_instance(const http_exchange *x, json_t *instance);
json_t *keys_filter_health(const http_exchange *x, json_t *health);
/* GET /key: what the request's key is and may do. */
int key_route(http_exchange *x);

/* ---- http_tls.c ---------------------------------------------------------- */

/* http.tls's files into *t: 1, or 0 when the config has none. */
int tls_files_of(const config *cfg, tls_files *t);
void tls_files_clear(tls_files *t);
/* The context of cfg's http.tls into *out (NULL without one): 0, or -1
 * with err naming the file, why, and where the config gives it. */
int tls_context_of(const config *cfg, SSL_CTX **out, char *err, size_t errlen);

/* ---- http_wait.c --------------------------------------------------------- */

int wait_param(http_exchange *x, int64_t *ms);
int wait_for_end(http_server *s, http_exchange *x, const char *wf,
                 const char *id, int64_t ms);
int waits_full(http_server *s, h2o_req_t *req);
void wait_arm(http_wait *w);
void wait_fired(http_wait *w);
void wait_timeout(http_wait *w);
void wait_created(http_exchange *x);

/* ---- http_stream.c ------------------------------------------------------- */

int stream_open(http_server *s, http_exchange *x, const char *wf,
                const char *id);
void stream_begin(http_stream *st);
void stream_woken(http_stream *st);
void streams_stop(http_server *s);

/* ---- http_json.c --------------------------------------------------------- */

const char *reason_of(int status);
void send_text(http_exchange *x, int status, const char *type, const char *body,
               size_t len);
int send_json(http_exchange *x, int status, json_t *body);
char *error_text(const char *code, char *msg);
int send_error(http_exchange *x, int status, const char *code, const char *fmt,
               ...) __attribute__((format(printf, 4, 5)));
int status_of(int rc);
int send_engine_error(http_exchange *x, int rc, const char *wf, const char *id);
int method_is(const http_exchange *x, const char *m);
int split_path(http_exchange *x, char **seg);
const char *query_param(http_exchange *x, const char *key);
/* The n-th (from 0) value of a query parameter given more than once, or
 * NULL. */
const char *query_param_nth(http_exchange *x, const char *key, size_t n);
/* A list's search attributes from its repeatable `where` parameters
 * (attr.h's syntax) against workflow wf's index, into where[] (at most
 * DURO_ATTR_MAX; each cleared with duro_attr_filter_clear), *n of them:
 * 0, or -1 after answering 400 request.invalid naming the parameter (or
 * 404 for an unknown workflow).  For every route that takes a list's
 * filter. */
int query_where(http_server *s, http_exchange *x, const char *wf,
                duro_attr_filter *where, size_t *n);
json_t *parse_body(http_exchange *x, json_t *empty, int *sent);
int name_valid(const char *s);
int wrong_method(http_exchange *x, const char *allowed);
void http_json_errors(http_server *s, h2o_hostconf_t *host);

/* ---- the routes (route_*.c) ---------------------------------------------- */

int workflows_route(http_server *s, http_exchange *x, char **seg, int n);
/* list_filter.c: a list's filter read through get(ctx, field) (the text
 * of a field, NULL when absent), for the list's query and a bulk
 * action's body alike: 0, or -1 with why (its fields named after
 * `where`, "" or "filter.").  list_filter_fields: the fields it reads,
 * NULL-ended. */
typedef const char *(*list_filter_get)(void *ctx, const char *field);
extern const char *const list_filter_fields[];
int list_filter_read(list_filter_get get, void *ctx, const char *where,
                     duro_list_filter *f, char *why, size_t len);
/* route_bulk.c: GET and POST /workflows/{wf}/bulk, and /bulk/{id}[/cancel]. */
int workflow_bulk_route(http_server *s, http_exchange *x, const char *wf);
int bulk_route(http_server *s, http_exchange *x, char **seg, int n);
int storage_keys_route(http_server *s, http_exchange *x, char **seg, int n);
/* The light status: the row without steps or attempts. */
int instance_summary(http_server *s, http_exchange *x, const char *wf,
                     const char *id);
int queues_route(http_server *s, http_exchange *x, char **seg, int n);
int pipelines_route(http_server *s, http_exchange *x, char **seg, int n);
int crons_route(http_server *s, http_exchange *x);
int scheduled_route(http_server *s, http_exchange *x);
/* Whether split_path's segments name /__scheduled: the one GET that
 * changes state, so http_route and the cross-site guard ask this same
 * question of the same segments. */
int route_is_scheduled(char **seg, int n);
int plugins_route(http_server *s, http_exchange *x, char **seg, int n);
/* GET /plugins' answer: the reloader's list and the breaker's holds. */
json_t *plugins_list(http_server *s);
int healthz_route(http_server *s, http_exchange *x);
int metrics_route(http_server *s, http_exchange *x);
int hosts_route(http_server *s, http_exchange *x);
int history_route(http_server *s, http_exchange *x);
void health_count_request(http_server *s, const h2o_req_t *req);
int dashboard_route(http_exchange *x);
void dashboard_headers(h2o_req_t *req);

#endif
