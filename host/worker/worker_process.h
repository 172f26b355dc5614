/* worker_process.h — what the worker process's files share: an
 * activation as the worker holds it, and the call that asks the engine.
 * Private to the worker side (worker_main.c, worker_api.c).
 *
 * A worker serves each channel on a thread of its own; every activation
 * on a channel runs run() on a fiber of that thread (fiber.h), which
 * yields while the engine answers.  The plugin sees these structs as its
 * opaque duro_step and duro_attempt. */
#ifndef DURO_WORKER_PROCESS_H
#define DURO_WORKER_PROCESS_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "channel.h"
#include "duro.h"
#include "fiber.h"
#include "wire.h"

typedef struct wk_conn wk_conn;

typedef struct wk_act {
  wk_conn *conn;
  uint64_t id;
  fiber *f;
  wire_buf m; /* the frame being built */
  /* The frame that resumed the fiber (valid until it yields again). */
  uint32_t kind;
  wire_reader r;
  /* What run() gets, and the strings handed to the plugin: freed when
   * the activation ends, as the engine's arena is. */
  duro_event ev;
  char **owned;
  size_t n_owned, cap_owned;
  char *load_error; /* the build did not load: why */
  duro_run_fn run;
  int in_callback; /* between CALL and RETURN */
  int64_t cb_ns;   /* the CPU time its callback ran before this resume */
} wk_act;

typedef struct wk_attempt {
  wk_act *act;
  uint32_t number;
  int64_t deadline_ms;
  char *key;
  char *result;
  int result_set, failed, final;
  char *message;
} wk_attempt;

/* The activation whose fiber runs on this thread (NULL outside one). */
extern __thread wk_act *wk_current;

/* Sends a->m and waits for the engine's next frame for a (in a->kind,
 * a->r).  A dead engine ends the process. */
void wk_exchange(wk_act *a);
/* Sends a->m, expecting no answer (a log line). */
void wk_send(wk_act *a);
/* Keeps s until the activation ends; returns the copy (NULL for NULL). */
const char *wk_own(wk_act *a, const char *s);

/* A callback is about to begin: the engine is told through the
 * channel's shared word (a pause or terminate waits for it). */
void wk_begin_callback(wk_act *a, uint64_t seq);
/* It returned: its RETURN follows. */
void wk_end_callback(wk_act *a);

/* A channel thread's part in the watch over the plugin's limits
 * (worker_limits.c): the callback running on it now, if any.  Written by
 * the thread, read by the watch; seq is odd while the thread writes. */
typedef struct wk_watch {
  channel *ch;          /* for WM_LIMIT */
  pthread_mutex_t *wmu; /* the channel's writes */
  clockid_t clock;      /* the thread's CPU clock */
  uint64_t seq, act;    /* act: the activation, 0 = none */
  int64_t before_ns, resumed_ns;
  uint64_t reported; /* the watch told the engine of it (the watch's) */
} wk_watch;

/* `duro __worker`'s limits: starts the watch when either is > 0. */
void wk_limits_start(int64_t memory, int64_t cpu_ms);
int wk_limits_on(void);
/* On the channel's thread, once: it is watched. */
void wk_watch_add(wk_watch *w, channel *ch, pthread_mutex_t *wmu);
/* activation act's callback runs on this thread now, having run
 * before_ns of CPU time so far; _stop: it yields or ends, returning the
 * CPU time it ran since (0 when none was running). */
void wk_watch_run(wk_watch *w, uint64_t act, int64_t before_ns);
int64_t wk_watch_stop(wk_watch *w);

/* The table a worker binds its plugins to (worker_api.c). */
const duro_api *worker_api_table(void);

#endif
