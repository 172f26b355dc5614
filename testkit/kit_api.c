/* kit_api.c — the API table the kit binds plugins to: the host's own,
 * with each step call run() makes recorded on its activation (for the
 * crash runs' comparisons), and every step callback passed through
 * kit_step, which counts it, applies a mock, and marks the crash runs'
 * boundaries around it.  Nothing here decides anything durable: the
 * host's step runner still does all of it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "kit_internal.h"
#include "util.h"

static const duro_api *host;
static duro_api table;

static kit_activation *act_of(duro_test *t, duro_step *s) {
  for (size_t i = 0; t && i < t->n_acts; i++)
    if (t->acts[i]->step == s)
      return t->acts[i];
  return NULL;
}

static duro_rc step_fail(duro_step *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  duro_rc rc = host->vfail(s, fmt, ap);
  va_end(ap);
  return rc;
}

duro_rc kit_run(duro_step *step, const duro_event *ev, duro_env *env) {
  duro_test *t = kit_current;
  duro_run_fn run = NULL;
  for (size_t i = 0; i < t->n_wfs && !run; i++)
    if (!strcmp(t->wfs[i].name, ev->workflow))
      run = t->wfs[i].run;
  if (!run || t->n_acts == sizeof t->acts / sizeof *t->acts)
    return step_fail(step, "the test kit runs no workflow \"%s\" here",
                     ev->workflow);
  kit_activation a = {.step = step,
                      .workflow = ev->workflow,
                      .id = ev->instance_id,
                      .instance =
                          xasprintf("%s/%s", ev->workflow, ev->instance_id)};
  t->acts[t->n_acts++] = &a;
  int was = kit_clock_enter(KIT_RUN);
  duro_rc rc = run(step, ev, env);
  kit_clock_leave(was);
  if (t->crash.active)
    kit_crash_activation_end(t, &a);
  /* activations may interleave (fibers): take this one out wherever it is */
  for (size_t i = 0; i < t->n_acts; i++)
    if (t->acts[i] == &a) {
      t->acts[i] = t->acts[--t->n_acts];
      break;
    }
  for (size_t i = 0; i < a.n_calls; i++)
    free(a.calls[i].name);
  free(a.calls);
  free(a.instance);
  return rc;
}

/* Records a call run() made on its activation, and lets a crash run
 * compare it with the reference. */
static void record(duro_test *t, kit_activation *a, const char *kind,
                   const char *name) {
  if (a->n_calls == a->cap_calls) {
    a->cap_calls = a->cap_calls ? 2 * a->cap_calls : 16;
    a->calls = xrealloc(a->calls, a->cap_calls * sizeof *a->calls);
  }
  kit_call *c = &a->calls[a->n_calls++];
  snprintf(c->kind, sizeof c->kind, "%s", kind);
  c->name = xstrdup(name ? name : "");
  if (t->crash.active)
    kit_crash_call(t, a, kind, name ? name : "");
}

/* ---- a step's callback, passed through kit_step ---- */

typedef struct kit_cb {
  kit_activation *a;
  const char *name;
  duro_step_fn fn;
  void *arg;
  char *key;    /* of its last attempt, owned */
  char *result; /* what its last attempt set, owned */
  int ran;      /* a callback ran in this call */
} kit_cb;

/* The callback running on this thread now: its duro_attempt_result is
 * kept for the crash runs' comparison. */
static _Thread_local kit_cb *running;

/* "charge#1" from "instance-id/charge#1" or "instance-id/charge#1@2". */
static char *key_of(const kit_activation *a, const char *idem) {
  size_t id_len = strlen(a->id);
  const char *k = idem;
  if (!strncmp(idem, a->id, id_len) && idem[id_len] == '/')
    k = idem + id_len + 1;
  char *key = xstrdup(k);
  char *at = strrchr(key, '@');
  if (at && at[1] && strspn(at + 1, "0123456789") == strlen(at + 1))
    *at = '\0';
  return key;
}

static int fail_attempt(duro_attempt *at, int final, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = host->attempt_vfail(at, final, fmt, ap);
  va_end(ap);
  return rc;
}

static int kit_step(duro_attempt *at, void *arg) {
  kit_cb *cb = arg;
  duro_test *t = kit_current;
  const char *wf = cb->a->workflow;
  free(cb->key);
  free(cb->result);
  cb->result = NULL;
  cb->key = key_of(cb->a, host->attempt_idempotency_key(at));
  cb->ran = 1;
  kit_count_call(t, wf, cb->key);
  /* in a crash run, the callback reads the time its step began in the
   * first run: a restart's delays do not change what it records */
  if (t->crash.active)
    kit_clock_pin(kit_crash_attempt(t, cb->a->instance, cb->key));
  kit_mock *m = kit_mock_find(t, wf, cb->name, cb->key);
  int rc;
  running = cb;
  int was = kit_clock_enter(KIT_STEP);
  if (m && m->fail_final)
    rc = fail_attempt(at, 1, "%s", m->fail_message);
  else if (m && host->attempt_number(at) <= m->fail_first)
    rc = fail_attempt(at, 0, "%s", m->fail_message);
  else if (m && m->fn)
    rc = m->fn(at, m->arg);
  else if (m && m->result)
    rc = table.attempt_result(at, m->result) == 0 ? 0 : -1;
  else
    rc = cb->fn(at, cb->arg);
  kit_clock_leave(was);
  kit_clock_pin(-1);
  running = NULL;
  if (rc == 0 && t->crash.active)
    kit_crash_returned(t, cb->a->instance, cb->key, cb->result);
  return rc;
}

static int kit_attempt_result(duro_attempt *at, const char *json) {
  int rc = host->attempt_result(at, json);
  if (rc == 0 && running) {
    free(running->result);
    running->result = json ? xstrdup(json) : NULL;
  }
  return rc;
}

/* After a do call: a step whose callback ran here and that completed
 * was committed just now. */
static void done(duro_test *t, kit_cb *cb, duro_rc rc) {
  if (rc == DURO_OK && cb->ran && t->crash.active)
    kit_crash_completed(t, cb->a->instance, cb->key);
  free(cb->key);
  free(cb->result);
}

static duro_rc kit_do_with_rollback(duro_step *s, const char *name,
                                    const duro_step_config *cfg,
                                    duro_step_fn fn, void *arg,
                                    const duro_rollback_cfg *rollback,
                                    const char **result) {
  duro_test *t = kit_current;
  kit_activation *a = act_of(t, s);
  if (!a)
    return host->do_with_rollback(s, name, cfg, fn, arg, rollback, result);
  record(t, a, "do", name);
  kit_cb cb = {.a = a, .name = name, .fn = fn, .arg = arg};
  int was = kit_clock_enter(KIT_HOST);
  duro_rc rc =
      host->do_with_rollback(s, name, cfg, kit_step, &cb, rollback, result);
  kit_clock_leave(was);
  done(t, &cb, rc);
  return rc;
}

static duro_rc kit_do_step(duro_step *s, const char *name,
                           const duro_step_config *cfg, duro_step_fn fn,
                           void *arg, const char **result) {
  duro_test *t = kit_current;
  kit_activation *a = act_of(t, s);
  if (!a)
    return host->do_step(s, name, cfg, fn, arg, result);
  record(t, a, "do", name);
  kit_cb cb = {.a = a, .name = name, .fn = fn, .arg = arg};
  int was = kit_clock_enter(KIT_HOST);
  duro_rc rc = host->do_step(s, name, cfg, kit_step, &cb, result);
  kit_clock_leave(was);
  done(t, &cb, rc);
  return rc;
}

static duro_rc kit_do_all(duro_step *s, const char *name, duro_branch *b,
                          size_t n, size_t branch_size, uint32_t max_in_flight,
                          uint32_t flags) {
  duro_test *t = kit_current;
  kit_activation *a = act_of(t, s);
  if (!a || branch_size != sizeof(duro_branch) || !b || n == 0 ||
      n > DURO_PARALLEL_MAX)
    return host->do_all(s, name, b, n, branch_size, max_in_flight, flags);
  char kind[16]; /* its branches take n keys: "do_all*n" */
  snprintf(kind, sizeof kind, "do_all*%zu", n);
  record(t, a, kind, name);
  duro_branch *mine = xcalloc(n, sizeof *mine);
  kit_cb *cbs = xcalloc(n, sizeof *cbs);
  for (size_t i = 0; i < n; i++) {
    cbs[i] = (kit_cb){.a = a, .name = name, .fn = b[i].fn, .arg = b[i].arg};
    mine[i] = b[i];
    mine[i].fn = kit_step;
    mine[i].arg = &cbs[i];
  }
  int was = kit_clock_enter(KIT_HOST);
  duro_rc rc =
      host->do_all(s, name, mine, n, sizeof *mine, max_in_flight, flags);
  kit_clock_leave(was);
  for (size_t i = 0; i < n; i++) {
    b[i].result = mine[i].result;
    b[i].error = mine[i].error;
    done(t, &cbs[i], mine[i].result ? DURO_OK : DURO_ERROR);
  }
  free(cbs);
  free(mine);
  return rc;
}

/* ---- the calls that are only recorded ---- */

static duro_rc kit_sleep(duro_step *s, const char *name, const char *duration) {
  kit_activation *a = act_of(kit_current, s);
  if (a)
    record(kit_current, a, "sleep", name);
  int was = kit_clock_enter(KIT_HOST);
  duro_rc rc = host->sleep(s, name, duration);
  kit_clock_leave(was);
  return rc;
}

static duro_rc kit_sleep_until(duro_step *s, const char *name,
                               int64_t unix_ms) {
  kit_activation *a = act_of(kit_current, s);
  if (a)
    record(kit_current, a, "sleep", name);
  int was = kit_clock_enter(KIT_HOST);
  duro_rc rc = host->sleep_until(s, name, unix_ms);
  kit_clock_leave(was);
  return rc;
}

static duro_rc kit_wait_for_event(duro_step *s, const char *name,
                                  const char *type, const char *timeout,
                                  const char **event) {
  kit_activation *a = act_of(kit_current, s);
  if (a)
    record(kit_current, a, "wait", name);
  int was = kit_clock_enter(KIT_HOST);
  duro_rc rc = host->wait_for_event(s, name, type, timeout, event);
  kit_clock_leave(was);
  return rc;
}

static duro_rc kit_wait_any(duro_step *s, const char *name,
                            const char *const *types, size_t n,
                            int64_t deadline_ms, const char **event) {
  kit_activation *a = act_of(kit_current, s);
  if (a)
    record(kit_current, a, "wait", name);
  int was = kit_clock_enter(KIT_HOST);
  duro_rc rc = host->wait_any(s, name, types, n, deadline_ms, event);
  kit_clock_leave(was);
  return rc;
}

static duro_rc kit_child_start(duro_step *s, const char *name,
                               duro_workflow *wf, const char *id,
                               const char *params, int parent_close,
                               const char **child_id) {
  kit_activation *a = act_of(kit_current, s);
  if (a)
    record(kit_current, a, "child", name);
  int was = kit_clock_enter(KIT_HOST);

  duro_rc rc =
      host->child_start(s, name, wf, id, params, parent_close, child_id);
  kit_clock_leave(was);
  return rc;
}

static duro_rc kit_child_wait(duro_step *s, const char *name, duro_workflow *wf,
                              const char *id, const char **output) {
  kit_activation *a = act_of(kit_current, s);
  if (a)
    record(kit_current, a, "child", name);
  int was = kit_clock_enter(KIT_HOST);
  duro_rc rc = host->child_wait(s, name, wf, id, output);
  kit_clock_leave(was);
  return rc;
}

const duro_api *kit_api(void) {
  if (!host) {
    host = duro_host_api();
    table = *host;
    table.do_step = kit_do_step;
    table.do_with_rollback = kit_do_with_rollback;
    table.do_all = kit_do_all;
    table.attempt_result = kit_attempt_result;
    table.sleep = kit_sleep;
    table.sleep_until = kit_sleep_until;
    table.wait_for_event = kit_wait_for_event;
    table.wait_any = kit_wait_any;
    table.child_start = kit_child_start;
    table.child_wait = kit_child_wait;
  }
  return &table;
}

const duro_api *duro_test_api(void) { return kit_api(); }
