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
 * H2O refuses a Content-Length over http.max_body_bytes from the headers
 * (its 413 is rewritten as our JSON error) and stops a chunked body there.
 *
 * This file owns the server's life and the table of routes.  Lifecycle:
 * http_start binds and listens; http_stop closes the listener; the host
 * runs the loop until http_in_flight() is 0, closes the remaining handles
 * (connections) and calls http_free, which disposes the H2O context.
 * The rest, one concern a file: http_gate.c (connections, the gate and
 * bounded reads), http_exchange.c (a request's way to its route and
 * back), http_guard.c (refusals before any route, the budget),
 * http_wait.c (?wait= and parked waits), http_json.c (replies, errors,
 * the request's parts), http_keys.c (API keys: which, their scopes, the
 * audit line), key_views.c (the listings a limited key sees), http_tls.c
 * (HTTPS), and route_*.c (the routes, by resource). */
#include "http_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dashboard.h"
#include "log.h"
#include "map.h"
#include "util.h"

#define BUDGET_MIN (64u << 20) /* http_budget: at least 64 MiB, */
#define BUDGET_BODIES 16       /* or this many bodies of the largest size */
#define BIND_WAIT_MS 3000      /* http_bind: how long a taken port is retried */
#define BIND_RETRY_MS 20

/* The routes, by the first segment of the path.  The dashboard's files
 * are matched first: "/" has no segment. */
int http_route(http_server *s, http_exchange *x) {
  if (dashboard_path(x->rq.path, strlen(x->rq.path)))
    return dashboard_route(x);
  char *seg[MAX_SEGMENTS];
  int n = split_path(x, seg);
  if (keys_authorize(s, x, seg, n))
    return 0;
  if (n == 1 && !strcmp(seg[0], "healthz"))
    return healthz_route(s, x);
  if (n == 1 && !strcmp(seg[0], "metrics"))
    return metrics_route(s, x);
  if (n == 1 && !strcmp(seg[0], "hosts"))
    return hosts_route(s, x);
  if (n == 1 && !strcmp(seg[0], "key"))
    return key_route(x);
  if (n == 2 && !strcmp(seg[0], "metrics") && !strcmp(seg[1], "history"))
    return history_route(s, x);
  if (n >= 1 && !strcmp(seg[0], "plugins"))
    return plugins_route(s, x, seg, n);
  if (n >= 1 && !strcmp(seg[0], "queues"))
    return queues_route(s, x, seg, n);
  if (n >= 1 && !strcmp(seg[0], "pipelines"))
    return pipelines_route(s, x, seg, n);
  if (n == 1 && !strcmp(seg[0], "crons"))
    return crons_route(s, x);
  if (route_is_scheduled(seg, n))
    return scheduled_route(s, x);
  if (n >= 2 && !strcmp(seg[0], "bulk"))
    return bulk_route(s, x, seg, n);
  if (n >= 2 && !strcmp(seg[0], "storage") && !strcmp(seg[1], "keys"))
    return storage_keys_route(s, x, seg, n);
  if (n >= 2 && !strcmp(seg[0], "workflows"))
    return workflows_route(s, x, seg, n);
  return send_error(x, 404, "route.not_found", "no route for %s %s",
                    x->rq.method, x->rq.path);
}

size_t http_in_flight(const http_server *s) { return s ? s->in_flight : 0; }

http_server *http_server_new(duro_engine *e, const char *token,
                             size_t max_body) {
  http_server *s = xcalloc(1, sizeof *s);
  pthread_mutex_init(&s->done_mu, NULL);
  s->engine = e;
  if (token)
    keys_add(s, "default", token, KEY_ALL_SCOPES, NULL);
  s->max_body = max_body;
  s->max_wait_ms = 60 * 1000;
  s->budget = SIZE_MAX;
  return s;
}

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

/* The listen address the config asks for, checked against the bind
 * policy, and every key's token variable (http_keys.c). */
static int resolve(const config *cfg, struct sockaddr_storage *addr, char *err,
                   size_t errlen) {
  const char *listen = cfg->http.listen ? cfg->http.listen : "127.0.0.1:8787";
  int loopback = 0;
  const config_pos *lp = &cfg->http.listen_pos;
  if (parse_listen(listen, addr, &loopback) != 0) {
    snprintf(err, errlen, "%s:%d:%d: http.listen \"%s\" is not host:port",
             cfg->file, lp->line, lp->column, listen);
    return -1;
  }
  if (keys_from_config(NULL, cfg, err, errlen) != 0)
    return -1;
  int keys = cfg->http.token_env || cfg->http.n_keys > 0;
  if (!loopback && !keys && !cfg->http.allow_insecure) {
    snprintf(err, errlen,
             "%s:%d:%d: http.listen %s is not a loopback address: set "
             "http.token_env or http.keys (or http.allow_insecure: true)",
             cfg->file, lp->line, lp->column, listen);
    return -1;
  }
  return 0;
}

int http_check(const config *cfg, char *err, size_t errlen) {
  struct sockaddr_storage addr;
  SSL_CTX *tls = NULL;
  int rc = resolve(cfg, &addr, err, errlen) != 0 ||
                   tls_context_of(cfg, &tls, err, errlen) != 0
               ? -1
               : 0;
  SSL_CTX_free(tls);
  return rc;
}

void http_attach(http_server *s, duro_engine *e) { s->engine = e; }

void http_attach_plugins(http_server *s, reloader *plugins) {
  s->plugins = plugins;
}

void http_attach_breaker(http_server *s, struct breaker *breaker) {
  s->breaker = breaker;
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
  SSL_CTX *tls = NULL;
  /* TLS files that do not load refuse the start here, once, rather than
   * each engine the supervisor would fork */
  int bad = resolve(cfg, &addr, err, errlen) != 0 ||
            tls_context_of(cfg, &tls, err, errlen) != 0;
  SSL_CTX_free(tls);
  if (bad)
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

/* Without keys: the names a request's Host may give (refuse_foreign). */
static void guard_browsers(http_server *s, const config *cfg,
                           const char *listen) {
  struct sockaddr_storage addr;
  int loopback = 0;
  if (s->n_keys || parse_listen(listen, &addr, &loopback) != 0)
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

/* The H2O side of a server: its configuration, one handler for every
 * path, the JSON errors of H2O's own refusals, and the context on `loop`. */
static void h2o_setup(http_server *s, uv_loop_t *loop) {
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
  h->super.on_req = exchange_on_req;
  h->server = s;
  http_json_errors(s, host);
  h2o_context_init(&s->ctx, loop, &s->config);
  s->started = 1;
  s->accept_ctx.ctx = &s->ctx;
  s->accept_ctx.hosts = s->config.hosts;
  /* s->accept_ctx.ssl_ctx: http_start's, with http.tls (http_tls.c) */
}

/* The loop's handles of a server: the bounded reads' prepare, the gate's
 * sweep, the done queue and the linger at shutdown.  Neither keeps the
 * loop running on its own.  Returns 0 or a libuv error. */
static int start_handles(http_server *s, uv_loop_t *loop) {
  int rc = uv_prepare_init(loop, &s->bound);
  if (rc == 0) {
    s->handles++;
    s->bound.data = s;
    uv_unref((uv_handle_t *)&s->bound);
    rc = uv_prepare_start(&s->bound, gate_on_prepare);
  }
  if (rc == 0 && (rc = uv_timer_init(loop, &s->sweep)) == 0) {
    s->handles++;
    s->sweep.data = s;
    uv_unref((uv_handle_t *)&s->sweep);
    rc = uv_timer_start(&s->sweep, gate_on_sweep, 1000, 1000);
  }
  if (rc == 0 &&
      (rc = uv_async_init(loop, &s->done_async, exchange_on_done)) == 0) {
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
  return rc;
}

/* Listens on listen_fd, or binds `addr` when it is -1, and reads the port
 * bound.  Returns 0 or a libuv error. */
static int start_listening(http_server *s, uv_loop_t *loop, int listen_fd,
                           const struct sockaddr_storage *addr) {
  int rc = uv_tcp_init(loop, &s->listener);
  if (rc != 0)
    return rc;
  s->listener.data = s;
  s->listening = 1; /* http_stop closes it */
  rc = listen_fd >= 0
           ? uv_tcp_open(&s->listener, listen_fd)
           : uv_tcp_bind(&s->listener, (const struct sockaddr *)addr, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&s->listener, SOMAXCONN, gate_on_accept);
  struct sockaddr_storage bound;
  int blen = sizeof bound;
  if (rc == 0)
    rc = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen);
  if (rc != 0)
    return rc;
  s->port = ntohs(bound.ss_family == AF_INET6
                      ? ((struct sockaddr_in6 *)&bound)->sin6_port
                      : ((struct sockaddr_in *)&bound)->sin_port);
  return 0;
}

int http_start(uv_loop_t *loop, duro_engine *e, const config *cfg,
               int listen_fd, http_server **out, char *err, size_t errlen) {
  const char *listen = cfg->http.listen ? cfg->http.listen : "127.0.0.1:8787";
  struct sockaddr_storage addr;
  SSL_CTX *tls;
  if (resolve(cfg, &addr, err, errlen) != 0 ||
      tls_context_of(cfg, &tls, err, errlen) != 0)
    return -1;

  size_t max_body = cfg->http.max_body_bytes > 0
                        ? (size_t)cfg->http.max_body_bytes
                        : 1024 * 1024;
  http_server *s = http_server_new(e, NULL, max_body);
  keys_from_config(s, cfg, err, errlen); /* resolve() read them all */
  s->max_wait_ms = cfg->http.max_wait_ms;
  guard_browsers(s, cfg, listen);
  s->budget = max_body * BUDGET_BODIES > BUDGET_MIN ? max_body * BUDGET_BODIES
                                                    : BUDGET_MIN;
  h2o_setup(s, loop);
  s->accept_ctx.ssl_ctx = tls;
  tls_files_of(cfg, &s->tls);
  *out = s; /* on failure, the caller frees it once the loop ran */

  int rc = start_handles(s, loop);
  if (rc != 0) {
    snprintf(err, errlen, "%s: cannot start serving HTTP: %s", cfg->file,
             uv_strerror(rc));
    return -1;
  }
  rc = start_listening(s, loop, listen_fd, &addr);
  if (rc != 0) {
    snprintf(err, errlen, "%s: cannot listen on %s: %s", cfg->file, listen,
             uv_strerror(rc));
    return -1;
  }
  return 0;
}

size_t http_budget(const http_server *s) { return s->budget; }

int http_port(const http_server *s) { return s->port; }

void http_handle_closed(uv_handle_t *h) {
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
    uv_close((uv_handle_t *)&s->bound, http_handle_closed);
    uv_close((uv_handle_t *)&s->sweep, http_handle_closed);
    s->sweep_closed = 1;
  } else if (s->handles == 1 && !s->done_open) {
    uv_close((uv_handle_t *)&s->bound, http_handle_closed);
  }
  /* Waiting GETs are answered now, with the status as it is. */
  for (http_wait *w = s->waits, *next; w; w = next) {
    next = w->next;
    wait_timeout(w);
  }
  /* Event streams end with what they sent. */
  streams_stop(s);
  /* Deferred answers still coming keep it open (release closes it). */
  if (s->in_flight == 0)
    exchange_close_done(s);
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
  keys_free(s);
  SSL_CTX_free(s->accept_ctx.ssl_ctx);
  tls_files_clear(&s->tls);
  free(s);
}
