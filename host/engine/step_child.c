/* step_child.c — child workflows from run(): duro_child_start, a step
 * whose commit creates the child, linked to its parent (so a replay never
 * starts a second one, and a crash never leaves one without the step that
 * started it), with the parent's deadline when it has none of its own;
 * and duro_child_wait, a wait for the event the children driver
 * (children/) stores for the parent in the commit that ends the child:
 * the child's output, or its error as the step's error. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "error.h"
#include "ids.h"
#include "log.h"
#include "step_internal.h"

char *engine_child_event_type(const char *workflow, const char *id) {
  return xasprintf(DURO_RESERVED_EVENT_PREFIX "child:%s/%s", workflow, id);
}

/* The step errors for good with `name` and `msg` (freed here). */
static duro_rc child_refused(duro_step *a, journal_step *s, const char *name,
                             char *msg) {
  fail_with(a, name, msg);
  free(msg);
  s->status = DURO_STEP_ERRORED;
  s->error = (char *)a->last_error;
  s->ended_ms = now_ms(a);
  put_step(a, s);
  return step_error_durable(a);
}

/* The id a journaled child_start step gave its child (its result is the
 * id as a JSON string), copied to the arena. */
static const char *id_of_result(duro_step *a, const char *result) {
  json_t *v = result ? json_loads(result, JSON_DECODE_ANY, NULL) : NULL;
  const char *id =
      json_is_string(v) ? arena_strdup(a, json_string_value(v)) : NULL;
  json_decref(v);
  return id;
}

duro_rc step_api_child_start(duro_step *a, const char *name,
                             duro_workflow *child, const char *id,
                             const char *params, int parent_close,
                             const char **child_id) {
  const char *key, *result = NULL;
  uint32_t count;
  journal_step *s;
  duro_rc rc;
  if (child_id)
    *child_id = NULL;
  if (step_begin(a, name, DURO_STEP_CHILD_START, &key, &count, &s, &rc))
    return rc;
  if (from_journal(a, s, key, &result, &rc)) {
    if (rc == DURO_OK && child_id)
      *child_id = id_of_result(a, result);
    return rc;
  }
  if (step_limit_reached(a, key))
    return DURO_ERROR;
  s = step_new(a, key, name, count, DURO_STEP_CHILD_START);
  const wf_reg *w = (const wf_reg *)child;
  if (!w)
    return child_refused(
        a, s, duro_err_name(DURO_E_BINDING_NOT_FOUND),
        xasprintf("childStart \"%s\": no such workflow binding", key));
  if (parent_close != DURO_PARENT_CLOSE_TERMINATE &&
      parent_close != DURO_PARENT_CLOSE_ABANDON &&
      parent_close != DURO_PARENT_CLOSE_ROLLBACK)
    return child_refused(
        a, s, "Error",
        xasprintf("childStart \"%s\": parent_close %d is not "
                  "DURO_PARENT_CLOSE_TERMINATE, _ABANDON or _ROLLBACK",
                  key, parent_close));
  if (!id) {
    id = arena_take(a, engine_random_id(now_ms(a)));
  } else if (!duro_instance_id_valid(id)) {
    return child_refused(
        a, s, duro_err_name(DURO_E_INVALID_ID),
        xasprintf("childStart \"%s\": \"%.100s\" is not an instance id (1-100 "
                  "characters of A-Z a-z 0-9 _ . : -)",
                  key, id));
  }
  if (params && json_text_check(params, a->e->max_step_result) != 0)
    return child_refused(
        a, s, duro_err_name(DURO_E_INVALID_PARAMS),
        xasprintf("childStart \"%s\": params are not JSON text within "
                  "engine.max_step_result",
                  key));
  journal_instance there = {0};
  int found = engine_instance_get(a->e, w->name, id, &there);
  journal_instance_clear(&there);
  if (found == 0)
    return child_refused(
        a, s, duro_err_name(DURO_E_ALREADY_EXISTS),
        xasprintf("childStart \"%s\": %s/%s exists already", key, w->name, id));
  if (found != DURO_E_NOT_FOUND) {
    a->storage_failed = 1;
    a->suspended = 1;
    a->reason = SUSPEND_SHUTDOWN;
    return DURO_SUSPEND;
  }
  /* The child's row and the step that started it: one commit. */
  int64_t now = now_ms(a);
  const char *kid = arena_strdup(a, id);
  duro_create_req req = {.id = kid, .params = params, .retention_ms = -1};
  journal_instance *row = arena_alloc(a, sizeof *row);
  size_t at = a->batch.n;
  engine_instance_insert_op(w, kid, &req, now, row, &a->batch);
  row->params = arena_strdup(a, row->params);
  row->parent = a->inst.rowid;
  row->parent_close = parent_close;
  /* none of its own: what is left of its parent's */
  if (row->deadline_ms <= 0 && a->inst.deadline_ms > 0)
    row->deadline_ms = a->inst.deadline_ms;
  /* its trace is its parent's: its root span a child of the parent's */
  trace_of t;
  trace_of_instance(a->inst.workflow, a->inst.id, a->inst.created_ms,
                    a->inst.traceparent, &t);
  char *tp = arena_alloc(a, TRACEPARENT_LEN + 1);
  traceparent_format(
      t.trace, t.root,
      t.sampled >= 0 ? t.sampled : trace_sampled(t.trace, a->e->trace_sample),
      tp);
  row->traceparent = tp;
  json_t *v = json_string(kid);
  s->result = arena_take(a, json_dumps(v, JSON_ENCODE_ANY));
  json_decref(v);
  s->status = DURO_STEP_COMPLETE;
  s->ended_ms = now;
  put_step(a, s);
  if (step_flush(a) != 0) {
    a->suspended = 1;
    if (a->reason != SUSPEND_ABANDONED)
      a->reason = SUSPEND_SHUTDOWN;
    return DURO_SUSPEND;
  }
  const journal_op *op = &a->batch.ops[at];
  if (op->rc == 0)
    engine_instance_created(a->e, op->out_rowid);
  else /* created by someone else between the look and the commit */
    log_at(DURO_LOG_WARN, &a->log,
           "childStart \"%s\": %s/%s was created meanwhile by another; "
           "the step names that instance",
           key, w->name, kid);
  if (child_id)
    *child_id = kid;
  return DURO_OK;
}

/* The child's end as the wait's event gave it: its output (DURO_OK), or
 * its error as the step's (DURO_ERROR). */
static duro_rc child_outcome(duro_step *a, const char *wf, const char *id,
                             const char *event, const char **output) {
  json_t *ev = json_loads(event, 0, NULL);
  json_t *p = json_object_get(ev, "payload");
  const char *status = json_string_value(json_object_get(p, "status"));
  duro_rc rc = DURO_ERROR;
  if (status && !strcmp(status, "complete")) {
    json_t *out = json_object_get(p, "output");
    if (output)
      *output = arena_take(a, json_dumps(out ? out : json_null(),
                                         JSON_COMPACT | JSON_ENCODE_ANY));
    rc = DURO_OK;
  } else {
    json_t *err = json_object_get(p, "error");
    const char *name = json_string_value(json_object_get(err, "name"));
    const char *msg = json_string_value(json_object_get(err, "message"));
    char *text =
        xasprintf("child %s/%s %s%s%s", wf, id, status ? status : "ended",
                  msg ? ": " : "", msg ? msg : "");
    fail_with(a,
              name ? name
                   : (status && !strcmp(status, "terminated")
                          ? DURO_ERR_TERMINATED
                          : "Error"),
              text);
    free(text);
  }
  json_decref(ev);
  return rc;
}

duro_rc step_api_child_wait(duro_step *a, const char *name,
                            duro_workflow *child, const char *id,
                            const char **output) {
  if (output)
    *output = NULL;
  const wf_reg *w = (const wf_reg *)child;
  if (!w || !id) {
    if (a->suspended)
      return DURO_SUSPEND;
    fail_with(a, "Error",
              !w ? "childWait: no such workflow binding"
                 : "childWait: no child instance id");
    return DURO_ERROR;
  }
  char *type = engine_child_event_type(w->name, id);
  const char *event = NULL;
  /* no timeout of its own: the longest wait (and the instance's deadline,
   * which cuts every wait) */
  duro_rc rc =
      step_api_wait_for_event(a, name, arena_take(a, type), "365 days", &event);
  if (rc != DURO_OK)
    return rc;
  return child_outcome(a, w->name, id, event, output);
}
