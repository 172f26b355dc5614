/* http.h — the HTTP JSON control plane (DESIGN.md §4), served by H2O on
 * the host's libuv loop. */
#ifndef DURO_HTTP_H
#define DURO_HTTP_H

#include <stddef.h>
#include <uv.h>

#include "config.h"
#include "engine.h"

typedef struct http_server http_server;

/* Listens on cfg->http.listen.  Refuses a non-loopback address without a
 * token unless http.allow_insecure, and a token_env naming an unset
 * variable.  On error returns non-zero with a message in err. */
int http_start(uv_loop_t *loop, duro_engine *e, const config *cfg,
               http_server **out, char *err, size_t errlen);

/* The port actually bound (useful with "127.0.0.1:0"). */
int http_port(const http_server *s);

/* Stops accepting connections.  Call before the loop's handles are
 * closed; free with http_free after the loop has run them down. */
void http_stop(http_server *s);
void http_free(http_server *s);

#endif
