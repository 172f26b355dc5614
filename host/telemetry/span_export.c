/* span_export.c — a batch of span records made OTLP JSON and posted to
 * the collector's /v1/traces (OTLP/HTTP's JSON encoding: trace and span
 * ids in hex, times as decimal strings of nanoseconds).  JSON because
 * the host already speaks it with jansson, a collector takes it as it
 * takes protobuf, and a test reads it without a generated decoder.
 *
 * Records of steps carry only their instance's rowid: the instance is
 * named from the journal, once, and kept in a small cache. */
#include <curl/curl.h>
#include <glib.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "duro_config.h"
#include "telemetry_internal.h"
#include "trace_ids.h"
#include "util.h"

#define NAMES_MAX 10000 /* instances named at most before the cache empties */
#define POST_TIMEOUT_MS 5000

typedef struct named {
  char *workflow, *id;
  int64_t created_ms;
  char *traceparent;
} named;

static GHashTable *names; /* rowid -> named; the exporter's thread only */

static void named_free(gpointer p) {
  named *n = p;
  free(n->workflow);
  free(n->id);
  free(n->traceparent);
  free(n);
}

/* Fills r's workflow, id and creation from its rowid; 0, or -1 when the
 * instance is gone (its spans with it). */
static int name_instance(telemetry *t, span_rec *r) {
  if (r->workflow && r->id && r->created_ms != JOURNAL_NONE)
    return 0;
  if (!names)
    names =
        g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, named_free);
  named *n = g_hash_table_lookup(names, &r->rowid);
  if (!n) {
    journal_instance in = {0};
    if (journal_instance_get_rowid(engine_journal(t->e), r->rowid, &in))
      return -1;
    if (g_hash_table_size(names) >= NAMES_MAX)
      g_hash_table_remove_all(names);
    n = xcalloc(1, sizeof *n);
    *n = (named){xstrdup(in.workflow), xstrdup(in.id), in.created_ms,
                 in.traceparent ? xstrdup(in.traceparent) : NULL};
    journal_instance_clear(&in);
    gint64 *k = g_new(gint64, 1);
    *k = r->rowid;
    g_hash_table_insert(names, k, n);
  }
  free(r->workflow);
  free(r->id);
  r->workflow = xstrdup(n->workflow);
  r->id = xstrdup(n->id);
  r->created_ms = n->created_ms;
  free(r->traceparent);
  r->traceparent = n->traceparent ? xstrdup(n->traceparent) : NULL;
  return 0;
}

void duro_telemetry_trace_id(const char *workflow, const char *id,
                             int64_t created_ms, char trace[33],
                             char span[17]) {
  trace_of t;
  trace_of_instance(workflow, id, created_ms, NULL, &t);
  memcpy(trace, t.trace, 33);
  memcpy(span, t.root, 17);
}

static json_t *attr_str(const char *key, const char *v) {
  return json_pack("{s:s, s:{s:s}}", "key", key, "value", "stringValue",
                   v ? v : "");
}

static json_t *attr_int(const char *key, int64_t v) {
  char num[32];
  snprintf(num, sizeof num, "%" PRId64, v);
  return json_pack("{s:s, s:{s:s}}", "key", key, "value", "intValue", num);
}

static json_t *nanos(int64_t ms) {
  char num[32];
  snprintf(num, sizeof num, "%" PRId64 "000000", ms > 0 ? ms : 0);
  return json_string(num);
}

/* The error's message ({"name","message"} text, or the text). */
static char *error_message(const char *error) {
  json_t *v = json_loads(error, 0, NULL);
  const char *name = json_string_value(json_object_get(v, "name"));
  const char *msg = json_string_value(json_object_get(v, "message"));
  char *out = v && (name || msg)
                  ? xasprintf("%s: %s", name ? name : "Error", msg ? msg : "")
                  : xstrdup(error);
  json_decref(v);
  return out;
}

/* OTLP's SpanKind */
enum { KIND_INTERNAL = 1, KIND_CONSUMER = 5 };

static json_t *link_json(const char *trace, const char *span) {
  return json_pack("{s:s, s:s}", "traceId", trace, "spanId", span);
}

/* The span of a queue delivery or a cron tick: a trace of its own, with
 * a link to each instance it started. */
static json_t *started_json(const span_rec *r) {
  int tick = r->kind == SPAN_TICK;
  json_t *attrs = json_array(), *links = json_array();
  json_array_append_new(
      attrs, attr_str(tick ? "duro.cron" : "duro.queue", r->subject));
  json_array_append_new(
      attrs,
      attr_int(tick ? "duro.cron.tick_ms" : "duro.queue.messages", r->count));
  for (size_t i = 0; i < r->n_links; i++)
    json_array_append_new(links,
                          link_json(r->links[i].trace, r->links[i].span));
  char *name = xasprintf("%s %s", tick ? "cron" : "queue", r->subject);
  json_t *s =
      json_pack("{s:s, s:s, s:s, s:i, s:o, s:o, s:o, s:o, s:{s:i}}", "traceId",
                r->self.trace, "spanId", r->self.span, "name", name, "kind",
                tick ? KIND_INTERNAL : KIND_CONSUMER, "startTimeUnixNano",
                nanos(r->start_ms), "endTimeUnixNano", nanos(r->end_ms),
                "attributes", attrs, "links", links, "status", "code", 1);
  free(name);
  return s;
}

static json_t *span_json(const span_rec *r, const trace_of *t) {
  char sid[17];
  const char *span_id = t->root;
  if (r->kind != SPAN_INSTANCE) {
    trace_step_span(r->workflow, r->id, r->created_ms, r->key, r->attempt, sid);
    span_id = sid;
  }
  const char *name = r->kind == SPAN_INSTANCE ? r->workflow : r->name;
  json_t *attrs = json_array();
  json_array_append_new(attrs, attr_str("duro.workflow", r->workflow));
  json_array_append_new(attrs, attr_str("duro.instance", r->id));
  if (r->kind == SPAN_INSTANCE) {
    json_array_append_new(attrs, attr_str("duro.status", r->status));
  } else if (r->kind == SPAN_EVENT) {
    json_array_append_new(attrs, attr_int("duro.event.seq", r->attempt));
  } else {
    json_array_append_new(attrs, attr_str("duro.step", r->key));
    if (r->step_kind)
      json_array_append_new(attrs, attr_str("duro.step.kind", r->step_kind));
    if (r->kind == SPAN_ATTEMPT)
      json_array_append_new(attrs, attr_int("duro.attempt", r->attempt));
    if (r->build)
      json_array_append_new(attrs, attr_str("duro.build", r->build));
    json_array_append_new(attrs,
                          attr_str("duro.outcome", r->error ? "error" : "ok"));
  }
  json_t *status = json_pack("{s:i}", "code", r->error ? 2 : 1);
  if (r->error) {
    char *msg = error_message(r->error);
    json_object_set_new(status, "message", json_string(msg));
    free(msg);
  }
  json_t *s = json_pack(
      "{s:s, s:s, s:s, s:i, s:o, s:o, s:o, s:o}", "traceId", t->trace, "spanId",
      span_id, "name", name ? name : (r->key ? r->key : "step"), "kind",
      r->kind == SPAN_EVENT ? KIND_CONSUMER : KIND_INTERNAL,
      "startTimeUnixNano", nanos(r->start_ms), "endTimeUnixNano",
      nanos(r->end_ms), "attributes", attrs, "status", status);
  if (r->kind != SPAN_INSTANCE)
    json_object_set_new(s, "parentSpanId", json_string(t->root));
  else if (t->parent[0]) /* its creator's span */
    json_object_set_new(s, "parentSpanId", json_string(t->parent));
  trace_parent from;
  if (r->kind == SPAN_EVENT && traceparent_parse(r->sender, &from))
    json_object_set_new(s, "links",
                        json_pack("[o]", link_json(from.trace, from.span)));
  return s;
}

static size_t discard(char *p, size_t size, size_t n, void *ctx) {
  (void)p, (void)ctx;
  return size * n;
}

/* POSTs body to the collector; 0, or -1 with why. */
static int post(const telemetry *t, const char *body, char *err,
                size_t errlen) {
  CURL *c = curl_easy_init();
  if (!c) {
    snprintf(err, errlen, "libcurl: no handle");
    return -1;
  }
  char *url = xasprintf("%s/v1/traces", t->endpoint);
  struct curl_slist *h =
      curl_slist_append(NULL, "Content-Type: application/json");
  h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)POST_TIMEOUT_MS);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
  CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  int bad = rc != CURLE_OK || status < 200 || status >= 300;
  if (rc != CURLE_OK)
    snprintf(err, errlen, "%s: %s", url, curl_easy_strerror(rc));
  else if (bad)
    snprintf(err, errlen, "%s answered %ld", url, status);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  free(url);
  return bad ? -1 : 0;
}

int span_export(telemetry *t, span_rec *v, size_t n, char *err, size_t errlen) {
  json_t *spans = json_array();
  for (size_t i = 0; i < n; i++) {
    if (v[i].kind == SPAN_QUEUE || v[i].kind == SPAN_TICK) {
      if (trace_sampled(v[i].self.trace, t->sample))
        json_array_append_new(spans, started_json(&v[i]));
      continue;
    }
    if (name_instance(t, &v[i]) != 0)
      continue; /* the instance is gone: so is its trace */
    trace_of tr;
    trace_of_instance(v[i].workflow, v[i].id, v[i].created_ms, v[i].traceparent,
                      &tr);
    /* a caller's decision holds for its whole trace (W3C's sampled flag) */
    if (tr.sampled >= 0 ? tr.sampled : trace_sampled(tr.trace, t->sample))
      json_array_append_new(spans, span_json(&v[i], &tr));
  }
  if (json_array_size(spans) == 0) {
    json_decref(spans);
    return 0;
  }
  json_t *doc = json_pack(
      "{s:[{s:{s:[o]}, s:[{s:{s:s, s:s}, s:o}]}]}", "resourceSpans", "resource",
      "attributes", attr_str("service.name", t->service), "scopeSpans", "scope",
      "name", "duro", "version", DURO_VERSION, "spans", spans);
  char *body = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  int rc = body ? post(t, body, err, errlen) : -1;
  free(body);
  return rc;
}
