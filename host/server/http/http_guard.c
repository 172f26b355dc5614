/* http_guard.c — the refusals a request gets before any route runs, and
 * the budget of bytes requests may hold.  guard_refuse_early answers, on the
 * loop and without the engine: a missing or wrong bearer token (compared
 * in constant time), a stopping server, a body whose length the headers
 * give two ways (request smuggling), a body over http.max_body_bytes, a
 * NUL byte in the path or query, and, on a listener without a token, a
 * request from another site's page (Host, Origin, Sec-Fetch-Site,
 * Content-Type: below).  The gate (http_gate.c) checks the token of the
 * first head of a connection with guard_token_ok and guard_public_request too.
 * guard_buffered() is what requests being received hold against http_budget;
 * guard_note_busy counts and logs the refusals past it. */
#include "http_internal.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "dashboard.h"
#include "error.h"
#include "log.h"

#define BUSY_LOG_MS 10000 /* at most one "over the budget" line */

/* ---- the token, the body's framing, a NUL in the path -------------------- */

static int name_is(const http_header *h, const char *name) {
  return h->name_len == strlen(name) &&
         strncasecmp(h->name, name, h->name_len) == 0;
}

/* The first header named `name`, or NULL (as H2O's lookup). */
static const http_header *header_of(const http_header *h, size_t n,
                                    const char *name) {
  for (size_t i = 0; i < n; i++)
    if (name_is(&h[i], name))
      return &h[i];
  return NULL;
}

/* "Authorization: Bearer <token>" of one of the keys (http_keys.c
 * compares it in constant time), or any request on a listener without
 * keys. */
int guard_token_ok(const http_server *s, const http_header *h, size_t n) {
  return s->n_keys == 0 || keys_match(s, h, n) != NULL;
}

/* A request for the dashboard's static files, which need no token (the
 * page asks for it and sends it with its API calls): a GET of "/" or
 * "/ui/..." without a body.  `path` may hold the query. */
int guard_public_request(const char *method, size_t method_len,
                         const char *path, size_t path_len,
                         const http_header *h, size_t n) {
  const char *q = memchr(path, '?', path_len);
  if (q)
    path_len = (size_t)(q - path);
  if (method_len != 3 || memcmp(method, "GET", 3) != 0 ||
      !dashboard_path(path, path_len))
    return 0;
  for (size_t i = 0; i < n; i++)
    if (name_is(&h[i], "transfer-encoding") ||
        (name_is(&h[i], "content-length") &&
         !(h[i].value_len == 1 && h[i].value[0] == '0')))
      return 0;
  return 1;
}

/* A Content-Length value as H2O reads it (digits only), or -1. */
static long long length_of(const http_header *h) {
  if (h->value_len == 0 || h->value_len > 18)
    return -1;
  long long v = 0;
  for (size_t i = 0; i < h->value_len; i++) {
    if (h->value[i] < '0' || h->value[i] > '9')
      return -1;
    v = v * 10 + (h->value[i] - '0');
  }
  return v;
}

/* A body whose length the headers give two ways.  H2O lets
 * Transfer-Encoding win over Content-Length and takes the first of two
 * Content-Lengths; a proxy in front may choose the other, and then the
 * bytes one reads as a body the other reads as a next request (request
 * smuggling, RFC 9112 6.3).  So such a request is refused, and its
 * connection closed.  Returns what is wrong, or NULL. */
static const char *framing_problem(const http_header *h, size_t n) {
  size_t te = 0, cl = 0;
  long long len = -1;
  for (size_t i = 0; i < n; i++) {
    if (name_is(&h[i], "transfer-encoding")) {
      te++;
    } else if (name_is(&h[i], "content-length")) {
      long long v = length_of(&h[i]);
      if (cl++ && v != len)
        return "the request has Content-Length headers that differ";
      len = v;
    }
  }
  if (te && cl)
    return "the request has both Transfer-Encoding and Content-Length";
  if (te > 1)
    return "the request has more than one Transfer-Encoding header";
  return NULL;
}

/* Segment `want` (0-based) of the path, split on '/' as split_path does,
 * by pointer and length (it may hold NUL bytes). */
static int segment_at(const char *p, size_t len, int want, const char **seg,
                      size_t *seg_len) {
  int k = 0;
  for (size_t i = 0; i < len;) {
    while (i < len && p[i] == '/')
      i++;
    if (i == len)
      break;
    size_t start = i;
    while (i < len && p[i] != '/')
      i++;
    if (k++ == want) {
      *seg = p + start;
      *seg_len = i - start;
      return 1;
    }
  }
  return 0;
}

static int segment_is(const char *p, size_t len, int at, const char *word) {
  const char *seg;
  size_t seg_len;
  return segment_at(p, len, at, &seg, &seg_len) && seg_len == strlen(word) &&
         memcmp(seg, word, seg_len) == 0;
}

/* A NUL byte in the path (%00 once decoded) would end the C strings the
 * routes work on, so "/instances/abc%00def" addressed instance "abc".
 * Refuses it, naming the instance id when that is the segment it is in.
 * Returns 1 when it answered. */
static int refuse_nul(http_exchange *x, const http_input *in) {
  const char *nul = memchr(in->path, '\0', in->path_len);
  if (nul) {
    const char *seg;
    size_t seg_len;
    int in_id = segment_at(in->path, in->path_len, 3, &seg, &seg_len) &&
                nul >= seg && nul < seg + seg_len &&
                segment_is(in->path, in->path_len, 0, "workflows") &&
                segment_is(in->path, in->path_len, 2, "instances");
    if (in_id)
      send_error(x, 400, duro_err_name(DURO_E_INVALID_ID),
                 "instance ids are 1-100 characters of A-Z a-z 0-9 _ . : -; "
                 "this one holds a NUL byte (%%00)");
    else
      send_error(x, 400, "request.invalid", "the path holds a NUL byte (%%00)");
    return 1;
  }
  if (in->query && memchr(in->query, '\0', in->query_len)) {
    send_error(x, 400, "request.invalid", "the query holds a NUL byte");
    return 1;
  }
  return 0;
}

/* ---- browsers, on a listener without a token -------------------------------
 *
 * Without a token any page a browser shows could reach the listener: a
 * form POST, a text/plain fetch or an <img> are sent cross-site without
 * asking, and a name of the attacker's that resolves to 127.0.0.1 (DNS
 * rebinding) even lets the page read the answers.  So, without a token:
 *  - the Host must be the listener's own (the address of http.listen;
 *    localhost, 127.0.0.1 and [::1] on loopback), with its port or none,
 *    or a name of http.allowed_hosts: a rebinding page sends its own;
 *  - a request that changes state (any method but GET, HEAD and OPTIONS,
 *    and a GET of /__scheduled however spelled) is refused when its
 *    Origin is another's, or, with none, when Sec-Fetch-Site says
 *    another site sent it;
 *  - its body, if any, must say Content-Type: application/json, which no
 *    page can send cross-site without a CORS preflight (never granted).
 * Clients other than browsers send no Origin and the Host they were
 * given; a request without a Host (HTTP/1.0) comes from no browser. */

typedef struct host_port {
  const char *name; /* not NUL-terminated */
  size_t len;
  long port; /* -1: none given */
} host_port;

/* Splits "name[:port]" or "[v6][:port]"; a trailing dot of the name is
 * dropped ("localhost." is localhost).  Returns -1 when it is neither. */
static int split_host(const char *v, size_t len, host_port *hp) {
  size_t n;
  if (len > 0 && v[0] == '[') {
    const char *e = memchr(v, ']', len);
    if (!e)
      return -1;
    n = (size_t)(e - v) + 1;
  } else {
    const char *c = memchr(v, ':', len);
    n = c ? (size_t)(c - v) : len;
  }
  *hp = (host_port){v, n, -1};
  if (n < len) {
    if (v[n] != ':' || len - n - 1 == 0 || len - n - 1 > 5)
      return -1;
    hp->port = 0;
    for (size_t i = n + 1; i < len; i++) {
      if (v[i] < '0' || v[i] > '9')
        return -1;
      hp->port = hp->port * 10 + (v[i] - '0');
    }
  }
  if (hp->len > 1 && hp->name[hp->len - 1] == '.')
    hp->len--;
  return hp->len > 0 ? 0 : -1;
}

static int name_eq(const host_port *hp, const char *name) {
  return strlen(name) == hp->len && strncasecmp(hp->name, name, hp->len) == 0;
}

static int own_name(const http_server *s, const host_port *hp) {
  return (s->listen_host && name_eq(hp, s->listen_host)) ||
         (s->loopback_names &&
          (name_eq(hp, "localhost") || name_eq(hp, "127.0.0.1") ||
           name_eq(hp, "[::1]")));
}

/* A name of http.allowed_hosts: one without a port allows any. */
static int allowed_name(const http_server *s, const host_port *hp, long port) {
  for (size_t i = 0; i < s->n_allowed; i++) {
    host_port e;
    const char *a = s->allowed[i];
    if (split_host(a, strlen(a), &e) == 0 && e.len == hp->len &&
        strncasecmp(e.name, hp->name, e.len) == 0 &&
        (e.port < 0 || e.port == port))
      return 1;
  }
  return 0;
}

static int host_ok(const http_server *s, const http_header *h) {
  host_port hp;
  if (split_host(h->value, h->value_len, &hp) != 0)
    return 0;
  if (own_name(s, &hp) && (hp.port < 0 || hp.port == s->port))
    return 1;
  return allowed_name(s, &hp, hp.port < 0 ? 80 : hp.port);
}

/* "http://name[:port]" of a page of ours ("null" is nobody's). */
static int origin_ok(const http_server *s, const http_header *h) {
  const char *v = h->value;
  size_t len = h->value_len;
  long port;
  if (len > 7 && strncasecmp(v, "http://", 7) == 0) {
    v += 7, len -= 7, port = 80;
  } else if (len > 8 && strncasecmp(v, "https://", 8) == 0) {
    v += 8, len -= 8, port = 443;
  } else {
    return 0;
  }
  host_port hp;
  if (split_host(v, len, &hp) != 0)
    return 0;
  if (hp.port >= 0)
    port = hp.port;
  return (own_name(s, &hp) && port == s->port) || allowed_name(s, &hp, port);
}

static int value_is(const http_header *h, const char *word) {
  return h && h->value_len == strlen(word) &&
         strncasecmp(h->value, word, h->value_len) == 0;
}

/* "application/json", with any parameters ("; charset=utf-8"). */
static int content_type_is(const http_header *h, const char *want) {
  size_t n = strlen(want);
  return h && h->value_len >= n && strncasecmp(h->value, want, n) == 0 &&
         (h->value_len == n || h->value[n] == ';' || h->value[n] == ' ');
}

/* JSON, or NDJSON for a pipeline's records (POST /pipelines/{name}): no
 * page can send either type without the browser asking first (neither is
 * one a form or a plain fetch may send), which is what the check is
 * for. */
static int json_content_type(http_exchange *x, const http_header *h) {
  if (content_type_is(h, "application/json"))
    return 1;
  char *seg[MAX_SEGMENTS];
  int n = split_path(x, seg);
  return n == 2 && !strcmp(seg[0], "pipelines") &&
         content_type_is(h, "application/x-ndjson");
}

/* Judged by the segments http_route dispatches on, not by the path's
 * bytes: "/__scheduled/", "//__scheduled" or "/%5F_scheduled" reach the
 * cron route as "/__scheduled" does, and so are guarded as it is. */
static int changes_state(http_exchange *x, const http_input *in) {
  size_t m = in->method_len;
  const char *mt = in->method;
  int reads = (m == 3 && !memcmp(mt, "GET", 3)) ||
              (m == 4 && !memcmp(mt, "HEAD", 4)) ||
              (m == 7 && !memcmp(mt, "OPTIONS", 7));
  if (!reads)
    return 1;
  char *seg[MAX_SEGMENTS];
  int n = split_path(x, seg);
  return route_is_scheduled(seg, n);
}

/* Returns 1 when it answered (guard_refuse_early). */
static int refuse_foreign(http_server *s, http_exchange *x,
                          const http_input *in) {
  const http_header *h = in->headers, *v;
  size_t n = in->n_headers;
  if (!s->guard)
    return 0;
  if ((v = header_of(h, n, "host")) && !host_ok(s, v)) {
    x->rs.close = 1;
    return send_error(x, 403, "request.forbidden_host",
                      "Host \"%.*s\" is not this listener's; a name it is "
                      "reached by goes in http.allowed_hosts",
                      (int)(v->value_len > 200 ? 200 : v->value_len), v->value),
           1;
  }
  if (!changes_state(x, in))
    return 0;
  const http_header *origin = header_of(h, n, "origin");
  const http_header *site = header_of(h, n, "sec-fetch-site");
  if (origin ? !origin_ok(s, origin)
             : value_is(site, "cross-site") || value_is(site, "same-site")) {
    x->rs.close = 1;
    return send_error(
               x, 403, "request.cross_origin",
               "a request that changes state is refused from another "
               "site's page (Origin \"%.*s\")",
               origin ? (int)(origin->value_len > 200 ? 200 : origin->value_len)
                      : 0,
               origin ? origin->value : ""),
           1;
  }
  const http_header *type = header_of(h, n, "content-type");
  int reads = in->method_len == 3 && !memcmp(in->method, "GET", 3);
  if (!reads && (in->body_len > 0 || type) && !json_content_type(x, type))
    return send_error(x, 415, "request.unsupported_media_type",
                      "a request body must be JSON, sent with "
                      "\"Content-Type: application/json\" (or NDJSON to a "
                      "pipeline, \"application/x-ndjson\")"),
           1;
  return 0;
}

/* The refusals that need no engine, answered on the loop: a missing or
 * wrong token, a stopping server, an ambiguous body length, a body over
 * the limit, a NUL in the path.  Returns 1 when it answered. */
int guard_refuse_early(http_server *s, http_exchange *x, const http_input *in) {
  const char *bad;
  x->key = keys_match(s, in->headers, in->n_headers);
  if (s->n_keys && !x->key &&
      !guard_public_request(in->method, in->method_len, in->path, in->path_len,
                            in->headers, in->n_headers)) {
    x->rs.close = 1;
    send_error(x, 401, "request.unauthorized",
               "a valid \"Authorization: Bearer\" token is required");
  } else if (s->stopping) {
    x->rs.close = 1;
    send_error(x, 503, duro_err_name(DURO_E_SHUTDOWN), "the host is stopping");
  } else if (refuse_foreign(s, x, in)) {
    /* answered */
  } else if ((bad = framing_problem(in->headers, in->n_headers))) {
    x->rs.close = 1;
    send_error(x, 400, "request.invalid", "%s", bad);
  } else if (in->body && in->body_len > s->max_body) {
    send_error(x, 413, "request.too_large",
               "the body is %zu bytes; the limit is %zu", in->body_len,
               s->max_body);
  } else {
    return refuse_nul(x, in);
  }
  return 1;
}

/* ---- the budget ---------------------------------------------------------- */

size_t guard_buffered(const http_server *s) {
  return s->gate_bytes + s->h2o_bytes + s->copied_bytes;
}

/* Counts a refusal for the budget and says so in the log, at most once
 * per BUSY_LOG_MS. */
void guard_note_busy(http_server *s) {
  s->busy_refusals++;
  uint64_t now = s->started ? uv_now(s->ctx.loop) : 0;
  if (s->started && now - s->busy_logged >= BUSY_LOG_MS) {
    log_warn("http: %zu read(s) or request(s) refused: requests being "
             "received hold %zu bytes, %zu waiting GETs %zu bytes; the "
             "budget of each is %zu",
             s->busy_refusals, guard_buffered(s), s->parked, s->parked_bytes,
             s->budget);
    s->busy_logged = now;
    s->busy_refusals = 0;
  }
}
