/* step_parallel.c — duro_do_all: several do steps of one activation at
 * once.  Each branch is a do step of its own (its key the name's next
 * count, as successive duro_do calls would have, its own retries and
 * timeout, its row and attempts as any do step's); the call looks each
 * up in the journal in call order, then starts those left, at most
 * max_in_flight at a time, and records each outcome as it comes.
 *
 * Only the activation's own fiber writes: it prepares each attempt,
 * judges it and commits it (do_conclude, step_do.c), one after another.
 * A branch's fiber (engine_branch_start, on the activation's thread)
 * only runs its attempt's callback, which for a build served by workers
 * parks it while the callback runs in the worker process, on a thread
 * of its own there: so the callbacks overlap, and the activation's
 * thread serves everything else meanwhile.  Code in the engine
 * (`workers: 0`) holds its thread while it runs: there the branches'
 * callbacks run one after another, on the activation's fiber.
 *
 * A branch whose attempt failed waits out its back-off while the others
 * run; once nothing else can run, the activation suspends until the
 * earliest back-off ends, and the next one replays the call: the
 * completed branches answer from the journal, and only those left run.
 * DURO_FAIL_FAST and DURO_FIRST stop the starts at the first failure for
 * good or the first completion, and ask the callbacks still running to
 * stop (duro_attempt_cancelled); a replay that finds such a failure or
 * completion journaled starts nothing more, so the call returns the same
 * on every replay. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "step_internal.h"

_Static_assert(DURO_PARALLEL_MAX == 1000, "the refusal's message says 1000");

/* Where a branch is in the call. */
enum {
  BR_PENDING,  /* to be run (now, or once its back-off ends) */
  BR_RUNNING,  /* its callback runs */
  BR_RETURNED, /* its callback returned: to be judged */
  BR_DONE,     /* completed: result */
  BR_FAILED,   /* failed for good: error */
  BR_GONE      /* its attempt unwound (the activation yields) */
};

typedef struct parallel parallel;

typedef struct branch_run {
  parallel *par;
  duro_branch *out; /* the plugin's */
  do_call call;
  duro_attempt at;
  int cut, fn_rc, yielded, state;
} branch_run;

struct parallel {
  duro_step *a;
  branch_run *br;
  size_t n, size;           /* size: the plugin's sizeof(duro_branch) */
  struct engine_task *task; /* the activation's, woken as branches return */
  size_t returned;          /* branches whose callbacks returned, unjudged */
  size_t done, failed;      /* branches completed, failed for good */
};

/* Branch b completed with `result`, or failed for good with `error`. */
static void settle(parallel *p, branch_run *b, const char *result,
                   const char *error) {
  b->out->result = result;
  b->out->error = error;
  b->state = result ? BR_DONE : BR_FAILED;
  if (result)
    p->done++;
  else
    p->failed++;
}

/* A branch's attempt, on its fiber or the activation's. */
static void branch_attempt(branch_run *b) {
  duro_step *a = b->par->a;
  step_running_act = a;
  duro_branch *o = b->out;
  b->yielded = do_run_attempt(a, &b->at, o->fn, o->arg, &b->fn_rc);
  step_running_act = a;
  step_running_attempt = NULL;
  b->state = BR_RETURNED;
  b->par->returned++;
}

static void branch_main(void *arg) {
  branch_run *b = arg;
  branch_attempt(b);
  engine_branch_wake(b->par->task);
}

/* The plugin's branch i, laid out with its own sizeof(duro_branch). */
static duro_branch *branch_at(duro_branch *branches, size_t size, size_t i) {
  return (duro_branch *)(void *)((char *)branches + i * size);
}

/* Each branch looked up in the journal, in call order: its result or
 * error when it has one, else made ready to run.  Returns 1 with *rc
 * when the call ends here (a divergence, a suspension, a dry run's stop,
 * a bad configuration). */
/* The branch's rollback, as far as the plugin's duro_branch has one. */
static const duro_rollback_cfg *rollback_of(const parallel *p,
                                            const branch_run *b) {
  return p->size >= offsetof(duro_branch, rollback) + sizeof(void *)
             ? b->out->rollback
             : NULL;
}

static int look_up(parallel *p, const char *name, duro_rc *rc) {
  duro_step *a = p->a;
  for (size_t i = 0; i < p->n; i++) {
    branch_run *b = &p->br[i];
    uint32_t count;
    journal_step *s;
    if (step_begin(a, name, DURO_STEP_DO, &b->call.key, &count, &s, rc))
      return 1;
    b->call.s = s;
    if (s && s->status == DURO_STEP_COMPLETE) {
      settle(p, b, s->result, NULL);
      *rc = DURO_ERROR;
      if (step_rollback_register(a, s, rollback_of(p, b)) != 0)
        return 1;
      continue;
    }
    if (s && s->status == DURO_STEP_ERRORED) {
      settle(p, b, NULL, s->error);
      continue;
    }
    if (a->dry) {
      *rc = dry_stop(a, b->call.key);
      return 1;
    }
    a->replaying = 0;
    *rc = DURO_ERROR;
    if (!b->out->fn) {
      char *msg =
          xasprintf("duro_do_all \"%s\": branch %zu has no callback", name, i);
      fail_with(a, "Error", msg);
      free(msg);
      return 1;
    }
    if (do_read_config(a, b->call.key, b->out->cfg, &b->call.c) ||
        step_rollback_check(a, b->call.key, rollback_of(p, b)))
      return 1;
    if (!s) {
      if (step_limit_reached(a, b->call.key))
        return 1;
      b->call.s = step_new(a, b->call.key, name, count, DURO_STEP_DO);
    }
    b->state = BR_PENDING;
  }
  return 0;
}

static int stop_starting(const parallel *p, uint32_t flags) {
  return ((flags & DURO_FAIL_FAST) && p->failed) ||
         ((flags & DURO_FIRST) && p->done);
}

/* Asks the callbacks still running to stop: a fail-fast's failure, or a
 * first completion, made them moot. */
static void cancel_running(parallel *p) {
  for (size_t i = 0; i < p->n; i++)
    if (p->br[i].state == BR_RUNNING)
      __atomic_store_n(&p->br[i].at.cancelled, 1, __ATOMIC_RELEASE);
}

/* Starts branch b's attempt: 0, or 1 when the activation must yield
 * instead (nothing started). */
static int start(parallel *p, branch_run *b, int fibers) {
  duro_step *a = p->a;
  if (at_boundary(a) || lease_lapsed(a) || do_enter(a, &b->call))
    return 1;
  do_attempt_init(a, &b->call, &b->at, &b->cut);
  b->state = BR_RUNNING;
  if (!fibers || !engine_branch_start(branch_main, b))
    branch_attempt(b); /* here, at once */
  return 0;
}

/* Judges branch b's returned attempt (on the activation's fiber: it
 * commits). */
static void judge(parallel *p, branch_run *b) {
  duro_step *a = p->a;
  p->returned--;
  /* given up on: nothing of the instance is written any more */
  if (b->yielded || a->reason == SUSPEND_ABANDONED) {
    b->state = BR_GONE;
    return;
  }
  const char *result = NULL;
  switch (do_conclude(a, &b->call, &b->at, b->fn_rc, b->cut, &result)) {
  case DO_DONE:
    settle(p, b, result, NULL);
    /* checked before it ran: cannot fail */
    step_rollback_register(a, b->call.s, rollback_of(p, b));
    break;
  case DO_WAIT:
    b->state = BR_PENDING;
    break;
  case DO_ERRORED:
    settle(p, b, NULL, b->call.s->error);
    break;
  default:
    b->state = BR_GONE;
  }
}

/* The branch to start next: the first pending one whose back-off is
 * over, or NULL. */
static branch_run *next_ready(parallel *p, int64_t now) {
  for (size_t i = 0; i < p->n; i++) {
    branch_run *b = &p->br[i];
    if (b->state == BR_PENDING &&
        (b->call.s->wake_ms == JOURNAL_NONE || b->call.s->wake_ms <= now))
      return b;
  }
  return NULL;
}

/* Runs the pending branches until none can start: each returned one is
 * judged as soon as the activation's fiber is free. */
static void run_branches(parallel *p, uint32_t limit, uint32_t flags) {
  duro_step *a = p->a;
  int fibers = step_is_remote(a) && p->task != NULL;
  size_t running = 0;
  for (;;) {
    int yield = a->suspended;
    int stop = yield || stop_starting(p, flags);
    if (stop)
      cancel_running(p);
    while (!stop && running < limit) {
      branch_run *b = next_ready(p, now_ms(a));
      if (!b)
        break;
      if (start(p, b, fibers)) {
        stop = 1;
        break;
      }
      running++;
      if (b->state == BR_RETURNED)
        break; /* ran here: judged before the next starts */
    }
    if (running == 0)
      return;
    if (p->returned == 0 && engine_branch_wait()) {
      /* orphaned: its thread was given up on; the branches unwind */
      a->suspended = 1;
      a->reason = SUSPEND_ABANDONED;
    }
    step_running_act = a;
    step_running_attempt = NULL;
    for (size_t i = 0; i < p->n; i++)
      if (p->br[i].state == BR_RETURNED) {
        running--;
        judge(p, &p->br[i]);
      }
  }
}

duro_rc step_api_do_all(duro_step *a, const char *name, duro_branch *branches,
                        size_t n, size_t size, uint32_t max_in_flight,
                        uint32_t flags) {
  if (a->suspended || at_boundary(a))
    return DURO_SUSPEND;
  const char *bad = NULL;
  if (!branches || n == 0 || n > DURO_PARALLEL_MAX)
    bad = "takes 1 to 1000 branches (DURO_PARALLEL_MAX)";
  else if (size < offsetof(duro_branch, error) + sizeof(const char *))
    bad = "was given branches of an unknown layout";
  else if (flags & ~(uint32_t)(DURO_FAIL_FAST | DURO_FIRST))
    bad = "was given unknown flags";
  if (bad) {
    char *msg = xasprintf("duro_do_all \"%s\" %s", name ? name : "", bad);
    fail_with(a, "Error", msg);
    free(msg);
    return DURO_ERROR;
  }
  parallel p = {.a = a, .n = n, .size = size, .task = engine_current_task()};
  p.br = arena_alloc(a, n * sizeof *p.br);
  memset(p.br, 0, n * sizeof *p.br);
  for (size_t i = 0; i < n; i++) {
    p.br[i].par = &p;
    p.br[i].out = branch_at(branches, size, i);
    p.br[i].out->result = p.br[i].out->error = NULL;
  }
  duro_rc rc;
  if (look_up(&p, name, &rc))
    return rc;
  /* what the last activation's attempts left owed: retries, or spent */
  for (size_t i = 0; i < n && !stop_starting(&p, flags); i++) {
    branch_run *b = &p.br[i];
    if (b->state == BR_PENDING &&
        do_orphan_policy(a, b->call.s, &b->call.c) == DO_ERRORED)
      settle(&p, b, NULL, b->call.s->error);
  }
  uint32_t limit = max_in_flight ? max_in_flight
                                 : __atomic_load_n(&a->wf->limits.parallel,
                                                   __ATOMIC_RELAXED);
  run_branches(&p, limit ? limit : DURO_PARALLEL_MAX, flags);
  if (a->suspended)
    return DURO_SUSPEND;
  size_t first_failed = n;
  int64_t wake = INT64_MAX;
  for (size_t i = 0; i < n; i++) {
    branch_run *b = &p.br[i];
    if (b->state == BR_FAILED && first_failed == n)
      first_failed = i;
    if (b->state == BR_PENDING && b->call.s->wake_ms < wake)
      wake = b->call.s->wake_ms;
  }
  if ((flags & DURO_FIRST) && p.done)
    return DURO_OK;
  int given_up = (flags & DURO_FAIL_FAST) && p.failed;
  if (wake != INT64_MAX && !given_up)
    return suspend_until(a, wake, NULL); /* a back-off: the rest later */
  if (!p.failed)
    return DURO_OK;
  a->last_error = p.br[first_failed].call.s->error;
  return DURO_ERROR;
}
