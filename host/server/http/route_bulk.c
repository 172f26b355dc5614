/* route_bulk.c — bulk actions (bulk/bulk.h): POST /workflows/{wf}/bulk
 * makes a job (or, with dry_run, only counts its matches), GET
 * /workflows/{wf}/bulk lists a workflow's recent jobs, GET /bulk/{id}
 * shows one's progress and POST /bulk/{id}/cancel stops it after the
 * batch under way (a key limited to some workflows: a job of one of
 * them).  The filter is the list's (list_filter.c). */
#include "http_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "view_bulk.h"

/* A body's filter object read as list_filter_read reads a query: strings
 * as they are, integers (times in ms) as their text. */
typedef struct body_filter {
  json_t *filter;
  char buf[32];
} body_filter;

static const char *body_field(void *ctx, const char *field) {
  body_filter *b = ctx;
  json_t *v = json_object_get(b->filter, field);
  if (json_is_integer(v)) {
    snprintf(b->buf, sizeof b->buf, "%lld", (long long)json_integer_value(v));
    return b->buf;
  }
  return json_string_value(v);
}

static int is_time_field(const char *field) {
  return strstr(field, "_after") || strstr(field, "_before");
}

/* Checks the filter's fields and types: NULL, or a message (static or in
 * why) naming the field. */
static const char *check_filter(json_t *filter, char *why, size_t len) {
  if (!json_is_object(filter))
    return "\"filter\" must be an object of the list's fields (status, "
           "prefix, created_after, created_before, ended_after, "
           "ended_before)";
  const char *key;
  json_t *v;
  json_object_foreach(filter, key, v) {
    if (!strcmp(key, "where") || !strcmp(key, "ids"))
      continue; /* read_where's, read_ids' */
    size_t i = 0;
    while (list_filter_fields[i] && strcmp(list_filter_fields[i], key))
      i++;
    if (!list_filter_fields[i]) {
      snprintf(why, len,
               "filter.%.100s is not a filter field (status, prefix, "
               "created_after, created_before, ended_after, ended_before, "
               "where, ids)",
               key);
      return why;
    }
    int time = is_time_field(key);
    if (!json_is_string(v) &&
        !(time && json_is_integer(v) && json_integer_value(v) >= 0)) {
      snprintf(why, len, "filter.%s must be %s", key,
               time ? "a time (ms since the epoch, or ISO 8601)" : "a string");
      return why;
    }
  }
  return NULL;
}

/* The filter's `where`, an array of search attribute terms as the
 * list's query takes them ("customer:c42"), parsed against wf's index
 * into where[] (*n of them, each cleared by the caller): NULL, or a
 * message (in why) naming the term. */
static const char *read_where(http_server *s, const char *wf, json_t *filter,
                              duro_attr_filter *where, size_t *n, char *why,
                              size_t len) {
  json_t *terms = json_object_get(filter, "where"), *t;
  size_t i;
  *n = 0;
  if (!terms)
    return NULL;
  if (!json_is_array(terms) || json_array_size(terms) > DURO_ATTR_MAX) {
    snprintf(why, len,
             "filter.where must be an array of at most %d terms such as "
             "\"customer:c42\" or \"amount>100\"",
             DURO_ATTR_MAX);
    return why;
  }
  json_array_foreach(terms, i, t) {
    char err[200];
    if (!json_is_string(t)) {
      snprintf(why, len, "filter.where[%zu] must be a string", i);
      return why;
    }
    if (duro_list_where_parse(s->engine, wf, json_string_value(t), &where[*n],
                              err, sizeof err)) {
      snprintf(why, len, "filter.where[%zu]: %s", i, err);
      return why;
    }
    (*n)++;
  }
  return NULL;
}

/* The filter's `ids`, an array of 1 to DURO_BULK_IDS instance ids, into
 * ids[] (pointing into the body), *n of them: NULL, or a message (in
 * why) naming the one that is not an id. */
static const char *read_ids(json_t *filter, const char **ids, size_t *n,
                            char *why, size_t len) {
  json_t *a = json_object_get(filter, "ids"), *v;
  size_t i;
  *n = 0;
  if (!a)
    return NULL;
  if (!json_is_array(a) || json_array_size(a) == 0 ||
      json_array_size(a) > DURO_BULK_IDS) {
    snprintf(why, len,
             "filter.ids must be an array of 1 to %d instance ids (the "
             "chosen instances; a filter of more is one of the other "
             "fields)",
             DURO_BULK_IDS);
    return why;
  }
  json_array_foreach(a, i, v) {
    if (!duro_instance_id_valid(json_string_value(v))) {
      snprintf(why, len,
               "filter.ids[%zu] must be an instance id: a string of 1-100 "
               "characters of A-Z a-z 0-9 _ . : -",
               i);
      return why;
    }
    ids[(*n)++] = json_string_value(v);
  }
  return NULL;
}

/* POST /workflows/{wf}/bulk {"action", "filter"?, "dry_run"?,
 * "terminate"?}. */
static int bulk_create(http_server *s, http_exchange *x, const char *wf) {
  int sent;
  json_t *body = parse_body(x, NULL, &sent);
  if (!body)
    return 0;
  char why[320];
  const char *bad = NULL, *key;
  json_t *v;
  if (!json_is_object(body))
    bad = "the body must be {\"action\": ..., \"filter\"?: {...}, "
          "\"dry_run\"?: bool, \"terminate\"?: bool}";
  else
    json_object_foreach(body, key, v) {
      if (strcmp(key, "action") && strcmp(key, "filter") &&
          strcmp(key, "dry_run") && strcmp(key, "terminate")) {
        snprintf(why, sizeof why,
                 "\"%.100s\" is not a field of a bulk action (action, "
                 "filter, dry_run, terminate)",
                 key);
        bad = why;
        break;
      }
    }
  const char *action = json_string_value(json_object_get(body, "action"));
  json_t *filter = json_object_get(body, "filter");
  json_t *dry_run = json_object_get(body, "dry_run");
  json_t *terminate = json_object_get(body, "terminate");
  int a = duro_bulk_action_parse(action);
  duro_bulk_spec spec = {.workflow = wf};
  if (!bad && a < 0)
    bad = "\"action\" must be terminate, restart, resume, pause or delete";
  if (!bad && dry_run && !json_is_boolean(dry_run))
    bad = "\"dry_run\" must be a boolean";
  if (!bad && terminate &&
      !(json_is_boolean(terminate) && a == DURO_BULK_DELETE))
    bad = "\"terminate\" is a boolean, and only a delete takes it";
  if (!bad && filter)
    bad = check_filter(filter, why, sizeof why);
  body_filter bf = {.filter = filter};
  if (!bad && filter &&
      list_filter_read(body_field, &bf, "filter.", &spec.filter, why,
                       sizeof why))
    bad = why;
  if (!bad && !filter)
    spec.filter = (duro_list_filter){.status = -1};
  duro_attr_filter where[DURO_ATTR_MAX];
  size_t n_where = 0;
  if (!bad && filter)
    bad = read_where(s, wf, filter, where, &n_where, why, sizeof why);
  spec.filter.where = where;
  spec.filter.n_where = n_where;
  const char *ids[DURO_BULK_IDS];
  if (!bad && filter)
    bad = read_ids(filter, ids, &spec.n_ids, why, sizeof why);
  spec.ids = ids;
  if (!bad && (spec.filter.status == DURO_STATUS_RUNNING ||
               spec.filter.status == DURO_STATUS_WAITING_FOR_PAUSE)) {
    snprintf(why, sizeof why,
             "filter.status %s is not one a bulk action takes: it is an "
             "activation's, never stored (take queued or waiting)",
             duro_status_name(spec.filter.status));
    bad = why;
  }
  if (bad) {
    send_error(x, 400, "request.invalid", "%s", bad);
    for (size_t i = 0; i < n_where; i++)
      duro_attr_filter_clear(&where[i]);
    json_decref(body);
    return 0;
  }
  spec.action = (duro_bulk_action)a;
  spec.terminate = json_is_true(terminate);
  int64_t id, matched;
  int rc =
      duro_bulk_create(s->engine, &spec, json_is_true(dry_run), &id, &matched);
  int dry = json_is_true(dry_run);
  for (size_t i = 0; i < n_where; i++)
    duro_attr_filter_clear(&where[i]);
  json_decref(body); /* spec's prefix and ids pointed into it */
  if (rc)
    return send_engine_error(x, rc, wf, NULL);
  if (dry)
    return send_json(
        x, 200,
        json_pack("{s:I, s:b}", "matched", (json_int_t)matched, "dry_run", 1));
  char text[24];
  snprintf(text, sizeof text, "%lld", (long long)id);
  return send_json(
      x, 202,
      json_pack("{s:s, s:I}", "id", text, "matched", (json_int_t)matched));
}

/* GET /workflows/{wf}/bulk[?limit=N]: its newest jobs (20, at most 100). */
static int bulk_list(http_server *s, http_exchange *x, const char *wf) {
  const char *limit = query_param(x, "limit");
  long lim = 20;
  if (limit) {
    char *end;
    lim = strtol(limit, &end, 10);
    if (*end || lim < 1 || lim > 100)
      return send_error(x, 400, "request.invalid", "limit must be 1 to 100");
  }
  json_t *out;
  int rc = duro_bulk_list_json(s->engine, wf, (size_t)lim, &out);
  return rc ? send_engine_error(x, rc, wf, NULL) : send_json(x, 200, out);
}

int workflow_bulk_route(http_server *s, http_exchange *x, const char *wf) {
  if (method_is(x, "POST"))
    return bulk_create(s, x, wf);
  if (method_is(x, "GET"))
    return bulk_list(s, x, wf);
  return wrong_method(x, "GET, POST");
}

static int job_missing(http_exchange *x, const char *id) {
  return send_error(x, 404, "bulk.not_found", "no bulk job \"%.40s\"", id);
}

/* The job's workflow against x's key: 1 after answering (404 for no
 * such job, 403 naming a workflow off the key's list), else 0. */
static int job_refused(http_server *s, http_exchange *x, long long id,
                       const char *text) {
  json_t *job = NULL;
  int rc = duro_bulk_job_json(s->engine, id, &job);
  int answered =
      rc == DURO_E_NOT_FOUND ? (job_missing(x, text), 1)
      : rc                   ? (send_engine_error(x, rc, NULL, NULL), 1)
                             : keys_refuse_workflow(
                                   x, json_string_value(json_object_get(job, "workflow")));
  json_decref(job);
  return answered;
}

/* GET /bulk/{id}, POST /bulk/{id}/cancel: of a workflow the key may
 * touch. */
int bulk_route(http_server *s, http_exchange *x, char **seg, int n) {
  char *end;
  long long id = strtoll(seg[1], &end, 10);
  if (n > 3 || (n == 3 && strcmp(seg[2], "cancel")))
    return send_error(x, 404, "route.not_found", "no route for %s %s",
                      x->rq.method, x->rq.path);
  if (n == 2 && !method_is(x, "GET"))
    return wrong_method(x, "GET");
  if (n == 3 && !method_is(x, "POST"))
    return wrong_method(x, "POST");
  if (*end || end == seg[1] || id <= 0)
    return job_missing(x, seg[1]);
  if (x->key && x->key->workflows && job_refused(s, x, id, seg[1]))
    return 0;
  int rc = n == 3 ? duro_bulk_cancel(s->engine, id) : 0;
  if (rc == DURO_E_INVALID_ARGUMENT)
    return send_error(x, 409, "bulk.ended",
                      "bulk job %lld has ended: nothing to cancel", id);
  json_t *out = NULL;
  if (rc == 0)
    rc = duro_bulk_job_json(s->engine, id, &out);
  if (rc == DURO_E_NOT_FOUND)
    return job_missing(x, seg[1]);
  return rc ? send_engine_error(x, rc, NULL, NULL) : send_json(x, 200, out);
}
