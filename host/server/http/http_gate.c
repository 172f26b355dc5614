/* http_gate.c — client connections: the gate and the budget.
 *
 * H2O 2.2 calls a handler only once a request's whole body is in, so a
 * token checked there comes after the body was buffered.  Two things keep
 * unauthenticated and oversized requests from costing memory:
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
 * "A token" is any of the listener's keys (http_keys.c).  On HTTPS the
 * head is encrypted: the gate hands the connection to H2O at accept (H2O
 * makes the handshake), and the bounded reads check the token of each
 * decrypted head, the first one's too.
 * A connection whose GET ?wait= is parked is read by http_wait.c. */
#include "http_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

#define GATE_HEAD_MAX 65536 /* bytes of a head the gate reads */
#define GATE_LINGER_MS 2000 /* how long a refused body is read away */

/* Where lingering connections read the bodies they throw away. */
static char drain[16384];

/* What an H2O input buffer holds in memory. */
size_t gate_input_bytes(const h2o_buffer_t *b) {
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
void gate_close(http_conn *c) {
  if (!uv_is_closing((uv_handle_t *)&c->tcp))
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* Whether the head at the start of an H2O connection's input may be read
 * further: on a listener with a token, not once a complete head shows a
 * missing or wrong one (the gate saw the first request of the connection;
 * this catches the later ones on a kept connection, before their body). */
static int h2o_head_allowed(http_conn *c) {
  h2o_buffer_t *in = c->sock->input;
  if (!c->server->n_keys || !in || !in->bytes || c->checked == in->bytes)
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
  if (!guard_token_ok(c->server, hh, n) &&
      !guard_public_request(m, mlen, p, plen, hh, n))
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
  size_t now = gate_input_bytes(c->sock->input);
  int grew = now > c->counted;
  s->h2o_bytes = s->h2o_bytes - c->counted + now;
  c->counted = now;
  if (grew && guard_buffered(s) > s->budget) {
    guard_note_busy(s);
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
void gate_on_prepare(uv_prepare_t *p) {
  http_server *s = p->data;
  size_t total = 0;
  for (http_conn *c = s->conns; c; c = c->next) {
    if (c->state != CONN_H2O || c->parked ||
        uv_is_closing((uv_handle_t *)&c->tcp))
      continue;
    c->counted = gate_input_bytes(c->sock->input);
    total += c->counted;
    bound_reads(c);
  }
  for (http_conn *c = s->conns; c; c = c->next)
    if (c->state == CONN_H2O && uv_is_closing((uv_handle_t *)&c->tcp))
      total += c->counted; /* subtracted when its close callback runs */
  s->h2o_bytes = total;
  __atomic_store_n(&s->shown_parked, s->parked, __ATOMIC_RELAXED);
  __atomic_store_n(&s->shown_parked_bytes, s->parked_bytes, __ATOMIC_RELAXED);
  __atomic_store_n(&s->shown_bytes, guard_buffered(s), __ATOMIC_RELAXED);
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
  c->counted = gate_input_bytes(sock->input);
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
    if (cap > GATE_HEAD_MAX ||
        guard_buffered(s) + cap - c->head_cap > s->budget) {
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
      guard_note_busy(s);
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
  if (guard_token_ok(s, hh, nh) ||
      guard_public_request(m, mlen, p, plen, hh, nh))
    hand_over(c);
  else
    gate_refuse(c, 401, "request.unauthorized",
                "a valid \"Authorization: Bearer\" token is required");
}

/* Once a second: gate connections past their deadline (a head that never
 * completes, a refused client still sending) are closed. */
void gate_on_sweep(uv_timer_t *t) {
  http_server *s = t->data;
  uint64_t now = uv_now(t->loop);
  for (http_conn *c = s->conns; c; c = c->next)
    if ((c->state == CONN_GATE || c->state == CONN_LINGER) &&
        now >= c->deadline)
      gate_close(c);
}

void gate_on_accept(uv_stream_t *listener, int status) {
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
  if (guard_buffered(s) >= s->budget) {
    guard_note_busy(s);
    if (s->accept_ctx.ssl_ctx) { /* no plain answer a TLS client could read */
      gate_close(c);
      return;
    }
    /* Answered, not reset: H2O would close it at its first read. */
    c->state = CONN_GATE;
    gate_refuse(c, 503, "server.busy",
                "the host holds too many requests being received; retry");
    return;
  }
  /* An encrypted head cannot be read here: H2O makes the handshake, and
   * the bounded reads check the decrypted heads' tokens (http_tls.c). */
  if (s->accept_ctx.ssl_ctx) {
    hand_over(c);
    return;
  }
  /* Without a token too: a first read past the budget is then answered
   * 503 here, where H2O would only close the connection. */
  c->state = CONN_GATE;
  c->deadline = uv_now(listener->loop) + s->config.http1.req_timeout;
  if (uv_read_start((uv_stream_t *)&c->tcp, gate_alloc, gate_read) != 0)
    gate_close(c);
}
