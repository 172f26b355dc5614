/* tail_item.c — an activation's trace item: its report copied on the
 * thread that committed it (strings only: no JSON there), and a batch of
 * them made JSON on the batch's own thread, in the shape duro.h gives
 * (duro_tail_batch). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "status.h"
#include "tail_internal.h"
#include "trace_ids.h"
#include "util.h"

static char *dup_counted(const char *s, size_t *bytes) {
  if (!s)
    return NULL;
  *bytes += strlen(s) + 1;
  return xstrdup(s);
}

tail_rec *tail_rec_copy(const duro_activation_report *r) {
  tail_rec *c = xcalloc(1, sizeof *c);
  size_t b = sizeof *c;
  c->workflow = dup_counted(r->workflow, &b);
  c->id = dup_counted(r->id, &b);
  c->build = dup_counted(r->build, &b);
  c->traceparent = dup_counted(r->traceparent, &b);
  c->created_ms = r->created_ms;
  c->outcome = r->outcome;
  c->status = r->status;
  c->started_ms = r->started_ms;
  c->ended_ms = r->ended_ms;
  if (r->n_logs) {
    c->logs = xcalloc(r->n_logs, sizeof *c->logs);
    b += r->n_logs * sizeof *c->logs;
  }
  for (size_t i = 0; i < r->n_logs; i++) {
    c->logs[i] = r->logs[i];
    c->logs[i].step = dup_counted(r->logs[i].step, &b);
    c->logs[i].text = dup_counted(r->logs[i].text, &b);
  }
  c->n_logs = r->n_logs;
  c->logs_dropped = r->logs_dropped;
  if (r->n_errors) {
    c->errors = xcalloc(r->n_errors, sizeof *c->errors);
    b += r->n_errors * sizeof *c->errors;
  }
  for (size_t i = 0; i < r->n_errors; i++) {
    c->errors[i] = r->errors[i];
    c->errors[i].step = dup_counted(r->errors[i].step, &b);
    c->errors[i].error = dup_counted(r->errors[i].error, &b);
  }
  c->n_errors = r->n_errors;
  c->errors_dropped = r->errors_dropped;
  c->bytes = b;
  return c;
}

void tail_rec_free(tail_rec *r) {
  if (!r)
    return;
  free(r->workflow);
  free(r->id);
  free(r->build);
  free(r->traceparent);
  for (size_t i = 0; i < r->n_logs; i++) {
    free((char *)r->logs[i].step);
    free((char *)r->logs[i].text);
  }
  free(r->logs);
  for (size_t i = 0; i < r->n_errors; i++) {
    free((char *)r->errors[i].step);
    free((char *)r->errors[i].error);
  }
  free(r->errors);
  free(r);
}

static json_t *str_or_null(const char *s) {
  return s ? json_string(s) : json_null();
}

/* An exception: the error's name and message (its JSON is the engine's
 * {"name","message"}; anything else is the message whole). */
static json_t *exception_json(const duro_activation_error *x) {
  json_t *o =
      json_pack("{s:I,s:o,s:I}", "time_ms", (json_int_t)x->time_ms, "step",
                str_or_null(x->step), "attempt", (json_int_t)x->attempt);
  json_t *err = json_loads(x->error, JSON_DECODE_ANY, NULL);
  const char *name = json_string_value(json_object_get(err, "name"));
  const char *msg = json_string_value(json_object_get(err, "message"));
  json_object_set_new(o, "name", json_string(name ? name : "Error"));
  json_object_set_new(o, "message", json_string(msg ? msg : x->error));
  json_decref(err);
  return o;
}

static json_t *item_json(const tail_rec *r) {
  trace_of t;
  trace_of_instance(r->workflow, r->id, r->created_ms, r->traceparent, &t);
  json_t *logs = json_array(), *exceptions = json_array();
  for (size_t i = 0; i < r->n_logs; i++) {
    const duro_activation_log *l = &r->logs[i];
    json_array_append_new(
        logs, json_pack("{s:I,s:s,s:o,s:I,s:s?}", "time_ms",
                        (json_int_t)l->time_ms, "level",
                        log_level_name(l->level), "step", str_or_null(l->step),
                        "attempt", (json_int_t)l->attempt, "message", l->text));
  }
  for (size_t i = 0; i < r->n_errors; i++)
    json_array_append_new(exceptions, exception_json(&r->errors[i]));
  json_t *o = json_object();
  json_object_set_new(o, "workflow", json_string(r->workflow));
  json_object_set_new(o, "instance", json_string(r->id));
  json_object_set_new(o, "build", str_or_null(r->build));
  json_object_set_new(o, "outcome", json_string(r->outcome));
  json_object_set_new(o, "status", json_string(duro_status_name(r->status)));
  json_object_set_new(o, "started_ms", json_integer(r->started_ms));
  json_object_set_new(o, "ended_ms", json_integer(r->ended_ms));
  json_object_set_new(o, "duration_ms",
                      json_integer(r->ended_ms - r->started_ms));
  json_object_set_new(o, "trace_id", json_string(t.trace));
  json_object_set_new(o, "logs", logs);
  json_object_set_new(o, "exceptions", exceptions);
  json_object_set_new(o, "logs_dropped", json_integer(r->logs_dropped));
  json_object_set_new(o, "exceptions_dropped", json_integer(r->errors_dropped));
  return o;
}

char *tail_items_json(tail_rec *const *v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(a, item_json(v[i]));
  /* (a log line that is not UTF-8 makes no JSON string: json_pack
   * refuses it, and its item goes without it) */
  char *s = json_dumps(a, JSON_COMPACT);
  json_decref(a);
  return s ? s : xstrdup("[]");
}
