/* lock.c — the storage lock (lock.h). */
#include "lock.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

/* Creates the directories above `path` (like mkdir -p of its dirname). */
static int make_parent_dirs(const char *path) {
  char *copy = xstrdup(path);
  char *dir = dirname(copy);
  int rc = 0;
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
      rc = -1;
    *p = '/';
  }
  if (strcmp(dir, ".") != 0 && mkdir(dir, 0755) != 0 && errno != EEXIST)
    rc = -1;
  free(copy);
  return rc;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int storage_lock(const char *db_path, int wait_ms, int *fd_out, char *err,
                 size_t errlen) {
  if (make_parent_dirs(db_path) != 0) {
    snprintf(err, errlen,
             "cannot create the directory for storage.path \"%s\": %s", db_path,
             strerror(errno));
    return -1;
  }
  char *path = xasprintf("%s.lock", db_path);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open the lock file %s: %s", path,
             strerror(errno));
    free(path);
    return -1;
  }
  int waited = 0;
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK || waited >= wait_ms) {
      int e = errno;
      char pid[32] = "";
      ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
      pid[n > 0 ? n : 0] = '\0';
      pid[strcspn(pid, "\n")] = '\0';
      if (e == EWOULDBLOCK)
        snprintf(err, errlen,
                 "storage.path \"%s\" is in use by another duro run (pid "
                 "%s, holding %s): one host per database",
                 db_path, *pid ? pid : "unknown", path);
      else
        snprintf(err, errlen, "cannot lock %s: %s", path, strerror(e));
      close(fd);
      free(path);
      return -1;
    }
    sleep_ms(50);
    waited += 50;
  }
  char pid[32];
  int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
    /* The lock holds without the pid; a refused host just cannot name us. */
  }
  free(path);
  *fd_out = fd;
  return 0;
}
