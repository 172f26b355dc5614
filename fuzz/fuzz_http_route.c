/* fuzz_http_route.c — libFuzzer target for the JSON bodies and queries of
 * every route.
 *
 * The first byte of an input picks a route and the second an instance id
 * and event type; the rest is the body (or the query, or the path), so the
 * fuzzer spends its time in the routes' JSON handling rather than in
 * finding the paths.  Answers must be a status and a JSON body (Prometheus
 * text for /metrics). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "http_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const ids[] = {"a", "b", "c", "w1", "w2", "batch", "x.y"};
static const char *const types[] = {"go", "other", "go.2"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  http_server *s = fuzz_http_server(NULL);
  unsigned route = data[0] % 15, pick = data[1];
  const char *rest = (const char *)data + 2;
  size_t rest_len = size - 2;
  const char *wf = pick & 0x80 ? "waiter" : "wf";
  const char *id = ids[pick % (sizeof ids / sizeof *ids)];
  const char *type = types[(pick >> 4) % (sizeof types / sizeof *types)];
  char path[256];
  http_input in = {.method = "POST", .body = rest, .body_len = rest_len};
  switch (route) {
  case 0:
  case 1:
    snprintf(path, sizeof path, "/workflows/%s/instances", wf);
    break;
  case 2:
    snprintf(path, sizeof path, "/workflows/%s/instances/batch", wf);
    break;
  case 3:
  case 4:
    in.method = "PATCH";
    snprintf(path, sizeof path, "/workflows/%s/instances/%s/status", wf, id);
    break;
  case 5:
    snprintf(path, sizeof path, "/workflows/%s/instances/%s/events/%s", wf, id,
             type);
    break;
  case 6: /* the query of a list */
    in.method = "GET";
    snprintf(path, sizeof path, "/workflows/%s/instances", wf);
    in.query = rest;
    in.query_len = rest_len;
    in.body = NULL;
    in.body_len = 0;
    break;
  case 7:
    in.method = "GET";
    snprintf(path, sizeof path, "/workflows/%s/instances/%s", wf, id);
    in.body = NULL;
    in.body_len = 0;
    break;
  case 8:
    in.method = "GET";
    snprintf(path, sizeof path, "/%s", pick & 1 ? "healthz" : "metrics");
    break;
  case 9: /* ?wait= and the other queries of one instance */
    in.method = "GET";
    snprintf(path, sizeof path, "/workflows/%s/instances/%s", wf, id);
    in.query = rest;
    in.query_len = rest_len;
    in.body = NULL;
    in.body_len = 0;
    break;
  case 10: /* the cron routes: /__scheduled?cron=..., /crons */
    in.method = pick & 1 ? "GET" : "POST";
    snprintf(path, sizeof path, "/%s", pick & 2 ? "crons" : "__scheduled");
    in.query = rest;
    in.query_len = rest_len;
    in.body = NULL;
    in.body_len = 0;
    break;
  case 11: /* the queue routes' bodies */
    snprintf(path, sizeof path, "/queues/q/messages%s",
             pick & 1   ? ""
             : pick & 2 ? "/batch"
             : pick & 4 ? "/pull"
                        : "/ack");
    break;
  default: /* the path itself, with any method */
    in.method = pick & 1 ? "GET" : pick & 2 ? "PATCH" : "POST";
    break;
  }
  if (route <= 11) {
    in.path = path;
    in.path_len = strlen(path);
  } else {
    in.path = rest;
    in.path_len = rest_len;
    in.body = NULL;
    in.body_len = 0;
  }
  in.method_len = strlen(in.method);
  http_output out;
  http_serve(s, &in, &out);
  if (out.status < 200 || out.status > 599 || !out.body)
    __builtin_trap();
  if (!strcmp(out.content_type, "application/json")) {
    json_t *v = json_loadb(out.body, out.len, JSON_DECODE_ANY, NULL);
    if (!v)
      __builtin_trap(); /* every JSON answer parses */
    if (out.status >= 400 &&
        !json_is_string(json_object_get(json_object_get(v, "error"), "code")))
      __builtin_trap(); /* every error is {"error":{"code",...}} */
    json_decref(v);
  }
  http_output_free(&out);
  fuzz_http_settle();
  return 0;
}
