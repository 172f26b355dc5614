/* http_client.c — the libcurl client and the JSON path helpers that the
 * suites testing a real host's control plane share (see http_client.h).
 * Failures inside a helper (out of memory, no curl handle) are Check
 * assertions, the helpers being called from test cases; an unchecked
 * request (chaos.c, no test case) returns them as curl errors instead. */
#include "http_client.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "suite_run.h"

#define DEFAULT_TIMEOUT_MS 15000L

/* Appends to the reply's body; -1 when out of memory (the body kept). */
static int append_body(http_resp *r, const char *p, size_t len) {
  char *grown = realloc(r->body, r->len + len + 1);
  if (!grown)
    return -1;
  r->body = grown;
  memcpy(r->body + r->len, p, len);
  r->len += len;
  r->body[r->len] = '\0';
  return 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  ck_assert(append_body(ud, p, size * n) == 0);
  return size * n;
}

/* For an unchecked request: a body that does not fit fails the transfer,
 * an unknown outcome to the caller. */
static size_t on_body_unchecked(char *p, size_t size, size_t n, void *ud) {
  return append_body(ud, p, size * n) == 0 ? size * n : 0;
}

/* Keeps what fits of the header lines: the suites look only at the first
 * few, and a reply with more is no reason to fail the transfer. */
static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  http_resp *r = ud;
  size_t len = size * n;
  size_t room = sizeof r->headers - 1 - r->hlen;
  size_t take = len < room ? len : room;
  memcpy(r->headers + r->hlen, p, take);
  r->hlen += take;
  r->headers[r->hlen] = '\0';
  return len;
}

void http_resp_free(http_resp *r) {
  free(r->body);
  json_decref(r->json);
  memset(r, 0, sizeof *r);
}

CURLcode http_send(int port, const http_req *q, http_resp *r) {
  memset(r, 0, sizeof *r);
  CURL *c = curl_easy_init();
  if (!q->unchecked)
    ck_assert(c != NULL);
  else if (!c)
    return CURLE_FAILED_INIT;
  /* Room for the over-long paths test_http sends on purpose. */
  char url[12288];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, q->path);
  struct curl_slist *hdrs = NULL;
  char type[128];
  snprintf(type, sizeof type, "Content-Type: %s",
           q->content_type ? q->content_type : "application/json");
  hdrs = curl_slist_append(hdrs, type);
  hdrs = curl_slist_append(hdrs, "Expect:"); /* no 100-continue round trip */
  char authz[512];
  if (q->auth) {
    snprintf(authz, sizeof authz, "Authorization: %s", q->auth);
    hdrs = curl_slist_append(hdrs, authz);
  }
  if (q->header)
    hdrs = curl_slist_append(hdrs, q->header);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
                   q->timeout_ms > 0 ? q->timeout_ms : DEFAULT_TIMEOUT_MS);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION,
                   q->unchecked ? on_body_unchecked : on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
  if (q->body) {
    size_t len = q->body_len ? q->body_len : strlen(q->body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body);
  }
  /* A POST without a body still goes with "Content-Length: 0". */
  if (!strcmp(q->method, "POST") && !q->body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
  }
  /* The method as given, also for a GET with a body (curl would POST). */
  if (q->body || strcmp(q->method, "GET") != 0)
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
  CURLcode rc = curl_easy_perform(c);
  if (rc == CURLE_OK)
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
  curl_slist_free_all(hdrs);
  curl_easy_cleanup(c);
  if (rc != CURLE_OK) {
    http_resp_free(r);
    return rc;
  }
  if (r->body)
    r->json = json_loadb(r->body, r->len, JSON_DECODE_ANY, NULL);
  return CURLE_OK;
}

const char *http_resp_header(const http_resp *r, const char *name, char *out,
                             size_t len) {
  size_t nl = strlen(name);
  for (const char *l = r->headers; l && *l;) {
    if (!strncasecmp(l, name, nl) && l[nl] == ':') {
      const char *v = l + nl + 1;
      while (*v == ' ')
        v++;
      size_t vl = strcspn(v, "\r\n");
      snprintf(out, len, "%.*s", (int)vl, v);
      return out;
    }
    l = strchr(l, '\n');
    if (l)
      l++;
  }
  return NULL;
}

json_t *jget(json_t *v, const char *path) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", path);
  char *save = NULL;
  for (char *k = strtok_r(buf, ".", &save); k && v;
       k = strtok_r(NULL, ".", &save))
    v = json_object_get(v, k);
  return v;
}

const char *jstr(json_t *v, const char *path) {
  const char *s = json_string_value(jget(v, path));
  return s ? s : "";
}

char *jdump(json_t *v) {
  char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  return s ? s : strdup("(null)");
}

json_t *step_of(json_t *d, const char *key) {
  size_t i;
  json_t *s;
  json_array_foreach(jget(d, "steps"), i, s) {
    if (!strcmp(jstr(s, "key"), key))
      return s;
  }
  return NULL;
}

int http_suite_run(Suite *s) {
  signal(SIGPIPE, SIG_IGN);
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    fprintf(stderr, "curl_global_init failed\n");
    return EXIT_FAILURE;
  }
  int rc = suite_run(s);
  curl_global_cleanup();
  return rc;
}
