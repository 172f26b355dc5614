/* pg_cluster.c — see pg_cluster.h. */
#include "pg_cluster.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef PG_CLUSTER_SH
#error "build with -DPG_CLUSTER_SH=\"<path of tests/pg/cluster.sh>\""
#endif

/* The script waits at most 30 s for the server to start or stop. */
#define SCRIPT_WAIT_MS 60000

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What one stream of the script said, cut at its size. */
typedef struct text {
  char *buf;
  size_t size, len;
} text;

static void text_read(text *t, int *fd) {
  char chunk[4096];
  ssize_t got = read(*fd, chunk, sizeof chunk);
  if (got < 0 && errno == EINTR)
    return;
  if (got <= 0) {
    close(*fd);
    *fd = -1;
    return;
  }
  size_t room = t->size - 1 - t->len, take = (size_t)got;
  if (take > room)
    take = room;
  memcpy(t->buf + t->len, chunk, take);
  t->len += take;
  t->buf[t->len] = '\0';
}

/* The script's exit status is 128 + signal when it was killed; it is
 * killed when it overruns SCRIPT_WAIT_MS. */
/* `cluster.sh VERB A [B]` (b NULL: none), as pg_cluster_script says. */
static int run_script(const char *verb, const char *a, const char *b, char *out,
                      size_t out_n, char *err, size_t err_n) {
  int po[2], pe[2];
  text t[2] = {{out, out_n, 0}, {err, err_n, 0}};
  out[0] = err[0] = '\0';
  if (pipe2(po, O_CLOEXEC) != 0)
    return -1;
  if (pipe2(pe, O_CLOEXEC) != 0) {
    close(po[0]);
    close(po[1]);
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    /* _exit, never exit: nothing of the caller's may run here. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (dup2(po[1], 1) < 0 || dup2(pe[1], 2) < 0)
      _exit(127);
    execl(PG_CLUSTER_SH, PG_CLUSTER_SH, verb, a, b, (char *)NULL);
    dprintf(2, "exec %s: %s", PG_CLUSTER_SH, strerror(errno));
    _exit(127);
  }
  close(po[1]);
  close(pe[1]);
  if (pid < 0) {
    close(po[0]);
    close(pe[0]);
    return -1;
  }
  int fds[2] = {po[0], pe[0]};
  long long deadline = now_ms() + SCRIPT_WAIT_MS;
  int overran = 0;
  while (fds[0] >= 0 || fds[1] >= 0) {
    long long left = deadline - now_ms();
    if (left <= 0) {
      overran = 1;
      break;
    }
    struct pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (poll(p, 2, (int)left) < 0 && errno != EINTR)
      break;
    for (int i = 0; i < 2; i++)
      if (fds[i] >= 0 && p[i].revents)
        text_read(&t[i], &fds[i]);
  }
  for (int i = 0; i < 2; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  if (overran)
    kill(pid, SIGKILL);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return -1;
  for (int i = 0; i < 2; i++)
    while (t[i].len > 0 && t[i].buf[t[i].len - 1] == '\n')
      t[i].buf[--t[i].len] = '\0';
  if (overran)
    return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int pg_cluster_script(const char *verb, const char *dir, char *out,
                      size_t out_n, char *err, size_t err_n) {
  return run_script(verb, dir, NULL, out, out_n, err, err_n);
}

/* The first line of DIR/data/postmaster.pid, or -1. */
static pid_t read_postmaster(const char *dir) {
  char path[320];
  snprintf(path, sizeof path, "%s/data/postmaster.pid", dir);
  FILE *f = fopen(path, "r");
  long pid = -1;
  if (f) {
    if (fscanf(f, "%ld", &pid) != 1)
      pid = -1;
    fclose(f);
  }
  return pid > 0 ? (pid_t)pid : -1;
}

static void clear(pg_cluster *c) {
  c->dir[0] = '\0';
  c->conninfo[0] = '\0';
  c->postmaster = -1;
}

int pg_cluster_start(pg_cluster *c, char *err, size_t n) {
  clear(c);
  const char *tmp = getenv("TMPDIR");
  snprintf(c->dir, sizeof c->dir, "%s/duro-pg-XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(c->dir)) {
    snprintf(err, n, "mkdtemp %s: %s", c->dir, strerror(errno));
    clear(c);
    return -1;
  }
  char said[1024];
  int code = pg_cluster_script("start", c->dir, c->conninfo, sizeof c->conninfo,
                               said, sizeof said);
  c->postmaster = read_postmaster(c->dir);
  if (code != 0 || !strstr(c->conninfo, "host=") || c->postmaster < 0) {
    snprintf(err, n, "%s start %s: exit %d: %s", PG_CLUSTER_SH, c->dir, code,
             said[0] ? said : "(no message)");
    char ignored[16];
    pg_cluster_stop(c, ignored, sizeof ignored);
    return -1;
  }
  return 0;
}

int pg_cluster_stop(pg_cluster *c, char *err, size_t n) {
  if (!c->dir[0])
    return 0;
  char out[256], said[1024];
  int code =
      pg_cluster_script("stop", c->dir, out, sizeof out, said, sizeof said);
  if (code != 0) {
    snprintf(err, n, "%s stop %s: exit %d: %s", PG_CLUSTER_SH, c->dir, code,
             said[0] ? said : "(no message)");
    return -1;
  }
  clear(c);
  return 0;
}

int pg_cluster_kill(pg_cluster *c, char *err, size_t n) {
  char out[256], said[1024];
  int code =
      pg_cluster_script("kill", c->dir, out, sizeof out, said, sizeof said);
  if (code != 0) {
    snprintf(err, n, "%s kill %s: exit %d: %s", PG_CLUSTER_SH, c->dir, code,
             said[0] ? said : "(no message)");
    return -1;
  }
  c->postmaster = -1;
  return 0;
}

int pg_cluster_restart(pg_cluster *c, char *err, size_t n) {
  char conninfo[sizeof c->conninfo], said[1024];
  int code = pg_cluster_script("start", c->dir, conninfo, sizeof conninfo, said,
                               sizeof said);
  c->postmaster = read_postmaster(c->dir);
  if (code != 0 || strcmp(conninfo, c->conninfo) != 0 || c->postmaster < 0) {
    snprintf(err, n, "%s start %s again: exit %d: %s", PG_CLUSTER_SH, c->dir,
             code, said[0] ? said : "(no message)");
    return -1;
  }
  return 0;
}

int pg_cluster_standby(const pg_cluster *primary, pg_cluster *c, char *err,
                       size_t n) {
  char dir[sizeof c->dir];
  snprintf(dir, sizeof dir, "%s", c->dir);
  clear(c);
  const char *tmp = getenv("TMPDIR");
  if (dir[0]) /* in the directory of a cluster stopped for it */
    snprintf(c->dir, sizeof c->dir, "%s", dir);
  else
    snprintf(c->dir, sizeof c->dir, "%s/duro-pg-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
  if (!dir[0] && !mkdtemp(c->dir)) {
    snprintf(err, n, "mkdtemp %s: %s", c->dir, strerror(errno));
    clear(c);
    return -1;
  }
  char said[1024];
  int code = run_script("standby", primary->dir, c->dir, c->conninfo,
                        sizeof c->conninfo, said, sizeof said);
  c->postmaster = read_postmaster(c->dir);
  if (code != 0 || !strstr(c->conninfo, "host=") || c->postmaster < 0) {
    snprintf(err, n, "%s standby %s %s: exit %d: %s", PG_CLUSTER_SH,
             primary->dir, c->dir, code, said[0] ? said : "(no message)");
    char ignored[16];
    pg_cluster_stop(c, ignored, sizeof ignored);
    return -1;
  }
  return 0;
}

int pg_cluster_promote(pg_cluster *c, char *err, size_t n) {
  char out[256], said[1024];
  int code =
      pg_cluster_script("promote", c->dir, out, sizeof out, said, sizeof said);
  if (code != 0) {
    snprintf(err, n, "%s promote %s: exit %d: %s", PG_CLUSTER_SH, c->dir, code,
             said[0] ? said : "(no message)");
    return -1;
  }
  return 0;
}

/* ---- processes -----------------------------------------------------------
 * From /proc/PID/stat: "PID (COMM) STATE PPID ...", COMM possibly holding
 * spaces and parentheses, so read up to the last ')'. */

static int read_stat(pid_t pid, char *comm, size_t comm_n, char *state,
                     pid_t *ppid) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  char *got = fgets(line, sizeof line, f);
  fclose(f);
  char *open = got ? strchr(line, '(') : NULL;
  char *close_ = got ? strrchr(line, ')') : NULL;
  long pp;
  if (!open || !close_ || close_ < open ||
      sscanf(close_ + 1, " %c %ld", state, &pp) != 2)
    return -1;
  snprintf(comm, comm_n, "%.*s", (int)(close_ - open - 1), open + 1);
  *ppid = (pid_t)pp;
  return 0;
}

static int is_live_postgres(const char *comm, char state) {
  return strcmp(comm, "postgres") == 0 && state != 'Z' && state != 'X';
}

int pg_process_alive(pid_t pid) {
  char comm[64], state;
  pid_t ppid;
  return pid > 0 && read_stat(pid, comm, sizeof comm, &state, &ppid) == 0 &&
         is_live_postgres(comm, state);
}

size_t pg_cluster_processes(pid_t postmaster, pid_t *out, size_t max) {
  if (postmaster <= 0)
    return 0;
  DIR *d = opendir("/proc");
  if (!d)
    return 0;
  size_t count = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0)
      continue;
    char comm[64], state;
    pid_t ppid;
    if (read_stat((pid_t)pid, comm, sizeof comm, &state, &ppid) != 0 ||
        !is_live_postgres(comm, state) ||
        (pid != postmaster && ppid != postmaster))
      continue;
    if (count < max)
      out[count] = (pid_t)pid;
    count++;
  }
  closedir(d);
  return count;
}
