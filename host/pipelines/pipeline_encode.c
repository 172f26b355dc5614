/* pipeline_encode.c — a batch's bytes, whatever the sink: its sends read
 * from the journal in pages, each its records' lines as they are kept (or,
 * for a csv pipeline, their rows after a header line: pipeline_csv.c), gzip'ed
 * by zlib with a header that holds no name and no time, or compressed by
 * libzstd (one frame, its checksum on, on this thread alone), so that encoding
 * the same records again gives the same bytes (a batch written again after a
 * crash replaces its file or object with what it already held). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "pipeline_internal.h"
#include "util.h"

/* The writer of one batch: plain, or through a deflate or zstd stream. */
typedef struct out {
  int fd;
  int gzip, zstd;
  z_stream z;
  ZSTD_CCtx *zc;
  unsigned char buf[64 * 1024];
  int64_t n;                        /* records written */
  int64_t next;                     /* the seq expected next */
  int64_t last;                     /* the batch's last */
  int failed;                       /* errno, or -1 for zlib */
  const duro_pipeline_options *csv; /* a csv pipeline's, else NULL */
  pipeline_buf rows;                /* a send's rows (csv) */
} out;

static int put(out *w, const void *data, size_t len, int flush);

/* Through zstd: Z_FINISH ends the frame. */
static int put_zstd(out *w, const void *data, size_t len, int flush) {
  ZSTD_inBuffer in = {data, len, 0};
  ZSTD_EndDirective how = flush == Z_FINISH ? ZSTD_e_end : ZSTD_e_continue;
  size_t left;
  do {
    ZSTD_outBuffer o = {w->buf, sizeof w->buf, 0};
    left = ZSTD_compressStream2(w->zc, &o, &in, how);
    if (ZSTD_isError(left))
      return w->failed = -1, -1;
    w->zstd = 0; /* the compressed bytes go out plain */
    int rc = put(w, w->buf, o.pos, Z_NO_FLUSH);
    w->zstd = 1;
    if (rc)
      return rc;
  } while (how == ZSTD_e_end ? left != 0 : in.pos < in.size);
  return 0;
}

static int put(out *w, const void *data, size_t len, int flush) {
  if (w->zstd)
    return put_zstd(w, data, len, flush);
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

/* A send of the batch, whole: its lines as the journal keeps them. */
static int put_send(void *ctx, const journal_pipeline_send *s) {
  out *w = ctx;
  if (s->first != w->next || s->last > w->last || !s->body)
    return w->failed = ENOENT, 1; /* a record missing: never write a hole */
  w->next = s->last + 1;
  w->n += s->last - s->first + 1;
  if (!w->csv)
    return put(w, s->body, s->len, Z_NO_FLUSH);
  w->rows.n = 0;
  pipeline_csv_rows(w->csv, s->body, s->len, &w->rows);
  return put(w, w->rows.p, w->rows.n, Z_NO_FLUSH);
}

int pipeline_encode_batch(journal *j, const pipeline *p, int64_t first,
                          int64_t last, int fd, char *err, size_t errlen) {
  out *w = xcalloc(1, sizeof *w);
  w->fd = fd;
  w->next = first;
  w->last = last;
  w->gzip = p->o.compression == DURO_PIPELINE_GZIP;
  int rc = -1;
  if (p->o.compression == DURO_PIPELINE_ZSTD) {
    w->zc = ZSTD_createCCtx();
    if (!w->zc ||
        ZSTD_isError(ZSTD_CCtx_setParameter(w->zc, ZSTD_c_compressionLevel,
                                            ZSTD_CLEVEL_DEFAULT)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(w->zc, ZSTD_c_checksumFlag, 1))) {
      snprintf(err, errlen, "cannot start zstd");
      goto out;
    }
    w->zstd = 1;
  }
  /* windowBits 15 + 16: a gzip wrapper; zlib's default header has no
   * name and a zero time. */
  if (w->gzip && deflateInit2(&w->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16,
                              8, Z_DEFAULT_STRATEGY) != Z_OK) {
    snprintf(err, errlen, "cannot start gzip: %s", strerror(ENOMEM));
    w->gzip = 0;
    goto out;
  }
  if (p->o.format == DURO_PIPELINE_CSV) {
    w->csv = &p->o;
    pipeline_csv_header(w->csv, &w->rows);
    put(w, w->rows.p, w->rows.n, Z_NO_FLUSH);
  }
  for (int64_t from = first; from <= last && !w->failed;) {
    int64_t before = w->n;
    if (journal_pipeline_sends(j, p->name, from, last, PIPELINE_SEND_PAGE, 1,
                               put_send, w) != 0) {
      snprintf(err, errlen, "cannot read its records: %s", journal_errmsg(j));
      goto out;
    }
    if (w->n == before && !w->failed)
      w->failed = ENOENT;
    from = w->next;
  }
  if (!w->failed && w->n != last - first + 1)
    w->failed = ENOENT;
  if (!w->failed && (w->gzip || w->zstd))
    put(w, "", 0, Z_FINISH);
  if (w->failed == ENOENT)
    snprintf(err, errlen, "records of its batch are missing");
  else if (w->failed)
    snprintf(err, errlen, "cannot write: %s",
             w->failed > 0 ? strerror(w->failed) : "compression failed");
  else
    rc = 0;
out:
  if (w->gzip)
    deflateEnd(&w->z);
  ZSTD_freeCCtx(w->zc); /* NULL: nothing */
  free(w->rows.p);
  free(w);
  return rc;
}
