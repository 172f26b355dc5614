/* worker_proto.h — the conversation between the engine and a worker
 * process, one channel (channel.h) per engine thread and worker.
 *
 * The engine runs every activation as it always has (the step runner,
 * the journal, the retry policy, the crash accounting); what runs in the
 * worker is only the plugin's code.  For a build served by a worker the
 * engine's run() is a stand-in (worker_proxy.c): it sends RUN, then does
 * what the worker asks — each call the plugin makes through duro_api is
 * one request, carried out by the engine's own step API in the
 * activation's context, and answered with REPLY.  When duro_do has an
 * attempt to run, the engine sends CALL and serves the requests the
 * callback makes (queue sends, creations, logging) until RETURN.
 *
 * Ping-pong per activation: each side sends one frame and waits for the
 * other's (a LOG is the only frame without an answer), so frames are
 * routed by their activation id alone; several activations of one
 * channel talk at once, and each side writes what several of them said
 * in one write when it can (the worker after reading all the engine
 * sent; the engine's thread reads for every activation it runs).
 *
 * A queue or cron handler runs the same way on a channel lent to it
 * alone (QUEUE_RUN or CRON_RUN, the plugin's calls on its env, END).
 *
 * Fields of each kind, in order (s: string, u: u32, i: i64, q: u64): */
#ifndef DURO_WORKER_PROTO_H
#define DURO_WORKER_PROTO_H

#include <stdint.h>

/* The protocol's version, the last argument of `duro __worker`: a worker
 * of another build refuses to start rather than misread its frames. */
#define WM_PROTOCOL "duro-worker-10"

enum worker_msg {
  /* engine to worker */
  WM_RUN = 1,   /* s plugin, s path, s hash, s class, s workflow, s id,
                   s params, i created_ms */
  WM_CALL,      /* q fn, q arg, u number, i deadline_ms, s idempotency key,
                   s traceparent (the attempt's span, trace_ids.h),
                   q seq: the worker sets seq's BEGAN bit in the
                   channel's shared page as it begins the callback,
                   unless the engine set its REVOKED bit first
                   (WM_PAGE_BEGAN);
                   i begin_by: CLOCK_BOOTTIME ms past which the callback
                   must not begin (the host's lease may have lapsed: a
                   worker frozen with its host, a paused VM, reads the
                   CALL late); it answers WM_RESULT_NOT_BEGUN instead;
                   u rollback, s output: a rollback's callback (a
                   duro_rollback_fn, handed the output of the step it
                   undoes), else a step's.
                   A CALL for an activation id the worker does not hold
                   is a branch of a DO_ALL: its callback runs as any
                   CALL's, under that id, and the engine's REPLY to its
                   RETURN ends it */
  WM_REPLY,     /* i rc, s text (a result, an event, an error; or NULL) */
  WM_QUEUE_RUN, /* s plugin, s path, s hash, s queue, u n, n × (i id,
                   s body, u attempts, i sent_ms, s traceparent): a queue
                   handler's batch; answered by END with u n, n × (u mark, i
                   delay) after its why */
  WM_CRON_RUN,  /* s plugin, s path, s hash, s cron, i scheduled_ms,
                   s timezone: a scheduled handler's tick; answered by
                   END */
  WM_REPLY_ALL, /* i rc, u n, n × (s result, s error): a DO_ALL's answer,
                   each branch's result or error (or neither) */
  WM_TAIL_RUN,  /* s plugin, s path, s hash, s items (a JSON array), u n,
                   i dropped: a tail handler's batch; answered by END */
  /* worker to engine: the plugin's calls */
  WM_DO = 16,       /* s name, u has_config, u has_retries, u limit, s delay,
                       u backoff, s timeout, s resource, q fn, q arg,
                       u wants_result */
  WM_SLEEP,         /* s name, s duration */
  WM_SLEEP_UNTIL,   /* s name, i unix_ms */
  WM_WAIT,          /* s name, s type, s timeout, u wants_event */
  WM_STEP_ERROR,    /* (nothing) */
  WM_SET_OUTPUT,    /* s json */
  WM_FAIL,          /* s message */
  WM_ERROR_IS,      /* s name */
  WM_ENV_WORKFLOW,  /* s binding: rc 1 when bound */
  WM_WF_CREATE,     /* s binding, s id, s params */
  WM_WF_EVENT,      /* s binding, s id, s type, s payload */
  WM_ENV_QUEUE,     /* s binding: rc 1 when bound */
  WM_QUEUE_SEND,    /* s binding, s json, i delay_ms */
  WM_QUEUE_BATCH,   /* s binding, i delay_ms, u n, n × s json */
  WM_LOG,           /* u level, s text; no answer */
  WM_CANCELLED,     /* (nothing): rc 1 when the attempt should stop */
  WM_WAIT_ANY,      /* s name, u n (as the plugin gave it, at most
                       UINT32_MAX), u has_types (the plugin's types, not
                       NULL, and n at most WM_WAIT_ANY_MAX), has_types ?
                       n × s type : nothing, i deadline_ms, u wants_event */
  WM_CHILD_START,   /* s name, s binding (NULL: none), s id, s params,
                       u parent_close, u wants_id */
  WM_CHILD_WAIT,    /* s name, s binding (NULL: none), s id,
                       u wants_output */
  WM_DO_ALL,        /* s name, u max_in_flight, u flags, u n (at most
                       WM_PARALLEL_MAX), n × (u has_config, u has_retries,
                       u limit, s delay, u backoff, s timeout, s resource,
                       q fn, q arg,
                       u has_rollback, ROLLBACK): the branches' callbacks
                       come as CALLs under ids of their own; answered by
                       REPLY_ALL */
  WM_DO_ROLLBACK,   /* a DO's fields, then ROLLBACK: q fn, q arg,
                       u has_retries, u limit, s delay, u backoff,
                       s timeout (a rollback's callback comes as a CALL
                       under an id of its own) */
  WM_ROLLBACK,      /* (nothing): duro_rollback; the rollbacks' callbacks
                       come as CALLs under ids of their own */
  WM_ENV_PIPELINE,  /* s binding: rc 1 when bound */
  WM_PIPELINE_SEND, /* s binding, u n, n × s record */
  WM_QUEUE_TRACED,  /* QUEUE_BATCH's fields, then s traceparent */
  WM_SET_ATTR,      /* s name, s json: duro_set_attribute */
  WM_RETURN,        /* i rc, u result_set, s result, u failed, u final,
                       s message: the callback returned (result_set
                       WM_RESULT_TOO_LARGE: the result's length in
                       decimal instead of it) */
  WM_END,           /* i rc, s why (the build did not load, or NULL):
                       run() or a handler returned (a queue handler's
                       marks follow) */
  WM_CRASH,         /* no longer sent (the shared page's WM_PAGE_CRASH
                       word says it): a worker that sends it breaks the
                       protocol */
  WM_LIMIT          /* u which (1 cpu, 2 memory, 3 memory taken by
                       run() code outside any callback), i used (ms or
                       bytes), i limit: the activation's callback (or its
                       run()) passed a limit (worker_limits.c); the engine
                       kills the process */
};

/* The worker's frames, one a line, from which each side's tables are
 * made (worker_frame.c's decoders, worker_proxy.c's handlers,
 * worker_api.c's duro_api table): a kind added to one side only does not
 * compile.
 *
 * WM_CALLS: the plugin's calls a worker forwards, each its duro_api
 * member, the frame that carries it, and where the engine serves it
 * (STEP: in run() and an attempt's callback; ENV: in a queue or cron
 * handler too, whose env is all it has). */
#define WM_CALLS(X)                                                            \
  X(do_step, WM_DO, STEP)                                                      \
  X(sleep, WM_SLEEP, STEP)                                                     \
  X(sleep_until, WM_SLEEP_UNTIL, STEP)                                         \
  X(wait_for_event, WM_WAIT, STEP)                                             \
  X(step_error, WM_STEP_ERROR, STEP)                                           \
  X(set_output, WM_SET_OUTPUT, STEP)                                           \
  X(vfail, WM_FAIL, STEP)                                                      \
  X(error_is, WM_ERROR_IS, STEP)                                               \
  X(env_workflow, WM_ENV_WORKFLOW, ENV)                                        \
  X(workflow_create, WM_WF_CREATE, ENV)                                        \
  X(workflow_send_event, WM_WF_EVENT, ENV)                                     \
  X(env_queue, WM_ENV_QUEUE, ENV)                                              \
  X(queue_send, WM_QUEUE_SEND, ENV)                                            \
  X(queue_send_batch, WM_QUEUE_BATCH, ENV)                                     \
  X(vlog, WM_LOG, ENV)                                                         \
  X(attempt_cancelled, WM_CANCELLED, STEP)                                     \
  X(wait_any, WM_WAIT_ANY, STEP)                                               \
  X(child_start, WM_CHILD_START, STEP)                                         \
  X(child_wait, WM_CHILD_WAIT, STEP)                                           \
  X(do_all, WM_DO_ALL, STEP)                                                   \
  X(do_with_rollback, WM_DO_ROLLBACK, STEP)                                    \
  X(rollback, WM_ROLLBACK, STEP)                                               \
  X(env_pipeline, WM_ENV_PIPELINE, ENV)                                        \
  X(pipeline_send, WM_PIPELINE_SEND, ENV)                                      \
  X(queue_send_traced, WM_QUEUE_TRACED, ENV)                                   \
  X(set_attribute, WM_SET_ATTR, STEP)

/* The worker's own frames, no call of the plugin's: a callback's return,
 * run()'s or a handler's end, a limit passed (WM_CRASH, retired, is in
 * neither list). */
#define WM_OWN(X) X(ret, WM_RETURN) X(end, WM_END) X(limit, WM_LIMIT)

/* A count of a list's lines: (0 WM_CALLS(WM_ONE)). */
#define WM_ONE(...) +1

/* Every kind from WM_DO to WM_LIMIT is in one list (or is WM_CRASH). */
_Static_assert((0 WM_CALLS(WM_ONE) WM_OWN(WM_ONE)) + 1 == WM_LIMIT - WM_DO + 1,
               "a worker's frame kind is in neither WM_CALLS nor WM_OWN");

/* The page each channel's two sides share (memfd, mapped by both):
 * words the worker writes where no frame could be, read by the engine.
 *   word WM_PAGE_CRASH       the activation a crash handler named (the
 *                            first; a CAS from 0: no frame is written
 *                            from a signal handler, which could cut
 *                            another thread's frame in two)
 *   word WM_PAGE_RUN         the activation whose run() code, outside
 *                            any callback, the channel's thread runs
 *                            now (0: none): a SIGKILL, which no handler
 *                            sees, is laid on it
 *   word WM_PAGE_GROWER      under limits.memory, the activation whose
 *                            code touched the most memory of late, as the
 *                            worker's watch last saw it (WM_GROWER_RUN
 *                            set: its run() code, outside any callback;
 *                            0: nobody of note): the one the kernel's
 *                            kill for memory is laid on
 *   words WM_PAGE_BEGAN...   two bits per CALL (the CALL's seq modulo
 *                            WM_PAGE_SLOTS; the engine clears both
 *                            before sending it): BEGAN, which the worker
 *                            sets as the callback begins, and REVOKED,
 *                            which the engine sets when a pause or
 *                            terminate comes first.  Each side sets its
 *                            bit with one atomic OR and reads the
 *                            other's in the word it returns, so exactly
 *                            one wins: a callback whose CALL was revoked
 *                            never begins (its RETURN says NOT_BEGUN),
 *                            and a request is acknowledged at once. */
#define WM_PAGE_SIZE 4096
/* WM_PAGE_CRASH's value for a crash on a thread that ran no activation
 * (one the plugin started): written on every channel's page, so that the
 * engine takes it as a kill no handler could name. */
#define WM_PAGE_CRASH_UNNAMED UINT64_MAX
#define WM_PAGE_CRASH 0
#define WM_PAGE_RUN 1
#define WM_PAGE_GROWER 2
#define WM_GROWER_RUN (UINT64_C(1) << 63)
#define WM_PAGE_BEGAN 3
#define WM_PAGE_SLOTS ((WM_PAGE_SIZE / 8 - WM_PAGE_BEGAN) * 32)

/* The word of `page` that holds CALL `seq`'s bits, and its BEGAN bit's
 * mask; its REVOKED bit is the next (wm_revoked). */
static inline uint64_t *wm_page_call(uint64_t *page, uint64_t seq,
                                     uint64_t *began) {
  uint64_t slot = seq % WM_PAGE_SLOTS;
  *began = UINT64_C(1) << (slot % 32 * 2);
  return &page[WM_PAGE_BEGAN + slot / 32];
}

static inline uint64_t wm_revoked(uint64_t began) { return began << 1; }

/* The most types a WAIT_ANY carries: duro.h's DURO_WAIT_ANY_MAX, past
 * which the engine refuses the call (the worker sends the count alone). */
#define WM_WAIT_ANY_MAX 64

/* The most branches a DO_ALL carries: duro.h's DURO_PARALLEL_MAX.  A
 * call the engine would refuse (no branches, too many, of an unknown
 * layout) is sent with none, which it refuses. */
#define WM_PARALLEL_MAX 1000

/* A RETURN whose result was over engine.max_step_result: not sent. */
#define WM_RESULT_TOO_LARGE 2
/* A RETURN for a CALL read past its begin_by, or revoked: the callback
 * never began. */
#define WM_RESULT_NOT_BEGUN 3

/* A message's mark in a queue handler's END. */
enum { WM_MARK_NONE = 0, WM_MARK_ACK = 1, WM_MARK_RETRY = 2 };

#endif
