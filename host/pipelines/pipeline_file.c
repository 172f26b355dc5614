/* pipeline_file.c — one batch's file.  It is written under a temporary
 * name beside its final one, gzip'ed by zlib with a header that holds no
 * name and no time (so writing the same records again gives the same
 * bytes), synced, renamed to the name its batch's seqs make, and its
 * directory synced: once this returns 0 the file is whole on disk under
 * its name, and a crash before leaves at most a temporary file, which the
 * next try of the same plan replaces. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

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
  return xasprintf("%s/%s-%012" PRId64 "-%012" PRId64 ".jsonl%s", part, name,
                   first, last, o->gzip ? ".gz" : "");
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

/* The writer of one file: plain, or through a deflate stream. */
typedef struct out {
  int fd;
  int gzip;
  z_stream z;
  unsigned char buf[64 * 1024];
  int64_t n;    /* records written */
  int64_t next; /* the seq expected next */
  int failed;   /* errno, or -1 for zlib */
} out;

static int put(out *w, const void *data, size_t len, int flush) {
  if (!w->gzip) {
    const char *p = data;
    while (len > 0) {
      ssize_t k = write(w->fd, p, len);
      if (k < 0 && errno == EINTR)
        continue;
      if (k < 0)
        return w->failed = errno, -1;
      p += k;
      len -= (size_t)k;
    }
    return 0;
  }
  w->z.next_in = (unsigned char *)(uintptr_t)data;
  w->z.avail_in = (uInt)len;
  int zrc;
  do {
    w->z.next_out = w->buf;
    w->z.avail_out = sizeof w->buf;
    zrc = deflate(&w->z, flush);
    if (zrc == Z_STREAM_ERROR)
      return w->failed = -1, -1;
    size_t have = sizeof w->buf - w->z.avail_out;
    int gz = w->gzip;
    w->gzip = 0; /* the compressed bytes go out plain */
    int rc = put(w, w->buf, have, Z_NO_FLUSH);
    w->gzip = gz;
    if (rc)
      return rc;
  } while (w->z.avail_out == 0 || (flush == Z_FINISH && zrc != Z_STREAM_END));
  return 0;
}

static int put_record(void *ctx, int64_t seq, const char *body, int64_t bytes,
                      int64_t sent_ms) {
  (void)bytes, (void)sent_ms;
  out *w = ctx;
  if (seq != w->next) /* a record of the plan missing: never write a hole */
    return w->failed = ENOENT, 1;
  w->next++;
  w->n++;
  return put(w, body, strlen(body), Z_NO_FLUSH) || put(w, "\n", 1, Z_NO_FLUSH);
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
  out *w = xcalloc(1, sizeof *w);
  w->fd = -1;
  w->next = first;
  int rc = -1;
  const char *what = "cannot make its directory";
  if (make_dirs(dir) != 0)
    goto fail;
  what = "cannot create";
  w->fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd < 0)
    goto fail;
  w->gzip = p->o.gzip;
  /* windowBits 15 + 16: a gzip wrapper; zlib's default header has no
   * name and a zero time. */
  if (w->gzip && deflateInit2(&w->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16,
                              8, Z_DEFAULT_STRATEGY) != Z_OK) {
    w->gzip = 0;
    errno = ENOMEM;
    goto fail;
  }
  what = "cannot write";
  for (int64_t from = first; from <= last && !w->failed;) {
    int64_t before = w->n;
    if (journal_pipeline_records(j, p->name, from, last, PIPELINE_PAGE,
                                 put_record, w) != 0) {
      snprintf(err, errlen, "%s: cannot read its records: %s", path,
               journal_errmsg(j));
      rc = -2;
      goto fail;
    }
    if (w->n == before && !w->failed)
      w->failed = ENOENT;
    from = w->next;
  }
  if (!w->failed && w->n != last - first + 1)
    w->failed = ENOENT;
  if (!w->failed && w->gzip)
    put(w, "", 0, Z_FINISH);
  if (w->failed) {
    errno = w->failed > 0 ? w->failed : EIO;
    if (w->failed == ENOENT)
      what = "records of its batch are missing";
    goto fail;
  }
  what = "cannot sync";
  if (fsync(w->fd) != 0)
    goto fail;
  what = "cannot close";
  int fd = w->fd;
  w->fd = -1;
  if (close(fd) != 0)
    goto fail;
  what = "cannot rename its temporary file";
  if (rename(tmp, path) != 0)
    goto fail;
  what = "cannot sync its directory";
  if (sync_dir(dir) != 0)
    goto fail;
  rc = 0;
  goto out;
fail:
  if (rc == -1)
    snprintf(err, errlen, "%s: %s: %s", path, what, strerror(errno));
  rc = -1;
  if (w->fd >= 0)
    close(w->fd);
  unlink(tmp);
out:
  if (p->o.gzip && w->z.state)
    deflateEnd(&w->z);
  free(w);
  free(tmp);
  free(dir);
  free(path);
  free(rel);
  return rc;
}
