/* worker_api.c — the plugin API table inside a worker process: every
 * call that the engine's step runner answers becomes a request on the
 * activation's channel (worker_proto.h); an attempt's own calls (its
 * number, key, deadline, result and failure) are kept here and sent with
 * the callback's return, so a step costs the plugin no more round trips
 * than its duro_do and the callback's CALL. */
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "error.h"
#include "json_access.h"
#include "log.h"
#include "util.h"
#include "worker_process.h"
#include "worker_proto.h"

static wk_act *act_of(duro_step *s) { return (wk_act *)s; }

/* The engine's answer to a request: its rc, and its text in *text
 * (borrowed until the next request; may be NULL). */
static int64_t ask(wk_act *a, const char **text) {
  wk_exchange(a);
  if (text)
    *text = a->kind == WM_REPLY ? a->in.reply.text : NULL;
  return a->kind == WM_REPLY ? a->in.reply.rc : DURO_E_IO;
}

/* ---- an attempt's callback, run on a pool thread or inline
 * (worker_calls.c) ---- */

void wk_callback_run(wk_act *a) {
  duro_step_fn fn = (duro_step_fn)(uintptr_t)a->call.fn;
  void *arg = (void *)(uintptr_t)a->call.arg;
  wk_attempt at = {.act = a,
                   .number = a->call.number,
                   .deadline_ms = a->call.deadline_ms,
                   .key = a->call.key,
                   .traceparent = a->call.traceparent};
  a->call.key = NULL; /* the attempt's now */
  a->call.traceparent = NULL;
  int rc = -1;
  if (clock_boot_ms() < a->call.begin_by && wk_call_claim(a)) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    wk_begin_callback(a);
    if (a->call.rollback)
      rc = ((duro_rollback_fn)(uintptr_t)a->call.fn)(
          (duro_attempt *)&at, a->call.output ? a->call.output : "null", arg);
    else
      rc = fn((duro_attempt *)&at, arg);
    wk_end_callback(a);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    wk_calls_note(a->call.fn, (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 +
                                  (t1.tv_nsec - t0.tv_nsec));
  } else {
    /* the host's lease may have lapsed since it sent this (frozen with
     * it): another host may have run the step meanwhile; or a pause or
     * terminate revoked it, acknowledged already */
    at.result_set = WM_RESULT_NOT_BEGUN;
  }
  if (at.result_set == 1 && wk_max_result > 0 &&
      (int64_t)strlen(at.result) > wk_max_result) {
    /* not sent: the engine refuses it as step.output_too_large, and its
     * frame could pass what the engine reads from a worker */
    size_t len = strlen(at.result);
    free(at.result);
    at.result = xasprintf("%zu", len);
    at.result_set = WM_RESULT_TOO_LARGE;
  }
  channel_begin(&a->m, WM_RETURN, a->id);
  wire_put_i64(&a->m, rc);
  wire_put_u32(&a->m, (uint32_t)at.result_set);
  wire_put_str(&a->m, at.result);
  wire_put_u32(&a->m, (uint32_t)at.failed);
  wire_put_u32(&a->m, (uint32_t)at.final);
  wire_put_str(&a->m, at.message);
  free(at.key);
  free(at.traceparent);
  free(at.result);
  free(at.message);
}

/* A step's configuration as DO and DO_ALL's branches carry it: of the
 * plugin's struct, only what its build's size holds (`resource` is minor
 * 11's). */
static void put_config(wk_act *a, const duro_step_config *cfg) {
  wire_buf *m = &a->m;
  const duro_retries *r = cfg ? cfg->retries : NULL;
  size_t size = a->step_config_size ? a->step_config_size : sizeof *cfg;
  const char *resource =
      cfg && size >= offsetof(duro_step_config, resource) + sizeof(char *)
          ? cfg->resource
          : NULL;
  wire_put_u32(m, cfg != NULL);
  wire_put_u32(m, r != NULL);
  wire_put_u32(m, r ? r->limit : 0);
  wire_put_str(m, r ? r->delay : NULL);
  wire_put_u32(m, r ? (uint32_t)r->backoff : 0);
  wire_put_str(m, cfg ? cfg->timeout : NULL);
  wire_put_str(m, resource);
}

/* What undoes a step, as DO_ROLLBACK and DO_ALL's branches carry it. */
static void put_rollback(wire_buf *m, const duro_rollback_cfg *rb) {
  const duro_retries *r = rb->retries;
  wire_put_u64(m, (uint64_t)(uintptr_t)rb->fn);
  wire_put_u64(m, (uint64_t)(uintptr_t)rb->arg);
  wire_put_u32(m, r != NULL);
  wire_put_u32(m, r ? r->limit : 0);
  wire_put_str(m, r ? r->delay : NULL);
  wire_put_u32(m, r ? (uint32_t)r->backoff : 0);
  wire_put_str(m, rb->timeout);
}

/* A DO (rb NULL) or a DO_ROLLBACK: the step's callbacks come as CALLs
 * while this fiber waits for the answer. */
static duro_rc do_step_as(uint32_t kind, duro_step *s, const char *name,
                          const duro_step_config *cfg, duro_step_fn fn,
                          void *arg, const duro_rollback_cfg *rb,
                          const char **result) {
  wk_act *a = act_of(s);
  if (result)
    *result = NULL;
  channel_begin(&a->m, kind, a->id);
  wire_put_str(&a->m, name);
  put_config(a, cfg);
  wire_put_u64(&a->m, (uint64_t)(uintptr_t)fn);
  wire_put_u64(&a->m, (uint64_t)(uintptr_t)arg);
  wire_put_u32(&a->m, result != NULL);
  if (rb)
    put_rollback(&a->m, rb);
  wk_exchange(a);
  while (a->kind == WM_CALL)
    wk_call_start(a); /* on a pool thread, until the answer to its RETURN */
  if (a->kind != WM_REPLY)
    return DURO_ERROR;
  if (result)
    *result = wk_own(a, a->in.reply.text);
  return (duro_rc)a->in.reply.rc;
}

static duro_rc api_do_step(duro_step *s, const char *name,
                           const duro_step_config *cfg, duro_step_fn fn,
                           void *arg, const char **result) {
  return do_step_as(WM_DO, s, name, cfg, fn, arg, NULL, result);
}

static duro_rc api_sleep(duro_step *s, const char *name, const char *duration) {
  wk_act *a = act_of(s);
  channel_begin(&a->m, WM_SLEEP, a->id);
  wire_put_str(&a->m, name);
  wire_put_str(&a->m, duration);
  return (duro_rc)ask(a, NULL);
}

static duro_rc api_sleep_until(duro_step *s, const char *name,
                               int64_t unix_ms) {
  wk_act *a = act_of(s);
  channel_begin(&a->m, WM_SLEEP_UNTIL, a->id);
  wire_put_str(&a->m, name);
  wire_put_i64(&a->m, unix_ms);
  return (duro_rc)ask(a, NULL);
}

static duro_rc api_wait_for_event(duro_step *s, const char *name,
                                  const char *type, const char *timeout,
                                  const char **event) {
  wk_act *a = act_of(s);
  if (event)
    *event = NULL;
  channel_begin(&a->m, WM_WAIT, a->id);
  wire_put_str(&a->m, name);
  wire_put_str(&a->m, type);
  wire_put_str(&a->m, timeout);
  wire_put_u32(&a->m, event != NULL);
  const char *text;
  duro_rc rc = (duro_rc)ask(a, &text);
  if (event)
    *event = wk_own(a, text);
  return rc;
}

static duro_rc api_wait_any(duro_step *s, const char *name,
                            const char *const *types, size_t n,
                            int64_t deadline_ms, const char **event) {
  wk_act *a = act_of(s);
  if (event)
    *event = NULL;
  /* a list the engine refuses goes as its count alone: the engine says
   * why, as it does for code it runs itself */
  int has_types = types != NULL && n <= WM_WAIT_ANY_MAX;
  channel_begin(&a->m, WM_WAIT_ANY, a->id);
  wire_put_str(&a->m, name);
  wire_put_u32(&a->m, n > UINT32_MAX ? UINT32_MAX : (uint32_t)n);
  wire_put_u32(&a->m, (uint32_t)has_types);
  for (size_t i = 0; has_types && i < n; i++)
    wire_put_str(&a->m, types[i]);
  wire_put_i64(&a->m, deadline_ms);
  wire_put_u32(&a->m, event != NULL);
  const char *text;
  duro_rc rc = (duro_rc)ask(a, &text);
  if (event)
    *event = wk_own(a, text);
  return rc;
}

_Static_assert(WM_WAIT_ANY_MAX == DURO_WAIT_ANY_MAX,
               "a WAIT_ANY carries as many types as duro_wait_any takes");

static duro_rc api_do_with_rollback(duro_step *s, const char *name,
                                    const duro_step_config *cfg,
                                    duro_step_fn fn, void *arg,
                                    const duro_rollback_cfg *rb,
                                    const char **result) {
  return do_step_as(rb ? WM_DO_ROLLBACK : WM_DO, s, name, cfg, fn, arg, rb,
                    result);
}

/* The rollbacks' callbacks come as CALLs under ids of their own
 * (worker_main.c runs each as a branch) while this fiber waits. */
static duro_rc api_rollback(duro_step *s) {
  wk_act *a = act_of(s);
  channel_begin(&a->m, WM_ROLLBACK, a->id);
  return (duro_rc)ask(a, NULL);
}

/* The branches go to the engine, whose CALLs for them come under ids of
 * their own (worker_main.c runs each as a branch), while this fiber
 * waits for the answer with every branch's outcome. */
static duro_rc api_do_all(duro_step *s, const char *name, duro_branch *branches,
                          size_t n, size_t size, uint32_t max_in_flight,
                          uint32_t flags) {
  wk_act *a = act_of(s);
  /* a call the engine refuses goes with no branch: it says why */
  int ok = branches && n >= 1 && n <= WM_PARALLEL_MAX &&
           size >= offsetof(duro_branch, error) + sizeof(const char *);
  channel_begin(&a->m, WM_DO_ALL, a->id);
  wire_put_str(&a->m, name);
  wire_put_u32(&a->m, max_in_flight);
  wire_put_u32(&a->m, flags);
  wire_put_u32(&a->m, ok ? (uint32_t)n : 0);
  for (size_t i = 0; ok && i < n; i++) {
    duro_branch *b = (duro_branch *)(void *)((char *)branches + i * size);
    b->result = b->error = NULL;
    put_config(a, b->cfg);
    wire_put_u64(&a->m, (uint64_t)(uintptr_t)b->fn);
    wire_put_u64(&a->m, (uint64_t)(uintptr_t)b->arg);
    const duro_rollback_cfg *rb =
        size >= offsetof(duro_branch, rollback) + sizeof(void *) ? b->rollback
                                                                 : NULL;
    wire_put_u32(&a->m, rb != NULL);
    if (rb)
      put_rollback(&a->m, rb);
  }
  wk_exchange(a);
  if (a->kind == WM_REPLY)
    return (duro_rc)a->in.reply.rc; /* never sent: refused as a frame */
  if (a->kind != WM_REPLY_ALL)
    return DURO_ERROR;
  const wf_reply_all *r = &a->in.reply_all;
  const char *cursor = r->first;
  for (uint32_t i = 0; ok && i < r->n && i < n; i++) {
    duro_branch *b = (duro_branch *)(void *)((char *)branches + i * size);
    const char *result, *error;
    worker_frame_reply_all_item(&cursor, &result, &error);
    b->result = wk_own(a, result);
    b->error = wk_own(a, error);
  }
  return (duro_rc)r->rc;
}

_Static_assert(WM_PARALLEL_MAX == DURO_PARALLEL_MAX,
               "a DO_ALL carries as many branches as duro_do_all takes");

static const char *api_step_error(duro_step *s) {
  wk_act *a = act_of(s);
  channel_begin(&a->m, WM_STEP_ERROR, a->id);
  const char *text;
  ask(a, &text);
  return text ? wk_own(a, text) : "null";
}

static duro_rc api_set_output(duro_step *s, const char *json) {
  wk_act *a = act_of(s);
  channel_begin(&a->m, WM_SET_OUTPUT, a->id);
  wire_put_str(&a->m, json);
  return (duro_rc)ask(a, NULL);
}

static duro_rc api_vfail(duro_step *s, const char *fmt, va_list ap) {
  wk_act *a = act_of(s);
  char *msg = fmt ? xvasprintf(fmt, ap) : NULL;
  channel_begin(&a->m, WM_FAIL, a->id);
  wire_put_str(&a->m, msg);
  free(msg);
  return (duro_rc)ask(a, NULL);
}

static int api_error_is(duro_step *s, const char *name) {
  wk_act *a = act_of(s);
  channel_begin(&a->m, WM_ERROR_IS, a->id);
  wire_put_str(&a->m, name);
  return (int)ask(a, NULL);
}

static int api_set_attribute(duro_step *s, const char *name, const char *json) {
  wk_act *a = act_of(s);
  channel_begin(&a->m, WM_SET_ATTR, a->id);
  wire_put_str(&a->m, name);
  wire_put_str(&a->m, json);
  return (int)ask(a, NULL);
}

/* ---- an attempt's own calls ---- */

static uint32_t api_attempt_number(const duro_attempt *at) {
  return ((const wk_attempt *)at)->number;
}

/* Kept, and judged again by the engine with the callback's return; the
 * answer here is the same parse. */
static int api_attempt_result(duro_attempt *at_, const char *json) {
  wk_attempt *at = (wk_attempt *)at_;
  const char *text = json ? json : "null";
  free(at->result);
  at->result = xstrdup(text);
  at->result_set = 1;
  json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
  json_decref(v);
  return v ? 0 : DURO_E_INVALID_OUTPUT;
}

static int api_attempt_vfail(duro_attempt *at_, int final, const char *fmt,
                             va_list ap) {
  wk_attempt *at = (wk_attempt *)at_;
  free(at->message);
  at->message = fmt ? xvasprintf(fmt, ap) : xstrdup("failed");
  at->failed = 1;
  at->final = final;
  return -1;
}

static const char *api_attempt_idempotency_key(const duro_attempt *at) {
  return ((const wk_attempt *)at)->key;
}

static const char *api_attempt_traceparent(const duro_attempt *at) {
  return ((const wk_attempt *)at)->traceparent;
}

static int64_t api_attempt_deadline_ms(const duro_attempt *at) {
  return ((const wk_attempt *)at)->deadline_ms;
}

static int api_attempt_cancelled(const duro_attempt *at_) {
  wk_act *a = ((const wk_attempt *)at_)->act;
  channel_begin(&a->m, WM_CANCELLED, a->id);
  return ask(a, NULL) == 1;
}

/* ---- bindings: handles for the life of the process, by name ---- */

typedef struct wk_binding {
  struct wk_binding *next;
  uint32_t kind; /* how it was asked for: WM_ENV_WORKFLOW, _QUEUE, _PIPELINE */
  char name[];
} wk_binding;

static pthread_mutex_t bindings_mu = PTHREAD_MUTEX_INITIALIZER;
static wk_binding *bindings;

/* The handle of a binding the engine said is bound (a plugin may keep
 * it across activations, as it may in the engine). */
static wk_binding *binding_intern(const char *name, uint32_t kind) {
  pthread_mutex_lock(&bindings_mu);
  wk_binding *b = bindings;
  while (b && (b->kind != kind || strcmp(b->name, name)))
    b = b->next;
  if (!b) {
    b = xmalloc(sizeof *b + strlen(name) + 1);
    b->kind = kind;
    strcpy(b->name, name);
    b->next = bindings;
    bindings = b;
  }
  pthread_mutex_unlock(&bindings_mu);
  return b;
}

static wk_binding *env_binding(const char *name, uint32_t kind) {
  wk_act *a = wk_current;
  if (!a || !name)
    return NULL;
  channel_begin(&a->m, kind, a->id);
  wire_put_str(&a->m, name);
  return ask(a, NULL) == 1 ? binding_intern(name, kind) : NULL;
}

static duro_workflow *api_env_workflow(duro_env *env, const char *binding) {
  (void)env;
  return (duro_workflow *)env_binding(binding, WM_ENV_WORKFLOW);
}

static duro_queue *api_env_queue(duro_env *env, const char *binding) {
  (void)env;
  return (duro_queue *)env_binding(binding, WM_ENV_QUEUE);
}

static duro_pipeline *api_env_pipeline(duro_env *env, const char *binding) {
  (void)env;
  return (duro_pipeline *)env_binding(binding, WM_ENV_PIPELINE);
}

/* Calls on a binding need the activation they are made in. */
static wk_act *binding_call(const void *handle, uint32_t kind) {
  wk_act *a = wk_current;
  if (!a || !handle)
    return NULL;
  channel_begin(&a->m, kind, a->id);
  wire_put_str(&a->m, ((const wk_binding *)handle)->name);
  return a;
}

static int api_workflow_create(duro_workflow *wf, const char *id,
                               const char *params) {
  wk_act *a = binding_call(wf, WM_WF_CREATE);
  if (!a)
    return DURO_E_INVALID_ARGUMENT;
  wire_put_str(&a->m, id);
  wire_put_str(&a->m, params);
  return (int)ask(a, NULL);
}

static int api_workflow_send_event(duro_workflow *wf, const char *id,
                                   const char *type, const char *payload) {
  wk_act *a = binding_call(wf, WM_WF_EVENT);
  if (!a)
    return DURO_E_INVALID_ARGUMENT;
  wire_put_str(&a->m, id);
  wire_put_str(&a->m, type);
  wire_put_str(&a->m, payload);
  return (int)ask(a, NULL);
}

/* A binding's name, as the engine finds it again (NULL: none). */
static const char *binding_name(const duro_workflow *wf) {
  return wf ? ((const wk_binding *)wf)->name : NULL;
}

static duro_rc api_child_start(duro_step *s, const char *name,
                               duro_workflow *wf, const char *id,
                               const char *params, int parent_close,
                               const char **child_id) {
  wk_act *a = act_of(s);
  if (child_id)
    *child_id = NULL;
  channel_begin(&a->m, WM_CHILD_START, a->id);
  wire_put_str(&a->m, name);
  wire_put_str(&a->m, binding_name(wf));
  wire_put_str(&a->m, id);
  wire_put_str(&a->m, params);
  wire_put_u32(&a->m, (uint32_t)parent_close);
  wire_put_u32(&a->m, child_id != NULL);
  const char *text;
  duro_rc rc = (duro_rc)ask(a, &text);
  if (child_id)
    *child_id = wk_own(a, text);
  return rc;
}

static duro_rc api_child_wait(duro_step *s, const char *name, duro_workflow *wf,
                              const char *id, const char **output) {
  wk_act *a = act_of(s);
  if (output)
    *output = NULL;
  channel_begin(&a->m, WM_CHILD_WAIT, a->id);
  wire_put_str(&a->m, name);
  wire_put_str(&a->m, binding_name(wf));
  wire_put_str(&a->m, id);
  wire_put_u32(&a->m, output != NULL);
  const char *text;
  duro_rc rc = (duro_rc)ask(a, &text);
  if (output)
    *output = wk_own(a, text);
  return rc;
}

static int api_queue_send(duro_queue *q, const char *json, int64_t delay_ms) {
  wk_act *a = binding_call(q, WM_QUEUE_SEND);
  if (!a)
    return DURO_E_INVALID_ARGUMENT;
  wire_put_str(&a->m, json);
  wire_put_i64(&a->m, delay_ms);
  return (int)ask(a, NULL);
}

/* A batch of sends: QUEUE_BATCH, or QUEUE_TRACED with traceparent. */
static int send_batch(duro_queue *q, const char *const *json, size_t n,
                      int64_t delay_ms, int traced, const char *traceparent) {
  wk_act *a = binding_call(q, traced ? WM_QUEUE_TRACED : WM_QUEUE_BATCH);
  if (!a)
    return DURO_E_INVALID_ARGUMENT;
  wire_put_i64(&a->m, delay_ms);
  wire_put_u32(&a->m, (uint32_t)n);
  for (size_t i = 0; i < n; i++)
    wire_put_str(&a->m, json ? json[i] : NULL);
  if (traced)
    wire_put_str(&a->m, traceparent);
  return (int)ask(a, NULL);
}

static int api_queue_send_batch(duro_queue *q, const char *const *json,
                                size_t n, int64_t delay_ms) {
  return send_batch(q, json, n, delay_ms, 0, NULL);
}

static int api_queue_send_traced(duro_queue *q, const char *const *json,
                                 size_t n, int64_t delay_ms,
                                 const char *traceparent) {
  return send_batch(q, json, n, delay_ms, 1, traceparent);
}

static int api_pipeline_send(duro_pipeline *p, const char *const *records,
                             size_t n) {
  wk_act *a = binding_call(p, WM_PIPELINE_SEND);
  if (!a)
    return p ? DURO_E_INVALID_ARGUMENT : DURO_E_BINDING_NOT_FOUND;
  if (n > UINT32_MAX)
    n = UINT32_MAX; /* the engine refuses that many */
  wire_put_u32(&a->m, (uint32_t)n);
  for (size_t i = 0; i < n; i++)
    wire_put_str(&a->m, records ? records[i] : NULL);
  return (int)ask(a, NULL);
}

/* ---- a queue handler's batch: marked here, sent with its END ---- */

/* The longest retry delay a queue takes (the engine's
 * DURO_QUEUE_MAX_DELAY_MS, which it checks again). */
#define WK_QUEUE_MAX_DELAY_MS (12LL * 3600 * 1000)

static const char *api_batch_queue(const duro_message_batch *b) {
  return b ? ((const wk_batch *)b)->queue : NULL;
}

static size_t api_batch_size(const duro_message_batch *b) {
  return b ? ((const wk_batch *)b)->n : 0;
}

static const duro_message *api_batch_message(const duro_message_batch *b_,
                                             size_t i) {
  const wk_batch *b = (const wk_batch *)b_;
  return b && i < b->n ? &b->msgs[i] : NULL;
}

static int batch_mark(duro_message_batch *b_, size_t i, uint32_t how,
                      int64_t delay_ms) {
  wk_batch *b = (wk_batch *)b_;
  if (!b || i >= b->n || delay_ms > WK_QUEUE_MAX_DELAY_MS)
    return DURO_E_INVALID_ARGUMENT;
  b->mark[i] = how;
  b->delay[i] = delay_ms;
  return 0;
}

static int api_message_ack(duro_message_batch *b, size_t i) {
  return batch_mark(b, i, WM_MARK_ACK, 0);
}

static int api_message_retry(duro_message_batch *b, size_t i,
                             int64_t delay_ms) {
  return batch_mark(b, i, WM_MARK_RETRY, delay_ms);
}

static int api_ack_all(duro_message_batch *b) {
  int rc = b ? 0 : DURO_E_INVALID_ARGUMENT;
  for (size_t i = 0; !rc && i < api_batch_size(b); i++)
    rc = batch_mark(b, i, WM_MARK_ACK, 0);
  return rc;
}

static int api_retry_all(duro_message_batch *b, int64_t delay_ms) {
  int rc = b ? 0 : DURO_E_INVALID_ARGUMENT;
  for (size_t i = 0; !rc && i < api_batch_size(b); i++)
    rc = batch_mark(b, i, WM_MARK_RETRY, delay_ms);
  return rc;
}

#define WK_MAX_LOG_LINE (64 * 1024)

/* A line from an activation goes to the engine, which places it (and
 * keeps a replay quiet); one from elsewhere (init, a thread of the
 * plugin's own) is logged here. */
static void api_vlog(int level, const char *fmt, va_list ap) {
  wk_act *a = wk_current;
  if (!a) {
    log_vwrite(level, "plugin", fmt, ap);
    return;
  }
  char *text = xvasprintf(fmt, ap);
  /* a log line is no bulk channel: cut long ones (the engine reads no
   * frame over what a step result may be) */
  if (strlen(text) > WK_MAX_LOG_LINE)
    strcpy(text + WK_MAX_LOG_LINE - 4, "...");
  channel_begin(&a->m, WM_LOG, a->id);
  wire_put_u32(&a->m, (uint32_t)level);
  wire_put_str(&a->m, text);
  free(text);
  wk_send(a);
}

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  api_vlog(DURO_LOG_WARN, fmt, ap);
  va_end(ap);
}

/* ---- JSON accessors: worked out here, no request; what they return
 * lives as long as the activation (or handler) running on this thread,
 * its callbacks' included (NULL with none: init, a plugin's thread) ---- */

static const char *keep(char *s) {
  wk_act *a = wk_current;
  const char *kept = a ? wk_own(a, s) : NULL;
  free(s);
  return kept;
}

static const char *api_json_string(const char *json, const char *ptr) {
  return keep(json_access_string(json, ptr));
}

static const char *api_json_value(const char *json, const char *ptr) {
  return keep(json_access_value(json, ptr));
}

static const char *api_json_vpack(const char *fmt, va_list ap) {
  char err[512];
  char *json = json_access_vpack(fmt, ap, err, sizeof err);
  if (!json)
    warn("duro_json_pack: %s", err);
  return keep(json);
}

/* duro_api's members answered here without a frame (an attempt's own
 * calls, a batch's marks, error names, JSON accessors), each with its function;
 * the others are WM_CALLS, each api_<member>, sending its frame. */
#define LOCAL_CALLS(X)                                                         \
  X(attempt_number, api_attempt_number)                                        \
  X(attempt_result, api_attempt_result)                                        \
  X(attempt_vfail, api_attempt_vfail)                                          \
  X(attempt_idempotency_key, api_attempt_idempotency_key)                      \
  X(attempt_deadline_ms, api_attempt_deadline_ms)                              \
  X(attempt_traceparent, api_attempt_traceparent)                              \
  X(strerror, duro_err_str)                                                    \
  X(err_name, duro_err_name)                                                   \
  X(batch_queue, api_batch_queue)                                              \
  X(batch_size, api_batch_size)                                                \
  X(batch_message, api_batch_message)                                          \
  X(message_ack, api_message_ack)                                              \
  X(message_retry, api_message_retry)                                          \
  X(ack_all, api_ack_all)                                                      \
  X(retry_all, api_retry_all)                                                  \
  X(json_str, api_json_string)                                                 \
  X(json_val, api_json_value)                                                  \
  X(json_int, json_access_integer)                                             \
  X(json_num, json_access_number)                                              \
  X(json_bool, json_access_boolean)                                            \
  X(json_vpack, api_json_vpack)

/* A member added to duro_api is in neither list: the table would hold a
 * NULL the plugin calls. */
_Static_assert(sizeof(duro_api) ==
                   2 * sizeof(uint32_t) +
                       (0 WM_CALLS(WM_ONE) LOCAL_CALLS(WM_ONE)) *
                           sizeof(void (*)(void)),
               "a duro_api member is in neither WM_CALLS nor LOCAL_CALLS");

static duro_api table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_fill(void) {
  table.size = sizeof table;
  table.abi_minor = DURO_ABI_MINOR;
#define FORWARDED(member, kind, where) table.member = api_##member;
#define LOCAL(member, fn) table.member = fn;
  WM_CALLS(FORWARDED)
  LOCAL_CALLS(LOCAL)
#undef FORWARDED
#undef LOCAL
}

const duro_api *worker_api_table(void) {
  pthread_once(&table_once, table_fill);
  return &table;
}
