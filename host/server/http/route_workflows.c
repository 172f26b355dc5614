/* route_workflows.c — /workflows/{wf} and its instances: create one
 * (POST .../instances[?wait=]) or a batch (POST .../instances/batch),
 * list them, describe one (GET .../instances/{id}[?wait=]), its light
 * status and its changes (GET and PATCH .../status), its events
 * (POST .../events/{type}), and its journal as a document (GET
 * .../export).
 *
 * Creations and events are answered when their commit is done, without a
 * thread waiting for it (on a served connection; a request without one,
 * as in http_serve, waits).  The route's thread returns at once, so
 * creations arriving meanwhile share the commit. */
#include "http_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "error.h"
#include "util.h"
#include "view_instance.h"
#include "view_journal.h"
#include "view_log.h"

#define MAX_BATCH 100

/* ---- instance creation ------------------------------------------------------
 */

typedef struct create_fields {
  const char *id;
  char *params; /* malloc'ed JSON text, or NULL */
  int64_t retention_ms;
  int64_t timeout_ms; /* 0: the workflow's */
  char problem[160];
} create_fields;

static const char *read_create_fields(json_t *o, create_fields *f);

/* Reads {id?, params?, retention?, timeout?} into f.  Returns NULL, or a
 * message (pool-allocated) saying what is wrong; then f->params is freed (it
 * leaked when a bad field followed "params": test_http). */
static const char *read_create(json_t *o, create_fields *f) {
  const char *bad = read_create_fields(o, f);
  if (bad) {
    free(f->params);
    f->params = NULL;
  }
  return bad;
}

static const char *read_create_fields(json_t *o, create_fields *f) {
  memset(f, 0, sizeof *f);
  f->retention_ms = -1;
  if (!json_is_object(o))
    return "an instance must be a JSON object";
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    if (!strcmp(key, "id")) {
      if (!json_is_string(v))
        return "\"id\" must be a string";
      f->id = json_string_value(v);
    } else if (!strcmp(key, "params")) {
      free(f->params);
      f->params = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    } else if (!strcmp(key, "retention")) {
      if (json_is_integer(v) && json_integer_value(v) >= 0)
        f->retention_ms = json_integer_value(v);
      else if (!json_is_string(v) ||
               duration_parse(json_string_value(v), &f->retention_ms) != 0)
        return "\"retention\" must be a duration such as \"30d\" or a "
               "number of milliseconds";
    } else if (!strcmp(key, "timeout")) {
      if (json_is_integer(v) && json_integer_value(v) > 0 &&
          json_integer_value(v) <= DURATION_MAX_MS)
        f->timeout_ms = json_integer_value(v);
      else if (!json_is_string(v) ||
               duration_parse(json_string_value(v), &f->timeout_ms) != 0 ||
               f->timeout_ms <= 0)
        return "\"timeout\" must be a duration such as \"1h\" or a "
               "number of milliseconds, more than 0 and at most 36500 days";
    } else {
      free(f->params);
      f->params = NULL;
      snprintf(f->problem, sizeof f->problem, "unknown field \"%.100s\"", key);
      return f->problem;
    }
  }
  return NULL;
}

typedef struct create_answer {
  http_exchange *x;
  char *wf, *id; /* for the error's message */
  int batch;
} create_answer;

static void answer_created(create_answer *a, int rc,
                           const duro_create_result *result) {
  http_exchange *x = a->x;
  if (rc) {
    send_engine_error(x, rc, a->wf, a->id);
  } else if (a->batch) {
    send_json(x, 200, view_create_result(result));
  } else if (result->n_created && result->skipped) {
    /* flow.singleton's skip, flow.debounce: nothing created, the live
     * one answers */
    const char *id = result->created[0];
    const char *how =
        result->skipped[0] == DURO_CREATE_DEBOUNCED ? "debounced" : "skipped";
    if (x->then_wait) {
      x->then_wait->id = xstrdup(id);
      x->then_wait->skipped = result->skipped[0];
    }
    send_json(x, 200, json_pack("{s:s,s:b}", "id", id, how, 1));
  } else if (result->n_created) {
    const char *id = result->created[0];
    if (x->then_wait)
      x->then_wait->id = xstrdup(id);
    send_json(x, 201, json_pack("{s:s,s:s}", "id", id, "status", "queued"));
  } else {
    /* over flow control (on_excess: reject): 429, when to try again */
    int64_t ms = result->errors[0].retry_after_ms;
    if (ms > 0)
      x->rs.retry_after_s = (int)(ms / 1000 + (ms % 1000 != 0));
    send_engine_error(x, result->errors[0].code, a->wf, a->id);
  }
}

static void on_created(void *ctx, int rc, duro_create_result *result) {
  create_answer *a = ctx;
  http_exchange *x = a->x;
  answer_created(a, rc, result);
  if (result)
    duro_create_result_free(result);
  free(a->wf);
  free(a->id);
  free(a);
  exchange_complete(x);
}

/* Hands the creations to the engine; the answer follows their commit. */
static int create_deferred(http_server *s, http_exchange *x, const char *wf,
                           const duro_create_req *reqs, size_t n, int batch) {
  create_answer *a = xcalloc(1, sizeof *a);
  *a = (create_answer){
      x, xstrdup(wf), !batch && reqs[0].id ? xstrdup(reqs[0].id) : NULL, batch};
  if (!x->req) { /* no loop to answer from: wait */
    duro_create_result result;
    int rc = duro_instance_create_many(s->engine, wf, reqs, n, &result);
    answer_created(a, rc, &result);
    duro_create_result_free(&result);
    if (x->then_wait && x->then_wait->id)
      wait_for_end(s, x, x->then_wait->wf, x->then_wait->id, 0);
  } else {
    x->owners++; /* before the commit can complete */
    int rc =
        duro_instance_create_batch_async(s->engine, wf, reqs, n, on_created, a);
    if (rc == 0)
      return 0; /* a is on_created's now */
    x->owners--;
    send_engine_error(x, rc, wf, a->id);
  }
  free(a->wf);
  free(a->id);
  free(a);
  return 0;
}

/* Before anything is created: a ?wait= that could not be parked is
 * answered 503 now, while a retry cannot create the instance twice.
 * Returns 1 when the request was answered. */
static int create_wait_prepare(http_server *s, http_exchange *x,
                               const char *wf) {
  int64_t ms;
  int given = wait_param(x, &ms);
  if (given <= 0)
    return given < 0;
  if (x->req && ms > 0 && waits_full(s, x->req)) {
    guard_note_busy(s);
    send_error(x, 503, "server.busy",
               "%zu requests wait for their instance already; retry",
               s->parked);
    return 1;
  }
  x->then_wait = xcalloc(1, sizeof *x->then_wait);
  x->then_wait->wf = xstrdup(wf);
  x->then_wait->ms = ms;
  return 0;
}

static int create_one(http_server *s, http_exchange *x, const char *wf) {
  if (create_wait_prepare(s, x, wf))
    return 0;
  int sent;
  json_t *body = parse_body(x, json_object(), &sent);
  if (!body)
    return 0;
  create_fields f;
  const char *bad = read_create(body, &f);
  if (bad) {
    json_decref(body);
    return send_error(x, 400, "request.invalid", "%s", bad);
  }
  if (f.id && !duro_instance_id_valid(f.id)) {
    json_decref(body);
    free(f.params);
    return send_error(
        x, 400, duro_err_name(DURO_E_INVALID_ID),
        "instance ids are 1-100 characters of A-Z a-z 0-9 _ . : -");
  }
  duro_create_req req = {.id = f.id,
                         .params = f.params,
                         .retention_ms = f.retention_ms,
                         .timeout_ms = f.timeout_ms,
                         .traceparent = x->rq.traceparent};
  create_deferred(s, x, wf, &req, 1, 0);
  free(f.params);
  json_decref(body);
  return 0;
}

static int create_batch(http_server *s, http_exchange *x, const char *wf) {
  if (query_param(x, "wait"))
    return send_error(x, 400, "request.invalid",
                      "a batch is answered once created: wait for each "
                      "instance with GET .../instances/{id}?wait=");
  int sent;
  json_t *body = parse_body(x, NULL, &sent);
  if (!body)
    return 0;
  json_t *list = json_object_get(body, "instances");
  if (!json_is_array(list) || json_object_size(body) != 1) {
    json_decref(body);
    return send_error(x, 400, "request.invalid",
                      "the body must be {\"instances\": [...]}");
  }
  size_t n = json_array_size(list);
  if (n == 0 || n > MAX_BATCH) {
    json_decref(body);
    return send_error(x, 400, "request.invalid",
                      "a batch holds 1 to %d instances, not %zu", MAX_BATCH, n);
  }
  duro_create_req reqs[MAX_BATCH];
  create_fields f[MAX_BATCH];
  size_t parsed = 0;
  const char *bad = NULL;
  for (; parsed < n && !bad; parsed++) {
    bad = read_create(json_array_get(list, parsed), &f[parsed]);
    reqs[parsed] = (duro_create_req){.id = f[parsed].id,
                                     .params = f[parsed].params,
                                     .retention_ms = f[parsed].retention_ms,
                                     .timeout_ms = f[parsed].timeout_ms,
                                     .traceparent = x->rq.traceparent};
  }
  if (bad) {
    for (size_t i = 0; i < parsed; i++)
      free(f[i].params);
    json_decref(body);
    return send_error(x, 400, "request.invalid", "instances[%zu]: %s",
                      parsed - 1, bad);
  }
  create_deferred(s, x, wf, reqs, n, 1);
  for (size_t i = 0; i < n; i++)
    free(f[i].params);
  json_decref(body);
  return 0;
}

/* ---- the other routes -------------------------------------------------------
 */

static const char *query_field(void *ctx, const char *field) {
  return query_param(ctx, field);
}

int query_where(http_server *s, http_exchange *x, const char *wf,
                duro_attr_filter *where, size_t *n) {
  *n = 0;
  const char *text;
  while ((text = query_param_nth(x, "where", *n)) != NULL) {
    if (*n == DURO_ATTR_MAX) {
      send_error(x, 400, "request.invalid",
                 "where: at most %d terms (a workflow has at most %d "
                 "attributes)",
                 DURO_ATTR_MAX, DURO_ATTR_MAX);
      break;
    }
    char err[256];
    int rc =
        duro_list_where_parse(s->engine, wf, text, &where[*n], err, sizeof err);
    if (rc == DURO_E_INVALID_ARGUMENT) {
      send_error(x, 400, "request.invalid", "where: %s", err);
      break;
    }
    if (rc) {
      send_engine_error(x, rc, wf, NULL);
      break;
    }
    (*n)++;
  }
  if (!text)
    return 0;
  for (size_t i = 0; i < *n; i++)
    duro_attr_filter_clear(&where[i]);
  *n = 0;
  return -1;
}

static int list_instances(http_server *s, http_exchange *x, const char *wf) {
  const char *limit = query_param(x, "limit");
  const char *cursor = query_param(x, "cursor");
  duro_list_filter f;
  char why[256];
  if (list_filter_read(query_field, x, "", &f, why, sizeof why))
    return send_error(x, 400, "request.invalid", "%s", why);
  long lim = 100;
  if (limit) {
    char *end;
    lim = strtol(limit, &end, 10);
    if (*end || lim < 1 || lim > 1000)
      return send_error(x, 400, "request.invalid", "limit must be 1 to 1000");
  }
  duro_attr_filter where[DURO_ATTR_MAX];
  if (query_where(s, x, wf, where, &f.n_where))
    return 0;
  f.where = where;
  json_t *out = NULL;
  int rc = duro_instance_list(s->engine, wf, &f, (size_t)lim, cursor, &out);
  for (size_t i = 0; i < f.n_where; i++)
    duro_attr_filter_clear(&where[i]);
  if (rc == DURO_E_INVALID_ARGUMENT)
    return send_error(x, 400, "request.invalid", "invalid cursor");
  if (rc)
    return send_engine_error(x, rc, wf, NULL);
  return send_json(x, 200, out);
}

static int describe(http_server *s, http_exchange *x, const char *wf,
                    const char *id) {
  json_t *out = NULL;
  int rc = duro_instance_describe(s->engine, wf, id, &out);
  if (rc)
    return send_engine_error(x, rc, wf, id);
  return send_json(x, 200, keys_filter_instance(x, out)); /* its children */
}

/* GET .../instances/{id}/export: everything its journal holds of it, as
 * a document another journal can be rebuilt from (view_journal.h).  A
 * read: the instance is left as it is. */
static int export_instance(http_server *s, http_exchange *x, const char *wf,
                           const char *id) {
  json_t *out = NULL;
  int rc = duro_instance_export(s->engine, wf, id, &out);
  if (rc)
    return send_engine_error(x, rc, wf, id);
  return send_json(x, 200, out);
}

/* GET .../logs[?after=N&limit=M]: the lines its plugin code logged,
 * numbered past N (default 0), at most M (1 to 1000, default 100). */
static int instance_logs(http_server *s, http_exchange *x, const char *wf,
                         const char *id) {
  const char *after = query_param(x, "after");
  const char *limit = query_param(x, "limit");
  long long from = 0, lim = 100;
  char *end;
  if (after && ((from = strtoll(after, &end, 10)), *end || from < 0))
    return send_error(x, 400, "request.invalid",
                      "after must be a line number (0 or more)");
  if (limit &&
      ((lim = strtoll(limit, &end, 10)), *end || lim < 1 || lim > 1000))
    return send_error(x, 400, "request.invalid", "limit must be 1 to 1000");
  json_t *out = NULL;
  int rc = duro_instance_logs_json(s->engine, wf, id, from, (size_t)lim, &out);
  if (rc)
    return send_engine_error(x, rc, wf, id);
  return send_json(x, 200, out);
}

/* The light status: the row without steps or attempts. */
int instance_summary(http_server *s, http_exchange *x, const char *wf,
                     const char *id) {
  json_t *out = NULL;
  int rc = duro_instance_summary(s->engine, wf, id, &out);
  if (rc && x->then_wait)
    return 0; /* the create's 201 stands: the instance exists */
  if (rc)
    return send_engine_error(x, rc, wf, id);
  /* a create's wait: 201, or 200 for the live one a skip answered with */
  int skipped = x->then_wait ? x->then_wait->skipped : 0;
  if (skipped)
    json_object_set_new(
        out, skipped == DURO_CREATE_DEBOUNCED ? "debounced" : "skipped",
        json_true());
  return send_json(x, x->then_wait && !skipped ? 201 : 200, out);
}

/* GET /workflows/{wf}/instances/{id}[?wait=DURATION]: the whole
 * instance, or, with wait, its light status once it has ended or the
 * wait (at most http.max_wait) ran out. */
static int get_instance(http_server *s, http_exchange *x, const char *wf,
                        const char *id) {
  int64_t ms;
  int given = wait_param(x, &ms);
  if (given == 0)
    return describe(s, x, wf, id);
  return given < 0 ? 0 : wait_for_end(s, x, wf, id, ms);
}

/* PATCH .../status {"status": "restart", "from"?, "rollback"?}: the
 * engine's code, or
 * 0 with *answered set when the reply is written already (a bad "from",
 * or a 409 saying why it cannot restart).  `from` is borrowed from the
 * body, which the caller frees after the reply is formatted. */
static int restart_from(http_server *s, http_exchange *x, const char *wf,
                        const char *id, json_t *from, int rollback,
                        int *answered) {
  const char *name = json_string_value(json_object_get(from, "name"));
  json_t *count = json_object_get(from, "count");
  if ((from && !name) ||
      (count && (!json_is_integer(count) || json_integer_value(count) < 1))) {
    *answered = 1;
    return send_error(x, 400, "request.invalid",
                      "\"from\" must be {\"name\": string, \"count\"?: "
                      "integer >= 1}");
  }
  uint32_t n = count ? (uint32_t)json_integer_value(count) : 1;
  char *why;
  int rc =
      rollback
          ? duro_instance_restart_rollback_why(s->engine, wf, id, name, n, &why)
          : duro_instance_restart_why(s->engine, wf, id, name, n, &why);
  if (rc == DURO_E_CANNOT_RESTART && why) {
    /* `name` points into the body: format the reply before it is freed
     * (test_http caught a use-after-free here). */
    if (name)
      send_error(x, 409, duro_err_name(rc),
                 "%s/%s cannot be restarted from step \"%s\"#%u: %s", wf, id,
                 name, n, why);
    else
      send_error(x, 409, duro_err_name(rc), "%s/%s cannot be restarted: %s", wf,
                 id, why);
    *answered = 1;
    rc = 0;
  }
  free(why);
  return rc;
}

static int change_status(http_server *s, http_exchange *x, const char *wf,
                         const char *id) {
  int sent;
  json_t *body = parse_body(x, NULL, &sent);
  if (!body)
    return 0;
  const char *action = json_string_value(json_object_get(body, "status"));
  json_t *rollback = json_object_get(body, "rollback");
  int rc, answered = 0;
  if (rollback &&
      !(json_is_boolean(rollback) && action &&
        (!strcmp(action, "terminate") || !strcmp(action, "restart")))) {
    json_decref(body);
    return send_error(x, 400, "request.invalid",
                      "\"rollback\" is a boolean, and only a terminate or a "
                      "restart takes it");
  }
  if (!action) {
    rc = -1;
  } else if (!strcmp(action, "pause")) {
    rc = duro_instance_pause(s->engine, wf, id);
  } else if (!strcmp(action, "resume")) {
    rc = duro_instance_resume(s->engine, wf, id);
  } else if (!strcmp(action, "terminate")) {
    rc = json_is_true(rollback)
             ? duro_instance_terminate_rollback(s->engine, wf, id)
             : duro_instance_terminate(s->engine, wf, id);
  } else if (!strcmp(action, "restart")) {
    rc = restart_from(s, x, wf, id, json_object_get(body, "from"),
                      json_is_true(rollback), &answered);
    if (answered) {
      json_decref(body);
      return 0;
    }
  } else {
    rc = -1;
  }
  json_decref(body);
  if (rc == -1)
    return send_error(x, 400, "request.invalid",
                      "\"status\" must be pause, resume, terminate or "
                      "restart");
  if (rc)
    return send_engine_error(x, rc, wf, id);
  duro_status now;
  rc = duro_instance_status(s->engine, wf, id, &now);
  if (rc)
    return send_engine_error(x, rc, wf, id);
  return send_json(
      x, 200,
      json_pack("{s:s,s:s}", "id", id, "status", duro_status_name(now)));
}

/* DELETE /workflows/{wf}/instances/{id}[?terminate=true]: an ended
 * instance deleted now with its rows; a live one is 409 saying which
 * status it has, unless terminate, which ends it first. */
static int delete_instance(http_server *s, http_exchange *x, const char *wf,
                           const char *id) {
  const char *terminate = query_param(x, "terminate");
  if (terminate && strcmp(terminate, "true") && strcmp(terminate, "false"))
    return send_error(x, 400, "request.invalid",
                      "\"terminate\" must be true or false");
  duro_deleted d;
  char *why = NULL;
  int rc = duro_instance_delete(
      s->engine, wf, id, terminate && !strcmp(terminate, "true"), &d, &why);
  if (rc == DURO_E_CANNOT_DELETE && why) {
    send_error(x, 409, duro_err_name(rc), "%s/%s cannot be deleted: %s", wf, id,
               why);
    free(why);
    return 0;
  }
  free(why);
  if (rc)
    return send_engine_error(x, rc, wf, id);
  json_t *out =
      json_pack("{s:s,s:s,s:b}", "workflow", wf, "id", id, "deleted", 1);
  /* known when this host deleted it, not when the one that runs it did */
  json_object_set_new(out, "status",
                      d.elsewhere ? json_null()
                                  : json_string(duro_status_name(d.status)));
  json_object_set_new(out, "terminated",
                      d.elsewhere ? json_null() : json_boolean(d.terminated));
  json_object_set_new(
      out, "rows",
      d.elsewhere
          ? json_null()
          : json_pack("{s:I,s:I,s:I,s:I}", "steps", (json_int_t)d.steps,
                      "attempts", (json_int_t)d.attempts, "events",
                      (json_int_t)d.events, "logs", (json_int_t)d.logs));
  return send_json(x, 200, out);
}

/* An event is answered 202 once it is on disk, without a thread waiting
 * for the commit (as a creation is). */
typedef struct event_answer {
  http_exchange *x;
  char *wf, *id, *type;
} event_answer;

/* status: the ended instance's, when known (NULL: an end that overtook
 * the event's commit). */
static void answer_event(event_answer *a, int rc, const char *status) {
  if (rc == DURO_E_INVALID_PARAMS)
    send_error(a->x, 400, duro_err_name(rc),
               "the event payload is over the size limit");
  else if (rc == DURO_E_INSTANCE_ENDED)
    send_error(a->x, 409, duro_err_name(rc),
               "%s/%s is %s: an ended instance takes no events (restart it "
               "first); the event was not stored",
               a->wf, a->id, status ? status : "ended");
  else if (rc)
    send_engine_error(a->x, rc, a->wf, a->id);
  else
    send_json(a->x, 202, json_pack("{s:s,s:s}", "id", a->id, "type", a->type));
}

static void event_answer_free(event_answer *a) {
  free(a->wf);
  free(a->id);
  free(a->type);
  free(a);
}

static void on_event_stored(void *ctx, int rc) {
  event_answer *a = ctx;
  http_exchange *x = a->x;
  answer_event(a, rc, NULL);
  event_answer_free(a);
  exchange_complete(x);
}

static int send_event(http_server *s, http_exchange *x, const char *wf,
                      const char *id, const char *type) {
  if (!strncmp(type, DURO_RESERVED_EVENT_PREFIX,
               DURO_RESERVED_EVENT_PREFIX_LEN))
    return send_error(x, 400, "request.invalid",
                      "event type \"%.100s\": types beginning \"%s\" are "
                      "the host's own (a child workflow's end)",
                      type, DURO_RESERVED_EVENT_PREFIX);
  int sent;
  json_t *payload = parse_body(x, json_null(), &sent);
  if (!payload)
    return 0;
  char *text = json_dumps(payload, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(payload);
  event_answer *a = xcalloc(1, sizeof *a);
  *a = (event_answer){x, xstrdup(wf), xstrdup(id), xstrdup(type)};
  int rc;
  if (!x->req) { /* no loop to answer from: wait */
    rc = duro_instance_send_event(s->engine, wf, id, type, text);
  } else {
    x->owners++; /* before the commit can complete */
    rc = duro_instance_send_event_async(s->engine, wf, id, type, text,
                                        x->rq.traceparent, on_event_stored, a);
    if (rc == 0) {
      free(text);
      return 0; /* a is on_event_stored's now */
    }
    x->owners--;
  }
  free(text);
  duro_status now;
  int ended = rc == DURO_E_INSTANCE_ENDED &&
              duro_instance_status(s->engine, wf, id, &now) == 0;
  answer_event(a, rc, ended ? duro_status_name(now) : NULL);
  event_answer_free(a);
  return 0;
}

/* GET /workflows/{wf}: its instances by status and its backlog. */
static int workflow_route(http_server *s, http_exchange *x, const char *wf) {
  if (!method_is(x, "GET"))
    return wrong_method(x, "GET");
  json_t *out = NULL;
  int rc = name_valid(wf) ? duro_workflow_stats(s->engine, wf, &out)
                          : DURO_E_WORKFLOW_NOT_FOUND;
  if (rc)
    return send_engine_error(x, rc, wf, NULL);
  return send_json(x, 200, out);
}

/* /workflows/{wf}[/bulk|/instances[/{id}[/status|/logs|/export|
 * /events/{type}|/events/stream]]]. */
int workflows_route(http_server *s, http_exchange *x, char **seg, int n) {
  if (n == 2)
    return workflow_route(s, x, seg[1]);
  const char *wf = seg[1];
  if (n == 3 && !strcmp(seg[2], "bulk"))
    return name_valid(wf)
               ? workflow_bulk_route(s, x, wf)
               : send_error(x, 404, duro_err_name(DURO_E_WORKFLOW_NOT_FOUND),
                            "invalid workflow name");
  if (n < 3 || strcmp(seg[2], "instances") != 0)
    return send_error(x, 404, "route.not_found", "no route for %s %s",
                      x->rq.method, x->rq.path);
  if (!name_valid(wf))
    return send_error(x, 404, duro_err_name(DURO_E_WORKFLOW_NOT_FOUND),
                      "invalid workflow name");
  if (n == 3) {
    if (method_is(x, "POST"))
      return create_one(s, x, wf);
    if (method_is(x, "GET"))
      return list_instances(s, x, wf);
    return wrong_method(x, "GET, POST");
  }
  const char *id = seg[3];
  if (n == 4 && !strcmp(id, "batch") && method_is(x, "POST"))
    return create_batch(s, x, wf);
  if (!duro_instance_id_valid(id))
    return send_error(
        x, 400, duro_err_name(DURO_E_INVALID_ID),
        "instance ids are 1-100 characters of A-Z a-z 0-9 _ . : -");
  if (n == 4) {
    if (method_is(x, "DELETE"))
      return delete_instance(s, x, wf, id);
    return method_is(x, "GET") ? get_instance(s, x, wf, id)
                               : wrong_method(x, "GET, DELETE");
  }
  if (n == 5 && !strcmp(seg[4], "status")) {
    if (method_is(x, "GET"))
      return instance_summary(s, x, wf, id);
    return method_is(x, "PATCH") ? change_status(s, x, wf, id)
                                 : wrong_method(x, "GET, PATCH");
  }
  if (n == 5 && !strcmp(seg[4], "logs"))
    return method_is(x, "GET") ? instance_logs(s, x, wf, id)
                               : wrong_method(x, "GET");
  if (n == 5 && !strcmp(seg[4], "export"))
    return method_is(x, "GET") ? export_instance(s, x, wf, id)
                               : wrong_method(x, "GET");
  if (n == 6 && !strcmp(seg[4], "events")) {
    /* GET .../events/stream follows it; POST sends an event "stream" */
    if (!strcmp(seg[5], "stream") && method_is(x, "GET"))
      return stream_open(s, x, wf, id);
    if (!name_valid(seg[5]))
      return send_error(
          x, 400, "request.invalid",
          "event types are 1-100 characters of A-Z a-z 0-9 _ . : -");
    return method_is(x, "POST") ? send_event(s, x, wf, id, seg[5])
                                : wrong_method(x, "POST");
  }
  return send_error(x, 404, "route.not_found", "no route for %s %s",
                    x->rq.method, x->rq.path);
}
