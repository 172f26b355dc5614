/* http_wait.c — GET ?wait= and POST ?wait=: an answer held until the
 * instance ends, or the wait (at most http.max_wait) runs out.
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
 * and a timer.  A create with ?wait= goes on as such a wait once its
 * commit created the instance (wait_created). */
#include "http_internal.h"

#include <stdint.h>
#include <stdlib.h>

#include "duration.h"
#include "util.h"

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
  instance_summary(w->x->s, w->x, w->wf, w->id);
}

static void wait_closed(uv_handle_t *h) {
  http_wait *w = h->data;
  http_exchange *x = w->x;
  wait_unpark(w); /* before H2O reads the connection again */
  x->wait = NULL;
  free(w);
  exchange_release(x);
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
void wait_fired(http_wait *w) {
  if (w->watch) {
    duro_watch_cancel(w->x->s->engine, w->watch); /* gives it back */
    w->watch = NULL;
  }
  if (!w->answering)
    wait_answer(w);
}

/* On the loop: the time ran out, the client went away, or the server
 * stops: answer with the status as it is. */
void wait_timeout(http_wait *w) {
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
  guard_note_busy(s);
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
void wait_arm(http_wait *w) {
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
int wait_param(http_exchange *x, int64_t *ms) {
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
int wait_for_end(http_server *s, http_exchange *x, const char *wf,
                 const char *id, int64_t ms) {
  if (ms == 0 || !x->req)
    return instance_summary(s, x, wf, id);
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
    return instance_summary(s, x, wf, id);
  if (x->then_wait)
    return 0; /* the create's 201 stands: the instance exists */
  return send_engine_error(x, rc, wf, id);
}

static void run_wait_created(uv_work_t *r) {
  http_exchange *x = r->data;
  wait_for_end(x->s, x, x->then_wait->wf, x->then_wait->id, x->then_wait->ms);
}

/* On the loop: the create's commit is done and created the instance; the
 * create's hold on x goes to the wait, which starts on the pool (the
 * watch reads the journal).  A client gone already gets no wait. */
void wait_created(http_exchange *x) {
  create_wait *cw = x->then_wait;
  cw->started = 1;
  cw->work.data = x;
  if (!x->req || x->s->stopping ||
      uv_queue_work(x->s->ctx.loop, &cw->work, run_wait_created,
                    exchange_after_route) != 0)
    exchange_release(x); /* with the create's answer */
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

/* Room at the end of H2O's input buffer, as H2O's own allocation makes
 * it (which a connection whose head the gate read was never given: H2O
 * found the whole request in its buffer and started no read). */
static void park_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  http_conn *c = (http_conn *)handle;
  (void)suggested;
  h2o_iovec_t room = h2o_buffer_reserve(&c->sock->input, 4096);
  *buf = uv_buf_init(room.base, room.base ? (unsigned)room.len : 0);
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
    size_t now = gate_input_bytes(c->sock->input);
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
int waits_full(http_server *s, h2o_req_t *req) {
  h2o_socket_t *sock;
  http_conn *c = conn_of(s, req, &sock);
  return c && s->parked_bytes + gate_input_bytes(sock->input) > s->budget;
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
  size_t cost = gate_input_bytes(sock->input);
  if (s->parked_bytes + cost > s->budget)
    return -1;
  s->h2o_bytes -= c->counted;
  c->counted = 0;
  c->parked = w;
  w->conn = c;
  w->cost = cost;
  s->parked++;
  s->parked_bytes += cost;
  /* UV_EALREADY: H2O reads it still, and sees the client go itself.  A
   * TLS connection's bytes are records for H2O to decrypt, not ours to
   * add to its input: it is not watched, and a client gone is seen when
   * the answer is written. */
  if (!sock->ssl &&
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
    c->counted = gate_input_bytes(c->sock->input);
    s->h2o_bytes += c->counted;
  }
}
