/* supervisor.c — `duro run`: the supervising process (supervisor.h).
 *
 * Single-threaded and plugin-free on purpose: it parses the config, binds
 * the listener, maps the crash ledger, then loops on a signalfd and the
 * engine's channel.  Its only blocking call besides poll is taking the
 * storage lock (at most a few seconds, once). */
#include "supervisor.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "host.h"
#include "http.h"
#include "journal_crypt.h"
#include "ledger.h"
#include "lock.h"
#include "log.h"
#include "storage_keys.h"

#define WHO "supervisor"
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000
/* An engine that served this long before dying starts the back-off anew,
 * as does one killed by SIGKILL once it was ready (on_engine_death). */
#define BACKOFF_RESET_MS 10000
#define LOCK_WAIT_MS 3000

typedef struct supervisor {
  config *cfg;
  int listen_fd, lock_fd, sfd;
  ledger *ledger;
  pid_t pid;   /* ours */
  pid_t child; /* the engine, -1 while none runs */
  int ctl;     /* our end of its channel, -1 when closed */
  int child_loaded, child_ready, ever_loaded, ever_ready;
  int64_t ready_at_ms, restart_at_ms;
  uint32_t failures; /* deaths since the engine last served a while (or
                        was SIGKILLed once ready) */
  int stopping, forced;
} supervisor;

/* ---- the channel -------------------------------------------------------- */

int supervisor_send(int fd, char msg, int pass_fd) {
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  struct iovec iov = {.iov_base = &msg, .iov_len = 1};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  if (pass_fd >= 0) {
    memset(&u, 0, sizeof u);
    m.msg_control = u.buf;
    m.msg_controllen = sizeof u.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  ssize_t n;
  while ((n = sendmsg(fd, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
    ;
  return n == 1 ? 0 : -1;
}

int supervisor_recv(int fd, char *msg, int *passed_fd) {
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  struct iovec iov = {.iov_base = msg, .iov_len = 1};
  struct msghdr m = {.msg_iov = &iov,
                     .msg_iovlen = 1,
                     .msg_control = u.buf,
                     .msg_controllen = sizeof u.buf};
  if (passed_fd)
    *passed_fd = -1;
  ssize_t n;
  while ((n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
    ;
  if (n != 1)
    return -1;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int got;
      memcpy(&got, CMSG_DATA(c), sizeof got);
      if (passed_fd)
        *passed_fd = got;
      else
        close(got);
    }
  return 0;
}

/* ---- starting the engine ------------------------------------------------ */

static int start_engine(supervisor *sv) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    log_write(DURO_LOG_ERROR, WHO, "socketpair: %s", strerror(errno));
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    log_write(DURO_LOG_ERROR, WHO, "fork: %s", strerror(errno));
    close(pair[0]);
    close(pair[1]);
    return -1;
  }
  if (pid == 0) {
    /* The engine dies with us; it takes no terminal signals of its own
     * (its own process group): they reach it through us. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != sv->pid)
      _exit(1);
    setpgid(0, 0);
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_UNBLOCK, &all, NULL);
    close(sv->sfd);
    close(pair[0]);
    int code = host_engine_main(sv->cfg, sv->listen_fd, sv->ledger, pair[1]);
    config_free(sv->cfg);
    exit(code);
  }
  close(pair[1]);
  sv->child = pid;
  sv->ctl = pair[0];
  sv->child_loaded = sv->child_ready = 0;
  log_write(DURO_LOG_INFO, WHO, "engine started (pid %d)", (int)pid);
  return 0;
}

/* The engine loaded its plugins: take the storage lock (the first time)
 * and hand it over. */
static int on_loaded(supervisor *sv) {
  sv->child_loaded = sv->ever_loaded = 1;
  if (sv->lock_fd < 0) {
    char err[1024];
    if (storage_lock(sv->cfg->storage.path, LOCK_WAIT_MS, &sv->lock_fd, err,
                     sizeof err) != 0) {
      fprintf(stderr, "%s: %s\n", sv->cfg->file, err);
      return -1;
    }
  }
  /* A failed send means the engine died: SIGCHLD says so next. */
  supervisor_send(sv->ctl, 'G', sv->lock_fd);
  return 0;
}

/* ---- an engine's death -------------------------------------------------- */

/* What the dead engine's blamed thread (or, unknown, its callbacks) ran. */
static void describe_running(const supervisor *sv, char *buf, size_t len) {
  const ledger *l = sv->ledger;
  int blamed = ledger_last_blamed(l);
  size_t used = 0;
  buf[0] = '\0';
  if (blamed == -2) {
    snprintf(buf, len, " in a thread that runs no plugin code");
    return;
  }
  for (uint32_t i = 0; i < ledger_size(l) && used < len; i++) {
    const ledger_slot *s = ledger_last_slot(l, i);
    ledger_state st = ledger_get_state(s);
    if ((blamed >= 0 && (int)i != blamed) ||
        (st != LEDGER_ATTEMPT && st != LEDGER_ACTIVATION &&
         st != LEDGER_LOADING && st != LEDGER_HANDLER))
      continue;
    const config_plugin *p = NULL;
    config_find_workflow(sv->cfg, s->workflow, &p);
    int n;
    if (st == LEDGER_LOADING)
      n = snprintf(buf + used, len - used, " while loading plugin \"%s\"",
                   s->plugin);
    else if (st == LEDGER_HANDLER)
      n = snprintf(buf + used, len - used, "%s plugin \"%s\" %s",
                   used ? ";" : " while running", s->plugin, s->what);
    else if (st == LEDGER_ATTEMPT)
      n = snprintf(buf + used, len - used,
                   "%s plugin \"%s\" workflow \"%s\" instance \"%s\" step "
                   "\"%s\" attempt %u",
                   used ? ";" : " while running", p ? p->name : "?",
                   s->workflow, s->id, s->key, s->attempt);
    else
      n = snprintf(buf + used, len - used,
                   "%s plugin \"%s\" workflow \"%s\" instance \"%s\" (in "
                   "run(), outside any step)",
                   used ? ";" : " while running", p ? p->name : "?",
                   s->workflow, s->id);
    if (n > 0)
      used += (size_t)n;
  }
}

/* Returns -1 to go on (a restart is scheduled), else the exit code. */
static int on_engine_death(supervisor *sv, int status) {
  sv->child = -1;
  if (sv->ctl >= 0)
    close(sv->ctl);
  sv->ctl = -1;
  if (sv->stopping) {
    if (sv->forced)
      return 1;
    if (WIFSIGNALED(status))
      return WTERMSIG(status) == SIGTERM ? 0 : 1;
    return WEXITSTATUS(status);
  }
  int signaled = WIFSIGNALED(status);
  int code = signaled ? WTERMSIG(status) : WEXITSTATUS(status);
  ledger_rotate(sv->ledger, signaled ? LEDGER_DEATH_SIGNAL : LEDGER_DEATH_EXIT,
                code);
  char how[96], what[2048];
  ledger_death_text(sv->ledger, how, sizeof how);
  describe_running(sv, what, sizeof what);
  int plugin_fault = signaled || ledger_last_blamed(sv->ledger) >= 0;
  if (!sv->child_loaded && !sv->ever_loaded) {
    /* The first engine never got its plugins loaded: a start-up failure.
     * An exit with a code has said why on stderr already. */
    if (!plugin_fault)
      return code ? code : 1;
    fprintf(stderr, "%s: the engine %s%s\n", sv->cfg->file, how, what);
    return 1;
  }
  if (!plugin_fault && !sv->ever_ready)
    return code ? code : 1; /* it could not open its storage, say */
  int64_t now = clock_mono_ms();
  /* The back-off is for an engine that cannot stay up by itself.  A
   * SIGKILL is no crash of its own: it is sent (an operator's kill -9,
   * the OOM killer, a test), and one that plugin code brings about again
   * and again is ended by engine.max_crashes, which charges the callbacks
   * it cut off.  So once the engine was ready, a SIGKILL does not add to
   * the back-off; before ready (start-up, recovery) it still does. */
  int killed = signaled && code == SIGKILL;
  if (sv->child_ready && (killed || now - sv->ready_at_ms >= BACKOFF_RESET_MS))
    sv->failures = 0;
  sv->failures++;
  int64_t delay = BACKOFF_FIRST_MS;
  for (uint32_t i = 1; i < sv->failures && delay < BACKOFF_MAX_MS; i++)
    delay *= 2;
  if (delay > BACKOFF_MAX_MS)
    delay = BACKOFF_MAX_MS;
  sv->restart_at_ms = now + delay;
  log_write(DURO_LOG_ERROR, WHO, "engine died: %s%s; restarting in %lld ms",
            how, what, (long long)delay);
  return -1;
}

/* ---- signals ------------------------------------------------------------ */

/* Returns -1 to go on, else the exit code. */
static int on_signal(supervisor *sv, int signo) {
  if (signo == SIGCHLD) {
    int status, rc = -1;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
      if (pid == sv->child)
        rc = on_engine_death(sv, status);
    return rc;
  }
  if (signo == SIGHUP) {
    /* A reload: the engine loads changed plugin builds. */
    if (sv->child > 0)
      kill(sv->child, SIGHUP);
    return -1;
  }
  /* SIGINT / SIGTERM */
  if (sv->stopping && signo == SIGINT) {
    log_write(DURO_LOG_WARN, WHO, "second SIGINT: stopping now");
    sv->forced = 1;
    if (sv->child > 0)
      kill(sv->child, SIGKILL);
    return sv->child > 0 ? -1 : 1;
  }
  if (sv->stopping)
    return -1;
  sv->stopping = 1;
  log_write(DURO_LOG_INFO, WHO, "signal %d: stopping", signo);
  if (sv->child > 0) {
    kill(sv->child, SIGTERM);
    return -1;
  }
  return 0; /* between two engines: nothing to wait for */
}

static int read_signals(supervisor *sv) {
  struct signalfd_siginfo si;
  int rc = -1;
  while (rc < 0 && read(sv->sfd, &si, sizeof si) == (ssize_t)sizeof si)
    rc = on_signal(sv, (int)si.ssi_signo);
  return rc;
}

/* Returns -1 to go on, else the exit code. */
static int read_channel(supervisor *sv) {
  char msg;
  if (supervisor_recv(sv->ctl, &msg, NULL) != 0) {
    close(sv->ctl); /* the engine is gone or going: SIGCHLD follows */
    sv->ctl = -1;
    return -1;
  }
  if (msg == 'L' && on_loaded(sv) != 0) {
    kill(sv->child, SIGKILL);
    waitpid(sv->child, NULL, 0);
    return 1;
  }
  if (msg == 'R') {
    sv->child_ready = sv->ever_ready = 1;
    sv->ready_at_ms = clock_mono_ms();
  }
  return -1;
}

static int supervise(supervisor *sv) {
  if (start_engine(sv) != 0)
    return 1;
  for (;;) {
    int timeout = -1;
    if (sv->child < 0) {
      int64_t left = sv->restart_at_ms - clock_mono_ms();
      if (left <= 0) {
        if (start_engine(sv) != 0)
          return 1;
        continue;
      }
      timeout = (int)left;
    }
    struct pollfd p[2] = {{.fd = sv->sfd, .events = POLLIN},
                          {.fd = sv->ctl, .events = POLLIN}};
    int n = poll(p, sv->ctl >= 0 ? 2 : 1, timeout);
    if (n < 0 && errno != EINTR) {
      log_write(DURO_LOG_ERROR, WHO, "poll: %s", strerror(errno));
      return 1;
    }
    /* The channel first: a "ready" the engine sent before it died counts
     * (on_engine_death's back-off depends on it). */
    int rc = -1;
    if (n > 0 && sv->ctl >= 0 && p[1].revents)
      rc = read_channel(sv);
    if (rc < 0 && n > 0 && p[0].revents)
      rc = read_signals(sv);
    if (rc >= 0)
      return rc;
  }
}

int supervisor_run(const char *config_path) {
  char err[1024];
  supervisor sv = {.listen_fd = -1,
                   .lock_fd = -1,
                   .sfd = -1,
                   .child = -1,
                   .ctl = -1,
                   .pid = getpid()};
  int code = 1;
  errlist errs = {0};
  sv.cfg = config_load_all(config_path, &errs);
  if (!sv.cfg) {
    /* every error, one per line in file order, then how many */
    errlist_report(&errs, stderr, config_path);
    errlist_clear(&errs);
    return 1;
  }
  /* Before the first line and the first process: the engine, the probe
   * and the workers find the format in the environment. */
  log_export_format(sv.cfg->log.json ? LOG_JSON : LOG_TEXT);
  /* What can refuse the config without loading plugins, refuses it here;
   * nothing is created on disk before the plugins loaded. */
  struct journal_crypt *keys = NULL;
  if (http_check(sv.cfg, err, sizeof err) != 0 ||
      storage_keys_load(sv.cfg, &keys, err, sizeof err) != 0 ||
      http_bind(sv.cfg, &sv.listen_fd, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    goto out;
  }
  journal_crypt_free(keys); /* the engine process reads them again */
  sv.ledger = ledger_create_shared(ledger_slots_for(sv.cfg->engine.workers));
  if (!sv.ledger) {
    fprintf(stderr, "duro: cannot map the crash ledger: %s\n", strerror(errno));
    goto out;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, NULL);
  sv.sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sv.sfd < 0) {
    fprintf(stderr, "duro: signalfd: %s\n", strerror(errno));
    goto out;
  }
  code = supervise(&sv);
out:
  if (sv.child > 0) {
    kill(sv.child, SIGKILL);
    waitpid(sv.child, NULL, 0);
  }
  if (sv.sfd >= 0)
    close(sv.sfd);
  if (sv.ctl >= 0)
    close(sv.ctl);
  if (sv.listen_fd >= 0)
    close(sv.listen_fd);
  if (sv.lock_fd >= 0)
    close(sv.lock_fd);
  ledger_free(sv.ledger);
  config_free(sv.cfg);
  return code;
}
