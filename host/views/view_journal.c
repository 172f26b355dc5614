/* view_journal.c — an instance's journal as a document (view_journal.h):
 * its rows written out as "duro-journal-1", and such a document read back
 * into rows, every field checked and a bad one named by its place
 * ("steps[2].status").  Both directions in one file: they are one format. */
#include "view_journal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "trace_ids.h"
#include "util.h"

static const char *const parent_close_names[] = {
    [JOURNAL_PARENT_CLOSE_TERMINATE] = "terminate",
    [JOURNAL_PARENT_CLOSE_ABANDON] = "abandon",
    [JOURNAL_PARENT_CLOSE_ROLLBACK] = "rollback",
};
#define N_PARENT_CLOSE (sizeof parent_close_names / sizeof *parent_close_names)

/* ---- writing ---- */

static json_t *ms_json(int64_t ms) {
  return ms == JOURNAL_NONE ? json_null() : json_integer(ms);
}

static json_t *text_json(const char *s) {
  return s ? json_string(s) : json_null();
}

static json_t *attempt_json(const journal_attempt_row *a) {
  json_t *o = json_object();
  json_object_set_new(o, "number", json_integer(a->number));
  json_object_set_new(o, "started_ms", ms_json(a->started_ms));
  json_object_set_new(o, "ended_ms", ms_json(a->ended_ms));
  json_object_set_new(o, "error", text_json(a->error));
  json_object_set_new(o, "build", text_json(a->build));
  return o;
}

static json_t *step_json(const journal_rows *r, const journal_step *s) {
  json_t *o = json_object();
  json_object_set_new(o, "key", json_string(s->key));
  json_object_set_new(o, "name", json_string(s->name));
  json_object_set_new(o, "count", json_integer(s->count));
  json_object_set_new(o, "seq", json_integer(s->seq));
  json_object_set_new(o, "kind", json_string(duro_step_kind_name(s->type)));
  json_object_set_new(o, "status",
                      json_string(duro_step_status_name(s->status)));
  json_object_set_new(o, "result", text_json(s->result));
  json_object_set_new(o, "error", text_json(s->error));
  json_object_set_new(o, "attempts", json_integer(s->attempts));
  json_object_set_new(o, "started_ms", ms_json(s->started_ms));
  json_object_set_new(o, "ended_ms", ms_json(s->ended_ms));
  json_object_set_new(o, "wake_ms", ms_json(s->wake_ms));
  json_object_set_new(o, "attempt_started_ms", ms_json(s->attempt_started_ms));
  json_object_set_new(o, "build", text_json(s->build));
  /* A failed attempt's row names its step by key: an attempt of no step
   * (none is written so) would have no place here and is left out. */
  json_t *failed = json_array();
  for (size_t i = 0; i < r->n_attempts; i++)
    if (!strcmp(r->attempts[i].key, s->key))
      json_array_append_new(failed, attempt_json(&r->attempts[i]));
  json_object_set_new(o, "failed_attempts", failed);
  return o;
}

static json_t *event_json(const journal_event *ev) {
  json_t *o = json_object();
  json_object_set_new(o, "type", json_string(ev->type));
  json_object_set_new(o, "payload", text_json(ev->payload));
  json_object_set_new(o, "sent_ms", json_integer(ev->ts_ms));
  json_object_set_new(o, "consumed_by", text_json(ev->consumed_by));
  return o;
}

json_t *view_journal(const journal_rows *r, int64_t exported_ms) {
  const journal_instance *in = &r->inst;
  json_t *o = json_object();
  json_object_set_new(o, "format", json_string(VIEW_JOURNAL_FORMAT));
  json_object_set_new(o, "exported_ms", json_integer(exported_ms));
  json_object_set_new(o, "workflow", json_string(in->workflow));
  json_object_set_new(o, "id", json_string(in->id));
  json_object_set_new(o, "status", json_string(duro_status_name(in->status)));
  json_object_set_new(o, "params", text_json(in->params));
  json_object_set_new(o, "output", text_json(in->output));
  json_object_set_new(o, "error", text_json(in->error));
  json_object_set_new(o, "created_ms", ms_json(in->created_ms));
  json_object_set_new(o, "started_ms", ms_json(in->started_ms));
  json_object_set_new(o, "ended_ms", ms_json(in->ended_ms));
  json_object_set_new(o, "wake_ms", ms_json(in->wake_ms));
  json_object_set_new(o, "paused_ms", ms_json(in->paused_ms));
  json_object_set_new(
      o, "deadline_ms",
      ms_json(in->deadline_ms > 0 ? in->deadline_ms : JOURNAL_NONE));
  json_object_set_new(o, "wait_type", text_json(in->wait_type));
  json_object_set_new(o, "control", json_integer(in->control));
  json_object_set_new(o, "retention_ms", json_integer(in->retention_ms));
  json_object_set_new(o, "build", text_json(in->build));
  json_object_set_new(o, "restarts", json_integer(in->restarts));
  json_object_set_new(o, "parent",
                      r->parent_id
                          ? json_pack("{s:s,s:s}", "workflow",
                                      r->parent_workflow, "id", r->parent_id)
                          : json_null());
  size_t pc = (size_t)in->parent_close;
  json_object_set_new(
      o, "parent_close",
      json_string(pc < N_PARENT_CLOSE ? parent_close_names[pc] : "terminate"));
  if (in->traceparent) /* absent from the documents of older builds */
    json_object_set_new(o, "traceparent", json_string(in->traceparent));
  json_t *steps = json_array(), *events = json_array();
  for (size_t i = 0; i < r->n_steps; i++)
    json_array_append_new(steps, step_json(r, &r->steps[i]));
  for (size_t i = 0; i < r->n_events; i++)
    json_array_append_new(events, event_json(&r->events[i]));
  json_object_set_new(o, "steps", steps);
  json_object_set_new(o, "events", events);
  return o;
}

int duro_instance_export(duro_engine *e, const char *workflow, const char *id,
                         json_t **out) {
  journal_rows r;
  int64_t now = 0;
  int rc = duro_instance_rows(e, workflow, id, &r, &now);
  *out = rc ? NULL : view_journal(&r, now);
  journal_rows_free(&r);
  return rc;
}

/* ---- reading ---- */

/* A read in progress: its first error (the rest only count). */
typedef struct reading {
  char *err;
  size_t errlen;
  int failed;
} reading;

static int bad(reading *p, const char *where, const char *key, const char *fmt,
               ...) __attribute__((format(printf, 4, 5)));
static int bad(reading *p, const char *where, const char *key, const char *fmt,
               ...) {
  if (p->failed++)
    return -1;
  int n = snprintf(p->err, p->errlen, "%s%s%s: ", where,
                   *where && *key ? "." : "", key);
  if (n < 0 || (size_t)n >= p->errlen)
    return -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
  va_end(ap);
  return -1;
}

/* A member that must be there (null counts as there). */
static const json_t *member(reading *p, const json_t *o, const char *where,
                            const char *key) {
  const json_t *v = json_object_get(o, key);
  if (!v)
    bad(p, where, key, "missing");
  return v;
}

/* A string member (nullable: null reads as NULL), copied. */
static int text(reading *p, const json_t *o, const char *where, const char *key,
                int nullable, char **out) {
  *out = NULL;
  const json_t *v = member(p, o, where, key);
  if (!v)
    return -1;
  if (json_is_null(v) && nullable)
    return 0;
  if (!json_is_string(v) || (!nullable && !*json_string_value(v)))
    return bad(p, where, key, "must be a %sstring%s",
               nullable ? "" : "non-empty ", nullable ? " or null" : "");
  *out = xstrdup(json_string_value(v));
  return 0;
}

/* User data: a string holding JSON text, or null (when nullable). */
static int data(reading *p, const json_t *o, const char *where, const char *key,
                int nullable, char **out) {
  if (text(p, o, where, key, 1, out))
    return -1;
  if (!*out)
    return nullable ? 0 : bad(p, where, key, "must be a string of JSON text");
  json_t *v = json_loads(*out, JSON_DECODE_ANY, NULL);
  if (!v)
    return bad(p, where, key, "\"%.60s\" is not JSON text", *out);
  json_decref(v);
  return 0;
}

static int integer(reading *p, const json_t *o, const char *where,
                   const char *key, int64_t min, int64_t max, int64_t *out) {
  const json_t *v = member(p, o, where, key);
  if (!v)
    return -1;
  if (!json_is_integer(v) || json_integer_value(v) < min ||
      json_integer_value(v) > max)
    return bad(p, where, key, "must be an integer from %lld to %lld",
               (long long)min, (long long)max);
  *out = json_integer_value(v);
  return 0;
}

/* A time: Unix ms, or null for none (JOURNAL_NONE). */
static int ms(reading *p, const json_t *o, const char *where, const char *key,
              int64_t *out) {
  const json_t *v = member(p, o, where, key);
  if (!v)
    return -1;
  if (json_is_null(v)) {
    *out = JOURNAL_NONE;
    return 0;
  }
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return bad(p, where, key, "must be a time (Unix ms) or null");
  *out = json_integer_value(v);
  return 0;
}

/* A name of one of the enums of status.h, through its parse. */
static int named(reading *p, const json_t *o, const char *where,
                 const char *key, int (*parse)(const char *), const char *what,
                 int *out) {
  char *s = NULL;
  if (text(p, o, where, key, 0, &s))
    return -1;
  *out = parse(s);
  if (*out < 0)
    bad(p, where, key, "\"%s\" is not %s", s, what);
  free(s);
  return *out < 0 ? -1 : 0;
}

static int parent_close_parse(const char *s) {
  for (size_t i = 0; i < N_PARENT_CLOSE; i++)
    if (!strcmp(s, parent_close_names[i]))
      return (int)i;
  return -1;
}

static void read_attempt(reading *p, const json_t *o, const char *where,
                         const char *key, journal_attempt_row *a) {
  int64_t n = 0;
  *a = (journal_attempt_row){.key = xstrdup(key)};
  if (!json_is_object(o)) {
    bad(p, where, "", "must be an object");
    return;
  }
  integer(p, o, where, "number", 1, UINT32_MAX, &n);
  a->number = (uint32_t)n;
  ms(p, o, where, "started_ms", &a->started_ms);
  ms(p, o, where, "ended_ms", &a->ended_ms);
  data(p, o, where, "error", 1, &a->error);
  text(p, o, where, "build", 1, &a->build);
}

static void read_step(reading *p, const json_t *o, const char *where,
                      journal_rows *r, journal_step *s) {
  int64_t n = 0;
  int kind = 0, status = 0;
  memset(s, 0, sizeof *s);
  if (!json_is_object(o)) {
    bad(p, where, "", "must be an object");
    return;
  }
  text(p, o, where, "key", 0, &s->key);
  text(p, o, where, "name", 0, &s->name);
  if (integer(p, o, where, "count", 1, UINT32_MAX, &n) == 0)
    s->count = (uint32_t)n;
  integer(p, o, where, "seq", INT64_MIN + 1, INT64_MAX, &s->seq);
  if (named(p, o, where, "kind", duro_step_kind_parse, "a step kind", &kind) ==
      0)
    s->type = (duro_step_kind)kind;
  if (named(p, o, where, "status", duro_step_status_parse, "a step status",
            &status) == 0)
    s->status = (duro_step_status)status;
  data(p, o, where, "result", 1, &s->result);
  data(p, o, where, "error", 1, &s->error);
  if (integer(p, o, where, "attempts", 0, UINT32_MAX, &n) == 0)
    s->attempts = (uint32_t)n;
  ms(p, o, where, "started_ms", &s->started_ms);
  ms(p, o, where, "ended_ms", &s->ended_ms);
  ms(p, o, where, "wake_ms", &s->wake_ms);
  ms(p, o, where, "attempt_started_ms", &s->attempt_started_ms);
  text(p, o, where, "build", 1, &s->build);
  const json_t *failed = member(p, o, where, "failed_attempts");
  if (failed && !json_is_array(failed)) {
    bad(p, where, "failed_attempts", "must be an array");
    return;
  }
  size_t i;
  const json_t *a;
  json_array_foreach(failed, i, a) {
    char at[128];
    snprintf(at, sizeof at, "%s.failed_attempts[%zu]", where, i);
    r->attempts =
        xrealloc(r->attempts, (r->n_attempts + 1) * sizeof *r->attempts);
    read_attempt(p, a, at, s->key ? s->key : "", &r->attempts[r->n_attempts++]);
  }
}

static void read_event(reading *p, const json_t *o, const char *where,
                       journal_event *ev) {
  memset(ev, 0, sizeof *ev);
  if (!json_is_object(o)) {
    bad(p, where, "", "must be an object");
    return;
  }
  text(p, o, where, "type", 0, &ev->type);
  data(p, o, where, "payload", 1, &ev->payload);
  integer(p, o, where, "sent_ms", 0, INT64_MAX, &ev->ts_ms);
  text(p, o, where, "consumed_by", 1, &ev->consumed_by);
}

/* An array member, which may be empty. */
static const json_t *list(reading *p, const json_t *o, const char *key) {
  const json_t *v = member(p, o, "", key);
  if (v && !json_is_array(v)) {
    bad(p, "", key, "must be an array");
    return NULL;
  }
  return v;
}

static void read_instance(reading *p, const json_t *doc, journal_rows *r) {
  journal_instance *in = &r->inst;
  int status = 0, pc = 0;
  int64_t n = 0;
  text(p, doc, "", "workflow", 0, &in->workflow);
  text(p, doc, "", "id", 0, &in->id);
  if (in->id && !duro_instance_id_valid(in->id))
    bad(p, "", "id",
        "\"%.60s\" is not an instance id (1-100 characters of A-Z a-z "
        "0-9 _ . : -)",
        in->id);
  if (named(p, doc, "", "status", duro_status_parse, "an instance status",
            &status) == 0) {
    in->status = (duro_status)status;
    /* a journal stores neither: they live in a host's memory only */
    if (in->status == DURO_STATUS_RUNNING ||
        in->status == DURO_STATUS_WAITING_FOR_PAUSE)
      bad(p, "", "status", "\"%s\" is never stored in a journal",
          duro_status_name(in->status));
  }
  data(p, doc, "", "params", 0, &in->params);
  data(p, doc, "", "output", 1, &in->output);
  data(p, doc, "", "error", 1, &in->error);
  ms(p, doc, "", "created_ms", &in->created_ms);
  ms(p, doc, "", "started_ms", &in->started_ms);
  ms(p, doc, "", "ended_ms", &in->ended_ms);
  ms(p, doc, "", "wake_ms", &in->wake_ms);
  ms(p, doc, "", "paused_ms", &in->paused_ms);
  ms(p, doc, "", "deadline_ms", &in->deadline_ms);
  text(p, doc, "", "wait_type", 1, &in->wait_type);
  if (integer(p, doc, "", "control", 0, INT32_MAX, &n) == 0)
    in->control = (int)n;
  integer(p, doc, "", "retention_ms", 0, INT64_MAX, &in->retention_ms);
  text(p, doc, "", "build", 1, &in->build);
  integer(p, doc, "", "restarts", 0, INT32_MAX, &in->restarts);
  const json_t *parent = member(p, doc, "", "parent");
  if (parent && json_is_object(parent)) {
    text(p, parent, "parent", "workflow", 0, &r->parent_workflow);
    text(p, parent, "parent", "id", 0, &r->parent_id);
  } else if (parent && !json_is_null(parent)) {
    bad(p, "", "parent", "must be {\"workflow\",\"id\"} or null");
  }
  if (named(p, doc, "", "parent_close", parent_close_parse,
            "terminate, abandon or rollback", &pc) == 0)
    in->parent_close = pc;
  /* optional, and an invalid one ignored, as on create */
  in->traceparent =
      traceparent_norm(json_string_value(json_object_get(doc, "traceparent")));
}

int view_journal_parse(const json_t *doc, journal_rows *out,
                       int64_t *exported_ms, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  reading p = {.err = err, .errlen = errlen};
  if (!json_is_object(doc)) {
    snprintf(err, errlen, "the document is not a JSON object");
    return DURO_E_INVALID_ARGUMENT;
  }
  const char *format = json_string_value(json_object_get(doc, "format"));
  if (!format || strcmp(format, VIEW_JOURNAL_FORMAT)) {
    snprintf(err, errlen,
             "format: \"%.60s\" is not a format this build reads (\"%s\")",
             format ? format : "(none)", VIEW_JOURNAL_FORMAT);
    return DURO_E_INVALID_ARGUMENT;
  }
  int64_t when = 0;
  integer(&p, doc, "", "exported_ms", 0, INT64_MAX, &when);
  read_instance(&p, doc, out);
  const json_t *steps = list(&p, doc, "steps");
  const json_t *events = list(&p, doc, "events");
  if (!p.failed) {
    out->steps = xcalloc(json_array_size(steps) + 1, sizeof *out->steps);
    out->events = xcalloc(json_array_size(events) + 1, sizeof *out->events);
  }
  size_t i;
  const json_t *v;
  char where[64];
  json_array_foreach(p.failed ? NULL : steps, i, v) {
    snprintf(where, sizeof where, "steps[%zu]", i);
    read_step(&p, v, where, out, &out->steps[out->n_steps++]);
  }
  json_array_foreach(p.failed ? NULL : events, i, v) {
    snprintf(where, sizeof where, "events[%zu]", i);
    read_event(&p, v, where, &out->events[out->n_events++]);
  }
  if (p.failed) {
    journal_rows_free(out);
    return DURO_E_INVALID_ARGUMENT;
  }
  if (exported_ms)
    *exported_ms = when;
  return 0;
}
