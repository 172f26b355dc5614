/* http_json.c — what every route reads and answers with: the JSON
 * replies and the {"error":{"code","message"}} errors (the status an
 * engine error implies: status_of), the request's method, path segments,
 * query values and JSON body, and H2O's own refusals rewritten as our
 * JSON errors.  The routes run on a pool thread and write their answer
 * into the exchange (http_response); the loop sends it (http_exchange.c). */
#include "http_internal.h"

#include <glib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "util.h"

/* ---- responses ------------------------------------------------------------
 */

const char *reason_of(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 201:
    return "Created";
  case 202:
    return "Accepted";
  case 400:
    return "Bad Request";
  case 401:
    return "Unauthorized";
  case 403:
    return "Forbidden";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 409:
    return "Conflict";
  case 413:
    return "Payload Too Large";
  case 415:
    return "Unsupported Media Type";
  case 417:
    return "Expectation Failed";
  case 429:
    return "Too Many Requests";
  case 431:
    return "Request Header Fields Too Large";
  case 503:
    return "Service Unavailable";
  default:
    return "Internal Server Error";
  }
}

void send_text(http_exchange *x, int status, const char *type, const char *body,
               size_t len) {
  http_response *rs = &x->rs;
  rs->status = status;
  rs->type = type;
  free(rs->body);
  rs->body = xstrndup(body, len);
  rs->len = len;
}

/* Sends `body` as JSON and drops the reference. */
int send_json(http_exchange *x, int status, json_t *body) {
  char *text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(body);
  if (!text) {
    send_text(x, 500, "application/json", "{}", 2);
    return 0;
  }
  send_text(x, status, "application/json", text, strlen(text));
  free(text);
  return 0;
}

/* {"error":{"code","message"}} as text (malloc'ed). */
char *error_text(const char *code, char *msg) {
  json_t *body =
      json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
  if (!body) {
    /* The message echoes the request (method, path, query), which may not
     * be UTF-8; jansson refuses that and the reply was a 500 "{}"
     * (test_http).  Send it with the non-ASCII bytes replaced. */
    for (char *p = msg; *p; p++)
      if ((unsigned char)*p >= 0x80)
        *p = '?';
    body = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
  }
  char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
  json_decref(body);
  return text ? text : xstrdup("{}");
}

int send_error(http_exchange *x, int status, const char *code, const char *fmt,
               ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = xvasprintf(fmt, ap);
  va_end(ap);
  char *text = error_text(code, msg);
  free(msg);
  send_text(x, status, "application/json", text, strlen(text));
  free(text);
  return 0;
}

int status_of(int rc) {
  switch (rc) {
  case DURO_E_NOT_FOUND:
  case DURO_E_WORKFLOW_NOT_FOUND:
  case DURO_E_QUEUE_NOT_FOUND:
    return 404;
  case DURO_E_MESSAGE_TOO_LARGE:
  case DURO_E_BATCH_TOO_LARGE:
    return 413;
  case DURO_E_ALREADY_EXISTS:
  case DURO_E_CANNOT_RESTART:
  case DURO_E_CANNOT_TERMINATE:
  case DURO_E_CANNOT_PAUSE:
  case DURO_E_CANNOT_RESUME:
  case DURO_E_CANNOT_DELETE:
  case DURO_E_INSTANCE_ENDED:
    return 409;
  case DURO_E_INVALID_ID:
  case DURO_E_INVALID_PARAMS:
  case DURO_E_INVALID_ARGUMENT:
  case DURO_E_INVALID_DURATION:
  case DURO_E_DUPLICATE_IN_BATCH:
  case DURO_E_INVALID_MESSAGE:
    return 400;
  /* A full disk or a failing write: nothing was done, and the engine
   * retries its own writes; the client should too (Retry-After). */
  case DURO_E_FLOW_REJECTED:
    return 429;
  case DURO_E_STORAGE:
  case DURO_E_HOST_UNAVAILABLE:
  case DURO_E_SHUTDOWN:
  case DURO_E_OVERLOADED:
    return 503;
  default:
    return 500;
  }
}

/* An engine error, with the names involved in the message.  A storage
 * error also says why writes fail (a database deleted under the host
 * names its file): a client can tell a full disk from a lost file. */
int send_engine_error(http_exchange *x, int rc, const char *wf,
                      const char *id) {
  if (rc == DURO_E_WORKFLOW_NOT_FOUND)
    return send_error(x, 404, duro_err_name(rc), "no workflow named \"%s\"",
                      wf);
  char why[300] = "";
  duro_status now;
  if (rc == DURO_E_STORAGE && x->s->engine &&
      duro_engine_storage_error(x->s->engine, why + 2, sizeof why - 2))
    memcpy(why, ": ", 2);
  else if ((rc == DURO_E_CANNOT_TERMINATE || rc == DURO_E_CANNOT_PAUSE ||
            rc == DURO_E_CANNOT_RESUME || rc == DURO_E_CANNOT_RESTART) &&
           id && x->s->engine &&
           duro_instance_status(x->s->engine, wf, id, &now) == 0)
    /* the reason a newcomer looks for next */
    snprintf(why, sizeof why, ": it is %s", duro_status_name(now));
  if (id && rc != DURO_E_INVALID_ID)
    return send_error(x, status_of(rc), duro_err_name(rc), "%s: %s/%s%s",
                      duro_err_str(rc), wf, id, why);
  return send_error(x, status_of(rc), duro_err_name(rc), "%s%s",
                    duro_err_str(rc), why);
}

/* ---- request parsing -------------------------------------------------------
 */

int method_is(const http_exchange *x, const char *m) {
  return strcmp(x->rq.method, m) == 0;
}

/* Splits the path into at most MAX_SEGMENTS segments (owned by the
 * request).  Returns the count, or -1 when there are more. */
int split_path(http_exchange *x, char **seg) {
  free(x->rq.segments);
  x->rq.segments = xstrdup(x->rq.path);
  int n = 0;
  char *save = NULL;
  for (char *t = strtok_r(x->rq.segments, "/", &save); t;
       t = strtok_r(NULL, "/", &save)) {
    if (n == MAX_SEGMENTS)
      return -1;
    seg[n++] = t;
  }
  return n;
}

/* The value of `key` in the query string (owned by the request), or
 * NULL. */
const char *query_param(http_exchange *x, const char *key) {
  return query_param_nth(x, key, 0);
}

const char *query_param_nth(http_exchange *x, const char *key, size_t nth) {
  http_request *rq = &x->rq;
  if (!rq->query || rq->n_params == sizeof rq->params / sizeof *rq->params)
    return NULL;
  const char *q = rq->query;
  size_t len = strlen(q);
  size_t klen = strlen(key);
  while (len > 0) {
    const char *amp = memchr(q, '&', len);
    size_t part = amp ? (size_t)(amp - q) : len;
    if (part > klen && q[klen] == '=' && memcmp(q, key, klen) == 0 &&
        nth-- == 0) {
      /* percent-escapes decoded; one that is malformed or decodes to a
       * NUL is kept as sent (the route refuses it as it stands) */
      char *value = g_uri_unescape_segment(q + klen + 1, q + part, "");
      char *kept =
          value ? xstrdup(value) : xstrndup(q + klen + 1, part - klen - 1);
      g_free(value);
      return rq->params[rq->n_params++] = kept;
    }
    if (!amp)
      break;
    len -= part + 1;
    q = amp + 1;
  }
  return NULL;
}

/* Parses the body as JSON.  An empty body is `empty` (may be NULL = an
 * error).  On failure sends 400 and returns NULL. */
json_t *parse_body(http_exchange *x, json_t *empty, int *sent) {
  *sent = 0;
  if (!x->rq.body || x->rq.body_len == 0) {
    if (empty)
      return empty;
    *sent = 1;
    send_error(x, 400, "request.invalid_json", "a JSON body is required");
    return NULL;
  }
  json_decref(empty);
  json_error_t jerr;
  json_t *v = json_loadb(x->rq.body, x->rq.body_len,
                         JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
  if (!v) {
    *sent = 1;
    send_error(x, 400, "request.invalid_json",
               "the body is not valid JSON: %s at line %d, column %d",
               jerr.text, jerr.line, jerr.column);
  }
  return v;
}

int name_valid(const char *s) { return duro_instance_id_valid(s); }

int wrong_method(http_exchange *x, const char *allowed) {
  x->rs.allow = allowed;
  return send_error(x, 405, "request.method_not_allowed",
                    "%s is not allowed here; use %s", x->rq.method, allowed);
}

/* ---- H2O's own refusals as JSON -------------------------------------------
 */

/* H2O answers some requests itself before any handler runs (a
 * Content-Length over the limit, broken chunked encoding, an unknown
 * Expect, a path outside "/"), in text/plain.  A filter on the host's
 * fallback path, which those answers go through, rewrites them as our
 * {"error":{"code","message"}}. */
typedef struct json_filter {
  h2o_filter_t super;
  http_server *server;
} json_filter;

typedef struct json_ostream {
  h2o_ostream_t super;
  http_server *server;
} json_ostream;

static void json_error_send(h2o_ostream_t *self, h2o_req_t *req,
                            h2o_iovec_t *bufs, size_t bufcnt,
                            h2o_send_state_t state) {
  http_server *s = ((json_ostream *)self)->server;
  if (bufcnt == 0) {
    h2o_ostream_send_next(self, req, bufs, bufcnt, state);
    return;
  }
  int st = req->res.status;
  const char *code = st == 413   ? "request.too_large"
                     : st == 404 ? "route.not_found"
                                 : "request.invalid";
  char *msg = st == 413 ? xasprintf("the body is over the limit of %zu bytes",
                                    s->max_body)
                        : xasprintf("%.*s", (int)bufs[0].len, bufs[0].base);
  char *text = error_text(code, msg);
  free(msg);
  h2o_iovec_t body = h2o_strdup(&req->pool, text, strlen(text));
  free(text);
  req->res.content_length = body.len; /* headers are not written yet */
  h2o_ostream_send_next(self, req, &body, 1, state);
}

static void on_setup_json_errors(h2o_filter_t *self, h2o_req_t *req,
                                 h2o_ostream_t **slot) {
  ssize_t i = h2o_find_header(&req->res.headers, H2O_TOKEN_CONTENT_TYPE, -1);
  if (req->res.status >= 400 && i >= 0) {
    req->res.headers.entries[i].value =
        h2o_iovec_init(H2O_STRLIT("application/json"));
    json_ostream *o = (json_ostream *)h2o_add_ostream(req, sizeof *o, slot);
    o->super.do_send = json_error_send;
    o->server = ((json_filter *)self)->server;
    slot = &o->super.next;
  }
  h2o_setup_next_ostream(req, slot);
}

/* Our JSON errors in place of H2O's text/plain ones, for requests no
 * route answered (on the host's fallback path). */
void http_json_errors(http_server *s, h2o_hostconf_t *host) {
  json_filter *f =
      (json_filter *)h2o_create_filter(&host->fallback_path, sizeof *f);
  f->super.on_setup_ostream = on_setup_json_errors;
  f->server = s;
}
