/* http_stream.c — GET /workflows/{wf}/instances/{id}/events/stream: an
 * instance's events as server-sent events, its history first, then each
 * as the journal gets it, until it ends.
 *
 * The journal is the only source: the stream remembers the id of the last
 * item it sent and reads the items after it (engine.h,
 * duro_instance_events_since), on the pool, whenever the instance's rows
 * changed (a follower of them, changes.c, wakes the loop through the done
 * queue) and the previous chunk is written.  So calls that coalesce lose
 * nothing, a client reconnecting with Last-Event-ID gets what follows that
 * id, and a slow client holds one chunk (at most STREAM_MAX_ITEMS items)
 * while the rows wait in the journal: memory, never an engine thread, and
 * never a step waiting on a client.  The stream also reads every
 * STREAM_POLL_MS: on a store other hosts share their commits wake nobody
 * here, and a wake that never comes must not stall a stream for good.
 *
 * A stream owns one hold on its exchange from its route to its end: the
 * final chunk written, the client gone or the server stopping. */
#include "http_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

#define STREAM_MAX_ITEMS 256
#define STREAM_POLL_MS 1000

static void stream_read_start(http_stream *st);

/* An engine thread: the instance's rows changed. */
static void on_change(void *ctx) {
  http_stream *st = ctx;
  __atomic_store_n(&st->dirty, 1, __ATOMIC_SEQ_CST);
  /* before stream_begin, which looks at dirty, nothing is queued */
  if (__atomic_load_n(&st->begun, __ATOMIC_SEQ_CST) &&
      !__atomic_exchange_n(&st->queued, 1, __ATOMIC_ACQ_REL))
    exchange_complete(st->x);
}

/* The items as SSE text: "id:", "event:" and one "data:" line each. */
static char *sse_text(json_t *items, char *last, size_t last_len, size_t *len) {
  size_t n = json_array_size(items);
  if (!n) {
    *len = 0;
    return NULL;
  }
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  for (size_t i = 0; i < n; i++) {
    json_t *it = json_array_get(items, i);
    char *data = json_dumps(json_object_get(it, "data"), JSON_COMPACT);
    const char *id = json_string_value(json_object_get(it, "id"));
    fprintf(f, "id: %s\nevent: %s\ndata: %s\n\n", id,
            json_string_value(json_object_get(it, "event")),
            data ? data : "{}");
    free(data);
    snprintf(last, last_len, "%s", id);
  }
  fclose(f);
  *len = size;
  return text;
}

/* On the pool: what came after st->last. */
static int stream_read(http_stream *st) {
  json_t *items = NULL;
  int ended = 0;
  int rc =
      duro_instance_events_since(st->x->s->engine, st->wf, st->id, st->last,
                                 STREAM_MAX_ITEMS, &items, &ended);
  if (rc)
    return rc;
  /* more than one chunk's worth: read again once this one is written */
  if (json_array_size(items) == STREAM_MAX_ITEMS)
    __atomic_store_n(&st->dirty, 1, __ATOMIC_RELEASE);
  free(st->out);
  st->out = sse_text(items, st->last, sizeof st->last, &st->out_len);
  st->ended = ended;
  json_decref(items);
  return 0;
}

/* On the loop, once nothing of the stream is in flight: lets go. */
static void stream_release(http_stream *st) {
  http_exchange *x = st->x;
  http_server *s = x->s;
  if (st->prev)
    st->prev->next = st->next;
  else if (s->streams == st)
    s->streams = st->next;
  if (st->next)
    st->next->prev = st->prev;
  free(st->out);
  free(st->wf);
  free(st->id);
  x->stream = NULL;
  free(st);
  exchange_release(x);
}

static void poll_closed(uv_handle_t *h) { stream_release(h->data); }

/* On the loop: the stream is over; it goes once nothing is in flight (a
 * read, a write, a wake on the done queue). */
static void stream_finish(http_stream *st) {
  st->finishing = 1;
  if (st->reading || st->writing ||
      __atomic_load_n(&st->queued, __ATOMIC_ACQUIRE) || st->released)
    return;
  st->released = 1;
  duro_changes_cancel(st->x->s->engine, st->changes); /* no wake after */
  st->changes = NULL;
  if (__atomic_load_n(&st->queued, __ATOMIC_ACQUIRE)) {
    st->released = 0; /* a wake came meanwhile: on_done finishes */
    return;
  }
  if (st->poll_open) {
    st->poll_open = 0;
    uv_close((uv_handle_t *)&st->poll, poll_closed);
    return;
  }
  stream_release(st);
}

/* On the loop: writes what was read; the last chunk ends the response. */
static void stream_write(http_stream *st) {
  h2o_req_t *req = st->x->req;
  if (!req || st->finishing) {
    stream_finish(st);
    return;
  }
  int final = st->ended || st->x->s->stopping;
  if (!st->out_len && !final)
    return;
  h2o_iovec_t buf = h2o_iovec_init(st->out ? st->out : "", st->out_len);
  if (final) {
    /* H2O writes it after we are gone: the request's pool keeps it */
    buf.base = h2o_mem_alloc_pool(&req->pool, st->out_len + 1);
    memcpy(buf.base, st->out ? st->out : "", st->out_len);
    st->done = 1;
    h2o_send(req, &buf, 1, H2O_SEND_STATE_FINAL);
    stream_finish(st);
    return;
  }
  st->writing = 1;
  h2o_send(req, &buf, 1, H2O_SEND_STATE_IN_PROGRESS);
}

static void on_read(uv_work_t *w) {
  http_stream *st = w->data;
  st->read_rc = stream_read(st);
}

static void after_read(uv_work_t *w, int status) {
  (void)status;
  http_stream *st = w->data;
  st->reading = 0;
  if (st->read_rc) /* gone (retention) or a failing journal: it ends */
    st->ended = 1;
  stream_write(st);
  if (!st->writing && !st->finishing &&
      __atomic_load_n(&st->dirty, __ATOMIC_ACQUIRE))
    stream_read_start(st);
}

static void stream_read_start(http_stream *st) {
  if (st->reading || st->writing || st->finishing)
    return;
  __atomic_store_n(&st->dirty, 0, __ATOMIC_RELEASE);
  st->reading = 1;
  st->read.data = st;
  if (uv_queue_work(st->x->s->ctx.loop, &st->read, on_read, after_read) != 0) {
    st->reading = 0;
    stream_finish(st);
  }
}

/* H2O: the last chunk is written, ready for the next. */
static void on_proceed(h2o_generator_t *gen, h2o_req_t *req) {
  (void)req;
  http_stream *st = H2O_STRUCT_FROM_MEMBER(http_stream, gen, gen);
  st->writing = 0;
  free(st->out);
  st->out = NULL;
  st->out_len = 0;
  if (st->finishing || st->x->s->stopping) {
    stream_write(st); /* the final chunk, or the end */
    return;
  }
  if (__atomic_load_n(&st->dirty, __ATOMIC_ACQUIRE))
    stream_read_start(st);
}

/* H2O: the client went away. */
static void on_stop(h2o_generator_t *gen, h2o_req_t *req) {
  (void)req;
  http_stream *st = H2O_STRUCT_FROM_MEMBER(http_stream, gen, gen);
  st->writing = 0;
  st->x->req = NULL;
  stream_finish(st);
}

static void on_poll(uv_timer_t *t) {
  http_stream *st = t->data;
  __atomic_store_n(&st->dirty, 1, __ATOMIC_RELEASE);
  stream_read_start(st);
}

/* On the loop, after the route: the response begins with the history the
 * route read. */
void stream_begin(http_stream *st) {
  http_server *s = st->x->s;
  h2o_req_t *req = st->x->req;
  st->next = s->streams;
  if (s->streams)
    s->streams->prev = st;
  s->streams = st;
  __atomic_store_n(&st->begun, 1, __ATOMIC_SEQ_CST);
  if (!req || s->stopping) {
    send_error(st->x, 503, "server.busy", "the host is stopping");
    stream_finish(st);
    return;
  }
  st->x->streamed = 1;
  if (st->x->guard)
    st->x->guard->x = NULL; /* H2O's stop tells us the client went */
  req->res.status = 200;
  req->res.reason = "OK";
  h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                 H2O_STRLIT("text/event-stream"));
  h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
                 H2O_STRLIT("no-cache"));
  st->gen = (h2o_generator_t){on_proceed, on_stop};
  h2o_start_response(req, &st->gen);
  /* a reading a second as well: another host's commits (a shared store)
   * wake nobody here, and a missed wake must not stall a stream */
  if (uv_timer_init(s->ctx.loop, &st->poll) == 0) {
    st->poll_open = 1;
    st->poll.data = st;
    uv_timer_start(&st->poll, on_poll, STREAM_POLL_MS, STREAM_POLL_MS);
  }
  stream_write(st);
  if (!st->writing && !st->finishing &&
      __atomic_load_n(&st->dirty, __ATOMIC_ACQUIRE))
    stream_read_start(st);
}

/* On the loop: a follower's wake, off the done queue. */
void stream_woken(http_stream *st) {
  __atomic_store_n(&st->queued, 0, __ATOMIC_RELEASE);
  if (st->finishing) {
    stream_finish(st);
    return;
  }
  stream_read_start(st);
}

/* On the loop, the server stopping: each stream ends with what it sent
 * (a client reconnects with its last id). */
void streams_stop(http_server *s) {
  for (http_stream *st = s->streams, *next; st; st = next) {
    next = st->next;
    if (!st->writing && !st->reading)
      stream_write(st);
  }
}

/* On the pool: follows the instance and reads its history after the
 * request's Last-Event-ID, leaving x unanswered for stream_begin; or
 * answers an error. */
int stream_open(http_server *s, http_exchange *x, const char *wf,
                const char *id) {
  if (!x->req)
    return send_error(x, 400, "request.invalid",
                      "an event stream is served over HTTP only");
  http_stream *st = xcalloc(1, sizeof *st);
  st->x = x;
  st->wf = xstrdup(wf);
  st->id = xstrdup(id);
  const char *last = x->rq.last_event_id;
  if (last && strlen(last) >= sizeof st->last) {
    free(st->wf), free(st->id), free(st);
    return send_error(x, 400, "request.invalid",
                      "Last-Event-ID is not an id of this stream");
  }
  snprintf(st->last, sizeof st->last, "%s", last ? last : "");
  /* following first: a commit after the read below wakes the stream */
  int rc =
      duro_instance_changes(s->engine, wf, id, on_change, st, &st->changes);
  if (rc == 0)
    rc = stream_read(st);
  if (rc) {
    duro_changes_cancel(s->engine, st->changes); /* it queued nothing */
    free(st->out), free(st->wf), free(st->id), free(st);
    if (rc == DURO_E_INVALID_ARGUMENT)
      return send_error(x, 400, "request.invalid",
                        "Last-Event-ID is not an id of this stream");
    return send_engine_error(x, rc, wf, id);
  }
  x->stream = st;
  x->owners++; /* the stream's, until stream_release */
  return 0;
}
