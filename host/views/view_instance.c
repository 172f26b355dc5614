/* view_instance.c — JSON of the instance reads and creations
 * (view_instance.h): the keys and their order the HTTP API has always
 * sent, built from engine.h's structs.  Nothing here decides anything: a
 * call that fails returns its code and no JSON. */
#include "view_instance.h"

#include <stdlib.h>
#include <string.h>

#include "debounce.h"
#include "outcomes.h"
#include "resources.h"
#include "singleton.h"
#include "view_flow.h"

#include "error.h"

/* User data as JSON: null for none, a string for a text that is not
 * JSON. */
static json_t *json_raw_or_null(const char *text) {
  if (!text)
    return json_null();
  json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
  return v ? v : json_string(text);
}

static json_t *json_ms(int64_t ms) {
  return ms == DURO_NO_TIME ? json_null() : json_integer(ms);
}

static json_t *json_ms_or_null(int64_t ms) {
  return ms < 0 ? json_null() : json_integer(ms);
}

static json_t *json_string_or_null(const char *s) {
  return s ? json_string(s) : json_null();
}

static json_t *attempt_json(const duro_attempt_info *a) {
  return json_pack("{s:I,s:o,s:o,s:o,s:s?}", "number", (json_int_t)a->number,
                   "started_ms", json_ms(a->started_ms), "ended_ms",
                   json_ms(a->ended_ms), "error", json_raw_or_null(a->error),
                   "build", a->build);
}

static json_t *step_json(const duro_step_info *s) {
  json_t *attempts = json_array();
  for (size_t i = 0; i < s->n_attempts; i++)
    json_array_append_new(attempts, attempt_json(&s->attempts[i]));
  return json_pack("{s:s,s:s,s:I,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o}", "key",
                   s->key, "name", s->name, "count", (json_int_t)s->count,
                   "type", duro_step_kind_name(s->kind), "status",
                   duro_step_status_name(s->status), "result",
                   json_raw_or_null(s->result), "error",
                   json_raw_or_null(s->error), "started_ms",
                   json_ms(s->started_ms), "ended_ms", json_ms(s->ended_ms),
                   "wake_ms", json_ms(s->wake_ms), "attempts", attempts);
}

static json_t *event_json(const duro_event_info *ev) {
  return json_pack("{s:s,s:o,s:I,s:o}", "type", ev->type, "payload",
                   json_raw_or_null(ev->payload), "sent_ms",
                   (json_int_t)ev->sent_ms, "consumed_by",
                   json_string_or_null(ev->consumed_by));
}

/* A number attribute as JSON: a whole one as an integer (100, not
 * 100.0), as it was most likely given. */
static json_t *attr_num_json(double d) {
  if (d == (double)(json_int_t)d && d > -9007199254740992.0 &&
      d < 9007199254740992.0)
    return json_integer((json_int_t)d);
  return json_real(d);
}

/* {"customer": "c42", "amount": 100}: its search attributes. */
static json_t *attrs_json(const duro_attr *v, size_t n) {
  json_t *o = json_object();
  for (size_t i = 0; i < n; i++)
    json_object_set_new(o, v[i].name,
                        v[i].str ? json_string(v[i].str)
                                 : attr_num_json(v[i].num));
  return o;
}

json_t *view_instance(const duro_instance_info *in) {
  json_t *steps = json_array(), *builds = json_array(), *events = json_array();
  for (size_t i = 0; i < in->n_steps; i++)
    json_array_append_new(steps, step_json(&in->steps[i]));
  for (size_t i = 0; i < in->n_builds; i++)
    json_array_append_new(builds, json_string(in->builds[i]));
  for (size_t i = 0; i < in->n_events; i++)
    json_array_append_new(events, event_json(&in->events[i]));
  json_t *o = json_pack(
      "{s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "id", in->id, "workflow",
      in->workflow, "status", duro_status_name(in->status), "params",
      json_raw_or_null(in->params), "output", json_raw_or_null(in->output),
      "error", json_raw_or_null(in->error), "created_ms",
      json_ms(in->created_ms), "started_ms", json_ms(in->started_ms),
      "ended_ms", json_ms(in->ended_ms), "wake_ms", json_ms(in->wake_ms),
      "steps", steps);
  json_object_set_new(
      o, "deadline_ms",
      json_ms(in->deadline_ms > 0 ? in->deadline_ms : DURO_NO_TIME));
  json_object_set_new(o, "build", json_string_or_null(in->build));
  json_object_set_new(o, "builds", builds);
  json_object_set_new(o, "restarts", json_integer(in->restarts));
  json_object_set_new(o, "several_builds", json_boolean(in->n_builds > 1));
  json_object_set_new(o, "events", events);
  json_object_set_new(o, "wait_type", json_string_or_null(in->wait_type));
  json_object_set_new(o, "parent",
                      in->parent_id
                          ? json_pack("{s:s,s:s}", "workflow",
                                      in->parent_workflow, "id", in->parent_id)
                          : json_null());
  json_t *kids = json_array();
  for (size_t i = 0; i < in->n_children; i++)
    json_array_append_new(
        kids, json_pack("{s:s,s:s,s:s}", "workflow", in->children[i].workflow,
                        "id", in->children[i].id, "status",
                        duro_status_name(in->children[i].status)));
  json_object_set_new(o, "children", kids);
  json_object_set_new(o, "attributes", attrs_json(in->attrs, in->n_attrs));
  return o;
}

json_t *view_instance_summary(const duro_instance_info *in) {
  return json_pack(
      "{s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o}", "id", in->id, "workflow",
      in->workflow, "status", duro_status_name(in->status), "output",
      json_raw_or_null(in->output), "error", json_raw_or_null(in->error),
      "created_ms", json_ms(in->created_ms), "started_ms",
      json_ms(in->started_ms), "ended_ms", json_ms(in->ended_ms), "deadline_ms",
      json_ms(in->deadline_ms > 0 ? in->deadline_ms : DURO_NO_TIME));
}

/* A listed instance's last step: null before its first. */
static json_t *brief_step_json(const duro_instance_brief *b) {
  if (!b->step_key)
    return json_null();
  return json_pack("{s:s,s:s,s:s,s:s,s:I,s:o}", "key", b->step_key, "name",
                   b->step_name, "type", duro_step_kind_name(b->step_type),
                   "status", duro_step_status_name(b->step_status), "attempts",
                   (json_int_t)b->step_attempts, "wake_ms",
                   json_ms(b->step_wake_ms));
}

json_t *view_instance_page(const duro_instance_page *p) {
  json_t *list = json_array();
  for (size_t i = 0; i < p->n; i++) {
    const duro_instance_brief *b = &p->v[i];
    json_array_append_new(
        list,
        json_pack("{s:s,s:s,s:I,s:o,s:o,s:s?,s:o}", "id", b->id, "status",
                  duro_status_name(b->status), "created_ms",
                  (json_int_t)b->created_ms, "started_ms",
                  json_ms(b->started_ms), "ended_ms", json_ms(b->ended_ms),
                  "wait_type", b->wait_type, "step", brief_step_json(b)));
  }
  return json_pack("{s:o,s:s?}", "instances", list, "cursor",
                   p->cursor[0] ? p->cursor : NULL);
}

json_t *view_workflow_counts(const duro_workflow_counts *c) {
  json_t *by_status = json_object();
  for (size_t i = 0; i < c->n; i++)
    json_object_set_new(by_status, duro_status_name(c->v[i].status),
                        json_integer(c->v[i].n));
  return json_pack("{s:s,s:o,s:I,s:I}", "name", c->name, "instances", by_status,
                   "backlog", (json_int_t)c->backlog, "oldest_queued_age_ms",
                   (json_int_t)c->oldest_queued_age_ms);
}

static json_t *create_result_json(const duro_create_result *r, int with_rc) {
  json_t *created = json_array(), *errors = json_array();
  size_t index = 0, e = 0; /* request i: the created and the refused */
  for (size_t i = 0; i < r->n_created; i++, index++) {
    for (; e < r->n_errors && r->errors[e].index == index; e++)
      index++;
    /* flow.singleton's skip, flow.debounce: its key's live instance,
     * nothing created */
    if (r->skipped && r->skipped[i])
      json_array_append_new(created,
                            json_pack("{s:s,s:b,s:I}", "id", r->created[i],
                                      r->skipped[i] == DURO_CREATE_DEBOUNCED
                                          ? "debounced"
                                          : "skipped",
                                      1, "index", (json_int_t)index));
    else
      json_array_append_new(created, json_pack("{s:s}", "id", r->created[i]));
  }
  for (size_t i = 0; i < r->n_errors; i++) {
    const duro_create_error *err = &r->errors[i];
    json_t *o = json_pack("{s:I,s:s?,s:s,s:s}", "index", (json_int_t)err->index,
                          "id", err->id, "code", duro_err_name(err->code),
                          "message", duro_err_str(err->code));
    if (with_rc)
      json_object_set_new(o, "rc", json_integer(err->code));
    if (err->retry_after_ms > 0)
      json_object_set_new(o, "retry_after_ms",
                          json_integer(err->retry_after_ms));
    json_array_append_new(errors, o);
  }
  return json_pack("{s:o,s:o}", "created", created, "errors", errors);
}

json_t *view_create_result(const duro_create_result *r) {
  return create_result_json(r, 0);
}

int duro_instance_create_batch(duro_engine *e, const char *workflow,
                               const duro_create_req *reqs, size_t n,
                               json_t **result) {
  duro_create_result r;
  int rc = duro_instance_create_many(e, workflow, reqs, n, &r);
  *result = rc ? NULL : create_result_json(&r, 1);
  duro_create_result_free(&r);
  return rc;
}

int duro_instance_describe(duro_engine *e, const char *workflow, const char *id,
                           json_t **out) {
  duro_instance_info in;
  int rc = duro_instance_read(e, workflow, id, &in);
  *out = rc ? NULL : view_instance(&in);
  /* queued for its key's turn: why, in words */
  char *why = !rc && in.status == DURO_STATUS_QUEUED
                  ? duro_flow_why(e, workflow, id)
                  : NULL;
  if (!rc && !why && in.status == DURO_STATUS_QUEUED)
    why = duro_singleton_why(e, workflow, id);
  if (!rc && !why && in.status == DURO_STATUS_QUEUED)
    why = duro_debounce_why(e, workflow, id);
  /* waiting for a resource's turn: which, and how it counts */
  if (!rc && !why && in.status == DURO_STATUS_WAITING && in.wait_type &&
      !strcmp(in.wait_type, RESOURCE_WAIT_TYPE))
    why = duro_resource_why(e, workflow, id);
  if (why)
    json_object_set_new(*out, "waiting_for", json_string(why));
  free(why);
  duro_instance_info_free(&in);
  return rc;
}

int duro_instance_summary(duro_engine *e, const char *workflow, const char *id,
                          json_t **out) {
  duro_instance_info in;
  int rc = duro_instance_read_summary(e, workflow, id, &in);
  *out = rc ? NULL : view_instance_summary(&in);
  duro_instance_info_free(&in);
  return rc;
}

int duro_instance_list(duro_engine *e, const char *workflow,
                       const duro_list_filter *f, size_t limit,
                       const char *cursor, json_t **out) {
  duro_instance_page p;
  int rc = duro_instance_list_page(e, workflow, f, limit, cursor, &p);
  *out = rc ? NULL : view_instance_page(&p);
  duro_instance_page_free(&p);
  return rc;
}

static json_t *counts_array(const uint64_t *n) {
  json_t *a = json_array();
  for (size_t i = 0; i < OUTCOME_MINUTES; i++)
    json_array_append_new(a, json_integer((json_int_t)n[i]));
  return a;
}

static json_t *sum_of(const uint64_t *n) {
  uint64_t sum = 0;
  for (size_t i = 0; i < OUTCOME_MINUTES; i++)
    sum += n[i];
  return json_integer((json_int_t)sum);
}

/* A workflow's last hour on this host (outcomes.h): totals, run times
 * and each minute's counts, oldest first. */
static json_t *view_workflow_hour(duro_engine *e, const char *workflow) {
  duro_workflow_hour h;
  duro_workflow_hour_read(e, workflow, &h);
  json_t *ms =
      json_pack("{s:o,s:o,s:o}", "p50_ms", json_ms_or_null(h.p50_ms), "p99_ms",
                json_ms_or_null(h.p99_ms), "max_ms", json_ms_or_null(h.max_ms));
  json_t *minutes = json_pack(
      "{s:o,s:o,s:o,s:o}", "created", counts_array(h.created), "completed",
      counts_array(h.completed), "errored", counts_array(h.errored),
      "terminated", counts_array(h.terminated));
  return json_pack("{s:I,s:I,s:I,s:o,s:o,s:o,s:o,s:I,s:o,s:o}", "start_ms",
                   (json_int_t)h.start_ms, "since_ms", (json_int_t)h.since_ms,
                   "minute_ms", (json_int_t)h.minute_ms, "created",
                   sum_of(h.created), "completed", sum_of(h.completed),
                   "errored", sum_of(h.errored), "terminated",
                   sum_of(h.terminated), "ran", (json_int_t)h.ran, "run_time",
                   ms, "per_minute", minutes);
}

/* The busiest keys a rule shows on GET /workflows/{wf}. */
#define FLOW_KEYS_SHOWN 10

int duro_workflow_stats(duro_engine *e, const char *workflow, json_t **out) {
  duro_workflow_counts c;
  int rc = duro_workflow_counts_read(e, workflow, &c);
  *out = rc ? NULL : view_workflow_counts(&c);
  duro_workflow_counts_free(&c);
  duro_flow_stats fs;
  if (!rc && duro_flow_stats_read(e, workflow, FLOW_KEYS_SHOWN, &fs) == 0 &&
      fs.n)
    json_object_set_new(*out, "flow", view_flow_stats(&fs));
  if (!rc)
    duro_flow_stats_free(&fs);
  duro_singleton_stats ss;
  if (!rc)
    duro_singleton_stats_read(e, workflow, &ss);
  if (!rc && ss.key)
    json_object_set_new(*out, "singleton",
                        json_pack("{s:s,s:s,s:I,s:I,s:I}", "key", ss.key,
                                  "mode", ss.mode, "keys", (json_int_t)ss.keys,
                                  "live", (json_int_t)ss.live, "waiting",
                                  (json_int_t)ss.waiting));
  if (!rc)
    free(ss.key);
  duro_debounce_stats ds;
  if (!rc)
    duro_debounce_stats_read(e, workflow, &ds);
  if (!rc && ds.key)
    json_object_set_new(*out, "debounce",
                        json_pack("{s:s,s:I,s:I,s:I,s:I}", "key", ds.key,
                                  "period_ms", (json_int_t)ds.period_ms,
                                  "max_wait_ms", (json_int_t)ds.max_wait_ms,
                                  "pending", (json_int_t)ds.pending, "merged",
                                  (json_int_t)ds.merged));
  if (!rc)
    free(ds.key);
  if (!rc)
    json_object_set_new(*out, "last_hour", view_workflow_hour(e, workflow));
  return rc;
}
