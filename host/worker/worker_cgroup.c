/* worker_cgroup.c — a cgroup per worker process, with its plugin's
 * limits, where the host may make one (worker_cgroup.h).
 *
 * The host's own group in a hierarchy is the line of /proc/self/cgroup
 * for it ("0::/path" on v2, "4:memory:/path" on v1), under the
 * hierarchy's mount in /proc/self/mountinfo.  Below it the host makes
 * `duro-<pid>` and, in that, a leaf per worker process.
 *
 * v2 has the no-internal-process rule: a group holding processes cannot
 * give controllers to groups below it (the root aside).  The host's own
 * group holds the host, so v2 serves only where that group already gives
 * them (or is the root); the host never moves itself.
 *
 * A group whose host died (a SIGKILL leaves no time to remove it) is
 * removed by the next host that opens the same parent: `duro-<pid>` of a
 * pid that no longer runs. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "worker_cgroup.h"

static const char *const controller_names[WCG_N] = {"memory", "pids", "cpu"};

struct worker_cgroups {
  int version;
  unsigned controllers;
  /* The host's own group below which its workers' are: per controller on
   * v1, base[0] for all on v2; NULL where there is none. */
  char *base[WCG_N];
  char why[512];
};

/* snprintf, for paths and messages that a path too long for PATH_MAX
 * would cut (the control file then is not found: an error as any). */
__attribute__((format(printf, 3, 4))) static void fmt(char *buf, size_t len,
                                                      const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, len, f, ap);
  va_end(ap);
}

/* ---- files ---- */

/* Up to len-1 bytes of path into buf, NUL-terminated: the length, or -1. */
static ssize_t read_text(const char *path, char *buf, size_t len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  size_t got = 0;
  while (got + 1 < len) {
    ssize_t k = read(fd, buf + got, len - 1 - got);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      break;
    got += (size_t)k;
  }
  close(fd);
  buf[got] = '\0';
  return (ssize_t)got;
}

/* Writes text to dir/file (a cgroup's control file takes one write): 0,
 * or -1 with errno set. */
static int write_control(const char *dir, const char *file, const char *text) {
  char path[PATH_MAX];
  fmt(path, sizeof path, "%s/%s", dir, file);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t k = write(fd, text, strlen(text));
  int saved = errno;
  close(fd);
  errno = saved;
  return k == (ssize_t)strlen(text) ? 0 : -1;
}

static int has_control(const char *dir, const char *file) {
  char path[PATH_MAX];
  fmt(path, sizeof path, "%s/%s", dir, file);
  return access(path, F_OK) == 0;
}

/* The number after `key ` in a flat keyed file (memory.events,
 * memory.oom_control), or -1. */
static int64_t keyed_value(const char *dir, const char *file, const char *key) {
  char path[PATH_MAX], buf[4096];
  fmt(path, sizeof path, "%s/%s", dir, file);
  if (read_text(path, buf, sizeof buf) < 0)
    return -1;
  size_t klen = strlen(key);
  for (char *line = buf; line && *line;) {
    char *next = strchr(line, '\n');
    if (!strncmp(line, key, klen) && line[klen] == ' ')
      return strtoll(line + klen + 1, NULL, 10);
    line = next ? next + 1 : NULL;
  }
  return -1;
}

static int64_t number_in(const char *dir, const char *file) {
  char path[PATH_MAX], buf[64];
  fmt(path, sizeof path, "%s/%s", dir, file);
  if (read_text(path, buf, sizeof buf) <= 0)
    return -1;
  return strtoll(buf, NULL, 10);
}

/* ---- where the host's own groups are ---- */

/* Whether word is one of the comma-separated words of list. */
static int in_list(const char *list, size_t len, const char *word) {
  size_t wl = strlen(word);
  for (size_t i = 0; i < len;) {
    size_t j = i;
    while (j < len && list[j] != ',')
      j++;
    if (j - i == wl && !strncmp(list + i, word, wl))
      return 1;
    i = j + 1;
  }
  return 0;
}

/* The mount of a hierarchy: cgroup2 (controller NULL), or the cgroup v1
 * hierarchy with `controller`: its mount point and the group it shows as
 * its root.  0 when found. */
static int find_mount(const char *controller, char *mnt, char *root,
                      size_t len) {
  FILE *f = fopen("/proc/self/mountinfo", "re");
  if (!f)
    return -1;
  char line[4096];
  int found = -1;
  while (found < 0 && fgets(line, sizeof line, f)) {
    /* id parent dev root mountpoint options [optional...] - type source
     * superoptions */
    char *sep = strstr(line, " - ");
    char r[PATH_MAX], m[PATH_MAX], type[64], source[256], super[1024];
    if (!sep || sscanf(line, "%*s %*s %*s %4095s %4095s", r, m) != 2 ||
        sscanf(sep + 3, "%63s %255s %1023s", type, source, super) < 2)
      continue;
    if (controller ? strcmp(type, "cgroup") ||
                         !in_list(super, strlen(super), controller)
                   : strcmp(type, "cgroup2"))
      continue;
    fmt(mnt, len, "%s", m);
    fmt(root, len, "%s", r);
    found = 0;
  }
  fclose(f);
  return found;
}

/* This process's group in a hierarchy, from /proc/self/cgroup: v2's
 * ("0::/path", controller NULL), or v1's with `controller`.  0 when
 * found. */
static int own_group(const char *controller, char *out, size_t len) {
  FILE *f = fopen("/proc/self/cgroup", "re");
  if (!f)
    return -1;
  char line[4096];
  int found = -1;
  while (found < 0 && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2)
      continue;
    int match = controller ? in_list(c1 + 1, (size_t)(c2 - c1 - 1), controller)
                           : !strncmp(line, "0::", 3);
    if (match) {
      fmt(out, len, "%s", c2 + 1);
      found = 0;
    }
  }
  fclose(f);
  return found;
}

/* The directory of the host's own group in a hierarchy: its mount point
 * and its path below the mount's root.  0 when there is one. */
static int own_dir(const char *controller, char *dir, size_t len) {
  char mnt[PATH_MAX], root[PATH_MAX], own[PATH_MAX];
  if (find_mount(controller, mnt, root, sizeof mnt) != 0 ||
      own_group(controller, own, sizeof own) != 0)
    return -1;
  size_t rl = strlen(root);
  const char *below = own;
  if (strcmp(root, "/") && !strncmp(own, root, rl) &&
      (own[rl] == '/' || own[rl] == '\0'))
    below = own + rl;
  fmt(dir, len, "%s%s", mnt, strcmp(below, "/") ? below : "");
  return 0;
}

/* ---- emptying and removing a group ---- */

/* Kills every process in dir (cgroup.kill on v2 when the kernel has it,
 * else each pid of cgroup.procs, again while new ones show). */
static void kill_all(const char *dir) {
  if (has_control(dir, "cgroup.kill") &&
      write_control(dir, "cgroup.kill", "1") == 0)
    return;
  char path[PATH_MAX];
  fmt(path, sizeof path, "%s/cgroup.procs", dir);
  for (int round = 0; round < 20; round++) {
    FILE *f = fopen(path, "re");
    if (!f)
      return;
    int any = 0;
    long pid;
    while (fscanf(f, "%ld", &pid) == 1)
      if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
        any = 1;
    fclose(f);
    if (!any)
      return;
  }
}

/* Removes dir once the processes killed in it are gone (they leave it a
 * moment after the signal): up to about half a second. */
static int rmdir_when_empty(const char *dir) {
  for (int i = 0; i < 500; i++) {
    if (rmdir(dir) == 0 || errno == ENOENT)
      return 0;
    if (errno != EBUSY)
      return -1;
    if (i % 50 == 49)
      kill_all(dir); /* forked meanwhile */
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  return -1;
}

/* Removes a host's group and the workers' groups in it. */
static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (e->d_type != DT_DIR || e->d_name[0] == '.')
        continue;
      char sub[PATH_MAX];
      fmt(sub, sizeof sub, "%s/%s", dir, e->d_name);
      kill_all(sub);
      rmdir_when_empty(sub);
    }
    closedir(d);
  }
  kill_all(dir);
  rmdir_when_empty(dir);
}

/* Removes the groups `duro-<pid>` in dir of hosts no longer running. */
static void remove_stale(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d))) {
    char *end;
    if (strncmp(e->d_name, "duro-", 5) != 0)
      continue;
    long pid = strtol(e->d_name + 5, &end, 10);
    if (*end || pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 ||
        errno != ESRCH)
      continue;
    char sub[PATH_MAX];
    fmt(sub, sizeof sub, "%s/%s", dir, e->d_name);
    remove_tree(sub);
  }
  closedir(d);
}

/* ---- finding which cgroups the host may make ---- */

static unsigned controllers_in(const char *words) {
  unsigned bits = 0;
  char copy[1024];
  fmt(copy, sizeof copy, "%s", words);
  for (char *save = NULL, *w = strtok_r(copy, " \n", &save); w;
       w = strtok_r(NULL, " \n", &save))
    for (int i = 0; i < WCG_N; i++)
      if (!strcmp(w, controller_names[i]))
        bits |= 1u << i;
  return bits;
}

/* "+memory +pids" for bits. */
static void enable_words(unsigned bits, char *out, size_t len) {
  out[0] = '\0';
  for (int i = 0; i < WCG_N; i++)
    if (bits & (1u << i))
      fmt(out + strlen(out), len - strlen(out), "%s+%s", out[0] ? " " : "",
          controller_names[i]);
}

static int open_v2(worker_cgroups *cg, char *why, size_t len) {
  char own[PATH_MAX], path[PATH_MAX + 32], text[1024];
  if (own_dir(NULL, own, sizeof own) != 0) {
    fmt(why, len, "no cgroup2 hierarchy holds this process");
    return -1;
  }
  fmt(path, sizeof path, "%s/cgroup.controllers", own);
  unsigned avail =
      read_text(path, text, sizeof text) >= 0 ? controllers_in(text) : 0;
  if (!avail) {
    fmt(why, len, "cgroup v2 gives %s none of memory, pids, cpu", own);
    return -1;
  }
  fmt(path, sizeof path, "%s/cgroup.subtree_control", own);
  unsigned on =
      read_text(path, text, sizeof text) >= 0 ? controllers_in(text) : 0;
  char words[64];
  enable_words(avail, words, sizeof words);
  if ((avail & ~on) && write_control(own, "cgroup.subtree_control", words)) {
    fmt(why, len,
        "cgroup v2: %s holds this process, so it cannot give %s to "
        "groups below it (%s)",
        own, words, strerror(errno));
    return -1;
  }
  remove_stale(own);
  char base[PATH_MAX + 32];
  fmt(base, sizeof base, "%s/duro-%d", own, (int)getpid());
  if (mkdir(base, 0755) != 0 && errno != EEXIST) {
    fmt(why, len, "cgroup v2: cannot make %s (%s)", base, strerror(errno));
    return -1;
  }
  if (write_control(base, "cgroup.subtree_control", words) != 0) {
    fmt(why, len, "cgroup v2: cannot give %s to the groups in %s (%s)", words,
        base, strerror(errno));
    rmdir(base);
    return -1;
  }
  cg->version = 2;
  cg->controllers = avail;
  cg->base[0] = xstrdup(base);
  return 0;
}

static int open_v1(worker_cgroups *cg, char *why, size_t len) {
  char missing[256] = "";
  for (int i = 0; i < WCG_N; i++) {
    char own[PATH_MAX], base[PATH_MAX + 32];
    const char *name = controller_names[i];
    if (own_dir(name, own, sizeof own) != 0) {
      fmt(missing + strlen(missing), sizeof missing - strlen(missing),
          "%s%s: not mounted", missing[0] ? "; " : "", name);
      continue;
    }
    remove_stale(own);
    fmt(base, sizeof base, "%s/duro-%d", own, (int)getpid());
    if (mkdir(base, 0755) != 0 && errno != EEXIST) {
      fmt(missing + strlen(missing), sizeof missing - strlen(missing),
          "%s%s: cannot make %s (%s)", missing[0] ? "; " : "", name, base,
          strerror(errno));
      continue;
    }
    if (i == 2 && !has_control(base, "cpu.cfs_quota_us")) {
      fmt(missing + strlen(missing), sizeof missing - strlen(missing),
          "%scpu: no CPU bandwidth control", missing[0] ? "; " : "");
      rmdir(base);
      continue;
    }
    cg->base[i] = xstrdup(base);
    cg->controllers |= 1u << i;
  }
  fmt(why, len, "cgroup v1: %s", missing[0] ? missing : "-");
  if (!cg->controllers)
    return -1;
  cg->version = 1;
  return 0;
}

worker_cgroups *worker_cgroups_open(void) {
  worker_cgroups *cg = xcalloc(1, sizeof *cg);
  char v2[240], v1[256];
  if (open_v2(cg, v2, sizeof v2) == 0)
    return cg;
  if (open_v1(cg, v1, sizeof v1) == 0) {
    /* which controllers v1 lacks, if any, for the start line */
    if (cg->controllers != (WCG_MEMORY | WCG_PIDS | WCG_CPU))
      fmt(cg->why, sizeof cg->why, "%s", v1);
    return cg;
  }
  fmt(cg->why, sizeof cg->why, "%s; %s", v2, v1);
  return cg;
}

void worker_cgroups_close(worker_cgroups *cg) {
  if (!cg)
    return;
  for (int i = 0; i < WCG_N; i++) {
    if (cg->base[i])
      remove_tree(cg->base[i]);
    free(cg->base[i]);
  }
  free(cg);
}

int worker_cgroups_version(const worker_cgroups *cg) { return cg->version; }

unsigned worker_cgroups_controllers(const worker_cgroups *cg) {
  return cg->controllers;
}

const char *worker_cgroups_why(const worker_cgroups *cg) { return cg->why; }

/* ---- a worker's group ---- */

unsigned worker_cgroup_wants(const worker_cgroup_limits *lim) {
  return (lim->memory > 0 ? WCG_MEMORY : 0) |
         (lim->processes > 0 ? WCG_PIDS : 0) |
         (lim->cpus_ppm > 0 ? WCG_CPU : 0);
}

/* Writes the limit of controller i into dir: 0, or -1 with errno. */
static int set_limit(int version, int i, const char *dir,
                     const worker_cgroup_limits *lim) {
  char n[32];
  if (i == 0) {
    fmt(n, sizeof n, "%lld", (long long)lim->memory);
    if (version == 2) {
      /* no swap (else the memory held goes on past the limit, to swap),
       * and an OOM kill ends the whole group: the worker and its
       * children, as one */
      if (write_control(dir, "memory.max", n) != 0)
        return -1;
      if (has_control(dir, "memory.swap.max"))
        write_control(dir, "memory.swap.max", "0");
      if (has_control(dir, "memory.oom.group"))
        write_control(dir, "memory.oom.group", "1");
      return 0;
    }
    if (write_control(dir, "memory.limit_in_bytes", n) != 0)
      return -1;
    if (has_control(dir, "memory.memsw.limit_in_bytes"))
      return write_control(dir, "memory.memsw.limit_in_bytes", n);
    write_control(dir, "memory.swappiness", "0");
    return 0;
  }
  if (i == 1) {
    fmt(n, sizeof n, "%u", lim->processes);
    return write_control(dir, "pids.max", n);
  }
  /* a period of 100 ms, the kernel's default, and a quota of the CPUs'
   * share of it */
  long long quota = (long long)lim->cpus_ppm / 10;
  if (quota < 1000)
    quota = 1000; /* the kernel's least */
  if (version == 2) {
    fmt(n, sizeof n, "%lld 100000", quota);
    return write_control(dir, "cpu.max", n);
  }
  fmt(n, sizeof n, "%lld", quota);
  if (write_control(dir, "cpu.cfs_period_us", "100000") != 0)
    return -1;
  return write_control(dir, "cpu.cfs_quota_us", n);
}

int worker_cgroup_make(worker_cgroups *cg, const char *name,
                       const worker_cgroup_limits *lim, unsigned which,
                       worker_cgroup *g, char *err, size_t errlen) {
  memset(g, 0, sizeof *g);
  for (int i = 0; i < WCG_N; i++)
    g->procs_fd[i] = -1;
  which &= cg->controllers;
  for (int i = 0; i < WCG_N; i++) {
    if (!(which & (1u << i)))
      continue;
    /* v2: one group with every controller; v1: one per hierarchy */
    int slot = cg->version == 2 ? 0 : i;
    if (!g->dir[slot]) {
      char dir[PATH_MAX + 256];
      fmt(dir, sizeof dir, "%s/%s", cg->base[slot], name);
      if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fmt(err, errlen, "cannot make cgroup %s: %s", dir, strerror(errno));
        goto fail;
      }
      g->dir[slot] = xstrdup(dir);
      char procs[PATH_MAX + 300];
      fmt(procs, sizeof procs, "%s/cgroup.procs", dir);
      g->procs_fd[slot] = open(procs, O_WRONLY | O_CLOEXEC);
      if (g->procs_fd[slot] < 0) {
        fmt(err, errlen, "cannot open %s: %s", procs, strerror(errno));
        goto fail;
      }
    }
    if (set_limit(cg->version, i, g->dir[slot], lim) != 0) {
      fmt(err, errlen, "cannot set the %s limit of cgroup %s: %s",
          controller_names[i], g->dir[slot], strerror(errno));
      goto fail;
    }
  }
  return 0;
fail:
  worker_cgroup_remove(g);
  return -1;
}

int worker_cgroup_join(const worker_cgroup *g) {
  for (int i = 0; i < WCG_N; i++)
    if (g->dir[i] && g->procs_fd[i] >= 0 && write(g->procs_fd[i], "0", 1) != 1)
      return -1; /* 0: the writer */
  return 0;
}

void worker_cgroup_forked(worker_cgroup *g) {
  for (int i = 0; i < WCG_N; i++) {
    if (g->dir[i] && g->procs_fd[i] >= 0)
      close(g->procs_fd[i]);
    g->procs_fd[i] = -1;
  }
}

void worker_cgroup_usage_read(const worker_cgroup *g, worker_cgroup_usage *u) {
  u->oom_kills = 0;
  u->peak = 0;
  const char *dir = g->dir[0]; /* memory's, on either version */
  if (!dir || (!has_control(dir, "memory.oom_control") &&
               !has_control(dir, "memory.events")))
    return;
  if (has_control(dir, "memory.events")) {
    u->oom_kills = keyed_value(dir, "memory.events", "oom_kill");
    u->peak = number_in(dir, "memory.peak");
  } else {
    u->oom_kills = keyed_value(dir, "memory.oom_control", "oom_kill");
    u->peak = number_in(dir, "memory.max_usage_in_bytes");
  }
  if (u->oom_kills < 0)
    u->oom_kills = 0;
  if (u->peak < 0)
    u->peak = 0;
}

void worker_cgroup_remove(worker_cgroup *g) {
  worker_cgroup_forked(g);
  for (int i = 0; i < WCG_N; i++) {
    if (!g->dir[i])
      continue;
    kill_all(g->dir[i]);
    rmdir_when_empty(g->dir[i]);
    free(g->dir[i]);
    g->dir[i] = NULL;
  }
}
