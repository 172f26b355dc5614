/* route_pipelines.c — /pipelines: their counts (GET /pipelines[/{name}])
 * and sending records (POST /pipelines/{name}, a JSON array or NDJSON),
 * over the pipelines' API (pipeline.h), the counts made JSON by
 * views/view_pipeline.c.  Routes run on the pool, so the send's commit
 * waits there and never on the loop. */
#include "http_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "pipeline.h"
#include "util.h"
#include "view_pipeline.h"

/* The records of one request, each a compact JSON text (malloc'ed). */
typedef struct records {
  char **v;
  size_t n;
  const char *csv; /* the pipeline's name when it is csv: objects only */
} records;

static void records_free(records *r) {
  for (size_t i = 0; i < r->n; i++)
    free(r->v[i]);
  free(r->v);
}

/* `where` names the record in an error: "record 3" or "line 4". */
static int add_record(http_exchange *x, records *r, json_t *v,
                      const char *where, size_t at) {
  if (r->csv && !json_is_object(v)) {
    send_error(x, 400, "pipeline.record_not_object",
               "%s %zu is not a JSON object: pipeline \"%s\" writes CSV, "
               "its columns keys of each record",
               where, at, r->csv);
    return -1;
  }
  char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  size_t len = text ? strlen(text) : 0;
  if (!text || len > DURO_PIPELINE_MAX_RECORD) {
    free(text);
    send_error(x, 413, "pipeline.record_too_large",
               "%s %zu is %zu bytes of JSON, over the limit of %d a record",
               where, at, len, DURO_PIPELINE_MAX_RECORD);
    return -1;
  }
  r->v[r->n++] = text;
  return 0;
}

static int too_many(http_exchange *x) {
  return send_error(x, 413, "pipeline.batch_too_large",
                    "more than %d records, the limit of a request",
                    DURO_PIPELINE_MAX_RECORDS);
}

/* A JSON array: record i is element i (from 0).  0, or -1 answered. */
static int read_array(http_exchange *x, records *r) {
  int sent;
  json_t *body = parse_body(x, NULL, &sent);
  if (!body)
    return -1;
  if (!json_is_array(body)) {
    json_decref(body);
    send_error(x, 400, "request.invalid",
               "the body must be a JSON array of records, or one record a "
               "line with Content-Type: application/x-ndjson");
    return -1;
  }
  size_t n = json_array_size(body);
  if (n > DURO_PIPELINE_MAX_RECORDS) { /* before copying any of them */
    json_decref(body);
    too_many(x);
    return -1;
  }
  r->v = xcalloc(n + 1, sizeof *r->v);
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++)
    rc = add_record(x, r, json_array_get(body, i), "record", i);
  json_decref(body);
  return rc;
}

/* NDJSON: one value a line (blank lines skipped), a line named by its
 * number (from 1).  0, or -1 answered. */
static int read_ndjson(http_exchange *x, records *r) {
  const char *p = x->rq.body ? x->rq.body : "", *end = p + x->rq.body_len;
  size_t cap = 0;
  for (size_t line = 1; p < end; line++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *stop = nl ? nl : end;
    size_t len = (size_t)(stop - p);
    if (len && p[len - 1] == '\r')
      len--;
    size_t k = 0;
    while (k < len && (p[k] == ' ' || p[k] == '\t'))
      k++;
    if (k < len) {
      if (r->n == DURO_PIPELINE_MAX_RECORDS)
        return too_many(x), -1;
      json_error_t jerr;
      json_t *v =
          json_loadb(p, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
      if (!v) {
        send_error(x, 400, "request.invalid_json",
                   "line %zu is not valid JSON: %s at column %d", line,
                   jerr.text, jerr.column);
        return -1;
      }
      if (r->n == cap) {
        cap = cap ? cap * 2 : 64;
        r->v = xrealloc(r->v, cap * sizeof *r->v);
      }
      int rc = add_record(x, r, v, "line", line);
      json_decref(v);
      if (rc)
        return -1;
    }
    p = nl ? nl + 1 : end;
  }
  return 0;
}

static int is_ndjson(const char *type) {
  static const char ndjson[] = "application/x-ndjson";
  return type && !strncasecmp(type, ndjson, sizeof ndjson - 1) &&
         (type[sizeof ndjson - 1] == '\0' || type[sizeof ndjson - 1] == ';' ||
          type[sizeof ndjson - 1] == ' ');
}

/* POST /pipelines/{name}: 202 {"accepted": n} once every record is in the
 * journal; a refusal stores none of them. */
static int pipeline_send(http_server *s, http_exchange *x, const char *name) {
  if (x->rq.body_len > DURO_PIPELINE_MAX_BODY)
    return send_error(x, 413, "pipeline.body_too_large",
                      "the body is %zu bytes, over the limit of %d a request",
                      x->rq.body_len, DURO_PIPELINE_MAX_BODY);
  records r = {.csv =
                   duro_pipeline_objects_only(s->engine, name) ? name : NULL};
  int bad =
      is_ndjson(x->rq.content_type) ? read_ndjson(x, &r) : read_array(x, &r);
  if (!bad && r.n == 0) {
    send_error(x, 400, "request.invalid", "no records: send at least one");
    bad = 1;
  }
  if (bad) {
    records_free(&r);
    return 0;
  }
  int rc = duro_pipeline_append(s->engine, name, (const char *const *)r.v, r.n,
                                NULL);
  size_t n = r.n;
  records_free(&r);
  if (rc == DURO_E_OVERLOADED)
    return send_error(x, 503, "pipeline.backlog_full",
                      "pipeline \"%s\" holds its max_backlog of records not "
                      "yet written; retry once its files are written",
                      name);
  if (rc == DURO_E_NOT_FOUND)
    return send_error(x, 404, "pipeline.not_found", "no pipeline named \"%s\"",
                      name);
  if (rc)
    return send_error(x, status_of(rc), duro_err_name(rc), "%s",
                      duro_err_str(rc));
  return send_json(x, 202, json_pack("{sI}", "accepted", (json_int_t)n));
}

/* GET /pipelines, GET /pipelines/{name}, POST /pipelines/{name}. */
int pipelines_route(http_server *s, http_exchange *x, char **seg, int n) {
  json_t *out = NULL;
  int rc;
  if (n == 1) {
    if (!method_is(x, "GET"))
      return wrong_method(x, "GET");
    rc = duro_pipeline_stats(s->engine, NULL, &out);
    return rc ? send_error(x, status_of(rc), duro_err_name(rc), "%s",
                           duro_err_str(rc))
              : send_json(x, 200, out);
  }
  const char *name = seg[1];
  if (n > 2)
    return send_error(x, 404, "route.not_found", "no route for %s %s",
                      x->rq.method, x->rq.path);
  if (!name_valid(name) || !duro_pipeline_exists(s->engine, name))
    return send_error(x, 404, "pipeline.not_found", "no pipeline named \"%s\"",
                      name_valid(name) ? name : "?");
  if (method_is(x, "POST"))
    return pipeline_send(s, x, name);
  if (!method_is(x, "GET"))
    return wrong_method(x, "GET, POST");
  rc = duro_pipeline_stats(s->engine, name, &out);
  return rc ? send_error(x, status_of(rc), duro_err_name(rc), "%s",
                         duro_err_str(rc))
            : send_json(x, 200, out);
}
