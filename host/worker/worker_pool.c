/* worker_pool.c — the worker processes of each plugin, started on first
 * use and again after a death, and each engine thread's channels to
 * them (one per process it talks to, cached on the thread).
 *
 * Which process of a plugin a thread talks to is fixed per thread (its
 * number modulo the plugin's count), so a thread's activations of one
 * plugin share one channel, whose frames whichever of them reads routes
 * to the others (worker_proxy.c). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "util.h"
#include "worker_engine.h"
#include "worker_proto.h"

struct worker_pool {
  char *exe;
  /* The binary itself, opened when the pool was made: a worker runs the
   * engine's own code even when a package upgrade replaced the file
   * meanwhile (a new binary could speak another protocol). */
  int exe_fd;
  /* The environment workers start with: the engine's, less the variable
   * that holds the HTTP token (plugin code has no use for it).  Made
   * before any fork: the child may only call async-signal-safe code. */
  char **envp;
  pthread_mutex_t mu; /* plugins, builds */
  worker_plugin **plugins;
  size_t n_plugins;
  worker_build **builds;
  size_t n_builds;
  uint64_t started, died; /* atomics */
  int64_t max_result;     /* engine.max_step_result, 0: none */
  size_t max_frame;       /* what a frame from a worker may be, 0: channel's */
  /* The death watch's thread (started with the first process). */
  pthread_t watch;
  int watching, stopping; /* mu */
  /* Where workers' cgroups are made: found with the first plugin whose
   * limits need one (mu). */
  worker_cgroups *cgroups;
};

static void conn_free(worker_conn *c);

extern char **environ;

worker_pool *worker_pool_create(const char *exe, const char *hide_env) {
  worker_pool *p = xcalloc(1, sizeof *p);
  p->exe = xstrdup(exe);
  p->exe_fd = open(exe, O_PATH | O_CLOEXEC);
  size_t n = 0, k = 0, hide = hide_env ? strlen(hide_env) : 0;
  while (environ[n])
    n++;
  p->envp = xcalloc(n + 1, sizeof *p->envp);
  for (size_t i = 0; i < n; i++)
    if (!hide || strncmp(environ[i], hide_env, hide) || environ[i][hide] != '=')
      p->envp[k++] = xstrdup(environ[i]);
  pthread_mutex_init(&p->mu, NULL);
  return p;
}

/* The process's pidfd, channel dups and pages go with its generation. */
static void proc_forget_fds(worker_proc *w) {
  if (w->pidfd >= 0)
    close(w->pidfd);
  w->pidfd = -1;
  for (size_t i = 0; i < w->n_chans; i++) {
    close(w->chans[i].fd);
    munmap(w->chans[i].page, WM_PAGE_SIZE);
  }
  w->n_chans = 0;
}

void worker_pool_set_max_result(worker_pool *p, int64_t bytes) {
  p->max_result = bytes > 0 ? bytes : 0;
  /* a result, the rest of its frame, and room for a queue batch's */
  p->max_frame = bytes > 0 ? (size_t)bytes * 2 + (1u << 20) : 0;
  if (p->max_frame && p->max_frame > CHANNEL_MAX_FRAME)
    p->max_frame = CHANNEL_MAX_FRAME;
}

static void proc_stop(worker_proc *w) {
  proc_forget_fds(w);
  free(w->chans);
  w->chans = NULL;
  if (w->pid <= 0)
    return;
  kill(-w->pid, SIGKILL); /* it and whatever its plugin forked */
  while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
    ;
  close(w->ctl);
  w->pid = 0;
  worker_cgroup_remove(&w->cg); /* and what left its session */
}

void worker_pool_free(worker_pool *p) {
  if (!p)
    return;
  pthread_mutex_lock(&p->mu);
  p->stopping = 1;
  int watching = p->watching;
  pthread_mutex_unlock(&p->mu);
  if (watching)
    pthread_join(p->watch, NULL);
  for (size_t i = 0; i < p->n_plugins; i++) {
    worker_plugin *pl = p->plugins[i];
    for (uint32_t k = 0; k < pl->n; k++)
      proc_stop(&pl->procs[k]);
    for (size_t k = 0; k < pl->n_lendable; k++)
      conn_free(pl->lendable[k]);
    free(pl->lendable);
    free(pl->procs);
    free(pl->name);
    pthread_mutex_destroy(&pl->mu);
    free(pl);
  }
  for (size_t i = 0; i < p->n_builds; i++) {
    free(p->builds[i]->path);
    free(p->builds[i]->hash);
    free(p->builds[i]->class_name);
    free(p->builds[i]);
  }
  worker_cgroups_close(p->cgroups);
  free(p->plugins);
  free(p->builds);
  for (char **e = p->envp; *e; e++)
    free(*e);
  free(p->envp);
  if (p->exe_fd >= 0)
    close(p->exe_fd);
  free(p->exe);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

void worker_pool_counts(worker_pool *p, uint64_t *started, uint64_t *died) {
  *started = __atomic_load_n(&p->started, __ATOMIC_RELAXED);
  *died = __atomic_load_n(&p->died, __ATOMIC_RELAXED);
}

/* "1.5" for 1500000 millionths. */
static void format_cpus(char *buf, size_t len, uint32_t ppm) {
  int n = snprintf(buf, len, "%u.%06u", ppm / 1000000, ppm % 1000000);
  while (n > 1 && buf[n - 1] == '0')
    buf[--n] = '\0';
  if (n > 1 && buf[n - 1] == '.')
    buf[--n] = '\0';
}

/* The plugin's start line: its limits, and what keeps each (the kernel,
 * in a cgroup per worker process, or the worker's own watch). */
static void log_limits(const worker_plugin *pl, unsigned wants,
                       const worker_cgroups *cg) {
  char line[1024], cpus[32];
  int n = snprintf(line, sizeof line, "plugin \"%s\": limits:", pl->name);
  const char *sep = " ";
  if (pl->limits.memory) {
    n += snprintf(line + n, sizeof line - n,
                  "%smemory %lld MiB per worker "
                  "process",
                  sep, (long long)(pl->limits.memory >> 20));
    sep = ", ";
  }
  if (pl->limits.processes) {
    n += snprintf(line + n, sizeof line - n,
                  "%sprocesses %u per worker "
                  "process",
                  sep, pl->limits.processes);
    sep = ", ";
  }
  if (pl->limits.cpus_ppm) {
    format_cpus(cpus, sizeof cpus, pl->limits.cpus_ppm);
    n += snprintf(line + n, sizeof line - n, "%sCPUs %s per worker process",
                  sep, cpus);
    sep = ", ";
  }
  if (pl->limits.cpu_ms)
    n += snprintf(line + n, sizeof line - n, "%sCPU %lld ms per attempt", sep,
                  (long long)pl->limits.cpu_ms);
  if (pl->cg_kept) {
    n += snprintf(line + n, sizeof line - n, "; limits kept by cgroup v%d (",
                  worker_cgroups_version(cg));
    static const char *const names[] = {"memory", "pids", "cpu"};
    const char *comma = "";
    for (int i = 0; i < WCG_N; i++)
      if (pl->cg_kept & (1u << i)) {
        n += snprintf(line + n, sizeof line - n, "%s%s", comma, names[i]);
        comma = ", ";
      }
    n += snprintf(line + n, sizeof line - n, ")");
  }
  unsigned lost = wants & ~pl->cg_kept;
  if (lost & WCG_MEMORY)
    n += snprintf(line + n, sizeof line - n,
                  "; memory watched by the worker every 20 ms");
  if (lost & (WCG_PIDS | WCG_CPU))
    n += snprintf(line + n, sizeof line - n, "; %s not kept",
                  (lost & WCG_PIDS) && (lost & WCG_CPU) ? "processes and CPUs"
                  : lost & WCG_PIDS                     ? "processes"
                                                        : "CPUs");
  if (lost)
    n += snprintf(line + n, sizeof line - n, " (no cgroup: %s)",
                  worker_cgroups_why(cg));
  if (pl->limits.cpu_ms)
    snprintf(line + n, sizeof line - n,
             "; CPU time per attempt watched by the worker");
  log_write(lost & (WCG_PIDS | WCG_CPU) ? DURO_LOG_WARN : DURO_LOG_INFO, NULL,
            "%s", line);
}

static worker_plugin *plugin_get_locked(worker_pool *p, const char *name,
                                        uint32_t n, const worker_limits *lim) {
  for (size_t i = 0; i < p->n_plugins; i++)
    if (!strcmp(p->plugins[i]->name, name))
      return p->plugins[i];
  worker_plugin *pl = xcalloc(1, sizeof *pl);
  pl->pool = p;
  pl->name = xstrdup(name);
  pl->n = n ? n : 1;
  if (lim)
    pl->limits = *lim;
  uint32_t conc = pl->limits.concurrency ? pl->limits.concurrency : 1024;
  pl->per_proc = (conc + pl->n - 1) / pl->n;
  unsigned wants = worker_cgroup_wants(&(worker_cgroup_limits){
      pl->limits.memory, pl->limits.processes, pl->limits.cpus_ppm});
  if (wants && !p->cgroups)
    p->cgroups = worker_cgroups_open();
  pl->cg_kept = wants ? wants & worker_cgroups_controllers(p->cgroups) : 0;
  /* memory the kernel keeps is not watched as well: its OOM kill is the
   * one verdict (the watch sees the RSS of one process, the group that
   * of all it started); the worker is given it negative, so that its
   * watch only names whose code takes memory (WM_PAGE_GROWER) for the
   * engine to lay that kill on */
  snprintf(pl->limit_args[0], sizeof pl->limit_args[0], "%lld",
           (long long)(pl->cg_kept & WCG_MEMORY ? -pl->limits.memory
                                                : pl->limits.memory));
  snprintf(pl->limit_args[1], sizeof pl->limit_args[1], "%lld",
           (long long)pl->limits.cpu_ms);
  snprintf(pl->limit_args[2], sizeof pl->limit_args[2], "%lld",
           (long long)p->max_result);
  if (wants || pl->limits.cpu_ms)
    log_limits(pl, wants, p->cgroups);
  pl->procs = xcalloc(pl->n, sizeof *pl->procs);
  for (uint32_t k = 0; k < pl->n; k++) {
    pl->procs[k].plugin = pl;
    pl->procs[k].index = k;
    pl->procs[k].pidfd = -1;
  }
  pthread_mutex_init(&pl->mu, NULL);
  p->plugins = xrealloc(p->plugins, (p->n_plugins + 1) * sizeof *p->plugins);
  p->plugins[p->n_plugins++] = pl;
  return pl;
}

/* Equal strings, or both NULL (a build's handler context has no class). */
static int same_class(const char *a, const char *b) {
  return a && b ? strcmp(a, b) == 0 : a == b;
}

void *worker_pool_build(worker_pool *p, const char *plugin, uint32_t n,
                        const worker_limits *lim, const char *path,
                        const char *hash, const char *class_name) {
  pthread_mutex_lock(&p->mu);
  worker_plugin *pl = plugin_get_locked(p, plugin, n, lim);
  worker_build *b = NULL;
  for (size_t i = 0; i < p->n_builds && !b; i++)
    if (p->builds[i]->plugin == pl && !strcmp(p->builds[i]->hash, hash) &&
        same_class(p->builds[i]->class_name, class_name))
      b = p->builds[i];
  if (!b) {
    b = xcalloc(1, sizeof *b);
    b->plugin = pl;
    b->path = xstrdup(path);
    b->hash = xstrdup(hash);
    b->class_name = class_name ? xstrdup(class_name) : NULL;
    p->builds = xrealloc(p->builds, (p->n_builds + 1) * sizeof *p->builds);
    p->builds[p->n_builds++] = b;
  }
  pthread_mutex_unlock(&p->mu);
  return b;
}

/* ---- a process started and reaped (the plugin's mu held) ---- */

/* The group of w's next process, named for ps and the cgroup tree:
 * `<plugin>-<index>-<start>`, its plugin's name kept to safe letters. */
static int proc_cgroup_make(worker_proc *w, char *err, size_t errlen) {
  const worker_plugin *pl = w->plugin;
  char name[96];
  size_t k = 0;
  for (const char *c = pl->name; *c && k < 64; c++)
    name[k++] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                        (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'
                    ? *c
                    : '_';
  snprintf(name + k, sizeof name - k, "-%u-%llu", w->index,
           (unsigned long long)w->gen + 1);
  worker_cgroup_limits lim = {pl->limits.memory, pl->limits.processes,
                              pl->limits.cpus_ppm};
  char why[512];
  if (worker_cgroup_make(pl->pool->cgroups, name, &lim, pl->cg_kept, &w->cg,
                         why, sizeof why) != 0) {
    snprintf(err, errlen, "its cgroup: %s", why);
    return -1;
  }
  return 0;
}

static int proc_start(worker_proc *w, char *err, size_t errlen) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    snprintf(err, errlen, "socketpair: %s", strerror(errno));
    return -1;
  }
  char fd_arg[16];
  snprintf(fd_arg, sizeof fd_arg, "%d", 3);
  const char *exe = w->plugin->pool->exe, *name = w->plugin->name;
  if (w->plugin->cg_kept && proc_cgroup_make(w, err, errlen) != 0) {
    close(sv[0]);
    close(sv[1]);
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    worker_cgroup_remove(&w->cg);
    close(sv[0]);
    close(sv[1]);
    return -1;
  }
  if (pid == 0) {
    /* Only async-signal-safe calls until exec: the engine has threads.
     * No PR_SET_PDEATHSIG: it fires when the forking *thread* ends (an
     * engine thread replaced by the watchdog); the worker ends at EOF on
     * its control socket instead, which the engine's death brings. */
    if (sv[1] == 3)
      fcntl(3, F_SETFD, 0);
    else if (dup2(sv[1], 3) < 0)
      _exit(126);
    /* A session of its own: plugin code that signals its process group
     * (kill(0, ...)) reaches the worker and its children, never the
     * engine, and the engine ends the group with the worker. */
    setsid();
    /* Its cgroup before any of its code runs: the kernel's limits hold
     * from the first page (exit status 125: it could not join). */
    if (worker_cgroup_join(&w->cg) != 0)
      _exit(125);
    /* "duro" for ps, whatever path it runs from (/proc/self/exe) */
    char *const argv[] = {"duro",
                          "__worker",
                          fd_arg,
                          (char *)name,
                          w->plugin->limit_args[0],
                          w->plugin->limit_args[1],
                          w->plugin->limit_args[2],
                          WM_PROTOCOL,
                          NULL};
    if (w->plugin->pool->exe_fd >= 0)
      execveat(w->plugin->pool->exe_fd, "", argv, w->plugin->pool->envp,
               AT_EMPTY_PATH);
    execve(exe, argv, w->plugin->pool->envp);
    _exit(127);
  }
  close(sv[1]);
  worker_cgroup_forked(&w->cg);
  w->pid = pid;
  w->ctl = sv[0];
  proc_forget_fds(w);
  w->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (w->pidfd >= 0)
    fcntl(w->pidfd, F_SETFD, FD_CLOEXEC);
  w->gen++;
  /* Its callbacks are counted afresh: those of the process before it
   * end on its channels (a stale generation), not here. */
  w->in_callback = 0;
  w->alone_running = w->alone_waiting = 0;
  w->engine_killed = 0;
  __atomic_add_fetch(&w->plugin->pool->started, 1, __ATOMIC_RELAXED);
  return 0;
}

/* How a process ended, in a few words: "SIGSEGV", "exit status 3". */
static void describe_status(int st, char *buf, size_t len) {
  if (WIFSIGNALED(st)) {
    const char *abbrev = sigabbrev_np(WTERMSIG(st));
    snprintf(buf, len, "SIG%s", abbrev ? abbrev : "?");
  } else if (WIFEXITED(st)) {
    snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
  } else {
    snprintf(buf, len, "status %d", st);
  }
}

/* Waits for a process whose channel closed: it is dying, or it broke the
 * protocol and is killed. */
static int proc_reap(worker_proc *w, char *how, size_t len) {
  int st = 0;
  pid_t got = 0;
  for (int i = 0; i < 500 && got == 0; i++) {
    got = waitpid(w->pid, &st, WNOHANG);
    if (got == 0)
      nanosleep(&(struct timespec){0, 1000000}, NULL);
    else if (got < 0 && errno == EINTR)
      got = 0;
  }
  if (got == 0) {
    kill(w->pid, SIGKILL);
    while ((got = waitpid(w->pid, &st, 0)) < 0 && errno == EINTR)
      ;
    snprintf(how, len, "killed: it broke the protocol");
  } else if (got < 0) {
    snprintf(how, len, "gone (%s)", strerror(errno));
  } else {
    describe_status(st, how, len);
  }
  /* A SIGKILL in a group whose OOM killer ran: the kernel's, for
   * limits.memory (the engine's own kills are not). */
  worker_cgroup_usage u;
  worker_cgroup_usage_read(&w->cg, &u);
  w->oom = got > 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL &&
           u.oom_kills > 0 && !w->engine_killed;
  w->peak = u.peak;
  if (w->oom)
    snprintf(how, len,
             "SIGKILL by the kernel: over limits.memory, %lld MiB "
             "at most",
             (long long)(u.peak >> 20));
  /* What its plugin forked goes with it (its session's group, named by
   * its pid; reaped first, so that how it died is its own signal), and
   * what left that session, through its cgroup. */
  kill(-w->pid, SIGKILL);
  worker_cgroup_remove(&w->cg);
  proc_forget_fds(w);
  close(w->ctl);
  log_write(DURO_LOG_WARN, NULL,
            "plugin \"%s\": worker %u (pid %d) died: %s; a new one starts "
            "for the next activation",
            w->plugin->name, w->index, (int)w->pid, how);
  w->pid = 0;
  __atomic_add_fetch(&w->plugin->pool->died, 1, __ATOMIC_RELAXED);
  return got > 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

/* The fewest callbacks a process runs at once after deaths: few enough
 * that a death cuts short few beside the guilty one, enough that a
 * guilty one soon gets its turn to crash again and be counted. */
#define ALLOWED_FLOOR 8
/* How long after a process's last death its callbacks stay held to the
 * halved count. */
#define WORKER_CALM_MS 2000

/* The process of w's current generation is gone or dying: reaped, and
 * how, whether alone and whether by a SIGKILL no handler saw recorded
 * for the channels that see it die (the plugin's mu held).  Whoever
 * waits to run alone waits on a dead process: they see it stale. */
static void proc_died_locked(worker_proc *w) {
  w->alone = w->alone_running || w->in_callback == 1;
  w->runs_named = 0; /* read before the reap lets the pages go */
  w->grower = 0;
  for (size_t i = 0; i < w->n_chans; i++) {
    w->runs_named +=
        __atomic_load_n(&w->chans[i].page[WM_PAGE_RUN], __ATOMIC_ACQUIRE) != 0;
    uint64_t g =
        __atomic_load_n(&w->chans[i].page[WM_PAGE_GROWER], __ATOMIC_ACQUIRE);
    if (g)
      w->grower = g;
  }
  w->killed = proc_reap(w, w->how, sizeof w->how) && !w->engine_killed;
  w->dead_gen = w->gen;
  w->engine_killed = 0;
  w->in_callback = 0;
  w->alone_running = w->alone_waiting = 0;
  w->last_death_ms = clock_mono_ms();
  uint32_t had = w->allowed ? w->allowed : w->plugin->per_proc;
  uint32_t floor =
      w->plugin->per_proc < ALLOWED_FLOOR ? w->plugin->per_proc : ALLOWED_FLOOR;
  w->allowed = had / 2 > floor ? had / 2 : floor;
}

/* Hands one end of a new channel to the process, with the page both
 * sides map (WM_PAGE_*; *page, mapped here): ours, or -1. */
static int proc_channel(worker_proc *w, uint64_t **page_out) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return -1;
  /* Sealed at its size: the worker can neither shrink it under the
   * engine's reads (a SIGBUS here) nor grow it. */
  int page = memfd_create("duro-channel", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  void *map = MAP_FAILED;
  if (page >= 0 && ftruncate(page, WM_PAGE_SIZE) == 0 &&
      fcntl(page, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
    map = mmap(NULL, WM_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, page, 0);
  if (map == MAP_FAILED) {
    if (page >= 0)
      close(page);
    close(sv[0]);
    close(sv[1]);
    return -1;
  }
  char byte = 'c';
  int fds[2] = {sv[1], page};
  char cbuf[CMSG_SPACE(sizeof fds)];
  memset(cbuf, 0, sizeof cbuf);
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  struct msghdr mh = {.msg_iov = &iov,
                      .msg_iovlen = 1,
                      .msg_control = cbuf,
                      .msg_controllen = sizeof cbuf};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(cm), fds, sizeof fds);
  ssize_t k;
  while ((k = sendmsg(w->ctl, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
    ;
  close(sv[1]);
  /* the process's own view of the page, read at its death (the
   * channel's may be gone by then) */
  void *own = k == 1 ? mmap(NULL, WM_PAGE_SIZE, PROT_READ, MAP_SHARED, page, 0)
                     : MAP_FAILED;
  close(page);
  if (k != 1) {
    munmap(map, WM_PAGE_SIZE);
    close(sv[0]);
    return -1;
  }
  *page_out = map;
  int dup_fd = fcntl(sv[0], F_DUPFD_CLOEXEC, 0);
  if (dup_fd >= 0 && own != MAP_FAILED) {
    w->chans = xrealloc(w->chans, (w->n_chans + 1) * sizeof *w->chans);
    w->chans[w->n_chans++] = (struct worker_chan){dup_fd, own};
  } else {
    if (dup_fd >= 0)
      close(dup_fd);
    if (own != MAP_FAILED)
      munmap(own, WM_PAGE_SIZE);
  }
  return sv[0];
}

/* ---- the death watch ---- */

/* A worker's death shows as EOF on its channels, unless a process its
 * plugin forked holds their other ends open: then the engine would wait
 * on a dead worker for as long as that child lives.  This thread polls
 * each process's pidfd and, when one exits, shuts down the engine's ends
 * of its channels (through the dups it keeps), so that their readers see
 * EOF and reap it as any death.  A fifth of a second at most, beside the
 * EOF that comes at once in the ordinary case. */
#define WATCH_EVERY_MS 200
#define WATCH_MAX 256

static void *watch_main(void *arg) {
  worker_pool *p = arg;
  for (;;) {
    struct pollfd fds[WATCH_MAX];
    worker_proc *procs[WATCH_MAX];
    uint64_t gens[WATCH_MAX];
    nfds_t n = 0;
    pthread_mutex_lock(&p->mu);
    int stopping = p->stopping;
    for (size_t i = 0; i < p->n_plugins && !stopping; i++) {
      worker_plugin *pl = p->plugins[i];
      pthread_mutex_lock(&pl->mu);
      for (uint32_t k = 0; k < pl->n && n < WATCH_MAX; k++)
        if (pl->procs[k].pidfd >= 0 && pl->procs[k].pid > 0) {
          fds[n] = (struct pollfd){.fd = pl->procs[k].pidfd, .events = POLLIN};
          procs[n] = &pl->procs[k];
          gens[n++] = pl->procs[k].gen;
        }
      pthread_mutex_unlock(&pl->mu);
    }
    pthread_mutex_unlock(&p->mu);
    if (stopping)
      return NULL;
    if (poll(fds, n, WATCH_EVERY_MS) <= 0)
      continue;
    for (nfds_t i = 0; i < n; i++) {
      if (!fds[i].revents)
        continue;
      worker_proc *w = procs[i];
      pthread_mutex_lock(&w->plugin->mu);
      /* still that generation (its pidfd may have been closed and the
       * number reused meanwhile) */
      if (w->gen == gens[i] && w->pidfd == fds[i].fd) {
        for (size_t c = 0; c < w->n_chans; c++)
          shutdown(w->chans[c].fd, SHUT_RDWR);
        close(w->pidfd);
        w->pidfd = -1; /* seen: the reaper closes the dups */
      }
      pthread_mutex_unlock(&w->plugin->mu);
    }
  }
}

/* Starts the death watch with the pool's first process (p->mu not
 * held by the caller). */
static void watch_start(worker_pool *p) {
  pthread_mutex_lock(&p->mu);
  if (!p->watching && !p->stopping &&
      pthread_create(&p->watch, NULL, watch_main, p) == 0)
    p->watching = 1;
  pthread_mutex_unlock(&p->mu);
}

/* ---- a thread's channels ---- */

#define THREAD_MAX_CONNS 32

typedef struct thread_conns {
  worker_conn *c[THREAD_MAX_CONNS];
  size_t n;
} thread_conns;

static pthread_key_t conns_key;
static pthread_once_t conns_once = PTHREAD_ONCE_INIT;
static uint32_t next_thread;
static __thread uint32_t thread_number = UINT32_MAX;

/* A channel leaves its thread's cache: freed now, or by its last user. */
static void conn_free(worker_conn *c) {
  channel_close(&c->ch);
  if (c->page)
    munmap(c->page, WM_PAGE_SIZE);
  idmap_free(&c->waiting);
  free(c);
}

static void worker_conn_detach(worker_conn *c) {
  c->detached = 1;
  if (c->users == 0)
    conn_free(c);
}

void worker_conn_put(worker_conn *c) {
  if (--c->users == 0 && c->detached)
    conn_free(c);
}

static void conns_free(void *arg) {
  thread_conns *tc = arg;
  for (size_t i = 0; i < tc->n; i++)
    worker_conn_detach(tc->c[i]);
  free(tc);
}

static void conns_key_make(void) { pthread_key_create(&conns_key, conns_free); }

static thread_conns *thread_conns_get(void) {
  pthread_once(&conns_once, conns_key_make);
  thread_conns *tc = pthread_getspecific(conns_key);
  if (!tc) {
    tc = xcalloc(1, sizeof *tc);
    pthread_setspecific(conns_key, tc);
  }
  return tc;
}

/* A new channel to w, starting its process when it does not run; NULL
 * with why in err when none could start. */
static worker_conn *conn_open(worker_plugin *p, worker_proc *w, char *err,
                              size_t errlen) {
  watch_start(p->pool);
  pthread_mutex_lock(&p->mu);
  int fd = -1;
  uint64_t *page = NULL;
  for (int tries = 0; tries < 2 && fd < 0; tries++) {
    if (w->pid <= 0 && proc_start(w, err, errlen) != 0)
      break;
    fd = proc_channel(w, &page);
    if (fd < 0) {
      /* died before it took the channel (at start, or of a callback
       * another thread sent it meanwhile): its death is known as any */
      proc_died_locked(w);
      snprintf(err, errlen, "worker %u of plugin \"%s\" died at start: %s",
               w->index, p->name, w->how);
    }
  }
  uint64_t gen = w->gen;
  pthread_mutex_unlock(&p->mu);
  if (fd < 0)
    return NULL;
  worker_conn *c = xcalloc(1, sizeof *c);
  c->proc = w;
  c->gen = gen;
  c->page = page;
  channel_init(&c->ch, fd);
  c->ch.max_frame = p->pool->max_frame;
  return c;
}

worker_conn *worker_conn_get(worker_plugin *p, char *err, size_t errlen) {
  if (thread_number == UINT32_MAX)
    thread_number = __atomic_fetch_add(&next_thread, 1, __ATOMIC_RELAXED);
  worker_proc *w = &p->procs[thread_number % p->n];
  thread_conns *tc = thread_conns_get();
  size_t slot = tc->n;
  for (size_t i = 0; i < tc->n; i++)
    if (tc->c[i]->proc == w) {
      if (!tc->c[i]->broken &&
          tc->c[i]->gen == __atomic_load_n(&w->gen, __ATOMIC_ACQUIRE)) {
        tc->c[i]->users++;
        return tc->c[i];
      }
      slot = i; /* an older process's: replaced below */
    }
  if (slot == THREAD_MAX_CONNS) {
    snprintf(err, errlen, "a thread talks to more than %d workers",
             THREAD_MAX_CONNS);
    return NULL;
  }
  worker_conn *c = conn_open(p, w, err, errlen);
  if (!c)
    return NULL;
  if (slot < tc->n)
    worker_conn_detach(tc->c[slot]);
  tc->c[slot] = c;
  if (slot == tc->n)
    tc->n++;
  c->users++;
  return c;
}

/* ---- channels lent to one handler at a time ---- */

static int conn_alive_locked(const worker_conn *c) {
  return !c->broken && c->gen == c->proc->gen && c->proc->pid > 0;
}

worker_conn *worker_conn_lend(worker_plugin *p, char *err, size_t errlen) {
  worker_conn *c = NULL;
  pthread_mutex_lock(&p->mu);
  while (!c && p->n_lendable) {
    c = p->lendable[--p->n_lendable];
    if (!conn_alive_locked(c)) {
      conn_free(c); /* its process went meanwhile */
      c = NULL;
    }
  }
  worker_proc *w = &p->procs[p->next_lend++ % p->n];
  pthread_mutex_unlock(&p->mu);
  if (!c)
    c = conn_open(p, w, err, errlen);
  if (c)
    c->users = 1;
  return c;
}

void worker_conn_give_back(worker_conn *c) {
  worker_plugin *p = c->proc->plugin;
  c->users = 0;
  pthread_mutex_lock(&p->mu);
  if (conn_alive_locked(c)) {
    p->lendable =
        xrealloc(p->lendable, (p->n_lendable + 1) * sizeof *p->lendable);
    p->lendable[p->n_lendable++] = c;
    c = NULL;
  }
  pthread_mutex_unlock(&p->mu);
  if (c)
    conn_free(c);
}

int worker_turn_try(worker_conn *c, int suspect, int *waiting) {
  worker_proc *w = c->proc;
  pthread_mutex_lock(&w->plugin->mu);
  int stale = w->gen != c->gen || w->pid <= 0;
  if (stale)
    *waiting = 0; /* a new process starts with no one waiting */
  if (w->allowed && clock_mono_ms() - w->last_death_ms > WORKER_CALM_MS)
    w->allowed = 0; /* calm again: the plugin's concurrency */
  uint32_t allowed = w->allowed ? w->allowed : w->plugin->per_proc;
  int wait = !stale && (suspect ? w->alone_running || w->in_callback
                                : w->alone_running || w->alone_waiting ||
                                      w->in_callback >= allowed);
  if (suspect && wait && !*waiting) {
    *waiting = 1;
    w->alone_waiting++;
  }
  if (!wait && !stale) {
    if (*waiting)
      w->alone_waiting--;
    *waiting = 0;
    w->in_callback++;
    w->alone_running |= suspect;
  }
  pthread_mutex_unlock(&w->plugin->mu);
  return stale ? -1 : wait;
}

void worker_turn_cancel(worker_conn *c, int *waiting) {
  worker_proc *w = c->proc;
  pthread_mutex_lock(&w->plugin->mu);
  if (*waiting && w->gen == c->gen && w->pid > 0)
    w->alone_waiting--;
  *waiting = 0;
  pthread_mutex_unlock(&w->plugin->mu);
}

void worker_turn_end(worker_conn *c, int suspect) {
  worker_proc *w = c->proc;
  pthread_mutex_lock(&w->plugin->mu);
  if (w->gen == c->gen && w->pid > 0) {
    w->in_callback--;
    if (suspect)
      w->alone_running = 0;
  }
  pthread_mutex_unlock(&w->plugin->mu);
}

void worker_conn_kill(worker_conn *c, const char *why) {
  worker_proc *w = c->proc;
  pthread_mutex_lock(&w->plugin->mu);
  if (w->gen == c->gen && w->pid > 0) {
    log_write(DURO_LOG_WARN, NULL,
              "plugin \"%s\": killing worker %u (pid %d): %s", w->plugin->name,
              w->index, (int)w->pid, why);
    w->engine_killed = 1;
    kill(w->pid, SIGKILL);
  }
  pthread_mutex_unlock(&w->plugin->mu);
}

void worker_conn_broken(worker_conn *c) {
  if (c->broken)
    return;
  c->broken = 1;
  worker_proc *w = c->proc;
  worker_plugin *p = w->plugin;
  pthread_mutex_lock(&p->mu);
  if (w->gen == c->gen && w->pid > 0)
    proc_died_locked(w);
  /* the activation its crash handler named, if any: the page outlives
   * the process */
  if (!c->crash_act && c->page)
    c->crash_act = __atomic_load_n(&c->page[WM_PAGE_CRASH], __ATOMIC_ACQUIRE);
  /* a crash on a thread of the plugin's own, in no activation: taken as
   * a kill no handler saw, so that the callbacks beside it run alone and
   * the one in flight when it crashes again is blamed */
  int unnamed = c->crash_act == WM_PAGE_CRASH_UNNAMED;
  if (unnamed)
    c->crash_act = 0;
  int known = w->dead_gen == c->gen;
  snprintf(c->how, sizeof c->how, "%s", known ? w->how : "died");
  c->oom = known && w->oom;
  /* activation ids are a channel's own: one named on another channel's
   * page is nobody here (UINT64_MAX matches no activation) */
  uint64_t mine =
      c->page ? __atomic_load_n(&c->page[WM_PAGE_GROWER], __ATOMIC_ACQUIRE) : 0;
  c->grower = !known || !w->oom || !w->grower ? 0 : mine ? mine : UINT64_MAX;
  c->peak = known ? w->peak : 0;
  /* the kernel's kill for memory has its cause: nobody's crash */
  c->killed = known && !w->oom && (w->killed || unnamed);
  c->alone = known && w->alone;
  c->runs_named = known && w->killed ? w->runs_named : 0;
  c->run_act =
      c->page ? __atomic_load_n(&c->page[WM_PAGE_RUN], __ATOMIC_ACQUIRE) : 0;
  pthread_mutex_unlock(&p->mu);
}
