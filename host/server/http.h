/* http.h — the HTTP JSON control plane, served by H2O on the host's libuv
 * loop, and the same routing without sockets for fuzz targets and tests. */
#ifndef DURO_HTTP_H
#define DURO_HTTP_H

#include <stddef.h>
#include <uv.h>

#include "config.h"
#include "engine.h"

typedef struct http_server http_server;

/* Checks the http section without binding: refuses an address that is
 * not host:port, a non-loopback address without a token unless
 * http.allow_insecure, a key's token_env naming an unset variable, and
 * http.tls files that do not load. */
int http_check(const config *cfg, char *err, size_t errlen);

/* Binds and listens on cfg->http.listen (after http_check's checks) with
 * plain sockets: the supervisor does it once, and every engine process it
 * starts serves the same socket (connections wait in its backlog while an
 * engine restarts).  A port in use is asked for again for up to 3 s:
 * a host killed a moment ago may hold it still (its engine dies after its
 * supervisor).  *fd_out is close-on-exec. */
int http_bind(const config *cfg, int *fd_out, char *err, size_t errlen);

/* Serves HTTP on listen_fd (from http_bind), or, when it is -1, binds
 * cfg->http.listen itself (after http_check's checks).  `e` may be
 * NULL and attached later with http_attach, before the loop runs: no
 * request is read until then.  On error returns non-zero with a message
 * in err (and *out, if set, is freed with http_free after the loop ran). */
int http_start(uv_loop_t *loop, duro_engine *e, const config *cfg,
               int listen_fd, http_server **out, char *err, size_t errlen);
void http_attach(http_server *s, duro_engine *e);
/* Serves GET /plugins and POST /plugins[/{name}]/reload from `plugins`. */
struct reloader;
void http_attach_plugins(http_server *s, struct reloader *plugins);
/* The crash-storm breaker (breaker.h), borrowed: POST
 * /plugins/{name}/resume, and the holds in GET /plugins and /metrics. */
struct breaker;
void http_attach_breaker(http_server *s, struct breaker *breaker);

/* Requests handed to the thread pool and not yet answered: the host runs
 * the loop until this is 0 before it closes the engine. */
size_t http_in_flight(const http_server *s);

/* The port actually bound (useful with "127.0.0.1:0"). */
int http_port(const http_server *s);

/* The bytes of requests a server may hold at once, over every connection
 * (heads, bodies being received, bodies copied for the routes): past it
 * reads are refused and new requests answered 503. */
size_t http_budget(const http_server *s);

/* Stops accepting connections and answers requests still arriving on open
 * ones with 503.  Call before the loop's handles are closed; free with
 * http_free after the loop has run them down. */
void http_stop(http_server *s);

/* SIGHUP: http.tls's files read again, for the connections accepted from
 * now on; files that do not load leave the certificate served as it is,
 * logged.  Nothing without http.tls.  On the loop. */
void http_reload_tls(http_server *s);
void http_free(http_server *s);

/* ---- one request without sockets ------------------------------------------
 *
 * What a connection hands the routes, and what they answer, for the fuzz
 * targets and the tests: http_serve() is the path of a request read from a
 * socket from the point H2O has parsed it, with the same refusals and the
 * same routes, run on the calling thread. */

typedef struct http_header {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
} http_header;

/* The most headers a request may have (H2O's own limit). */
#define HTTP_MAX_HEADERS 100

typedef struct http_input {
  const char *method;
  size_t method_len;
  const char *path; /* percent-decoded and normalized, without the query;
                       may hold NUL bytes (from %00) */
  size_t path_len;
  const char *query; /* after '?', as sent; NULL: none */
  size_t query_len;
  const http_header *headers; /* as sent, all of them, in order */
  size_t n_headers;
  const char *body; /* NULL: none */
  size_t body_len;
} http_input;

typedef struct http_output {
  int status;
  const char *content_type; /* static */
  const char *allow;        /* static; the Allow header of a 405 */
  int retry_after;          /* seconds; the Retry-After header of a 503 */
  int close;                /* the connection closes after this answer */
  char *body;               /* malloc'ed */
  size_t len;
} http_output;

/* A server that never listens: it routes what http_serve hands it to `e`,
 * requires `token` (NULL: none) and refuses bodies over max_body.  Free
 * it with http_free. */
http_server *http_server_new(duro_engine *e, const char *token,
                             size_t max_body);

/* Answers `in` as a served connection would. */
void http_serve(http_server *s, const http_input *in, http_output *out);
void http_output_free(http_output *out);

/* Parses the HTTP/1 request head at the start of buf[0, len) the way the
 * server does (H2O's parser, then H2O's path normalization) into *in,
 * with its headers in hdrs[HTTP_MAX_HEADERS].  in->path is malloc'ed
 * (*path_out; free it); in->body is left NULL.  Returns the length of the
 * head, -2 when it is incomplete, -1 when it is malformed. */
int http_parse_head(const char *buf, size_t len, http_input *in,
                    http_header *hdrs, char **path_out);

#endif
