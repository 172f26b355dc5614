/* duro.h — the one header a duro plugin includes.
 *
 * A plugin is a shared object exporting one function, `duro_plugin`, that
 * returns a static descriptor (write it with DURO_PLUGIN(...)).  The host
 * checks the descriptor's magic, size, ABI version and layout fingerprint,
 * then hands the plugin its API as a table of function pointers.  Every
 * `duro_*` call below is a static inline wrapper over that table, so a plugin
 * links against nothing of the host's (build it with -Wl,-z,defs).
 *
 * Rules for workflow authors (the journal depends on them):
 *
 *  1. run() starts from the top on every activation.  Completed steps return
 *     their journaled result without calling their callback (replay), so code
 *     outside steps runs again each time: put every side effect in a step.
 *  2. Step names must be deterministic.  A step's key is its name plus how
 *     many times that name occurred before in the activation ("charge#1",
 *     "charge#2"), so loops are fine; a renamed step is a new step.
 *  3. Branch only on params and step results.  Wrap the clock, randomness and
 *     anything read from the world in a step.
 *  4. Side effects must be idempotent: an attempt can run more than once when
 *     the host dies before its result is committed.  Pass
 *     duro_attempt_idempotency_key() ("instance-id/step-key", plus
 *     "@<n>" once the instance was restarted n times) to the services you
 *     call.
 *  5. Every step call returns DURO_OK, DURO_SUSPEND or DURO_ERROR.  Return
 *     from run() at once on DURO_SUSPEND: DURO_TRY() does it for you.  The
 *     compiler warns when a step call's result is ignored (DURO_MUST_CHECK_);
 *     with GCC even a (void) cast does not silence it: use the result.
 *     Suspension is sticky: once told to suspend, every later step call in
 *     the activation returns DURO_SUSPEND and does nothing.
 *  6. Memory: strings the host hands you (params, results, events, errors)
 *     are borrowed until the activation ends; strings you hand the host are
 *     copied.  Free only what you allocated.
 *  7. Plugins start no threads, install no signal handlers, keep no mutable
 *     globals: a hot reload loads a fresh copy and only the journal survives.
 *     Your code runs in worker processes of the host (plugins[].workers, 1
 *     by default), never in the process that holds the journal: a global is
 *     per worker process (with workers: 2, two copies), and a worker that
 *     dies (a crash, exit(), a kill) fails only the attempt inside its
 *     callback, charged toward engine.max_crashes; another worker runs the
 *     rest.  Pointers you pass (a callback's arg) stay in your process.
 *  8. A step callback that blocks holds its thread in the worker: run()
 *     executes on a fiber of it, and the other activations that share the
 *     thread (each waiting for its step's commit) resume only when the
 *     callback returns.  Give slow calls a step timeout: past it the attempt
 *     is given up on and the activations parked beside it run elsewhere.
 */
#ifndef DURO_H
#define DURO_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DURO_ABI_MAJOR 1
#define DURO_ABI_MINOR 12
#define DURO_PLUGIN_MAGIC 0x4f525544u /* "DURO" little-endian */

/* Which plugins a host loads.  Within a major, the structs that cross the
 * boundary only grow, at their end: the API table, duro_event, the
 * descriptor, duro_workflow_def, duro_step_config and duro_retries.  The
 * descriptor records their sizes as the plugin was built (its own in
 * `size`, the others in its layout fingerprint), and the host loads a
 * plugin when
 *   - its abi_major is the host's;
 *   - its abi_minor is at most the host's.  A plugin built against an older
 *     minor loads on a newer host.  One built against a newer minor is
 *     refused at load, naming abi_minor and both values: it may call
 *     members this host lacks, and load time is when an operator can act on
 *     that, not halfway through a workflow;
 *   - no size in its fingerprint is larger than the host's (smaller means
 *     older), and its pointer and long sizes are the host's.
 * Then each side reads only what both know.  Of what the host hands over
 * (the table, duro_event) a plugin reads the members its header declares,
 * which a host as new or newer always has.  Of what the plugin hands over
 * (the descriptor, its workflow table, step configs and retries) the host
 * reads only as many bytes as the plugin's sizes say and takes zero for
 * the rest.  Whoever appends a member bumps DURO_ABI_MINOR and makes zero
 * mean "as before". */

/* ---- status codes and errors ----------------------------------------- */

typedef enum duro_rc {
  DURO_OK = 0,      /* the step has a result: go on */
  DURO_SUSPEND = 1, /* the instance must yield: return from run() now */
  DURO_ERROR = 2    /* the step failed for good: handle it or return it */
} duro_rc;

#define DURO_TRY(expr)                                                         \
  do {                                                                         \
    duro_rc duro_try_rc_ = (expr);                                             \
    if (duro_try_rc_ != DURO_OK)                                               \
      return duro_try_rc_;                                                     \
  } while (0)

/* The names of the errors a plugin meets: the "name" of duro_step_error()'s
 * {"name","message"} JSON and of an instance's error.  Test the last one
 * with duro_error_is(step, DURO_ERR_...). */
/* duro_attempt_fail on the last try, a misused step call, or duro_fail */
#define DURO_ERR_ERROR "Error"
/* duro_attempt_fail_final: the step was not retried */
#define DURO_ERR_NON_RETRYABLE "NonRetryableError"
/* the last attempt overran its timeout, or an event wait timed out (its
 * timeout, or duro_wait_any's deadline) */
#define DURO_ERR_TIMEOUT "TimeoutError"
/* a step result over engine.max_step_result (not retried) */
#define DURO_ERR_OUTPUT_TOO_LARGE "step.output_too_large"
/* a step result or output that is not JSON (not retried) */
#define DURO_ERR_INVALID_OUTPUT "step.invalid_output"
/* a new step would exceed the workflow's limits.steps */
#define DURO_ERR_STEP_LIMIT "step.limit_exceeded"
/* a step result would bring the instance's state over its limit */
#define DURO_ERR_STATE_TOO_LARGE "instance.state_too_large"
/* a sleep, timeout or retry delay that is not a duration up to 365 days */
#define DURO_ERR_INVALID_DURATION "duration.invalid"
/* the code asked for a step its journal does not have there (suspends) */
#define DURO_ERR_DIVERGED "replay.diverged"
/* an attempt was running when the plugin crashed the host */
#define DURO_ERR_CRASHED "plugin.crashed"
/* an attempt's callback used more CPU time than its plugin's limits.cpu
 * (its worker process was killed; retried as any failed attempt) */
#define DURO_ERR_CPU_EXCEEDED "plugin.cpu_exceeded"
/* an attempt's callback ran while its worker process grew past its
 * plugin's limits.memory (the process was killed; retried likewise) */
#define DURO_ERR_MEMORY_EXCEEDED "plugin.memory_exceeded"
/* an attempt was running when the host stopped without a crash */
#define DURO_ERR_STOPPED "engine.stopped"
/* an attempt was inside its callback when the host stopped past its
 * shutdown grace or died: the step runs again as the next attempt */
#define DURO_ERR_CUT_SHORT "attempt.cut_short"
/* an attempt was running when the instance was terminated */
#define DURO_ERR_TERMINATED "instance.terminated"
/* the build the instance is pinned to is not loaded (it is paused) */
#define DURO_ERR_BUILD_UNAVAILABLE "build.unavailable"
/* the instance passed its deadline (its workflow's or its create's
 * `timeout`): it ended errored, an attempt running then cut short */
#define DURO_ERR_TIMED_OUT "instance.timed_out"
/* (minor 11) a step names a resource (duro_step_config.resource) the
 * host's config does not declare: the step failed for good */
#define DURO_ERR_RESOURCE_UNKNOWN "step.unknown_resource"

/* Error codes (negative ints) and their stable names, shared by the engine,
 * the HTTP API and plugins.  X(ENUM, value, "name", "description") */
#define DURO_ERRORS(X)                                                         \
  X(ALREADY_EXISTS, -1, "instance.already_exists",                             \
    "instance id already exists")                                              \
  X(DUPLICATE_IN_BATCH, -2, "instance.duplicate_in_batch",                     \
    "instance id repeated in batch")                                           \
  X(NOT_FOUND, -3, "instance.not_found", "instance not found")                 \
  X(INVALID_ID, -4, "instance.invalid_id", "invalid instance id")              \
  X(CANNOT_RESTART, -5, "instance.cannot_restart",                             \
    "instance cannot be restarted")                                            \
  X(CANNOT_TERMINATE, -6, "instance.cannot_terminate",                         \
    "instance cannot be terminated")                                           \
  X(CANNOT_PAUSE, -7, "instance.cannot_pause", "instance cannot be paused")    \
  X(CANNOT_RESUME, -8, "instance.cannot_resume", "instance cannot be resumed") \
  X(WORKFLOW_NOT_FOUND, -9, "workflow.not_found", "workflow not found")        \
  X(OUTPUT_TOO_LARGE, -10, "step.output_too_large", "step output too large")   \
  X(INVALID_OUTPUT, -11, "step.invalid_output",                                \
    "step output is not valid JSON")                                           \
  X(STEP_LIMIT, -12, "step.limit_exceeded", "too many steps in one instance")  \
  X(INVALID_PARAMS, -13, "instance.invalid_params",                            \
    "params are not valid JSON")                                               \
  X(INVALID_DURATION, -14, "duration.invalid", "invalid duration")             \
  X(INVALID_ARGUMENT, -15, "invalid_argument", "invalid argument")             \
  X(BINDING_NOT_FOUND, -16, "binding.not_found", "no such binding")            \
  X(STORAGE, -17, "storage.error", "storage error")                            \
  X(CONFIG, -18, "config.invalid", "invalid configuration")                    \
  X(PLUGIN, -19, "plugin.load_failed", "plugin could not be loaded")           \
  X(SHUTDOWN, -20, "engine.shutting_down", "engine is shutting down")          \
  X(IO, -21, "io.error", "input/output error")                                 \
  X(STATE_TOO_LARGE, -22, "instance.state_too_large",                          \
    "instance state over its limit")                                           \
  X(BUSY, -23, "build.in_use", "the build is still in use")                    \
  X(BUILD_UNAVAILABLE, -24, "build.unavailable",                               \
    "the build the instance is pinned to is not loaded")                       \
  X(QUEUE_NOT_FOUND, -25, "queue.not_found", "no such queue")                  \
  X(MESSAGE_TOO_LARGE, -26, "queue.message_too_large",                         \
    "message body over 128000 bytes")                                          \
  X(BATCH_TOO_LARGE, -27, "queue.batch_too_large",                             \
    "batch over 100 messages or 256000 bytes")                                 \
  X(INVALID_MESSAGE, -28, "queue.invalid_message",                             \
    "message body is not valid JSON")                                          \
  X(LEASE_NOT_HELD, -29, "queue.lease_not_held", "unknown or expired lease")   \
  X(CRON_NOT_FOUND, -30, "cron.not_found",                                     \
    "no cron trigger has that expression")                                     \
  X(OVERLOADED, -31, "engine.overloaded",                                      \
    "too many instances are queued; retry later")                              \
  X(INSTANCE_ENDED, -32, "instance.ended",                                     \
    "instance has ended (complete, errored or terminated)")                    \
  X(HOST_UNAVAILABLE, -33, "host.unavailable",                                 \
    "the host that runs the instance did not answer; retry")                   \
  X(FLOW_REJECTED, -34, "flow.rejected",                                       \
    "over the workflow's flow control limit (on_excess: reject); retry later") \
  X(CANNOT_DELETE, -35, "instance.cannot_delete",                              \
    "instance has not ended (terminate it first)")                             \
  X(ATTRIBUTE_UNKNOWN, -36, "attribute.unknown",                               \
    "not a search attribute of the workflow's index")

#define DURO_ERROR_ENUM_(name, value, code, desc) DURO_E_##name = (value),
enum { DURO_ERRORS(DURO_ERROR_ENUM_) DURO_E_LAST_ = -37 };
#undef DURO_ERROR_ENUM_

/* ---- opaque handles --------------------------------------------------- */

typedef struct duro_step duro_step;         /* one activation of an instance */
typedef struct duro_attempt duro_attempt;   /* one attempt of a duro_do step */
typedef struct duro_env duro_env;           /* the bindings from the config */
typedef struct duro_workflow duro_workflow; /* a workflow binding */
typedef struct duro_queue duro_queue;       /* a queue producer binding */
typedef struct duro_pipeline duro_pipeline; /* a pipeline binding */
typedef struct duro_message_batch duro_message_batch; /* a consumer's batch */

/* ---- what run() receives ---------------------------------------------- */

/* It may grow at its end in a later minor: `size` is the host's, never less
 * than the plugin's own sizeof(duro_event). */
typedef struct duro_event {
  uint32_t size;           /* sizeof(duro_event) as the host built it */
  const char *workflow;    /* workflow name from the config */
  const char *instance_id; /* the instance's id */
  const char *params;      /* JSON text; "null" when created without params */
  int64_t created_ms;      /* creation time, Unix ms */
} duro_event;

/* One message of a batch handed to a plugin's queue handler; borrowed
 * until the handler returns.  It may grow at its end in a later minor:
 * `size` is the host's, never less than the plugin's sizeof. */
typedef struct duro_message {
  uint32_t size;     /* sizeof(duro_message) as the host built it */
  int64_t id;        /* the message id (arrival order) */
  const char *body;  /* JSON text */
  uint32_t attempts; /* deliveries so far, this one included */
  int64_t sent_ms;   /* when it was sent, Unix ms */
  /* minor 10: its sender's W3C traceparent (a traceparent header on the
   * send, duro_queue_send_traced), or NULL: the handler's own outgoing
   * calls continue that trace.  Read it only when `size` reaches it. */
  const char *traceparent;
} duro_message;

/* A queue consumer: called with a batch of messages of a queue the plugin
 * consumes (queues.consumers).  Mark each message with duro_message_ack /
 * duro_message_retry, or all with duro_batch_ack_all / _retry_all; those
 * left unmarked are acked when it returns 0 and retried otherwise.
 * Delivery is at least once: make the work idempotent (the message id is
 * stable across deliveries). */
typedef int (*duro_queue_fn)(duro_message_batch *batch, duro_env *env);

/* A cron tick (minor 3): what a plugin's scheduled handler receives. */
typedef struct duro_scheduled_event {
  size_t size;          /* sizeof(duro_scheduled_event) as the host built */
  const char *cron;     /* the expression, as declared in triggers.crons */
  int64_t scheduled_ms; /* the tick, Unix ms (UTC) */
  const char *timezone; /* the trigger's IANA zone, or NULL for UTC */
} duro_scheduled_event;

/* A cron handler (Cloudflare's scheduled(controller, env)): called once
 * per tick of each cron the plugin declares as a string (or as a mapping
 * without a workflow).  Each tick is claimed in the journal before the
 * handler runs, so no tick fires twice — across restarts and crashes too
 * — and a handler that crashes or returns non-zero leaves the tick
 * `failed`, not retried: to do durable work, create a workflow instance
 * here, with an id built from scheduled_ms (duro_workflow_create returns
 * DURO_E_ALREADY_EXISTS for a tick already handled).  0 = success. */
typedef int (*duro_scheduled_fn)(const duro_scheduled_event *ev, duro_env *env);

/* A batch of trace items (minor 10): what a plugin's tail handler
 * receives about the workflows whose `tail_consumers` name it.  One item
 * is one activation of an instance, a JSON object:
 *
 *   {"workflow": "orders", "instance": "o-1", "build": "9f2c…" | null,
 *    "outcome": "ok" | "exception" | "crashed" | "timedOut" | "canceled",
 *    "status": "waiting",              the instance's status after it
 *    "started_ms": …, "ended_ms": …, "duration_ms": …,
 *    "trace_id": "4bf9…",              its W3C trace
 *    "logs": [{"time_ms", "level": "info", "step": "charge#1" | null,
 *              "attempt", "message"}],
 *    "exceptions": [{"time_ms", "step" | null, "attempt", "name",
 *                    "message"}],    failed attempts, then the end's
 *    "logs_dropped": n, "exceptions_dropped": n}   past the caps
 *
 * Read it with duro_json_*.  Delivery is best effort: items wait in a
 * bounded buffer and are dropped when it is full (counted in `dropped`
 * and in /metrics); a handler that fails, crashes or passes its timeout
 * loses its batch, never slows the workflows it observes. */
typedef struct duro_tail_batch {
  size_t size;       /* sizeof(duro_tail_batch) as the host built it */
  const char *items; /* a JSON array of the items, oldest first */
  size_t n;          /* how many */
  /* items dropped for this handler since its last batch (the buffer was
   * full, or a batch failed) */
  uint64_t dropped;
} duro_tail_batch;

/* A tail handler (Cloudflare's tail(events, env)): 0 = success. */
typedef int (*duro_tail_fn)(const duro_tail_batch *batch, duro_env *env);

/* ---- step configuration ----------------------------------------------- */

typedef enum duro_backoff {
  DURO_BACKOFF_EXPONENTIAL = 0, /* delay * 2^(attempt-1); the default */
  DURO_BACKOFF_CONSTANT = 1,    /* delay every time */
  DURO_BACKOFF_LINEAR = 2       /* delay * attempt */
} duro_backoff;

typedef struct duro_retries {
  uint32_t limit;       /* retries after the first attempt: 2 => 3 runs */
  const char *delay;    /* "10 seconds", "500" (ms); NULL = "10 seconds" */
  duro_backoff backoff; /* zero = exponential */
} duro_retries;

/* NULL config = defaults: 5 retries, "10 seconds", exponential, "10 minutes".
 * A given .retries is taken literally (limit 0 = no retries); within it a
 * NULL delay means the default delay; a NULL .timeout means the default.
 * Neither struct carries a size: the host reads as much of them as the
 * plugin's layout fingerprint says (step_config_size, retries_size) and
 * takes zero for members appended since.  Fill them with designated
 * initializers, so that every member you do not name is zero too. */
typedef struct duro_step_config {
  const duro_retries *retries;
  const char *timeout; /* per attempt, cooperative: a late result is dropped */
  /* (minor 11) A shared resource of the host's config (`resources:`)
   * each attempt of the step holds while its callback runs: an attempt
   * starts only while the resource has a free slot (its `concurrency`)
   * and a start to spare (its `rate`), the instance waiting (status
   * waiting, wait_type "resource", holding no thread) until its turn,
   * first come first served across the workflows naming it.  A name the
   * config lacks fails the step for good (DURO_ERR_RESOURCE_UNKNOWN).
   * NULL: none. */
  const char *resource;
} duro_step_config;

/* A step callback: set the result with duro_attempt_result() and return 0,
 * or return duro_attempt_fail() / duro_attempt_fail_final(). */
typedef int (*duro_step_fn)(duro_attempt *a, void *arg);

/* A rollback callback (minor 7): undoes what a completed step did (a
 * refund for a charge), given the step's JSON result as `output`.  It is
 * a step callback in all else: set a result or fail (retried under its
 * own retries), use duro_attempt_idempotency_key(). */
typedef int (*duro_rollback_fn)(duro_attempt *a, const char *output, void *arg);

/* What undoes a step (duro_do_with_rollback, duro_branch.rollback): its
 * callback, its argument — which must outlive run(), since rollbacks run
 * after run() returned its error (static data, or NULL: what the rollback
 * needs is best in the step's output) — and its own retries and timeout
 * (NULL: the defaults). */
typedef struct duro_rollback_cfg {
  duro_rollback_fn fn;
  void *arg;
  const duro_retries *retries;
  const char *timeout;
} duro_rollback_cfg;

/* One branch of duro_do_all: its callback, its argument and its own
 * configuration (NULL: the defaults), what undoes it (NULL: nothing),
 * and, once the call returns, what it came to.  The host writes only
 * `result` and `error`. */
typedef struct duro_branch {
  duro_step_fn fn;
  void *arg;
  const duro_step_config *cfg;
  const char *result; /* its JSON result once it completed, else NULL */
  const char *error;  /* {"name","message"} once it failed for good */
  const duro_rollback_cfg *rollback;
} duro_branch;

/* A workflow entrypoint. */
typedef duro_rc (*duro_run_fn)(duro_step *step, const duro_event *ev,
                               duro_env *env);

typedef struct duro_workflow_def {
  const char *class_name; /* matched against `class_name` in the config */
  duro_run_fn run;
} duro_workflow_def;

/* ---- the API table ------------------------------------------------------
 * The host fills it and hands it to the plugin at load.  Members are only
 * ever appended, never reordered or removed: a plugin built against an older
 * minor version sees a prefix of the table, `size` tells how much of it the
 * host provides and `abi_minor` which minor the host speaks.  Bump
 * DURO_ABI_MINOR when appending.  DURO_API_HAS() tests one member. */
typedef struct duro_api {
  uint32_t size;
  uint32_t abi_minor;
  duro_rc (*do_step)(duro_step *, const char *name, const duro_step_config *,
                     duro_step_fn fn, void *arg, const char **result);
  duro_rc (*sleep)(duro_step *, const char *name, const char *duration);
  duro_rc (*sleep_until)(duro_step *, const char *name, int64_t unix_ms);
  duro_rc (*wait_for_event)(duro_step *, const char *name, const char *type,
                            const char *timeout, const char **event);
  const char *(*step_error)(duro_step *);
  duro_rc (*set_output)(duro_step *, const char *json);
  uint32_t (*attempt_number)(const duro_attempt *);
  int (*attempt_result)(duro_attempt *, const char *json);
  int (*attempt_vfail)(duro_attempt *, int final, const char *fmt, va_list);
  const char *(*attempt_idempotency_key)(const duro_attempt *);
  int64_t (*attempt_deadline_ms)(const duro_attempt *);
  int (*attempt_cancelled)(const duro_attempt *);
  duro_workflow *(*env_workflow)(duro_env *, const char *binding);
  int (*workflow_create)(duro_workflow *, const char *id, const char *params);
  void (*vlog)(int level, const char *fmt, va_list);
  const char *(*strerror)(int code);
  const char *(*err_name)(int code);
  /* ---- minor 1: queues ---- */
  duro_queue *(*env_queue)(duro_env *, const char *binding);
  int (*queue_send)(duro_queue *, const char *json, int64_t delay_ms);
  int (*queue_send_batch)(duro_queue *, const char *const *json, size_t n,
                          int64_t delay_ms);
  /* ---- minor 2: queue consumers ---- */
  const char *(*batch_queue)(const duro_message_batch *);
  size_t (*batch_size)(const duro_message_batch *);
  const duro_message *(*batch_message)(const duro_message_batch *, size_t i);
  int (*message_ack)(duro_message_batch *, size_t i);
  int (*message_retry)(duro_message_batch *, size_t i, int64_t delay_ms);
  int (*ack_all)(duro_message_batch *);
  int (*retry_all)(duro_message_batch *, int64_t delay_ms);
  /* ---- minor 4: failing run(), error names, events to other instances */
  duro_rc (*vfail)(duro_step *, const char *fmt, va_list);
  int (*error_is)(duro_step *, const char *name);
  int (*workflow_send_event)(duro_workflow *, const char *id, const char *type,
                             const char *payload);
  /* ---- minor 5: JSON without a library ---- */
  const char *(*json_str)(const char *json, const char *pointer);
  const char *(*json_val)(const char *json, const char *pointer);
  int (*json_int)(const char *json, const char *pointer, int64_t *out);
  int (*json_num)(const char *json, const char *pointer, double *out);
  int (*json_bool)(const char *json, const char *pointer, int *out);
  const char *(*json_vpack)(const char *fmt, va_list);
  /* ---- minor 6: the first event of several types; child workflows ---- */
  duro_rc (*wait_any)(duro_step *, const char *name, const char *const *types,
                      size_t n, int64_t deadline_ms, const char **event);
  duro_rc (*child_start)(duro_step *, const char *name, duro_workflow *,
                         const char *id, const char *params, int parent_close,
                         const char **child_id);
  duro_rc (*child_wait)(duro_step *, const char *name, duro_workflow *,
                        const char *id, const char **output);
  /* ---- minor 7: parallel steps ---- */
  duro_rc (*do_all)(duro_step *, const char *name, duro_branch *, size_t n,
                    size_t branch_size, uint32_t max_in_flight, uint32_t flags);
  /* ---- minor 7: rollbacks ---- */
  duro_rc (*do_with_rollback)(duro_step *, const char *name,
                              const duro_step_config *, duro_step_fn fn,
                              void *arg, const duro_rollback_cfg *rollback,
                              const char **result);
  duro_rc (*rollback)(duro_step *);
  /* ---- minor 8: pipelines ---- */
  duro_pipeline *(*env_pipeline)(duro_env *, const char *binding);
  int (*pipeline_send)(duro_pipeline *, const char *const *records, size_t n);
  /* ---- minor 9: trace context ---- */
  const char *(*attempt_traceparent)(const duro_attempt *);
  int (*queue_send_traced)(duro_queue *, const char *const *json, size_t n,
                           int64_t delay_ms, const char *traceparent);
  /* ---- minor 12: search attributes ---- */
  int (*set_attribute)(duro_step *, const char *name, const char *json_value);
} duro_api;

/* ---- the plugin descriptor ---------------------------------------------
 * The layout fingerprint holds the sizes of the boundary structs as the
 * plugin was built.  The host refuses a plugin whose sizes it cannot honour
 * (a struct larger than its own, another pointer or long size), naming the
 * field and both values; a smaller struct is an older minor's. */
typedef struct duro_layout {
  uint16_t event_size;
  uint16_t step_config_size;
  uint16_t retries_size;
  uint16_t workflow_def_size;
  uint16_t api_size;
  uint16_t pointer_size;
  uint16_t long_size;
  uint16_t reserved;
} duro_layout;

#define DURO_LAYOUT_INIT                                                       \
  {                                                                            \
    .event_size = sizeof(duro_event),                                          \
    .step_config_size = sizeof(duro_step_config),                              \
    .retries_size = sizeof(duro_retries),                                      \
    .workflow_def_size = sizeof(duro_workflow_def),                            \
    .api_size = sizeof(duro_api), .pointer_size = sizeof(void *),              \
    .long_size = sizeof(long), .reserved = 0                                   \
  }

typedef struct duro_plugin_info {
  uint32_t magic; /* DURO_PLUGIN_MAGIC */
  uint32_t size;  /* sizeof(duro_plugin_info) as the plugin was built */
  uint16_t abi_major;
  uint16_t abi_minor;
  duro_layout layout;
  const char *name;
  const char *version;
  const duro_workflow_def *workflows;
  uint32_t n_workflows;
  /* Called once after the host accepted the descriptor: stores the table.
   * DURO_PLUGIN() writes it. */
  void (*bind)(const duro_api *api);
  int (*init)(void);  /* optional; non-zero refuses the load */
  void (*fini)(void); /* optional; called before dlclose */
  /* minor 2, optional: the handler of the queues this plugin consumes
   * (Cloudflare's queue(batch, env)).  Older plugins have zero here. */
  duro_queue_fn queue;
  /* minor 3, optional: the handler of the plugin's cron triggers
   * (Cloudflare's scheduled(controller, env)). */
  duro_scheduled_fn scheduled;
  /* minor 10, optional: the handler of the trace items of the workflows
   * whose tail_consumers name this plugin. */
  duro_tail_fn tail;
  void *reserved[5]; /* zero */
} duro_plugin_info;

/* The table pointer, set once by bind() when the host loads this copy of
 * the plugin.  Hidden: every loaded copy of a plugin has its own. */
#if defined(__GNUC__)
#define DURO_HIDDEN_ __attribute__((visibility("hidden")))
#define DURO_EXPORT_ __attribute__((visibility("default")))
#define DURO_PRINTF_(f, a) __attribute__((format(printf, f, a)))
#define DURO_MUST_CHECK_ __attribute__((warn_unused_result))
#else
#define DURO_HIDDEN_
#define DURO_EXPORT_
#define DURO_PRINTF_(f, a)
#define DURO_MUST_CHECK_
#endif
extern DURO_HIDDEN_ const duro_api *duro_api_ptr_;

/* DURO_API_HAS(member): non-zero when the host's table reaches past `member`
 * and fills it.  A host never loads a plugin built against a newer minor
 * than its own, so every member a plugin's header declares lies within the
 * table the loader binds.  Test members where that does not hold: a table
 * bound without the loader's checks (an embedder, a test harness) may be
 * shorter or leave members NULL.  For example:
 *
 *   if (DURO_API_HAS(err_name))
 *     duro_log(DURO_LOG_WARN, "create: %s", duro_api_ptr_->err_name(rc));
 *
 * DURO_API_TABLE_HAS(api, member) is the same test on any table pointer. */
#define DURO_API_TABLE_HAS(api, member)                                        \
  ((api) != NULL &&                                                            \
   (api)->size >= offsetof(duro_api, member) + sizeof((api)->member) &&        \
   (api)->member != NULL)
#define DURO_API_HAS(member) DURO_API_TABLE_HAS(duro_api_ptr_, member)

#define DURO_WORKFLOWS(array)                                                  \
  .workflows = (array),                                                        \
  .n_workflows = (uint32_t)(sizeof(array) / sizeof((array)[0]))

/* DURO_PLUGIN(.name = "orders", .version = "1.0", DURO_WORKFLOWS(defs),
 *             .init = my_init) — exactly once per plugin. */
#define DURO_PLUGIN(...)                                                       \
  DURO_HIDDEN_ const duro_api *duro_api_ptr_;                                  \
  static void duro_bind_(const duro_api *api) { duro_api_ptr_ = api; }         \
  DURO_EXPORT_ const duro_plugin_info *duro_plugin(void);                      \
  DURO_EXPORT_ const duro_plugin_info *duro_plugin(void) {                     \
    static const duro_plugin_info info = {.magic = DURO_PLUGIN_MAGIC,          \
                                          .size = sizeof(duro_plugin_info),    \
                                          .abi_major = DURO_ABI_MAJOR,         \
                                          .abi_minor = DURO_ABI_MINOR,         \
                                          .layout = DURO_LAYOUT_INIT,          \
                                          .bind = duro_bind_,                  \
                                          __VA_ARGS__};                        \
    return &info;                                                              \
  }                                                                            \
  typedef int duro_plugin_defined_

/* ---- the step API ------------------------------------------------------ */

/* A retried, journaled step.  *result is the step's JSON result (borrowed
 * until the activation ends); on DURO_ERROR, duro_step_error() says why. */
static inline DURO_MUST_CHECK_ duro_rc duro_do(duro_step *step,
                                               const char *name,
                                               const duro_step_config *cfg,
                                               duro_step_fn fn, void *arg,
                                               const char **result) {
  return duro_api_ptr_->do_step(step, name, cfg, fn, arg, result);
}

/* duro_do, and what undoes the step once it completed: when the instance
 * ends errored on an error run() did not handle (it returned DURO_ERROR),
 * or when run() calls duro_rollback, the rollbacks of the completed steps
 * run newest first (reverse start order), each a journaled step of its
 * own ("charge card#1/rollback", kind "rollback") with its own retries and
 * timeout: after a crash, a rollback that completed never runs again.  A
 * rollback that fails for good leaves the instance errored with both
 * errors ({"name","message","rollback":{"step","name","message"}}); the
 * others still run.  For example, a refund for a charge:
 *
 *   static int refund(duro_attempt *a, const char *charge, void *arg) {
 *     const char *id = duro_json_string(charge, "/chargeId");
 *     return refund_charge(id, duro_attempt_idempotency_key(a))
 *                ? duro_attempt_fail(a, "refund of %s refused", id) : 0;
 *   }
 *   static const duro_rollback_cfg undo_charge = {.fn = refund};
 *   ...
 *   DURO_TRY(duro_do_with_rollback(step, "charge card", &cfg, charge, o,
 *                                  &undo_charge, &charge_result));
 */
static inline DURO_MUST_CHECK_ duro_rc
duro_do_with_rollback(duro_step *step, const char *name,
                      const duro_step_config *cfg, duro_step_fn fn, void *arg,
                      const duro_rollback_cfg *rollback, const char **result) {
  return duro_api_ptr_->do_with_rollback(step, name, cfg, fn, arg, rollback,
                                         result);
}

/* Runs now, newest first, the rollbacks of the steps that completed so far
 * and were not rolled back yet: DURO_OK once all completed, DURO_ERROR when
 * one failed for good (its error; the others ran), DURO_SUSPEND while one
 * waits out a retry's back-off.  run() then goes on as it will (a replay
 * runs none of them again).  For example, undoing and ending otherwise:
 *
 *   if (rc == DURO_ERROR && duro_error_is(step, "OutOfStock")) {
 *     DURO_TRY(duro_rollback(step));
 *     return duro_set_output(step, "\"cancelled\"");
 *   }
 */
static inline DURO_MUST_CHECK_ duro_rc duro_rollback(duro_step *step) {
  return duro_api_ptr_->rollback(step);
}

/* The most branches one duro_do_all takes. */
#define DURO_PARALLEL_MAX 1000

/* duro_do_all's flags. */
enum {
  /* once a branch fails for good, start no other; those running are asked
   * to stop (duro_attempt_cancelled) and the call returns DURO_ERROR */
  DURO_FAIL_FAST = 1,
  /* once a branch completes, start no other; those running are asked to
   * stop, and the call returns DURO_OK once they ended: the lowest-numbered
   * completed branch is the one to use (a replay picks the same one) */
  DURO_FIRST = 2
};

/* Runs branches[0..n) as steps at the same time, and returns once each has
 * completed or failed for good.  Each branch is a duro_do of its own: keyed
 * name#k, k counting on from the name's earlier calls (so "notify" × 3 is
 * "notify#1".."notify#3", as three duro_do calls would be), journaled, with
 * its own retries and timeout; its callback runs on a thread of its own, in
 * the worker process that runs run().  At most max_in_flight run at once
 * (0: the workflow's limits.parallel), started in call order.  A replay
 * hands back the journaled results and runs only the branches that had not
 * completed.  A branch whose attempt fails waits out its back-off while the
 * others run; the call suspends only once nothing else can run.
 *
 * When it returns, branches[i].result is branch i's result and
 * branches[i].error NULL, or the reverse for a branch that failed for good
 * (both NULL for one never started: after DURO_FAIL_FAST or DURO_FIRST).
 * Returns DURO_OK when every branch completed; DURO_ERROR when any failed
 * for good (duro_step_error() is the lowest-numbered one's); with
 * DURO_FIRST, DURO_OK once one completed (the lowest-numbered completed
 * branch won: the others not started never start) and DURO_ERROR only when
 * all failed.  A failed branch does not stop the others unless flags has
 * DURO_FAIL_FAST.  n is 1 to DURO_PARALLEL_MAX.  For example, telling three
 * services at once:
 *
 *   static int notify(duro_attempt *a, void *service) {
 *     if (post_to(service, duro_attempt_idempotency_key(a)) != 0)
 *       return duro_attempt_fail(a, "%s is down", (const char *)service);
 *     return 0;
 *   }
 *   ...
 *   duro_branch b[] = {{.fn = notify, .arg = "email"},
 *                      {.fn = notify, .arg = "sms"},
 *                      {.fn = notify, .arg = "crm"}};
 *   DURO_TRY(duro_do_all(step, "notify", b, 3, 0, 0));
 */
static inline DURO_MUST_CHECK_ duro_rc
duro_do_all(duro_step *step, const char *name, duro_branch *branches, size_t n,
            uint32_t max_in_flight, uint32_t flags) {
  return duro_api_ptr_->do_all(step, name, branches, n, sizeof(duro_branch),
                               max_in_flight, flags);
}

/* A durable sleep: "10 seconds", "1 hour", "3 days", "30d", or ms ("500"). */
static inline DURO_MUST_CHECK_ duro_rc duro_sleep(duro_step *step,
                                                  const char *name,
                                                  const char *duration) {
  return duro_api_ptr_->sleep(step, name, duration);
}

static inline DURO_MUST_CHECK_ duro_rc duro_sleep_until(duro_step *step,
                                                        const char *name,
                                                        int64_t unix_ms) {
  return duro_api_ptr_->sleep_until(step, name, unix_ms);
}

/* Waits for an event of `type` sent to this instance.  Events sent earlier
 * are buffered and delivered in arrival order.  *event is
 * {"type","payload","timestamp"}.  timeout NULL = "24 hours"; a timeout
 * returns DURO_ERROR, which run() may handle. */
static inline DURO_MUST_CHECK_ duro_rc duro_wait_for_event(duro_step *step,
                                                           const char *name,
                                                           const char *type,
                                                           const char *timeout,
                                                           const char **event) {
  return duro_api_ptr_->wait_for_event(step, name, type, timeout, event);
}

/* The most types one duro_wait_any takes. */
#define DURO_WAIT_ANY_MAX 64

/* Waits for the first event sent to this instance whose type is any of
 * types[0..n): it consumes one, the earliest unconsumed of those types in
 * arrival order, buffered ones included; *event is
 * {"type","payload","timestamp"}, so "type" says which came.  deadline_ms is
 * absolute (Unix ms): the wait returns DURO_ERROR with DURO_ERR_TIMEOUT there,
 * which run() may handle; <= 0 means 24 hours from the first call, and more
 * than 365 days ahead is duration.invalid.  The deadline is journaled at the
 * first call, so a replay waits for the same one.  Each type is 1-100 bytes
 * without '|' (it joins them in the instance's wait_type: "approve|reject"); at
 * most DURO_WAIT_ANY_MAX of them, repeats allowed.  For example:
 *
 *   // within two days of the instance's creation (ev is run()'s event)
 *   static const char *const answers[] = {"approve", "reject"};
 *   const char *answer;
 *   duro_rc rc = duro_wait_any(step, "review", answers, 2,
 *                              ev->created_ms + 2 * 86400000LL, &answer);
 *   if (rc == DURO_ERROR && duro_error_is(step, DURO_ERR_TIMEOUT))
 *     return duro_set_output(step, "\"expired\"");
 *   DURO_TRY(rc);
 *   if (strcmp(duro_json_string(answer, "/type"), "approve") == 0)
 *     ... approved ...
 */
static inline DURO_MUST_CHECK_ duro_rc
duro_wait_any(duro_step *step, const char *name, const char *const *types,
              size_t n, int64_t deadline_ms, const char **event) {
  return duro_api_ptr_->wait_any(step, name, types, n, deadline_ms, event);
}

/* What a parent's end (complete, errored or terminated) does to a child
 * it started that still runs. */
enum {
  DURO_PARENT_CLOSE_TERMINATE = 0, /* terminated too (and its children) */
  DURO_PARENT_CLOSE_ABANDON = 1,   /* left to run on by itself */
  /* minor 7: its rollbacks run, newest first, then it is terminated (as
   * a terminate with rollback: true) */
  DURO_PARENT_CLOSE_ROLLBACK = 2
};

/* Starts an instance of the workflow bound to `wf` (duro_env_workflow) as
 * a child of this one: a step, so the child is created exactly once, in
 * the commit that journals the step (a replay returns its id and creates
 * nothing).  id NULL draws one; params NULL is "null".  *child_id (may be
 * NULL) gets the child's id.  A child whose workflow has no `timeout` gets
 * what is left of this instance's deadline.  The child's describe names
 * its parent, and the parent's lists its children.  An id that exists
 * already fails the step for good (instance.already_exists).  For
 * example, fanning out and summing:
 *
 *   duro_workflow *part = duro_env_workflow(env, "PART");
 *   const char *ids[8];
 *   for (int i = 0; i < 8; i++) {
 *     char name[16];
 *     snprintf(name, sizeof name, "part %d", i);
 *     DURO_TRY(duro_child_start(step, name, part, NULL,
 *                               duro_json_pack("{s:i}", "i", i),
 *                               DURO_PARENT_CLOSE_TERMINATE, &ids[i]));
 *   }
 *   double sum = 0;
 *   for (int i = 0; i < 8; i++) {
 *     const char *out;
 *     double v = 0;
 *     DURO_TRY(duro_child_wait(step, "part done", part, ids[i], &out));
 *     duro_json_number(out, "", &v);
 *     sum += v;
 *   }
 */
static inline DURO_MUST_CHECK_ duro_rc duro_child_start(
    duro_step *step, const char *name, duro_workflow *wf, const char *id,
    const char *params, int parent_close, const char **child_id) {
  return duro_api_ptr_->child_start(step, name, wf, id, params, parent_close,
                                    child_id);
}

/* Waits, taking no thread, until the child `id` of workflow `wf` ends: its
 * output in *output (JSON text) when it completed; DURO_ERROR when it
 * errored (the step's error is the child's, its message naming the child)
 * or was terminated (DURO_ERR_TERMINATED).  A step of its own: a replay
 * answers from the journal.  A child that ended before the call is seen at
 * once.  Bounded by this instance's deadline only. */
static inline DURO_MUST_CHECK_ duro_rc duro_child_wait(duro_step *step,
                                                       const char *name,
                                                       duro_workflow *wf,
                                                       const char *id,
                                                       const char **output) {
  return duro_api_ptr_->child_wait(step, name, wf, id, output);
}

/* The last DURO_ERROR of this activation as {"name","message"} JSON. */
static inline const char *duro_step_error(duro_step *step) {
  return duro_api_ptr_->step_error(step);
}

/* Whether the last DURO_ERROR of this activation is named `name` (one of
 * the DURO_ERR_* above): 1 or 0, 0 when nothing failed.  The same test as
 * reading "name" from duro_step_error()'s JSON. */
static inline int duro_error_is(duro_step *step, const char *name) {
  return duro_api_ptr_->error_is(step, name);
}

/* Minor 12: sets the instance's search attribute `name` (one its
 * workflow's `index:` declares) to json_value, a JSON string for a string
 * attribute ("\"shipped\"", at most 256 bytes) or a number for a number
 * one ("12.5"), which lists find it by (GET …/instances?where=name:value).
 * Call it in run(): it is on disk when it returns (a crash after it keeps
 * it), and run() replayed sets it again, which changes nothing; a later
 * call replaces it.  Returns 0, DURO_E_ATTRIBUTE_UNKNOWN (the index
 * declares no such name; logged, naming it), DURO_E_INVALID_ARGUMENT (not
 * JSON of the attribute's type), DURO_E_STORAGE (the write failed: the
 * activation stops at its next step call). */
static inline int duro_set_attribute(duro_step *step, const char *name,
                                     const char *json_value) {
  return duro_api_ptr_->set_attribute(step, name, json_value);
}

/* Fails the instance with the plugin's own message: returns DURO_ERROR,
 * and when run() returns that, the instance ends `errored` with
 * {"name":"Error","message":...} (duro_step_error() says the same until a
 * later step call fails).  Code outside steps runs again on every
 * activation, so the message must be built from params and step results
 * only (rule 3).  After a suspension it returns DURO_SUSPEND. */
static inline DURO_MUST_CHECK_ DURO_PRINTF_(2, 3) duro_rc
    duro_fail(duro_step *step, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  duro_rc rc = duro_api_ptr_->vfail(step, fmt, ap);
  va_end(ap);
  return rc;
}

/* Sets the instance output (JSON, copied).  Returns DURO_OK, or DURO_ERROR
 * when the JSON is invalid (the error names the parse position) or too
 * large. */
static inline DURO_MUST_CHECK_ duro_rc duro_set_output(duro_step *step,
                                                       const char *json) {
  return duro_api_ptr_->set_output(step, json);
}

/* ---- inside a step callback ------------------------------------------- */

static inline uint32_t duro_attempt_number(const duro_attempt *a) {
  return duro_api_ptr_->attempt_number(a);
}

/* Sets the step's JSON result (copied).  Returns 0, or
 * DURO_E_INVALID_OUTPUT when it is not JSON: then the attempt fails with
 * step.invalid_output naming the step and the parse position (not
 * retried), unless a later call sets a valid result. */
static inline int duro_attempt_result(duro_attempt *a, const char *json) {
  return duro_api_ptr_->attempt_result(a, json);
}

/* A retryable failure; returns non-zero so `return duro_attempt_fail(...)`. */
static inline DURO_PRINTF_(2, 3) int duro_attempt_fail(duro_attempt *a,
                                                       const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = duro_api_ptr_->attempt_vfail(a, 0, fmt, ap);
  va_end(ap);
  return rc;
}

/* A final failure: no more retries (Cloudflare's NonRetryableError). */
static inline DURO_PRINTF_(2, 3) int duro_attempt_fail_final(duro_attempt *a,
                                                             const char *fmt,
                                                             ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = duro_api_ptr_->attempt_vfail(a, 1, fmt, ap);
  va_end(ap);
  return rc;
}

/* "instance-id/step-key": stable across attempts and host restarts.  A
 * step re-run by a restart of the instance gets a new one,
 * "instance-id/step-key@n" after its n-th restart. */
static inline const char *duro_attempt_idempotency_key(const duro_attempt *a) {
  return duro_api_ptr_->attempt_idempotency_key(a);
}

/* Minor 9: the W3C traceparent of this attempt's span
 * ("00-<trace>-<span>-<flags>"), for the `traceparent` header of an HTTP
 * call the step makes, so the service's spans join the instance's trace.
 * The trace is the one the instance was created in (a traceparent on its
 * create, its queue message's sender), else its own; the span is the
 * attempt's span that the host exports (telemetry).  Borrowed until the
 * callback returns. */
static inline const char *duro_attempt_traceparent(const duro_attempt *a) {
  return duro_api_ptr_->attempt_traceparent(a);
}

/* When this attempt times out (Unix ms); a result set later is discarded. */
static inline int64_t duro_attempt_deadline_ms(const duro_attempt *a) {
  return duro_api_ptr_->attempt_deadline_ms(a);
}

/* Non-zero once the deadline passed or the host is shutting down. */
static inline int duro_attempt_cancelled(const duro_attempt *a) {
  return duro_api_ptr_->attempt_cancelled(a);
}

/* ---- bindings ---------------------------------------------------------- */

/* The workflow bound to `binding` in the config, or NULL. */
static inline duro_workflow *duro_env_workflow(duro_env *env,
                                               const char *binding) {
  return duro_api_ptr_->env_workflow(env, binding);
}

/* Creates an instance (id NULL = random).  Returns 0 or a DURO_E_* code,
 * DURO_E_ALREADY_EXISTS for a duplicate id: call it inside a step with a
 * deterministic id and a retried attempt is harmless.  Under the
 * workflow's flow.singleton with mode skip, 0 also when its key has a
 * live instance already: then nothing is created; under its
 * flow.debounce, 0 also when its key has an instance that has not
 * started: nothing is created, that one takes these params. */
static inline int duro_workflow_create(duro_workflow *wf, const char *id,
                                       const char *params) {
  return duro_api_ptr_->workflow_create(wf, id, params);
}

/* Sends an event of `type` with a JSON payload (NULL = null) to instance
 * `id` of the bound workflow: what POST .../events does, so a child can
 * signal its parent.  Returns 0 or a DURO_E_* code (binding.not_found,
 * instance.not_found, invalid_argument for an empty or long type,
 * instance.invalid_params for a bad payload).  Durable like a queue send:
 * inside a step callback the event is committed in the same transaction as
 * the step's result (sent once if the step completes, not at all if the
 * attempt fails); in run() outside a callback it is refused
 * (DURO_E_INVALID_ARGUMENT); elsewhere (a queue or cron handler) it is
 * committed before the call returns. */
static inline int duro_workflow_send_event(duro_workflow *wf, const char *id,
                                           const char *type,
                                           const char *payload) {
  return duro_api_ptr_->workflow_send_event(wf, id, type, payload);
}

/* The queue bound to `binding` by the plugin's queues.producers, or NULL. */
static inline duro_queue *duro_env_queue(duro_env *env, const char *binding) {
  return duro_api_ptr_->env_queue(env, binding);
}

/* Sends a JSON message (at most 128,000 bytes), deliverable after delay_ms
 * (0..12 h).  Returns 0 or a DURO_E_* code (queue.not_found,
 * queue.message_too_large, queue.invalid_message, duration.invalid).
 *
 * Inside a step callback the send is TRANSACTIONAL: it is committed in the
 * same transaction as the step's result, so the message is enqueued
 * exactly once if the step completes, and not at all if the attempt fails
 * or the host dies before the result is on disk (a retried attempt sends
 * again; only the attempt that completes counts).  In run() outside a
 * callback a send is refused (DURO_E_INVALID_ARGUMENT): that code runs
 * again on every replay.  Elsewhere (init) it is committed at once. */
static inline int duro_queue_send(duro_queue *q, const char *json,
                                  int64_t delay_ms) {
  return duro_api_ptr_->queue_send(q, json, delay_ms);
}

/* The same for up to 100 messages of at most 256,000 bytes together:
 * all or none. */
static inline int duro_queue_send_batch(duro_queue *q, const char *const *json,
                                        size_t n, int64_t delay_ms) {
  return duro_api_ptr_->queue_send_batch(q, json, n, delay_ms);
}

/* Minor 9: duro_queue_send_batch with a trace context: each message
 * carries traceparent (a W3C traceparent, duro_attempt_traceparent(a)
 * from a callback; NULL or an invalid one: none), and the instances a
 * workflow consumer starts from them continue that trace. */
static inline int duro_queue_send_traced(duro_queue *q, const char *const *json,
                                         size_t n, int64_t delay_ms,
                                         const char *traceparent) {
  return duro_api_ptr_->queue_send_traced(q, json, n, delay_ms, traceparent);
}

/* ---- pipelines (minor 8) ---------------------------------------------- */

/* The pipeline whose `binding` the config's pipelines declare, or NULL
 * (any plugin reaches every pipeline). */
static inline duro_pipeline *duro_env_pipeline(duro_env *env,
                                               const char *binding) {
  return duro_api_ptr_->env_pipeline(env, binding);
}

/* Sends records[0..n): each a JSON text of at most 1,000,000 bytes, at
 * most 10,000 of them and 5,000,000 bytes of JSON lines in all; all or
 * none.  They are written to the pipeline's
 * files (one JSON line each, in send order) by its flusher, each exactly
 * once.  Returns 0 or a DURO_E_* code: binding.not_found (p is NULL),
 * queue.invalid_message (a record is not JSON), queue.message_too_large
 * (a record over the limit), queue.batch_too_large (too many records,
 * or too many bytes in all),
 * engine.overloaded (the pipeline holds its max_backlog of records not
 * yet written: retry later), storage.error.
 *
 * As a queue send: inside a step callback the records are committed with
 * the step's result (exactly once if the step completes, not at all if
 * the attempt fails); in run() outside a callback the send is refused
 * (DURO_E_INVALID_ARGUMENT: it would repeat on every replay); elsewhere
 * (init, a queue or cron handler) it is committed before it returns. */
static inline int duro_pipeline_send(duro_pipeline *p,
                                     const char *const *records, size_t n) {
  return duro_api_ptr_->pipeline_send(p, records, n);
}

/* ---- in a queue handler ------------------------------------------------ */

/* The queue the batch is from. */
static inline const char *duro_batch_queue(const duro_message_batch *b) {
  return duro_api_ptr_->batch_queue(b);
}

/* How many messages it holds (1..max_batch_size). */
static inline size_t duro_batch_size(const duro_message_batch *b) {
  return duro_api_ptr_->batch_size(b);
}

/* Message i (0-based), or NULL past the end. */
static inline const duro_message *
duro_batch_message(const duro_message_batch *b, size_t i) {
  return duro_api_ptr_->batch_message(b, i);
}

/* Marks message i done (deleted when the handler returns).  The last mark
 * of a message wins.  Returns 0 or DURO_E_INVALID_ARGUMENT. */
static inline int duro_message_ack(duro_message_batch *b, size_t i) {
  return duro_api_ptr_->message_ack(b, i);
}

/* Marks message i to be delivered again after delay_ms (< 0 = the
 * consumer's retry_delay); past max_retries it goes to the dead-letter
 * queue instead. */
static inline int duro_message_retry(duro_message_batch *b, size_t i,
                                     int64_t delay_ms) {
  return duro_api_ptr_->message_retry(b, i, delay_ms);
}

static inline int duro_batch_ack_all(duro_message_batch *b) {
  return duro_api_ptr_->ack_all(b);
}

static inline int duro_batch_retry_all(duro_message_batch *b,
                                       int64_t delay_ms) {
  return duro_api_ptr_->retry_all(b, delay_ms);
}

/* ---- JSON without a library -------------------------------------------
 * Params, results, events and messages are JSON text.  These read a value
 * at a JSON pointer ("" is the whole text, "/customer/email" a member,
 * "/items/0" an array's first element, "~1" a '/' and "~0" a '~' in a
 * name) and build JSON text from a format.  Each read parses the text
 * again: keep what you read rather than reading it twice in a loop.
 *
 * The strings they return are the host's: they live until the code that
 * asked returns to the host (run()'s activation, a step's callback, a
 * queue or cron handler) and are freed then, so nothing needs freeing
 * around DURO_TRY's early returns.  Copy one to keep it longer.  Called
 * elsewhere (in init, on a thread of the plugin's own) they return NULL. */

/* The string at `pointer`, unescaped; NULL when `json` is not JSON,
 * nothing is there, or it is not a string. */
static inline const char *duro_json_string(const char *json,
                                           const char *pointer) {
  return duro_api_ptr_->json_str(json, pointer);
}

/* The value at `pointer` as compact JSON text (an object, an array or a
 * scalar), or NULL when nothing is there: a part of a document to pass on
 * as params or a result. */
static inline const char *duro_json_value(const char *json,
                                          const char *pointer) {
  return duro_api_ptr_->json_val(json, pointer);
}

/* 1 with *out set when the value at `pointer` is an integer (no fraction
 * or exponent, within 64 bits), else 0 and *out untouched: set *out to
 * the default first. */
static inline int duro_json_integer(const char *json, const char *pointer,
                                    int64_t *out) {
  return duro_api_ptr_->json_int(json, pointer, out);
}

/* The same for any number (an integer or not). */
static inline int duro_json_number(const char *json, const char *pointer,
                                   double *out) {
  return duro_api_ptr_->json_num(json, pointer, out);
}

/* The same for true and false (*out 1 or 0). */
static inline int duro_json_boolean(const char *json, const char *pointer,
                                    int *out) {
  return duro_api_ptr_->json_bool(json, pointer, out);
}

/* JSON text built from a format, one argument per conversion:
 *   {  }  an object: its members are pairs, a key `s` then a value
 *   [  ]  an array
 *   s     const char *, a string (NULL: null)
 *   i     int          I  int64_t          f  double (finite)
 *   b     int, a boolean                   n  null (no argument)
 *   j     const char *, JSON text put in as it is parsed (NULL: null),
 *         e.g. a step's result
 * Spaces, ':' and ',' may be written for the eye.  For example
 *   duro_json_pack("{s:s, s:I, s:j}", "orderId", id, "cents", cents,
 *                  "charge", charge)
 * NULL when the format or an argument is wrong (a string that is not
 * UTF-8, 'j' text that is not JSON), with the reason logged.  Pass the
 * result to duro_attempt_result(), duro_set_output(), duro_queue_send()
 * or duro_workflow_create(). */
static inline const char *duro_json_pack(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const char *json = duro_api_ptr_->json_vpack(fmt, ap);
  va_end(ap);
  return json;
}

/* ---- logging ----------------------------------------------------------- */

enum {
  DURO_LOG_DEBUG = 0,
  DURO_LOG_INFO = 1,
  DURO_LOG_WARN = 2,
  DURO_LOG_ERROR = 3
};

/* Logged with the instance and step attached; suppressed while run() is
 * replaying completed steps, so a line appears once per attempt. */
static inline DURO_PRINTF_(2, 3) void duro_log(int level, const char *fmt,
                                               ...) {
  va_list ap;
  va_start(ap, fmt);
  duro_api_ptr_->vlog(level, fmt, ap);
  va_end(ap);
}

static inline const char *duro_strerror(int code) {
  return duro_api_ptr_->strerror(code);
}

#ifdef __cplusplus
}
#endif
#endif /* DURO_H */
