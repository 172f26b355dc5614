/* store.c — the build store (store.h). */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

char *build_store_dir(const char *db_path) {
  char *copy = xstrdup(db_path);
  char *dir = xasprintf("%s/builds", dirname(copy));
  free(copy);
  return dir;
}

char *build_store_path(const char *dir, const char *hash) {
  return xasprintf("%s/%s.so", dir, hash);
}

void build_store_remove(const char *dir, const char *hash) {
  char *path = build_store_path(dir, hash);
  unlink(path);
  free(path);
}

/* Copies in to out, hashing what it copies (FNV-1a 64, as the loader). */
static int copy_hashing(int in, int out, uint64_t *h) {
  unsigned char buf[65536];
  ssize_t n;
  *h = UINT64_C(0xcbf29ce484222325);
  while ((n = read(in, buf, sizeof buf)) != 0) {
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    for (ssize_t i = 0; i < n; i++) {
      *h ^= buf[i];
      *h *= UINT64_C(0x100000001b3);
    }
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(out, buf + off, (size_t)(n - off));
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        return -1;
      off += w;
    }
  }
  return fsync(out);
}

int build_store_import(const char *dir, const char *src, char hash[17],
                       char **stored, char *err, size_t errlen) {
  *stored = NULL;
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "cannot create the build store %s: %s", dir,
             strerror(errno));
    return -1;
  }
  int in = open(src, O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    snprintf(err, errlen, "cannot read %s: %s", src, strerror(errno));
    return -1;
  }
  char *tmp = xasprintf("%s/.import-XXXXXX", dir);
  int out = mkostemp(tmp, O_CLOEXEC);
  uint64_t h = 0;
  int rc = out < 0 ? -1 : copy_hashing(in, out, &h);
  int e = errno;
  close(in);
  if (out >= 0 && (fchmod(out, 0755) != 0 || close(out) != 0) && rc == 0) {
    rc = -1;
    e = errno;
  }
  if (rc != 0) {
    snprintf(err, errlen, "cannot copy %s into the build store %s: %s", src,
             dir, strerror(e));
    if (out >= 0)
      unlink(tmp);
    free(tmp);
    return -1;
  }
  snprintf(hash, 17, "%016" PRIx64, h);
  char *path = build_store_path(dir, hash);
  struct stat st;
  if (stat(path, &st) == 0) {
    unlink(tmp); /* that build is stored already */
  } else if (rename(tmp, path) != 0) {
    snprintf(err, errlen, "cannot store %s as %s: %s", src, path,
             strerror(errno));
    unlink(tmp);
    free(tmp);
    free(path);
    return -1;
  }
  free(tmp);
  *stored = path;
  return 0;
}
