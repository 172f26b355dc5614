/* resources.c — shared resources at step level, a driver (driver.h's
 * step_claim and step_unclaim): each resource of the host's config
 * (`resources:`, registered by the host before the engine starts) is
 * shared out to the attempts of the steps naming it
 * (duro_step_config.resource), whatever their workflow: at most
 * `concurrency` of them inside their callbacks at once, and at most
 * `limit` starting a `period` (a token bucket of `burst` tokens, kept as
 * the generic cell rate algorithm: the resource's next start time moved
 * on by period/limit at each start, on the engine's clock).
 *
 * An attempt that cannot have its resource does not start: its instance
 * waits (status waiting, wait_type "resource"), holding no thread, and
 * joins the resource's line (a FIFO of instances, first come first
 * served across the workflows).  Whenever a slot frees or a rate's time
 * comes, the line's head is promised the turn (the slot and the start
 * counted for it at once, so a newcomer cannot take it) and woken, one
 * per turn; its next claim takes the promise.  A promise its instance
 * does not come back for within PROMISE_MS lapses (the instance was
 * paused, or queued behind a flow rule meanwhile: it lines up again
 * when it comes).  An instance that ends or pauses leaves the line, and
 * gives back a promise it had.  A waiting instance also asks again every
 * RECHECK_MS, keeping its place, should a wake be lost.
 *
 * Everything is memory under the driver's own lock, never the engine's;
 * instances are woken after it is let go.  After a restart nothing is
 * held (the attempts that held slots died with the host), and the start
 * hook wakes this host's instances that were waiting, to line up again.
 * Several hosts on one PostgreSQL database: a concurrency's slots are the
 * store's, and a rate's starts are too, one time a resource in the store
 * that every host's starts move on (below, "across the hosts of a shared
 * store"). */
#include "resources.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "error.h"
#include "journal.h"
#include "log.h"
#include "map.h"
#include "metrics.h"
#include "util.h"

#define PROMISE_MS 30000
#define RECHECK_MS (5 * 60000)
#define SLOTS_RETRY_MS 50
#define RATES_RETRY_MS 50
#define SPARE_MS 1000

/* An instance in a resource's line. */
typedef struct waiter {
  int64_t rowid;
  struct waiter *prev, *next;
} waiter;

typedef struct resource {
  char *name;
  uint32_t concurrency; /* 0: no bound */
  uint32_t limit;       /* a rate's, 0: no rate */
  int64_t period_ms;
  uint32_t burst;
  double interval_ms, tolerance_ms;
  double tat;        /* the rate's next start time (engine clock, ms) */
  uint32_t taken;    /* slots: attempts running and promises */
  uint32_t running;  /* attempts inside their callbacks */
  uint32_t promised; /* turns promised, not yet claimed */
  idmap promises;    /* rowid → its promise's deadline (int64_t *) */
  waiter *head, *tail;
  uint32_t waiting;
  idmap waiters; /* rowid → its waiter */
  /* On a shared store (a concurrency's slots the hosts count together,
   * journal_slots_pass): shared set at the start; the store's slots this
   * host holds, slots[0..held), under `base`, of `epoch`; a take or give
   * of the store in flight (busy: one at a time, so that two never take
   * the same slot on the host's one session); when a line short of slots
   * asks again; since when slots lie spare (given back SPARE_MS later). */
  int shared, busy;
  int64_t base;
  uint32_t held, cap_slots, *slots;
  uint64_t epoch;
  int64_t retry_at, spare_since;
  /* A rate on a shared store (journal_rates_take under rate_key): set at
   * the start; tat is then the store's as last answered; a take of the
   * store in flight (asking: one at a time); the starts the store gave,
   * handed out by the pass that got them (0 outside it). */
  int rate_shared, asking;
  int64_t rate_key;
  uint32_t granted;
} resource;

typedef struct res_state {
  duro_engine *e;
  pthread_mutex_t mu;
  resource **v;
  size_t n;
  strmap by_name;
  /* Instances in a line or promised, over every resource: while 0, an
   * instance's change has nothing to look for here (read unlocked). */
  uint32_t busy;
} res_state;

/* Instances to wake once the lock is let go. */
typedef struct wakes {
  int64_t *v;
  size_t n, cap;
} wakes;

static void wakes_add(wakes *w, int64_t rowid) {
  if (w->n == w->cap) {
    w->cap = w->cap ? w->cap * 2 : 8;
    w->v = xrealloc(w->v, w->cap * sizeof *w->v);
  }
  w->v[w->n++] = rowid;
}

static void wakes_run(duro_engine *e, wakes *w) {
  for (size_t i = 0; i < w->n; i++)
    engine_instance_wake(e, w->v[i]);
  free(w->v);
  *w = (wakes){0};
}

static void wakes_drop(wakes *w, int64_t rowid) {
  for (size_t i = 0; i < w->n; i++)
    if (w->v[i] == rowid) {
      memmove(&w->v[i], &w->v[i + 1], (w->n - i - 1) * sizeof *w->v);
      w->n--;
      return;
    }
}

static void free_promise(void *ctx, int64_t rowid, void *val) {
  (void)ctx, (void)rowid;
  free(val);
}

static void *res_create(duro_engine *e) {
  res_state *s = xcalloc(1, sizeof *s);
  s->e = e;
  pthread_mutex_init(&s->mu, NULL);
  return s;
}

static void res_free(void *state) {
  res_state *s = state;
  if (!s)
    return;
  for (size_t i = 0; i < s->n; i++) {
    resource *r = s->v[i];
    for (waiter *w = r->head, *next; w; w = next) {
      next = w->next;
      free(w);
    }
    idmap_each(&r->promises, free_promise, NULL);
    idmap_free(&r->promises);
    idmap_free(&r->waiters);
    free(r->slots);
    free(r->name);
    free(r);
  }
  free(s->v);
  strmap_free(&s->by_name);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

int duro_resource_register(duro_engine *e, const char *name,
                           const duro_resource_options *o) {
  res_state *s = duro_engine_driver_state(e, &resources_driver);
  if (!s)
    return DURO_E_NOT_FOUND;
  if (!name || !*name || !o || (!o->concurrency && !o->rate_limit) ||
      (o->rate_limit && o->rate_period_ms <= 0))
    return DURO_E_INVALID_ARGUMENT;
  pthread_mutex_lock(&s->mu);
  int rc = 0;
  if (strmap_get(&s->by_name, name)) {
    rc = DURO_E_INVALID_ARGUMENT;
  } else {
    resource *r = xcalloc(1, sizeof *r);
    r->name = xstrdup(name);
    r->concurrency = o->concurrency;
    r->limit = o->rate_limit;
    r->period_ms = o->rate_period_ms;
    r->burst = o->rate_burst ? o->rate_burst : 1;
    if (r->limit) {
      r->interval_ms = (double)r->period_ms / r->limit;
      r->tolerance_ms = (r->burst - 1) * r->interval_ms;
    }
    r->tat = -1e300; /* never started: a start may come at once */
    /* its slots and its rate in a shared store: a namespace of its own
     * beside flow control's keys (theirs hash their workflow's name
     * first, this one a control character and "resource"); the slots'
     * low 20 bits for the slot's number */
    char *key = xasprintf("\x1eresource\x1f%s", name);
    r->rate_key = map_hash_str(key);
    r->base = (int64_t)((uint64_t)r->rate_key & ~UINT64_C(0xFFFFF));
    free(key);
    s->v = xrealloc(s->v, (s->n + 1) * sizeof *s->v);
    s->v[s->n++] = r;
    strmap_put(&s->by_name, r->name, r);
  }
  pthread_mutex_unlock(&s->mu);
  return rc;
}

/* ---- the line, the slots and the rate (s->mu held) ---------------------- */

static int slot_free(const resource *r) {
  if (!r->concurrency)
    return 1;
  return r->taken < (r->shared ? r->held : r->concurrency);
}

/* Whether the rate lets a start come now: on a shared store only one the
 * store gave on this pass (rates_run), never one of this host's count. */
static int start_due(const resource *r, double now) {
  if (r->rate_shared)
    return r->granted > 0;
  return !r->limit || now >= r->tat - r->tolerance_ms;
}

/* A start counted now: a slot taken, the rate moved on (or one of the
 * store's starts used). */
static void take(resource *r, double now) {
  r->spare_since = 0;
  if (r->concurrency)
    r->taken++;
  if (r->rate_shared)
    r->granted--;
  else if (r->limit)
    r->tat = (r->tat > now ? r->tat : now) + r->interval_ms;
}

static void line_up(res_state *s, resource *r, int64_t rowid) {
  if (idmap_get(&r->waiters, rowid))
    return; /* it keeps its place */
  waiter *w = xcalloc(1, sizeof *w);
  w->rowid = rowid;
  w->prev = r->tail;
  if (r->tail)
    r->tail->next = w;
  else
    r->head = w;
  r->tail = w;
  idmap_put(&r->waiters, rowid, w);
  r->waiting++;
  __atomic_add_fetch(&s->busy, 1, __ATOMIC_RELAXED);
}

static void leave_line(res_state *s, resource *r, waiter *w) {
  if (w->prev)
    w->prev->next = w->next;
  else
    r->head = w->next;
  if (w->next)
    w->next->prev = w->prev;
  else
    r->tail = w->prev;
  idmap_del(&r->waiters, w->rowid);
  r->waiting--;
  __atomic_sub_fetch(&s->busy, 1, __ATOMIC_RELAXED);
  free(w);
}

/* Gives the line's head its turn while a slot is free and the rate lets
 * a start come now: promised (counted now) and woken, one per turn. */
static void pump(res_state *s, resource *r, int64_t now, wakes *wk) {
  while (r->head && slot_free(r) && start_due(r, (double)now)) {
    int64_t rowid = r->head->rowid;
    leave_line(s, r, r->head);
    take(r, (double)now);
    /* (one in the line has no promise: its claim took it first) */
    int64_t *until = xcalloc(1, sizeof *until);
    *until = now + PROMISE_MS;
    idmap_put(&r->promises, rowid, until);
    r->promised++;
    __atomic_add_fetch(&s->busy, 1, __ATOMIC_RELAXED);
    wakes_add(wk, rowid);
  }
}

/* Takes back rowid's promise of r (its slot given back when `give`). */
static int unpromise(res_state *s, resource *r, int64_t rowid, int give) {
  int64_t *until = idmap_del(&r->promises, rowid);
  if (!until)
    return 0;
  free(until);
  r->promised--;
  __atomic_sub_fetch(&s->busy, 1, __ATOMIC_RELAXED);
  if (give && r->concurrency)
    r->taken--;
  return 1;
}

/* ---- across the hosts of a shared store (s->mu held) ---------------------
 *
 * A resource's `concurrency` slots are the store's (journal_slots_pass,
 * PostgreSQL's session advisory locks, which the server gives back the
 * moment a host's connection dies, kill -9 included): an attempt runs on
 * a slot this host holds, so no more than `concurrency` run on all the
 * hosts together.  A claim that finds none held spare and nobody in line
 * takes one of the store at once, on its own thread; one that finds a
 * line, or the store's slots all held by other hosts, lines up, and the
 * scheduler's pass takes slots for the line (asking again every
 * SLOTS_RETRY_MS while others hold them all).  Slots lying spare for
 * SPARE_MS go back to the store on a pass, so that a host whose steps
 * come one after another keeps its slot between them. */

/* r's slots of the store lie spare from now, when some do and none was
 * before: 1 then (a pass gives them back SPARE_MS later). */
static int note_spare(resource *r, int64_t now) {
  if (!r->shared || r->head || r->held <= r->taken || r->spare_since)
    return 0;
  r->spare_since = now;
  return 1;
}

static int short_of_slots(const resource *r) {
  return r->shared && r->held < r->concurrency && r->taken >= r->held;
}

/* The store's answer to a take for r: its slots got, of `epoch`; when the
 * epoch moved on, those held before went with the store's connection. */
static void slots_got(resource *r, uint64_t epoch, const uint32_t *got,
                      size_t n) {
  if (epoch != r->epoch) {
    if (r->held)
      log_warn("resource %s: the store's slots connection was lost; it "
               "takes its slots again",
               r->name);
    r->held = 0;
    r->epoch = epoch;
  }
  if (r->held + n > r->cap_slots) {
    r->cap_slots = r->held + (uint32_t)n + 4;
    r->slots = xrealloc(r->slots, r->cap_slots * sizeof *r->slots);
  }
  if (n)
    memcpy(r->slots + r->held, got, n * sizeof *got);
  r->held += (uint32_t)n;
}

/* One slot of the store taken for a claim now, s->mu let go meanwhile
 * (held again on return): 1 when it got one. */
static int take_one(res_state *s, resource *r) {
  if (r->busy)
    return 0; /* another take or give of r's is on the way */
  r->busy = 1;
  size_t n_mine = r->held;
  uint32_t *mine = xmalloc((n_mine ? n_mine : 1) * sizeof *mine);
  if (n_mine)
    memcpy(mine, r->slots, n_mine * sizeof *mine);
  pthread_mutex_unlock(&s->mu);
  uint32_t got;
  size_t n_got = 0;
  uint64_t epoch = 0;
  int rc = journal_slots_take(engine_journal(s->e), r->base, r->concurrency,
                              mine, n_mine, 1, &got, &n_got, &epoch);
  free(mine);
  pthread_mutex_lock(&s->mu);
  r->busy = 0;
  if (rc == 0)
    slots_got(r, epoch, &got, n_got);
  else
    n_got = 0;
  if (!n_got)
    r->retry_at = engine_now(s->e) + SLOTS_RETRY_MS;
  return n_got > 0;
}

/* What a pass does of r's with the store, outside the lock. */
typedef struct slots_job {
  resource *r;
  uint32_t want, *mine, *give, *got;
  size_t n_mine, n_give;
  uint64_t epoch;
} slots_job;

typedef struct slots_jobs {
  slots_job *v;
  size_t n, cap;
} slots_jobs;

/* r's job for this pass, if any: slots for its line, or its spare ones
 * given back (out of its count now); *next when it has one later. */
static void slots_collect(resource *r, int64_t now, slots_jobs *jobs,
                          int64_t *next) {
  if (!r->shared || r->busy)
    return;
  uint32_t want = 0, give = 0;
  if (r->head && r->held < r->concurrency) {
    if (r->retry_at > now) {
      if (r->retry_at < *next)
        *next = r->retry_at;
      return;
    }
    want = r->concurrency - r->held;
    if (want > r->waiting)
      want = r->waiting;
  } else if (!r->head && r->held > r->taken && r->spare_since) {
    if (now - r->spare_since < SPARE_MS) {
      if (r->spare_since + SPARE_MS < *next)
        *next = r->spare_since + SPARE_MS;
      return;
    }
    give = r->held - r->taken;
  }
  if (!want && !give)
    return;
  if (jobs->n == jobs->cap) {
    jobs->cap = jobs->cap ? 2 * jobs->cap : 4;
    jobs->v = xrealloc(jobs->v, jobs->cap * sizeof *jobs->v);
  }
  slots_job *j = &jobs->v[jobs->n++];
  *j = (slots_job){.r = r, .want = want, .epoch = r->epoch};
  if (want) {
    j->n_mine = r->held;
    j->mine = xmalloc((r->held ? r->held : 1) * sizeof *j->mine);
    if (r->held)
      memcpy(j->mine, r->slots, r->held * sizeof *j->mine);
    j->got = xmalloc(want * sizeof *j->got);
  }
  if (give) {
    r->held -= give;
    j->n_give = give;
    j->give = xmalloc(give * sizeof *j->give);
    memcpy(j->give, r->slots + r->held, give * sizeof *j->give);
    r->spare_since = 0;
  }
  r->busy = 1;
}

/* Every job's takes and gives in one round trip (s->mu not held), then
 * what the store said applied and the lines' heads given their turns. */
static void slots_run(res_state *s, slots_jobs *jobs, int64_t *next,
                      wakes *wk) {
  journal_slots_job *sj = xcalloc(jobs->n, sizeof *sj);
  for (size_t i = 0; i < jobs->n; i++) {
    slots_job *j = &jobs->v[i];
    sj[i] = (journal_slots_job){.base = j->r->base,
                                .limit = j->r->concurrency,
                                .want = j->want,
                                .mine = j->mine,
                                .n_mine = j->n_mine,
                                .give = j->give,
                                .n_give = j->n_give,
                                .give_epoch = j->epoch,
                                .got = j->got};
  }
  uint64_t epoch = 0;
  int rc = journal_slots_pass(engine_journal(s->e), sj, jobs->n, &epoch);
  pthread_mutex_lock(&s->mu);
  int64_t now = engine_now(s->e);
  for (size_t i = 0; i < jobs->n; i++) {
    slots_job *j = &jobs->v[i];
    resource *r = j->r;
    r->busy = 0;
    if (j->want && rc == 0)
      slots_got(r, epoch, j->got, sj[i].n_got);
    pump(s, r, now, wk);
    if (r->head && short_of_slots(r)) { /* others hold them: again soon */
      r->retry_at = now + SLOTS_RETRY_MS;
      if (r->retry_at < *next)
        *next = r->retry_at;
    }
    free(j->mine);
    free(j->give);
    free(j->got);
  }
  pthread_mutex_unlock(&s->mu);
  free(sj);
  free(jobs->v);
  *jobs = (slots_jobs){0};
}

/* ---- a rate across the hosts of a shared store ---------------------------
 *
 * A resource's rate is then the store's (journal_rates_take: a row under
 * its rate_key holding its next start's time, as a flow rate rule's key
 * has one), and no start is taken from this host's own count: a claim
 * lines up, and the scheduler's pass, after the slots', asks the store
 * for as many starts as the line has instances with a slot to start on,
 * every such resource in one round trip, and hands those it got to the
 * line's head in order.  The time the store answered says when to ask
 * again; another host's starts may have moved it on meanwhile, and then
 * the store gives none and says the later time.  A line waiting for a
 * slot asks nothing (the slot's unclaim kicks a pass).  Starts beyond
 * the line (an instance ended meanwhile) are lost: fewer starts, never
 * more.  A store that cannot be reached gives none: the line waits, and
 * asks again in RATES_RETRY_MS. */

/* The instances of r's line that could start now, were the rate to let
 * them: as many as it has free slots for. */
static uint32_t could_start(const resource *r) {
  uint32_t n = r->waiting;
  if (r->concurrency) {
    uint32_t slots = r->shared ? r->held : r->concurrency;
    uint32_t room = slots > r->taken ? slots - r->taken : 0;
    if (room < n)
      n = room;
  }
  return n;
}

/* Whether a slot come free should bring a pass: r's line waits for the
 * store's starts and now has a slot to start on. */
static int rate_pass_due(const resource *r) {
  return r->rate_shared && r->concurrency && r->head && could_start(r);
}

static void lower(int64_t *next, double due) {
  int64_t at = (int64_t)due + ((double)(int64_t)due < due);
  if (at < *next)
    *next = at;
}

/* The store's starts taken for every line whose time has come, in one
 * round trip (s->mu not held), and handed to their heads; *next lowered
 * to when a line asks again. */
static void rates_run(res_state *s, int64_t *next, wakes *wk) {
  resource **asked = NULL;
  journal_rates_job *jobs = NULL;
  size_t n = 0;
  pthread_mutex_lock(&s->mu);
  double now = (double)engine_now(s->e);
  for (size_t i = 0; i < s->n; i++) {
    resource *r = s->v[i];
    if (!r->rate_shared || r->asking || !r->head)
      continue;
    uint32_t want = could_start(r);
    if (!want)
      continue;
    if (now < r->tat - r->tolerance_ms) {
      lower(next, r->tat - r->tolerance_ms);
      continue;
    }
    asked = xrealloc(asked, (n + 1) * sizeof *asked);
    jobs = xrealloc(jobs, (n + 1) * sizeof *jobs);
    asked[n] = r;
    jobs[n++] = (journal_rates_job){.key = r->rate_key,
                                    .interval_ms = r->interval_ms,
                                    .tolerance_ms = r->tolerance_ms,
                                    .at_ms = now,
                                    .want = want};
    r->asking = 1;
  }
  pthread_mutex_unlock(&s->mu);
  if (!n)
    return;
  int rc = journal_rates_take(engine_journal(s->e), now, jobs, n);
  pthread_mutex_lock(&s->mu);
  int64_t after = engine_now(s->e);
  for (size_t i = 0; i < n; i++) {
    resource *r = asked[i];
    r->asking = 0;
    if (rc) {
      lower(next, (double)(after + RATES_RETRY_MS));
      continue;
    }
    r->tat = jobs[i].tat;
    r->granted = jobs[i].got;
    pump(s, r, after, wk);
    r->granted = 0;
    if (r->head && could_start(r))
      lower(next, r->tat - r->tolerance_ms);
  }
  pthread_mutex_unlock(&s->mu);
  free(asked);
  free(jobs);
}

/* ---- the hooks ----------------------------------------------------------- */

static int res_claim(duro_engine *e, void *state, const char *name,
                     int64_t rowid, const char *workflow, const char *key,
                     void **hold, const char **wait_type, int64_t *recheck_ms,
                     const char **error_name, char **message) {
  (void)workflow;
  res_state *s = state;
  int64_t now = engine_now(e);
  wakes wk = {0};
  pthread_mutex_lock(&s->mu);
  resource *r = strmap_get(&s->by_name, name);
  int rc = DURO_STEP_CLAIM_WAIT, kick = 0;
  if (!r) {
    rc = DURO_STEP_CLAIM_FAIL;
  } else {
    pump(s, r, now, &wk); /* a rate's time that came before this pass */
    int go = 0;
    if (unpromise(s, r, rowid, 0)) {
      go = 1; /* its turn, counted when promised */
      wakes_drop(&wk, rowid);
    } else if (!r->head && start_due(r, (double)now) &&
               (slot_free(r) || (short_of_slots(r) && take_one(s, r) &&
                                 !r->head && slot_free(r)))) {
      go = 1; /* nobody waits before it */
      take(r, (double)now);
    }
    if (go) {
      r->running++;
      *hold = r;
      rc = DURO_STEP_CLAIM_GO;
    } else {
      line_up(s, r, rowid);
      /* its time, or the store's slots, come on a pass */
      kick = r->limit != 0 || r->shared;
      pump(s, r, now, &wk); /* a slot take_one got meanwhile */
      if (unpromise(s, r, rowid, 0)) {
        wakes_drop(&wk, rowid);
        r->running++;
        *hold = r;
        rc = DURO_STEP_CLAIM_GO;
      }
    }
  }
  pthread_mutex_unlock(&s->mu);
  wakes_run(e, &wk);
  if (rc == DURO_STEP_CLAIM_FAIL) {
    *error_name = DURO_ERR_RESOURCE_UNKNOWN;
    *message = xasprintf("step \"%s\" names resource \"%s\", which the "
                         "host's config does not declare (resources:)",
                         key, name);
  } else if (rc == DURO_STEP_CLAIM_WAIT) {
    *wait_type = RESOURCE_WAIT_TYPE;
    *recheck_ms = now + RECHECK_MS;
    if (kick)
      engine_kick_scheduler(e); /* the pass says when its turn comes */
  }
  return rc;
}

static void res_unclaim(duro_engine *e, void *state, void *hold) {
  res_state *s = state;
  resource *r = hold;
  wakes wk = {0};
  pthread_mutex_lock(&s->mu);
  r->running--;
  if (r->concurrency)
    r->taken--;
  int64_t now = engine_now(e);
  pump(s, r, now, &wk);
  int kick = note_spare(r, now) || rate_pass_due(r);
  pthread_mutex_unlock(&s->mu);
  wakes_run(e, &wk);
  if (kick)
    engine_kick_scheduler(e);
}

typedef struct lapse_ctx {
  int64_t now, next;
  int64_t *lapsed;
  size_t n;
} lapse_ctx;

static void find_lapsed(void *ctx, int64_t rowid, void *val) {
  lapse_ctx *c = ctx;
  int64_t until = *(int64_t *)val;
  if (until <= c->now) {
    c->lapsed = xrealloc(c->lapsed, (c->n + 1) * sizeof *c->lapsed);
    c->lapsed[c->n++] = rowid;
  } else if (until < c->next) {
    c->next = until;
  }
}

/* The scheduler's pass: promises not come back for lapse (their slots
 * handed on), and the turns a rate's time brings are given (on a shared
 * store, the store's slots taken or given back, then its starts taken);
 * *next_ms when the next comes.  Returns the instances woken. */
static size_t pass(res_state *s, int64_t *next_ms) {
  int64_t now = engine_now(s->e);
  lapse_ctx c = {.now = now, .next = INT64_MAX};
  wakes wk = {0};
  slots_jobs jobs = {0};
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->n; i++) {
    resource *r = s->v[i];
    c.n = 0;
    if (r->promised)
      idmap_each(&r->promises, find_lapsed, &c);
    for (size_t k = 0; k < c.n; k++)
      unpromise(s, r, c.lapsed[k], 1);
    pump(s, r, now, &wk);
    note_spare(r, now); /* a lapsed turn's slot nobody took */
    if (r->head && r->limit && !r->rate_shared && slot_free(r))
      lower(&c.next, r->tat - r->tolerance_ms);
    slots_collect(r, now, &jobs, &c.next);
  }
  pthread_mutex_unlock(&s->mu);
  free(c.lapsed);
  if (jobs.n)
    slots_run(s, &jobs, &c.next, &wk);
  rates_run(s, &c.next, &wk);
  size_t woken = wk.n;
  wakes_run(s->e, &wk);
  *next_ms = c.next;
  return woken;
}

static int res_dispatch(duro_engine *e, void *state, int64_t *next_ms) {
  (void)e;
  pass(state, next_ms);
  return 0;
}

size_t duro_resources_dispatch(duro_engine *e) {
  res_state *s = duro_engine_driver_state(e, &resources_driver);
  int64_t next;
  return s ? pass(s, &next) : 0;
}

/* An instance that ends or pauses leaves every line, and gives back the
 * turn it was promised. */
static void res_instance_changed(duro_engine *e, void *state,
                                 struct journal_batch *b,
                                 const journal_instance *row,
                                 const duro_workflow_limits *limits,
                                 duro_status from_status,
                                 int64_t from_started_ms, int64_t now) {
  (void)b, (void)limits, (void)from_status, (void)from_started_ms;
  res_state *s = state;
  if (!__atomic_load_n(&s->busy, __ATOMIC_RELAXED) ||
      !(duro_status_ended(row->status) || row->status == DURO_STATUS_PAUSED))
    return;
  wakes wk = {0};
  int kick = 0;
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->n; i++) {
    resource *r = s->v[i];
    waiter *w = idmap_get(&r->waiters, row->rowid);
    if (w)
      leave_line(s, r, w);
    if (unpromise(s, r, row->rowid, 1)) {
      pump(s, r, now, &wk);
      kick |= note_spare(r, now) || rate_pass_due(r);
    }
  }
  pthread_mutex_unlock(&s->mu);
  wakes_run(e, &wk);
  if (kick)
    engine_kick_scheduler(e);
}

static void wake_waiting(void *ctx, int64_t rowid, const char *workflow) {
  (void)workflow;
  engine_instance_wake(ctx, rowid);
}

/* Nothing is held after a restart: the instances that waited line up
 * again as they come. */
static void res_start(duro_engine *e, void *state) {
  res_state *s = state;
  int shared = journal_slots_shared(engine_journal(e));
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->n; i++) {
    s->v[i]->shared = shared && s->v[i]->concurrency;
    s->v[i]->rate_shared = shared && s->v[i]->limit;
  }
  pthread_mutex_unlock(&s->mu);
  duro_engine_waiting_on(e, RESOURCE_WAIT_TYPE, wake_waiting, e);
}

int duro_resource_stat_read(duro_engine *e, const char *name,
                            duro_resource_stat *out) {
  res_state *s = duro_engine_driver_state(e, &resources_driver);
  if (!s)
    return DURO_E_NOT_FOUND;
  pthread_mutex_lock(&s->mu);
  resource *r = strmap_get(&s->by_name, name);
  if (r)
    *out = (duro_resource_stat){
        .running = r->running, .waiting = r->waiting, .promised = r->promised};
  pthread_mutex_unlock(&s->mu);
  return r ? 0 : DURO_E_NOT_FOUND;
}

/* "2 of 2 running", "50 a 1000 ms", or both, into buf. */
static const char *bounds(const resource *r, char *buf, size_t len) {
  int n = 0;
  if (r->concurrency)
    n = snprintf(buf, len, "%u of %u running", r->running, r->concurrency);
  if (r->limit && n >= 0 && (size_t)n < len)
    snprintf(buf + n, len - (size_t)n, "%srate %u a %" PRId64 " ms",
             n ? ", " : "", r->limit, r->period_ms);
  return buf;
}

char *duro_resource_why(duro_engine *e, const char *workflow, const char *id) {
  res_state *s = duro_engine_driver_state(e, &resources_driver);
  if (!s)
    return NULL;
  journal_instance in = {0};
  if (journal_instance_get(engine_journal(e), workflow, id, &in) != 0)
    return NULL;
  int64_t rowid = in.rowid;
  journal_instance_clear(&in);
  char *why = NULL, b[128];
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->n && !why; i++) {
    resource *r = s->v[i];
    if (idmap_get(&r->waiters, rowid))
      why = xasprintf("resource %s (%s; %u waiting)", r->name,
                      bounds(r, b, sizeof b), r->waiting);
    else if (idmap_get(&r->promises, rowid))
      why = xasprintf("resource %s (%s; its turn came: it runs next)", r->name,
                      bounds(r, b, sizeof b));
  }
  pthread_mutex_unlock(&s->mu);
  return why;
}

static void res_metrics(duro_engine *e, void *state, FILE *out) {
  (void)e;
  res_state *s = state;
  pthread_mutex_lock(&s->mu);
  if (s->n)
    fprintf(out, "# HELP duro_resource_running Attempts of the steps naming "
                 "a resource inside their callbacks\n"
                 "# TYPE duro_resource_running gauge\n"
                 "# HELP duro_resource_waiting Instances waiting for a "
                 "resource's turn\n"
                 "# TYPE duro_resource_waiting gauge\n");
  for (int series = 0; series < 2; series++)
    for (size_t i = 0; i < s->n; i++) {
      const resource *r = s->v[i];
      fprintf(out, "%s{resource=\"",
              series ? "duro_resource_waiting" : "duro_resource_running");
      metrics_label_put(out, r->name);
      fprintf(out, "\"} %u\n", series ? r->waiting : r->running);
    }
  pthread_mutex_unlock(&s->mu);
}

const duro_driver resources_driver = {
    .name = "resources",
    .create = res_create,
    .dispatch = res_dispatch,
    .instance_changed = res_instance_changed,
    .start = res_start,
    .step_claim = res_claim,
    .step_unclaim = res_unclaim,
    .metrics = res_metrics,
    .free = res_free,
};
