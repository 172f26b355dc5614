/* pipeline_file.c — the files sink: one batch's file.  It is written
 * under a temporary name beside its final one (its bytes from
 * pipeline_encode.c), synced, renamed to the name its batch's seqs make,
 * and its directory synced: once this returns 0 the file is whole on disk
 * under its name, and a crash before leaves at most a temporary file,
 * which the next try of the same plan replaces. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pipeline_internal.h"
#include "util.h"

char *duro_pipeline_file_name(const char *name, const duro_pipeline_options *o,
                              int64_t first, int64_t last, int64_t plan_ms) {
  time_t t = (time_t)(plan_ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char part[512];
  size_t n = 0;
  for (const char *c = o->partition; *c && n + 8 < sizeof part; c++) {
    static const struct {
      const char *field;
      int width;
    } fields[] = {
        {"{yyyy}", 4}, {"{mm}", 2}, {"{dd}", 2}, {"{hh}", 2}, {"{mi}", 2}};
    int v[] = {tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
               tm.tm_min};
    size_t k = 0;
    while (k < 5 && strncmp(c, fields[k].field, strlen(fields[k].field)))
      k++;
    if (k == 5) {
      part[n++] = *c;
      continue;
    }
    n += (size_t)snprintf(part + n, sizeof part - n, "%0*d", fields[k].width,
                          v[k]);
    c += strlen(fields[k].field) - 1;
  }
  part[n] = '\0';
  return xasprintf("%s/%s-%012" PRId64 "-%012" PRId64 ".%s%s", part, name,
                   first, last,
                   o->format == DURO_PIPELINE_CSV ? "csv" : "jsonl",
                   o->compression == DURO_PIPELINE_GZIP   ? ".gz"
                   : o->compression == DURO_PIPELINE_ZSTD ? ".zst"
                                                          : "");
}

/* Syncs the directory `dir`. */
static int sync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

/* Makes every directory of absolute `dir` that is missing, syncing the
 * parent of each it made, so that after a power cut the entries still
 * lead to the file. */
static int make_dirs(const char *dir) {
  char *p = xstrdup(dir);
  int rc = 0;
  for (char *s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
    if (s)
      *s = '\0';
    if (mkdir(p, 0755) == 0) {
      char *slash = strrchr(p, '/');
      *slash = '\0';
      rc = sync_dir(slash == p ? "/" : p);
      *slash = '/';
    } else if (errno != EEXIST) {
      rc = -1;
    }
    if (!s || rc)
      break;
    *s = '/';
  }
  free(p);
  return rc;
}

int pipeline_write_batch(journal *j, const pipeline *p, int64_t first,
                         int64_t last, int64_t plan_ms, char *err,
                         size_t errlen) {
  char *rel = duro_pipeline_file_name(p->name, &p->o, first, last, plan_ms);
  char *path = xasprintf("%s/%s", p->o.dir, rel);
  char *dir = xstrdup(path);
  *strrchr(dir, '/') = '\0';
  /* Its own per process: a host that took the plan over may write at
   * the same time into the same directory. */
  char *tmp = xasprintf("%s/.%s-%012" PRId64 ".tmp.%ld", dir, p->name, first,
                        (long)getpid());
  int fd = -1;
  char why[512];
  const char *what = "cannot make its directory";
  if (make_dirs(dir) != 0)
    goto fail;
  what = "cannot create";
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    goto fail;
  if (pipeline_encode_batch(j, p, first, last, fd, why, sizeof why) != 0) {
    snprintf(err, errlen, "%s: %s", path, why);
    goto cleanup;
  }
  what = "cannot sync";
  if (fsync(fd) != 0)
    goto fail;
  what = "cannot close";
  int rc = close(fd);
  fd = -1;
  if (rc != 0)
    goto fail;
  what = "cannot rename its temporary file";
  if (rename(tmp, path) != 0)
    goto fail;
  what = "cannot sync its directory";
  if (sync_dir(dir) != 0)
    goto fail;
  free(tmp);
  free(dir);
  free(path);
  free(rel);
  return 0;
fail:
  snprintf(err, errlen, "%s: %s: %s", path, what, strerror(errno));
cleanup:
  if (fd >= 0)
    close(fd);
  unlink(tmp);
  free(tmp);
  free(dir);
  free(path);
  free(rel);
  return -1;
}
