/* worker_main.c — `duro __worker FD PLUGIN`: a worker process, started
 * by the engine (worker_pool.c) with the control end of a socketpair as
 * FD.  The engine hands it one channel per engine thread over that
 * socket (SCM_RIGHTS); each channel gets a thread, and each activation
 * on it a fiber that runs the plugin's run().  Builds are loaded on
 * first use, from the build store, with the worker's API table
 * (worker_api.c), and stay loaded for the life of the process.
 *
 * Crash handlers: a fatal signal in plugin code sends one CRASH frame on
 * the channel of the thread it hit, naming the activation, before the
 * signal's default action ends the process, so that the engine blames
 * that attempt alone; the engine reads the signal itself from waitpid.
 * The worker ends with the engine: EOF on the control socket (the
 * engine's death closes it) ends the process, whatever its threads are
 * doing. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
  channel ch;
  idmap acts;          /* id → wk_act */
  uint64_t *started;   /* shared with the engine: the CALL begun last */
  pthread_mutex_t wmu; /* its writes: the thread's and the watch's */
  wk_watch watch;
};

__thread wk_act *wk_current;
/* The channel of this thread, for the crash handler. */
static __thread int crash_fd = -1;

/* ---- builds ---- */

typedef struct wk_build {
  struct wk_build *next;
  char *hash;
  loader_plugin *lp;
  char *error; /* the load failed: why (not retried) */
} wk_build;

static pthread_mutex_t builds_mu = PTHREAD_MUTEX_INITIALIZER;
static wk_build *builds;

/* The build `hash` of plugin `name`, loaded from `path` on first use. */
static const wk_build *build_get(const char *name, const char *path,
                                 const char *hash) {
  pthread_mutex_lock(&builds_mu);
  wk_build *b = builds;
  while (b && strcmp(b->hash, hash))
    b = b->next;
  if (!b) {
    b = xcalloc(1, sizeof *b);
    b->hash = xstrdup(hash);
    char err[1024];
    if (loader_open(name, path, worker_api_table(), &b->lp, err, sizeof err))
      b->error = xstrdup(err);
    b->next = builds;
    builds = b;
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

/* Queued: the channel's thread writes what its activations said in one
 * write, once it has read everything the engine sent. */
void wk_send(wk_act *a) { channel_queue(&a->conn->ch, &a->m); }

void wk_begin_callback(wk_act *a, uint64_t seq) {
  __atomic_store_n(a->conn->started, seq, __ATOMIC_RELEASE);
  a->in_callback = 1;
  a->cb_ns = 0;
  wk_watch_run(&a->conn->watch, a->id, 0);
}

void wk_end_callback(wk_act *a) {
  a->cb_ns += wk_watch_stop(&a->conn->watch);
  a->in_callback = 0;
}

void wk_exchange(wk_act *a) {
  wk_send(a);
  fiber_yield(); /* the channel's thread resumes it with the answer */
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

/* A RUN frame: the activation, its build found (or why not). */
static wk_act *act_new(wk_conn *c, uint64_t id, wire_reader *r) {
  wk_act *a = xcalloc(1, sizeof *a);
  a->conn = c;
  a->id = id;
  const char *plugin = wire_get_strz(r), *path = wire_get_strz(r);
  const char *hash = wire_get_strz(r), *cls = wire_get_strz(r);
  a->ev.size = sizeof a->ev;
  a->ev.workflow = wk_own(a, wire_get_strz(r));
  a->ev.instance_id = wk_own(a, wire_get_strz(r));
  a->ev.params = wk_own(a, wire_get_strz(r));
  a->ev.created_ms = wire_get_i64(r);
  if (r->bad || !plugin || !path || !hash || !cls) {
    a->load_error = xstrdup("the engine sent a malformed RUN");
    return a;
  }
  const wk_build *b = build_get(plugin, path, hash);
  if (b->error)
    a->load_error = xstrdup(b->error);
  else if (!(a->run = loader_find_workflow(b->lp, cls)))
    a->load_error = xasprintf("plugin \"%s\" build %s exports no class "
                              "\"%s\"",
                              plugin, hash, cls);
  return a;
}

static void act_free(wk_act *a) {
  for (size_t i = 0; i < a->n_owned; i++)
    free(a->owned[i]);
  free(a->owned);
  free(a->load_error);
  wire_buf_free(&a->m);
  if (a->f)
    fiber_destroy(a->f);
  free(a);
}

/* ---- a channel's thread ---- */

static void *conn_main(void *arg) {
  wk_conn *c = arg;
  crash_fd = c->ch.fd;
  thread_altstack(); /* a fiber's stack overflow still sends CRASH */
  int watched = wk_limits_on();
  if (watched)
    wk_watch_add(&c->watch, &c->ch, &c->wmu);
  for (;;) {
    uint32_t kind;
    uint64_t id;
    wire_reader r;
    int got = channel_take(&c->ch, &kind, &id, &r);
    if (got == 0) {
      /* nothing more buffered: read on without waiting if there is more,
       * else say what the activations said and wait */
      int more = channel_fill(&c->ch, 0);
      if (more > 0)
        continue;
      if (more < 0)
        break; /* the engine's thread is gone */
      if (watched)
        pthread_mutex_lock(&c->wmu);
      int flushed = channel_flush(&c->ch);
      if (watched)
        pthread_mutex_unlock(&c->wmu);
      if (flushed != 0 || channel_fill(&c->ch, 1) < 0)
        break;
      continue;
    }
    if (got < 0) {
      log_error("worker: the engine sent bytes that are no frame");
      _exit(71);
    }
    wk_act *a = idmap_get(&c->acts, (int64_t)id);
    if (kind == WM_RUN && !a) {
      a = act_new(c, id, &r);
      a->f = fiber_create();
      if (!a->f) {
        log_error("worker: no memory for a fiber");
        _exit(70);
      }
      fiber_start(a->f, act_main, a);
      idmap_put(&c->acts, (int64_t)id, a);
    } else if (!a || kind == WM_RUN) {
      log_error("worker: a frame of kind %u for activation %llu, which %s",
                kind, (unsigned long long)id,
                a ? "runs already" : "it does not hold");
      _exit(71);
    } else {
      a->kind = kind;
      a->r = r;
    }
    wk_current = a;
    if (watched && a->in_callback)
      wk_watch_run(&c->watch, a->id, a->cb_ns);
    fiber_resume(a->f);
    if (watched && a->in_callback)
      a->cb_ns += wk_watch_stop(&c->watch); /* parked in its callback */
    wk_current = NULL;
    if (fiber_finished(a->f)) {
      idmap_del(&c->acts, (int64_t)id);
      act_free(a);
    }
  }
  /* Fibers still parked here belong to an engine thread that left (the
   * engine stops): they are let go with the process. */
  crash_fd = -1;
  return NULL;
}

/* ---- crashes ---- */

/* The CRASH frame for this thread's activation (signal 0: exit()). */
static void send_crash(int sig) {
  int fd = crash_fd;
  wk_act *a = wk_current;
  if (fd >= 0 && a) {
    char frame[4 + 4 + 8 + 4];
    uint32_t len = sizeof frame - 4, kind = WM_CRASH, s = (uint32_t)sig;
    uint64_t id = a->id;
    memcpy(frame, &len, 4);
    memcpy(frame + 4, &kind, 4);
    memcpy(frame + 8, &id, 8);
    memcpy(frame + 16, &s, 4);
    ssize_t k = send(fd, frame, sizeof frame, MSG_NOSIGNAL);
    (void)k;
  }
}

static void on_fatal(int sig) {
  send_crash(sig);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* exit() called by plugin code on a channel's thread: its own doing. */
static void on_exit_call(void) { send_crash(0); }

static void crash_handlers(void) {
  static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fatal;
  sa.sa_flags = SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++)
    sigaction(fatal[i], &sa, NULL);
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
  int ctl = atoi(argv[2]);
  crash_handlers();
  /* FD PLUGIN [MEMORY CPU_MS]: the plugin's limits (0: none). */
  wk_limits_start(argc > 4 ? strtoll(argv[4], NULL, 10) : 0,
                  argc > 5 ? strtoll(argv[5], NULL, 10) : 0);
  for (;;) {
    int page = -1;
    int fd = recv_channel(ctl, &page);
    if (fd < 0)
      _exit(0); /* the engine is gone: nothing to flush or check */
    wk_conn *c = xcalloc(1, sizeof *c);
    channel_init(&c->ch, fd);
    pthread_mutex_init(&c->wmu, NULL);
    void *map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, page, 0);
    close(page);
    if (map == MAP_FAILED) {
      log_error("worker: cannot map a channel's page");
      _exit(70);
    }
    c->started = map;
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
