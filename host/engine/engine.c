/* engine.c — instances: creation, control (pause, resume, terminate,
 * restart, events) and the scheduling of activations; reading them is
 * inspect.c.
 *
 * The database is the truth.  In memory the engine keeps only `entries`
 * for instances that are runnable, running or under a control operation
 * (engine_internal.h states the invariant), and a FIFO of runnable ones.  A
 * waiting instance is a row with a wake time; poll_due() turns rows whose
 * time has come into runnable entries.  `polled_through` remembers how far
 * it has looked, so the next timer is the smallest wake above it.
 *
 * Control operations on an idle instance take a CONTROL entry, rewrite the
 * row, and drop the entry.  On an ACTIVE instance they set a flag the
 * activation reads at its next step boundary, and persist the request in
 * the row's `control` column so a crash cannot lose an acknowledged pause
 * or terminate. */
#include "engine_internal.h"
#include "fiber.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "backend.h"
#include "error.h"
#include "log.h"
#include "util.h"

#define DEFAULT_RETENTION_MS (30LL * 24 * 3600 * 1000)
#define DEFAULT_MAX_STEPS 10000
#define DUE_BATCH 1024

/* A UUIDv7: 48 bits of Unix milliseconds, then random bits.  Ids made
 * close in time sort close together, so creating many instances appends
 * to the (workflow, id) index instead of writing all over it. */
static char *random_id(int64_t now_ms) {
  unsigned char b[16];
  if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
    fprintf(stderr, "duro: getrandom failed: %s\n", strerror(errno));
    abort();
  }
  for (int i = 0; i < 6; i++)
    b[i] = (unsigned char)((uint64_t)now_ms >> (40 - 8 * i));
  b[6] = (b[6] & 0x0f) | 0x70;
  b[8] = (b[8] & 0x3f) | 0x80;
  return xasprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                   "%02x%02x%02x%02x%02x%02x",
                   b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
                   b[10], b[11], b[12], b[13], b[14], b[15]);
}

int json_text_check(const char *text, int64_t limit) {
  return json_text_check_at(text, limit, NULL, 0);
}

int json_text_check_at(const char *text, int64_t limit, char *why,
                       size_t why_len) {
  size_t len = strlen(text);
  if (limit > 0 && (int64_t)len > limit)
    return DURO_E_OUTPUT_TOO_LARGE;
  json_error_t jerr;
  json_t *v = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
  if (!v) {
    if (why)
      snprintf(why, why_len, "%s at line %d, column %d (byte %d)", jerr.text,
               jerr.line, jerr.column, jerr.position);
    return DURO_E_INVALID_OUTPUT;
  }
  json_decref(v);
  return 0;
}

void engine_event_stored(duro_engine *e, const journal_op *wake) {
  metrics_add(&e->m.events_sent, 1);
  /* Another host runs it: the commit sent that host a notice. */
  if (wake->out_owner == journal_host(e->j))
    engine_instance_poke(e, wake->rowid, wake->out_rowid > 0);
}

void engine_instance_poke(duro_engine *e, int64_t rowid, int woke) {
  pthread_mutex_lock(&e->mu);
  entry *ent = idmap_get(&e->entries, rowid);
  if (ent) {
    if (ent->state != ENTRY_QUEUED)
      ent->rerun = 1;
  } else if (woke) {
    runnable_push(e, entry_take(e, rowid, ENTRY_QUEUED));
  }
  pthread_mutex_unlock(&e->mu);
}

char *error_json(const char *name, const char *message) {
  json_t *o = json_pack("{s:s,s:s}", "name", name, "message", message);
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (!s) {
    fprintf(stderr, "duro: out of memory\n");
    abort();
  }
  /* jansson allocates with malloc, so the caller's free() is right */
  return s;
}

/* ---- registry ------------------------------------------------------------ */

wf_reg *engine_find_workflow(const duro_engine *e, const char *name) {
  for (size_t i = 0; name && i < e->n_wfs; i++)
    if (strcmp(e->wfs[i].name, name) == 0)
      return &e->wfs[i];
  return NULL;
}

const duro_workflow_limits *engine_workflow_limits(const wf_reg *wf) {
  return wf ? &wf->limits : NULL;
}

wf_reg *engine_find_binding(const duro_engine *e, const char *binding) {
  for (size_t i = 0; binding && i < e->n_wfs; i++)
    if (e->wfs[i].binding && strcmp(e->wfs[i].binding, binding) == 0)
      return &e->wfs[i];
  return NULL;
}

int duro_engine_register(duro_engine *e, const char *name, const char *binding,
                         duro_run_fn run, const duro_workflow_limits *limits,
                         const char *build) {
  if (!name || !run || engine_find_workflow(e, name) || e->workers)
    return DURO_E_INVALID_ARGUMENT;
  /* Registration happens before start; nothing holds pointers yet, so the
   * array may move. */
  e->wfs = xrealloc(e->wfs, (e->n_wfs + 1) * sizeof *e->wfs);
  wf_reg *w = &e->wfs[e->n_wfs++];
  memset(w, 0, sizeof *w);
  w->engine = e;
  w->name = xstrdup(name);
  w->binding = binding ? xstrdup(binding) : NULL;
  pthread_mutex_init(&w->builds_mu, NULL);
  if (limits)
    w->limits = *limits;
  if (w->limits.lifecycle_queue)
    w->limits.lifecycle_queue = xstrdup(w->limits.lifecycle_queue);
  if (w->limits.retention_ms <= 0)
    w->limits.retention_ms = DEFAULT_RETENTION_MS;
  if (w->limits.max_steps == 0)
    w->limits.max_steps = DEFAULT_MAX_STEPS;
  return duro_engine_add_build(e, name, build, run, 1);
}

int duro_engine_set_limits(duro_engine *e, const char *name,
                           int64_t retention_ms, uint32_t max_steps) {
  wf_reg *w = engine_find_workflow(e, name);
  if (!w)
    return DURO_E_NOT_FOUND;
  /* Read where they are used, without a lock: stored atomically. */
  __atomic_store_n(&w->limits.retention_ms,
                   retention_ms > 0 ? retention_ms : DEFAULT_RETENTION_MS,
                   __ATOMIC_RELAXED);
  __atomic_store_n(&w->limits.max_steps,
                   max_steps ? max_steps : DEFAULT_MAX_STEPS, __ATOMIC_RELAXED);
  return 0;
}

/* ---- entries and the runnable FIFO (call with mu held) --------------------
 */

entry *entry_take(duro_engine *e, int64_t rowid, int state) {
  entry *ent = xcalloc(1, sizeof *ent);
  ent->rowid = rowid;
  ent->state = state;
  idmap_put(&e->entries, rowid, ent);
  return ent;
}

void entry_drop(duro_engine *e, entry *ent) {
  idmap_del(&e->entries, ent->rowid);
  free(ent);
  /* After a burst (a million instances created at once) the map and the
   * freed entries would keep the peak's memory: give it back once idle. */
  if (e->entries.len == 0 && e->entries.cap > 65536) {
    idmap_free(&e->entries);
    malloc_trim(0);
  }
  pthread_cond_broadcast(&e->changed);
}

void fifo_push(entry_fifo *q, entry *ent) {
  ent->next = NULL;
  if (q->tail)
    q->tail->next = ent;
  else
    q->head = ent;
  q->tail = ent;
  q->n++;
}

entry *fifo_pop(entry_fifo *q) {
  entry *ent = q->head;
  if (ent) {
    q->n--;
    q->head = ent->next;
    if (!q->head)
      q->tail = NULL;
    ent->next = NULL;
  }
  return ent;
}

void fifo_remove(entry_fifo *q, entry *ent) {
  entry **pp = &q->head, *prev = NULL;
  for (; *pp; prev = *pp, pp = &(*pp)->next)
    if (*pp == ent) {
      *pp = ent->next;
      if (q->tail == ent)
        q->tail = prev;
      ent->next = NULL;
      q->n--;
      return;
    }
}

void runnable_push(duro_engine *e, entry *ent) {
  ent->state = ENTRY_QUEUED;
  fifo_push(&e->runnable, ent);
  pthread_cond_signal(&e->work);
}

static entry *runnable_pop(duro_engine *e) {
  entry *ent = fifo_pop(&e->runnable);
  /* Draining: the scheduler pulls in the backlog kept only as rows. */
  if (ent && e->spill_min != INT64_MAX &&
      e->runnable.n == e->max_runnable / 2) {
    e->sched_kick = 1;
    pthread_cond_signal(&e->sched);
  }
  return ent;
}

/* Takes a queued entry out of whichever FIFO holds it. */
void runnable_remove(duro_engine *e, entry *ent) {
  if (ent->state == ENTRY_RETRY) {
    fifo_remove(&e->retrying, ent);
  } else if (ent->deferred_in) {
    fifo_remove(&ent->deferred_in->deferred, ent);
    ent->deferred_in = NULL;
  } else {
    fifo_remove(&e->runnable, ent);
  }
}

int engine_activation_admit(duro_engine *e, entry *ent, wf_reg *wf) {
  if (!wf->limits.concurrency) {
    /* no limit, nothing to count: keep mu out of the hot path */
    __atomic_store_n(&ent->admitted, 1, __ATOMIC_RELEASE);
    return 1;
  }
  int admitted = 1;
  pthread_mutex_lock(&e->mu);
  if (wf->limits.concurrency && wf->running >= wf->limits.concurrency) {
    ent->state = ENTRY_QUEUED;
    ent->deferred_in = wf;
    fifo_push(&wf->deferred, ent);
    pthread_cond_broadcast(&e->changed);
    admitted = 0;
  } else {
    wf->running++;
    ent->counted = wf;
    __atomic_store_n(&ent->admitted, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&e->mu);
  return admitted;
}

/* Gives back the activation's concurrency slot and lets one parked
 * instance of the workflow run. */
void release_slot_locked(duro_engine *e, entry *ent) {
  wf_reg *wf = ent->counted;
  if (!wf)
    return;
  ent->counted = NULL;
  wf->running--;
  entry *next = fifo_pop(&wf->deferred);
  if (next) {
    next->deferred_in = NULL;
    runnable_push(e, next);
  }
}

/* Queues an instance that has no entry; an existing entry gets `rerun`. */
static void make_runnable_locked(duro_engine *e, int64_t rowid) {
  entry *ent = idmap_get(&e->entries, rowid);
  if (!ent)
    runnable_push(e, entry_take(e, rowid, ENTRY_QUEUED));
  else if (ent->state != ENTRY_QUEUED)
    ent->rerun = 1;
}

/* A new queued instance: runnable in memory while the FIFO holds fewer
 * than max_runnable, else a row the scheduler pulls in later, so a
 * burst of creations costs rows, not memory. */
void engine_queue_new_locked(duro_engine *e, int64_t rowid) {
  if (e->runnable.n >= e->max_runnable && !idmap_get(&e->entries, rowid)) {
    if (rowid < e->spill_min)
      e->spill_min = rowid;
    e->spilled++;
    return;
  }
  make_runnable_locked(e, rowid);
}

size_t engine_backlog(duro_engine *e) {
  pthread_mutex_lock(&e->mu);
  size_t n = e->runnable.n + e->spilled;
  pthread_mutex_unlock(&e->mu);
  return n;
}

/* The scheduler: queued rows from spill_min on, in rowid order, become
 * runnable until the FIFO is half full again. */
void engine_refill(duro_engine *e) {
  enum { PAGE = 1000 };
  int64_t rowids[PAGE];
  for (;;) {
    pthread_mutex_lock(&e->mu);
    int64_t from = e->spill_min;
    size_t room = e->runnable.n < e->max_runnable / 2
                      ? e->max_runnable / 2 - e->runnable.n
                      : 0;
    if (from == INT64_MAX || room == 0 || e->stopping) {
      pthread_mutex_unlock(&e->mu);
      return;
    }
    e->spill_min = INT64_MAX; /* refusals meanwhile set it again */
    pthread_mutex_unlock(&e->mu);
    size_t limit = room < PAGE ? room : PAGE, n = 0;
    int rc = journal_queued_from(e->j, from, limit, rowids, &n);
    pthread_mutex_lock(&e->mu);
    if (rc) {
      if (from < e->spill_min)
        e->spill_min = from; /* look again next pass */
      pthread_mutex_unlock(&e->mu);
      log_error("reading the backlog: %s", journal_errmsg(e->j));
      return;
    }
    for (size_t i = 0; i < n; i++)
      if (!idmap_get(&e->entries, rowids[i])) {
        runnable_push(e, entry_take(e, rowids[i], ENTRY_QUEUED));
        if (e->spilled)
          e->spilled--;
      }
    if (n == limit && rowids[n - 1] + 1 < e->spill_min)
      e->spill_min = rowids[n - 1] + 1; /* more may follow */
    else if (n < limit && e->spill_min == INT64_MAX)
      e->spilled = 0; /* the rows are all in: nothing left behind */
    pthread_cond_broadcast(&e->work);
    pthread_mutex_unlock(&e->mu);
    if (n < limit)
      return;
  }
}

/* ---- open / start / close ------------------------------------------------ */

int duro_engine_open(const duro_engine_options *opt, duro_engine **out,
                     char *err, size_t errlen) {
  duro_engine *e = xcalloc(1, sizeof *e);
  e->opt = *opt;
  e->clock = opt->clock ? opt->clock : duro_clock_real();
  e->gate_open_ms = engine_mono_ms(e) + ENGINE_SUSPECT_SETTLE_MS;
  e->max_step_result =
      opt->max_step_result > 0 ? opt->max_step_result : 1024 * 1024;
  e->max_instance_state = opt->max_instance_state > 0 ? opt->max_instance_state
                                                      : 1024LL * 1024 * 1024;
  e->polled_through = INT64_MIN;
  e->max_runnable = opt->max_runnable ? opt->max_runnable : 10000;
  e->spill_min = INT64_MAX;
  engine_history_init(e);
  int rc = journal_open_backend(
      opt->backend ? opt->backend : &store_sqlite, opt->db_path,
      opt->read_only ? -1 : opt->synchronous_full, &e->j, err, errlen);
  if (rc) {
    free(e);
    return rc;
  }
  e->ledger = opt->ledger;
  if (!e->ledger) {
    e->ledger = ledger_create_private(ledger_slots_for(opt->workers));
    e->own_ledger = 1;
    if (!e->ledger) {
      fprintf(stderr, "duro: out of memory\n");
      abort();
    }
  }
  e->max_crashes = opt->max_crashes ? opt->max_crashes : 3;
  e->max_stuck = opt->max_hung ? opt->max_hung : opt->workers;
  pthread_mutex_init(&e->mu, NULL);
  pthread_mutex_init(&e->watches_mu, NULL);
  engine_cond_init(&e->work);
  engine_cond_init(&e->changed);
  engine_cond_init(&e->watch);
  engine_cond_init(&e->sched);
  pthread_mutex_init(&e->gate_mu, NULL);
  engine_cond_init(&e->gate_cv);
  for (size_t i = 0; i < sizeof e->control_mu / sizeof *e->control_mu; i++)
    pthread_mutex_init(&e->control_mu[i], NULL);
  if ((rc = engine_join(e, err, errlen)) != 0) {
    /* nothing else was started yet */
    journal_close(e->j);
    if (e->own_ledger)
      ledger_free(e->ledger);
    free(e);
    return rc;
  }
  engine_drivers_open(e); /* the built-in ones always fit */
  *out = e;
  return 0;
}

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
 * through a commit, few enough that a slow callback delays few others. */
#define WORKER_MAX_TASKS 16
/* Finished fibers are kept, so a busy worker maps no stacks: a new
 * mapping costs a page fault for every stack page the activation
 * touches. */
#define WORKER_SPARE_FIBERS WORKER_MAX_TASKS

typedef struct engine_task {
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
} engine_task;

/* The task whose fiber runs on this thread; NULL on the worker's own
 * stack (set by task_resume around the switch). */
static __thread engine_task *current_task;

static void task_main(void *arg) {
  engine_task *t = arg;
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
  pthread_mutex_unlock(&e->mu);
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

size_t engine_orphan_ready_locked(worker *w, entry ***out) {
  size_t n = 0;
  for (engine_task *t = w->ready_head; t; t = t->next)
    n++;
  *out = n ? xmalloc(n * sizeof **out) : NULL;
  n = 0;
  for (engine_task *t = w->ready_head; t; t = t->next)
    if (!t->orphaned) {
      t->orphaned = 1;
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
  ledger_thread_altstack();
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
    entry *ent =
        !leaving && w->tasks < WORKER_MAX_TASKS ? runnable_pop(e) : NULL;
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
    pthread_cond_wait(w->tasks ? &w->wake : &e->work, &e->mu);
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
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->wake, NULL);
  if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
    ledger_release(e->ledger, w->slot);
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

int duro_engine_start(duro_engine *e) {
  /* Instances of hosts that stopped (this one's previous run among them)
   * become this host's first, so that recovery finds them. */
  engine_takeover(e);
  e->next_takeover = engine_mono_ms(e) + engine_lease_ms(e) / 2;
  int rc = engine_record_crashes(e);
  if (rc == 0)
    rc = engine_reconcile(e);
  if (rc)
    return rc;
  duro_engine_poll_due(e);
  if (e->opt.workers == 0)
    return 0;
  pthread_mutex_lock(&e->mu);
  for (uint32_t i = 0; i < e->opt.workers && rc == 0; i++)
    if ((rc = engine_spawn_worker_locked(e)) != 0)
      log_error("cannot start worker thread %u", i);
  pthread_mutex_unlock(&e->mu);
  if (rc == 0 &&
      pthread_create(&e->watchdog, NULL, engine_watchdog_main, e) == 0)
    e->watchdog_started = 1;
  if (rc == 0 &&
      pthread_create(&e->scheduler, NULL, engine_scheduler_main, e) == 0)
    e->scheduler_started = 1;
  return rc;
}

void engine_cond_init(pthread_cond_t *c) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(c, &attr);
  pthread_condattr_destroy(&attr);
}

struct timespec engine_cond_deadline(int64_t ms) {
  return clock_deadline(CLOCK_MONOTONIC, ms);
}

uint32_t duro_engine_stop(duro_engine *e, int64_t grace_ms) {
  int64_t grace = grace_ms < 0 ? 0 : grace_ms;
  struct timespec until = engine_cond_deadline(grace);
  pthread_mutex_lock(&e->mu);
  __atomic_store_n(&e->stopping, 1, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&e->work);
  pthread_cond_broadcast(&e->watch);
  pthread_cond_broadcast(&e->sched);
  while (e->live > 0) {
    if (grace_ms < 0)
      pthread_cond_wait(&e->changed, &e->mu);
    else if (pthread_cond_timedwait(&e->changed, &e->mu, &until) != 0)
      break;
  }
  uint32_t left = e->live + e->stuck;
  pthread_mutex_unlock(&e->mu);
  if (e->watchdog_started) {
    pthread_join(e->watchdog, NULL);
    e->watchdog_started = 0;
  }
  if (e->scheduler_started) {
    pthread_join(e->scheduler, NULL);
    e->scheduler_started = 0;
  }
  /* Callbacks still running past the grace go with the process: each is
   * journaled now as cut short by the stop, so that its re-run is the
   * next attempt and the one lost shows. */
  if (grace_ms >= 0 && left > 0)
    engine_cut_short_running(e, grace);
  /* The drivers' threads (queue batches in their handlers, cron handlers:
   * none start now, the scheduler is gone) get the same grace; a queue
   * batch still there is settled by no one, and its messages return when
   * its lease ends. */
  left += engine_drivers_drain(e, grace_ms < 0 ? NULL : &until);
  return left;
}

void duro_engine_close(duro_engine *e) {
  if (!e)
    return;
  duro_engine_stop(e, -1);
  engine_hosts_quiet(e); /* other hosts' notices use what goes below */
  pthread_mutex_lock(&e->mu);
  uint32_t stuck = e->stuck;
  pthread_mutex_unlock(&e->mu);
  if (stuck) {
    /* Their threads still use the engine: it goes with the process. */
    log_warn("%u hung attempt(s) still running: the engine is not freed",
             stuck);
    return;
  }
  for (uint32_t i = 0; i < e->n_workers; i++) {
    pthread_join(e->workers[i]->thread, NULL);
    pthread_mutex_destroy(&e->workers[i]->mu);
    pthread_cond_destroy(&e->workers[i]->wake);
    free(e->workers[i]);
  }
  free(e->workers);
  /* Entries still queued were never started: their rows say queued or
   * waiting, which recovery handles. */
  entry *ent;
  while ((ent = runnable_pop(e)))
    entry_drop(e, ent);
  for (size_t i = 0; i < e->n_wfs; i++)
    while ((ent = fifo_pop(&e->wfs[i].deferred)))
      entry_drop(e, ent);
  while ((ent = fifo_pop(&e->retrying)))
    entry_drop(e, ent);
  idmap_free(&e->entries);
  engine_drivers_free(e); /* each waits for its handlers */
  journal_close(e->j);
  for (size_t i = 0; i < e->n_wfs; i++) {
    free(e->wfs[i].name);
    free(e->wfs[i].binding);
    free((char *)e->wfs[i].limits.lifecycle_queue);
    builds_free(&e->wfs[i]);
  }
  free(e->wfs);
  if (e->own_ledger)
    ledger_free(e->ledger);
  engine_watches_free(e);
  pthread_mutex_destroy(&e->mu);
  pthread_mutex_destroy(&e->watches_mu);
  pthread_cond_destroy(&e->work);
  pthread_cond_destroy(&e->changed);
  pthread_cond_destroy(&e->watch);
  pthread_cond_destroy(&e->sched);
  for (size_t i = 0; i < sizeof e->control_mu / sizeof *e->control_mu; i++)
    pthread_mutex_destroy(&e->control_mu[i]);
  engine_hosts_free(e);
  engine_history_free(e);
  free(e);
}

/* ---- driving ------------------------------------------------------------- */

void duro_engine_poll_due(duro_engine *e) {
  int64_t now = duro_clock_now(e->clock);
  int64_t rowids[DUE_BATCH], wakes[DUE_BATCH];
  int64_t after;
  pthread_mutex_lock(&e->mu);
  /* The clock stepped back: what was looked at up to the old time is
   * looked at again as it comes due (queued ones are skipped below). */
  if (now < e->polled_through)
    e->polled_through = now;
  after = e->polled_through;
  pthread_mutex_unlock(&e->mu);
  for (;;) {
    size_t n = 0;
    if (journal_due(e->j, after, now, DUE_BATCH, rowids, wakes, &n) != 0) {
      /* Never move the watermark past wakes that were not read. */
      log_error("reading due wakes: %s", journal_errmsg(e->j));
      return;
    }
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < n; i++)
      if (!idmap_get(&e->entries, rowids[i]))
        runnable_push(e, entry_take(e, rowids[i], ENTRY_QUEUED));
    pthread_mutex_unlock(&e->mu);
    if (n < DUE_BATCH)
      break;
    /* Rows sharing the last wake time are looked at again; those already
     * queued are skipped above. */
    after = wakes[n - 1] - 1;
  }
  pthread_mutex_lock(&e->mu);
  if (now > e->polled_through)
    e->polled_through = now;
  pthread_mutex_unlock(&e->mu);
}

#define SWEEP_TRANSACTION 1000 /* instances, at most */

int duro_engine_sweep_some(duro_engine *e, size_t limit, size_t *swept) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_SWEEP);
  op->ts_ms = duro_clock_now(e->clock);
  op->from_seq =
      (int64_t)(limit < SWEEP_TRANSACTION ? limit : SWEEP_TRANSACTION);
  int rc = journal_commit(e->j, &b);
  *swept = rc ? 0 : (size_t)op->out_rowid;
  journal_batch_free(&b);
  return rc;
}

int duro_engine_sweep(duro_engine *e, size_t *swept) {
  size_t total = 0, n = 0;
  int rc;
  /* bounded transactions; loop for more */
  while ((rc = duro_engine_sweep_some(e, SWEEP_TRANSACTION, &n)) == 0) {
    total += n;
    if (n < SWEEP_TRANSACTION)
      break;
  }
  if (swept)
    *swept = total;
  return rc;
}

int64_t duro_engine_next_wake(duro_engine *e) {
  pthread_mutex_lock(&e->mu);
  int64_t after = e->polled_through;
  pthread_mutex_unlock(&e->mu);
  int64_t w;
  if (journal_next_wake(e->j, after, &w) != 0)
    return duro_clock_now(e->clock) + 1000; /* look again in a second */
  return w == JOURNAL_NONE ? INT64_MAX : w;
}

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
  for (;;) {
    entry *ent = runnable_pop(e);
    if (!ent && e->spill_min != INT64_MAX) {
      /* the backlog's turn, as the scheduler thread would pull it in */
      pthread_mutex_unlock(&e->mu);
      engine_refill(e);
      pthread_mutex_lock(&e->mu);
      ent = runnable_pop(e);
    }
    if (!ent)
      break;
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

void engine_activation_done(duro_engine *e, entry *ent, duro_status status,
                            int64_t wake_ms, int may_commit) {
  int notify = 0, control = 0;
  int64_t rowid = ent->rowid; /* ent may be gone below */
  pthread_mutex_lock(&e->mu);
  release_slot_locked(e, ent);
  int64_t now = duro_clock_now(e->clock);
  /* A due wake runs now.  After the clock stepped back the watermark is
   * reset rather than trusted (the poll looks again from now), so a sleep
   * still in the future is never run early, and never spins. */
  if (now < e->polled_through)
    e->polled_through = now;
  int64_t horizon = now;
  int ended = status == ENGINE_STATUS_NONE || duro_status_ended(status);
  /* A request that arrived after the activation's last step boundary. */
  if (!ended && ent->terminate_req && status != DURO_STATUS_TERMINATED)
    control = JOURNAL_CONTROL_TERMINATE;
  else if (!ended && ent->pause_req && status != DURO_STATUS_PAUSED)
    control = JOURNAL_CONTROL_PAUSE;
  if (control && !may_commit) {
    ent->apply_control = control;
    runnable_push(e, ent);
    control = 0;
  } else if (control) {
    ent->state = ENTRY_CONTROL;
  } else if ((status == DURO_STATUS_QUEUED && !e->stopping) ||
             (status == DURO_STATUS_WAITING &&
              (ent->rerun ||
               (wake_ms != JOURNAL_NONE && wake_ms <= horizon)))) {
    ent->rerun = 0;
    runnable_push(e, ent);
    pthread_cond_broadcast(&e->changed);
  } else {
    notify = status == DURO_STATUS_WAITING;
    entry_drop(e, ent);
  }
  pthread_mutex_unlock(&e->mu);
  if (control)
    control_on_entry(e, ent, control);
  if (notify) {
    engine_kick_scheduler(e);
    if (e->opt.on_wake_change)
      e->opt.on_wake_change(e->opt.ctx);
  }
  if (duro_status_ended(status)) {
    engine_watch_fire(e, rowid, duro_status_name(status));
    if (e->opt.on_instance_end)
      e->opt.on_instance_end(e->opt.ctx, status);
  }
}

/* ---- creation --------------------------------------------------------------
 */

static int check_create(duro_engine *e, const char *workflow, const char *id,
                        const char *params, const wf_reg **wf) {
  *wf = engine_find_workflow(e, workflow);
  if (!*wf)
    return DURO_E_WORKFLOW_NOT_FOUND;
  if (id && !duro_instance_id_valid(id))
    return DURO_E_INVALID_ID;
  if (params && json_text_check(params, e->max_step_result) != 0)
    return DURO_E_INVALID_PARAMS;
  return 0;
}

int duro_instance_create(duro_engine *e, const char *workflow, const char *id,
                         const char *params, int64_t retention_ms,
                         char **id_out) {
  duro_create_req req = {
      .id = id, .params = params, .retention_ms = retention_ms};
  duro_create_result res;
  if (id_out)
    *id_out = NULL;
  int rc = duro_instance_create_many(e, workflow, &req, 1, &res);
  if (rc)
    return rc;
  if (res.n_created == 1) {
    if (id_out) {
      *id_out = res.created[0];
      res.created[0] = NULL;
    }
  } else {
    rc = res.errors[0].code;
  }
  duro_create_result_free(&res);
  return rc;
}

void duro_create_result_free(duro_create_result *r) {
  for (size_t i = 0; i < r->n_created; i++)
    free(r->created[i]);
  free(r->created);
  for (size_t i = 0; i < r->n_errors; i++)
    free(r->errors[i].id);
  free(r->errors);
  *r = (duro_create_result){0};
}

void engine_instance_insert_op(const wf_reg *wf, const char *id,
                               const duro_create_req *req, int64_t now,
                               journal_instance *row, journal_batch *b) {
  *row = (journal_instance){0};
  row->workflow = (char *)wf->name;
  row->id = (char *)id;
  row->status = DURO_STATUS_QUEUED;
  row->params = (char *)(req->params ? req->params : "null");
  row->created_ms = now;
  row->retention_ms =
      req->retention_ms >= 0
          ? req->retention_ms
          : __atomic_load_n(&wf->limits.retention_ms, __ATOMIC_RELAXED);
  journal_batch_add(b, JOP_INSTANCE_INSERT)->inst = row;
}

static void created_locked(duro_engine *e, int64_t rowid) {
  engine_queue_new_locked(e, rowid);
  metrics_add(&e->m.instances_created, 1);
}

void engine_instance_created(duro_engine *e, int64_t rowid) {
  pthread_mutex_lock(&e->mu);
  created_locked(e, rowid);
  pthread_mutex_unlock(&e->mu);
}

static int cmp_index(const void *a, const void *b) {
  size_t x = ((const duro_create_error *)a)->index,
         y = ((const duro_create_error *)b)->index;
  return (x > y) - (x < y);
}

/* A batch of creations on its way to disk: everything its ops point to
 * lives here until the commit is done. */
typedef struct create_job {
  duro_engine *e;
  char *workflow;
  size_t n;
  journal_instance *rows;
  char **ids;
  char **params; /* copies: the caller's may be gone by the commit */
  size_t *op_of; /* the op of request i; SIZE_MAX: refused before */
  journal_batch b;
  duro_create_error *errors; /* at most one a request */
  size_t n_errors;
  duro_create_done_fn done;
  void *ctx;
} create_job;

static void create_job_free(create_job *job) {
  journal_batch_free(&job->b);
  for (size_t i = 0; i < job->n; i++) {
    free(job->ids[i]);
    free(job->params[i]);
  }
  free(job->ids);
  free(job->params);
  free(job->rows);
  free(job->op_of);
  free(job->workflow);
  for (size_t i = 0; i < job->n_errors; i++)
    free(job->errors[i].id);
  free(job->errors);
  free(job);
}

static void batch_error(create_job *job, size_t index, const char *id, int rc) {
  job->errors[job->n_errors++] = (duro_create_error){
      .index = index, .id = id ? xstrdup(id) : NULL, .code = rc};
}

/* On the thread that committed: the created instances become runnable,
 * and the caller hears the outcome. */
static void create_finish(void *ctx, int rc) {
  create_job *job = ctx;
  duro_engine *e = job->e;
  duro_create_result result = {0};
  if (rc == 0) {
    result.created = xcalloc(job->n ? job->n : 1, sizeof *result.created);
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < job->n; i++) {
      if (job->op_of[i] == SIZE_MAX)
        continue;
      journal_op *op = &job->b.ops[job->op_of[i]];
      if (op->rc) {
        batch_error(job, i, job->ids[i], op->rc);
        continue;
      }
      created_locked(e, op->out_rowid);
      result.created[result.n_created++] = job->ids[i];
      job->ids[i] = NULL;
    }
    pthread_mutex_unlock(&e->mu);
    /* Errors found before and after the commit, in request order. */
    qsort(job->errors, job->n_errors, sizeof *job->errors, cmp_index);
    result.errors = job->errors;
    result.n_errors = job->n_errors;
    job->errors = NULL;
    job->n_errors = 0;
  } else {
    log_error("creating %zu instance(s) of %s: %s", job->n, job->workflow,
              journal_errmsg(e->j));
  }
  duro_create_done_fn done = job->done;
  void *done_ctx = job->ctx;
  create_job_free(job);
  done(done_ctx, rc, rc ? NULL : &result);
}

/* background: the commit never runs on this thread (the asynchronous
 * API's promise); else this thread may lead it (the synchronous form
 * waits anyway, and saves the writer thread's wake-up). */
static int create_batch(duro_engine *e, const char *workflow,
                        const duro_create_req *reqs, size_t n,
                        duro_create_done_fn done, void *ctx, int background) {
  const wf_reg *wf = engine_find_workflow(e, workflow);
  if (!wf)
    return DURO_E_WORKFLOW_NOT_FOUND;
  if (e->opt.max_queued && engine_backlog(e) >= e->opt.max_queued)
    return DURO_E_OVERLOADED;
  create_job *job = xcalloc(1, sizeof *job);
  *job = (create_job){.e = e,
                      .workflow = xstrdup(workflow),
                      .n = n,
                      .rows = xcalloc(n ? n : 1, sizeof *job->rows),
                      .ids = xcalloc(n ? n : 1, sizeof *job->ids),
                      .params = xcalloc(n ? n : 1, sizeof *job->params),
                      .op_of = xcalloc(n ? n : 1, sizeof *job->op_of),
                      .errors = xcalloc(n ? n : 1, sizeof *job->errors),
                      .done = done,
                      .ctx = ctx};
  strmap seen = {0};
  int64_t now = duro_clock_now(e->clock);
  for (size_t i = 0; i < n; i++) {
    const wf_reg *w;
    job->op_of[i] = SIZE_MAX;
    int bad = check_create(e, workflow, reqs[i].id, reqs[i].params, &w);
    if (bad) {
      batch_error(job, i, reqs[i].id, bad);
      continue;
    }
    job->ids[i] = reqs[i].id ? xstrdup(reqs[i].id) : random_id(now);
    if (strmap_get(&seen, job->ids[i])) {
      batch_error(job, i, job->ids[i], DURO_E_DUPLICATE_IN_BATCH);
      continue;
    }
    strmap_put(&seen, job->ids[i], job->ids[i]);
    job->params[i] = reqs[i].params ? xstrdup(reqs[i].params) : NULL;
    duro_create_req req = reqs[i];
    req.params = job->params[i];
    job->op_of[i] = job->b.n;
    engine_instance_insert_op(wf, job->ids[i], &req, now, &job->rows[i],
                              &job->b);
  }
  strmap_free(&seen);
  if (background)
    journal_commit_background(e->j, &job->b, create_finish, job);
  else
    journal_commit_async(e->j, &job->b, create_finish, job);
  return 0;
}

int duro_instance_create_batch_async(duro_engine *e, const char *workflow,
                                     const duro_create_req *reqs, size_t n,
                                     duro_create_done_fn done, void *ctx) {
  return create_batch(e, workflow, reqs, n, done, ctx, 1);
}

/* The synchronous form waits for the asynchronous one's answer. */
void engine_wait_done(engine_wait *w, int rc, void *result) {
  pthread_mutex_lock(&w->mu);
  w->rc = rc;
  w->result = result;
  w->done = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

int engine_wait_for(engine_wait *w, void **result) {
  pthread_mutex_lock(&w->mu);
  while (!w->done)
    pthread_cond_wait(&w->cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  if (result)
    *result = w->result;
  return w->rc;
}

/* The waiter takes what the result holds: the commit's thread frees the
 * struct once done returns. */
static void create_waited(void *ctx, int rc, duro_create_result *result) {
  duro_create_result *kept = NULL;
  if (result) {
    kept = xmalloc(sizeof *kept);
    *kept = *result;
  }
  engine_wait_done(ctx, rc, kept);
}

int duro_instance_create_many(duro_engine *e, const char *workflow,
                              const duro_create_req *reqs, size_t n,
                              duro_create_result *out) {
  engine_wait w = ENGINE_WAIT_INIT;
  *out = (duro_create_result){0};
  int rc = create_batch(e, workflow, reqs, n, create_waited, &w, 0);
  if (rc)
    return rc;
  void *kept = NULL;
  rc = engine_wait_for(&w, &kept);
  if (kept) {
    *out = *(duro_create_result *)kept;
    free(kept);
  }
  return rc;
}
