/* http_exchange.c — a request's way through the server: H2O hands it to
 * exchange_on_req on the loop, which copies it into an exchange (so a client
 * that goes away takes nothing the route still reads), refuses what needs no
 * engine (http_guard.c), and runs the route: creations on the loop
 * itself, everything else on libuv's thread pool, where the route may
 * read the journal or wait for a commit.  The answer goes back to H2O on
 * the loop once every owner of the exchange let go (exchange_release): the
 * route's run, and a commit or a wait it handed the exchange to, which
 * completes from any thread through the done queue.  A request that
 * cannot be queued is answered 503 (counted in flight, it would keep the
 * host's shutdown waiting).  http_serve and http_parse_head are the same
 * path without sockets, for the tests and the fuzz targets. */
#include "http_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dashboard.h"
#include "log.h"
#include "util.h"

/* ---- exchanges: the loop hands requests to the pool and back ------------ */

static http_exchange *exchange_new(http_server *s, const http_input *in) {
  http_exchange *x = xcalloc(1, sizeof *x);
  x->s = s;
  x->rq.method = xstrndup(in->method, in->method_len);
  x->rq.path = xstrndup(in->path, in->path_len);
  if (in->query)
    x->rq.query = xstrndup(in->query, in->query_len);
  for (size_t i = 0; i < in->n_headers; i++) {
    const http_header *h = &in->headers[i];
    if (!x->rq.content_type && h->name_len == 12 &&
        !strncasecmp(h->name, "content-type", 12))
      x->rq.content_type = xstrndup(h->value, h->value_len);
    /* W3C Trace Context: a second traceparent makes it invalid */
    else if (h->name_len == 11 && !strncasecmp(h->name, "traceparent", 11))
      x->rq.traceparent = x->rq.traceparent
                              ? (free(x->rq.traceparent), xstrdup(""))
                              : xstrndup(h->value, h->value_len);
  }
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
  free(rq->last_event_id);
  free(rq->content_type);
  free(rq->traceparent);
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
  if (!req || x->streamed)
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
  if (rs->dashboard)
    dashboard_headers(req);
  if (req->res.status == 503)
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL,
                   H2O_STRLIT("1"));
  else if (req->res.status == 429) {
    char *after = h2o_mem_alloc_pool(&req->pool, 16);
    int n = snprintf(after, 16, "%d",
                     rs->retry_after_s > 0 ? rs->retry_after_s : 1);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL,
                   after, (size_t)n);
  }
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
  http_route(x->s, x);
}

void exchange_close_done(http_server *s) {
  if (s->done_open) {
    s->done_open = 0;
    uv_close((uv_handle_t *)&s->done_async, http_handle_closed);
  }
  if (s->linger_open) {
    s->linger_open = 0;
    uv_close((uv_handle_t *)&s->linger, http_handle_closed);
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
    exchange_close_done(s);
}

/* On the loop: the last owner let go of the exchange: answer it. */
void exchange_release(http_exchange *x) {
  if (--x->owners > 0)
    return;
  http_server *s = x->s;
  int wrote = x->req != NULL;
  keys_audit(x, x->rs.status ? x->rs.status : 500);
  respond(x);
  exchange_free(x);
  if (s->stopping && wrote && s->linger_open &&
      uv_idle_start(&s->linger, on_linger) == 0) {
    s->lingering++;
    return;
  }
  s->in_flight--;
  if (s->stopping && s->in_flight == 0)
    exchange_close_done(s);
}

void exchange_after_route(uv_work_t *w, int status) {
  (void)status; /* the loop never cancels work */
  http_exchange *x = w->data;
  if (x->wait)
    wait_arm(x->wait);
  if (x->stream)
    stream_begin(x->stream);
  exchange_release(x);
}

/* Any thread: the answer of a deferred exchange is written. */
void exchange_complete(http_exchange *x) {
  http_server *s = x->s;
  pthread_mutex_lock(&s->done_mu);
  x->next_done = s->done_head;
  s->done_head = x;
  pthread_mutex_unlock(&s->done_mu);
  uv_async_send(&s->done_async);
}

void exchange_on_done(uv_async_t *a) {
  http_server *s = a->data;
  pthread_mutex_lock(&s->done_mu);
  http_exchange *x = s->done_head;
  s->done_head = NULL;
  pthread_mutex_unlock(&s->done_mu);
  while (x) {
    http_exchange *next = x->next_done;
    if (x->wait) /* a watch's call: the only way a waiting GET gets here */
      wait_fired(x->wait);
    else if (x->stream) /* its instance's rows changed */
      stream_woken(x->stream);
    else if (x->then_wait && x->then_wait->id && !x->then_wait->started)
      wait_created(x); /* the create's commit */
    else
      exchange_release(x);
    x = next;
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
  int n = split_path(x, seg); /* as http_route() reads it */
  return method_is(x, "POST") &&
         (n == 3 || (n == 4 && !strcmp(seg[3], "batch"))) &&
         !strcmp(seg[0], "workflows") && !strcmp(seg[2], "instances");
}

int exchange_on_req(h2o_handler_t *self, h2o_req_t *req) {
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
  for (int i = 0; i < n; i++)
    if (hdrs[i].name_len == 13 &&
        !strncasecmp(hdrs[i].name, "last-event-id", 13))
      x->rq.last_event_id = xstrndup(hdrs[i].value, hdrs[i].value_len);
  health_count_request(s, req);
  if (n < 0) {
    x->rs.close = 1;
    send_error(x, 400, "request.invalid", "the request head is malformed");
  } else if (!guard_refuse_early(s, x, &in)) {
    if (in.body_len && guard_buffered(s) + in.body_len > s->budget) {
      guard_note_busy(s);
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
        http_route(s, x);
        exchange_release(x);
        return 0;
      }
      int rc =
          uv_queue_work(s->ctx.loop, &x->work, run_route, exchange_after_route);
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

/* ---- one request without sockets ----------------------------------------- */

void http_serve(http_server *s, const http_input *in, http_output *out) {
  http_exchange *x = exchange_new(s, in);
  if (!guard_refuse_early(s, x, in)) {
    exchange_take_body(x, in);
    http_route(s, x);
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
