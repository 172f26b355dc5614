/* worker_limits.c — a worker process's watch over its plugin's limits
 * (`limits: {memory, cpu}`): the CPU time of each attempt's callback and
 * the process's resident memory.
 *
 * CPU: each callback-pool thread publishes, while a callback runs on it
 * (and each channel's thread, while a queue or cron handler's fiber
 * does), which activation that is, the CPU time it ran before this
 * resume and the thread's CPU clock at the resume (a sequence count
 * makes the words one consistent read, without a lock); a fiber that
 * yields adds what it ran.  A watch thread reads every 20 ms each
 * thread's CPU clock: a callback past the limit is reported to the
 * engine (WM_LIMIT), which kills the process — a callback that spins
 * holds its thread, as one that hangs does.
 *
 * Memory: the watch reads the process's RSS (/proc/self/statm) on each
 * pass.  Past the limit, it names whose code took the memory, by the
 * pages each touched first (minor page faults): each running callback
 * whose thread faulted in a sixteenth of the limit or more since the
 * callback began is reported; with none, the activation whose run()
 * code, outside any callback, touched a quarter of the limit or more
 * (counted per resume of its fiber by its channel's thread) is reported
 * as run()'s (WM_LIMIT's which 3), and the instance errors; with none of
 * either, or still over a second later, the process kills itself.  A
 * callback that only runs beside a leak is not blamed for it.  No cgroup
 * is made and no RLIMIT_AS set (a sanitizer's or a thread's reservations
 * are address space, not memory): an allocation faster than 20 ms can
 * pass the limit before the watch sees it, up to what the machine has. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "worker_process.h"
#include "worker_proto.h"

#define WATCH_EVERY_MS 20

/* memory_limit: the watch's to keep (0: none, or the kernel's);
 * memory_named: the limit whether the watch or the kernel keeps it, for
 * naming whose code takes memory. */
static int64_t memory_limit, memory_named, cpu_limit_ms;
static pthread_mutex_t watches_mu = PTHREAD_MUTEX_INITIALIZER;
static wk_watch **watches;
static size_t n_watches;

static int64_t clock_ns(clockid_t c) {
  struct timespec ts;
  if (clock_gettime(c, &ts) != 0)
    return 0;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int wk_limits_on(void) { return cpu_limit_ms > 0 || memory_named > 0; }

int64_t wk_thread_faults(void) {
  struct rusage ru;
  if (!memory_named || getrusage(RUSAGE_THREAD, &ru) != 0)
    return 0;
  return (int64_t)ru.ru_minflt;
}

/* Thread tid's minor faults (field 10 of its stat), or -1. */
static int64_t task_faults(pid_t tid) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  FILE *f = fopen(path, "re");
  if (!f)
    return -1;
  char *got = fgets(line, sizeof line, f);
  fclose(f);
  const char *p = got ? strrchr(line, ')') : NULL; /* after the name */
  long long minflt;
  if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %lld", &minflt) != 1)
    return -1;
  return minflt;
}

/* The activation whose run() code touched the most memory (watches_mu):
 * named when the process passes limits.memory and no callback grew. */
static struct {
  wk_conn *conn;
  uint64_t act;
  int64_t bytes;
  int reported;
} grower;

void wk_limits_run_grew(wk_conn *c, uint64_t act, int64_t faults) {
  int64_t bytes = faults * (int64_t)sysconf(_SC_PAGESIZE);
  if (!memory_named || bytes < memory_named / 4)
    return;
  pthread_mutex_lock(&watches_mu);
  if (grower.act == act && grower.conn == c) {
    grower.bytes = bytes;
  } else if (bytes > grower.bytes) {
    grower.conn = c;
    grower.act = act;
    grower.bytes = bytes;
    grower.reported = 0;
  }
  pthread_mutex_unlock(&watches_mu);
}

void wk_limits_run_ended(wk_conn *c, uint64_t act) {
  if (!memory_named)
    return;
  pthread_mutex_lock(&watches_mu);
  if (grower.conn == c && (!act || grower.act == act))
    memset(&grower, 0, sizeof grower);
  pthread_mutex_unlock(&watches_mu);
}

void wk_watch_add(wk_watch *w) {
  memset(w, 0, sizeof *w);
  if (pthread_getcpuclockid(pthread_self(), &w->clock) != 0)
    w->clock = CLOCK_THREAD_CPUTIME_ID;
  w->tid = (pid_t)syscall(SYS_gettid);
  pthread_mutex_lock(&watches_mu);
  watches = xrealloc(watches, (n_watches + 1) * sizeof *watches);
  watches[n_watches++] = w;
  pthread_mutex_unlock(&watches_mu);
}

void wk_watch_remove(wk_watch *w) {
  pthread_mutex_lock(&watches_mu);
  for (size_t i = 0; i < n_watches; i++)
    if (watches[i] == w) {
      watches[i] = watches[--n_watches];
      break;
    }
  pthread_mutex_unlock(&watches_mu);
}

void wk_watch_run(wk_watch *w, wk_conn *conn, uint64_t act, int64_t before_ns) {
  if (!cpu_limit_ms && !memory_named)
    return;
  int64_t now = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  __atomic_add_fetch(&w->seq, 1, __ATOMIC_ACQ_REL); /* odd: writing */
  __atomic_store_n(&w->conn, conn, __ATOMIC_RELAXED);
  __atomic_store_n(&w->act, act, __ATOMIC_RELAXED);
  __atomic_store_n(&w->before_ns, before_ns, __ATOMIC_RELAXED);
  __atomic_store_n(&w->resumed_ns, now, __ATOMIC_RELAXED);
  __atomic_store_n(&w->faults0, wk_thread_faults(), __ATOMIC_RELAXED);
  __atomic_add_fetch(&w->seq, 1, __ATOMIC_RELEASE);
}

int64_t wk_watch_stop(wk_watch *w) {
  if (!__atomic_load_n(&w->act, __ATOMIC_RELAXED))
    return 0;
  int64_t ran = clock_ns(CLOCK_THREAD_CPUTIME_ID) -
                __atomic_load_n(&w->resumed_ns, __ATOMIC_RELAXED);
  __atomic_add_fetch(&w->seq, 1, __ATOMIC_ACQ_REL);
  __atomic_store_n(&w->act, 0, __ATOMIC_RELAXED);
  __atomic_add_fetch(&w->seq, 1, __ATOMIC_RELEASE);
  return ran;
}

/* The callback running on w's thread, its CPU time so far (ns) and,
 * when faults0 is not NULL, the thread's minor faults when it resumed; 0
 * when none runs (or it changed while read: next pass). */
static uint64_t running_since(wk_watch *w, int64_t *used_ns, int64_t *faults0) {
  uint64_t s1 = __atomic_load_n(&w->seq, __ATOMIC_ACQUIRE);
  if (s1 & 1)
    return 0;
  uint64_t act = __atomic_load_n(&w->act, __ATOMIC_RELAXED);
  int64_t before = __atomic_load_n(&w->before_ns, __ATOMIC_RELAXED);
  int64_t resumed = __atomic_load_n(&w->resumed_ns, __ATOMIC_RELAXED);
  int64_t f0 = __atomic_load_n(&w->faults0, __ATOMIC_RELAXED);
  int64_t now = clock_ns(w->clock);
  if (__atomic_load_n(&w->seq, __ATOMIC_ACQUIRE) != s1 || !act)
    return 0;
  *used_ns = before + (now > resumed ? now - resumed : 0);
  if (faults0)
    *faults0 = f0;
  return act;
}

static uint64_t running(wk_watch *w, int64_t *used_ns) {
  return running_since(w, used_ns, NULL);
}

/* WM_LIMIT for `act` on w's channel, if that callback still runs there. */
static void report(wk_watch *w, uint64_t act, uint32_t which, int64_t used,
                   int64_t limit) {
  wire_buf m = {0};
  channel_begin(&m, WM_LIMIT, act);
  wire_put_u32(&m, which);
  wire_put_i64(&m, used);
  wire_put_i64(&m, limit);
  /* Its channel stays while the activation does (it has one running
   * here); the frame is queued there for its thread to write. */
  int64_t ignored;
  wk_conn *conn = __atomic_load_n(&w->conn, __ATOMIC_RELAXED);
  if (conn && running(w, &ignored) == act) {
    wk_conn_post_now(conn, &m);
    w->reported = act;
  }
  wire_buf_free(&m);
}

/* WM_LIMIT for activation act's run() on channel c: the memory past the
 * limit is its own code's. */
static void report_run(wk_conn *c, uint64_t act, int64_t rss) {
  wire_buf m = {0};
  channel_begin(&m, WM_LIMIT, act);
  wire_put_u32(&m, 3);
  wire_put_i64(&m, rss);
  wire_put_i64(&m, memory_limit);
  wk_conn_post_now(c, &m);
  wire_buf_free(&m);
}

static int64_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "re");
  long pages = 0, resident = 0;
  if (!f)
    return 0;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
    resident = 0;
  fclose(f);
  return (int64_t)resident * sysconf(_SC_PAGESIZE);
}

/* The bytes the callback `act` running on w's thread touched first since
 * it began (faults0: the thread's faults then), or -1 when unread. */
static int64_t callback_took(const wk_watch *w, int64_t faults0, int64_t page) {
  int64_t f = task_faults(w->tid);
  return f < 0 ? -1 : (f - faults0) * page;
}

/* The activation whose run() code, outside any callback, runs on w's
 * channel thread now, and in *took the bytes it touched first since its
 * fiber resumed; 0 when none (a pool thread's watch, or unread). */
static uint64_t run_taking(const wk_watch *w, int64_t page, int64_t *took) {
  uint64_t *pg = w->chan ? wk_conn_page(w->chan) : NULL;
  uint64_t act = pg ? __atomic_load_n(&pg[WM_PAGE_RUN], __ATOMIC_ACQUIRE) : 0;
  if (!act)
    return 0;
  int64_t f0 = __atomic_load_n(&w->run_faults0, __ATOMIC_RELAXED);
  int64_t f = task_faults(w->tid);
  /* the same resume still: the faults are its */
  if (f < 0 || __atomic_load_n(&pg[WM_PAGE_RUN], __ATOMIC_ACQUIRE) != act)
    return 0;
  *took = (f - f0) * page;
  return act;
}

/* The page whose WM_PAGE_GROWER the last pass wrote (the watch's). */
static uint64_t *named_page;

/* Under a limit the kernel keeps (watches_mu held): the activation whose
 * code touched the most memory of late — a running callback since it
 * began, run() code since its fiber resumed, or run() code in all — is
 * named on its channel's page (WM_PAGE_GROWER), where the engine reads
 * it at the kernel's kill; nobody under a sixteenth of the limit. */
static void name_grower(int64_t page) {
  uint64_t best = 0, *best_page = NULL;
  int64_t most = memory_named / 16, took = 0, used = 0, f0 = 0;
  for (size_t i = 0; i < n_watches; i++) {
    wk_watch *w = watches[i];
    uint64_t act = running_since(w, &used, &f0);
    wk_conn *conn = __atomic_load_n(&w->conn, __ATOMIC_RELAXED);
    if (act && conn && (took = callback_took(w, f0, page)) > most) {
      most = took;
      best = act;
      best_page = wk_conn_page(conn);
    }
    if ((act = run_taking(w, page, &took)) && took > most) {
      most = took;
      best = act | WM_GROWER_RUN;
      best_page = wk_conn_page(w->chan);
    }
  }
  if (grower.act && grower.bytes > most) {
    best = grower.act | WM_GROWER_RUN;
    best_page = wk_conn_page(grower.conn);
  }
  if (named_page && named_page != best_page)
    __atomic_store_n(&named_page[WM_PAGE_GROWER], 0, __ATOMIC_RELEASE);
  if (best_page)
    __atomic_store_n(&best_page[WM_PAGE_GROWER], best, __ATOMIC_RELEASE);
  named_page = best_page;
}

static void *watch_main(void *arg) {
  (void)arg;
  int64_t over_since = 0;
  for (;;) {
    struct timespec nap = {0, WATCH_EVERY_MS * 1000000L};
    nanosleep(&nap, NULL);
    int64_t rss = memory_named ? rss_bytes() : 0;
    int over = memory_limit && rss > memory_limit, reported = 0;
    int64_t page = (int64_t)sysconf(_SC_PAGESIZE);
    pthread_mutex_lock(&watches_mu);
    /* past half the kernel's limit: who is taking it (reading each
     * running thread's faults is for then, not every pass) */
    if (!memory_limit && memory_named && rss > memory_named / 2)
      name_grower(page);
    for (size_t i = 0; i < n_watches; i++) {
      wk_watch *w = watches[i];
      int64_t used = 0, faults0 = 0;
      uint64_t act = running_since(w, &used, &faults0);
      if (!act || act == w->reported)
        continue;
      /* a callback that touched little beside the growth is not its
       * cause (unread: it is) */
      int64_t took = over ? callback_took(w, faults0, page) : 0;
      if (over && (took < 0 || took >= memory_limit / 16)) {
        report(w, act, 2, rss, memory_limit);
        reported++;
      } else if (cpu_limit_ms && used / 1000000 > cpu_limit_ms) {
        report(w, act, 1, used / 1000000, cpu_limit_ms);
      }
    }
    /* no callback grew: run() code that does, outside any, now */
    for (size_t i = 0; over && !reported && i < n_watches; i++) {
      wk_watch *w = watches[i];
      int64_t took = 0;
      uint64_t act = run_taking(w, page, &took);
      if (!act || act == w->run_reported || took < memory_limit / 16)
        continue;
      report_run(w->chan, act, rss);
      w->run_reported = act;
      reported++;
    }
    /* or that did, and waits now */
    if (over && !reported && grower.act && !grower.reported) {
      report_run(grower.conn, grower.act, rss);
      grower.reported = 1;
      reported++;
    }
    pthread_mutex_unlock(&watches_mu);
    /* Still over a second later (no callback was running to name, or
     * the engine did not end the process): it ends itself, as the OOM
     * killer would end it. */
    int64_t now = clock_ns(CLOCK_MONOTONIC) / 1000000;
    if (!over) {
      over_since = 0;
    } else if (!over_since) {
      over_since = now;
    } else if (now - over_since > 1000) {
      log_error("worker: %lld MiB resident, over limits.memory (%lld MiB)%s: "
                "the process ends",
                (long long)(rss >> 20), (long long)(memory_limit >> 20),
                reported ? "" : " with no callback running");
      raise(SIGKILL);
    }
  }
  return NULL;
}

void wk_limits_start(int64_t memory, int64_t cpu_ms) {
  /* negative: the kernel keeps it, the watch only names who takes it */
  memory_limit = memory > 0 ? memory : 0;
  memory_named = memory < 0 ? -memory : memory_limit;
  cpu_limit_ms = cpu_ms > 0 ? cpu_ms : 0;
  if (!wk_limits_on())
    return;
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, watch_main, NULL) != 0) {
    log_error("worker: cannot start the thread that watches its limits");
    _exit(70);
  }
  pthread_attr_destroy(&attr);
}
