/* worker_calls.c — a worker process's callback pool: each step callback
 * runs on a thread of its own, so that callbacks that block on I/O (a
 * payment API, a database) run side by side, as many as the engine sends
 * at once (it sends no more than the plugin's `concurrency`), while the
 * channels' threads go on serving every other activation.
 *
 * A thread is started when a callback comes and none is idle; an idle
 * thread waits for the next one and ends after POOL_IDLE_S without any,
 * so a burst of slow steps costs threads only while it lasts.  Each
 * thread has a signal stack (a stack overflow in a callback still names
 * it on the channel's page) and, under limits, a watch over its CPU
 * time. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "altstack.h"
#include "log.h"
#include "worker_process.h"
#include "worker_proto.h"

#define POOL_IDLE_S 30

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static wk_act *queue_head, *queue_tail; /* callbacks no thread took yet */
static uint32_t queued, idle, threads;

/* This thread's watch over its callbacks' CPU time (under limits), and
 * whether it is a pool thread (else a channel's, running a callback
 * inline). */
static __thread wk_watch *thread_watch;
static __thread int pool_thread;

int wk_call_claim(wk_act *a) {
  /* the engine clears the CALL's bits before sending it; whichever of
   * BEGAN and REVOKED is set first wins (worker_proto.h) */
  uint64_t began;
  uint64_t *word = wm_page_call(wk_conn_page(a->conn), a->call.seq, &began);
  uint64_t was = __atomic_fetch_or(word, began, __ATOMIC_ACQ_REL);
  return !(was & wm_revoked(began));
}

void wk_begin_callback(wk_act *a) {
  if (!pool_thread) {
    /* inline, on the fiber: a callback now, no longer run() code */
    __atomic_store_n(&wk_conn_page(a->conn)[WM_PAGE_RUN], 0, __ATOMIC_RELEASE);
    wk_begin_handler(a); /* watched as a handler is: its fiber may yield */
  } else if (thread_watch) {
    wk_watch_run(thread_watch, a->conn, a->id, 0);
  }
}

void wk_end_callback(wk_act *a) {
  if (!pool_thread) {
    wk_end_handler(a);
    /* run() code again, until its fiber yields */
    __atomic_store_n(&wk_conn_page(a->conn)[WM_PAGE_RUN], a->id,
                     __ATOMIC_RELEASE);
  } else if (thread_watch) {
    wk_watch_stop(thread_watch);
  }
}

/* ---- where a callback runs ----
 *
 * A callback on a pool thread costs a thread hand-off each way, which a
 * step that returns at once feels (a third of the rate of trivial steps
 * here).  A step function whose last FAST_RUNS callbacks each returned
 * within FAST_NS runs on its channel's thread instead, on its
 * activation's fiber, as callbacks ran before the pool; one slower run
 * sends it back to the pool.  The price: such a function's first call
 * that blocks holds its channel's other activations until it returns (at
 * most its timeout), once. */
#define FAST_RUNS 16
#define FAST_NS 100000
#define FN_SLOTS 4096

/* By function address, direct-mapped (a collision only forgets): races
 * between threads are benign, since each word is read and written
 * whole. */
static struct {
  uint64_t fn;
  uint32_t fast; /* callbacks in a row that returned within FAST_NS */
} fn_seen[FN_SLOTS];

static size_t fn_slot(uint64_t fn) {
  return (size_t)((fn >> 4) * UINT64_C(0x9E3779B97F4A7C15) >> 52) % FN_SLOTS;
}

int wk_calls_inline(uint64_t fn) {
  size_t i = fn_slot(fn);
  return __atomic_load_n(&fn_seen[i].fn, __ATOMIC_RELAXED) == fn &&
         __atomic_load_n(&fn_seen[i].fast, __ATOMIC_RELAXED) >= FAST_RUNS;
}

void wk_calls_note(uint64_t fn, int64_t ns) {
  size_t i = fn_slot(fn);
  uint32_t fast = 0;
  if (__atomic_load_n(&fn_seen[i].fn, __ATOMIC_RELAXED) == fn)
    fast = __atomic_load_n(&fn_seen[i].fast, __ATOMIC_RELAXED);
  fast = ns < FAST_NS ? (fast < FAST_RUNS ? fast + 1 : fast) : 0;
  __atomic_store_n(&fn_seen[i].fn, fn, __ATOMIC_RELAXED);
  __atomic_store_n(&fn_seen[i].fast, fast, __ATOMIC_RELAXED);
}

static wk_act *take_locked(void) {
  wk_act *a = queue_head;
  if (a && !(queue_head = a->next_call))
    queue_tail = NULL;
  if (a)
    queued--;
  return a;
}

static void *pool_main(void *arg) {
  (void)arg;
  pool_thread = 1;
  thread_altstack();
  wk_watch watch;
  if (wk_limits_on()) {
    wk_watch_add(&watch);
    thread_watch = &watch;
  }
  pthread_mutex_lock(&pool_mu);
  for (;;) {
    wk_act *a = take_locked();
    if (!a) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_sec += POOL_IDLE_S;
      idle++;
      int rc = 0;
      while (!queue_head && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&pool_cond, &pool_mu, &until);
      idle--;
      if (!queue_head)
        break; /* idle for POOL_IDLE_S: this thread goes */
      continue;
    }
    pthread_mutex_unlock(&pool_mu);
    wk_current = a;
    wk_crash_page = wk_conn_page(a->conn);
    wk_callback_run(a);
    wk_current = NULL;
    wk_crash_page = NULL;
    wk_call_returned(a);
    pthread_mutex_lock(&pool_mu);
  }
  threads--;
  pthread_mutex_unlock(&pool_mu);
  if (thread_watch)
    wk_watch_remove(&watch);
  thread_watch = NULL;
  thread_altstack_release();
  return NULL;
}

void wk_calls_submit(wk_act *a) {
  a->next_call = NULL;
  pthread_mutex_lock(&pool_mu);
  if (queue_tail)
    queue_tail->next_call = a;
  else
    queue_head = a;
  queue_tail = a;
  queued++;
  int start = idle < queued;
  if (!start)
    pthread_cond_signal(&pool_cond);
  else
    threads++;
  pthread_mutex_unlock(&pool_mu);
  if (!start)
    return;
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &attr, pool_main, NULL);
  pthread_attr_destroy(&attr);
  if (rc == 0)
    return;
  pthread_mutex_lock(&pool_mu);
  int none = --threads == 0;
  pthread_mutex_unlock(&pool_mu);
  if (none) {
    /* nothing would ever run it: the engine sees the death and fails
     * what this process held, not knowing it as any callback's doing */
    log_error("worker: cannot start a thread for a callback: %s", strerror(rc));
    _exit(70);
  }
  /* the callback waits for a thread of the pool to be free */
}
