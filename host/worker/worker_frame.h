/* worker_frame.h — a frame a worker sent the engine, decoded and checked
 * whole before the engine acts on any of it; and one the engine sent a
 * worker, decoded as whole in the worker (worker_frame_decode_engine).
 *
 * worker_frame_decode reads every field of its kind (worker_proto.h),
 * checks each (a string fits the frame and is NUL-terminated with no NUL
 * inside, or is NULL where the worker may send NULL; a count fits the
 * bytes left; a flag or a protocol enum is in range; nothing follows the
 * last field) and says which one failed.  It allocates nothing and acts
 * on nothing: a frame is taken whole or refused whole.
 *
 * A decoded frame borrows the body: its strings, a batch's json and an
 * END's marks point into it, valid while the body is (the engine's copy
 * of the frame being served, until the next one is read).
 *
 * A plugin's own values (a backoff, a log level, a retry limit, a delay)
 * are carried as given: the step runner judges them as it does for code
 * in the engine. */
#ifndef DURO_WORKER_FRAME_H
#define DURO_WORKER_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "worker_proto.h"

/* Per kind, its fields in wire order; strings may be NULL unless said. */
typedef struct wf_do_step {
  const char *name;
  uint32_t has_config, has_retries; /* 0 or 1 */
  uint32_t limit;
  const char *delay;
  uint32_t backoff; /* a duro_backoff, as the plugin gave it */
  const char *timeout;
  const char *resource;  /* duro_step_config.resource (NULL: none) */
  uint64_t fn, arg;      /* the callback and its argument, in the worker */
  uint32_t wants_result; /* 0 or 1 */
} wf_do_step;

typedef struct wf_sleep {
  const char *name, *duration;
} wf_sleep;

typedef struct wf_sleep_until {
  const char *name;
  int64_t unix_ms;
} wf_sleep_until;

typedef struct wf_wait_for_event {
  const char *name, *type, *timeout;
  uint32_t wants_event; /* 0 or 1 */
} wf_wait_for_event;

/* Its types (has_types: n of them, at most WM_WAIT_ANY_MAX, each may be
 * NULL): worker_frame_wait_any_types. */
typedef struct wf_wait_any {
  const char *name;
  uint32_t n;         /* as the plugin gave it */
  uint32_t has_types; /* 0 or 1 */
  const char *first;  /* the first type's length field */
  int64_t deadline_ms;
  uint32_t wants_event; /* 0 or 1 */
} wf_wait_any;

typedef struct wf_child_start {
  const char *name, *binding, *id, *params; /* each may be NULL */
  uint32_t parent_close;
  uint32_t wants_id; /* 0 or 1 */
} wf_child_start;

typedef struct wf_child_wait {
  const char *name, *binding, *id; /* each may be NULL */
  uint32_t wants_output;           /* 0 or 1 */
} wf_child_wait;

/* Its n branches (at most WM_PARALLEL_MAX; none for a call the engine
 * refuses), each read with worker_frame_do_all_branch. */
typedef struct wf_do_all {
  const char *name;
  uint32_t max_in_flight, flags; /* as the plugin gave them */
  uint32_t n;
  const char *first; /* the first branch's has_config */
} wf_do_all;

/* What undoes a step: its callback and configuration, in the worker. */
typedef struct wf_rollback {
  uint64_t fn, arg;
  uint32_t has_retries; /* 0 or 1 */
  uint32_t limit;
  const char *delay;
  uint32_t backoff;
  const char *timeout;
} wf_rollback;

/* One branch of a DO_ALL: its configuration as a DO's, its callback,
 * what undoes it (has_rollback). */
typedef struct wf_branch {
  uint32_t has_config, has_retries; /* 0 or 1 */
  uint32_t limit;
  const char *delay;
  uint32_t backoff;
  const char *timeout;
  const char *resource;
  uint64_t fn, arg;
  uint32_t has_rollback; /* 0 or 1 */
  wf_rollback rollback;
} wf_branch;

/* A DO_ROLLBACK: a DO's fields, then its rollback's. */
typedef struct wf_do_with_rollback {
  wf_do_step step;
  wf_rollback rollback;
} wf_do_with_rollback;

typedef struct wf_set_output {
  const char *json;
} wf_set_output;

typedef struct wf_vfail {
  const char *message;
} wf_vfail;

typedef struct wf_error_is {
  const char *name;
} wf_error_is;

typedef struct wf_set_attribute {
  const char *name, *json;
} wf_set_attribute;

/* ENV_WORKFLOW, ENV_QUEUE, ENV_PIPELINE: the binding is never NULL (the worker
 * asks for none without a name). */
typedef struct wf_binding {
  const char *binding;
} wf_binding;

typedef struct wf_workflow_create {
  const char *binding; /* not NULL */
  const char *id, *params;
} wf_workflow_create;

typedef struct wf_workflow_send_event {
  const char *binding; /* not NULL */
  const char *id, *type, *payload;
} wf_workflow_send_event;

typedef struct wf_queue_send {
  const char *binding; /* not NULL */
  const char *json;
  int64_t delay_ms;
} wf_queue_send;

/* Its n json strings: worker_frame_batch_json. */
typedef struct wf_queue_send_batch {
  const char *binding; /* not NULL */
  int64_t delay_ms;
  const char *traceparent; /* QUEUE_TRACED's; NULL: none */
  uint32_t n;
  const char *first; /* the first string's length field */
} wf_queue_send_batch;

/* Its n records: worker_frame_pipeline_records. */
typedef struct wf_pipeline_send {
  const char *binding; /* not NULL */
  uint32_t n;
  const char *first; /* the first string's length field */
} wf_pipeline_send;

typedef struct wf_vlog {
  uint32_t level;   /* as the plugin gave it */
  const char *text; /* not NULL */
} wf_vlog;

typedef struct wf_ret {
  int64_t rc;
  uint32_t result_set; /* 0, 1, WM_RESULT_TOO_LARGE or _NOT_BEGUN */
  const char *result;
  uint32_t failed, final; /* 0 or 1 */
  const char *message;
} wf_ret;

/* A queue handler's END has marks (has_marks): n of them, read with
 * worker_frame_end_mark; run()'s and a cron handler's have none. */
typedef struct wf_end {
  int64_t rc;
  const char *why; /* NULL, or why the build did not load */
  int has_marks;
  uint32_t n;
  const char *marks;
} wf_end;

typedef struct wf_limit {
  uint32_t which; /* 1 cpu, 2 memory, 3 memory run() took */
  int64_t used, limit;
} wf_limit;

/* The engine's frames, read in the worker.  The build a RUN, QUEUE_RUN,
 * CRON_RUN or TAIL_RUN runs: never NULL. */
typedef struct wf_build {
  const char *plugin, *path, *hash;
} wf_build;

/* A RUN: its class is never NULL. */
typedef struct wf_run {
  wf_build build;
  const char *cls;
  const char *workflow, *id, *params;
  int64_t created_ms;
} wf_run;

typedef struct wf_call {
  uint64_t fn, arg;
  uint32_t number;
  int64_t deadline_ms;
  const char *key;
  const char *traceparent;
  uint64_t seq;
  int64_t begin_by;
  uint32_t rollback;  /* 0 or 1: a rollback's callback */
  const char *output; /* a rollback's: its step's output */
} wf_call;

typedef struct wf_reply {
  int64_t rc;
  const char *text;
} wf_reply;

/* Its n answers, each read with worker_frame_reply_all_item. */
typedef struct wf_reply_all {
  int64_t rc;
  uint32_t n;
  const char *first;
} wf_reply_all;

/* Its n messages: worker_frame_queue_message. */
typedef struct wf_queue_run {
  wf_build build;
  const char *queue;
  uint32_t n;
  const char *first; /* the first message's id */
} wf_queue_run;

typedef struct wf_message {
  int64_t id;
  const char *body;
  uint32_t attempts;
  int64_t sent_ms;
  const char *traceparent;
} wf_message;

typedef struct wf_cron_run {
  wf_build build;
  const char *cron;
  int64_t scheduled_ms;
  const char *timezone;
} wf_cron_run;

typedef struct wf_tail_run {
  wf_build build;
  const char *items; /* never NULL */
  uint32_t n;
  int64_t dropped;
} wf_tail_run;

/* One frame: its kind and, named after the duro_api member the frame
 * carries (WM_CALLS, WM_OWN) or the engine's frame it is, its fields.
 * STEP_ERROR and CANCELLED have none. */
typedef struct worker_frame {
  uint32_t kind;
  union {
    wf_do_step do_step;
    wf_sleep sleep;
    wf_sleep_until sleep_until;
    wf_wait_for_event wait_for_event;
    wf_wait_any wait_any;
    wf_child_start child_start;
    wf_child_wait child_wait;
    wf_do_all do_all;
    wf_do_with_rollback do_with_rollback;
    wf_set_output set_output;
    wf_vfail vfail;
    wf_error_is error_is;
    wf_set_attribute set_attribute;
    wf_binding env_workflow, env_queue, env_pipeline;
    wf_workflow_create workflow_create;
    wf_workflow_send_event workflow_send_event;
    wf_queue_send queue_send;
    wf_queue_send_batch queue_send_batch, queue_send_traced;
    wf_pipeline_send pipeline_send;
    wf_vlog vlog;
    wf_ret ret;
    wf_end end;
    wf_limit limit;
    wf_run run;
    wf_call call;
    wf_reply reply;
    wf_reply_all reply_all;
    wf_queue_run queue_run;
    wf_cron_run cron_run;
    wf_tail_run tail_run;
  };
  /* A refusal's reason: the field and what is wrong with it. */
  char why[96];
} worker_frame;

/* Decodes body (len bytes, a frame of `kind` from a worker) into *out:
 * 0, or -1 with out->why set when the frame is malformed or its kind is
 * none a worker sends. */
int worker_frame_decode(uint32_t kind, const uint8_t *body, size_t len,
                        worker_frame *out);

/* Decodes body (len bytes, a frame of `kind` from the engine: RUN, CALL,
 * REPLY, QUEUE_RUN, CRON_RUN, REPLY_ALL, TAIL_RUN) as worker_frame_decode does:
 * 0, or -1 with out->why set. */
int worker_frame_decode_engine(uint32_t kind, const uint8_t *body, size_t len,
                               worker_frame *out);

/* A decoded QUEUE_RUN's message i (< n), read from *cursor (q->first for
 * the first), which moves past it. */
void worker_frame_queue_message(const char **cursor, wf_message *m);

/* A decoded QUEUE_BATCH's strings into json[0 .. n-1]. */
void worker_frame_batch_json(const wf_queue_send_batch *b, const char **json);

/* A decoded PIPELINE_SEND's strings into records[0 .. n-1]. */
void worker_frame_pipeline_records(const wf_pipeline_send *p,
                                   const char **records);

/* A decoded WAIT_ANY's types into types[0 .. n-1] (has_types set). */
void worker_frame_wait_any_types(const wf_wait_any *w, const char **types);

/* A decoded DO_ALL's next branch, read from *cursor (d->first for the
 * first), which moves past it. */
void worker_frame_do_all_branch(const char **cursor, wf_branch *b);

/* A decoded REPLY_ALL's next answer, as do_all_branch reads a branch. */
void worker_frame_reply_all_item(const char **cursor, const char **result,
                                 const char **error);

/* A decoded END's mark i (< n): a WM_MARK_* and its delay. */
void worker_frame_end_mark(const wf_end *end, uint32_t i, uint32_t *mark,
                           int64_t *delay_ms);

#endif
