/* route_health.c — what the host says of itself: GET /healthz (200
 * while it serves; "degraded" names hung attempts), GET /metrics (the
 * engine's counters, each plugin build's pinned instances, and the
 * listener's own: requests by method, waiting GETs, the bytes against
 * each budget) and GET /metrics/history (the engine's counters per 10 s
 * over the last 10 minutes), and GET /hosts (the hosts sharing its store).
 * health_count_request is the loop's side of the request counters. */
#include "http_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "view_health.h"
#include "view_hosts.h"
#include "view_metrics.h"

/* Appends one line to *text (malloc'ed; replaced). */
static char *append(char *text, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static char *append(char *text, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *line = xvasprintf(fmt, ap);
  va_end(ap);
  char *out = xasprintf("%s%s", text, line);
  free(line);
  free(text);
  return out;
}

/* The crash-storm breaker's view of each build, and the instances its
 * holds keep waiting. */
static char *build_gauges(char *text, const json_t *list) {
  size_t i, k;
  const char *wf;
  json_t *p, *b, *n;
  text = append(text, "# HELP duro_plugin_build_crashes Crashes of each "
                      "loaded build within its plugin's crash_storm "
                      "window.\n"
                      "# TYPE duro_plugin_build_crashes gauge\n");
  json_array_foreach(json_object_get(list, "plugins"), i, p)
      json_array_foreach(json_object_get(p, "builds"), k, b) text =
          append(text,
                 "duro_plugin_build_crashes{plugin=\"%s\",build=\"%s\"} "
                 "%" JSON_INTEGER_FORMAT "\n",
                 json_string_value(json_object_get(p, "name")),
                 json_string_value(json_object_get(b, "build")),
                 json_integer_value(json_object_get(b, "crashes")));
  text = append(text, "# HELP duro_plugin_build_held 1 while the crash-storm "
                      "breaker holds the build.\n"
                      "# TYPE duro_plugin_build_held gauge\n");
  json_array_foreach(json_object_get(list, "plugins"), i, p)
      json_array_foreach(json_object_get(p, "builds"), k, b) text =
          append(text,
                 "duro_plugin_build_held{plugin=\"%s\",build=\"%s\"} %d\n",
                 json_string_value(json_object_get(p, "name")),
                 json_string_value(json_object_get(b, "build")),
                 json_object_get(b, "held") != NULL);
  text = append(text, "# HELP duro_instances_held Instances waiting because "
                      "their build is held (reason build.crashing).\n"
                      "# TYPE duro_instances_held gauge\n");
  json_object_foreach(json_object_get(list, "held_instances"), wf, n) text =
      append(text,
             "duro_instances_held{workflow=\"%s\",reason=\"build.crashing\"} "
             "%" JSON_INTEGER_FORMAT "\n",
             wf, json_integer_value(n));
  return text;
}

/* Each loaded plugin build, with the instances pinned to it. */
static char *plugin_metrics(http_server *s) {
  if (!s->plugins)
    return xstrdup("");
  json_t *list = plugins_list(s);
  char *text = xstrdup("# HELP duro_plugin_build_instances Instances that "
                       "have not ended, pinned to each loaded build.\n"
                       "# TYPE duro_plugin_build_instances gauge\n");
  size_t i, k;
  json_t *p, *b;
  json_array_foreach(json_object_get(list, "plugins"), i, p) {
    json_array_foreach(json_object_get(p, "builds"), k, b) {
      char *line =
          xasprintf("%sduro_plugin_build_instances{plugin=\"%s\",build=\"%s\","
                    "newest=\"%d\"} %" JSON_INTEGER_FORMAT "\n",
                    text, json_string_value(json_object_get(p, "name")),
                    json_string_value(json_object_get(b, "build")),
                    json_is_true(json_object_get(b, "newest")),
                    json_integer_value(json_object_get(b, "instances")));
      free(text);
      text = line;
    }
  }
  text = build_gauges(text, list);
  json_decref(list);
  return text;
}

/* The listener's own gauges, as the loop last published them. */
enum { REQ_GET, REQ_POST, REQ_PATCH, REQ_OTHER };

void health_count_request(http_server *s, const h2o_req_t *req) {
  static const char *const names[] = {"GET", "POST", "PATCH"};
  int m = REQ_OTHER;
  for (int i = 0; i < REQ_OTHER; i++)
    if (h2o_memis(req->method.base, req->method.len, names[i],
                  strlen(names[i])))
      m = i;
  __atomic_fetch_add(&s->requests[m], 1, __ATOMIC_RELAXED);
}

static uint64_t requests_of(http_server *s, int m) {
  return __atomic_load_n(&s->requests[m], __ATOMIC_RELAXED);
}

static char *http_metrics(http_server *s) {
  return xasprintf(
      "# HELP duro_http_requests_total Requests received (past the token "
      "check), by method.\n"
      "# TYPE duro_http_requests_total counter\n"
      "duro_http_requests_total{method=\"GET\"} %" PRIu64 "\n"
      "duro_http_requests_total{method=\"POST\"} %" PRIu64 "\n"
      "duro_http_requests_total{method=\"PATCH\"} %" PRIu64 "\n"
      "duro_http_requests_total{method=\"other\"} %" PRIu64 "\n"
      "# HELP duro_http_waiting GETs ?wait= waiting for their instance to "
      "end.\n"
      "# TYPE duro_http_waiting gauge\n"
      "duro_http_waiting %zu\n"
      "# HELP duro_http_waiting_bytes Bytes the waiting GETs' connections "
      "hold (their own budget).\n"
      "# TYPE duro_http_waiting_bytes gauge\n"
      "duro_http_waiting_bytes %zu\n"
      "# HELP duro_http_request_bytes Bytes of requests being received, "
      "against the request budget.\n"
      "# TYPE duro_http_request_bytes gauge\n"
      "duro_http_request_bytes %zu\n"
      "# HELP duro_http_budget_bytes Each of the two budgets, in bytes.\n"
      "# TYPE duro_http_budget_bytes gauge\n"
      "duro_http_budget_bytes %zu\n",
      requests_of(s, REQ_GET), requests_of(s, REQ_POST),
      requests_of(s, REQ_PATCH), requests_of(s, REQ_OTHER),
      __atomic_load_n(&s->shown_parked, __ATOMIC_RELAXED),
      __atomic_load_n(&s->shown_parked_bytes, __ATOMIC_RELAXED),
      __atomic_load_n(&s->shown_bytes, __ATOMIC_RELAXED),
      s->budget == SIZE_MAX ? 0 : s->budget);
}

static int metrics(http_server *s, http_exchange *x) {
  char *engine = duro_engine_metrics(s->engine);
  char *builds = plugin_metrics(s);
  char *own = http_metrics(s);
  char *text = xasprintf("%s%s%s", engine, builds, own);
  free(own);
  send_text(x, 200, "text/plain; version=0.0.4", text, strlen(text));
  free(engine);
  free(builds);
  free(text);
  return 0;
}

int healthz_route(http_server *s, http_exchange *x) {
  return method_is(x, "GET")
             ? send_json(x, 200,
                         keys_filter_health(x, duro_engine_health(s->engine)))
             : wrong_method(x, "GET");
}

int metrics_route(http_server *s, http_exchange *x) {
  return method_is(x, "GET") ? metrics(s, x) : wrong_method(x, "GET");
}

int hosts_route(http_server *s, http_exchange *x) {
  if (!method_is(x, "GET"))
    return wrong_method(x, "GET");
  json_t *out;
  int rc = duro_engine_hosts(s->engine, &out);
  return rc ? send_engine_error(x, rc, NULL, NULL) : send_json(x, 200, out);
}

int history_route(http_server *s, http_exchange *x) {
  return method_is(x, "GET")
             ? send_json(x, 200, duro_engine_metrics_history(s->engine))
             : wrong_method(x, "GET");
}
