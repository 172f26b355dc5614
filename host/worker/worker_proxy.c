/* worker_proxy.c — the engine's run() for a build served by a worker
 * process: it sends RUN on this thread's channel to one of the plugin's
 * workers, then carries out each call the plugin makes, with the host's
 * own API table, in the activation's context (so replay, retries,
 * commits, limits and the crash ledger are the step runner's, as for
 * code in the engine), until run() returns in the worker.  A duro_do
 * that runs an attempt reaches the worker as CALL from the callback the
 * proxy hands the step runner (proxy_step), which serves the callback's
 * own calls until RETURN.
 *
 * A worker that dies meanwhile (EOF on the channel) ends the activation:
 * the step runner records it (step_worker_died): the attempt a CRASH
 * frame named is charged a crash toward engine.max_crashes, any other
 * attempt in its callback was cut short, and the instance runs again on
 * a new worker.
 *
 * The engine never waits on a worker's reading: frames are posted (what
 * the socket does not take now stays queued on the channel) and the
 * rest written whenever a fiber of this thread waits on the channel, so
 * a worker that stops reading holds no engine thread, and the deadlines
 * of the callbacks in it still fire. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "clock.h"
#include "log.h"
#include "step.h"
#include "util.h"
#include "worker_engine.h"
#include "worker_frame.h"
#include "worker_proto.h"

typedef struct proxy {
  worker_conn *c;
  const worker_build *b;
  uint64_t id;
  duro_step *step;
  duro_env *env;
  const duro_api *api;
  wire_buf m;
  /* Frames for this activation read by whoever read the channel, each
   * its kind, length and fields, taken from in_off on; the one being
   * served is copied to cur. */
  wire_buf inbox, cur;
  size_t in_off;
  /* Of the inbox: frames that answer what the engine said (at most one:
   * the worker asks, then waits), and the bytes of those it sends
   * unasked (log lines, a limit passed), at most UNASKED_MAX. */
  uint32_t answers;
  size_t unasked;
  void *parked;     /* its fiber's token while parked on the channel */
  duro_attempt *at; /* the attempt whose RETURN it waits for, or NULL */
  int returned;     /* a RETURN came: the worker waits for its answer */
  int died;         /* the worker is gone: everything unwinds */
  /* A queue or cron handler (no step): what it is, for the log, and
   * when it is given up on (CLOCK_MONOTONIC ms, 0 = never). */
  const char *handler; /* e.g. queue handler of plugin "p" (queue "q") */
  int64_t deadline;
  /* the setting the deadline comes from, for the kill's message (NULL: a
   * queue consumer's visibility_timeout) */
  const char *deadline_from;
  wf_end end; /* its END once served (borrows cur: no frame follows) */
  /* What its rollbacks' stand-ins point at (rollback_of), kept until
   * run() is over: they may run after its END. */
  void **kept;
  size_t n_kept, cap_kept;
} proxy;

/* Log lines and limit reports buffered for one activation: a worker that
 * sends more before the activation reads them floods its engine. */
#define UNASKED_MAX (1u << 20)

static int unasked(uint32_t kind) { return kind == WM_LOG || kind == WM_LIMIT; }

/* What a wait on c's channel is for: its frames, and room for the rest
 * of what is queued to go. */
static short wants(const worker_conn *c) {
  return (short)(POLLIN | (channel_pending(&c->ch) ? POLLOUT : 0));
}

/* wants() as a parked fiber's thread asks it before each poll. */
static short wants_now(void *c) { return wants(c); }

/* A handler's wait for its worker: polls the lent channel (no fiber
 * parks here), killing the process once the handler is past its deadline
 * and returning: the consumer, told that it would (returns_at_deadline),
 * frees the batch's slot only then, once the process is known dead, so
 * no delivery is begun in it meanwhile to be cut short by the kill. */
/* What a caller that saw no poll of its own tells pump: try both. */
#define READY_ANY (POLLIN | POLLOUT)
static int pump(worker_conn *c, int block, short ready);
static int handler_wait(proxy *px) {
  int64_t now = clock_mono_ms(), kill_at = px->deadline;
  if (px->deadline && now >= kill_at) {
    const char *from = px->deadline_from ? px->deadline_from
                                         : "its consumer's visibility_timeout";
    char *msg =
        xasprintf("the %s ran past %s of %lld ms; its worker process "
                  "was killed",
                  px->handler, from, (long long)duro_env_timeout_ms(px->env));
    worker_conn_kill(px->c, px->deadline_from
                                ? msg
                                : "a queue handler ran past its consumer's "
                                  "visibility_timeout");
    duro_env_handler_failed(px->env, DURO_ERR_TIMEOUT, msg);
    free(msg);
    return -3;
  }
  int64_t wait = px->deadline ? kill_at - now : 1000;
  struct pollfd pfd = {.fd = px->c->ch.fd, .events = wants(px->c)};
  if (poll(&pfd, 1, (int)(wait < 1000 ? wait : 1000)) < 0 && errno != EINTR)
    return -1;
  return pump(px->c, 0, READY_ANY);
}

/* The death seen: recorded with the attempt in its callback, or with
 * none (at NULL) for one outside any. */
static char *oom_message(const proxy *px, const char *what);

static void died(proxy *px, duro_attempt *at) {
  if (px->died)
    return;
  px->died = 1;
  worker_conn_broken(px->c);
  const worker_conn *c = px->c;
  if (c->oom && c->grower == (px->id | WM_GROWER_RUN)) {
    /* the kernel's kill for memory, which this run()'s own code took,
     * outside any callback, as the worker's watch saw: its doing (its
     * callback in flight, if any, is cut short, as killed_for_memory
     * spares those beside it), and it would take the memory again */
    char *msg = oom_message(px, "code of run() outside any step");
    log_write(DURO_LOG_WARN, NULL, "plugin \"%s\": %s", px->b->plugin->name,
              msg);
    step_run_over_limit(px->step, DURO_ERR_MEMORY_EXCEEDED, msg);
    free(msg);
    return;
  }
  if (c->killed && c->runs_named == 1 && !at && c->run_act == px->id) {
    step_worker_killed_in_run(px->step, px->b->plugin->name, px->b->hash,
                              c->how);
    return;
  }
  /* a kill while run() code ran (one run(), or several: no telling whose)
   * is no callback's doing */
  int killed = c->killed && !c->runs_named;
  step_worker_died(px->step, at, px->b->plugin->name, px->b->hash, c->how,
                   c->crash_act == px->id, killed, c->alone);
}

/* Why `what` failed when the kernel killed its process in its cgroup
 * for limits.memory (malloc'ed). */
static char *oom_message(const proxy *px, const char *what) {
  return xasprintf("the %s ran while its worker process's cgroup reached "
                   "its plugin's limits.memory (%lld MiB), %lld MiB at most; "
                   "the process was killed by the kernel",
                   what, (long long)(px->b->plugin->limits.memory >> 20),
                   (long long)(px->c->peak >> 20));
}

/* The worker died with attempt `at` in its callback: when the kernel
 * killed it for its cgroup's memory, the attempt fails
 * plugin.memory_exceeded under its retry policy, as the watch's verdict
 * would (1); else it is a death as any (0).  When the worker's watch
 * named whose code took the memory (WM_PAGE_GROWER), only that callback
 * is: a run()'s or another callback's taking leaves this one cut short,
 * uncharged. */
static int killed_for_memory(proxy *px, duro_attempt *at) {
  worker_conn_broken(px->c);
  uint64_t g = px->c->grower;
  if (!px->c->oom || (g && g != px->id))
    return 0;
  char *msg = oom_message(px, "attempt's callback");
  log_write(DURO_LOG_WARN, NULL, "plugin \"%s\": %s", px->b->plugin->name, msg);
  step_attempt_given_up(at, DURO_ERR_MEMORY_EXCEEDED, msg);
  free(msg);
  return 1;
}

static void wake_one(void *ctx, int64_t key, void *val) {
  (void)ctx, (void)key;
  proxy *p = val;
  if (p->parked)
    step_unpark(p->parked);
}

/* Writes what is queued as far as the socket takes it, then reads what
 * the channel has; `ready` is what a poll saw (a fiber resumed by its
 * thread's poll), so that no call is made that poll said would find
 * nothing. With `block` (no fiber to park) it first waits up to 100 ms
 * for either: its caller looks at its deadlines in between. */
static int channel_turn(worker_conn *c, int block, short ready) {
  if ((ready & POLLOUT) && channel_pending(&c->ch) &&
      channel_write_some(&c->ch) < 0)
    return -1;
  if (block) {
    struct pollfd pfd = {.fd = c->ch.fd, .events = wants(c)};
    if (poll(&pfd, 1, 100) < 0 && errno != EINTR)
      return -1;
    if ((pfd.revents & POLLOUT) && channel_write_some(&c->ch) < 0)
      return -1;
  } else if (!(ready & (POLLIN | POLLHUP | POLLERR))) {
    return 0;
  }
  return channel_fill(&c->ch, 0);
}

/* Writes what is queued and reads what the channel has (waiting a while
 * for it when `block`; as far as `ready` says when not), handing each
 * frame to its activation's inbox and waking its fiber if parked.  -1
 * when the channel failed: then every waiter is woken to see it. */
static int pump(worker_conn *c, int block, short ready) {
  int rc = c->broken ? -1 : channel_turn(c, block, ready);
  for (;;) {
    uint32_t kind;
    uint64_t act;
    wire_reader r;
    int got = rc < 0 ? 0 : channel_take(&c->ch, &kind, &act, &r);
    if (got < 0) {
      /* refused at its length, before any of it is read or allocated: a
       * flood costs the engine nothing */
      size_t max = c->ch.max_frame ? c->ch.max_frame : CHANNEL_MAX_FRAME;
      if (c->ch.refused > max)
        log_error("plugin \"%s\": its worker sent a frame of %u bytes, "
                  "over the %zu a frame from it may have: it is killed",
                  c->proc->plugin->name, c->ch.refused, max);
      else
        log_error("plugin \"%s\": its worker sent bytes that are no frame "
                  "(a length of %u, short of a header): it is killed",
                  c->proc->plugin->name, c->ch.refused);
      rc = -1;
    }
    if (got <= 0)
      break;
    proxy *p = idmap_get(&c->waiting, (int64_t)act);
    if (!p) {
      log_error("plugin \"%s\": its worker sent a frame for activation "
                "%llu, which is not waiting",
                c->proc->plugin->name, (unsigned long long)act);
      rc = -1;
      break;
    }
    uint32_t len = (uint32_t)(r.end - r.p);
    /* An activation asks, then waits (a few log lines aside): a second
     * answer, or log lines piling up unread, are a flood, not a
     * conversation; so a channel holds at most a frame and UNASKED_MAX
     * for each activation waiting on it. */
    int said = unasked(kind);
    if (said ? p->unasked + len > UNASKED_MAX : p->answers > 0) {
      log_error("plugin \"%s\": its worker sent activation %llu %s before "
                "it read the last: it is killed",
                c->proc->plugin->name, (unsigned long long)act,
                said ? "more than 1 MiB of log lines and reports"
                     : "a second answer");
      rc = -1;
      break;
    }
    if (said)
      p->unasked += len;
    else
      p->answers++;
    wire_put_u32(&p->inbox, kind);
    wire_put_u32(&p->inbox, len);
    wire_put(&p->inbox, r.p, len);
    if (p->parked)
      step_unpark(p->parked);
  }
  if (rc < 0 && !c->broken) {
    worker_conn_broken(c); /* reaps the process; its waiters see it */
    idmap_each(&c->waiting, wake_one, NULL);
  }
  return rc < 0 ? -1 : 0;
}

/* The next frame for this activation; 0, -1 when the worker is gone (or
 * broke the protocol, and is killed), -2 when the activation was given
 * up on meanwhile, -3 when the callback it waits for passed its deadline
 * (its worker is killed: a hung callback holds the worker's thread).  The
 * fiber parks while the worker answers, so that its thread serves the
 * other activations meanwhile and their frames share the channel's
 * reads; run inline (no fiber), the thread waits on the channel. */
static int next(proxy *px, uint32_t *kind, wire_reader *r) {
  for (;;) {
    if (px->in_off < px->inbox.len) {
      wire_reader in;
      wire_reader_init(&in, px->inbox.data + px->in_off,
                       px->inbox.len - px->in_off);
      *kind = wire_get_u32(&in);
      uint32_t len = wire_get_u32(&in);
      if (unasked(*kind))
        px->unasked -= len;
      else
        px->answers--;
      px->cur.len = 0;
      wire_put(&px->cur, in.p, len);
      px->in_off += 2 * sizeof(uint32_t) + len;
      if (px->in_off == px->inbox.len)
        px->in_off = px->inbox.len = 0;
      wire_reader_init(r, px->cur.data, px->cur.len);
      return 0;
    }
    if (px->c->broken)
      return -1;
    if (px->handler) {
      int got = handler_wait(px);
      if (got != 0)
        return got;
      continue;
    }
    int64_t until = px->at ? step_attempt_deadline_mono(px->at) : INT64_MAX;
    int64_t now = px->at ? step_mono_ms(px->step) : 0;
    if (px->at && now > until) {
      worker_conn_kill(px->c, "a callback hung past its timeout");
      step_attempt_given_up(px->at, DURO_ERR_TIMEOUT,
                            "the attempt's callback exceeded its timeout; "
                            "its worker process was killed");
      return -3;
    }
    if (px->at && step_terminate_requested(px->step)) {
      /* a terminate does not wait for a callback: its worker is killed
       * (the callback holds the worker's thread), the attempt given up */
      worker_conn_kill(px->c, "its instance was terminated in a callback");
      step_attempt_given_up(px->at, "instance.terminated",
                            "the instance was terminated while the "
                            "attempt's callback ran");
      return -3;
    }
    if (px->at && until - now > 100)
      until = now + 100; /* looks at a terminate ten times a second */
    void *token = step_park_token(px->step);
    if (!token) {
      if (pump(px->c, 1, READY_ANY) != 0)
        return -1;
      continue;
    }
    /* Parked before any system call of its own: what it queued goes
     * with the frames of the thread's other activations in one write
     * once none of them is ready (its thread's poll sees room to write
     * and resumes one of them to write it), and its answer is routed to
     * it by whoever reads the channel. */
    short ready = 0;
    px->parked = token;
    int orphaned =
        step_park_fd(px->step, px->c->ch.fd, wants_now, px->c, until, &ready);
    px->parked = NULL;
    if (orphaned)
      return -2;
    if (ready && pump(px->c, 0, ready) != 0)
      return -1;
  }
}

/* Sends px->m: from a fiber it is queued, for the write its thread makes
 * for all of them when it parks (next); inline, and for a handler on a
 * lent channel, it is written now.  -1 when the channel failed. */
static int post(proxy *px) {
  if (!px->handler && step_park_token(px->step)) {
    channel_queue(&px->c->ch, &px->m);
    return 0;
  }
  return channel_post(&px->c->ch, &px->m);
}

static void reply(proxy *px, int64_t rc, const char *text) {
  channel_begin(&px->m, WM_REPLY, px->id);
  wire_put_i64(&px->m, rc);
  wire_put_str(&px->m, text);
  post(px); /* a failure shows as EOF next */
}

static duro_rc call_vfail(const duro_api *api, duro_step *s, const char *fmt,
                          ...) {
  va_list ap;
  va_start(ap, fmt);
  duro_rc rc = api->vfail(s, fmt, ap);
  va_end(ap);
  return rc;
}

static int call_attempt_vfail(const duro_api *api, duro_attempt *at, int final,
                              const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = api->attempt_vfail(at, final, fmt, ap);
  va_end(ap);
  return rc;
}

static void call_vlog(const duro_api *api, int level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  api->vlog(level, fmt, ap);
  va_end(ap);
}

/* A handler's verdict: SERVE_ON (serve the next frame), or what serve()
 * returns (0 with its rc, -1 when the worker is gone, -3 when it was
 * killed, SERVE_NOT_BEGUN when the worker did not begin the callback). */
enum { SERVE_ON = 1, SERVE_NOT_BEGUN = -4 };

static int serve(proxy *px, duro_attempt *at, int64_t *rc_out);

typedef struct proxy_cb {
  proxy *px;
  uint64_t fn, arg;
  int rollback;       /* fn is a duro_rollback_fn, handed output */
  const char *output; /* the output of the step it undoes */
} proxy_cb;

/* Waits for the callback's place in the worker (worker_turn_try),
 * parked a few ms at a time: 0 once taken, -1 when the worker died or
 * the activation was given up on meanwhile. */
static int take_turn(proxy *px, int suspect) {
  int waiting = 0, wait;
  while ((wait = worker_turn_try(px->c, suspect, &waiting)) != 0) {
    if (wait < 0)
      return -1; /* its process died: the callback never began */
    if (!step_park_token(px->step)) {
      nanosleep(&(struct timespec){0, 2000000}, NULL);
      continue;
    }
    px->parked = step_park_token(px->step);
    int orphaned = step_park_fd(px->step, px->c->ch.fd, wants_now, px->c,
                                step_mono_ms(px->step) + 5, NULL);
    px->parked = NULL;
    /* frames that came meanwhile are read by whoever waits for them */
    if (orphaned || pump(px->c, 0, READY_ANY) != 0) {
      worker_turn_cancel(px->c, &waiting);
      return -1;
    }
  }
  return 0;
}

/* The step runner's callback for an attempt the worker runs. */
static int proxy_step(duro_attempt *at, void *arg) {
  proxy_cb *cb = arg;
  proxy *px = cb->px;
  int suspect = step_attempt_suspect(at);
  if (take_turn(px, suspect) != 0) {
    died(px, NULL); /* before the callback began: not its doing */
    return -1;
  }
  /* its bits on the shared page, cleared before the CALL goes: the
   * worker sets BEGAN as the callback begins, unless a pause or
   * terminate set REVOKED first (worker_proto.h) */
  uint64_t seq = ++px->c->call_seq, began;
  uint64_t *word = wm_page_call(px->c->page, seq, &began);
  __atomic_and_fetch(word, ~(began | wm_revoked(began)), __ATOMIC_RELEASE);
  step_dispatch_set(px->step, word, wm_revoked(began));
  step_attempt_begins(at); /* its timeout runs from here */
  if (step_attempt_withdraw(at)) {
    step_dispatch_clear(px->step, word);
    worker_turn_end(px->c, suspect); /* a pause or terminate came first */
    return -1;
  }
  channel_begin(&px->m, WM_CALL, px->id);
  wire_put_u64(&px->m, cb->fn);
  wire_put_u64(&px->m, cb->arg);
  wire_put_u32(&px->m, px->api->attempt_number(at));
  wire_put_i64(&px->m, px->api->attempt_deadline_ms(at));
  wire_put_str(&px->m, px->api->attempt_idempotency_key(at));
  wire_put_str(&px->m, px->api->attempt_traceparent(at));
  wire_put_u64(&px->m, seq);
  wire_put_i64(&px->m, step_begin_by(px->step));
  wire_put_u32(&px->m, (uint32_t)cb->rollback);
  wire_put_str(&px->m, cb->output);
  int64_t rc = -1;
  px->at = at;
  int got = post(px) == 0 ? serve(px, at, &rc) : -1;
  px->at = NULL;
  step_dispatch_clear(px->step, word);
  worker_turn_end(px->c, suspect);
  if (got == SERVE_NOT_BEGUN)
    return -1; /* withdrawn: nothing of it is recorded */
  if (got == -1 && killed_for_memory(px, at))
    got = -3; /* the run() it served dies with the worker: seen later */
  if (got == 0 || got == -3)
    step_attempt_ended(at); /* its verdict, for the breaker's rate */
  if (got == -3)
    return -1; /* as a callback past its timeout: the step runner says so */
  if (got != 0) {
    if (got == -1)
      died(px, at);
    return -1;
  }
  if (suspect)
    step_attempt_unsuspect(at); /* it returned: the kill was not its own */
  return (int)rc;
}

/* ---- one handler per frame kind ---- */

/* Acts on one frame, decoded and checked whole (worker_frame.h; its
 * strings borrow px->cur until the next frame is read), in px's
 * activation: at is the attempt whose callback runs, or NULL. */
typedef int frame_fn(proxy *px, duro_attempt *at, const worker_frame *f,
                     int64_t *rc_out);

/* duro_do by the step runner, with proxy_step for the callback.  Its
 * strings are copied: the callback's frames reuse the channel's buffer
 * (px->cur, which f borrows). */
/* A branch of a DO_ALL: its callback in the worker, as a CALL under an
 * id of its own (a proxy of its own on the activation's channel, for
 * this attempt), on the branch's fiber (step_parallel.c). */
typedef struct branch_cb {
  proxy *parent;
  uint64_t fn, arg;
} branch_cb;

/* A callback of the activation of `pp` run as a CALL under an id of its
 * own, on the channel of pp, by the calling fiber: a branch's, or a
 * rollback's (`rollback`, handed `output`). */
static int proxy_apart(const proxy *pp, duro_attempt *at, uint64_t fn,
                       uint64_t arg, int rollback, const char *output) {
  proxy px = {.c = pp->c,
              .b = pp->b,
              .id = ++pp->c->next_act,
              .step = pp->step,
              .env = pp->env,
              .api = pp->api};
  idmap_put(&px.c->waiting, (int64_t)px.id, &px);
  proxy_cb cb = {
      .px = &px, .fn = fn, .arg = arg, .rollback = rollback, .output = output};
  int rc = proxy_step(at, &cb);
  /* the worker's branch waits for an answer to its RETURN, which ends
   * it; queued: its thread writes it with the rest */
  if (px.returned && !px.c->broken)
    reply(&px, 0, NULL);
  idmap_del(&px.c->waiting, (int64_t)px.id);
  wire_buf_free(&px.m);
  wire_buf_free(&px.inbox);
  wire_buf_free(&px.cur);
  return rc;
}

static int proxy_branch_step(duro_attempt *at, void *arg) {
  const branch_cb *bc = arg;
  return proxy_apart(bc->parent, at, bc->fn, bc->arg, 0, NULL);
}

/* A rollback's stand-in (a duro_rollback_fn of the engine's): its
 * callback in the worker, as a CALL apart (arg: a branch_cb). */
static int proxy_rollback_step(duro_attempt *at, const char *output,
                               void *arg) {
  const branch_cb *bc = arg;
  return proxy_apart(bc->parent, at, bc->fn, bc->arg, 1, output);
}

/* A rollback the worker described, as the step runner takes it: its
 * stand-in's argument kept with px until run() is over (*rb's strings
 * borrow the frame: the step runner reads them at once). */
static const duro_rollback_cfg *rollback_of(proxy *px, const wf_rollback *w,
                                            duro_rollback_cfg *rb,
                                            duro_retries *rt) {
  branch_cb *bc = xmalloc(sizeof *bc);
  *bc = (branch_cb){.parent = px, .fn = w->fn, .arg = w->arg};
  if (px->n_kept == px->cap_kept) {
    px->cap_kept = px->cap_kept ? px->cap_kept * 2 : 8;
    px->kept = xrealloc(px->kept, px->cap_kept * sizeof *px->kept);
  }
  px->kept[px->n_kept++] = bc;
  *rt = (duro_retries){.limit = w->limit,
                       .delay = w->delay,
                       .backoff = (duro_backoff)w->backoff};
  *rb = (duro_rollback_cfg){.fn = proxy_rollback_step,
                            .arg = bc,
                            .retries = w->has_retries ? rt : NULL,
                            .timeout = w->timeout};
  return rb;
}

/* duro_do_all by the step runner, each branch's callback a CALL of its
 * own (proxy_branch_step).  The frame's strings stay valid throughout:
 * they borrow px->cur, which only this activation's next frame moves,
 * and the branches read theirs into buffers of their own. */
static int serve_do_all(proxy *px, duro_attempt *at, const worker_frame *f,
                        int64_t *rc_out) {
  (void)at, (void)rc_out;
  const wf_do_all *d = &f->do_all;
  uint32_t n = d->n;
  duro_branch *br = xcalloc(n ? n : 1, sizeof *br);
  branch_cb *cbs = xcalloc(n ? n : 1, sizeof *cbs);
  duro_step_config *cfgs = xcalloc(n ? n : 1, sizeof *cfgs);
  duro_retries *rts = xcalloc(n ? n : 1, sizeof *rts);
  duro_rollback_cfg *rbs = xcalloc(n ? n : 1, sizeof *rbs);
  duro_retries *rb_rts = xcalloc(n ? n : 1, sizeof *rb_rts);
  const char *cursor = d->first;
  for (uint32_t i = 0; i < n; i++) {
    wf_branch b;
    worker_frame_do_all_branch(&cursor, &b);
    rts[i] = (duro_retries){
        .limit = b.limit, .delay = b.delay, .backoff = (duro_backoff)b.backoff};
    cfgs[i] = (duro_step_config){.retries = b.has_retries ? &rts[i] : NULL,
                                 .timeout = b.timeout,
                                 .resource = b.resource};
    cbs[i] = (branch_cb){.parent = px, .fn = b.fn, .arg = b.arg};
    br[i] = (duro_branch){
        .fn = proxy_branch_step,
        .arg = &cbs[i],
        .cfg = b.has_config ? &cfgs[i] : NULL,
        .rollback = b.has_rollback
                        ? rollback_of(px, &b.rollback, &rbs[i], &rb_rts[i])
                        : NULL};
  }
  duro_rc rc = px->api->do_all(px->step, d->name, n ? br : NULL, n, sizeof *br,
                               d->max_in_flight, d->flags);
  if (!px->died && !px->c->broken) {
    size_t bytes = 64;
    for (uint32_t i = 0; i < n; i++)
      bytes += 16 + (br[i].result ? strlen(br[i].result) : 0) +
               (br[i].error ? strlen(br[i].error) : 0);
    if (bytes > CHANNEL_MAX_FRAME / 2) {
      /* more than the worker reads in one frame: the call fails (the
       * results stay journaled, and the same call fails alike) */
      reply(px,
            call_vfail(px->api, px->step,
                       "duro_do_all \"%s\": its %u branches' results and "
                       "errors come to %zu bytes, more than one answer to "
                       "a worker process carries (%u)",
                       d->name ? d->name : "", n, bytes,
                       (unsigned)(CHANNEL_MAX_FRAME / 2)),
            NULL);
    } else {
      channel_begin(&px->m, WM_REPLY_ALL, px->id);
      wire_put_i64(&px->m, rc);
      wire_put_u32(&px->m, n);
      for (uint32_t i = 0; i < n; i++) {
        wire_put_str(&px->m, br[i].result);
        wire_put_str(&px->m, br[i].error);
      }
      post(px); /* a failure shows as EOF next */
    }
  }
  free(br);
  free(cbs);
  free(cfgs);
  free(rts);
  free(rbs);
  free(rb_rts);
  return SERVE_ON;
}

/* duro_do, or duro_do_with_rollback (w: its rollback, whose stand-in
 * runs its callback in the worker: rollback_of), by the step runner with
 * proxy_step for the callback.  Its strings are copied: the callback's
 * frames reuse the channel's buffer (px->cur, which d and w borrow). */
static void serve_do(proxy *px, const wf_do_step *d, const wf_rollback *w) {
  char *name = d->name ? xstrdup(d->name) : NULL;
  char *delay = d->delay ? xstrdup(d->delay) : NULL;
  char *timeout = d->timeout ? xstrdup(d->timeout) : NULL;
  char *resource = d->resource ? xstrdup(d->resource) : NULL;
  duro_retries rt = {
      .limit = d->limit, .delay = delay, .backoff = (duro_backoff)d->backoff};
  duro_step_config cfg = {.retries = d->has_retries ? &rt : NULL,
                          .timeout = timeout,
                          .resource = resource};
  duro_rollback_cfg rb_cfg;
  duro_retries rb_rt;
  const duro_rollback_cfg *rb = NULL;
  char *rb_delay = NULL, *rb_timeout = NULL;
  if (w) {
    wf_rollback kept = *w;
    kept.delay = rb_delay = w->delay ? xstrdup(w->delay) : NULL;
    kept.timeout = rb_timeout = w->timeout ? xstrdup(w->timeout) : NULL;
    rb = rollback_of(px, &kept, &rb_cfg, &rb_rt);
  }
  proxy_cb cb = {.px = px, .fn = d->fn, .arg = d->arg};
  int wants = (int)d->wants_result, has_cfg = (int)d->has_config;
  const char *result = NULL;
  duro_rc rc =
      px->api->do_with_rollback(px->step, name, has_cfg ? &cfg : NULL,
                                proxy_step, &cb, rb, wants ? &result : NULL);
  if (!px->died)
    reply(px, rc, result);
  free(name);
  free(delay);
  free(timeout);
  free(resource);
  free(rb_delay);
  free(rb_timeout);
}

static int serve_do_step(proxy *px, duro_attempt *at, const worker_frame *f,
                         int64_t *rc_out) {
  (void)at, (void)rc_out;
  serve_do(px, &f->do_step, NULL);
  return SERVE_ON;
}

static int serve_do_with_rollback(proxy *px, duro_attempt *at,
                                  const worker_frame *f, int64_t *rc_out) {
  (void)at, (void)rc_out;
  serve_do(px, &f->do_with_rollback.step, &f->do_with_rollback.rollback);
  return SERVE_ON;
}

static int serve_rollback(proxy *px, duro_attempt *at, const worker_frame *f,
                          int64_t *rc_out) {
  (void)at, (void)f, (void)rc_out;
  duro_rc rc = px->api->rollback(px->step);
  if (!px->died && !px->c->broken)
    reply(px, rc, NULL);
  return SERVE_ON;
}

static int serve_sleep(proxy *px, duro_attempt *at, const worker_frame *f,
                       int64_t *rc_out) {
  (void)at, (void)rc_out;
  reply(px, px->api->sleep(px->step, f->sleep.name, f->sleep.duration), NULL);
  return SERVE_ON;
}

static int serve_sleep_until(proxy *px, duro_attempt *at, const worker_frame *f,
                             int64_t *rc_out) {
  (void)at, (void)rc_out;
  reply(px,
        px->api->sleep_until(px->step, f->sleep_until.name,
                             f->sleep_until.unix_ms),
        NULL);
  return SERVE_ON;
}

static int serve_wait_for_event(proxy *px, duro_attempt *at,
                                const worker_frame *f, int64_t *rc_out) {
  (void)at, (void)rc_out;
  const wf_wait_for_event *w = &f->wait_for_event;
  const char *ev = NULL;
  duro_rc rc = px->api->wait_for_event(px->step, w->name, w->type, w->timeout,
                                       w->wants_event ? &ev : NULL);
  reply(px, rc, ev);
  return SERVE_ON;
}

static int serve_wait_any(proxy *px, duro_attempt *at, const worker_frame *f,
                          int64_t *rc_out) {
  (void)at, (void)rc_out;
  const wf_wait_any *w = &f->wait_any;
  const char *types[WM_WAIT_ANY_MAX];
  if (w->has_types)
    worker_frame_wait_any_types(w, types);
  const char *ev = NULL;
  duro_rc rc =
      px->api->wait_any(px->step, w->name, w->has_types ? types : NULL, w->n,
                        w->deadline_ms, w->wants_event ? &ev : NULL);
  reply(px, rc, ev);
  return SERVE_ON;
}

static int serve_child_start(proxy *px, duro_attempt *at, const worker_frame *f,
                             int64_t *rc_out) {
  (void)at, (void)rc_out;
  const wf_child_start *c = &f->child_start;
  duro_workflow *wf =
      c->binding ? px->api->env_workflow(px->env, c->binding) : NULL;
  const char *id = NULL;
  duro_rc rc =
      px->api->child_start(px->step, c->name, wf, c->id, c->params,
                           (int)c->parent_close, c->wants_id ? &id : NULL);
  reply(px, rc, id);
  return SERVE_ON;
}

static int serve_child_wait(proxy *px, duro_attempt *at, const worker_frame *f,
                            int64_t *rc_out) {
  (void)at, (void)rc_out;
  const wf_child_wait *c = &f->child_wait;
  duro_workflow *wf =
      c->binding ? px->api->env_workflow(px->env, c->binding) : NULL;
  const char *out = NULL;
  duro_rc rc = px->api->child_wait(px->step, c->name, wf, c->id,
                                   c->wants_output ? &out : NULL);
  reply(px, rc, out);
  return SERVE_ON;
}

static int serve_step_error(proxy *px, duro_attempt *at, const worker_frame *f,
                            int64_t *rc_out) {
  (void)at, (void)f, (void)rc_out;
  reply(px, 0, px->api->step_error(px->step));
  return SERVE_ON;
}

static int serve_set_output(proxy *px, duro_attempt *at, const worker_frame *f,
                            int64_t *rc_out) {
  (void)at, (void)rc_out;
  reply(px, px->api->set_output(px->step, f->set_output.json), NULL);
  return SERVE_ON;
}

static int serve_vfail(proxy *px, duro_attempt *at, const worker_frame *f,
                       int64_t *rc_out) {
  (void)at, (void)rc_out;
  const duro_api *api = px->api;
  const char *msg = f->vfail.message;
  reply(px,
        msg ? call_vfail(api, px->step, "%s", msg)
            : api->vfail(px->step, NULL, NULL),
        NULL);
  return SERVE_ON;
}

static int serve_error_is(proxy *px, duro_attempt *at, const worker_frame *f,
                          int64_t *rc_out) {
  (void)at, (void)rc_out;
  reply(px, px->api->error_is(px->step, f->error_is.name), NULL);
  return SERVE_ON;
}

static int serve_set_attribute(proxy *px, duro_attempt *at,
                               const worker_frame *f, int64_t *rc_out) {
  (void)at, (void)rc_out;
  reply(px,
        px->api->set_attribute(px->step, f->set_attribute.name,
                               f->set_attribute.json),
        NULL);
  return SERVE_ON;
}

/* The calls a plugin makes through its env, and its log lines: served
 * alike in run(), in a callback and in a queue or cron handler. */

static int serve_env_workflow(proxy *px, duro_attempt *at,
                              const worker_frame *f, int64_t *rc_out) {
  (void)at, (void)rc_out;
  reply(px, px->api->env_workflow(px->env, f->env_workflow.binding) != NULL,
        NULL);
  return SERVE_ON;
}

static int serve_workflow_create(proxy *px, duro_attempt *at,
                                 const worker_frame *f, int64_t *rc_out) {
  (void)at, (void)rc_out;
  const duro_api *api = px->api;
  const wf_workflow_create *c = &f->workflow_create;
  duro_workflow *wf = api->env_workflow(px->env, c->binding);
  reply(px, wf ? api->workflow_create(wf, c->id, c->params) : DURO_E_NOT_FOUND,
        NULL);
  return SERVE_ON;
}

static int serve_workflow_send_event(proxy *px, duro_attempt *at,
                                     const worker_frame *f, int64_t *rc_out) {
  (void)at, (void)rc_out;
  const duro_api *api = px->api;
  const wf_workflow_send_event *e = &f->workflow_send_event;
  duro_workflow *wf = api->env_workflow(px->env, e->binding);
  reply(px,
        wf ? api->workflow_send_event(wf, e->id, e->type, e->payload)
           : DURO_E_NOT_FOUND,
        NULL);
  return SERVE_ON;
}

static int serve_env_queue(proxy *px, duro_attempt *at, const worker_frame *f,
                           int64_t *rc_out) {
  (void)at, (void)rc_out;
  reply(px, px->api->env_queue(px->env, f->env_queue.binding) != NULL, NULL);
  return SERVE_ON;
}

static int serve_queue_send(proxy *px, duro_attempt *at, const worker_frame *f,
                            int64_t *rc_out) {
  (void)at, (void)rc_out;
  const duro_api *api = px->api;
  const wf_queue_send *s = &f->queue_send;
  duro_queue *q = api->env_queue(px->env, s->binding);
  reply(px, q ? api->queue_send(q, s->json, s->delay_ms) : DURO_E_NOT_FOUND,
        NULL);
  return SERVE_ON;
}

/* A batch of sends, with a trace context (QUEUE_TRACED) or none. */
static int serve_batch(proxy *px, const wf_queue_send_batch *b) {
  const duro_api *api = px->api;
  duro_queue *q = api->env_queue(px->env, b->binding);
  const char **json = xcalloc(b->n ? b->n : 1, sizeof *json);
  worker_frame_batch_json(b, json);
  reply(px,
        q ? api->queue_send_traced(q, json, b->n, b->delay_ms, b->traceparent)
          : DURO_E_NOT_FOUND,
        NULL);
  free(json);
  return SERVE_ON;
}

static int serve_queue_send_batch(proxy *px, duro_attempt *at,
                                  const worker_frame *f, int64_t *rc_out) {
  (void)at, (void)rc_out;
  return serve_batch(px, &f->queue_send_batch);
}

static int serve_queue_send_traced(proxy *px, duro_attempt *at,
                                   const worker_frame *f, int64_t *rc_out) {
  (void)at, (void)rc_out;
  return serve_batch(px, &f->queue_send_traced);
}

static int serve_env_pipeline(proxy *px, duro_attempt *at,
                              const worker_frame *f, int64_t *rc_out) {
  (void)at, (void)rc_out;
  reply(px, px->api->env_pipeline(px->env, f->env_pipeline.binding) != NULL,
        NULL);
  return SERVE_ON;
}

static int serve_pipeline_send(proxy *px, duro_attempt *at,
                               const worker_frame *f, int64_t *rc_out) {
  (void)at, (void)rc_out;
  const duro_api *api = px->api;
  const wf_pipeline_send *m = &f->pipeline_send;
  duro_pipeline *p = api->env_pipeline(px->env, m->binding);
  const char **records = xcalloc(m->n ? m->n : 1, sizeof *records);
  worker_frame_pipeline_records(m, records);
  reply(px, p ? api->pipeline_send(p, records, m->n) : DURO_E_BINDING_NOT_FOUND,
        NULL);
  free(records);
  return SERVE_ON;
}

static int serve_vlog(proxy *px, duro_attempt *at, const worker_frame *f,
                      int64_t *rc_out) {
  (void)at, (void)rc_out;
  call_vlog(px->api, (int)f->vlog.level, "%s", f->vlog.text);
  return SERVE_ON; /* a log line has no answer */
}

static int serve_attempt_cancelled(proxy *px, duro_attempt *at,
                                   const worker_frame *f, int64_t *rc_out) {
  (void)f, (void)rc_out;
  reply(px, at ? px->api->attempt_cancelled(at) : 0, NULL);
  return SERVE_ON;
}

/* The worker's own frames. */

/* An attempt's callback returned. */
static int serve_ret(proxy *px, duro_attempt *at, const worker_frame *f,
                     int64_t *rc_out) {
  const wf_ret *r = &f->ret;
  px->returned = 1;
  if (r->result_set == WM_RESULT_NOT_BEGUN) {
    /* revoked by a pause or terminate, or read past the lease it was
     * sent under (a host frozen with its workers): withdrawn, as a CALL
     * never sent */
    step_attempt_not_begun(at);
    return SERVE_NOT_BEGUN;
  }
  if (step_terminate_requested(px->step)) {
    /* The terminate was answered while the callback ran (its RETURN was
     * on its way): its result must not complete the step. */
    step_attempt_given_up(at, "instance.terminated",
                          "the instance was terminated while the "
                          "attempt's callback ran");
    return -3;
  }
  if (r->result_set == WM_RESULT_TOO_LARGE) {
    char *msg = xasprintf("the step returned %s bytes; the limit is "
                          "engine.max_step_result",
                          r->result ? r->result : "?");
    step_attempt_refused(at, DURO_ERR_OUTPUT_TOO_LARGE, msg);
    free(msg);
    *rc_out = -1;
    return 0;
  }
  if (r->result_set)
    px->api->attempt_result(at, r->result);
  if (r->failed)
    call_attempt_vfail(px->api, at, (int)r->final, "%s",
                       r->message ? r->message : "failed");
  *rc_out = r->rc;
  return 0;
}

/* run() returned. */
static int serve_end(proxy *px, duro_attempt *at, const worker_frame *f,
                     int64_t *rc_out) {
  (void)at;
  int64_t rc = f->end.rc;
  if (f->end.why) {
    /* The build did not load in the worker (its dlopen or init failed
     * there): the instance waits and runs again after a back-off, as
     * when no worker could start, never errored for it (the load may
     * succeed next time). */
    log_error("plugin \"%s\": build %s cannot run in its worker: %s; "
              "its instance runs again after a back-off",
              px->b->plugin->name, px->b->hash, f->end.why);
    step_worker_unavailable(px->step);
    rc = DURO_SUSPEND;
  }
  *rc_out = rc;
  return 0;
}

/* run() code outside any callback took the memory its worker passed
 * limits.memory with: the worker goes, cutting short what ran beside it
 * (not their doing), and the instance errors, as its code would take the
 * memory again on every activation.  -1: the worker is gone. */
static int run_over_memory(proxy *px, const worker_frame *f) {
  char *msg = xasprintf(
      "run() code outside any step took memory until its worker process "
      "grew to %lld MiB, over its plugin's limits.memory (%lld MiB); the "
      "process was killed (code outside steps runs again on every "
      "activation, so it would take it again)",
      (long long)f->limit.used >> 20, (long long)f->limit.limit >> 20);
  log_write(DURO_LOG_WARN, NULL, "plugin \"%s\": %s", px->b->plugin->name, msg);
  worker_conn_kill(px->c, "run() passed limits.memory");
  step_run_over_limit(px->step, DURO_ERR_MEMORY_EXCEEDED, msg);
  free(msg);
  return -1;
}

/* Its callback passed a limit of the plugin's: it holds the worker's
 * thread (CPU) or its memory; the worker goes, the attempt fails under
 * its retry policy. */
static int serve_limit(proxy *px, duro_attempt *at, const worker_frame *f,
                       int64_t *rc_out) {
  (void)rc_out;
  if (f->limit.which == 3)
    return run_over_memory(px, f);
  int cpu = f->limit.which == 1;
  long long used = (long long)f->limit.used, limit = (long long)f->limit.limit;
  char *msg = cpu ? xasprintf("the attempt's callback used %lld ms of CPU "
                              "time, over its plugin's limits.cpu (%lld ms); "
                              "its worker process was killed",
                              used, limit)
                  : xasprintf("the attempt's callback ran while its worker "
                              "process grew to %lld MiB, over its plugin's "
                              "limits.memory (%lld MiB); the process was "
                              "killed",
                              used >> 20, limit >> 20);
  log_write(DURO_LOG_WARN, NULL, "plugin \"%s\": %s", px->b->plugin->name, msg);
  worker_conn_kill(px->c, cpu ? "a callback passed limits.cpu"
                              : "it passed limits.memory");
  step_attempt_given_up(
      at, cpu ? DURO_ERR_CPU_EXCEEDED : DURO_ERR_MEMORY_EXCEEDED, msg);
  free(msg);
  return -3;
}

/* A limit reported after the callback returned is late: nothing to do;
 * but memory run()'s own code took is its doing. */
static int serve_late_limit(proxy *px, duro_attempt *at, const worker_frame *f,
                            int64_t *rc_out) {
  (void)at, (void)rc_out;
  if (f->limit.which == 3)
    return run_over_memory(px, f);
  return SERVE_ON;
}

/* A queue or cron handler returned: its END (rc, why, a batch's marks)
 * is kept for handler_run. */
static int serve_handler_end(proxy *px, duro_attempt *at, const worker_frame *f,
                             int64_t *rc_out) {
  (void)at;
  px->end = f->end;
  *rc_out = f->end.rc;
  return 0;
}

/* A handler passed a limit of its plugin's: its worker is killed. */
static int serve_handler_limit(proxy *px, duro_attempt *at,
                               const worker_frame *f, int64_t *rc_out) {
  (void)at, (void)rc_out;
  int cpu = f->limit.which == 1;
  int64_t used = f->limit.used, limit = f->limit.limit;
  char *msg =
      xasprintf(cpu ? "the %s used %lld ms of CPU time, over its plugin's "
                      "limits.cpu (%lld ms); its worker process was killed"
                    : "the %s ran while its worker process grew to %lld "
                      "MiB, over its plugin's limits.memory (%lld MiB); the "
                      "process was killed",
                px->handler, (long long)(cpu ? used : used >> 20),
                (long long)(cpu ? limit : limit >> 20));
  log_write(DURO_LOG_WARN, NULL, "%s", msg);
  duro_env_handler_failed(
      px->env, cpu ? DURO_ERR_CPU_EXCEEDED : DURO_ERR_MEMORY_EXCEEDED, msg);
  free(msg);
  worker_conn_kill(px->c, cpu ? "a handler passed limits.cpu"
                              : "it passed limits.memory");
  return -3;
}

/* Each kind's handler where a frame of it may come: in run() (no
 * attempt), in an attempt's callback, in a queue or cron handler; NULL
 * where it may not. */
typedef struct frame_handlers {
  frame_fn *run, *callback, *handler;
} frame_handlers;

/* A call's row (WM_CALLS): served alike in run() and a callback; in a
 * handler only the env's calls. */
#define IN_HANDLER_STEP(fn) NULL
#define IN_HANDLER_ENV(fn) fn
#define CALL_ROW(member, kind, where)                                          \
  [kind] = {serve_##member, serve_##member, IN_HANDLER_##where(serve_##member)},
/* The worker's own frames' rows (WM_OWN), by hand. */
#define OWN_ret                                                                \
  { NULL, serve_ret, NULL }
#define OWN_end                                                                \
  { serve_end, NULL, serve_handler_end }
#define OWN_limit                                                              \
  { serve_late_limit, serve_limit, serve_handler_limit }
#define OWN_ROW(member, kind) [kind] = OWN_##member,

static const frame_handlers handlers[WM_LIMIT + 1] = {WM_CALLS(CALL_ROW)
                                                          WM_OWN(OWN_ROW)};

/* The handler for a frame of `kind` where px is, or NULL. */
static frame_fn *handler_of(const proxy *px, duro_attempt *at, uint32_t kind) {
  if (kind >= sizeof handlers / sizeof handlers[0])
    return NULL;
  const frame_handlers *h = &handlers[kind];
  return px->handler ? h->handler : at ? h->callback : h->run;
}

/* A frame with no handler where px is (why NULL), or a malformed one:
 * nothing of it is done, and the activation ends as a worker's death
 * does (-1); a handler's worker, which broke the protocol, is killed. */
static int refuse(proxy *px, uint32_t kind, const char *why) {
  if (px->handler) {
    log_error("the worker of the %s sent %s frame (kind %u%s%s)", px->handler,
              why ? "a malformed" : "an unexpected", kind, why ? ": " : "",
              why ? why : "");
    worker_conn_kill(px->c, "it broke the protocol");
  } else if (why) {
    log_error("plugin \"%s\": its worker sent a malformed frame (kind %u: %s)",
              px->b->plugin->name, kind, why);
  }
  return -1;
}

/* The frames of one activation, of one attempt's callback (at set) or of
 * a queue or cron handler (px->handler), each decoded whole, then handed
 * to its kind's handler, until run(), the callback or the handler returns:
 * 0 with its rc, or -1 when the worker is gone (-2 given up on, -3
 * killed). */
static int serve(proxy *px, duro_attempt *at, int64_t *rc_out) {
  for (;;) {
    uint32_t kind;
    wire_reader r;
    if (px->died)
      return -1;
    int got = next(px, &kind, &r);
    if (got == -2) {
      px->died = 1; /* given up on: unwind without a word */
      return -2;
    }
    if (got != 0)
      return got;
    frame_fn *fn = handler_of(px, at, kind);
    if (!fn)
      return refuse(px, kind, NULL);
    worker_frame f;
    if (worker_frame_decode(kind, (const uint8_t *)r.p, (size_t)(r.end - r.p),
                            &f) != 0)
      return refuse(px, kind, f.why);
    int verdict = fn(px, at, &f, rc_out);
    if (verdict != SERVE_ON)
      return verdict;
  }
}

duro_rc worker_proxy_run(duro_step *step, const duro_event *ev, duro_env *env) {
  const worker_build *b = step_build_ctx(step);
  char err[256];
  worker_conn *c = b ? worker_conn_get(b->plugin, err, sizeof err) : NULL;
  if (!c) {
    log_error("%s/%s: no worker for plugin \"%s\": %s", ev->workflow,
              ev->instance_id, b ? b->plugin->name : "?",
              b ? err : "the build has no worker context");
    step_worker_unavailable(step);
    return DURO_SUSPEND;
  }
  proxy px = {.c = c,
              .b = b,
              .id = ++c->next_act,
              .step = step,
              .env = env,
              .api = duro_host_api()};
  channel_begin(&px.m, WM_RUN, px.id);
  wire_put_str(&px.m, b->plugin->name);
  wire_put_str(&px.m, b->path);
  wire_put_str(&px.m, b->hash);
  wire_put_str(&px.m, b->class_name);
  wire_put_str(&px.m, ev->workflow);
  wire_put_str(&px.m, ev->instance_id);
  wire_put_str(&px.m, ev->params);
  wire_put_i64(&px.m, ev->created_ms);
  int64_t rc = DURO_SUSPEND;
  idmap_put(&c->waiting, (int64_t)px.id, &px);
  /* Written at once, not queued as the frames of a conversation are
   * (post): its thread goes on to start more activations before it polls
   * to write what is queued, and a worker that crashes on each of them
   * would take all of them with it each time. */
  int got = channel_post(&c->ch, &px.m) == 0 ? serve(&px, NULL, &rc) : -1;
  if (got == 0) {
    step_run_returned(step);
    /* its rollbacks' callbacks are this worker's: run while it is here */
    rc = step_after_run(step, (duro_rc)rc);
  }
  if (got == -1)
    died(&px, NULL);
  if (got != 0)
    rc = DURO_SUSPEND;
  idmap_del(&c->waiting, (int64_t)px.id);
  wire_buf_free(&px.m);
  wire_buf_free(&px.inbox);
  wire_buf_free(&px.cur);
  for (size_t i = 0; i < px.n_kept; i++)
    free(px.kept[i]);
  free(px.kept);
  worker_conn_put(c);
  return (duro_rc)rc;
}

/* ---- queue and cron handlers ---- */

/* Runs the handler whose frame px->m holds (begun by the caller) in the
 * lent channel's worker: 0 with its return code in *rc and the rest of
 * its END in px->end, or -1 (said why). */
static int handler_run(proxy *px, int *rc) {
  int waiting = 0, wait;
  /* counted as a callback in its process: a suspect of a kill runs
   * alone, and a lone callback's death is not laid on it while a
   * handler ran beside it */
  while ((wait = worker_turn_try(px->c, 0, &waiting)) == 1)
    nanosleep(&(struct timespec){0, 2000000}, NULL);
  int got = -1;
  int64_t rc64 = -1;
  if (wait == 0) {
    idmap_put(&px->c->waiting, (int64_t)px->id, px);
    got = channel_post(&px->c->ch, &px->m) == 0 ? serve(px, NULL, &rc64) : -1;
    idmap_del(&px->c->waiting, (int64_t)px->id);
    worker_turn_end(px->c, 0);
  }
  if (got == 0) {
    *rc = (int)rc64;
    if (!px->end.why)
      return 0;
    char *msg = xasprintf("the %s cannot run in its worker: %s", px->handler,
                          px->end.why);
    log_error("%s", msg);
    duro_env_handler_failed(px->env, DURO_ERR_BUILD_UNAVAILABLE, msg);
    free(msg);
    return -1;
  }
  worker_conn_broken(px->c); /* reaped: its death is read now */
  if (got == -1) {
    /* Its own doing when its crash handler named it, or a SIGKILL from
     * outside (as the OOM killer's); else the process died of another
     * callback's crash, or the engine killed it for one: cut short. */
    int guilty =
        px->c->crash_act == px->id || (px->c->killed && !px->c->runs_named);
    char *msg = px->c->oom ? oom_message(px, px->handler)
                : guilty   ? xasprintf("the %s crashed its worker process (%s)",
                                       px->handler, px->c->how)
                           : xasprintf("the %s was cut short: its worker "
                                         "process died of another callback (%s)",
                                       px->handler, px->c->how);
    log_write(DURO_LOG_WARN, NULL, "%s; the engine runs on", msg);
    duro_env_handler_failed(px->env,
                            px->c->oom ? DURO_ERR_MEMORY_EXCEEDED
                            : guilty   ? DURO_ERR_CRASHED
                                       : DURO_ERR_CUT_SHORT,
                            msg);
    free(msg);
  }
  return -1;
}

/* A handler's proxy on a channel lent to it: 0, or -1 (said why) when
 * no worker could start.  `what` (the handler, e.g. `queue handler`, and
 * `detail` in parentheses) is written into the buffer `handler`. */
static int handler_proxy(proxy *px, duro_env *env, char *handler, size_t len,
                         const char *what, const char *detail) {
  const worker_build *b = duro_env_handler_ctx(env);
  snprintf(handler, len, "%s of plugin \"%s\" (%s)", what,
           b ? b->plugin->name : "?", detail);
  char err[256];
  worker_conn *c = b ? worker_conn_lend(b->plugin, err, sizeof err) : NULL;
  if (!c) {
    char *msg = xasprintf("no worker for the %s: %s", handler,
                          b ? err : "the handler has no worker context");
    log_error("%s", msg);
    duro_env_handler_failed(env, DURO_ERR_BUILD_UNAVAILABLE, msg);
    free(msg);
    return -1;
  }
  *px = (proxy){.c = c,
                .b = b,
                .id = ++c->next_act,
                .env = env,
                .api = duro_host_api(),
                .handler = handler};
  return 0;
}

static void handler_proxy_end(proxy *px) {
  worker_conn_give_back(px->c);
  wire_buf_free(&px->m);
  wire_buf_free(&px->inbox);
  wire_buf_free(&px->cur);
}

static void put_build(proxy *px, uint32_t kind) {
  channel_begin(&px->m, kind, px->id);
  wire_put_str(&px->m, px->b->plugin->name);
  wire_put_str(&px->m, px->b->path);
  wire_put_str(&px->m, px->b->hash);
}

int worker_proxy_queue(duro_message_batch *batch, duro_env *env) {
  const duro_api *api = duro_host_api();
  const char *queue = api->batch_queue(batch);
  char what[256], detail[160];
  snprintf(detail, sizeof detail, "queue \"%s\"", queue);
  proxy px;
  if (handler_proxy(&px, env, what, sizeof what, "queue handler", detail) != 0)
    return -1;
  px.deadline = duro_env_deadline_ms(env);
  size_t n = api->batch_size(batch);
  put_build(&px, WM_QUEUE_RUN);
  wire_put_str(&px.m, queue);
  wire_put_u32(&px.m, (uint32_t)n);
  for (size_t i = 0; i < n; i++) {
    const duro_message *m = api->batch_message(batch, i);
    wire_put_i64(&px.m, m->id);
    wire_put_str(&px.m, m->body);
    wire_put_u32(&px.m, m->attempts);
    wire_put_i64(&px.m, m->sent_ms);
    wire_put_str(&px.m, m->traceparent);
  }
  int rc = -1;
  if (handler_run(&px, &rc) != 0) {
    rc = -1;
  } else if (!px.end.has_marks) {
    log_error("the worker of the %s sent a malformed END", what);
    rc = -1;
  } else {
    for (uint32_t i = 0; i < px.end.n && i < n; i++) {
      uint32_t mark;
      int64_t delay;
      worker_frame_end_mark(&px.end, i, &mark, &delay);
      if (mark == WM_MARK_ACK)
        api->message_ack(batch, i);
      else if (mark == WM_MARK_RETRY)
        api->message_retry(batch, i, delay);
    }
  }
  handler_proxy_end(&px);
  return rc;
}

int worker_proxy_tail(const duro_tail_batch *batch, duro_env *env) {
  char what[256];
  proxy px;
  if (handler_proxy(&px, env, what, sizeof what, "tail handler",
                    "trace items") != 0)
    return -1;
  px.deadline = duro_env_deadline_ms(env);
  px.deadline_from = "tail.timeout";
  put_build(&px, WM_TAIL_RUN);
  wire_put_str(&px.m, batch->items);
  wire_put_u32(&px.m, (uint32_t)batch->n);
  wire_put_i64(&px.m, (int64_t)batch->dropped);
  int rc = -1;
  if (handler_run(&px, &rc) != 0)
    rc = -1;
  handler_proxy_end(&px);
  return rc;
}

int worker_proxy_scheduled(const duro_scheduled_event *ev, duro_env *env) {
  char what[256], detail[160];
  snprintf(detail, sizeof detail, "cron \"%s\"", ev->cron);
  proxy px;
  if (handler_proxy(&px, env, what, sizeof what, "scheduled handler", detail) !=
      0)
    return -1;
  put_build(&px, WM_CRON_RUN);
  wire_put_str(&px.m, ev->cron);
  wire_put_i64(&px.m, ev->scheduled_ms);
  wire_put_str(&px.m, ev->timezone);
  int rc = -1;
  if (handler_run(&px, &rc) != 0)
    rc = -1;
  handler_proxy_end(&px);
  return rc;
}
