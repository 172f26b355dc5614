/* worker_process.h — what the worker process's files share: an
 * activation as the worker holds it, and the call that asks the engine.
 * Private to the worker side (worker_main.c, worker_api.c).
 *
 * A worker serves each channel on a thread of its own; every activation
 * on a channel runs run() on a fiber of that thread (fiber.h), which
 * yields while the engine answers.  A step's callback, which may block
 * on I/O for as long as its timeout, runs on a thread of the process's
 * callback pool instead (worker_calls.c), so that the channel's thread
 * goes on reading and writing for every other activation meanwhile.
 * The plugin sees these structs as its opaque duro_step and
 * duro_attempt. */
#ifndef DURO_WORKER_PROCESS_H
#define DURO_WORKER_PROCESS_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "channel.h"
#include "duro.h"
#include "fiber.h"
#include "wire.h"
#include "worker_frame.h"

typedef struct wk_conn wk_conn;

/* A queue handler's batch as the worker holds it (the plugin's opaque
 * duro_message_batch): its messages, and the marks the handler made,
 * which go back with its END (worker_api.c makes them). */
typedef struct wk_batch {
  const char *queue;
  size_t n;
  duro_message *msgs;
  uint32_t *mark; /* WM_MARK_* */
  int64_t *delay;
} wk_batch;

typedef struct wk_act {
  wk_conn *conn;
  uint64_t id;
  fiber *f;
  wire_buf m; /* the frame being built */
  /* The frame that resumed the fiber, decoded whole (its strings valid
   * until it yields again); kind 0 when the channel went instead. */
  uint32_t kind;
  worker_frame in;
  /* What run() gets, and the strings handed to the plugin: freed when
   * the activation ends, as the engine's arena is. */
  duro_event ev;
  char **owned;
  size_t n_owned, cap_owned;
  char *load_error; /* the build did not load: why */
  duro_run_fn run;
  /* The size of duro_step_config the build was built with (its layout):
   * a step's config is read no further.  0: this host's. */
  uint16_t step_config_size;
  /* A queue, cron or tail handler's run instead (kind QUEUE_RUN,
   * CRON_RUN, TAIL_RUN). */
  duro_queue_fn queue;
  duro_scheduled_fn scheduled;
  duro_tail_fn tail;
  wk_batch batch;
  duro_scheduled_event tick;
  duro_tail_batch items;
  int in_callback; /* a handler runs on the channel's thread */
  int64_t cb_ns;   /* the CPU time its handler ran before this resume */
  /* Minor page faults under limits.memory: run()'s own outside any
   * callback, and those of the inline callbacks and handlers between
   * (cb_faults0: the thread's when the one running began). */
  int64_t run_faults, cb_faults, cb_faults0;
  /* The CALL whose callback a pool thread runs (worker_calls.c), and,
   * while it runs there (on_thread), the engine's answers to its
   * requests: copied into `answer`, since the channel's buffer moves on
   * (the conn's mu). */
  struct {
    uint64_t fn, arg, seq;
    uint32_t number;
    int64_t deadline_ms;
    int64_t begin_by; /* clock_boot_ms: not begun past it (WM_CALL) */
    char *key;
    char *traceparent;
    int rollback; /* a duro_rollback_fn, handed `output` */
    char *output;
  } call;
  int on_thread, answered;
  wire_buf answer;
  pthread_cond_t cond;      /* answered, or the channel is gone */
  struct wk_act *next_call; /* in the pool's queue */
} wk_act;

typedef struct wk_attempt {
  wk_act *act;
  uint32_t number;
  int64_t deadline_ms;
  char *key;
  char *traceparent; /* the attempt's span (WM_CALL) */
  char *result;
  int result_set, failed, final;
  char *message;
} wk_attempt;

/* The activation whose fiber or callback runs on this thread (NULL
 * outside one), and the page of its channel (worker_proto.h's
 * WM_PAGE_*), where the crash handler names it. */
extern __thread wk_act *wk_current;
extern __thread uint64_t *wk_crash_page;
/* The engine's engine.max_step_result (bytes; 0: none): a result over it
 * is not sent (worker_api.c), as the engine would refuse it. */
extern int64_t wk_max_result;

/* Sends a->m and waits for the engine's next frame for a (in a->kind,
 * a->in); kind 0 when the channel went meanwhile. */
void wk_exchange(wk_act *a);
/* Sends a->m, expecting no answer (a log line). */
void wk_send(wk_act *a);
/* Keeps s until the activation ends; returns the copy (NULL for NULL). */
const char *wk_own(wk_act *a, const char *s);

/* On run()'s fiber, a CALL in a->in: its callback is handed to the
 * callback pool, and the fiber yields until the engine's answer to its
 * RETURN (a REPLY, or the next CALL) is in a->kind and a->in. */
void wk_call_start(wk_act *a);
/* On a pool thread: runs the callback a->call names, and builds its
 * RETURN in a->m (worker_api.c). */
void wk_callback_run(wk_act *a);
/* On a pool thread, the callback returned: its RETURN is queued on the
 * channel, and the activation is the channel thread's again. */
void wk_call_returned(wk_act *a);
/* The callback pool (worker_calls.c): runs a's callback on a thread of
 * its own, started when none is idle (the engine sends no more CALLs at
 * once than the plugin's concurrency allows). */
void wk_calls_submit(wk_act *a);
/* Whether step function `fn`'s callbacks returned at once of late (then
 * one runs on its channel's thread instead), and how long one ran. */
int wk_calls_inline(uint64_t fn);
void wk_calls_note(uint64_t fn, int64_t ns);

/* Whether a's CALL may begin: 1 once its BEGAN bit on the channel's
 * page is set, 0 when the engine revoked it first (a pause or terminate
 * came; worker_proto.h's WM_PAGE_BEGAN). */
int wk_call_claim(wk_act *a);
/* A callback is about to begin on this thread (claimed): the limits'
 * watch follows it; it returned: its RETURN follows (worker_calls.c). */
void wk_begin_callback(wk_act *a);
void wk_end_callback(wk_act *a);

/* A frame for the engine from any thread (the limits' watch): queued on
 * c's channel, whose thread writes it. */
void wk_conn_post(wk_conn *c, wire_buf *m);
/* The same, written now from the calling thread as far as the socket
 * takes it: the limits' watch reports code that holds the channel's
 * thread (run() taking memory, an inline callback spinning), which
 * would write nothing until it lets go. */
void wk_conn_post_now(wk_conn *c, wire_buf *m);
/* The page c's two sides share (WM_PAGE_*). */
uint64_t *wk_conn_page(wk_conn *c);

/* A queue or cron handler begins or returns: watched for the limits as
 * a callback is, without the shared word (no pause waits for it). */
void wk_begin_handler(wk_act *a);
void wk_end_handler(wk_act *a);

/* A channel thread's part in the watch over the plugin's limits
 * (worker_limits.c): the callback running on it now, if any.  Written by
 * the thread, read by the watch; seq is odd while the thread writes. */
typedef struct wk_watch {
  wk_conn *conn;     /* for WM_LIMIT: the channel of what runs now */
  clockid_t clock;   /* the thread's CPU clock */
  pid_t tid;         /* the thread, for its page faults in /proc */
  uint64_t seq, act; /* act: the activation, 0 = none */
  int64_t before_ns, resumed_ns;
  int64_t faults0;   /* the thread's minor faults when it resumed */
  uint64_t reported; /* the watch told the engine of it (the watch's) */
  /* A channel's thread (else NULL): its channel, whose page names the
   * run() whose code runs on it now (WM_PAGE_RUN), and the thread's
   * minor faults when that run() resumed. */
  wk_conn *chan;
  int64_t run_faults0;
  uint64_t run_reported; /* the run() the watch told the engine of */
} wk_watch;

/* `duro __worker`'s limits: starts the watch when either is > 0. */
void wk_limits_start(int64_t memory, int64_t cpu_ms);
int wk_limits_on(void);
/* On a channel's or a pool thread, once: it is watched. */
void wk_watch_add(wk_watch *w);
/* Its thread ends: no longer watched. */
void wk_watch_remove(wk_watch *w);
/* activation act's callback runs on this thread now, having run
 * before_ns of CPU time so far; _stop: it yields or ends, returning the
 * CPU time it ran since (0 when none was running). */
void wk_watch_run(wk_watch *w, wk_conn *conn, uint64_t act, int64_t before_ns);
int64_t wk_watch_stop(wk_watch *w);

/* Memory run() code touches, outside any callback (limits.memory): the
 * calling thread's minor page faults so far (0 when no memory limit is
 * set), and an activation's run() having touched `faults` pages in all
 * on c's channel, which the watch names when the process passes the
 * limit and no running callback grew (its WM_LIMIT says run()); _ended:
 * the activation is gone, or its channel. */
int64_t wk_thread_faults(void);
void wk_limits_run_grew(wk_conn *c, uint64_t act, int64_t faults);
void wk_limits_run_ended(wk_conn *c, uint64_t act);

/* The table a worker binds its plugins to (worker_api.c). */
const duro_api *worker_api_table(void);

#endif
