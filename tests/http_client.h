/* http_client.h — well-formed HTTP requests to a `duro run` under test, and
 * reading the JSON of its replies.
 *
 * The suites that talk to a real host's control plane (test_http, test_cli,
 * test_faults, test_reload, and chaos.c) send their requests through
 * libcurl on loopback and look into the JSON bodies by dotted paths.  This
 * module holds what they share:
 *
 *  - http_send(): one request to 127.0.0.1:PORT, the reply's status,
 *    headers, body and the body parsed, in an http_resp;
 *  - jget(), jstr(), jdump(), step_of(): a JSON value by dotted path, as a
 *    string, as text, and a step of an instance's description;
 *  - http_suite_run(): a suite's main with libcurl set up around the run.
 *
 * http_send() reports a request that got no answer instead of failing the
 * case: test_faults asks again while an engine restarts, the other suites
 * assert an answer with their own message. */
#ifndef DURO_TEST_HTTP_CLIENT_H
#define DURO_TEST_HTTP_CLIENT_H

#include <check.h>
#include <curl/curl.h>
#include <jansson.h>
#include <stddef.h>

/* A reply.  Free it with http_resp_free(). */
typedef struct http_resp {
  long status;
  char *body; /* NUL-terminated, NULL when the reply had none */
  size_t len;
  char headers[8192]; /* the header lines as received, cut at the size */
  size_t hlen;
  json_t *json; /* the body parsed (any JSON value), or NULL */
} http_resp;

/* A request.  Every one carries a Content-Type (application/json unless
 * content_type says another) and no "Expect: 100-continue". */
typedef struct http_req {
  const char *method;       /* sent as given, also a GET with a body */
  const char *path;         /* "/healthz", with any query */
  const char *body;         /* NULL: none (a POST then sends an empty one) */
  size_t body_len;          /* bytes of body; 0: strlen(body) */
  const char *auth;         /* the Authorization header's value, NULL: none */
  const char *content_type; /* NULL: "application/json" */
  const char *header;       /* one more header line ("Name: value"), or NULL */
  long timeout_ms;          /* for the whole exchange; 0: 15 s */
  /* Non-zero outside a Check test case (tests/chaos.c): no assertion runs,
   * not even one that holds, for Check ends a process that makes one
   * without a test case around it; no curl handle is CURLE_FAILED_INIT,
   * a body that does not fit in memory a failed transfer. */
  int unchecked;
} http_req;

/* Sends `q` to 127.0.0.1:`port` and fills *r.  Returns CURLE_OK when an
 * answer came; otherwise curl's error (refused, reset, timed out) with *r
 * empty. */
CURLcode http_send(int port, const http_req *q, http_resp *r);

void http_resp_free(http_resp *r);

/* The value of header `name` (any case) in r, copied into out, or NULL. */
const char *http_resp_header(const http_resp *r, const char *name, char *out,
                             size_t len);

/* The member at a dotted path ("error.code", "steps"), borrowed; NULL when
 * a member on the way is missing. */
json_t *jget(json_t *v, const char *path);

/* The string at a dotted path, "" when it is missing or not a string. */
const char *jstr(json_t *v, const char *path);

/* `v` as compact JSON text, "(null)" for NULL (free it). */
char *jdump(json_t *v);

/* The step with key `key` ("charge card#1") in an instance's description,
 * borrowed (NULL: none). */
json_t *step_of(json_t *d, const char *key);

/* A suite's whole main: ignores SIGPIPE (a host that goes away while a
 * request is being written must not end the run), sets libcurl up, runs
 * the suite (suite_run.h) and cleans libcurl up.  Returns main's exit
 * code. */
int http_suite_run(Suite *s);

#endif
