/* pipeline_encode.c — a batch's bytes, whatever the sink: its records read
 * from the journal in pages, one JSON text a line, gzip'ed by zlib with a
 * header that holds no name and no time, so that encoding the same
 * records again gives the same bytes (a batch written again after a crash
 * replaces its file or object with what it already held). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "pipeline_internal.h"
#include "util.h"

/* The writer of one batch: plain, or through a deflate stream. */
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

int pipeline_encode_batch(journal *j, const pipeline *p, int64_t first,
                          int64_t last, int fd, char *err, size_t errlen) {
  out *w = xcalloc(1, sizeof *w);
  w->fd = fd;
  w->next = first;
  w->gzip = p->o.gzip;
  int rc = -1;
  /* windowBits 15 + 16: a gzip wrapper; zlib's default header has no
   * name and a zero time. */
  if (w->gzip && deflateInit2(&w->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16,
                              8, Z_DEFAULT_STRATEGY) != Z_OK) {
    snprintf(err, errlen, "cannot start gzip: %s", strerror(ENOMEM));
    w->gzip = 0;
    goto out;
  }
  for (int64_t from = first; from <= last && !w->failed;) {
    int64_t before = w->n;
    if (journal_pipeline_records(j, p->name, from, last, PIPELINE_PAGE,
                                 put_record, w) != 0) {
      snprintf(err, errlen, "cannot read its records: %s", journal_errmsg(j));
      goto out;
    }
    if (w->n == before && !w->failed)
      w->failed = ENOENT;
    from = w->next;
  }
  if (!w->failed && w->n != last - first + 1)
    w->failed = ENOENT;
  if (!w->failed && w->gzip)
    put(w, "", 0, Z_FINISH);
  if (w->failed == ENOENT)
    snprintf(err, errlen, "records of its batch are missing");
  else if (w->failed)
    snprintf(err, errlen, "cannot write: %s",
             strerror(w->failed > 0 ? w->failed : EIO));
  else
    rc = 0;
out:
  if (w->gzip)
    deflateEnd(&w->z);
  free(w);
  return rc;
}
