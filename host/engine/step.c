/* step.c — one activation of an instance, and the step API plugins call
 * through the duro_api table (step_api_fill puts it there, api.c
 * assembles the table).
 *
 * An activation loads the instance's journal (its steps; events on the
 * first wait) once, calls the workflow's run(), and answers each step call
 * from the journal when it can (replay) or by doing the step.  Writes
 * accumulate in a batch; the batch is committed durably before a duro_do
 * result is handed back (a completed step is on disk before anything after
 * it runs).  When run() returns, the rest of the batch and the instance's
 * new row are committed asynchronously: the worker moves on, and
 * on_final_commit lets the engine release the instance once they landed.
 *
 * Suspension is sticky: once a step call decides the instance must yield
 * (sleep, back-off, event wait, pause, terminate, shutdown) every later call
 * returns DURO_SUSPEND without touching the journal, so a plugin that
 * ignores the code cannot corrupt anything.
 *
 * Everything the activation hands to the plugin lives in its arena and is
 * freed when the activation ends. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "duration.h"
#include "engine_internal.h"
#include "error.h"
#include "log.h"
#include "step.h"
#include "util.h"

#define DEFAULT_RETRIES 5
#define DEFAULT_DELAY_MS (10LL * 1000)
#define DEFAULT_TIMEOUT_MS (10LL * 60 * 1000)
#define DEFAULT_EVENT_TIMEOUT_MS (24LL * 3600 * 1000)

typedef enum suspend_reason {
  SUSPEND_NONE = 0,
  SUSPEND_WAIT, /* sleep, back-off or event: a wake time is set */
  SUSPEND_PAUSE,
  SUSPEND_TERMINATE,
  SUSPEND_SHUTDOWN,
  SUSPEND_ABANDONED, /* the watchdog gave up on a hung attempt */
  SUSPEND_DIVERGED,  /* the code asked for a step its journal does not have
                        there */
  SUSPEND_NO_BUILD,  /* the build it is pinned to is not loaded */
  SUSPEND_DRY        /* a dry run reached what it would have to run */
} suspend_reason;

/* The arena: a bump allocator over 4 KiB chunks (bigger requests get a
 * chunk of their own), freed whole when the activation ends. */
#define ARENA_CHUNK 4096
typedef struct arena_blk {
  struct arena_blk *next;
  size_t used, cap;
  max_align_t data[];
} arena_blk;

struct duro_step {
  duro_engine *e;
  entry *ent;
  wf_reg *wf;
  journal_instance inst; /* the row as loaded; owns its strings */
  arena_blk *arena;

  strmap steps;          /* key → journal_step (arena) */
  idmap by_seq;          /* journaled call position → journal_step */
  strmap name_counts;    /* name → (uintptr_t) occurrences so far */
  int64_t seq;           /* step calls so far in this activation */
  uint32_t n_steps;      /* steps of every kind, for limits.steps */
  int64_t state_bytes;   /* params + results + errors, for the state limit */
  journal_event *events; /* loaded by the first event wait */
  size_t n_events;
  int events_loaded;
  unsigned char *consumed;

  journal_batch batch; /* writes not yet committed */
  int replaying;       /* no step call has missed the journal yet */
  int suspended;
  suspend_reason reason;
  int64_t wake_ms;
  const char *wait_type;
  const char *last_error; /* {"name","message"} of the last DURO_ERROR */
  const char *output;
  const char *where; /* "workflow/id", for logs */
  int storage_failed;
  journal_instance final_row; /* the row the last commit stores */
  ssize_t event_wake_op;      /* its index in the final batch, or -1 */
  wf_build *build;            /* the build it runs (acquired) */
  int dry;                    /* a dry run: replays, never runs or writes */
  const char *dry_next;       /* where a dry run stopped */
  const char *build_hash;     /* its hash, or NULL */
  worker *worker;             /* NULL when run inline */
  ledger_slot *slot;          /* the thread's crash-ledger slot, or NULL */
  int64_t begun_ms;           /* when this activation began */
  journal_instance start_row; /* the row save_start stores */
};

struct duro_attempt {
  duro_step *act;
  journal_step *step;
  uint32_t number;
  int64_t started_ms, deadline_ms, timeout_ms;
  /* The deadline the watchdog and the end of the callback check, on the
   * monotonic clock: a step of the wall clock neither abandons a healthy
   * callback nor spares a hung one (deadline_ms is the plugin's view). */
  int64_t deadline_mono;
  const char *idempotency_key;
  char *result; /* malloc'ed copy */
  char *message;
  char *bad_result; /* why the last result set was not JSON, or NULL */
  int failed, final;
  int gate; /* its place in the gate (gate_enter); atomic */
  /* Queue sends and events made by the callback: committed with the
   * step's result, or dropped with a failed attempt. */
  journal_batch sends;
};

static void attempt_clear(duro_attempt *at) {
  free(at->result);
  free(at->message);
  free(at->bad_result);
  journal_batch_free(&at->sends);
}

static __thread duro_step *current_act;
static __thread duro_attempt *current_attempt;

/* ---- arena ------------------------------------------------------------------
 */

static void *arena_alloc(duro_step *a, size_t n) {
  size_t align = sizeof(max_align_t);
  n = (n + align - 1) / align * align;
  arena_blk *b = a->arena;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
    b = xmalloc(sizeof *b + cap);
    b->next = a->arena;
    b->used = 0;
    b->cap = cap;
    a->arena = b;
  }
  void *p = (char *)b->data + b->used;
  b->used += n;
  return p;
}

static char *arena_strdup(duro_step *a, const char *s) {
  if (!s)
    return NULL;
  size_t n = strlen(s) + 1;
  return memcpy(arena_alloc(a, n), s, n);
}

/* Moves a malloc'ed string into the arena. */
static char *arena_take(duro_step *a, char *s) {
  char *copy = arena_strdup(a, s);
  free(s);
  return copy;
}

static char *arena_printf(duro_step *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static char *arena_printf(duro_step *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = xvasprintf(fmt, ap);
  va_end(ap);
  return arena_take(a, s);
}

static void arena_free(duro_step *a) {
  for (arena_blk *b = a->arena, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  a->arena = NULL;
}

/* ---- helpers
 * ------------------------------------------------------------------- */

static int64_t now_ms(duro_step *a) { return duro_clock_now(a->e->clock); }

static const char *format_ms(char *buf, size_t len, int64_t ms) {
  static const struct {
    int64_t ms;
    const char *unit;
  } units[] = {{86400000, "day"},
               {3600000, "hour"},
               {60000, "minute"},
               {1000, "second"}};
  for (size_t i = 0; i < sizeof units / sizeof *units; i++)
    if (ms >= units[i].ms && ms % units[i].ms == 0) {
      int64_t v = ms / units[i].ms;
      snprintf(buf, len, "%" PRId64 " %s%s", v, units[i].unit,
               v == 1 ? "" : "s");
      return buf;
    }
  snprintf(buf, len, "%" PRId64 " ms", ms);
  return buf;
}

static void fail_with(duro_step *a, const char *name, const char *message) {
  a->last_error = arena_take(a, error_json(name, message));
}

/* Checks the requests a step boundary honours.  Returns 1 when the
 * activation must yield. */
static int at_boundary(duro_step *a) {
  if (a->suspended)
    return 1;
  if (!a->ent)
    return 0; /* a dry run: no control requests */
  suspend_reason r = SUSPEND_NONE;
  if (__atomic_load_n(&a->ent->terminate_req, __ATOMIC_ACQUIRE))
    r = SUSPEND_TERMINATE;
  else if (__atomic_load_n(&a->ent->pause_req, __ATOMIC_ACQUIRE))
    r = SUSPEND_PAUSE;
  else if (__atomic_load_n(&a->e->stopping, __ATOMIC_ACQUIRE))
    r = SUSPEND_SHUTDOWN;
  if (r == SUSPEND_NONE)
    return 0;
  a->suspended = 1;
  a->reason = r;
  return 1;
}

static duro_rc suspend_until(duro_step *a, int64_t wake_ms,
                             const char *wait_type) {
  a->suspended = 1;
  a->reason = SUSPEND_WAIT;
  a->wake_ms = wake_ms;
  a->wait_type = wait_type;
  return DURO_SUSPEND;
}

/* The key of the next call of `name`: "name#count". */
static const char *next_key(duro_step *a, const char *name, uint32_t *count) {
  uintptr_t c = (uintptr_t)strmap_get(&a->name_counts, name) + 1;
  const char *stored = c == 1 ? arena_strdup(a, name) : NULL;
  if (stored)
    strmap_put(&a->name_counts, stored, (void *)c);
  else
    strmap_put(&a->name_counts, name, (void *)c); /* key already present */
  *count = (uint32_t)c;
  a->seq++;
  /* Every step call, replayed or not, makes a key: format it on the stack
   * and copy it into the arena, no heap round trip. */
  char key[256];
  int n = snprintf(key, sizeof key, "%s#%u", name, (unsigned)c);
  if (n >= 0 && (size_t)n < sizeof key)
    return arena_strdup(a, key);
  return arena_printf(a, "%s#%u", name, (unsigned)c);
}

/* Whether a new step would cross the workflow's limits.steps (every kind
 * counts: do, sleep, waitForEvent).  Sets the error when it would. */
static int step_limit_reached(duro_step *a, const char *key) {
  /* a config reload may change the limit (duro_engine_set_limits) */
  uint32_t max = __atomic_load_n(&a->wf->limits.max_steps, __ATOMIC_RELAXED);
  if (a->n_steps < max)
    return 0;
  char *msg = xasprintf("step \"%s\" would exceed the workflow's limit "
                        "of %u steps",
                        key, max);
  fail_with(a, duro_err_name(DURO_E_STEP_LIMIT), msg);
  free(msg);
  return 1;
}

static journal_step *new_step(duro_step *a, const char *key, const char *name,
                              uint32_t count, duro_step_kind type) {
  journal_step *s = arena_alloc(a, sizeof *s);
  memset(s, 0, sizeof *s);
  s->key = (char *)key;
  s->name = arena_strdup(a, name);
  s->count = count;
  s->seq = a->seq;
  s->type = type;
  s->status = DURO_STEP_WAITING;
  s->started_ms = now_ms(a);
  s->ended_ms = s->wake_ms = JOURNAL_NONE;
  strmap_put(&a->steps, s->key, s);
  a->n_steps++;
  return s;
}

static void put_step(duro_step *a, journal_step *s) {
  journal_op *op = journal_batch_add(&a->batch, JOP_STEP_PUT);
  op->rowid = a->inst.rowid;
  op->step = s;
}

/* The ledger slot names this activation: set when it starts, and again
 * whenever it resumes on its worker (others ran meanwhile). */
static void slot_bind(duro_step *a) {
  if (!a->slot)
    return;
  a->slot->rowid = a->inst.rowid;
  ledger_copy(a->slot->workflow, sizeof a->slot->workflow, a->inst.workflow);
  ledger_copy(a->slot->id, sizeof a->slot->id, a->inst.id);
  ledger_set_state(a->slot, LEDGER_ACTIVATION);
}

/* On a shared store, a host whose lease may have lapsed starts no
 * callback: another host may have taken the instance over and completed
 * the step meanwhile (a host frozen past its lease resumes its parked
 * activations right here).  The activation ends as after a failed write:
 * nothing more of it is written, and it runs again later if the lease
 * still holds (journal_lease_held waited for the keeper to say). */
static int lease_lapsed(duro_step *a) {
  if (journal_lease_held(a->e->j))
    return 0;
  a->storage_failed = 1;
  a->suspended = 1;
  a->reason = SUSPEND_SHUTDOWN;
  return 1;
}

/* Commits the batch: the activation may park here while its worker runs
 * others (engine_commit_step). */
static int flush(duro_step *a) {
  if (a->slot)
    ledger_set_state(a->slot, LEDGER_IDLE);
  int orphaned;
  int rc = engine_commit_step(a->e, &a->batch, &orphaned);
  journal_batch_reset(&a->batch);
  current_act = a; /* others ran on this thread meanwhile */
  if (orphaned) {
    a->suspended = 1;
    a->reason = SUSPEND_ABANDONED;
    return DURO_E_IO;
  }
  slot_bind(a);
  if (rc) {
    a->storage_failed = 1;
    log_error("%s: journal commit failed: %s", a->where,
              journal_errmsg(a->e->j));
  }
  return rc;
}

/* The code asked, at call position a->seq, for step `key` of `type`, and
 * the journal disagrees: stop the activation (sticky, like any
 * suspension) with replay.diverged naming both; the workflow's
 * on_divergence makes the instance errored or paused. */
static duro_rc diverge(duro_step *a, const journal_step *journaled,
                       const char *key, duro_step_kind type) {
  char *msg;
  if (journaled && journaled->seq == a->seq)
    msg =
        xasprintf("at step call %" PRId64 " the journal has \"%s\" (%s) "
                  "but the code asked for \"%s\" (%s): the workflow's "
                  "code changed under this instance",
                  a->seq, journaled->key, duro_step_kind_name(journaled->type),
                  key, duro_step_kind_name(type));
  else
    msg = xasprintf("the code asked for \"%s\" (%s) at step call %" PRId64
                    ", but the journal has it at call %" PRId64
                    ": the workflow's code changed under this instance",
                    key, duro_step_kind_name(type), a->seq, journaled->seq);
  if (!a->dry)
    log_write(DURO_LOG_WARN, a->where, "replay diverged: %s", msg);
  fail_with(a, "replay.diverged", msg);
  free(msg);
  a->suspended = 1;
  a->reason = SUSPEND_DIVERGED;
  return DURO_SUSPEND;
}

/* Common entry of every step call: validates the name, honours requests,
 * finds the journaled step and checks that it sits at this call's
 * position (a step inserted, renamed, removed or reordered since the
 * journal was written is caught here, before it runs).  Returns 0 to
 * proceed, or the rc to return. */
static int step_begin(duro_step *a, const char *name, duro_step_kind type,
                      const char **key, uint32_t *count, journal_step **s,
                      duro_rc *rc) {
  *s = NULL;
  if (a->suspended || at_boundary(a)) {
    *rc = DURO_SUSPEND;
    return 1;
  }
  if (!name || !*name) {
    fail_with(a, "Error", "a step needs a non-empty name");
    *rc = DURO_ERROR;
    return 1;
  }
  *key = next_key(a, name, count);
  *s = strmap_get(&a->steps, *key);
  const journal_step *there = idmap_get(&a->by_seq, a->seq);
  if (there != *s || (*s && (*s)->type != type)) {
    *rc = diverge(a, there ? there : *s, *key, type);
    *s = NULL;
    return 1;
  }
  return 0;
}

/* ---- duro_do
 * ------------------------------------------------------------------------ */

/* The wait before retry `attempt`+1, at most the longest sleep (365
 * days): computed so it cannot overflow, whatever the delay and count. */
static int64_t backoff_ms(int64_t delay, duro_backoff how, uint32_t attempt) {
  const int64_t max = DURATION_MAX_SLEEP_MS;
  if (delay <= 0)
    return 0;
  if (delay >= max)
    return max;
  if (how == DURO_BACKOFF_LINEAR)
    return (int64_t)attempt > max / delay ? max : delay * (int64_t)attempt;
  int64_t d = delay;
  if (how != DURO_BACKOFF_CONSTANT)
    for (uint32_t i = 1; i < attempt && d < max; i++)
      d = d > max / 2 ? max : d * 2;
  return d > max ? max : d;
}

typedef struct do_config {
  uint32_t limit;
  int64_t delay_ms, timeout_ms;
  duro_backoff backoff;
} do_config;

static int read_config(duro_step *a, const char *key,
                       const duro_step_config *cfg, do_config *out) {
  out->limit = DEFAULT_RETRIES;
  out->delay_ms = DEFAULT_DELAY_MS;
  out->timeout_ms = DEFAULT_TIMEOUT_MS;
  out->backoff = DURO_BACKOFF_EXPONENTIAL;
  if (!cfg)
    return 0;
  const char *bad = NULL;
  if (cfg->retries) {
    out->limit = cfg->retries->limit;
    out->backoff = cfg->retries->backoff;
    if (cfg->retries->delay &&
        (duration_parse(cfg->retries->delay, &out->delay_ms) != 0 ||
         out->delay_ms > DURATION_MAX_SLEEP_MS))
      bad = cfg->retries->delay;
    if ((unsigned)out->backoff > DURO_BACKOFF_LINEAR)
      bad = "backoff";
  }
  if (!bad && cfg->timeout &&
      (duration_parse(cfg->timeout, &out->timeout_ms) != 0 ||
       out->timeout_ms <= 0 || out->timeout_ms > DURATION_MAX_SLEEP_MS))
    bad = cfg->timeout;
  if (bad) {
    char *msg = xasprintf("step \"%s\": invalid configuration value \"%s\" "
                          "(durations are at most 365 days)",
                          key, bad);
    fail_with(a,
              strcmp(bad, "backoff") ? duro_err_name(DURO_E_INVALID_DURATION)
                                     : "Error",
              msg);
    free(msg);
    return -1;
  }
  return 0;
}

/* ---- the gate ----------------------------------------------------------
 *
 * While attempts are charged with a kill (faults.c: inside their
 * callback when the engine died of a SIGKILL), callbacks pass a gate: a
 * suspect's runs alone (it waits until no other callback runs, and none
 * starts while it runs or waits), the others side by side.  With no
 * suspect, a callback passes with one atomic load.  A callback never
 * parks its fiber, so a thread waiting here holds no place in the gate. */

enum { GATE_NONE = 0, GATE_SHARED, GATE_ALONE };

static int gate_blocked(const duro_engine *e, int alone) {
  return alone ? e->gate_shared || e->gate_alone
               : e->gate_alone || e->gate_waiting;
}

/* Returns the place taken (GATE_*), or -1 when the engine stops. */
static int gate_enter(duro_step *a, const journal_step *s, uint32_t number) {
  duro_engine *e = a->e;
  /* Run inline (no worker threads), callbacks never overlap. */
  if (!a->worker || !ledger_has_suspects(e->ledger))
    return GATE_NONE;
  int alone = ledger_suspect_kills(e->ledger, a->inst.rowid, s->key);
  pthread_mutex_lock(&e->gate_mu);
  int stopping;
  /* A suspect waits for the engine to settle first (others run then). */
  while (alone &&
         !(stopping = __atomic_load_n(&e->stopping, __ATOMIC_ACQUIRE)) &&
         engine_mono_ms(e) < e->gate_open_ms) {
    struct timespec until = engine_cond_deadline(100);
    pthread_cond_timedwait(&e->gate_cv, &e->gate_mu, &until);
  }
  e->gate_waiting += alone ? 1 : 0;
  while (!(stopping = __atomic_load_n(&e->stopping, __ATOMIC_ACQUIRE)) &&
         gate_blocked(e, alone)) {
    struct timespec until = engine_cond_deadline(100);
    pthread_cond_timedwait(&e->gate_cv, &e->gate_mu, &until);
  }
  e->gate_waiting -= alone ? 1 : 0;
  int place = stopping ? -1 : alone ? GATE_ALONE : GATE_SHARED;
  if (place == GATE_ALONE)
    e->gate_alone = 1;
  else if (place == GATE_SHARED)
    e->gate_shared++;
  else
    pthread_cond_broadcast(&e->gate_cv); /* one waiting suspect fewer */
  pthread_mutex_unlock(&e->gate_mu);
  if (place == GATE_ALONE)
    log_write(DURO_LOG_INFO, a->where,
              "step \"%s\" attempt %u runs alone: it was inside its "
              "callback when the engine was killed",
              s->key, number);
  return place;
}

/* Gives the place back, once (the callback's end and the watchdog may
 * both call it); a suspect whose callback got here is no longer one. */
void attempt_gate_leave(duro_attempt *at) {
  if (!__atomic_load_n(&at->gate, __ATOMIC_ACQUIRE))
    return;
  duro_engine *e = at->act->e;
  pthread_mutex_lock(&e->gate_mu);
  int place = at->gate;
  __atomic_store_n(&at->gate, GATE_NONE, __ATOMIC_RELEASE);
  if (place == GATE_ALONE)
    e->gate_alone = 0;
  else if (place == GATE_SHARED)
    e->gate_shared--;
  pthread_cond_broadcast(&e->gate_cv);
  pthread_mutex_unlock(&e->gate_mu);
  if (place == GATE_ALONE)
    ledger_suspect_clear(e->ledger, at->act->inst.rowid, at->step->key);
}

/* The callback is about to run: the ledger says so (should the process
 * die inside it, the next engine counts a crash), and the watchdog may
 * find it through the worker.  Returns 1 when the lease may have lapsed,
 * or a terminate or pause came since the step boundary: the callback
 * must not start.  (A terminate sets its flag, then looks for the
 * worker's attempt under the worker's mutex; the attempt is published
 * under that mutex before the flag is read here, so either the terminate
 * finds the attempt and abandons it, or the flag is seen here.) */
static int attempt_end(duro_step *a, duro_attempt *at);

static int attempt_begin(duro_step *a, duro_attempt *at) {
  /* Looked at again here, as late as can be: save_start's commit and the
   * gate may have waited since api_do looked, and a host frozen meanwhile
   * must not start the callback. */
  if (lease_lapsed(a)) {
    attempt_gate_leave(at);
    return 1;
  }
  ledger_slot *sl = a->slot;
  if (sl) {
    const journal_step *s = at->step;
    sl->rowid = a->inst.rowid;
    sl->attempt = at->number;
    sl->count = s->count;
    sl->seq = s->seq;
    sl->started_ms = at->started_ms;
    sl->deadline_ms = at->deadline_ms;
    sl->step_started_ms = s->started_ms;
    ledger_copy(sl->key, sizeof sl->key, s->key);
    ledger_copy(sl->name, sizeof sl->name, s->name);
    ledger_set_state(sl, LEDGER_ATTEMPT);
  }
  if (a->worker) {
    pthread_mutex_lock(&a->worker->mu);
    a->worker->attempt = at;
    pthread_mutex_unlock(&a->worker->mu);
  }
  if (!at_boundary(a))
    return 0;
  /* Withdrawn before it ran; if the terminate already gave up on it, the
   * activation is the watchdog's to account for (attempt_end says so). */
  attempt_end(a, at);
  return 1;
}

/* The callback returned.  Returns 1 when the watchdog gave up on it
 * meanwhile: then nothing of the activation may be written any more. */
static int attempt_end(duro_step *a, duro_attempt *at) {
  int abandoned = 0;
  if (a->worker) {
    pthread_mutex_lock(&a->worker->mu);
    abandoned = a->worker->abandoned;
    a->worker->attempt = NULL;
    pthread_mutex_unlock(&a->worker->mu);
  }
  attempt_gate_leave(at);
  if (abandoned) {
    a->suspended = 1;
    a->reason = SUSPEND_ABANDONED;
    return 1;
  }
  if (a->slot)
    ledger_set_state(a->slot, LEDGER_ACTIVATION);
  return 0;
}

int attempt_is_hung(const duro_attempt *at, int64_t mono, const entry *ent) {
  return mono > at->deadline_mono && (!ent || at->act->ent == ent);
}

int attempt_runs_for(const duro_attempt *at, const entry *ent) {
  return at->act->ent == ent;
}

void attempt_describe(const duro_attempt *at, int terminated,
                      hung_attempt *out) {
  const duro_step *a = at->act;
  const journal_step *s = at->step;
  char buf[48];
  out->ent = a->ent;
  out->rowid = a->inst.rowid;
  out->workflow = xstrdup(a->inst.workflow);
  out->id = xstrdup(a->inst.id);
  out->where = xstrdup(a->where);
  out->build = a->build_hash ? xstrdup(a->build_hash) : NULL;
  out->number = at->number;
  out->started_ms = at->started_ms;
  out->step = *s;
  out->step.key = xstrdup(s->key);
  out->step.name = xstrdup(s->name);
  out->step.status = DURO_STEP_WAITING;
  out->step.result = NULL;
  out->step.error = NULL;
  out->step.build = s->build ? xstrdup(s->build) : NULL;
  out->error_name = terminated ? DURO_ERR_TERMINATED : DURO_ERR_TIMEOUT;
  if (terminated)
    out->message = xasprintf("step \"%s\" attempt %u was running when the "
                             "instance was terminated: abandoned, its late "
                             "result will be discarded",
                             s->key, at->number);
  else
    out->message = xasprintf("step \"%s\" attempt %u did not return within "
                             "its timeout of %s: abandoned, its late result "
                             "will be discarded",
                             s->key, at->number,
                             format_ms(buf, sizeof buf, at->timeout_ms));
}

void hung_attempt_clear(hung_attempt *h) {
  free(h->workflow);
  free(h->id);
  free(h->where);
  free(h->build);
  free(h->message);
  free(h->step.key);
  free(h->step.name);
  free(h->step.error);
  free(h->step.build);
  free(h->cut_short_by);
  memset(h, 0, sizeof *h);
}

/* ---- retries ----------------------------------------------------------- */

typedef struct cut_count {
  const char *key;
  uint32_t n;
} cut_count;

static void count_cut(void *ctx, const char *key, uint32_t number,
                      int64_t started_ms, int64_t ended_ms, const char *error,
                      const char *build) {
  (void)number, (void)started_ms, (void)ended_ms, (void)build;
  cut_count *c = ctx;
  if (!strcmp(key, c->key) && error &&
      strstr(error, "\"name\":\"" DURO_ERR_CUT_SHORT "\""))
    c->n++;
}

/* The attempts up to `number` that count against the step's retries:
 * those cut short by a stop or a death of the engine do not (engine.c,
 * faults.c; a death is bounded by engine.max_crashes instead).  Read from
 * the journal only where a failed attempt is charged, never on a step
 * that succeeds; a read that fails charges them all. */
static uint32_t charged_attempts(duro_step *a, const char *key,
                                 uint32_t number) {
  cut_count c = {.key = key};
  if (number <= 1 ||
      journal_attempts_each(a->e->j, a->inst.rowid, count_cut, &c) != 0 ||
      c.n >= number)
    return number;
  return number - c.n;
}

/* The step's last attempt ended without its activation (it crashed the
 * engine, or hung and was abandoned): apply the retry policy now that
 * the step's configuration is known again.  Returns 1 with *rc set when
 * the call ends here (a back-off to wait, or the retries are spent). */
static int retry_orphaned(duro_step *a, journal_step *s, const do_config *c,
                          duro_rc *rc) {
  if (s->attempts == 0 || s->wake_ms != JOURNAL_NONE)
    return 0;
  int64_t now = now_ms(a);
  uint32_t charged = charged_attempts(a, s->key, s->attempts);
  if (charged > c->limit) {
    log_write(DURO_LOG_WARN, a->where, "step \"%s\" failed after %u attempts",
              s->key, s->attempts);
    s->status = DURO_STEP_ERRORED;
    s->ended_ms = now;
    put_step(a, s);
    a->last_error = s->error;
    *rc = DURO_ERROR;
    return 1;
  }
  s->wake_ms = now + backoff_ms(c->delay_ms, c->backoff, charged);
  put_step(a, s);
  metrics_add(&a->e->m.retries_scheduled, 1);
  if (now >= s->wake_ms)
    return 0;
  *rc = suspend_until(a, s->wake_ms, NULL);
  return 1;
}

/* A dry run replays only what is journaled as done: at the first step
 * call that would run a callback, start or finish a wait, it stops. */
static duro_rc dry_stop(duro_step *a, const char *key) {
  a->dry_next = key;
  a->suspended = 1;
  a->reason = SUSPEND_DRY;
  return DURO_SUSPEND;
}

/* A journaled step answers from the journal: its result when it completed
 * (into *out, may be NULL), its error when it errored; a dry run stops at
 * anything else.  Returns 1 with *rc set when the call ends here. */
static int from_journal(duro_step *a, const journal_step *s, const char *key,
                        const char **out, duro_rc *rc) {
  if (s && s->status == DURO_STEP_COMPLETE) {
    if (out)
      *out = s->result;
    *rc = DURO_OK;
    return 1;
  }
  if (s && s->status == DURO_STEP_ERRORED) {
    a->last_error = s->error;
    *rc = DURO_ERROR;
    return 1;
  }
  if (a->dry) {
    *rc = dry_stop(a, key);
    return 1;
  }
  a->replaying = 0;
  return 0;
}

/* The instance's first activation is about to run a callback: its start
 * (when the activation began, not when it ends), with its lifecycle
 * "started" message, joins the batch the attempt's outcome commits, so
 * the next activation does not take its place.  Not a commit of its own:
 * that cost every new instance a second group commit (H1 -8%); a crash
 * inside the first callback leaves the start to the next activation.  An
 * activation that runs no callback stores its start with its final row.
 * Returns 0. */
static int save_start(duro_step *a) {
  if (a->inst.started_ms != JOURNAL_NONE)
    return 0;
  journal_instance *row = &a->start_row;
  *row = a->inst; /* borrowed strings */
  row->started_ms = a->begun_ms;
  journal_op *op = journal_batch_add(&a->batch, JOP_INSTANCE_SET);
  op->inst = row;
  engine_drivers_instance_changed(a->e, &a->batch, row, a->inst.status,
                                  JOURNAL_NONE, a->begun_ms);
  a->inst.started_ms = a->begun_ms;
  return 0;
}

/* One duro_do call as it goes, from its preparation to its outcome. */
typedef struct do_call {
  const char *key;
  journal_step *s;
  do_config c;
  int gate;               /* the place taken in the gate (GATE_*) */
  int64_t started, ended; /* the attempt's, on the engine clock */
} do_call;

/* Everything before the callback: the journal's answer when it has one,
 * the step's configuration, a retry its last attempt left owed, the
 * lease, the back-off and the gate.  Returns 1 with *rc set when the call
 * ends here. */
static int do_prepare(duro_step *a, const char *name,
                      const duro_step_config *cfg, duro_step_fn fn,
                      const char **result, do_call *call, duro_rc *rc) {
  uint32_t count;
  if (result)
    *result = NULL;
  if (step_begin(a, name, DURO_STEP_DO, &call->key, &count, &call->s, rc) ||
      from_journal(a, call->s, call->key, result, rc))
    return 1;
  *rc = DURO_ERROR;
  if (!fn) {
    fail_with(a, "Error", "duro_do needs a callback");
    return 1;
  }
  if (read_config(a, call->key, cfg, &call->c))
    return 1;
  if (!call->s) {
    if (step_limit_reached(a, call->key))
      return 1;
    call->s = new_step(a, call->key, name, count, DURO_STEP_DO);
  }
  journal_step *s = call->s;
  if (retry_orphaned(a, s, &call->c, rc))
    return 1;
  *rc = DURO_SUSPEND;
  if (lease_lapsed(a))
    return 1;
  int64_t now = now_ms(a);
  if (s->wake_ms != JOURNAL_NONE && now < s->wake_ms) {
    *rc = suspend_until(a, s->wake_ms, NULL); /* back-off not over */
    return 1;
  }
  if (save_start(a) != 0) {
    a->suspended = 1;
    if (a->reason != SUSPEND_ABANDONED)
      a->reason = SUSPEND_SHUTDOWN;
    return 1;
  }
  /* Waiting at the gate is no part of the attempt's time. */
  call->gate = gate_enter(a, s, s->attempts + 1);
  if (call->gate < 0) {
    a->suspended = 1;
    a->reason = SUSPEND_SHUTDOWN;
    return 1;
  }
  return 0;
}

/* Runs the callback as attempt `at`.  Returns 1 when the call must
 * suspend: a terminate or pause won the race before it started, or the
 * watchdog gave up on it meanwhile (its outcome was recorded as a
 * timeout). */
static int do_run_attempt(duro_step *a, duro_attempt *at, duro_step_fn fn,
                          void *arg, int *fn_rc) {
  if (attempt_begin(a, at))
    return 1;
  current_attempt = at;
  int64_t t0 = metrics_now_us();
  *fn_rc = fn(at, arg);
  metrics_hist_observe(&a->e->m.attempt_us, metrics_now_us() - t0);
  current_attempt = NULL;
  if (attempt_end(a, at)) {
    attempt_clear(at);
    return 1;
  }
  return 0;
}

/* Judges the attempt that returned `fn_rc`: NULL when it succeeded, else
 * the error's name, with its message in *err_msg (malloc'ed) and *final
 * set when no retry could change it. */
static const char *do_verdict(duro_step *a, const duro_attempt *at,
                              const do_call *call, int fn_rc, int overran,
                              char **err_msg, int *final) {
  const char *key = call->key;
  *err_msg = NULL;
  *final = 0;
  /* A result that is not JSON was refused when it was set (the callback
   * may have returned that code, or ignored it). */
  if (at->failed || (fn_rc != 0 && !at->bad_result)) {
    *err_msg = at->message ? xstrdup(at->message)
                           : xasprintf("step callback returned %d", fn_rc);
    *final = at->final;
    return at->final ? DURO_ERR_NON_RETRYABLE : DURO_ERR_ERROR;
  }
  if (overran) {
    char buf[48];
    *err_msg =
        xasprintf("step \"%s\" attempt %u exceeded its timeout of %s", key,
                  at->number, format_ms(buf, sizeof buf, call->c.timeout_ms));
    return DURO_ERR_TIMEOUT;
  }
  if (at->bad_result) {
    *err_msg = xstrdup(at->bad_result);
    *final = 1; /* the same code would set the same text */
    return duro_err_name(DURO_E_INVALID_OUTPUT);
  }
  /* duro_attempt_result parsed it already: only its size is left. */
  const char *text = at->result ? at->result : "null";
  int64_t limit = a->e->max_step_result;
  if (limit > 0 && (int64_t)strlen(text) > limit) {
    *err_msg = xasprintf("step \"%s\" returned %zu bytes; the limit is "
                         "%" PRId64 " bytes",
                         key, strlen(text), limit);
    *final = 1;
    return duro_err_name(DURO_E_OUTPUT_TOO_LARGE);
  }
  if (a->state_bytes + (int64_t)strlen(text) > a->e->max_instance_state) {
    *err_msg = xasprintf("step \"%s\" would bring the instance's state to "
                         "%" PRId64 " bytes; the limit is %" PRId64,
                         key, a->state_bytes + (int64_t)strlen(text),
                         a->e->max_instance_state);
    *final = 1;
    return duro_err_name(DURO_E_STATE_TOO_LARGE);
  }
  return NULL;
}

/* The attempt succeeded: its result, with its queue sends and events, is
 * on disk before the plugin sees it. */
static duro_rc do_record_success(duro_step *a, const do_call *call,
                                 duro_attempt *at, const char **result) {
  journal_step *s = call->s;
  /* The successful attempt is kept in the step row: one row written per
   * step instead of two. */
  s->status = DURO_STEP_COMPLETE;
  s->attempt_started_ms = call->started;
  s->build = (char *)a->build_hash;
  /* The step's error is that of a pending retry; a success ends it (the
   * failed attempts keep theirs). */
  s->error = NULL;
  s->result = arena_strdup(a, at->result ? at->result : "null");
  a->state_bytes += (int64_t)strlen(s->result);
  s->ended_ms = call->ended;
  s->wake_ms = JOURNAL_NONE;
  /* Its queue sends and events commit in the same transaction as its
   * result: exactly once, with the step. */
  int sent = 0;
  size_t first_send = a->batch.n;
  for (size_t i = 0; i < at->sends.n; i++) {
    sent |= at->sends.ops[i].kind == JOP_MESSAGE_INSERT;
    *journal_batch_add(&a->batch, at->sends.ops[i].kind) = at->sends.ops[i];
  }
  size_t n_sends = at->sends.n;
  put_step(a, s);
  attempt_clear(at);
  int flushed = flush(a);
  /* The ops stay readable after the commit reset the batch: wake the
   * receivers of its events.  Even when this activation cannot go on
   * (abandoned meanwhile, or the write failed): a receiver woken for
   * nothing only replays and waits again. */
  for (size_t i = first_send; i < first_send + n_sends; i++)
    if (a->batch.ops[i].kind == JOP_WAKE_IF_WAITING)
      engine_event_stored(a->e, &a->batch.ops[i]);
  if (flushed != 0) {
    a->suspended = 1;
    if (a->reason != SUSPEND_ABANDONED)
      a->reason = SUSPEND_SHUTDOWN;
    return DURO_SUSPEND;
  }
  metrics_add(&a->e->m.steps_completed, 1);
  if (sent)
    engine_kick_scheduler(a->e); /* a consumer may take them now */
  if (result)
    *result = s->result;
  return DURO_OK;
}

/* The attempt failed with `err_name` and `err_msg` (freed here): the
 * attempt is recorded, then the step waits for its retry or, when final
 * or out of retries, errors. */
static duro_rc do_record_failure(duro_step *a, const do_call *call,
                                 duro_attempt *at, const char *err_name,
                                 char *err_msg, int final) {
  journal_step *s = call->s;
  const char *key = call->key;
  const do_config *c = &call->c;
  metrics_add(&a->e->m.attempts_failed, 1);
  const char *err = arena_take(a, error_json(err_name, err_msg));
  journal_op *op = journal_batch_add(&a->batch, JOP_ATTEMPT_PUT);
  op->rowid = a->inst.rowid;
  op->attempt = (journal_attempt){.key = s->key,
                                  .number = at->number,
                                  .started_ms = call->started,
                                  .ended_ms = call->ended,
                                  .error = err,
                                  .build = a->build_hash};
  attempt_clear(at); /* a failed attempt sent nothing */
  uint32_t charged = final ? at->number : charged_attempts(a, key, at->number);
  if (!final && charged <= c->limit) {
    int64_t wait = backoff_ms(c->delay_ms, c->backoff, charged);
    log_write(DURO_LOG_INFO, a->where,
              "step \"%s\" attempt %u failed: %s; "
              "retrying in %" PRId64 " ms",
              key, at->number, err_msg, wait);
    free(err_msg);
    metrics_add(&a->e->m.retries_scheduled, 1);
    s->wake_ms = call->ended + wait;
    s->error = (char *)err;
    put_step(a, s);
    return suspend_until(a, s->wake_ms, NULL);
  }
  log_write(DURO_LOG_WARN, a->where,
            "step \"%s\" failed after %u attempt%s: %s", key, at->number,
            at->number == 1 ? "" : "s", err_msg);
  free(err_msg);
  s->status = DURO_STEP_ERRORED;
  s->error = (char *)err;
  s->ended_ms = call->ended;
  s->wake_ms = JOURNAL_NONE;
  put_step(a, s);
  a->last_error = err;
  return DURO_ERROR;
}

/* duro_do: answered from the journal when it can be, else one attempt of
 * the callback, whose outcome is recorded before the call returns. */
static duro_rc api_do(duro_step *a, const char *name,
                      const duro_step_config *cfg, duro_step_fn fn, void *arg,
                      const char **result) {
  do_call call;
  duro_rc rc;
  if (do_prepare(a, name, cfg, fn, result, &call, &rc))
    return rc;
  journal_step *s = call.s;
  call.started = now_ms(a);
  duro_attempt at = {
      .act = a,
      .step = s,
      .number = s->attempts + 1,
      .started_ms = call.started,
      .deadline_ms = call.started + call.c.timeout_ms,
      .timeout_ms = call.c.timeout_ms,
      .deadline_mono = engine_mono_ms(a->e) + call.c.timeout_ms,
      .gate = call.gate,
      /* A restart's re-run is a new request: "@<restarts>" sets it apart. */
      .idempotency_key = a->inst.restarts
                             ? arena_printf(a, "%s/%s@%" PRId64, a->inst.id,
                                            call.key, a->inst.restarts)
                             : arena_printf(a, "%s/%s", a->inst.id, call.key),
  };
  int fn_rc;
  if (do_run_attempt(a, &at, fn, arg, &fn_rc))
    return DURO_SUSPEND;
  call.ended = now_ms(a);
  int overran = engine_mono_ms(a->e) > at.deadline_mono;
  char *err_msg;
  int final;
  const char *err_name =
      do_verdict(a, &at, &call, fn_rc, overran, &err_msg, &final);
  s->attempts = at.number;
  if (!err_name)
    return do_record_success(a, &call, &at, result);
  return do_record_failure(a, &call, &at, err_name, err_msg, final);
}

/* ---- sleeps
 * -------------------------------------------------------------------------- */

static duro_rc sleep_step(duro_step *a, const char *name, int64_t until,
                          int64_t duration, int relative) {
  const char *key;
  uint32_t count;
  journal_step *s;
  duro_rc rc;
  if (step_begin(a, name, DURO_STEP_SLEEP, &key, &count, &s, &rc) ||
      from_journal(a, s, key, NULL, &rc))
    return rc;
  int64_t now = now_ms(a);
  if (!s) {
    if (step_limit_reached(a, key))
      return DURO_ERROR;
    s = new_step(a, key, name, count, DURO_STEP_SLEEP);
    s->wake_ms = relative ? now + duration : until;
    put_step(a, s);
  }
  if (now >= s->wake_ms) {
    s->status = DURO_STEP_COMPLETE;
    s->ended_ms = now;
    put_step(a, s);
    return DURO_OK;
  }
  return suspend_until(a, s->wake_ms, NULL);
}

static duro_rc api_sleep(duro_step *a, const char *name, const char *duration) {
  int64_t ms = 0;
  if (a->suspended)
    return DURO_SUSPEND;
  if (!duration || duration_parse(duration, &ms) != 0 ||
      ms > DURATION_MAX_SLEEP_MS) {
    char *msg = xasprintf("sleep \"%s\": invalid duration \"%s\" (at most "
                          "365 days)",
                          name ? name : "", duration ? duration : "(null)");
    fail_with(a, duro_err_name(DURO_E_INVALID_DURATION), msg);
    free(msg);
    return DURO_ERROR;
  }
  return sleep_step(a, name, 0, ms, 1);
}

static duro_rc api_sleep_until(duro_step *a, const char *name,
                               int64_t unix_ms) {
  if (a->suspended)
    return DURO_SUSPEND;
  int64_t now = now_ms(a);
  /* Compared so that no value of unix_ms overflows. */
  if (unix_ms > now && unix_ms - now > DURATION_MAX_SLEEP_MS) {
    fail_with(a, duro_err_name(DURO_E_INVALID_DURATION),
              "sleep_until: more than 365 days ahead");
    return DURO_ERROR;
  }
  return sleep_step(a, name, unix_ms, 0, 0);
}

/* ---- events
 * -----------------------------------------------------------------------------
 */

static char *event_json(const journal_event *ev) {
  char ts[64];
  time_t secs = (time_t)(ev->ts_ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
           tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
           tm.tm_sec, (int)(ev->ts_ms % 1000));
  json_t *payload = json_loads(ev->payload, JSON_DECODE_ANY, NULL);
  json_t *o = json_pack("{s:s,s:o,s:s}", "type", ev->type, "payload",
                        payload ? payload : json_null(), "timestamp", ts);
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return s;
}

static duro_rc api_wait_for_event(duro_step *a, const char *name,
                                  const char *type, const char *timeout,
                                  const char **event) {
  const char *key;
  uint32_t count;
  journal_step *s;
  duro_rc rc;
  if (event)
    *event = NULL;
  if (step_begin(a, name, DURO_STEP_WAIT_FOR_EVENT, &key, &count, &s, &rc) ||
      from_journal(a, s, key, event, &rc))
    return rc;
  int64_t now = now_ms(a);
  if (!s) {
    int64_t ms = DEFAULT_EVENT_TIMEOUT_MS;
    if (!type || !*type ||
        (timeout &&
         (duration_parse(timeout, &ms) != 0 || ms > DURATION_MAX_SLEEP_MS))) {
      char *msg = xasprintf("waitForEvent \"%s\": %s", key,
                            !type || !*type ? "needs an event type"
                                            : "invalid timeout");
      fail_with(a, "Error", msg);
      free(msg);
      return DURO_ERROR;
    }
    if (step_limit_reached(a, key))
      return DURO_ERROR;
    s = new_step(a, key, name, count, DURO_STEP_WAIT_FOR_EVENT);
    s->wake_ms = now + ms;
    put_step(a, s);
  }
  /* Most activations never wait for an event: load them on first need. */
  if (!a->events_loaded) {
    if (journal_events_pending(a->e->j, a->inst.rowid, &a->events,
                               &a->n_events) != 0) {
      a->storage_failed = 1;
      a->suspended = 1;
      a->reason = SUSPEND_SHUTDOWN;
      return DURO_SUSPEND;
    }
    a->consumed = xcalloc(a->n_events ? a->n_events : 1, 1);
    a->events_loaded = 1;
  }
  for (size_t i = 0; type && i < a->n_events; i++) {
    journal_event *ev = &a->events[i];
    if (a->consumed[i] || strcmp(ev->type, type) != 0)
      continue;
    a->consumed[i] = 1;
    s->status = DURO_STEP_COMPLETE;
    s->result = arena_take(a, event_json(ev));
    s->ended_ms = now;
    s->wake_ms = JOURNAL_NONE;
    put_step(a, s);
    journal_op *op = journal_batch_add(&a->batch, JOP_EVENT_CONSUME);
    op->event_seq = ev->seq;
    op->step_key = s->key;
    if (event)
      *event = s->result;
    return DURO_OK;
  }
  if (now >= s->wake_ms) {
    char buf[48];
    char *msg =
        xasprintf("waitForEvent \"%s\" timed out after %s waiting "
                  "for an event of type \"%s\"",
                  key, format_ms(buf, sizeof buf, s->wake_ms - s->started_ms),
                  type ? type : "");
    fail_with(a, DURO_ERR_TIMEOUT, msg);
    free(msg);
    s->status = DURO_STEP_ERRORED;
    s->error = (char *)a->last_error;
    s->ended_ms = now;
    s->wake_ms = JOURNAL_NONE;
    put_step(a, s);
    return DURO_ERROR;
  }
  return suspend_until(a, s->wake_ms, arena_strdup(a, type));
}

/* ---- output and errors
 * ------------------------------------------------------------------ */

static const char *api_step_error(duro_step *a) {
  return a->last_error ? a->last_error : "null";
}

static int api_error_is(duro_step *a, const char *name) {
  if (!a->last_error || !name)
    return 0;
  json_t *err = json_loads(a->last_error, 0, NULL);
  const char *got = json_string_value(json_object_get(err, "name"));
  int is = got && !strcmp(got, name);
  json_decref(err);
  return is;
}

/* run()'s own failure: the instance's error when run() returns it. */
static duro_rc api_vfail(duro_step *a, const char *fmt, va_list ap) {
  if (a->suspended)
    return DURO_SUSPEND;
  char *msg = fmt ? xvasprintf(fmt, ap) : xstrdup("run() failed");
  fail_with(a, "Error", msg);
  free(msg);
  return DURO_ERROR;
}

static duro_rc api_set_output(duro_step *a, const char *json) {
  if (a->suspended)
    return DURO_SUSPEND;
  const char *text = json ? json : "null";
  char why[256];
  int bad = json_text_check_at(text, a->e->max_step_result, why, sizeof why);
  if (bad) {
    char *msg = bad == DURO_E_OUTPUT_TOO_LARGE
                    ? xasprintf("the output is %zu bytes; the limit is %" PRId64
                                " bytes",
                                strlen(text), a->e->max_step_result)
                    : xasprintf("the output is not valid JSON: %s", why);
    fail_with(a, duro_err_name(bad), msg);
    free(msg);
    return DURO_ERROR;
  }
  a->output = arena_strdup(a, text);
  return DURO_OK;
}

/* ---- inside an attempt
 * --------------------------------------------------------------------- */

static uint32_t api_attempt_number(const duro_attempt *at) {
  return at->number;
}

/* Parsed here, so that the error names the step and the position; the
 * size is checked when the callback returns. */
static int api_attempt_result(duro_attempt *at, const char *json) {
  const char *text = json ? json : "null";
  char why[256];
  free(at->bad_result);
  at->bad_result = NULL;
  if (json_text_check_at(text, 0, why, sizeof why) != 0) {
    at->bad_result = xasprintf("step \"%s\" attempt %u: the result is not "
                               "valid JSON: %s",
                               at->step->key, at->number, why);
    return DURO_E_INVALID_OUTPUT;
  }
  free(at->result);
  at->result = xstrdup(text);
  return 0;
}

static int api_attempt_vfail(duro_attempt *at, int final, const char *fmt,
                             va_list ap) {
  free(at->message);
  at->message = fmt ? xvasprintf(fmt, ap) : xstrdup("failed");
  at->failed = 1;
  at->final = final;
  return -1;
}

static const char *api_attempt_idempotency_key(const duro_attempt *at) {
  return at->idempotency_key;
}

static int64_t api_attempt_deadline_ms(const duro_attempt *at) {
  return at->deadline_ms;
}

static int api_attempt_cancelled(const duro_attempt *at) {
  const worker *w = at->act->worker;
  return engine_mono_ms(at->act->e) > at->deadline_mono ||
         __atomic_load_n(&at->act->e->stopping, __ATOMIC_ACQUIRE) ||
         (w && __atomic_load_n(&w->abandoned, __ATOMIC_ACQUIRE));
}

/* ---- side effects of other subsystems' calls
 * ---------------------------------------------------------------- */

const char *step_current_where(void) {
  return current_act ? current_act->where : NULL;
}

duro_attempt *step_current_attempt(void) { return current_attempt; }

journal_batch *attempt_effects(duro_attempt *at) { return &at->sends; }

char *attempt_strdup(duro_attempt *at, const char *s) {
  return arena_strdup(at->act, s);
}

int64_t attempt_now_ms(const duro_attempt *at) { return now_ms(at->act); }

/* ---- logging
 * -------------------------------------------------------------------------------
 */

static void api_vlog(int level, const char *fmt, va_list ap) {
  duro_step *a = current_act;
  /* Lines from run() while it replays were already logged once; a dry
   * run logs nothing. */
  if (a && ((a->replaying && !current_attempt) || a->dry))
    return;
  char where[512];
  if (a && current_attempt)
    snprintf(where, sizeof where, "%s %s attempt %u", a->where,
             current_attempt->step->key, current_attempt->number);
  else
    snprintf(where, sizeof where, "%s", a ? a->where : "plugin");
  log_vwrite(level, where, fmt, ap);
}

/* The step runner's members of the plugin API table; the table's layout
 * (and the members others fill) is api.c's. */
void step_api_fill(duro_api *t) {
  t->do_step = api_do;
  t->sleep = api_sleep;
  t->sleep_until = api_sleep_until;
  t->wait_for_event = api_wait_for_event;
  t->step_error = api_step_error;
  t->set_output = api_set_output;
  t->attempt_number = api_attempt_number;
  t->attempt_result = api_attempt_result;
  t->attempt_vfail = api_attempt_vfail;
  t->attempt_idempotency_key = api_attempt_idempotency_key;
  t->attempt_deadline_ms = api_attempt_deadline_ms;
  t->attempt_cancelled = api_attempt_cancelled;
  t->vlog = api_vlog;
  t->vfail = api_vfail;
  t->error_is = api_error_is;
}

/* ---- the activation
 * -------------------------------------------------------------------------- */

static int load_journal(duro_step *a) {
  journal_step *loaded = NULL;
  size_t n = 0;
  int rc = journal_steps_load(a->e->j, a->inst.rowid, &loaded, &n);
  if (rc)
    return rc;
  /* Copy into the arena so step fields can be replaced freely. */
  for (size_t i = 0; i < n; i++) {
    journal_step *s = arena_alloc(a, sizeof *s);
    *s = loaded[i];
    s->key = arena_strdup(a, loaded[i].key);
    s->name = arena_strdup(a, loaded[i].name);
    s->result = arena_strdup(a, loaded[i].result);
    s->error = arena_strdup(a, loaded[i].error);
    s->build = arena_strdup(a, loaded[i].build);
    a->state_bytes += (int64_t)(s->result ? strlen(s->result) : 0) +
                      (int64_t)(s->error ? strlen(s->error) : 0);
    strmap_put(&a->steps, s->key, s);
    idmap_put(&a->by_seq, s->seq, s);
    a->n_steps++;
  }
  a->state_bytes += (int64_t)strlen(a->inst.params);
  journal_steps_free(loaded, n);
  /* Replay lasts until a step call misses the journal; with an empty
   * journal nothing is replayed, so run()'s first lines log (they would
   * otherwise be suppressed on the first activation and never appear). */
  a->replaying = n > 0;
  return 0;
}

/* Decides the instance's new row and queues it, with the activation's
 * last writes, for the final commit. */
static void finish(duro_step *a, duro_rc rc) {
  int64_t now = now_ms(a);
  journal_instance *row = &a->final_row;
  *row = a->inst; /* borrowed strings; never cleared */
  row->wake_ms = JOURNAL_NONE;
  row->wait_type = NULL;
  row->started_ms =
      a->inst.started_ms != JOURNAL_NONE ? a->inst.started_ms : a->begun_ms;
  int clear_control = 0;
  if (a->suspended)
    rc = DURO_SUSPEND;
  if (rc == DURO_OK) {
    row->status = DURO_STATUS_COMPLETE;
    row->output = (char *)a->output;
    row->error = NULL;
    row->ended_ms = now;
    clear_control = 1;
  } else if (rc == DURO_SUSPEND && a->reason == SUSPEND_WAIT) {
    row->status = DURO_STATUS_WAITING;
    row->wake_ms = a->wake_ms;
    row->wait_type = (char *)a->wait_type;
  } else if (rc == DURO_SUSPEND && a->reason == SUSPEND_PAUSE) {
    row->status = DURO_STATUS_PAUSED;
    row->paused_ms = now;
    clear_control = 1;
  } else if (rc == DURO_SUSPEND && a->reason == SUSPEND_TERMINATE) {
    row->status = DURO_STATUS_TERMINATED;
    row->ended_ms = now;
    clear_control = 1;
  } else if (rc == DURO_SUSPEND && a->reason == SUSPEND_SHUTDOWN) {
    row->status = DURO_STATUS_QUEUED;
  } else if (rc == DURO_SUSPEND && (a->reason == SUSPEND_NO_BUILD ||
                                    (a->reason == SUSPEND_DIVERGED &&
                                     a->wf->limits.pause_on_divergence))) {
    /* For an operator: roll the build back, or restart --from. */
    row->status = DURO_STATUS_PAUSED;
    row->paused_ms = now;
    row->error = (char *)a->last_error;
    clear_control = 1;
  } else if (rc == DURO_SUSPEND && a->reason == SUSPEND_DIVERGED) {
    row->status = DURO_STATUS_ERRORED;
    row->ended_ms = now;
    row->error = (char *)a->last_error;
    clear_control = 1;
  } else {
    row->status = DURO_STATUS_ERRORED;
    row->ended_ms = now;
    clear_control = 1;
    if (rc == DURO_ERROR && a->last_error)
      row->error = (char *)a->last_error;
    else
      row->error = arena_take(
          a, error_json("Error", rc == DURO_ERROR
                                     ? "run() returned DURO_ERROR with no "
                                       "failed step"
                                     : "run() returned an unknown code or "
                                       "DURO_SUSPEND with no suspending step"));
  }
  journal_op *op = journal_batch_add(&a->batch, JOP_INSTANCE_SET);
  op->inst = row;
  op->clear_control = clear_control;
  engine_drivers_instance_changed(a->e, &a->batch, row, a->inst.status,
                                  a->inst.started_ms, now);
  /* Pinned at its first activation (versioning: pinned); under latest,
   * the build it last ran on.  Written only when it changes. */
  if (a->build_hash &&
      (!a->inst.build || strcmp(a->inst.build, a->build_hash) != 0)) {
    op = journal_batch_add(&a->batch, JOP_INSTANCE_PIN);
    op->rowid = row->rowid;
    op->step_key = a->build_hash;
  }
  /* An event of the awaited type may have been stored after this
   * activation read the events (while it ran, or while this commit
   * waited): in the same transaction, the wait is then due at once.  The
   * event's arrival and the instance's wake are one durable fact,
   * whichever commit lands first. */
  a->event_wake_op = -1;
  if (row->wait_type) {
    a->event_wake_op = (ssize_t)a->batch.n;
    op = journal_batch_add(&a->batch, JOP_WAKE_IF_EVENT_PENDING);
    op->rowid = row->rowid;
    op->ts_ms = now;
  }
}

static void activation_free(duro_step *a) {
  if (a->wf)
    build_release(a->wf, a->build);
  journal_batch_free(&a->batch);
  journal_events_free(a->events, a->n_events);
  free(a->consumed);
  strmap_free(&a->steps);
  idmap_free(&a->by_seq);
  strmap_free(&a->name_counts);
  journal_instance_clear(&a->inst);
  arena_free(a);
  free(a);
}

/* The final commit is on disk (or failed): only now may the engine let go
 * of the instance.  Runs on whichever thread committed. */
static void on_final_commit(void *ctx, int rc) {
  duro_step *a = ctx;
  duro_status status = ENGINE_STATUS_NONE;
  int64_t wake = JOURNAL_NONE;
  if (rc) {
    /* Nothing of it is on disk: the instance runs again from its journal
     * once writes succeed. */
    log_error("%s: journal commit failed: %s; retrying", a->where,
              journal_errmsg(a->e->j));
    engine_activation_retry(a->e, a->ent);
    activation_free(a);
    return;
  } else {
    status = a->final_row.status;
    wake = a->final_row.wake_ms;
    if (a->event_wake_op >= 0 && a->batch.ops[a->event_wake_op].out_rowid)
      wake = a->batch.ops[a->event_wake_op].ts_ms;
    a->ent->write_failures = 0;
    if (status == DURO_STATUS_ERRORED)
      log_write(DURO_LOG_WARN, a->where, "errored: %s", a->final_row.error);
    else if (status != DURO_STATUS_WAITING)
      log_write(DURO_LOG_DEBUG, a->where, "%s", duro_status_name(status));
  }
  engine_activation_done(a->e, a->ent, status, wake, 0);
  activation_free(a);
}

/* What run() is handed: the instance's id, params and creation time
 * (borrowed from the activation). */
static duro_event event_of(const duro_step *a) {
  return (duro_event){.size = sizeof(duro_event),
                      .workflow = a->inst.workflow,
                      .instance_id = a->inst.id,
                      .params = a->inst.params,
                      .created_ms = a->inst.created_ms};
}

void activation_run(duro_engine *e, entry *ent) {
  duro_step *a = xcalloc(1, sizeof *a);
  a->e = e;
  a->ent = ent;
  a->replaying = 1;
  duro_status status = ENGINE_STATUS_NONE;
  int rc = journal_instance_get_rowid(e->j, ent->rowid, &a->inst);
  if (rc == DURO_E_STORAGE)
    goto retry;
  if (rc)
    goto done; /* swept meanwhile */
  a->where = arena_printf(a, "%s/%s", a->inst.workflow, a->inst.id);
  /* Stale runnable entries (an event for a paused instance, a wake that a
   * control operation overtook) do nothing. */
  if (a->inst.status != DURO_STATUS_QUEUED &&
      a->inst.status != DURO_STATUS_WAITING) {
    status = a->inst.status;
    goto done;
  }
  a->wf = engine_find_workflow(e, a->inst.workflow);
  if (!a->wf) {
    log_error("%s: workflow \"%s\" is not in the config; instance left %s",
              a->where, a->inst.workflow, duro_status_name(a->inst.status));
    goto done;
  }
  if (!engine_activation_admit(e, ent, a->wf)) {
    activation_free(a); /* runs when one of the workflow's activations ends */
    return;
  }
  a->begun_ms = now_ms(a);
  a->worker = engine_thread_worker();
  a->slot = engine_thread_slot();
  slot_bind(a);
  /* A request persisted before a crash, or while the last activation ran. */
  if (a->inst.control == JOURNAL_CONTROL_PAUSE)
    __atomic_store_n(&ent->pause_req, 1, __ATOMIC_RELEASE);
  else if (a->inst.control == JOURNAL_CONTROL_TERMINATE)
    __atomic_store_n(&ent->terminate_req, 1, __ATOMIC_RELEASE);
  if (load_journal(a) != 0) {
    log_error("%s: cannot load journal: %s", a->where, journal_errmsg(e->j));
    goto retry;
  }

  if (lease_lapsed(a))
    goto retry; /* run() starts only under a lease that surely holds */
  duro_event ev = event_of(a);
  duro_env env = {.engine = e};
  metrics_add(&e->m.activations, 1);
  duro_rc out = DURO_SUSPEND;
  a->build = build_acquire(a->wf, a->inst.build);
  if (a->build) {
    a->build_hash = a->build->hash;
    current_act = a;
    out = a->build->run(a, &ev, &env);
    current_act = NULL;
  } else {
    /* Its build left the store (deleted by hand?): wait for an operator
     * rather than replay on other code.  Both ways out work on a paused
     * instance: a resume loads the build if it is back (control.c), and
     * a restart from the top, once terminated, runs on the newest. */
    char *msg = xasprintf("pinned to build %s, which is not loaded: put "
                          "its file back in the build store as %s.so and "
                          "resume the instance, or terminate it and restart "
                          "it from the top (on the newest build)",
                          a->inst.build, a->inst.build);
    fail_with(a, duro_err_name(DURO_E_BUILD_UNAVAILABLE), msg);
    free(msg);
    a->suspended = 1;
    a->reason = SUSPEND_NO_BUILD;
  }
  if (a->reason == SUSPEND_ABANDONED) {
    /* The watchdog recorded the hung attempt and let go of the instance,
     * which may be running elsewhere by now: touch nothing of it. */
    activation_free(a);
    return;
  }
  if (a->slot)
    ledger_set_state(a->slot, LEDGER_IDLE);
  if (a->storage_failed)
    goto retry; /* its row is as its last successful write left it */
  /* The worker moves on at once; the engine lets go of the instance when
   * the final commit lands (on_final_commit). */
  finish(a, out);
  engine_commit_final(e, &a->batch, on_final_commit, a);
  return;
done:
  if (a->slot)
    ledger_set_state(a->slot, LEDGER_IDLE);
  engine_activation_done(e, ent, status, JOURNAL_NONE, 1);
  activation_free(a);
  return;
retry:
  if (a->slot)
    ledger_set_state(a->slot, LEDGER_IDLE);
  engine_activation_retry(e, ent);
  activation_free(a);
}

/* ---- a dry run
 * ---------------------------------------------------------------
 */

/* The name and message of error JSON `text` ({"name","message"}, as
 * error_json writes it) into out. */
static void dry_run_error(const char *text, duro_dry_run_instance *out) {
  json_t *o = json_loads(text, 0, NULL);
  const char *name = json_string_value(json_object_get(o, "name"));
  const char *msg = json_string_value(json_object_get(o, "message"));
  out->error_name = name ? xstrdup(name) : NULL;
  out->error_message = msg ? xstrdup(msg) : NULL;
  json_decref(o);
}

void activation_dry_run(duro_engine *e, wf_reg *wf, int64_t rowid,
                        duro_run_fn run, duro_dry_run_instance *out) {
  *out = (duro_dry_run_instance){.rowid = rowid};
  duro_step *a = xcalloc(1, sizeof *a);
  a->e = e;
  a->wf = wf;
  a->dry = 1;
  a->replaying = 1;
  int rc = journal_instance_get_rowid(e->j, rowid, &a->inst);
  if (rc == 0)
    rc = load_journal(a);
  if (rc) {
    out->outcome = DURO_DRY_RUN_UNREADABLE;
    out->error_message = xstrdup(journal_errmsg(e->j));
    a->wf = NULL;
    activation_free(a);
    return;
  }
  a->where = arena_printf(a, "%s/%s", a->inst.workflow, a->inst.id);
  duro_event ev = event_of(a);
  duro_env env = {.engine = e};
  current_act = a;
  duro_rc r = run(a, &ev, &env);
  current_act = NULL;
  int diverged = a->suspended && a->reason == SUSPEND_DIVERGED;
  out->outcome = diverged ? DURO_DRY_RUN_DIVERGED
                 : a->suspended && a->reason == SUSPEND_DRY
                     ? DURO_DRY_RUN_REPLAYS
                 : r == DURO_OK ? DURO_DRY_RUN_COMPLETES
                                : DURO_DRY_RUN_REPLAYS;
  out->id = xstrdup(a->inst.id);
  out->journaled = a->n_steps;
  out->next = a->dry_next ? xstrdup(a->dry_next) : NULL;
  if (diverged && a->last_error)
    dry_run_error(a->last_error, out);
  a->wf = NULL; /* no build was acquired */
  activation_free(a);
}
