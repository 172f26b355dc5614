/* pipeline_s3.c — the object storage sink: one batch's object.  Its bytes
 * (pipeline_encode.c) are built into an unnamed temporary file, hashed
 * (SHA-256, which the signature covers), and sent by one PUT to
 * endpoint/bucket/key, path-style, signed with AWS Signature Version 4
 * by libcurl.  The key is the prefix and the batch's file name
 * (duro_pipeline_file_name), so an upload repeated after a crash
 * replaces the object with the same bytes; the caller records the batch
 * done only once this returned 0, after a 2xx.
 *
 * An upload must neither hang the flusher nor hold up the host's stop: it
 * gives up on a connection not made in 10 s, on a transfer that moved
 * nothing for 30 s, and at once when the flusher is told to stop (the
 * plan stays, and is uploaded again after the restart). */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline_internal.h"
#include "util.h"

#define CONNECT_TIMEOUT_MS 10000L
#define STALL_SECONDS 30L

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_setup(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

void pipeline_s3_init(void) { pthread_once(&curl_once, curl_setup); }

/* An unnamed temporary file ($TMPDIR, else /tmp): gone with its last
 * descriptor, whatever becomes of the process. */
static int temp_file(void) {
  const char *dir = getenv("TMPDIR");
  char *path = xasprintf("%s/duro-batch-XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkostemp(path, O_CLOEXEC);
  if (fd >= 0)
    unlink(path);
  free(path);
  return fd;
}

/* The SHA-256 of the file's bytes as hex into hex[65]; the offset is left
 * at the start. */
static int hash_file(int fd, char hex[65]) {
  unsigned char buf[64 * 1024], md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int rc = -1;
  if (!ctx || lseek(fd, 0, SEEK_SET) != 0 ||
      EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
    goto out;
  for (;;) {
    ssize_t k = read(fd, buf, sizeof buf);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      goto out;
    if (k == 0)
      break;
    if (EVP_DigestUpdate(ctx, buf, (size_t)k) != 1)
      goto out;
  }
  if (EVP_DigestFinal_ex(ctx, md, &md_len) != 1 || lseek(fd, 0, SEEK_SET) != 0)
    goto out;
  for (unsigned int i = 0; i < md_len && i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", md[i]);
  rc = 0;
out:
  EVP_MD_CTX_free(ctx);
  return rc;
}

/* What one PUT reads and keeps. */
typedef struct put {
  int fd;           /* the batch, read from its start */
  const int *stop;  /* the flusher's stop, read atomically */
  char answer[600]; /* the start of the answer's body (an S3 error) */
  size_t answer_len;
} put;

static size_t read_body(char *buf, size_t size, size_t n, void *arg) {
  put *u = arg;
  for (;;) {
    ssize_t k = read(u->fd, buf, size * n);
    if (k >= 0)
      return (size_t)k;
    if (errno != EINTR)
      return CURL_READFUNC_ABORT;
  }
}

static size_t keep_answer(char *data, size_t size, size_t n, void *arg) {
  put *u = arg;
  size_t len = size * n;
  size_t room = sizeof u->answer - 1 - u->answer_len;
  size_t take = len < room ? len : room;
  memcpy(u->answer + u->answer_len, data, take);
  u->answer_len += take;
  u->answer[u->answer_len] = '\0';
  return len;
}

/* Non-zero aborts the transfer: the host is stopping. */
static int progress(void *arg, curl_off_t dltotal, curl_off_t dlnow,
                    curl_off_t ultotal, curl_off_t ulnow) {
  (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
  const put *u = arg;
  return u->stop && __atomic_load_n(u->stop, __ATOMIC_ACQUIRE);
}

/* The text of element <tag> in an S3 error's XML, into out (empty when
 * there is none). */
static void xml_text(const char *xml, const char *tag, char *out, size_t len) {
  char open[32], close[32];
  snprintf(open, sizeof open, "<%s>", tag);
  snprintf(close, sizeof close, "</%s>", tag);
  const char *a = strstr(xml, open);
  const char *b = a ? strstr(a, close) : NULL;
  out[0] = '\0';
  if (a && b)
    snprintf(out, len, "%.*s", (int)(b - a - (int)strlen(open)),
             a + strlen(open));
}

/* One PUT of the file fd (size bytes, its SHA-256 sha) to url. */
static int put_object(const pipeline *p, const char *url, int fd,
                      curl_off_t size, const char *sha, const int *stop,
                      char *err, size_t errlen) {
  CURL *c = curl_easy_init();
  if (!c) {
    snprintf(err, errlen, "PUT %s: cannot start libcurl", url);
    return -1;
  }
  put u = {.fd = fd, .stop = stop};
  char sigv4[160], errbuf[CURL_ERROR_SIZE] = "";
  snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3", p->o.s3.region);
  /* Every header set here is signed, so none may be one libcurl then
   * leaves out (an empty "Expect:" would be signed and not sent). */
  char *sha_header = xasprintf("x-amz-content-sha256: %s", sha);
  struct curl_slist *h = curl_slist_append(NULL, sha_header);
  h = curl_slist_append(h, p->o.gzip ? "Content-Type: application/gzip"
                                     : "Content-Type: application/x-ndjson");
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, size);
  curl_easy_setopt(c, CURLOPT_READFUNCTION, read_body);
  curl_easy_setopt(c, CURLOPT_READDATA, &u);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_answer);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &u);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4);
  curl_easy_setopt(c, CURLOPT_USERNAME, p->o.s3.access_key);
  curl_easy_setopt(c, CURLOPT_PASSWORD, p->o.s3.secret_key);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* a thread of many */
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, STALL_SECONDS);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &u);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  CURLcode cc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  int rc = -1;
  if (cc == CURLE_ABORTED_BY_CALLBACK) {
    snprintf(err, errlen, "PUT %s: given up: the host is stopping", url);
  } else if (cc != CURLE_OK) {
    snprintf(err, errlen, "PUT %s: %s", url,
             errbuf[0] ? errbuf : curl_easy_strerror(cc));
  } else if (status < 200 || status > 299) {
    char code[80], msg[300];
    xml_text(u.answer, "Code", code, sizeof code);
    xml_text(u.answer, "Message", msg, sizeof msg);
    snprintf(err, errlen, "PUT %s: answered %ld%s%s%s%s", url, status,
             code[0] ? " " : "", code, msg[0] ? ": " : "", msg);
  } else {
    rc = 0;
  }
  curl_slist_free_all(h);
  free(sha_header);
  curl_easy_cleanup(c);
  return rc;
}

/* A key as a URL's path: every byte but A-Z a-z 0-9 - . _ ~ / escaped
 * (%XX), which is also how the signature's canonical path has it; a
 * pipeline's name may hold ':', a partition '='.  malloc'ed. */
static char *key_path(const char *key) {
  char *out = xmalloc(3 * strlen(key) + 1), *o = out;
  for (const unsigned char *c = (const unsigned char *)key; *c; c++) {
    if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
               "0123456789-._~/",
               *c))
      *o++ = (char)*c;
    else
      o += sprintf(o, "%%%02X", *c);
  }
  *o = '\0';
  return out;
}

int pipeline_s3_put_batch(journal *j, const pipeline *p, int64_t first,
                          int64_t last, int64_t plan_ms, const int *stop,
                          char *err, size_t errlen) {
  char *rel = duro_pipeline_file_name(p->name, &p->o, first, last, plan_ms);
  char *key = xasprintf("%s%s", p->o.s3.prefix, rel);
  char *path = key_path(key);
  const char *end = p->o.s3.endpoint + strlen(p->o.s3.endpoint);
  int slash = end[-1] == '/';
  /* a bucket's name needs no escaping (config_pipelines.c) */
  char *url = xasprintf("%.*s/%s/%s", (int)(end - p->o.s3.endpoint - slash),
                        p->o.s3.endpoint, p->o.s3.bucket, path);
  char why[512], sha[65];
  struct stat st;
  int rc = -1;
  int fd = temp_file();
  if (fd < 0) {
    snprintf(err, errlen, "%s: cannot create a temporary file: %s", url,
             strerror(errno));
    goto out;
  }
  if (pipeline_encode_batch(j, p, first, last, fd, why, sizeof why) != 0) {
    snprintf(err, errlen, "%s: %s", url, why);
    goto out;
  }
  if (fstat(fd, &st) != 0 || hash_file(fd, sha) != 0) {
    snprintf(err, errlen, "%s: cannot read its temporary file: %s", url,
             strerror(errno ? errno : EIO));
    goto out;
  }
  rc = put_object(p, url, fd, (curl_off_t)st.st_size, sha, stop, err, errlen);
out:
  if (fd >= 0)
    close(fd);
  free(url);
  free(path);
  free(key);
  free(rel);
  return rc;
}
