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
 * Fields of each kind, in order (s: string, u: u32, i: i64, q: u64): */
#ifndef DURO_WORKER_PROTO_H
#define DURO_WORKER_PROTO_H

enum worker_msg {
  /* engine to worker */
  WM_RUN = 1, /* s plugin, s path, s hash, s class, s workflow, s id,
                 s params, i created_ms */
  WM_CALL,    /* q fn, q arg, u number, i deadline_ms, s idempotency key,
                 q seq: the worker stores seq in the channel's shared word
                 as it begins the callback */
  WM_REPLY,   /* i rc, s text (a result, an event, an error; or NULL) */
  /* worker to engine: the plugin's calls */
  WM_DO = 16,      /* s name, u has_config, u has_retries, u limit, s delay,
                      u backoff, s timeout, q fn, q arg, u wants_result */
  WM_SLEEP,        /* s name, s duration */
  WM_SLEEP_UNTIL,  /* s name, i unix_ms */
  WM_WAIT,         /* s name, s type, s timeout, u wants_event */
  WM_STEP_ERROR,   /* (nothing) */
  WM_SET_OUTPUT,   /* s json */
  WM_FAIL,         /* s message */
  WM_ERROR_IS,     /* s name */
  WM_ENV_WORKFLOW, /* s binding: rc 1 when bound */
  WM_WF_CREATE,    /* s binding, s id, s params */
  WM_WF_EVENT,     /* s binding, s id, s type, s payload */
  WM_ENV_QUEUE,    /* s binding: rc 1 when bound */
  WM_QUEUE_SEND,   /* s binding, s json, i delay_ms */
  WM_QUEUE_BATCH,  /* s binding, i delay_ms, u n, n × s json */
  WM_LOG,          /* u level, s text; no answer */
  WM_CANCELLED,    /* (nothing): rc 1 when the attempt should stop */
  WM_RETURN,       /* i rc, u result_set, s result, u failed, u final,
                      s message: the callback returned */
  WM_END,          /* i rc, s why (the build did not load, or NULL):
                      run() returned */
  WM_CRASH,        /* u signal: the worker's handler, about to die */
  WM_LIMIT         /* u which (1 cpu, 2 memory), i used (ms or bytes),
                      i limit: the activation's callback passed a limit
                      (worker_limits.c); the engine kills the process */
};

#endif
