/* step_api.c — the step runner's part of the plugin API table
 * (step_api_fill): beside the step calls (step_do.c, step_wait.c), run()'s
 * output and errors, an attempt's own calls (its result, failure,
 * idempotency key, deadline, cancellation), logging, and where the side
 * effects of other subsystems' calls go (step.h). */
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "step.h"
#include "step_internal.h"
#include "trace_ids.h"

static const char *api_step_error(duro_step *a) {
  return a->last_error ? a->last_error : "null";
}

static int api_error_is(duro_step *a, const char *name) {
  if (!a->last_error || !name)
    return 0;
  json_t *err = json_loads(a->last_error, 0, NULL);
  const char *got = json_string_value(json_object_get(err, "name"));
  int is = got && !strcmp(got, name);
  json_decref(err);
  return is;
}

/* run()'s own failure: the instance's error when run() returns it. */
static duro_rc api_vfail(duro_step *a, const char *fmt, va_list ap) {
  if (a->suspended)
    return DURO_SUSPEND;
  char *msg = fmt ? xvasprintf(fmt, ap) : xstrdup("run() failed");
  fail_with(a, "Error", msg);
  free(msg);
  return DURO_ERROR;
}

static duro_rc api_set_output(duro_step *a, const char *json) {
  if (a->suspended)
    return DURO_SUSPEND;
  const char *text = json ? json : "null";
  char why[256];
  int bad = json_text_check_at(text, a->e->max_step_result, why, sizeof why);
  if (bad) {
    char *msg = bad == DURO_E_OUTPUT_TOO_LARGE
                    ? xasprintf("the output is %zu bytes; the limit is %" PRId64
                                " bytes",
                                strlen(text), a->e->max_step_result)
                    : xasprintf("the output is not valid JSON: %s", why);
    fail_with(a, duro_err_name(bad), msg);
    free(msg);
    return DURO_ERROR;
  }
  a->output = arena_strdup(a, text);
  return DURO_OK;
}

static uint32_t api_attempt_number(const duro_attempt *at) {
  return at->number;
}

/* Parsed here, so that the error names the step and the position; the
 * size is checked when the callback returns. */
static int api_attempt_result(duro_attempt *at, const char *json) {
  const char *text = json ? json : "null";
  char why[256];
  free(at->bad_result);
  at->bad_result = NULL;
  if (json_text_check_at(text, 0, why, sizeof why) != 0) {
    at->bad_result = xasprintf("step \"%s\" attempt %u: the result is not "
                               "valid JSON: %s",
                               at->step->key, at->number, why);
    return DURO_E_INVALID_OUTPUT;
  }
  free(at->result);
  at->result = xstrdup(text);
  return 0;
}

static int api_attempt_vfail(duro_attempt *at, int final, const char *fmt,
                             va_list ap) {
  free(at->message);
  at->message = fmt ? xvasprintf(fmt, ap) : xstrdup("failed");
  at->failed = 1;
  at->final = final;
  return -1;
}

static const char *api_attempt_idempotency_key(const duro_attempt *at) {
  return at->idempotency_key;
}

/* The attempt's span in its instance's trace (trace_ids.h), sampled as
 * the instance's caller said, else as the exporter keeps traces. */
static const char *api_attempt_traceparent(const duro_attempt *at) {
  duro_attempt *w = (duro_attempt *)at; /* its own buffer, filled once */
  if (!w->traceparent[0]) {
    const journal_instance *in = &at->act->inst;
    trace_of t;
    char span[17];
    trace_of_instance(in->workflow, in->id, in->created_ms, in->traceparent,
                      &t);
    trace_step_span(in->workflow, in->id, in->created_ms, at->step->key,
                    at->number, span);
    int sampled = t.sampled >= 0
                      ? t.sampled
                      : trace_sampled(t.trace, at->act->e->trace_sample);
    traceparent_format(t.trace, span, sampled, w->traceparent);
  }
  return at->traceparent;
}

static int64_t api_attempt_deadline_ms(const duro_attempt *at) {
  return at->deadline_ms;
}

static int api_attempt_cancelled(const duro_attempt *at) {
  const worker *w = at->act->worker;
  return __atomic_load_n(&at->cancelled, __ATOMIC_ACQUIRE) ||
         engine_mono_ms(at->act->e) > at->deadline_mono ||
         __atomic_load_n(&at->act->e->stopping, __ATOMIC_ACQUIRE) ||
         (w && __atomic_load_n(&w->abandoned, __ATOMIC_ACQUIRE));
}

const log_ctx *step_current_log(void) {
  static __thread log_ctx at;
  if (!step_running_act)
    return NULL;
  at = step_running_act->log;
  if (step_running_attempt) {
    at.step = step_running_attempt->step->key;
    at.attempt = step_running_attempt->number;
  }
  return &at;
}

duro_attempt *step_current_attempt(void) { return step_running_attempt; }

char *step_keep(char *s) { return arena_take(step_running_act, s); }

journal_batch *attempt_effects(duro_attempt *at) { return &at->sends; }

char *attempt_strdup(duro_attempt *at, const char *s) {
  return arena_strdup(at->act, s);
}

int64_t attempt_now_ms(const duro_attempt *at) { return now_ms(at->act); }

static void api_vlog(int level, const char *fmt, va_list ap) {
  duro_step *a = step_running_act;
  /* Lines from run() while it replays were already logged once; a dry
   * run logs nothing. */
  if (a && ((a->replaying && !step_running_attempt) || a->dry))
    return;
  const log_ctx *at = step_current_log();
  if (a && log_enabled(level)) { /* kept with the instance too */
    va_list copy;
    va_copy(copy, ap);
    char *message = xvasprintf(fmt, copy);
    va_end(copy);
    engine_log_keep(a, at->step, at->attempt, level, message); /* takes it */
  }
  log_vat(level, at ? at : &(log_ctx){.source = "plugin"}, fmt, ap);
}

/* The step runner's members of the plugin API table; the table's layout
 * (and the members others fill) is api.c's. */
void step_api_fill(duro_api *t) {
  t->do_step = step_api_do;
  t->sleep = step_api_sleep;
  t->sleep_until = step_api_sleep_until;
  t->wait_for_event = step_api_wait_for_event;
  t->wait_any = step_api_wait_any;
  t->child_start = step_api_child_start;
  t->child_wait = step_api_child_wait;
  t->do_all = step_api_do_all;
  t->do_with_rollback = step_api_do_with_rollback;
  t->rollback = step_api_rollback;
  t->step_error = api_step_error;
  t->set_output = api_set_output;
  t->attempt_number = api_attempt_number;
  t->attempt_result = api_attempt_result;
  t->attempt_vfail = api_attempt_vfail;
  t->attempt_idempotency_key = api_attempt_idempotency_key;
  t->attempt_deadline_ms = api_attempt_deadline_ms;
  t->attempt_traceparent = api_attempt_traceparent;
  t->attempt_cancelled = api_attempt_cancelled;
  t->vlog = api_vlog;
  t->vfail = api_vfail;
  t->error_is = api_error_is;
  t->set_attribute = step_set_attribute;
}
