/* worker_main.c — `duro __worker FD PLUGIN`: a worker process, started
 * by the engine (worker_pool.c) with the control end of a socketpair as
 * FD.  The engine hands it one channel per engine thread over that
 * socket (SCM_RIGHTS); each channel gets a thread, and each activation
 * on it a fiber that runs the plugin's run().  A step's callback runs on
 * a thread of the callback pool (worker_calls.c).  Builds are loaded on
 * first use, from the build store, with the worker's API table
 * (worker_api.c), and stay loaded for the life of the process.
 *
 * A channel's thread never waits to write while the engine may be
 * waiting to write to it: its end is non-blocking, it polls for input,
 * for room and for a wake from a pool thread (an eventfd) at once, and
 * frames from any thread are queued on the channel under its lock for
 * it to write.  So a large value crosses while callbacks run, both ways.
 *
 * Crash handlers: a fatal signal in plugin code names the activation it
 * hit on its channel's shared page (WM_PAGE_CRASH) before the signal's
 * default action ends the process, so that the engine blames that
 * attempt alone; the engine reads the signal itself from waitpid.
 * The worker ends with the engine: EOF on the control socket (the
 * engine's death closes it) ends the process, whatever its threads are
 * doing. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "altstack.h"
#include "loader.h"
#include "log.h"
#include "map.h"
#include "util.h"
#include "worker.h"
#include "worker_process.h"
#include "worker_proto.h"

struct wk_conn {
  channel ch;     /* read by its thread alone; ch.out under mu */
  idmap acts;     /* id → wk_act (its thread's) */
  uint64_t *page; /* shared with the engine (WM_PAGE_*) */
  /* ch.out, each activation's on_thread and answer, and dead */
  pthread_mutex_t mu;
  int wake_fd; /* eventfd: a frame was queued from another thread */
  int polling; /* its thread waits in poll (else it writes before it does) */
  int dead;    /* the engine's end is gone */
  wk_watch watch;
};

__thread wk_act *wk_current;
__thread uint64_t *wk_crash_page;
int64_t wk_max_result;

/* ---- builds ---- */

typedef struct wk_build {
  struct wk_build *next;
  char *hash;
  loader_plugin *lp;
} wk_build;

static pthread_mutex_t builds_mu = PTHREAD_MUTEX_INITIALIZER;
static wk_build *builds;

/* The build `hash` of plugin `name`, loaded from `path` on first use;
 * NULL with why in err when it did not load (not kept: the engine runs
 * the instance again after a back-off, and the load is tried again). */
static const wk_build *build_get(const char *name, const char *path,
                                 const char *hash, char *err, size_t len) {
  pthread_mutex_lock(&builds_mu);
  wk_build *b = builds;
  while (b && strcmp(b->hash, hash))
    b = b->next;
  if (!b) {
    loader_plugin *lp = NULL;
    if (loader_open(name, path, worker_api_table(), &lp, err, len) == 0) {
      b = xcalloc(1, sizeof *b);
      b->hash = xstrdup(hash);
      b->lp = lp;
      b->next = builds;
      builds = b;
    }
  }
  pthread_mutex_unlock(&builds_mu);
  return b;
}

/* ---- activations ---- */

const char *wk_own(wk_act *a, const char *s) {
  if (!s)
    return NULL;
  if (a->n_owned == a->cap_owned) {
    a->cap_owned = a->cap_owned ? a->cap_owned * 2 : 8;
    a->owned = xrealloc(a->owned, a->cap_owned * sizeof *a->owned);
  }
  return a->owned[a->n_owned++] = xstrdup(s);
}

uint64_t *wk_conn_page(wk_conn *c) { return c->page; }

static void conn_wake(wk_conn *c) {
  uint64_t one = 1;
  ssize_t k = write(c->wake_fd, &one, sizeof one);
  (void)k; /* a full counter still wakes the poll */
}

/* A frame from a thread other than the channel's, queued.  While the
 * channel's thread is busy it writes it with the rest before it waits
 * again (one write for many); while it waits in poll, the frame is
 * written here, and the thread is woken only for what the socket did not
 * take (c's mu held on entry, not on return). */
static void post_locked(wk_conn *c, wire_buf *m) {
  int wake = 0;
  if (!c->dead) {
    channel_queue(&c->ch, m);
    wake = c->polling && channel_write_some(&c->ch) == 0;
  }
  pthread_mutex_unlock(&c->mu);
  if (wake)
    conn_wake(c);
}

void wk_conn_post(wk_conn *c, wire_buf *m) {
  pthread_mutex_lock(&c->mu);
  post_locked(c, m);
}

void wk_conn_post_now(wk_conn *c, wire_buf *m) {
  pthread_mutex_lock(&c->mu);
  if (!c->dead) {
    channel_queue(&c->ch, m);
    channel_write_some(&c->ch); /* the rest when its thread polls */
  }
  pthread_mutex_unlock(&c->mu);
}

/* Queued: the channel's thread writes what its activations said in one
 * write, once it has read everything the engine sent (woken when it
 * comes from a pool thread). */
void wk_send(wk_act *a) {
  if (a->on_thread) {
    wk_conn_post(a->conn, &a->m);
    return;
  }
  pthread_mutex_lock(&a->conn->mu);
  channel_queue(&a->conn->ch, &a->m);
  pthread_mutex_unlock(&a->conn->mu);
}

void wk_begin_handler(wk_act *a) {
  a->in_callback = 1;
  a->cb_ns = 0;
  a->cb_faults0 = wk_thread_faults();
  wk_watch_run(&a->conn->watch, a->conn, a->id, 0);
}

void wk_end_handler(wk_act *a) {
  a->cb_ns += wk_watch_stop(&a->conn->watch);
  a->cb_faults += wk_thread_faults() - a->cb_faults0;
  a->in_callback = 0;
}

void wk_exchange(wk_act *a) {
  if (!a->on_thread) {
    wk_send(a);
    fiber_yield(); /* the channel's thread resumes it with the answer */
    return;
  }
  /* A callback on a pool thread waits for the channel's thread to copy
   * the answer in; a channel gone is an answer no read can use. */
  wk_conn *c = a->conn;
  pthread_mutex_lock(&c->mu);
  a->answered = 0;
  post_locked(c, &a->m);
  pthread_mutex_lock(&c->mu);
  while (!a->answered && !c->dead)
    pthread_cond_wait(&a->cond, &c->mu);
  if (!a->answered)
    a->kind = 0;
  pthread_mutex_unlock(&c->mu);
}

void wk_call_start(wk_act *a) {
  const wf_call *c = &a->in.call;
  a->call.fn = c->fn;
  a->call.arg = c->arg;
  a->call.number = c->number;
  a->call.deadline_ms = c->deadline_ms;
  free(a->call.key);
  a->call.key = c->key ? xstrdup(c->key) : NULL;
  free(a->call.traceparent);
  a->call.traceparent = c->traceparent ? xstrdup(c->traceparent) : NULL;
  a->call.seq = c->seq;
  a->call.begin_by = c->begin_by;
  a->call.rollback = (int)c->rollback;
  free(a->call.output);
  a->call.output = c->output ? xstrdup(c->output) : NULL;
  if (wk_calls_inline(a->call.fn)) {
    /* it has returned at once of late: here, on the fiber */
    wk_callback_run(a);
    wk_exchange(a); /* its RETURN, and the engine's answer */
    return;
  }
  pthread_mutex_lock(&a->conn->mu);
  a->on_thread = 1;
  pthread_mutex_unlock(&a->conn->mu);
  wk_calls_submit(a);
  fiber_yield(); /* resumed with the answer to the callback's RETURN */
}

void wk_call_returned(wk_act *a) {
  wk_conn *c = a->conn;
  pthread_mutex_lock(&c->mu);
  a->on_thread = 0; /* the engine's next frame resumes the fiber */
  post_locked(c, &a->m);
}

static void act_main(void *arg) {
  wk_act *a = arg;
  int64_t rc = DURO_ERROR;
  if (a->run) {
    duro_env *env = (duro_env *)a; /* opaque to the plugin; unused here */
    rc = a->run((duro_step *)a, &a->ev, env);
  }
  channel_begin(&a->m, WM_END, a->id);
  wire_put_i64(&a->m, rc);
  wire_put_str(&a->m, a->load_error);
  wk_send(a);
}

/* A branch of a DO_ALL (a CALL under an id of its own): its callback,
 * run as any CALL's, until the engine's answer to its RETURN ends it.
 * Its callback is the plugin's run() fiber's, which waits for the
 * DO_ALL's answer meanwhile, so its build stays loaded. */
static void branch_main(void *arg) { wk_call_start(arg); }

/* A RUN frame: the activation, its build found (or why not). */
static wk_act *act_alloc(wk_conn *c, uint64_t id) {
  wk_act *a = xcalloc(1, sizeof *a);
  a->conn = c;
  a->id = id;
  pthread_cond_init(&a->cond, NULL);
  return a;
}

static wk_act *act_new(wk_conn *c, uint64_t id, const wf_run *r) {
  wk_act *a = act_alloc(c, id);
  a->ev.size = sizeof a->ev;
  a->ev.workflow = wk_own(a, r->workflow);
  a->ev.instance_id = wk_own(a, r->id);
  a->ev.params = wk_own(a, r->params);
  a->ev.created_ms = r->created_ms;
  char err[1024];
  const wf_build *w = &r->build;
  const wk_build *b = build_get(w->plugin, w->path, w->hash, err, sizeof err);
  if (!b)
    a->load_error = xstrdup(err);
  else if (!(a->run = loader_find_workflow(b->lp, r->cls)))
    a->load_error = xasprintf("plugin \"%s\" build %s exports no class "
                              "\"%s\"",
                              w->plugin, w->hash, r->cls);
  else
    a->step_config_size = loader_info(b->lp)->layout.step_config_size;
  return a;
}

/* A queue, cron or tail handler's run: the handler, watched as a
 * callback is, then END with its return code (and a batch's marks). */
static void handler_main(void *arg) {
  wk_act *a = arg;
  int64_t rc = -1;
  duro_env *env = (duro_env *)a; /* opaque to the plugin; unused here */
  if (!a->load_error) {
    wk_begin_handler(a);
    rc = a->queue  ? a->queue((duro_message_batch *)&a->batch, env)
         : a->tail ? a->tail(&a->items, env)
                   : a->scheduled(&a->tick, env);
    wk_end_handler(a);
  }
  channel_begin(&a->m, WM_END, a->id);
  wire_put_i64(&a->m, rc);
  wire_put_str(&a->m, a->load_error);
  if (a->queue || a->batch.n) {
    wire_put_u32(&a->m, (uint32_t)a->batch.n);
    for (size_t i = 0; i < a->batch.n; i++) {
      wire_put_u32(&a->m, a->batch.mark[i]);
      wire_put_i64(&a->m, a->batch.delay[i]);
    }
  }
  wk_send(a);
}

/* A QUEUE_RUN, CRON_RUN or TAIL_RUN frame: the handler's activation, its
 * build found (or why not). */
static wk_act *handler_new(wk_conn *c, uint64_t id, const worker_frame *f) {
  wk_act *a = act_alloc(c, id);
  const wf_build *w = f->kind == WM_QUEUE_RUN  ? &f->queue_run.build
                      : f->kind == WM_TAIL_RUN ? &f->tail_run.build
                                               : &f->cron_run.build;
  const char *plugin = w->plugin, *hash = w->hash;
  if (f->kind == WM_QUEUE_RUN) {
    const wf_queue_run *q = &f->queue_run;
    a->batch.queue = wk_own(a, q->queue);
    if ((a->batch.n = q->n)) {
      a->batch.msgs = xcalloc(q->n, sizeof *a->batch.msgs);
      a->batch.mark = xcalloc(q->n, sizeof *a->batch.mark);
      a->batch.delay = xcalloc(q->n, sizeof *a->batch.delay);
    }
    const char *cursor = q->first;
    for (size_t i = 0; i < a->batch.n; i++) {
      wf_message wm;
      worker_frame_queue_message(&cursor, &wm);
      duro_message *m = &a->batch.msgs[i];
      m->size = sizeof *m;
      m->id = wm.id;
      m->body = wk_own(a, wm.body);
      m->attempts = wm.attempts;
      m->sent_ms = wm.sent_ms;
      m->traceparent = wk_own(a, wm.traceparent);
    }
  } else if (f->kind == WM_TAIL_RUN) {
    const wf_tail_run *t = &f->tail_run;
    a->items.size = sizeof a->items;
    a->items.items = wk_own(a, t->items);
    a->items.n = t->n;
    a->items.dropped = (uint64_t)t->dropped;
  } else {
    const wf_cron_run *t = &f->cron_run;
    a->tick.size = sizeof a->tick;
    a->tick.cron = wk_own(a, t->cron);
    a->tick.scheduled_ms = t->scheduled_ms;
    a->tick.timezone = wk_own(a, t->timezone);
  }
  char err[1024];
  const wk_build *b = build_get(plugin, w->path, hash, err, sizeof err);
  const char *what = f->kind == WM_QUEUE_RUN  ? "queue"
                     : f->kind == WM_TAIL_RUN ? "tail"
                                              : "scheduled";
  if (!b)
    a->load_error = xstrdup(err);
  else if (f->kind == WM_QUEUE_RUN && !(a->queue = loader_info(b->lp)->queue))
    a->load_error = xasprintf("plugin \"%s\" build %s has no %s handler",
                              plugin, hash, what);
  else if (f->kind == WM_TAIL_RUN && !(a->tail = loader_info(b->lp)->tail))
    a->load_error = xasprintf("plugin \"%s\" build %s has no %s handler",
                              plugin, hash, what);
  else if (f->kind == WM_CRON_RUN &&
           !(a->scheduled = loader_info(b->lp)->scheduled))
    a->load_error = xasprintf("plugin \"%s\" build %s has no %s handler",
                              plugin, hash, what);
  return a;
}

static void act_free(wk_act *a) {
  free(a->batch.msgs);
  free(a->batch.mark);
  free(a->batch.delay);
  for (size_t i = 0; i < a->n_owned; i++)
    free(a->owned[i]);
  free(a->owned);
  free(a->load_error);
  free(a->call.key);
  free(a->call.traceparent);
  free(a->call.output);
  wire_buf_free(&a->answer);
  pthread_cond_destroy(&a->cond);
  wire_buf_free(&a->m);
  if (a->f)
    fiber_destroy(a->f);
  free(a);
}

/* ---- a channel's thread ---- */

/* A frame for an activation whose callback runs on a pool thread (the
 * answer to one of its requests): copied there and the thread woken; 1,
 * or 0 when the activation is its fiber's. */
static int hand_to_thread(wk_conn *c, wk_act *a, uint32_t kind,
                          const wire_reader *r) {
  pthread_mutex_lock(&c->mu);
  int on_thread = a->on_thread;
  if (on_thread) {
    a->answer.len = 0;
    wire_put(&a->answer, r->p, (size_t)(r->end - r->p));
    a->kind = kind;
    /* decoded again from the copy (checked whole once already): its
     * strings must outlive the channel's buffer */
    worker_frame_decode_engine(kind, (const uint8_t *)a->answer.data,
                               a->answer.len, &a->in);
    a->answered = 1;
    pthread_cond_signal(&a->cond);
  }
  pthread_mutex_unlock(&c->mu);
  return on_thread;
}

static void wake_each(void *ctx, int64_t key, void *val) {
  (void)ctx, (void)key;
  pthread_cond_signal(&((wk_act *)val)->cond);
}

/* Writes what is queued as far as the engine takes it now, then waits
 * for more to read, for room to write the rest, or for a frame another
 * thread queued: 0, or -1 when the engine's end is gone. */
static int conn_wait(wk_conn *c) {
  pthread_mutex_lock(&c->mu);
  int wrote = channel_write_some(&c->ch);
  int pending = channel_pending(&c->ch);
  c->polling = wrote >= 0;
  pthread_mutex_unlock(&c->mu);
  if (wrote < 0)
    return -1;
  struct pollfd fds[2] = {
      {.fd = c->ch.fd, .events = POLLIN | (pending ? POLLOUT : 0)},
      {.fd = c->wake_fd, .events = POLLIN}};
  int got = poll(fds, 2, -1);
  pthread_mutex_lock(&c->mu);
  c->polling = 0;
  pthread_mutex_unlock(&c->mu);
  if (got < 0 && errno != EINTR)
    return -1;
  if (fds[1].revents & POLLIN) {
    uint64_t v;
    ssize_t k = read(c->wake_fd, &v, sizeof v);
    (void)k;
  }
  return 0;
}

static void *conn_main(void *arg) {
  wk_conn *c = arg;
  wk_crash_page = c->page;
  thread_altstack(); /* a fiber's stack overflow still names it */
  int watched = wk_limits_on();
  if (watched) {
    wk_watch_add(&c->watch);
    c->watch.chan = c;
  }
  for (;;) {
    uint32_t kind;
    uint64_t id;
    wire_reader r;
    int got = channel_take(&c->ch, &kind, &id, &r);
    if (got == 0) {
      /* nothing more buffered: read on without waiting if there is more,
       * else write what the activations said and wait */
      int more = channel_fill(&c->ch, 0);
      if (more > 0)
        continue;
      if (more < 0 || conn_wait(c) < 0)
        break; /* the engine's thread is gone */
      continue;
    }
    if (got < 0) {
      log_error("worker: the engine sent bytes that are no frame");
      _exit(71);
    }
    worker_frame f;
    if (worker_frame_decode_engine(kind, (const uint8_t *)r.p,
                                   (size_t)(r.end - r.p), &f) != 0) {
      /* a worker of another build would have refused to start: this is
       * a fault, and nothing read from it can be trusted */
      log_error("worker: the engine sent a malformed frame of kind %u for "
                "activation %llu: %s",
                kind, (unsigned long long)id, f.why);
      _exit(71);
    }
    wk_act *a = idmap_get(&c->acts, (int64_t)id);
    int starts = kind == WM_RUN || kind == WM_QUEUE_RUN ||
                 kind == WM_CRON_RUN || kind == WM_TAIL_RUN;
    if (kind == WM_CALL && !a) {
      a = act_alloc(c, id);
      a->kind = kind;
      a->in = f;
      if (!(a->f = fiber_create())) {
        log_error("worker: no memory for a fiber");
        _exit(70);
      }
      fiber_start(a->f, branch_main, a);
      idmap_put(&c->acts, (int64_t)id, a);
    } else if (starts && !a) {
      a = kind == WM_RUN ? act_new(c, id, &f.run) : handler_new(c, id, &f);
      a->f = fiber_create();
      if (!a->f) {
        log_error("worker: no memory for a fiber");
        _exit(70);
      }
      fiber_start(a->f, kind == WM_RUN ? act_main : handler_main, a);
      idmap_put(&c->acts, (int64_t)id, a);
    } else if (!a || starts) {
      log_error("worker: a frame of kind %u for activation %llu, which %s",
                kind, (unsigned long long)id,
                a ? "runs already" : "it does not hold");
      _exit(71);
    } else if (hand_to_thread(c, a, kind, &r)) {
      continue;
    } else {
      a->kind = kind;
      a->in = f;
    }
    wk_current = a;
    if (watched && a->in_callback)
      wk_watch_run(&c->watch, c, a->id, a->cb_ns);
    /* run() code outside any callback runs here now: a kill meanwhile
     * (one no handler sees) is its doing, not a callback's beside it */
    /* the pages run() code touches in this resume, outside the callbacks
     * and handlers it runs inline (limits.memory's watch) */
    int64_t faults0 = wk_thread_faults(), cb_faults = a->cb_faults;
    __atomic_store_n(&c->watch.run_faults0, faults0, __ATOMIC_RELAXED);
    if (a->run && !a->in_callback)
      __atomic_store_n(&c->page[WM_PAGE_RUN], a->id, __ATOMIC_RELEASE);
    int was_in = a->in_callback;
    fiber_resume(a->f);
    __atomic_store_n(&c->page[WM_PAGE_RUN], 0, __ATOMIC_RELEASE);
    if (faults0 && a->run && !was_in && !a->in_callback) {
      a->run_faults +=
          wk_thread_faults() - faults0 - (a->cb_faults - cb_faults);
      wk_limits_run_grew(c, a->id, a->run_faults);
    }
    if (watched && a->in_callback)
      a->cb_ns += wk_watch_stop(&c->watch); /* parked in its handler */
    wk_current = NULL;
    if (fiber_finished(a->f)) {
      idmap_del(&c->acts, (int64_t)id);
      wk_limits_run_ended(c, a->id);
      act_free(a);
    }
  }
  /* Fibers still parked here, and callbacks on pool threads, belong to
   * an engine thread that left (the engine stops): they are let go with
   * the process (a callback waiting for an answer gets none).  With
   * none, the channel goes (a handler's, whose engine side gave it
   * up). */
  wk_crash_page = NULL;
  if (watched)
    wk_watch_remove(&c->watch);
  pthread_mutex_lock(&c->mu);
  c->dead = 1;
  idmap_each(&c->acts, wake_each, NULL);
  int none = c->acts.len == 0;
  channel_close(&c->ch);
  pthread_mutex_unlock(&c->mu);
  if (none) {
    wk_limits_run_ended(c, 0);
    close(c->wake_fd); /* its page stays mapped: see all_pages */
    idmap_free(&c->acts);
    pthread_mutex_destroy(&c->mu);
    free(c);
  }
  return NULL;
}

/* ---- crashes ---- */

/* Every channel's page, for a crash that names no activation (kept
 * mapped for the life of the process: the crash handler may read the
 * list while a channel goes). */
#define MAX_PAGES 4096
static uint64_t *all_pages[MAX_PAGES];
static uint32_t n_pages; /* atomic */

static void page_add(uint64_t *page) {
  uint32_t i = __atomic_load_n(&n_pages, __ATOMIC_ACQUIRE);
  if (i < MAX_PAGES) {
    all_pages[i] = page;
    __atomic_store_n(&n_pages, i + 1, __ATOMIC_RELEASE);
  }
}

static void name_on(uint64_t *page, uint64_t id) {
  uint64_t none = 0;
  __atomic_compare_exchange_n(&page[WM_PAGE_CRASH], &none, id, 0,
                              __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/* A death no activation is named for, on every channel's page. */
static void name_nobody(void) {
  uint32_t n = __atomic_load_n(&n_pages, __ATOMIC_ACQUIRE);
  for (uint32_t i = 0; i < n; i++)
    name_on(all_pages[i], WM_PAGE_CRASH_UNNAMED);
}

/* Names this thread's activation on its channel's page (signal 0:
 * exit()); the first to crash is the one named.  A thread in no
 * activation (one the plugin started) names none on every page.
 * Async-signal-safe: atomic stores, no frame (it could cut another
 * thread's in two). */
static void note_crash(void) {
  uint64_t *page = wk_crash_page;
  wk_act *a = wk_current;
  if (page && a)
    name_on(page, a->id);
  else
    name_nobody();
}

static void on_fatal(int sig) {
  note_crash();
  signal(sig, SIG_DFL);
  raise(sig);
}

/* A signal that ends the process from outside any fault (plugin code's
 * kill(0, SIGTERM) to its own process group, an operator's): whichever
 * thread it lands on says nothing of who sent it, so it names nobody on
 * every page and the engine takes it as a kill no handler saw. */
static void on_ending(int sig) {
  name_nobody();
  signal(sig, SIG_DFL);
  raise(sig);
}

/* exit() called by plugin code on a channel's or a pool thread: its own
 * doing (the process's own ways out name nobody). */
static void on_exit_call(void) {
  if (wk_current)
    note_crash();
}

static void crash_handlers(void) {
  static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fatal;
  sa.sa_flags = SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++)
    sigaction(fatal[i], &sa, NULL);
  static const int ending[] = {SIGTERM, SIGINT,  SIGHUP,
                               SIGQUIT, SIGUSR1, SIGUSR2};
  sa.sa_handler = on_ending;
  for (size_t i = 0; i < sizeof ending / sizeof *ending; i++)
    sigaction(ending[i], &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  atexit(on_exit_call);
}

/* ---- the control socket ---- */

/* One channel's fd from the engine, with its shared page's in *page,
 * or -1 at EOF. */
static int recv_channel(int ctl, int *page) {
  char byte;
  char cbuf[CMSG_SPACE(2 * sizeof(int))];
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  struct msghdr mh = {.msg_iov = &iov,
                      .msg_iovlen = 1,
                      .msg_control = cbuf,
                      .msg_controllen = sizeof cbuf};
  for (;;) {
    ssize_t k = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return -1;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len == CMSG_LEN(2 * sizeof(int))) {
      int fds[2];
      memcpy(fds, CMSG_DATA(cm), sizeof fds);
      *page = fds[1];
      return fds[0];
    }
  }
}

int worker_process_main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "duro __worker: started by the engine, not by hand\n");
    return 64;
  }
  if (argc < 8 || strcmp(argv[7], WM_PROTOCOL) != 0) {
    fprintf(stderr,
            "duro __worker: the engine speaks %s, this binary %s: a "
            "different build of duro started it\n",
            argc >= 8 ? argv[7] : "an older protocol", WM_PROTOCOL);
    return 78;
  }
  int ctl = atoi(argv[2]);
  /* inherited across exec on purpose; not by what plugin code execs */
  fcntl(ctl, F_SETFD, FD_CLOEXEC);
  crash_handlers();
  /* FD PLUGIN MEMORY CPU_MS MAX_RESULT PROTOCOL: the plugin's limits and
   * the engine's max_step_result (0: none). */
  wk_limits_start(argc > 4 ? strtoll(argv[4], NULL, 10) : 0,
                  argc > 5 ? strtoll(argv[5], NULL, 10) : 0);
  wk_max_result = argc > 6 ? strtoll(argv[6], NULL, 10) : 0;
  for (;;) {
    int page = -1;
    int fd = recv_channel(ctl, &page);
    if (fd < 0)
      _exit(0); /* the engine is gone: nothing to flush or check */
    wk_conn *c = xcalloc(1, sizeof *c);
    channel_init(&c->ch, fd);
    pthread_mutex_init(&c->mu, NULL);
    /* non-blocking: its thread reads while it waits for room to write */
    int fl = fcntl(fd, F_GETFL);
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    void *map =
        mmap(NULL, WM_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, page, 0);
    close(page);
    if (map == MAP_FAILED || c->wake_fd < 0 || fl < 0 ||
        fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
      log_error("worker: cannot set up a channel: %s", strerror(errno));
      _exit(70);
    }
    c->page = map;
    page_add(map);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, conn_main, c) != 0) {
      log_error("worker: cannot start a thread");
      return 70;
    }
    pthread_attr_destroy(&attr);
  }
}
