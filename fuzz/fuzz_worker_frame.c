/* fuzz_worker_frame.c — libFuzzer target for worker_frame_decode and
 * worker_frame_decode_engine (the engine's frames as a worker reads them;
 * every input goes through both).
 *
 * Each input is a frame as a worker's channel hands it over: a u32 kind
 * (host byte order), then its body.  Decoded, the frame is refused with
 * a reason, or taken with every string NUL-terminated inside the body, its
 * flags and protocol enums in range, a batch's strings and an END's marks
 * inside the body; the same body one byte shorter or longer is refused
 * (a frame is whole or nothing); never a read past the body (ASan). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t *lo, *hi; /* the body being decoded */

/* A string the frame took: NULL, or NUL-terminated inside the body. */
static void check_str(const char *s) {
  if (!s)
    return;
  const uint8_t *p = (const uint8_t *)s;
  if (p < lo || p >= hi || !memchr(p, '\0', (size_t)(hi - p)))
    __builtin_trap();
}

static void check_flag(uint32_t v) {
  if (v > 1)
    __builtin_trap();
}

static void check_taken(const worker_frame *f) {
  switch (f->kind) {
  case WM_DO:
    check_str(f->do_step.name);
    check_str(f->do_step.delay);
    check_str(f->do_step.timeout);
    check_flag(f->do_step.has_config);
    check_flag(f->do_step.has_retries);
    check_flag(f->do_step.wants_result);
    break;
  case WM_SLEEP:
    check_str(f->sleep.name);
    check_str(f->sleep.duration);
    break;
  case WM_SLEEP_UNTIL:
    check_str(f->sleep_until.name);
    break;
  case WM_WAIT:
    check_str(f->wait_for_event.name);
    check_str(f->wait_for_event.type);
    check_str(f->wait_for_event.timeout);
    check_flag(f->wait_for_event.wants_event);
    break;
  case WM_WAIT_ANY: {
    const wf_wait_any *w = &f->wait_any;
    check_str(w->name);
    check_flag(w->has_types);
    check_flag(w->wants_event);
    if (w->has_types && w->n > WM_WAIT_ANY_MAX)
      __builtin_trap();
    const char *types[WM_WAIT_ANY_MAX];
    if (w->has_types) {
      worker_frame_wait_any_types(w, types);
      for (uint32_t i = 0; i < w->n; i++)
        check_str(types[i]);
    }
    break;
  }
  case WM_SET_OUTPUT:
    check_str(f->set_output.json);
    break;
  case WM_FAIL:
    check_str(f->vfail.message);
    break;
  case WM_ERROR_IS:
    check_str(f->error_is.name);
    break;
  case WM_ENV_WORKFLOW:
  case WM_ENV_QUEUE:
    if (!f->env_workflow.binding)
      __builtin_trap();
    check_str(f->env_workflow.binding);
    break;
  case WM_WF_CREATE:
    if (!f->workflow_create.binding)
      __builtin_trap();
    check_str(f->workflow_create.binding);
    check_str(f->workflow_create.id);
    check_str(f->workflow_create.params);
    break;
  case WM_WF_EVENT:
    if (!f->workflow_send_event.binding)
      __builtin_trap();
    check_str(f->workflow_send_event.binding);
    check_str(f->workflow_send_event.id);
    check_str(f->workflow_send_event.type);
    check_str(f->workflow_send_event.payload);
    break;
  case WM_QUEUE_SEND:
    if (!f->queue_send.binding)
      __builtin_trap();
    check_str(f->queue_send.binding);
    check_str(f->queue_send.json);
    break;
  case WM_QUEUE_BATCH: {
    const wf_queue_send_batch *b = &f->queue_send_batch;
    if (!b->binding || b->n > (size_t)(hi - lo) / 4)
      __builtin_trap();
    check_str(b->binding);
    const char **json = calloc(b->n ? b->n : 1, sizeof *json);
    worker_frame_batch_json(b, json);
    for (uint32_t i = 0; i < b->n; i++)
      check_str(json[i]);
    free(json);
    break;
  }
  case WM_LOG:
    if (!f->vlog.text)
      __builtin_trap();
    check_str(f->vlog.text);
    break;
  case WM_RETURN:
    if (f->ret.result_set > WM_RESULT_NOT_BEGUN)
      __builtin_trap();
    check_str(f->ret.result);
    check_flag(f->ret.failed);
    check_flag(f->ret.final);
    check_str(f->ret.message);
    break;
  case WM_END:
    check_str(f->end.why);
    if (!f->end.has_marks && f->end.n)
      __builtin_trap();
    for (uint32_t i = 0; i < f->end.n; i++) {
      uint32_t mark;
      int64_t delay;
      if ((const uint8_t *)f->end.marks + (i + 1) * 12 > hi)
        __builtin_trap();
      worker_frame_end_mark(&f->end, i, &mark, &delay);
      if (mark > WM_MARK_RETRY)
        __builtin_trap();
    }
    break;
  case WM_LIMIT:
    if (f->limit.which < 1 || f->limit.which > 3)
      __builtin_trap();
    break;
  case WM_STEP_ERROR:
  case WM_CANCELLED:
    break;
  default:
    __builtin_trap(); /* a kind no worker sends was taken */
  }
}

/* What the worker takes from the engine. */
static void check_taken_engine(const worker_frame *f) {
  switch (f->kind) {
  case WM_RUN:
    if (!f->run.build.plugin || !f->run.build.path || !f->run.build.hash ||
        !f->run.cls)
      __builtin_trap();
    check_str(f->run.build.plugin);
    check_str(f->run.build.path);
    check_str(f->run.build.hash);
    check_str(f->run.cls);
    check_str(f->run.workflow);
    check_str(f->run.id);
    check_str(f->run.params);
    break;
  case WM_CALL:
    check_str(f->call.key);
    break;
  case WM_REPLY:
    check_str(f->reply.text);
    break;
  case WM_QUEUE_RUN: {
    const wf_queue_run *q = &f->queue_run;
    if (!q->build.plugin || !q->build.path || !q->build.hash ||
        q->n > (size_t)(hi - lo) / 24)
      __builtin_trap();
    check_str(q->queue);
    const char *cursor = q->first;
    for (uint32_t i = 0; i < q->n; i++) {
      wf_message m;
      worker_frame_queue_message(&cursor, &m);
      check_str(m.body);
      if ((const uint8_t *)cursor > hi)
        __builtin_trap();
    }
    break;
  }
  case WM_CRON_RUN:
    if (!f->cron_run.build.plugin || !f->cron_run.build.path ||
        !f->cron_run.build.hash)
      __builtin_trap();
    check_str(f->cron_run.cron);
    check_str(f->cron_run.timezone);
    break;
  default:
    __builtin_trap(); /* a kind the engine never sends was taken */
  }
}

typedef int decoder(uint32_t kind, const uint8_t *body, size_t len,
                    worker_frame *out);

/* The body decoded from a buffer of exactly its size. */
static int decode(decoder *fn, uint32_t kind, const uint8_t *body, size_t len,
                  worker_frame *f) {
  uint8_t *copy = malloc(len ? len : 1);
  if (len)
    memcpy(copy, body, len);
  int rc = fn(kind, copy, len, f);
  free(copy);
  return rc;
}

static void one(decoder *fn, void (*check)(const worker_frame *), uint32_t kind,
                const uint8_t *body, size_t len) {
  worker_frame f;
  if (fn(kind, body, len, &f) != 0) {
    if (f.kind != kind || !f.why[0] || !memchr(f.why, '\0', sizeof f.why))
      __builtin_trap(); /* refused without saying why */
    return;
  }
  if (f.kind != kind || f.why[0])
    __builtin_trap();
  check(&f);
  /* whole or nothing: one byte less or more is another frame */
  worker_frame g;
  if (len > 0 && decode(fn, kind, body, len - 1, &g) == 0)
    __builtin_trap();
  uint8_t *longer = malloc(len + 1);
  if (len)
    memcpy(longer, body, len);
  longer[len] = 0;
  if (decode(fn, kind, longer, len + 1, &g) == 0)
    __builtin_trap();
  free(longer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint32_t kind;
  if (size < sizeof kind)
    return 0;
  memcpy(&kind, data, sizeof kind);
  const uint8_t *body = data + sizeof kind;
  size_t len = size - sizeof kind;
  lo = body;
  hi = body + len;
  one(worker_frame_decode, check_taken, kind, body, len);
  one(worker_frame_decode_engine, check_taken_engine, kind, body, len);
  return 0;
}
