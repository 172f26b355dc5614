/* http.h — the HTTP JSON control plane (DESIGN.md §4), served by H2O on
 * the host's libuv loop. */
#ifndef DURO_HTTP_H
#define DURO_HTTP_H

#include <stddef.h>
#include <uv.h>

#include "config.h"
#include "engine.h"

typedef struct http_server http_server;

/* Checks the http section without binding: refuses an address that is
 * not host:port, a non-loopback address without a token unless
 * http.allow_insecure, and a token_env naming an unset variable. */
int http_check(const config *cfg, char *err, size_t errlen);

/* Binds and listens on cfg->http.listen (after http_check's checks) with
 * plain sockets: the supervisor does it once, and every engine process it
 * starts serves the same socket (connections wait in its backlog while an
 * engine restarts).  *fd_out is close-on-exec. */
int http_bind(const config *cfg, int *fd_out, char *err, size_t errlen);

/* Serves HTTP on listen_fd (from http_bind), or, when it is -1, binds
 * cfg->http.listen itself (after http_check's checks).  `e` may be
 * NULL and attached later with http_attach, before the loop runs: no
 * request is read until then.  On error returns non-zero with a message
 * in err (and *out, if set, is freed with http_free after the loop ran). */
int http_start(uv_loop_t *loop, duro_engine *e, const config *cfg,
               int listen_fd, http_server **out, char *err, size_t errlen);
void http_attach(http_server *s, duro_engine *e);

/* Requests handed to the thread pool and not yet answered: the host runs
 * the loop until this is 0 before it closes the engine. */
size_t http_in_flight(const http_server *s);

/* The port actually bound (useful with "127.0.0.1:0"). */
int http_port(const http_server *s);

/* Stops accepting connections.  Call before the loop's handles are
 * closed; free with http_free after the loop has run them down. */
void http_stop(http_server *s);
void http_free(http_server *s);

#endif
