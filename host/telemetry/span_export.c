/* span_export.c — a batch of span records made OTLP JSON and posted to
 * the collector's /v1/traces (OTLP/HTTP's JSON encoding: trace and span
 * ids in hex, times as decimal strings of nanoseconds).  JSON because a
 * collector takes it as it takes protobuf, and a test reads it without a
 * generated decoder.  The body is written straight into one buffer kept
 * from batch to batch (no tree of values), and posted over one libcurl
 * handle kept with it.
 *
 * Records of steps carry only their instance's rowid: the instance is
 * named from the journal, once, and kept in a small cache with its
 * trace's ids. */
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

/* An instance named: who it is and its trace's ids. */
typedef struct named {
  const char *workflow, *id, *traceparent; /* in mem */
  int64_t created_ms;
  int have_tr; /* tr computed (on first use: many are named, fewer traced) */
  trace_of tr;
  char mem[];
} named;

/* A JSON text being written. */
typedef struct jbuf {
  char *p;
  size_t len, cap;
} jbuf;

typedef struct span_exporter {
  GHashTable *names; /* rowid -> named */
  CURL *curl;
  struct curl_slist *headers;
  char *url;
  jbuf body;
} span_exporter;

static span_exporter *exporter_of(telemetry *t) {
  if (!t->x) {
    t->x = xcalloc(1, sizeof *t->x);
    t->x->names =
        g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, free);
  }
  return t->x;
}

void span_export_free(telemetry *t) {
  span_exporter *x = t->x;
  if (!x)
    return;
  g_hash_table_destroy(x->names);
  if (x->curl)
    curl_easy_cleanup(x->curl);
  curl_slist_free_all(x->headers);
  free(x->url);
  free(x->body.p);
  free(x);
  t->x = NULL;
}

/* ---- the JSON writer */

static void jb_need(jbuf *b, size_t more) {
  if (b->len + more <= b->cap)
    return;
  size_t cap = b->cap ? b->cap : 1 << 16;
  while (cap < b->len + more)
    cap *= 2;
  b->p = xrealloc(b->p, cap);
  b->cap = cap;
}

static void jb_raw(jbuf *b, const char *s, size_t n) {
  jb_need(b, n);
  memcpy(b->p + b->len, s, n);
  b->len += n;
}

#define JB_LIT(b, lit) jb_raw(b, lit, sizeof lit - 1)

/* s as a JSON string (NULL: ""), escaped as jansson escapes; -1 when s is
 * not UTF-8 (what jansson refuses: the caller drops what it wrote). */
static int jb_str(jbuf *b, const char *s) {
  if (!s)
    s = "";
  size_t n = strlen(s);
  if (!g_utf8_validate(s, (gssize)n, NULL))
    return -1;
  jb_need(b, n + 2);
  b->p[b->len++] = '"';
  const char *run = s;
  for (const char *c = s; *c; c++) {
    unsigned char u = (unsigned char)*c;
    if (u >= 0x20 && u != '"' && u != '\\')
      continue;
    jb_raw(b, run, (size_t)(c - run));
    run = c + 1;
    char esc[8];
    switch (u) {
    case '"':
      JB_LIT(b, "\\\"");
      break;
    case '\\':
      JB_LIT(b, "\\\\");
      break;
    case '\b':
      JB_LIT(b, "\\b");
      break;
    case '\f':
      JB_LIT(b, "\\f");
      break;
    case '\n':
      JB_LIT(b, "\\n");
      break;
    case '\r':
      JB_LIT(b, "\\r");
      break;
    case '\t':
      JB_LIT(b, "\\t");
      break;
    default:
      snprintf(esc, sizeof esc, "\\u%04X", u);
      jb_raw(b, esc, 6);
    }
  }
  jb_raw(b, run, strlen(run));
  jb_raw(b, "\"", 1);
  return 0;
}

/* The decimal digits of v. */
static void jb_i64(jbuf *b, int64_t v) {
  char num[24], *at = num + sizeof num;
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  do
    *--at = (char)('0' + u % 10);
  while (u /= 10);
  if (v < 0)
    *--at = '-';
  jb_raw(b, at, (size_t)(num + sizeof num - at));
}

/* A time in ms as OTLP's string of nanoseconds (none before the epoch). */
static void jb_nanos(jbuf *b, int64_t ms) {
  jb_raw(b, "\"", 1);
  jb_i64(b, ms > 0 ? ms : 0);
  JB_LIT(b, "000000\"");
}

/* An id known to be hex. */
static void jb_id(jbuf *b, const char *id) {
  jb_raw(b, "\"", 1);
  jb_raw(b, id, strlen(id));
  jb_raw(b, "\"", 1);
}

static int attr_str(jbuf *b, const char *key, const char *v) {
  JB_LIT(b, "{\"key\":");
  if (jb_str(b, key))
    return -1;
  JB_LIT(b, ",\"value\":{\"stringValue\":");
  if (jb_str(b, v))
    return -1;
  JB_LIT(b, "}}");
  return 0;
}

static void attr_int(jbuf *b, const char *key, int64_t v) {
  JB_LIT(b, "{\"key\":");
  jb_str(b, key); /* a literal of ours */
  JB_LIT(b, ",\"value\":{\"intValue\":\"");
  jb_i64(b, v);
  JB_LIT(b, "\"}}");
}

static void link_json(jbuf *b, const char *trace, const char *span) {
  JB_LIT(b, "{\"traceId\":");
  jb_id(b, trace);
  JB_LIT(b, ",\"spanId\":");
  jb_id(b, span);
  JB_LIT(b, "}");
}

/* ---- naming */

/* Instance rowid, named (workflow, id, created_ms, traceparent) into the
 * cache; what it returns holds until the next call that adds one. */
static named *name_keep(span_exporter *x, int64_t rowid, const char *workflow,
                        const char *id, int64_t created_ms,
                        const char *traceparent) {
  if (g_hash_table_size(x->names) >= NAMES_MAX)
    g_hash_table_remove_all(x->names);
  size_t lw = strlen(workflow) + 1, li = strlen(id) + 1,
         lt = traceparent ? strlen(traceparent) + 1 : 0;
  named *n = xmalloc(sizeof *n + lw + li + lt);
  memcpy(n->mem, workflow, lw);
  memcpy(n->mem + lw, id, li);
  n->workflow = n->mem;
  n->id = n->mem + lw;
  n->traceparent = NULL;
  if (lt) {
    memcpy(n->mem + lw + li, traceparent, lt);
    n->traceparent = n->mem + lw + li;
  }
  n->created_ms = created_ms;
  n->have_tr = 0;
  gint64 *k = g_new(gint64, 1);
  *k = rowid;
  g_hash_table_replace(x->names, k, n);
  return n;
}

/* The instance of r from its rowid (the cache, else the journal); NULL
 * when it is gone (its spans with it).  What it returns holds until the
 * next call. */
static named *name_instance(telemetry *t, span_exporter *x, const span_rec *r) {
  named *n = g_hash_table_lookup(x->names, &r->rowid);
  if (n)
    return n;
  journal_instance in = {0};
  if (journal_instance_get_rowid(engine_journal(t->e), r->rowid, &in))
    return NULL;
  n = name_keep(x, r->rowid, in.workflow, in.id, in.created_ms, in.traceparent);
  journal_instance_clear(&in);
  return n;
}

void span_names(telemetry *t, span_slot *v, size_t n) {
  span_exporter *x = exporter_of(t);
  for (size_t i = 0; i < n; i++) {
    span_rec r;
    span_view(&v[i], &r);
    name_keep(x, r.rowid, r.workflow, r.id, r.created_ms, r.traceparent);
    span_slot_clear(&v[i]);
  }
}

void duro_telemetry_trace_id(const char *workflow, const char *id,
                             int64_t created_ms, char trace[33],
                             char span[17]) {
  trace_of t;
  trace_of_instance(workflow, id, created_ms, NULL, &t);
  memcpy(trace, t.trace, 33);
  memcpy(span, t.root, 17);
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

/* The span of a queue delivery or a cron tick: a trace of its own, with
 * a link to each instance it started. */
static int started_json(jbuf *b, const span_rec *r) {
  int tick = r->kind == SPAN_TICK;
  JB_LIT(b, "{\"traceId\":");
  jb_id(b, r->self.trace);
  JB_LIT(b, ",\"spanId\":");
  jb_id(b, r->self.span);
  JB_LIT(b, ",\"name\":");
  char *name = xasprintf("%s %s", tick ? "cron" : "queue", r->subject);
  int bad = jb_str(b, name);
  free(name);
  if (bad)
    return -1;
  JB_LIT(b, ",\"kind\":");
  jb_i64(b, tick ? KIND_INTERNAL : KIND_CONSUMER);
  JB_LIT(b, ",\"startTimeUnixNano\":");
  jb_nanos(b, r->start_ms);
  JB_LIT(b, ",\"endTimeUnixNano\":");
  jb_nanos(b, r->end_ms);
  JB_LIT(b, ",\"attributes\":[");
  if (attr_str(b, tick ? "duro.cron" : "duro.queue", r->subject))
    return -1;
  JB_LIT(b, ",");
  attr_int(b, tick ? "duro.cron.tick_ms" : "duro.queue.messages", r->count);
  JB_LIT(b, "],\"links\":[");
  for (size_t i = 0; i < r->n_links; i++) {
    if (i)
      JB_LIT(b, ",");
    link_json(b, r->links[i].trace, r->links[i].span);
  }
  JB_LIT(b, "],\"status\":{\"code\":1}}");
  return 0;
}

/* The span of r, of instance (workflow, id, created_ms) of trace t. */
static int span_json(jbuf *b, const span_rec *r, const char *workflow,
                     const char *id, int64_t created_ms, const trace_of *t) {
  char sid[17];
  const char *span_id = t->root;
  if (r->kind != SPAN_INSTANCE) {
    trace_step_span(workflow, id, created_ms, r->key, r->attempt, sid);
    span_id = sid;
  }
  const char *name = r->kind == SPAN_INSTANCE ? workflow : r->name;
  JB_LIT(b, "{\"traceId\":");
  jb_id(b, t->trace);
  JB_LIT(b, ",\"spanId\":");
  jb_id(b, span_id);
  JB_LIT(b, ",\"name\":");
  if (jb_str(b, name ? name : (r->key ? r->key : "step")))
    return -1;
  JB_LIT(b, ",\"kind\":");
  jb_i64(b, r->kind == SPAN_EVENT ? KIND_CONSUMER : KIND_INTERNAL);
  JB_LIT(b, ",\"startTimeUnixNano\":");
  jb_nanos(b, r->start_ms);
  JB_LIT(b, ",\"endTimeUnixNano\":");
  jb_nanos(b, r->end_ms);
  JB_LIT(b, ",\"attributes\":[");
  if (attr_str(b, "duro.workflow", workflow))
    return -1;
  JB_LIT(b, ",");
  if (attr_str(b, "duro.instance", id))
    return -1;
  JB_LIT(b, ",");
  int failed = r->error != NULL;
  if (r->kind == SPAN_INSTANCE) {
    if (attr_str(b, "duro.status", r->status))
      return -1;
  } else if (r->kind == SPAN_ACTIVATION) {
    /* not duro.status: that names an instance's root span */
    if (attr_str(b, "duro.instance.status", r->status))
      return -1;
    JB_LIT(b, ",");
    if (attr_str(b, "duro.outcome", r->subject ? r->subject : "ok"))
      return -1;
    if (r->build) {
      JB_LIT(b, ",");
      if (attr_str(b, "duro.build", r->build))
        return -1;
    }
    failed = r->subject && strcmp(r->subject, "ok") != 0;
  } else if (r->kind == SPAN_EVENT) {
    attr_int(b, "duro.event.seq", r->attempt);
  } else {
    if (attr_str(b, "duro.step", r->key))
      return -1;
    if (r->step_kind) {
      JB_LIT(b, ",");
      if (attr_str(b, "duro.step.kind", r->step_kind))
        return -1;
    }
    if (r->kind == SPAN_ATTEMPT) {
      JB_LIT(b, ",");
      attr_int(b, "duro.attempt", r->attempt);
    }
    if (r->build) {
      JB_LIT(b, ",");
      if (attr_str(b, "duro.build", r->build))
        return -1;
    }
    JB_LIT(b, ",");
    attr_str(b, "duro.outcome", r->error ? "error" : "ok");
  }
  JB_LIT(b, "],\"status\":{\"code\":");
  jb_i64(b, failed ? 2 : 1);
  if (r->error) {
    char *msg = error_message(r->error);
    JB_LIT(b, ",\"message\":");
    int bad = jb_str(b, msg);
    free(msg);
    if (bad)
      return -1;
  }
  JB_LIT(b, "}");
  if (r->kind != SPAN_INSTANCE) {
    JB_LIT(b, ",\"parentSpanId\":");
    jb_id(b, t->root);
  } else if (t->parent[0]) { /* its creator's span */
    JB_LIT(b, ",\"parentSpanId\":");
    jb_id(b, t->parent);
  }
  trace_parent from;
  if (r->kind == SPAN_EVENT && traceparent_parse(r->sender, &from)) {
    JB_LIT(b, ",\"links\":[");
    link_json(b, from.trace, from.span);
    JB_LIT(b, "]");
  }
  JB_LIT(b, "}");
  return 0;
}

/* ---- posting */

static size_t discard(char *p, size_t size, size_t n, void *ctx) {
  (void)p, (void)ctx;
  return size * n;
}

/* POSTs x's body to the collector over x's handle (made on first use, its
 * connection kept when the collector keeps it); 0, or -1 with why. */
static int post(const telemetry *t, span_exporter *x, char *err,
                size_t errlen) {
  if (!x->curl) {
    x->curl = curl_easy_init();
    if (!x->curl) {
      snprintf(err, errlen, "libcurl: no handle");
      return -1;
    }
    x->url = xasprintf("%s/v1/traces", t->endpoint);
    x->headers = curl_slist_append(NULL, "Content-Type: application/json");
    /* no 100-continue round trip */
    x->headers = curl_slist_append(x->headers, "Expect:");
    curl_easy_setopt(x->curl, CURLOPT_URL, x->url);
    curl_easy_setopt(x->curl, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(x->curl, CURLOPT_TIMEOUT_MS, (long)POST_TIMEOUT_MS);
    curl_easy_setopt(x->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->curl, CURLOPT_WRITEFUNCTION, discard);
  }
  curl_easy_setopt(x->curl, CURLOPT_POSTFIELDSIZE, (long)x->body.len);
  curl_easy_setopt(x->curl, CURLOPT_POSTFIELDS, x->body.p);
  CURLcode rc = curl_easy_perform(x->curl);
  long status = 0;
  curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
  int bad = rc != CURLE_OK || status < 200 || status >= 300;
  if (rc != CURLE_OK)
    snprintf(err, errlen, "%s: %s", x->url, curl_easy_strerror(rc));
  else if (bad)
    snprintf(err, errlen, "%s answered %ld", x->url, status);
  return bad ? -1 : 0;
}

int span_export(telemetry *t, const span_slot *v, size_t n, char *err,
                size_t errlen) {
  span_exporter *x = exporter_of(t);
  jbuf *b = &x->body;
  b->len = 0;
  JB_LIT(b, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[");
  if (attr_str(b, "service.name", t->service)) {
    snprintf(err, errlen, "the service's name is not UTF-8");
    return -1;
  }
  JB_LIT(b, "]},\"scopeSpans\":[{\"scope\":{\"name\":\"duro\",\"version\":");
  jb_str(b, DURO_VERSION);
  JB_LIT(b, "},\"spans\":[");
  size_t spans = 0;
  for (size_t i = 0; i < n; i++) {
    span_rec view, *r = &view;
    span_view(&v[i], r);
    const char *workflow = r->workflow, *id = r->id;
    int64_t created_ms = r->created_ms;
    trace_of own;
    const trace_of *tr = &own;
    if (r->kind == SPAN_QUEUE || r->kind == SPAN_TICK) {
      if (!trace_sampled(r->self.trace, t->sample))
        continue;
    } else {
      if (workflow && id && created_ms != JOURNAL_NONE) {
        trace_of_instance(workflow, id, created_ms, r->traceparent, &own);
      } else {
        named *nm = name_instance(t, x, r);
        if (!nm)
          continue; /* the instance is gone: so is its trace */
        if (!nm->have_tr) {
          trace_of_instance(nm->workflow, nm->id, nm->created_ms,
                            nm->traceparent, &nm->tr);
          nm->have_tr = 1;
        }
        workflow = nm->workflow, id = nm->id, created_ms = nm->created_ms;
        tr = &nm->tr;
      }
      /* a caller's decision holds for its whole trace (W3C's sampled
       * flag) */
      if (!(tr->sampled >= 0 ? tr->sampled
                             : trace_sampled(tr->trace, t->sample)))
        continue;
    }
    size_t mark = b->len;
    if (spans)
      JB_LIT(b, ",");
    int bad = r->kind == SPAN_QUEUE || r->kind == SPAN_TICK
                  ? started_json(b, r)
                  : span_json(b, r, workflow, id, created_ms, tr);
    if (bad) /* a string that is not UTF-8 (jansson's refusal): left out */
      b->len = mark;
    else
      spans++;
  }
  if (spans == 0)
    return 0;
  JB_LIT(b, "]}]}]}");
  return post(t, x, err, errlen);
}
