/* reload_probe.c — a build loaded in a child process before this one
 * (`duro __load`: dlopen, constructors, ABI checks, init, every configured
 * class), so a build that fails or crashes while loading is refused there,
 * with the previous one still serving; a constructor that never returns
 * is ended after LOADER_PROBE_TIMEOUT_MS.  For a plugin that runs in
 * worker processes the probe is the engine's only sight of the build:
 * it reports the build's descriptor (build_desc.h) on a memfd the engine
 * hands it, and the engine never loads the build itself. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"
#include "build_desc.h"
#include "loader.h"
#include "probe.h"
#include "reload_internal.h"
#include "util.h"

extern char **environ;

/* The descriptor's fd in the probe: handed as `--desc FD`. */
#define PROBE_DESC_FD 3

int reload_probe_main(int argc, char **argv) {
  int desc_fd = -1;
  if (argc >= 4 && !strcmp(argv[2], "--desc")) {
    desc_fd = atoi(argv[3]);
    argv += 2;
    argc -= 2;
  }
  if (argc < 4) {
    fprintf(stderr, "usage: duro __load [--desc FD] NAME PATH [CLASS...]\n");
    return 2;
  }
  loader_probe_child(0);
  /* Not for what the plugin's code starts. */
  if (desc_fd >= 0)
    fcntl(desc_fd, F_SETFD, FD_CLOEXEC);
  char err[1024];
  loader_plugin *lp = NULL;
  if (loader_open(argv[2], argv[3], duro_host_api(), &lp, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  int bad = 0;
  for (int i = 4; i < argc; i++)
    if (!loader_find_workflow(lp, argv[i])) {
      loader_missing_class(lp, argv[2], argv[3], argv[i], err, sizeof err);
      fprintf(stderr, "%s\n", err);
      bad = 1;
    }
  if (!bad && desc_fd >= 0 && build_desc_write(lp, desc_fd) != 0) {
    fprintf(stderr, "cannot report the build's descriptor: %s\n",
            strerror(errno));
    bad = 1;
  }
  loader_close(lp);
  return bad;
}

/* The probe's outcome: 0 when it loaded the build, or -1 with why in err
 * (a refusal keeps every line, one a missing class; a crash its first). */
static int probe_outcome(loader_probe *lp, char *err, size_t errlen) {
  if (loader_probe_why(lp, err, errlen))
    return -1;
  int status = lp->status;
  char *out = lp->out;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return 0;
  if (WIFSIGNALED(status))
    out[strcspn(out, "\n")] = '\0';
  else
    for (size_t n = strlen(out); n && out[n - 1] == '\n'; n--)
      out[n - 1] = '\0';
  if (WIFSIGNALED(status))
    snprintf(err, errlen, "crashed while loading (signal %d, SIG%s)%s%.600s",
             WTERMSIG(status), sigabbrev_np(WTERMSIG(status)), *out ? ": " : "",
             out);
  else if (*out)
    snprintf(err, errlen, "%s", out);
  else
    snprintf(err, errlen, "exited with status %d while loading",
             WEXITSTATUS(status));
  return -1;
}

/* Loads `path` as plugin p in a child process first: a build that fails or
 * crashes while loading (constructors, init) is refused there, not here.
 * With desc, the child also reports the build's descriptor, into *desc.
 * Returns 0, or -1 with why in err. */
int reload_probe(reloader *r, const plugin_state *p, const char *path,
                 build_desc **desc, char *err, size_t errlen) {
  const config_plugin *c = p->cfg;
  char **argv = xcalloc(c->n_workflows + 7, sizeof *argv);
  size_t n = 0;
  argv[n++] = "duro";
  argv[n++] = "__load";
  /* Written by the child, read here once it has exited: nothing to pump
   * while it runs, and no size to agree on. */
  int desc_fd = desc ? memfd_create("duro-build-desc", MFD_CLOEXEC) : -1;
  if (desc && desc_fd < 0) {
    free(argv);
    snprintf(err, errlen, "memfd_create: %s", strerror(errno));
    return -1;
  }
  char fd_arg[16];
  snprintf(fd_arg, sizeof fd_arg, "%d", PROBE_DESC_FD);
  if (desc) {
    argv[n++] = "--desc";
    argv[n++] = fd_arg;
  }
  argv[n++] = c->name;
  argv[n++] = (char *)path;
  for (size_t k = 0; k < c->n_workflows; k++)
    argv[n++] = c->workflows[k].class_name;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    free(argv);
    if (desc_fd >= 0)
      close(desc_fd);
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY,
                                   0);
  if (desc_fd >= 0)
    posix_spawn_file_actions_adddup2(&fa, desc_fd, PROBE_DESC_FD);
  /* A group of its own: what its constructors fork is found and ended. */
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&at, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, r->self, &fa, &at, argv, environ);
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  free(argv);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    if (desc_fd >= 0)
      close(desc_fd);
    snprintf(err, errlen, "cannot start the load probe %s: %s", r->self,
             strerror(rc));
    return -1;
  }
  /* A constructor that never returns must not hold the reload (and the
   * host's stop) forever. */
  loader_probe lp;
  loader_probe_wait(pid, fds[0], LOADER_PROBE_TIMEOUT_MS, &lp);
  rc = probe_outcome(&lp, err, errlen);
  if (rc == 0 && desc && !(*desc = build_desc_read(desc_fd, err, errlen)))
    rc = -1;
  if (desc_fd >= 0)
    close(desc_fd);
  return rc;
}
