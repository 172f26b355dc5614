/* engine_worker.c — the worker threads: each runs activations as tasks
 * on fibers of its own (fiber.h), ready ones first, and starts new ones
 * from the runnable FIFO while it has room; a step's commit parks its
 * task while the worker runs others (engine_commit_step), an activation's
 * last writes are committed without waiting (engine_commit_final); a
 * worker started, left and its ready tasks orphaned when the watchdog
 * gave up on it; and the calling thread run as one, inline
 * (duro_engine_run_until_idle).
 *
 * One file for the per-step path of the worker side (engine_commit_step,
 * worker_idle, on_task_commit, task_resume), as it was in one engine.c. */
#include "altstack.h"
#include "engine_internal.h"
#include "fiber.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "backend.h"
#include "clock.h"
#include "error.h"
#include "util.h"

/* ---- worker threads ------------------------------------------------------ */

/* Takes a popped entry for what it was queued for, in the same critical
 * section as the pop (mu held): an activation, or a control request. */
static int claim_locked(entry *ent) {
  int control = ent->apply_control;
  ent->apply_control = 0;
  ent->state = control ? ENTRY_CONTROL : ENTRY_ACTIVE;
  __atomic_store_n(&ent->admitted, 0, __ATOMIC_RELEASE);
  return control;
}

static __thread worker *current_worker;
static __thread ledger_slot *current_slot;

worker *engine_thread_worker(void) { return current_worker; }
ledger_slot *engine_thread_slot(void) { return current_slot; }

/* A worker leaves (mu held): stopping, or its hung attempt returned after
 * a replacement took its place. */
static void worker_exit_locked(duro_engine *e, worker *w) {
  if (w->abandoned) {
    e->stuck--;
    free(w->hung_workflow);
    free(w->hung_id);
    free(w->hung_key);
    w->hung_workflow = w->hung_id = w->hung_key = NULL;
  } else {
    e->live--;
  }
  w->exited = 1;
  pthread_cond_broadcast(&e->changed);
}

/* ---- activations on fibers ----------------------------------------------- */

/* At most this many activations share a worker: enough to keep it busy
 * through a commit, few enough that a slow callback delays few others.
 * Those parked on a worker process's channel (engine_park_fd) for
 * PARK_LONG_MS or more wait on plugin code running elsewhere, a callback
 * that blocks on I/O for one: they hold no share of this thread, and up
 * to WORKER_MAX_PARKED more of them may wait beside the rest (each a
 * fiber: memory, not time).  One parked for a round trip still counts:
 * steps that return at once gain nothing from more activations in
 * flight than the commits can take, and W1 through a worker with a
 * thousand of them (not a hundred) spent its CPU in page faults of the
 * memory they held.  Those held for their plugin's admission
 * (engine_admit.c) hold no share either. */
#define WORKER_MAX_TASKS 16
#define WORKER_MAX_PARKED 512
#define PARK_LONG_MS 2
/* Finished fibers are kept, so a busy worker maps no stacks: a new
 * mapping costs a page fault for every stack page the activation
 * touches. */
#define WORKER_SPARE_FIBERS WORKER_MAX_TASKS

struct engine_task {
  duro_engine *e;
  worker *w;
  entry *ent;
  fiber *f;
  int rc;       /* the parked commit's result */
  int orphaned; /* see engine_commit_step */
  /* Why it failed: journal_errmsg is per thread, and the commit ran on
   * another (the writer, or the group's leader). */
  char err[256];
  struct engine_task *next;
  int park_fd; /* >= 0: parked until it is ready (engine_park_fd) */
  short (*park_events)(void *ctx); /* for what, asked at each poll */
  void *park_ctx;
  short park_revents; /* what poll saw ready when it resumed the task */
  int64_t park_until; /* engine_mono_ms when it is resumed anyway */
  int64_t park_since; /* clock_mono_ms it parked (real time: how long a
                         worker takes, not the engine's clock) */
  int park_long;      /* counted in w->fd_long */
  struct engine_task *fd_next, **fd_pprev; /* on w->fd_head's list */
  /* A branch of another task's activation (engine_branch_start): it
   * runs fn(arg), and its entry is that task's, whose it stays. */
  int branch;
  void (*branch_fn)(void *arg);
  void *branch_arg;
  /* The task waits for one of its branches (engine_branch_wait), or one
   * ended while it did something else (mu). */
  int branch_waiting, branch_woken;
};

/* The task whose fiber runs on this thread; NULL on the worker's own
 * stack (set by task_resume around the switch). */
static __thread engine_task *current_task;

static void task_main(void *arg) {
  engine_task *t = arg;
  if (t->branch)
    t->branch_fn(t->branch_arg);
  else
    activation_run(t->e, t->ent);
}

static void ready_push_locked(worker *w, engine_task *t) {
  t->next = NULL;
  if (w->ready_tail)
    w->ready_tail->next = t;
  else
    w->ready_head = t;
  w->ready_tail = t;
}

static engine_task *ready_pop_locked(worker *w) {
  engine_task *t = w->ready_head;
  if (t && !(w->ready_head = t->next))
    w->ready_tail = NULL;
  return t;
}

/* Runs t until it parks or ends (mu not held). */
static void task_resume(duro_engine *e, worker *w, engine_task *t) {
  current_task = t;
  fiber_resume(t->f);
  current_task = NULL;
  if (!fiber_finished(t->f))
    return; /* parked on a commit: its callback makes it ready */
  if (w->n_spare < WORKER_SPARE_FIBERS)
    w->spare[w->n_spare++] = t->f;
  else
    fiber_destroy(t->f);
  free(t);
  pthread_mutex_lock(&e->mu);
  w->tasks--;
  pthread_mutex_unlock(&e->mu);
}

/* Starts the activation of a claimed entry on a fiber of its own, or on
 * the worker's stack when no fiber can be had (mu not held). */
static void task_start(duro_engine *e, worker *w, entry *ent) {
  fiber *f = w->n_spare ? w->spare[--w->n_spare] : fiber_create();
  if (!f) {
    activation_run(e, ent);
    return;
  }
  engine_task *t = xcalloc(1, sizeof *t);
  t->e = e;
  t->w = w;
  t->ent = ent;
  t->f = f;
  t->park_fd = -1;
  fiber_start(f, task_main, t);
  pthread_mutex_lock(&e->mu);
  w->tasks++;
  pthread_mutex_unlock(&e->mu);
  task_resume(e, w, t);
}

/* The commit a task parked on landed (on the committing thread). */
static void on_task_commit(void *ctx, int rc) {
  engine_task *t = ctx;
  duro_engine *e = t->e;
  worker *w = t->w;
  entry *ent = t->ent;
  if (rc)
    snprintf(t->err, sizeof t->err, "%s", journal_errmsg(e->j));
  pthread_mutex_lock(&e->mu);
  t->rc = rc;
  /* Its worker hangs in another activation: this one must not wait for
   * that to end.  Its step is durable now, so it can run again from the
   * journal elsewhere; the fiber only unwinds, if the worker returns. */
  int orphan = t->orphaned = __atomic_load_n(&w->abandoned, __ATOMIC_ACQUIRE);
  ready_push_locked(w, t);
  pthread_cond_signal(&w->wake);
  int poke = w->polling;
  pthread_mutex_unlock(&e->mu);
  if (poke) {
    uint64_t one = 1;
    ssize_t k = write(w->wake_fd, &one, sizeof one);
    (void)k; /* a full counter still wakes the poll */
  }
  if (orphan)
    engine_activation_done(e, ent, DURO_STATUS_QUEUED, JOURNAL_NONE, 0);
}

/* Nothing else for this task's worker to run: it may commit itself, as
 * the group's leader, rather than hand the batch to the writer thread
 * (a sequence of steps would pay two thread wakes a step for the hop). */
static int worker_idle(duro_engine *e, const engine_task *t) {
  pthread_mutex_lock(&e->mu);
  int idle = !t->w->ready_head && !e->runnable.head;
  pthread_mutex_unlock(&e->mu);
  return idle;
}

int engine_commit_step(duro_engine *e, journal_batch *b, int *orphaned) {
  engine_task *t = current_task;
  *orphaned = 0;
  if (!t || worker_idle(e, t))
    return journal_commit(e->j, b);
  journal_commit_background(e->j, b, on_task_commit, t);
  fiber_yield();
  /* Back on this worker, the commit done (the worker set current_task);
   * its failure becomes this thread's journal_errmsg, as a commit made
   * here would have left it. */
  *orphaned = t->orphaned;
  if (t->rc)
    store_error("%s", t->err);
  return t->rc;
}

void engine_commit_final(duro_engine *e, journal_batch *b, journal_done_fn fn,
                         void *ctx) {
  engine_task *t = current_task;
  if (t && !worker_idle(e, t))
    journal_commit_background(e->j, b, fn, ctx); /* never lead: others wait */
  else
    journal_commit_async(e->j, b, fn, ctx);
}

/* ---- tasks parked on a file descriptor --------------------------------- */

engine_task *engine_current_task(void) { return current_task; }

int engine_park_fd(int fd, short (*events)(void *ctx), void *ctx, int64_t until,
                   short *revents) {
  engine_task *t = current_task;
  duro_engine *e = t->e;
  pthread_mutex_lock(&e->mu);
  t->park_fd = fd;
  t->park_events = events;
  t->park_ctx = ctx;
  t->park_revents = 0;
  t->park_until = until;
  t->park_since = clock_mono_ms();
  t->park_long = 0;
  t->fd_next = t->w->fd_head;
  if (t->fd_next)
    t->fd_next->fd_pprev = &t->fd_next;
  t->fd_pprev = &t->w->fd_head;
  t->w->fd_head = t;
  t->w->fd_parked++;
  pthread_mutex_unlock(&e->mu);
  fiber_yield();
  if (revents)
    *revents = t->park_revents;
  return t->orphaned;
}

/* Takes t off its worker's parked list and makes it ready (mu held);
 * constant time: a pump routing a frame to each of hundreds of parked
 * activations unparks them one by one. */
static void unpark_locked(worker *w, engine_task *t) {
  if (t->park_fd < 0)
    return; /* not parked */
  *t->fd_pprev = t->fd_next;
  if (t->fd_next)
    t->fd_next->fd_pprev = t->fd_pprev;
  t->fd_next = NULL;
  t->fd_pprev = NULL;
  t->park_fd = -1;
  w->fd_parked--;
  if (t->park_long)
    w->fd_long--;
  t->park_long = 0;
  ready_push_locked(w, t);
}

void engine_unpark(engine_task *t) {
  pthread_mutex_lock(&t->e->mu);
  unpark_locked(t->w, t);
  pthread_mutex_unlock(&t->e->mu);
}

/* ---- branches of an activation --------------------------------------------
 */

engine_task *engine_branch_start(void (*fn)(void *arg), void *arg) {
  engine_task *parent = current_task;
  if (!parent)
    return NULL;
  worker *w = parent->w;
  fiber *f = w->n_spare ? w->spare[--w->n_spare] : fiber_create();
  if (!f)
    return NULL;
  engine_task *t = xcalloc(1, sizeof *t);
  t->e = parent->e;
  t->w = w;
  t->ent = parent->ent;
  t->f = f;
  t->park_fd = -1;
  t->branch = 1;
  t->branch_fn = fn;
  t->branch_arg = arg;
  fiber_start(f, task_main, t);
  pthread_mutex_lock(&t->e->mu);
  w->tasks++;
  ready_push_locked(w, t); /* runs once its activation's task yields */
  pthread_mutex_unlock(&t->e->mu);
  return t;
}

int engine_branch_wait(void) {
  engine_task *t = current_task;
  duro_engine *e = t->e;
  pthread_mutex_lock(&e->mu);
  if (t->branch_woken) {
    t->branch_woken = 0;
    pthread_mutex_unlock(&e->mu);
    return t->orphaned;
  }
  t->branch_waiting = 1;
  engine_task_hold_locked(t); /* no share of the thread while it waits */
  pthread_mutex_unlock(&e->mu);
  return engine_task_held_yield(t);
}

void engine_branch_wake(engine_task *t) {
  duro_engine *e = t->e;
  pthread_mutex_lock(&e->mu);
  if (t->branch_waiting) {
    t->branch_waiting = 0;
    engine_task_release_locked(t);
  } else {
    t->branch_woken = 1;
  }
  pthread_mutex_unlock(&e->mu);
}

/* ---- tasks held for their plugin's admission ----------------------------- */

void engine_task_hold_locked(engine_task *t) { t->w->held++; }

int engine_task_held_yield(engine_task *t) {
  fiber_yield();
  return t->orphaned;
}

/* Its thread may sleep on the engine's `work` while all its tasks are
 * held: both are woken. */
void engine_task_release_locked(engine_task *t) {
  worker *w = t->w;
  w->held--;
  ready_push_locked(w, t);
  pthread_cond_signal(&w->wake);
  pthread_cond_broadcast(&t->e->work);
  if (w->polling) {
    uint64_t one = 1;
    ssize_t k = write(w->wake_fd, &one, sizeof one);
    (void)k; /* a full counter still wakes the poll */
  }
}

/* Waits (mu held, released meanwhile) until a parked task's descriptor
 * is ready, a commit made a task ready (the eventfd), a parked task's
 * time came, or 10 ms passed (new work may be queued: the engine's
 * `work` condition is not polled).  One task per ready descriptor is
 * made ready: it reads and writes for the others that share it (a
 * channel's frames are routed by whoever reads them, and its queued
 * frames written by whoever runs next). */
#define POLL_MAX 64
static void poll_parked(duro_engine *e, worker *w) {
  struct pollfd fds[POLL_MAX + 1];
  nfds_t n = 0;
  int64_t now = engine_mono_ms(e), wait = 10;
  fds[n++] = (struct pollfd){.fd = w->wake_fd, .events = POLLIN};
  int64_t real = clock_mono_ms();
  for (engine_task *t = w->fd_head; t; t = t->fd_next) {
    if (t->park_until - now < wait)
      wait = t->park_until <= now ? 0 : t->park_until - now;
    if (t->park_long)
      continue;
    int64_t long_in = t->park_since + PARK_LONG_MS - real;
    if (long_in <= 0) {
      t->park_long = 1; /* from now on it holds no share of the thread */
      w->fd_long++;
    } else if (long_in < wait) {
      wait = long_in; /* look again then: its share may start another */
    }
  }
  /* What each descriptor is waited on for is asked now, not when its
   * tasks parked: room to write is wanted only while frames are queued,
   * and another task may have written them since (a stale POLLOUT would
   * make every poll return at once). */
  for (engine_task *t = w->fd_head; t && n <= POLL_MAX; t = t->fd_next) {
    nfds_t i = 1;
    while (i < n && fds[i].fd != t->park_fd)
      i++;
    if (i == n)
      fds[n++] = (struct pollfd){.fd = t->park_fd,
                                 .events = t->park_events(t->park_ctx)};
  }
  w->polling = 1;
  pthread_mutex_unlock(&e->mu);
  int got = poll(fds, n, (int)wait);
  if (got > 0 && (fds[0].revents & POLLIN)) {
    uint64_t v;
    ssize_t k = read(w->wake_fd, &v, sizeof v);
    (void)k;
  }
  pthread_mutex_lock(&e->mu);
  w->polling = 0;
  for (nfds_t i = 1; got > 0 && i < n; i++) {
    if (!fds[i].revents)
      continue;
    for (engine_task *t = w->fd_head; t; t = t->fd_next)
      if (t->park_fd == fds[i].fd) {
        unpark_locked(w, t);
        t->park_revents = fds[i].revents;
        break;
      }
  }
  now = engine_mono_ms(e);
  for (engine_task *t = w->fd_head, *next; t; t = next) {
    next = t->fd_next;
    if (t->park_until <= now)
      unpark_locked(w, t);
  }
}

size_t engine_orphan_ready_locked(worker *w, entry ***out) {
  /* Held for admission: they would run on this thread, once handed a
   * place; made ready as orphans, they only unwind if it returns. */
  engine_task **held;
  size_t n_held = engine_admit_orphans_locked(w->e, w, &held);
  for (size_t i = 0; i < n_held; i++)
    engine_task_release_locked(held[i]);
  free(held);
  size_t n = 0;
  for (engine_task *t = w->ready_head; t; t = t->next)
    n++;
  for (engine_task *t = w->fd_head; t; t = t->fd_next)
    n++;
  *out = n ? xmalloc(n * sizeof **out) : NULL;
  n = 0;
  /* a branch's entry is its activation's task's, listed with that */
  for (engine_task *t = w->ready_head; t; t = t->next)
    if (!t->orphaned) {
      t->orphaned = 1;
      if (!t->branch)
        (*out)[n++] = t->ent;
    }
  /* parked on a worker's channel: they only unwind, if ever resumed */
  for (engine_task *t = w->fd_head; t; t = t->fd_next)
    if (!t->orphaned) {
      t->orphaned = 1;
      if (!t->branch)
        (*out)[n++] = t->ent;
    }
  return n;
}

/* A worker runs ready tasks first (their instances are furthest along),
 * then starts new activations while it has room; it sleeps on its own
 * condition while tasks of its own are parked (a commit wakes it within
 * a group's time), otherwise on the engine's.  It leaves, when stopping
 * or abandoned, once its tasks have ended. */
static void *worker_main(void *arg) {
  worker *w = arg;
  duro_engine *e = w->e;
  current_worker = w;
  current_slot = w->slot;
  ledger_thread_bind(e->ledger, w->slot);
  thread_altstack();
  w->spare = xcalloc(WORKER_SPARE_FIBERS, sizeof *w->spare);
  pthread_mutex_lock(&e->mu);
  for (;;) {
    engine_task *t = ready_pop_locked(w);
    if (t) {
      pthread_mutex_unlock(&e->mu);
      task_resume(e, w, t);
      pthread_mutex_lock(&e->mu);
      continue;
    }
    int leaving = e->stopping || w->abandoned;
    if (leaving && w->tasks == 0)
      break;
    int room = w->tasks - w->fd_long - w->held < WORKER_MAX_TASKS &&
               w->tasks < WORKER_MAX_TASKS + WORKER_MAX_PARKED;
    entry *ent = !leaving && room ? runnable_pop(e) : NULL;
    if (ent) {
      int control = claim_locked(ent);
      pthread_mutex_unlock(&e->mu);
      if (control)
        control_on_entry(e, ent, control);
      else
        task_start(e, w, ent);
      pthread_mutex_lock(&e->mu);
      continue;
    }
    if (w->fd_head && w->wake_fd >= 0)
      poll_parked(e, w);
    else
      pthread_cond_wait(w->tasks > w->held ? &w->wake : &e->work, &e->mu);
  }
  worker_exit_locked(e, w);
  pthread_mutex_unlock(&e->mu);
  while (w->n_spare)
    fiber_destroy(w->spare[--w->n_spare]);
  free(w->spare);
  w->spare = NULL;
  ledger_release(e->ledger, w->slot);
  return NULL;
}

int engine_spawn_worker_locked(duro_engine *e) {
  worker *w = xcalloc(1, sizeof *w);
  w->e = e;
  w->slot = ledger_claim(e->ledger, LEDGER_IDLE);
  w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->wake, NULL);
  if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
    ledger_release(e->ledger, w->slot);
    if (w->wake_fd >= 0)
      close(w->wake_fd);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->wake);
    free(w);
    return DURO_E_IO;
  }
  e->workers = xrealloc(e->workers, (e->n_workers + 1) * sizeof *e->workers);
  e->workers[e->n_workers++] = w;
  e->live++;
  return 0;
}

/* ---- the calling thread as a worker, inline ------------------------------ */

size_t duro_engine_run_until_idle(duro_engine *e) {
  size_t ran = 0;
  duro_engine_poll_due(e);
  /* The calling thread runs plugin code: it takes a ledger slot while it
   * does (none left: it runs without one). */
  ledger_slot *slot = ledger_claim(e->ledger, LEDGER_IDLE);
  ledger_slot *outer = current_slot;
  current_slot = slot;
  ledger_thread_bind(e->ledger, slot);
  pthread_mutex_lock(&e->mu);
  engine_retries_due_locked(e, engine_mono_ms(e));
  int drained = 0;
  for (;;) {
    entry *ent = runnable_pop(e);
    if (!ent && e->spill_min != INT64_MAX) {
      /* the backlog's turn, as the scheduler thread would pull it in */
      pthread_mutex_unlock(&e->mu);
      engine_refill(e);
      pthread_mutex_lock(&e->mu);
      ent = runnable_pop(e);
    }
    if (!ent && !drained) {
      /* An activation's last commit may be in a group the journal's
       * writer thread leads (one that began with a log line's): once it
       * is on disk, its instance may be runnable again. */
      pthread_mutex_unlock(&e->mu);
      journal_drain(e->j);
      pthread_mutex_lock(&e->mu);
      drained = 1;
      continue;
    }
    if (!ent)
      break;
    drained = 0;
    int control = claim_locked(ent);
    pthread_mutex_unlock(&e->mu);
    if (control)
      control_on_entry(e, ent, control);
    else
      activation_run(e, ent); /* on this stack: commits wait here */
    ran += !control;          /* activations, not control requests */
    pthread_mutex_lock(&e->mu);
  }
  pthread_mutex_unlock(&e->mu);
  current_slot = outer;
  ledger_release(e->ledger, slot);
  ledger_thread_bind(e->ledger, outer);
  return ran;
}
