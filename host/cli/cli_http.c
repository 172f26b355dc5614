/* cli_http.c — one request sent with libcurl (a loopback host asked
 * directly, never through a proxy) and its answer read: a 2xx JSON
 * answer handed back, anything else printed as "duro: CODE: MESSAGE" or
 * the HTTP status, naming the URL asked; an unknown workflow's 404 is
 * followed by a GET /plugins, for the nearest workflow that host
 * serves. */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli_internal.h"
#include "describe.h"
#include "suggest.h"
#include "util.h"

typedef struct cli_buf {
  char *data; /* NUL-terminated */
  size_t len;
} cli_buf;

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
  cli_buf *b = ud;
  size_t len = size * n;
  b->data = xrealloc(b->data, b->len + len + 1);
  memcpy(b->data + b->len, p, len);
  b->len += len;
  b->data[b->len] = '\0';
  return len;
}

/* Whether the host of the base URL is a loopback name or address. */
static int is_loopback(const char *base) {
  const char *h = strstr(base, "://");
  h = h ? h + 3 : base;
  size_t authority = strcspn(h, "/?#");
  const char *at = memchr(h, '@', authority);
  while (at) { /* past any user:password@ */
    authority -= (size_t)(at + 1 - h);
    h = at + 1;
    at = memchr(h, '@', authority);
  }
  size_t n = h[0] == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":/?#");
  return (n == 9 && !strncasecmp(h, "localhost", 9)) ||
         (n >= 4 && !strncmp(h, "127.", 4) && strspn(h, "0123456789.") == n) ||
         (n == 5 && !strncmp(h, "[::1]", 5));
}

/* What every request sets: its headers, where its answer goes, and how
 * long it may take (seconds; 0: no limit). */
static void set_answer(cli_ctx *c, struct curl_slist *headers,
                       size_t (*fn)(char *p, size_t size, size_t n, void *ud),
                       void *ud, long timeout_s) {
  CURL *h = c->curl;
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "duro-cli");
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, fn);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, ud);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
}

static CURLcode perform(cli_ctx *c, const cli_req *r, cli_buf *b,
                        long *status) {
  CURL *h = c->curl;
  char *url = xasprintf("%s%s", c->base, r->path);
  if (!c->headers_added) { /* --wait sends more than one request */
    cli_add_header(c, "Accept: application/json");
    cli_add_header(c, "Content-Type: application/json");
    cli_add_header(c,
                   "Expect:"); /* no 100-continue round trip for big bodies */
    c->headers_added = 1;
  }
  curl_easy_setopt(h, CURLOPT_URL, url);
  /* libcurl sends requests through the proxy of http_proxy/all_proxy
   * unless no_proxy exempts the host, and it does not exempt loopback: a
   * user with a proxy set could not reach the default 127.0.0.1:8787 (the
   * proxy's own loopback is another machine's), and the proxy would see the
   * bearer token.  A loopback host is always asked directly. */
  if (is_loopback(c->base))
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
  if (r->body) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(r->body));
  } else {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L); /* after a POST */
  }
  /* NULL undoes an earlier request's method on this handle. */
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST,
                   strcmp(r->method, r->body ? "POST" : "GET") ? r->method
                                                               : NULL);
  set_answer(c, c->headers, on_data, b, 120L);
  CURLcode rc = curl_easy_perform(h);
  if (rc == CURLE_OK)
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
  free(url);
  return rc;
}

/* What follows an unknown workflow's 404, malloc'ed: the workflow the host
 * serves nearest to c->wf ("did you mean \"order-flow\"?"), else the ones
 * it serves, from GET /plugins' "serves"; NULL when that cannot be read.
 * A typo and a client talking to another host than the user thinks look
 * alike from the 404 alone. */
static char *workflow_hint(cli_ctx *c) {
  char path[] = "/plugins";
  cli_req r = {.method = "GET", .path = path};
  cli_buf b = {0};
  long status = 0;
  json_t *v = NULL;
  char *hint = NULL;
  if (!c->wf || perform(c, &r, &b, &status) != CURLE_OK || status != 200 ||
      !(v = json_loadb(b.data, b.len, 0, NULL)))
    goto done;
  const char *names[64];
  size_t n = 0, i, k;
  const json_t *p, *w;
  json_array_foreach(json_object_get(v, "plugins"), i, p) {
    json_array_foreach(
        json_object_get(json_object_get(p, "serves"), "workflows"), k, w) {
      if (json_string_value(w) && n < sizeof names / sizeof *names)
        names[n++] = json_string_value(w);
    }
  }
  const char *near = suggest_nearest(c->wf, strlen(c->wf), names, n);
  if (near) {
    hint = xasprintf("did you mean \"%s\"?", near);
  } else if (n == 0) {
    hint = xstrdup("it serves no workflow");
  } else {
    hint = xstrdup("it serves");
    for (i = 0; i < n && i < 8; i++) {
      char *more = xasprintf("%s%s \"%s\"", hint, i ? "," : "", names[i]);
      free(hint);
      hint = more;
    }
  }
done:
  json_decref(v);
  free(b.data);
  return hint;
}

/* A 2xx JSON answer into *out; anything else printed as an error.  An
 * unknown workflow's says which host was asked and what it serves. */
static int read_answer(cli_ctx *c, long status, const cli_buf *b,
                       json_t **out) {
  json_t *v =
      b->len ? json_loadb(b->data, b->len, JSON_DECODE_ANY, NULL) : NULL;
  if (status >= 200 && status < 300 && v) {
    *out = v;
    return CLI_OK;
  }
  const json_t *err = json_object_get(v, "error");
  const char *code = json_string_value(json_object_get(err, "code"));
  const char *message = json_string_value(json_object_get(err, "message"));
  char *hint = NULL;
  if (code && !strcmp(code, "workflow.not_found"))
    hint = workflow_hint(c);
  fputs("duro: ", stderr);
  if (code && message) {
    describe_text(stderr, code, 0, 0);
    fputs(": ", stderr);
    describe_text(stderr, message, 0, 0);
    /* The id was taken before (by a client, a cron tick, a queue
     * handler): say that this request made nothing. */
    if (!strcmp(code, "instance.already_exists"))
      fputs(": nothing was created", stderr);
    if (!strcmp(code, "workflow.not_found")) {
      fprintf(stderr, " (at %s, %s", c->base, c->origin);
      if (hint) {
        fputs("; ", stderr);
        describe_text(stderr, hint, 0, 0);
      }
      fputc(')', stderr);
    }
  } else {
    fprintf(stderr, "%s answered HTTP %ld%s", c->base, status,
            status >= 200 && status < 300 ? " without JSON" : "");
    if (b->len) {
      fputs(": ", stderr);
      describe_text(stderr, b->data, 200, 0);
    }
  }
  fputc('\n', stderr);
  free(hint);
  json_decref(v);
  return CLI_FAILED;
}

int cli_send_request(cli_ctx *c, const cli_req *r, json_t **out) {
  cli_buf b = {0};
  long status = 0;
  c->errbuf[0] = '\0';
  CURLcode cc = perform(c, r, &b, &status);
  int rc;
  if (cc != CURLE_OK) {
    fprintf(stderr,
            "duro: cannot reach %s (%s): %s (is \"duro run\" running "
            "there?)\n",
            c->base, c->origin,
            c->errbuf[0] ? c->errbuf : curl_easy_strerror(cc));
    rc = CLI_FAILED;
  } else {
    rc = read_answer(c, status, &b, out);
  }
  free(b.data);
  return rc;
}

/* The bearer token's header (and any other of the host's) without the
 * JSON ones, with accept and last_id's instead. */
static struct curl_slist *stream_headers(const cli_ctx *c, const char *accept,
                                         const char *last_id) {
  struct curl_slist *h = NULL;
  for (const struct curl_slist *l = c->headers; l; l = l->next)
    if (strncasecmp(l->data, "Accept:", 7) &&
        strncasecmp(l->data, "Content-Type:", 13))
      h = curl_slist_append(h, l->data);
  char *line = xasprintf("Accept: %s", accept);
  h = curl_slist_append(h, line);
  free(line);
  if (last_id) {
    line = xasprintf("Last-Event-ID: %s", last_id);
    h = curl_slist_append(h, line);
    free(line);
  }
  return h;
}

int cli_stream(cli_ctx *c, const char *path, const char *accept,
               const char *last_id,
               size_t (*fn)(char *p, size_t size, size_t n, void *ud), void *ud,
               long *status) {
  CURL *h = c->curl;
  char *url = xasprintf("%s%s", c->base, path);
  struct curl_slist *headers = stream_headers(c, accept, last_id);
  curl_easy_setopt(h, CURLOPT_URL, url);
  if (is_loopback(c->base)) /* as perform's */
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, NULL);
  set_answer(c, headers, fn, ud, 0L); /* as long as it lasts */
  c->errbuf[0] = '\0';
  *status = 0;
  CURLcode rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
  curl_slist_free_all(headers);
  free(url);
  return (int)rc;
}
