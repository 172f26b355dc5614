/* http_fixture.h — the server the HTTP fuzz targets route requests to.
 *
 * One engine per fuzz process, on a database in a temporary directory
 * (removed at exit), with two workflows: "wf", which completes at once,
 * and "waiter", which waits for an event "go" (so pause, resume,
 * terminate, restart and events meet instances in every state).  No
 * worker threads: fuzz_http_settle() runs what the last input made
 * runnable, on the calling thread, so a run is reproducible. */
#ifndef DURO_FUZZ_HTTP_FIXTURE_H
#define DURO_FUZZ_HTTP_FIXTURE_H

#include "http.h"

/* The server, created at the first call; `token` is required of every
 * request (NULL: none).  Every call must pass the same token. */
http_server *fuzz_http_server(const char *token);

/* Runs the activations the last requests queued. */
void fuzz_http_settle(void);

#endif
