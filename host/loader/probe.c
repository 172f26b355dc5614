/* probe.c — waiting for a plugin's load in a child process (probe.h).
 *
 * The child's exit is watched through a pidfd, not through the end of
 * its pipe: a process it forked keeps the pipe open.  Once the child has
 * exited, or was killed for taking too long, the rest of its process
 * group is found in /proc, named and killed. */
#include "probe.h"
#include "clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Reads what is there; returns 0 at the end of the pipe. */
static int read_some(int fd, loader_probe *p) {
  for (;;) {
    char skip[512];
    size_t room = sizeof p->out - 1 - p->got;
    char *to = room ? p->out + p->got : skip;
    ssize_t k = read(fd, to, room ? room : sizeof skip);
    if (k < 0 && errno == EINTR)
      continue;
    if (k == 0)
      return 0;
    if (k < 0)
      return errno == EAGAIN ? 1 : 0;
    if (room)
      p->got += (size_t)k;
    p->out[p->got] = '\0';
  }
}

/* A live (not zombie) process of process group `pgid`, 0 if none. */
static pid_t group_left(pid_t pgid) {
  DIR *d = opendir("/proc");
  pid_t found = 0;
  struct dirent *de;
  while (d && !found && (de = readdir(d)) != NULL) {
    char path[300], line[512];
    pid_t pid = (pid_t)atoi(de->d_name);
    if (pid <= 0)
      continue;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
      continue;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    /* "pid (comm) state ppid pgrp ...": comm may hold anything but ')' */
    const char *end = strrchr(line, ')');
    char state;
    int ppid, pgrp;
    if (end && sscanf(end + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 &&
        pgrp == pgid && state != 'Z')
      found = pid;
  }
  if (d)
    closedir(d);
  return found;
}

void loader_probe_child(pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent && getppid() != parent)
    _exit(1); /* it died before the line above */
}

void loader_probe_wait(pid_t pid, int fd, int timeout_ms, loader_probe *p) {
  memset(p, 0, sizeof *p);
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  int64_t deadline = clock_mono_ms() + timeout_ms;
  int reading = 1, exited = 0;
  /* Without a pidfd (an old kernel) the end of the pipe stands for the
   * exit. */
  while (!exited) {
    int64_t left = deadline - clock_mono_ms();
    if (left <= 0)
      break;
    struct pollfd pf[2] = {{.fd = reading ? fd : -1, .events = POLLIN},
                           {.fd = pidfd, .events = POLLIN}};
    int n = poll(pf, 2, (int)left);
    if (n < 0 && errno != EINTR)
      break;
    if (n > 0 && pf[0].revents)
      reading = read_some(fd, p);
    exited = pidfd >= 0 ? n > 0 && pf[1].revents != 0 : !reading;
  }
  if (reading)
    read_some(fd, p); /* what it wrote just before it exited */
  close(fd);
  if (pidfd >= 0)
    close(pidfd);
  p->timed_out = !exited;
  /* Looked for before the child is reaped: its pid, the group's id, is
   * not reused meanwhile. */
  p->forked = p->timed_out ? 0 : group_left(pid);
  if (p->timed_out || p->forked)
    kill(-pid, SIGKILL);
  while (waitpid(pid, &p->status, 0) < 0 && errno == EINTR)
    ;
}

int loader_probe_why(const loader_probe *p, char *why, size_t len) {
  if (p->timed_out)
    snprintf(why, len, "its constructor or init did not return within %d s",
             LOADER_PROBE_TIMEOUT_MS / 1000);
  else if (p->forked)
    snprintf(why, len,
             "its constructor or init forked a child (pid %d), which was "
             "ended",
             (int)p->forked);
  else
    return 0;
  return 1;
}
