/* trigger.c — cron triggers in the engine (trigger.h).
 *
 * The registry (guarded by its mutex) holds each trigger's schedule and
 * policies and, in memory only, the next tick to look at and how many of
 * its handler ticks run.  Everything a restart must know is in the
 * journal: when a trigger was first seen (so a new trigger misses
 * nothing from before it existed), and one row per tick that came.
 *
 * The first dispatch after start reconciles each trigger with its rows:
 * ticks between its newest row and now that are more than LATE_MS old
 * passed while no host ran, and are recorded `missed` (the newest
 * MAX_MISSED_ROWS one by one, the rest counted), then fired late as
 * catch_up says, without the overlap check (a handler's late ticks as one
 * burst on one thread); a tick still `fired` belongs to a handler the
 * stop cut short and becomes `failed`.  From then on a tick fires when it
 * comes, claimed before it runs.
 *
 * A reload changes the triggers while the engine runs (duro_cron_replace):
 * the set of triggers is an array of pointers published whole under the
 * mutex, never changed in place.  The dispatch, a fire by hand and the
 * listing each take a reference on the set they walk, and a fire holds
 * one on its trigger, so a removed trigger and an old array are freed by
 * whoever lets go of them last.  A trigger whose defining fields stay
 * keeps its object (its next tick, its handler ticks running); its
 * policies (catch_up, max_catch_up, overlap) are atomics a reload stores
 * and the dispatch loads. */
#include "trigger.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "error.h"
#include "expr.h"
#include "log.h"
#include "tz.h"
#include "util.h"

#define LATE_MS 60000         /* a tick older than this at start: missed */
#define MAX_MISSED_ROWS 10000 /* missed ticks recorded one by one */
#define MISSED_CHUNK 1000     /* missed rows per commit */
#define DEFAULT_MAX_CATCH_UP 100
#define DEFAULT_ID "cron-{datetime}"
#define TICK_RETENTION_MS (30LL * 24 * 3600 * 1000) /* rows; counts stay */

/* ---- names ----------------------------------------------------------------
 */

/* A tick's state as the journal stores it (and GET /crons shows it). */
static const char *const TICK_STATE[] = {
    [DURO_CRON_TICK_FIRED] = "fired",
    [DURO_CRON_TICK_COMPLETE] = "complete",
    [DURO_CRON_TICK_FAILED] = "failed",
    [DURO_CRON_TICK_MISSED] = "missed",
    [DURO_CRON_TICK_SKIPPED] = "skipped",
};
#define N_TICK_STATES (sizeof TICK_STATE / sizeof *TICK_STATE)

const char *duro_cron_tick_state_name(duro_cron_tick_state s) {
  return (size_t)s < N_TICK_STATES ? TICK_STATE[s] : "failed";
}

int duro_cron_tick_state_parse(const char *name, duro_cron_tick_state *out) {
  for (size_t i = 0; name && i < N_TICK_STATES; i++)
    if (!strcmp(TICK_STATE[i], name)) {
      *out = (duro_cron_tick_state)i;
      return 0;
    }
  return -1;
}

const char *duro_cron_catch_up_name(int catch_up) {
  static const char *const name[] = {
      [DURO_CRON_CATCH_UP_LATEST] = "latest",
      [DURO_CRON_CATCH_UP_NONE] = "none",
      [DURO_CRON_CATCH_UP_ALL] = "all",
  };
  return catch_up >= 0 && catch_up < 3 ? name[catch_up] : name[0];
}

const char *duro_cron_fire_state_name(duro_cron_fire_state s) {
  static const char *const name[] = {
      [DURO_CRON_FIRE_COMPLETE] = "complete",
      [DURO_CRON_FIRE_FAILED] = "failed",
      [DURO_CRON_FIRE_EXISTS] = "exists",
  };
  return (size_t)s < sizeof name / sizeof *name ? name[s] : "failed";
}

typedef struct cron_trigger {
  char *key; /* the journal's name for it: every field that defines it */
  char *plugin, *schedule, *timezone, *workflow, *id;
  cron_expr expr;
  int catch_up;
  uint32_t max_catch_up;
  int overlap_allow;
  /* memory only */
  uint32_t refs;       /* the sets holding it and its fires (mu) */
  int recovered;       /* the first dispatch reconciled it */
  int64_t next_ms;     /* the next tick to fire (CRON_NEVER: none) */
  uint32_t running;    /* its handler ticks in flight */
  uint32_t catching;   /* of them, catch-up bursts (not an overlap) */
  int after_outage;    /* ticks were missed: the next on-time one fires */
  char *last_instance; /* no-code: the newest on-time tick's instance */
} cron_trigger;

/* The triggers, in config order: published whole, never changed. */
typedef struct cron_set {
  cron_trigger **v;
  size_t n;
  uint32_t refs; /* the registry's, and each walk's (mu) */
} cron_set;

struct cron_registry {
  pthread_mutex_t mu;
  pthread_cond_t idle; /* a handler thread finished */
  cron_set *set;       /* NULL: no trigger yet */
  struct handler {
    char *plugin;
    duro_scheduled_fn fn;
    uint32_t running; /* ticks inside fn */
  } * handlers;
  size_t n_handlers;
  uint32_t threads; /* handler threads not yet finished */
};

/* What the engine keeps for the triggers (their driver's state): the
 * registry, created on the first registration. */
typedef struct cron_state {
  pthread_mutex_t mu; /* guards the creation of r */
  struct cron_registry *r;
} cron_state;

static struct cron_registry *registry(duro_engine *e) {
  cron_state *s = duro_engine_driver_state(e, &cron_driver);
  pthread_mutex_lock(&s->mu);
  if (!s->r) {
    s->r = xcalloc(1, sizeof *s->r);
    pthread_mutex_init(&s->r->mu, NULL);
    engine_cond_init(&s->r->idle); /* stop's monotonic grace */
  }
  struct cron_registry *r = s->r;
  pthread_mutex_unlock(&s->mu);
  return r;
}

/* The registry, NULL before the first registration. */
static struct cron_registry *registry_if_any(duro_engine *e) {
  cron_state *s = duro_engine_driver_state(e, &cron_driver);
  pthread_mutex_lock(&s->mu);
  struct cron_registry *r = s->r;
  pthread_mutex_unlock(&s->mu);
  return r;
}

static void trigger_clear(cron_trigger *t) {
  free(t->key);
  free(t->plugin);
  free(t->schedule);
  free(t->timezone);
  free(t->workflow);
  free(t->id);
  free(t->last_instance);
}

/* r->mu held. */
static void trigger_drop_locked(cron_trigger *t) {
  if (--t->refs == 0) {
    trigger_clear(t);
    free(t);
  }
}

/* The set to walk, referenced (NULL: none); set_drop lets go of it. */
static cron_set *set_take(struct cron_registry *r) {
  pthread_mutex_lock(&r->mu);
  cron_set *s = r->set;
  if (s)
    s->refs++;
  pthread_mutex_unlock(&r->mu);
  return s;
}

static void set_drop_locked(cron_set *s) {
  if (!s || --s->refs > 0)
    return;
  for (size_t i = 0; i < s->n; i++)
    trigger_drop_locked(s->v[i]);
  free(s->v);
  free(s);
}

static void set_drop(struct cron_registry *r, cron_set *s) {
  pthread_mutex_lock(&r->mu);
  set_drop_locked(s);
  pthread_mutex_unlock(&r->mu);
}

/* Makes `v` (n triggers, each referenced for the new set) the set. */
static void set_publish(struct cron_registry *r, cron_trigger **v, size_t n) {
  cron_set *s = xcalloc(1, sizeof *s);
  *s = (cron_set){v, n, 1};
  pthread_mutex_lock(&r->mu);
  cron_set *old = r->set;
  r->set = s;
  set_drop_locked(old);
  pthread_mutex_unlock(&r->mu);
}

uint32_t cron_registry_wait(struct cron_registry *r,
                            const struct timespec *until) {
  if (!r)
    return 0;
  pthread_mutex_lock(&r->mu);
  while (r->threads) {
    if (!until)
      pthread_cond_wait(&r->idle, &r->mu);
    else if (pthread_cond_timedwait(&r->idle, &r->mu, until) != 0)
      break;
  }
  uint32_t left = r->threads;
  pthread_mutex_unlock(&r->mu);
  return left;
}

void cron_registry_free(struct cron_registry *r) {
  if (!r)
    return;
  cron_registry_wait(r, NULL);
  pthread_mutex_lock(&r->mu);
  set_drop_locked(r->set);
  pthread_mutex_unlock(&r->mu);
  for (size_t i = 0; i < r->n_handlers; i++)
    free(r->handlers[i].plugin);
  free(r->handlers);
  pthread_cond_destroy(&r->idle);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

/* ---- instance ids from ticks ----------------------------------------------
 */

/* The tick's wall-clock fields in the trigger's zone. */
static void local_tm(int64_t tick_ms, const char *tz, struct tm *out) {
  time_t t = (time_t)(tick_ms / 1000);
  cron_zone *z = tz ? cron_tz_open(tz) : NULL;
  if (z) {
    t += (time_t)cron_tz_offset(z, (int64_t)t);
    cron_tz_close(z);
  }
  gmtime_r(&t, out);
}

int cron_expand_id(const char *tmpl, int64_t tick_ms, const char *tz, char *out,
                   size_t len) {
  struct tm tm;
  local_tm(tick_ms, tz, &tm);
  size_t n = 0;
  for (const char *p = tmpl; *p; p++) {
    char piece[32];
    const char *add = piece;
    if (*p != '{') {
      piece[0] = *p;
      piece[1] = '\0';
    } else {
      const char *end = strchr(p, '}');
      if (!end)
        return -1;
      size_t k = (size_t)(end - p - 1);
      if (k == 4 && !strncmp(p + 1, "date", 4))
        strftime(piece, sizeof piece, "%Y-%m-%d", &tm);
      else if (k == 4 && !strncmp(p + 1, "time", 4))
        strftime(piece, sizeof piece, "%H%M", &tm);
      else if (k == 8 && !strncmp(p + 1, "datetime", 8))
        strftime(piece, sizeof piece, "%Y-%m-%dT%H:%M", &tm);
      else if (k == 2 && !strncmp(p + 1, "ts", 2))
        snprintf(piece, sizeof piece, "%lld", (long long)tick_ms);
      else
        return -1;
      p = end;
    }
    size_t m = strlen(add);
    if (n + m >= len)
      return -1;
    memcpy(out + n, add, m);
    n += m;
  }
  out[n] = '\0';
  return duro_instance_id_valid(out) ? 0 : -1;
}

/* ---- registration ---------------------------------------------------------
 */

/* The trigger `spec` describes (strings copied, one reference), or NULL
 * with the reason in err. */
static cron_trigger *trigger_new(const duro_cron_spec *spec, char *err,
                                 size_t errlen) {
  cron_expr expr;
  cron_error ce;
  char id[128];
  if (!spec || !spec->plugin || !spec->schedule) {
    snprintf(err, errlen, "a cron trigger needs a plugin and a schedule");
    return NULL;
  }
  if (cron_parse(spec->schedule, &expr, &ce) != 0) {
    snprintf(err, errlen, "invalid cron expression \"%s\": %s", spec->schedule,
             ce.msg);
    return NULL;
  }
  if (!cron_ever_fires(&expr)) {
    snprintf(err, errlen, "cron \"%s\" never fires: no date matches it",
             spec->schedule);
    return NULL;
  }
  if (!cron_tz_valid(spec->timezone, err, errlen))
    return NULL;
  const char *tmpl = spec->id ? spec->id : DEFAULT_ID;
  if (spec->workflow && cron_expand_id(tmpl, 0, NULL, id, sizeof id) != 0) {
    snprintf(err, errlen,
             "cron id \"%s\" does not make a valid instance id (placeholders "
             "{date} {time} {datetime} {ts}; 1-100 characters of A-Z a-z "
             "0-9 _ . : -)",
             tmpl);
    return NULL;
  }
  cron_trigger *t = xcalloc(1, sizeof *t);
  *t = (cron_trigger){
      .plugin = xstrdup(spec->plugin),
      .schedule = xstrdup(spec->schedule),
      .timezone = spec->timezone ? xstrdup(spec->timezone) : NULL,
      .workflow = spec->workflow ? xstrdup(spec->workflow) : NULL,
      .id = spec->workflow ? xstrdup(tmpl) : NULL,
      .expr = expr,
      .catch_up = spec->catch_up,
      .max_catch_up =
          spec->max_catch_up ? spec->max_catch_up : DEFAULT_MAX_CATCH_UP,
      .overlap_allow = spec->overlap_allow,
      .refs = 1,
      .next_ms = CRON_NEVER};
  /* What makes it this trigger: change any of it and it is a new one. */
  t->key = xasprintf("%s|%s|%s|%s|%s", t->plugin, t->schedule,
                     t->timezone ? t->timezone : "UTC",
                     t->workflow ? t->workflow : "", t->id ? t->id : "");
  return t;
}

int duro_cron_register(duro_engine *e, const duro_cron_spec *spec, char *err,
                       size_t errlen) {
  cron_trigger *t = trigger_new(spec, err, errlen);
  if (!t)
    return DURO_E_INVALID_ARGUMENT;
  struct cron_registry *r = registry(e);
  pthread_mutex_lock(&r->mu);
  size_t n = r->set ? r->set->n : 0;
  cron_trigger **v = xcalloc(n + 1, sizeof *v);
  for (size_t i = 0; i < n; i++) {
    v[i] = r->set->v[i];
    v[i]->refs++;
  }
  v[n] = t;
  pthread_mutex_unlock(&r->mu);
  set_publish(r, v, n + 1);
  return 0;
}

/* The trigger of the set with `key`, or NULL (r->mu held). */
static cron_trigger *find_key_locked(struct cron_registry *r, const char *key) {
  for (size_t i = 0; r->set && i < r->set->n; i++)
    if (!strcmp(r->set->v[i]->key, key))
      return r->set->v[i];
  return NULL;
}

int duro_cron_replace(duro_engine *e, const duro_cron_spec *specs, size_t n,
                      char *err, size_t errlen) {
  cron_trigger **v = xcalloc(n ? n : 1, sizeof *v);
  for (size_t i = 0; i < n; i++)
    if (!(v[i] = trigger_new(&specs[i], err, errlen))) {
      while (i-- > 0) {
        trigger_clear(v[i]);
        free(v[i]);
      }
      free(v);
      return DURO_E_INVALID_ARGUMENT;
    }
  struct cron_registry *r = registry(e);
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < n; i++) {
    cron_trigger *old = find_key_locked(r, v[i]->key);
    if (!old)
      continue;
    /* The same trigger: it keeps its ticks; only its policies change. */
    __atomic_store_n(&old->catch_up, v[i]->catch_up, __ATOMIC_RELAXED);
    __atomic_store_n(&old->max_catch_up, v[i]->max_catch_up, __ATOMIC_RELAXED);
    __atomic_store_n(&old->overlap_allow, v[i]->overlap_allow,
                     __ATOMIC_RELAXED);
    trigger_clear(v[i]);
    free(v[i]);
    v[i] = old;
    old->refs++;
  }
  pthread_mutex_unlock(&r->mu);
  set_publish(r, v, n);
  engine_kick_scheduler(e); /* a new trigger's first tick may come sooner */
  return 0;
}

void duro_cron_set_handler(duro_engine *e, const char *plugin,
                           duro_scheduled_fn fn) {
  struct cron_registry *r = registry(e);
  pthread_mutex_lock(&r->mu);
  struct handler *h = NULL;
  for (size_t i = 0; i < r->n_handlers && !h; i++)
    if (!strcmp(r->handlers[i].plugin, plugin))
      h = &r->handlers[i];
  if (!h) {
    r->handlers =
        xrealloc(r->handlers, (r->n_handlers + 1) * sizeof *r->handlers);
    h = &r->handlers[r->n_handlers++];
    *h = (struct handler){xstrdup(plugin), NULL, 0};
  }
  h->fn = fn;
  pthread_mutex_unlock(&r->mu);
}

/* The plugin's handler, counted as running (r->mu held). */
static duro_scheduled_fn handler_take_locked(struct cron_registry *r,
                                             const char *plugin) {
  for (size_t i = 0; i < r->n_handlers; i++)
    if (!strcmp(r->handlers[i].plugin, plugin) && r->handlers[i].fn) {
      r->handlers[i].running++;
      return r->handlers[i].fn;
    }
  return NULL;
}

static void handler_put(struct cron_registry *r, duro_scheduled_fn fn) {
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < r->n_handlers; i++)
    if (r->handlers[i].fn == fn && r->handlers[i].running) {
      r->handlers[i].running--;
      break;
    }
  pthread_mutex_unlock(&r->mu);
}

int duro_cron_handler_running(duro_engine *e, duro_scheduled_fn fn) {
  struct cron_registry *r = registry_if_any(e);
  int busy = 0;
  if (!r || !fn)
    return 0;
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < r->n_handlers; i++)
    busy |= r->handlers[i].fn == fn && r->handlers[i].running > 0;
  pthread_mutex_unlock(&r->mu);
  return busy;
}

/* ---- tick rows ------------------------------------------------------------
 */

/* Claims the tick with `state`; 1 when this call claimed it, 0 when it
 * was claimed before, < 0 on a storage error. */
/* Adds to b the claim of trigger `key`'s tick in `state`, fired at
 * `fired` (JOURNAL_NONE: not fired); the row is inserted only if the
 * tick has none (out_rowid 1). */
static journal_op *tick_op(journal_batch *b, const char *key, int64_t tick,
                           duro_cron_tick_state state, int64_t fired) {
  journal_op *op = journal_batch_add(b, JOP_CRON_TICK);
  op->queue = key;
  op->visible_ms = tick;
  op->body = duro_cron_tick_state_name(state);
  op->ts_ms = fired;
  return op;
}

static int tick_put(duro_engine *e, const cron_trigger *t, int64_t tick,
                    duro_cron_tick_state state, int64_t fired,
                    const char *instance, const char *error) {
  journal_batch b = {0};
  journal_op *op = tick_op(&b, t->key, tick, state, fired);
  op->lease = instance;
  op->error = error;
  int rc = journal_commit(engine_journal(e), &b);
  int claimed = rc == 0 ? (int)b.ops[0].out_rowid : rc;
  journal_batch_free(&b);
  return claimed;
}

static void tick_set(duro_engine *e, const char *key, int64_t tick,
                     duro_cron_tick_state state, const char *error) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_CRON_TICK_SET);
  op->queue = key;
  op->visible_ms = tick;
  op->body = duro_cron_tick_state_name(state);
  op->error = error;
  if (journal_commit(engine_journal(e), &b) != 0)
    log_error("cron: cannot record a tick: %s",
              journal_errmsg(engine_journal(e)));
  journal_batch_free(&b);
}

static char *error_text(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static char *error_text(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = xvasprintf(fmt, ap);
  va_end(ap);
  json_t *s = json_string(msg);
  char *text = json_dumps(s, JSON_ENCODE_ANY);
  json_decref(s);
  free(msg);
  return text;
}

/* ---- firing ---------------------------------------------------------------
 */

/* A copy of what a fire needs, so the registry is not held meanwhile. */
typedef struct fire {
  duro_engine *e;
  cron_trigger *t; /* referenced: its counters are settled at the end */
  char *key, *plugin, *schedule, *timezone, *workflow, *id;
  int64_t tick;
  duro_scheduled_fn fn;
  ledger_slot *slot;
  /* A catch-up burst: these claimed ticks, oldest first, one after the
   * other on one thread (NULL: the one tick `tick`). */
  int64_t *late;
  size_t n_late;
  /* A fire by hand (duro_cron_fire_now): no tick row; its caller waits
   * on `by_hand` for the handler's result. */
  struct fire_wait *by_hand;
} fire;

/* Where a fire by hand's caller waits for the handler thread. */
typedef struct fire_wait {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, rc;
} fire_wait;

static void fire_free(fire *f) {
  free(f->late);
  free(f->key);
  free(f->plugin);
  free(f->schedule);
  free(f->timezone);
  free(f->workflow);
  free(f->id);
  free(f);
}

static fire *fire_of(duro_engine *e, cron_trigger *t, int64_t tick) {
  fire *f = xcalloc(1, sizeof *f);
  struct cron_registry *r = registry_if_any(e);
  pthread_mutex_lock(&r->mu);
  t->refs++;
  pthread_mutex_unlock(&r->mu);
  *f = (fire){e,
              t,
              xstrdup(t->key),
              xstrdup(t->plugin),
              xstrdup(t->schedule),
              t->timezone ? xstrdup(t->timezone) : NULL,
              t->workflow ? xstrdup(t->workflow) : NULL,
              t->id ? xstrdup(t->id) : NULL,
              tick,
              NULL,
              NULL,
              NULL,
              0,
              NULL};
  return f;
}

/* Runs the handler for tick f->tick; the caller claimed the tick (or it
 * is a fire by hand: no row) and counted fn running. */
static int run_handler(fire *f) {
  duro_scheduled_event ev = {.size = sizeof ev,
                             .cron = f->schedule,
                             .scheduled_ms = f->tick,
                             .timezone = f->timezone};
  duro_env env = {f->e};
  int rc = f->fn(&ev, &env);
  if (!f->by_hand) {
    char *err = rc ? error_text("the scheduled handler returned %d", rc) : NULL;
    tick_set(f->e, f->key, f->tick,
             rc ? DURO_CRON_TICK_FAILED : DURO_CRON_TICK_COMPLETE, err);
    free(err);
  }
  return rc;
}

/* The trigger's tick counters, after a handler tick (or a catch-up
 * burst: `late`) ended; the fire lets go of it (a reload may have removed
 * it meanwhile). */
static void trigger_done(struct cron_registry *r, cron_trigger *t, int late) {
  pthread_mutex_lock(&r->mu);
  if (t->running)
    t->running--;
  if (late && t->catching)
    t->catching--;
  trigger_drop_locked(t);
  pthread_mutex_unlock(&r->mu);
}

/* A catch-up burst: each claimed tick in turn, oldest first.  A stop
 * ends it; the ticks it did not reach are failed, saying so, rather than
 * left `fired` for the next start to call cut short. */
static void run_burst(fire *f) {
  size_t i = 0;
  for (; i < f->n_late && !engine_stopping(f->e); i++) {
    f->tick = f->late[i];
    run_handler(f);
  }
  for (; i < f->n_late; i++)
    tick_set(f->e, f->key, f->late[i], DURO_CRON_TICK_FAILED,
             "\"the host stopped before this late tick ran\"");
}

static void run_fire(fire *f) {
  if (f->late)
    run_burst(f);
  else if (f->by_hand)
    f->by_hand->rc = run_handler(f); /* read once `done` is set */
  else
    run_handler(f);
}

/* After f ran: its handler and its tick no longer count running, f is
 * freed, and a fire by hand's caller is told (last: it may return as
 * soon as it is). */
static void fire_finish(fire *f) {
  struct cron_registry *r = registry_if_any(f->e);
  fire_wait *w = f->by_hand;
  handler_put(r, f->fn);
  trigger_done(r, f->t, f->late != NULL);
  fire_free(f);
  if (w) {
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
  }
}

static void *handler_thread(void *arg) {
  fire *f = arg;
  duro_engine *e = f->e;
  struct cron_registry *r = registry_if_any(e);
  ledger_thread_altstack();
  ledger_thread_bind(engine_ledger(e), f->slot);
  run_fire(f);
  ledger_release(engine_ledger(e), f->slot);
  fire_finish(f);
  pthread_mutex_lock(&r->mu);
  r->threads--;
  pthread_cond_broadcast(&r->idle);
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

/* The crash ledger says which handler runs, so a crash in it is named in
 * the log (its tick is found `fired` at the next start: failed). */
static ledger_slot *handler_slot(duro_engine *e, const fire *f) {
  ledger_slot *sl = engine_ledger(e) && engine_workers(e)
                        ? ledger_claim(engine_ledger(e), LEDGER_IDLE)
                        : NULL;
  if (!sl)
    return NULL;
  ledger_copy(sl->workflow, sizeof sl->workflow, f->schedule);
  ledger_copy(sl->plugin, sizeof sl->plugin, f->plugin);
  ledger_copy(sl->key, sizeof sl->key, f->key);
  sl->started_ms = f->tick;
  ledger_set_state(sl, LEDGER_CRON);
  return sl;
}

/* The plugin's handler, counted running; NULL (and every tick of
 * `ticks` failed, saying why) when the plugin has none. */
static duro_scheduled_fn handler_or_fail(duro_engine *e, const cron_trigger *t,
                                         const int64_t *ticks, size_t n,
                                         int64_t now) {
  struct cron_registry *r = registry_if_any(e);
  pthread_mutex_lock(&r->mu);
  duro_scheduled_fn fn = handler_take_locked(r, t->plugin);
  pthread_mutex_unlock(&r->mu);
  if (fn)
    return fn;
  char *err = error_text("plugin \"%s\" has no scheduled handler (a cron "
                         "given as a string needs one)",
                         t->plugin);
  for (size_t i = 0; i < n; i++)
    tick_put(e, t, ticks[i], DURO_CRON_TICK_FAILED, now, NULL, err);
  log_warn("cron %s (plugin %s): %s", t->schedule, t->plugin, err);
  free(err);
  return NULL;
}

/* Runs f (its handler counted running, its ticks claimed) on a thread of
 * its own, or inline without workers; `late`: a catch-up burst. */
static void start_fire(duro_engine *e, cron_trigger *t, fire *f) {
  struct cron_registry *r = registry_if_any(e);
  int late = f->late != NULL;
  pthread_mutex_lock(&r->mu);
  t->running++;
  t->catching += late;
  pthread_mutex_unlock(&r->mu);
  if (engine_workers(e) == 0) {
    run_fire(f);
    fire_finish(f);
    return;
  }
  f->slot = handler_slot(e, f);
  pthread_mutex_lock(&r->mu);
  r->threads++;
  pthread_mutex_unlock(&r->mu);
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&th, &attr, handler_thread, f) != 0)
    handler_thread(f); /* no thread: this one runs it */
  pthread_attr_destroy(&attr);
}

/* Handler form: claims the tick, then runs the handler (start_fire). */
static void fire_handler(duro_engine *e, cron_trigger *t, int64_t tick,
                         int64_t now) {
  duro_scheduled_fn fn = handler_or_fail(e, t, &tick, 1, now);
  if (!fn)
    return;
  if (tick_put(e, t, tick, DURO_CRON_TICK_FIRED, now, NULL, NULL) != 1) {
    handler_put(registry_if_any(e),
                fn); /* claimed before, or not recorded: no fire */
    return;
  }
  fire *f = fire_of(e, t, tick);
  f->fn = fn;
  start_fire(e, t, f);
}

/* Handler form, catch-up: claims the late ticks (MISSED_CHUNK a commit)
 * and runs those this host claimed as one burst, oldest first, on one
 * thread: each its own tick, none an overlap of the one before.  Returns
 * how many it claimed. */
static size_t fire_handler_late(duro_engine *e, cron_trigger *t,
                                const int64_t *ticks, size_t n, int64_t now) {
  duro_scheduled_fn fn = n ? handler_or_fail(e, t, ticks, n, now) : NULL;
  if (!fn)
    return 0;
  int64_t *claimed = xcalloc(n, sizeof *claimed);
  size_t k = 0;
  for (size_t i = 0; i < n; i += MISSED_CHUNK) {
    journal_batch b = {0};
    for (size_t j = i; j < n && j < i + MISSED_CHUNK; j++)
      tick_op(&b, t->key, ticks[j], DURO_CRON_TICK_FIRED, now);
    if (journal_commit(engine_journal(e), &b) != 0)
      log_error("cron: cannot claim late ticks: %s",
                journal_errmsg(engine_journal(e)));
    else
      for (size_t j = 0; j < b.n; j++)
        if (b.ops[j].out_rowid == 1)
          claimed[k++] = b.ops[j].visible_ms;
    journal_batch_free(&b);
  }
  if (!k) {
    free(claimed);
    handler_put(registry_if_any(e), fn);
    return 0;
  }
  fire *f = fire_of(e, t, claimed[0]);
  f->fn = fn;
  f->late = claimed;
  f->n_late = k;
  start_fire(e, t, f);
  return k;
}

/* No-code form: the instance and the tick row, one commit.  An instance
 * that exists already (its id came from an earlier tick, or from a fire
 * outside the schedule) makes the tick complete all the same; *created
 * (may be NULL) says whether this call made it.  Returns 1 when it
 * committed (and claimed the tick, with a `key`), 0 when the tick was
 * claimed before, -1 on failure.  An instance fired `late` by a catch-up
 * is not the one overlap: skip looks at. */
static int fire_workflow(duro_engine *e, cron_trigger *t, int64_t tick,
                         int64_t now, const char *key, int late, int *created) {
  char id[128];
  const wf_reg *wf = engine_find_workflow(e, t->workflow);
  if (cron_expand_id(t->id, tick, t->timezone, id, sizeof id) != 0 || !wf) {
    char *err = wf ? error_text("id \"%s\" makes no valid instance id", t->id)
                   : error_text("workflow \"%s\" is not loaded", t->workflow);
    if (key)
      tick_put(e, t, tick, DURO_CRON_TICK_FAILED, now, NULL, err);
    log_warn("cron %s (plugin %s): %s", t->schedule, t->plugin, err);
    free(err);
    return -1;
  }
  char *params = xasprintf("{\"cron\":\"%s\",\"scheduled_ms\":%lld}",
                           t->schedule, (long long)tick);
  duro_create_req req = {.params = params, .retention_ms = -1};
  journal_instance row = {0};
  journal_batch b = {0};
  engine_instance_insert_op(wf, id, &req, now, &row, &b);
  if (key)
    tick_op(&b, key, tick, DURO_CRON_TICK_COMPLETE, now)->lease = id;
  int rc = journal_commit(engine_journal(e), &b);
  int claimed = rc == 0 && (!key || b.ops[b.n - 1].out_rowid == 1);
  if (rc != 0)
    log_error("cron %s (plugin %s): creating %s/%s: %s", t->schedule, t->plugin,
              t->workflow, id, journal_errmsg(engine_journal(e)));
  else if (b.ops[0].rc == 0)
    engine_instance_created(e, b.ops[0].out_rowid);
  if (created)
    *created = rc == 0 && b.ops[0].rc == 0;
  journal_batch_free(&b);
  free(params);
  struct cron_registry *r = registry_if_any(e);
  pthread_mutex_lock(&r->mu);
  if (rc == 0 && !late) {
    free(t->last_instance);
    t->last_instance = xstrdup(id);
  }
  pthread_mutex_unlock(&r->mu);
  return rc ? -1 : claimed;
}

/* Whether the previous tick still runs (its handler, or its instance). */
static int still_running(duro_engine *e, const cron_trigger *t) {
  struct cron_registry *r = registry_if_any(e);
  pthread_mutex_lock(&r->mu);
  int running = t->running > t->catching;
  char *last = t->last_instance ? xstrdup(t->last_instance) : NULL;
  pthread_mutex_unlock(&r->mu);
  if (!t->workflow || !last) {
    free(last);
    return !t->workflow && running;
  }
  journal_instance in = {0};
  int busy =
      journal_instance_get(engine_journal(e), t->workflow, last, &in) == 0 &&
      !duro_status_ended(in.status);
  journal_instance_clear(&in);
  free(last);
  return busy;
}

/* An on-time tick.  The first after an outage fires whatever ran before
 * it: what ran then is an outage old (an instance whose sleep ended
 * meanwhile, say, has not been resumed yet), not an overlap. */
static void fire_tick(duro_engine *e, cron_trigger *t, int64_t tick,
                      int64_t now) {
  int after_outage = t->after_outage;
  t->after_outage = 0;
  if (!__atomic_load_n(&t->overlap_allow, __ATOMIC_RELAXED) && !after_outage &&
      still_running(e, t)) {
    char *err = error_text("overlap: skip, and the previous tick's %s was "
                           "still running",
                           t->workflow ? "instance" : "handler");
    tick_put(e, t, tick, DURO_CRON_TICK_SKIPPED, JOURNAL_NONE, NULL, err);
    free(err);
    return;
  }
  if (t->workflow)
    fire_workflow(e, t, tick, now, t->key, 0, NULL);
  else
    fire_handler(e, t, tick, now);
}

/* Fires the late ticks of a catch-up, oldest first, without the overlap
 * check: a burst of late ticks is not an overlap, and none of them is the
 * previous tick the next on-time one looks at.  Returns how many this
 * host fired (another host on the same journal may have claimed some). */
static size_t fire_late(duro_engine *e, cron_trigger *t, const int64_t *ticks,
                        size_t n, int64_t now) {
  if (!t->workflow)
    return fire_handler_late(e, t, ticks, n, now);
  size_t fired = 0;
  for (size_t i = 0; i < n; i++)
    fired += fire_workflow(e, t, ticks[i], now, t->key, 1, NULL) == 1;
  return fired;
}

/* ---- reconciling with the journal at start --------------------------------
 */

typedef struct tick_list {
  int64_t *v;
  size_t n, cap;
} tick_list;

static void cut_short(void *ctx, const journal_cron_tick *tk) {
  tick_list *l = ctx;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 8;
    l->v = xrealloc(l->v, l->cap * sizeof *l->v);
  }
  l->v[l->n++] = tk->tick_ms;
}

/* The newest tick's instance, unless a catch-up fired it late (then it
 * is no previous tick for overlap: skip). */
static void newest_instance(void *ctx, const journal_cron_tick *tk) {
  char **out = ctx;
  if (!*out && tk->instance && tk->fired_ms != JOURNAL_NONE &&
      tk->fired_ms - tk->tick_ms <= LATE_MS)
    *out = xstrdup(tk->instance);
}

static void record_missed(duro_engine *e, const cron_trigger *t,
                          const int64_t *ticks, size_t n, int64_t extra) {
  /* One pass at least: the extra count goes with the first chunk, also
   * when every recorded tick fires late. */
  for (size_t i = 0; i < n || (i == 0 && extra > 0); i += MISSED_CHUNK) {
    journal_batch b = {0};
    for (size_t k = i; k < n && k < i + MISSED_CHUNK; k++)
      tick_op(&b, t->key, ticks[k], DURO_CRON_TICK_MISSED, JOURNAL_NONE)
          ->error =
          "\"nothing fired it when it came: no host ran, or the host could "
          "not (a machine asleep)\"";
    if (i == 0 && extra > 0) {
      journal_op *op = journal_batch_add(&b, JOP_CRON_MISSED_EXTRA);
      op->queue = t->key;
      op->from_seq = extra;
    }
    if (journal_commit(engine_journal(e), &b) != 0)
      log_error("cron: cannot record missed ticks: %s",
                journal_errmsg(engine_journal(e)));
    journal_batch_free(&b);
  }
}

/* Ticks from `tick` on that are more than LATE_MS old at `now` came
 * while nothing could fire them: recorded missed (the newest
 * MAX_MISSED_ROWS one by one, in a ring; older ones only counted), and
 * fired late as catch_up says.  Returns the first tick that is on time. */
static int64_t settle_late(duro_engine *e, cron_trigger *t, int64_t tick,
                           int64_t now, const char *why) {
  int64_t *ring = xcalloc(MAX_MISSED_ROWS, sizeof *ring);
  size_t count = 0;
  while (tick != CRON_NEVER && tick < now - LATE_MS) {
    ring[count++ % MAX_MISSED_ROWS] = tick;
    tick = cron_next(&t->expr, tick, t->timezone);
  }
  size_t n = count < MAX_MISSED_ROWS ? count : MAX_MISSED_ROWS;
  int64_t extra = (int64_t)(count - n);
  int64_t *missed = xcalloc(n ? n : 1, sizeof *missed);
  for (size_t k = 0; k < n; k++) /* oldest first */
    missed[k] = ring[(count - n + k) % MAX_MISSED_ROWS];
  free(ring);
  int catch_up = __atomic_load_n(&t->catch_up, __ATOMIC_RELAXED);
  size_t late = catch_up == DURO_CRON_CATCH_UP_ALL
                    ? __atomic_load_n(&t->max_catch_up, __ATOMIC_RELAXED)
                : catch_up == DURO_CRON_CATCH_UP_LATEST ? 1
                                                        : 0;
  if (late > n)
    late = n;
  if (n) {
    t->after_outage = 1;
    record_missed(e, t, missed, n - late, extra);
    size_t fired = fire_late(e, t, missed + (n - late), late, now);
    /* What happened, as GET /crons counts it: the ticks beyond the cap
     * and beyond the rows kept are missed; a late tick another host
     * claimed first is that host's. */
    log_warn("cron %s (plugin %s): %zu tick(s) came %s: %zu fired late "
             "(catch_up: %s), %zu missed",
             t->schedule, t->plugin, count, why, fired,
             duro_cron_catch_up_name(catch_up), count - late);
  }
  free(missed);
  return tick;
}

/* The first dispatch for t: ticks cut short by the last stop, ticks
 * missed while no host ran, and the catch-up.  Sets t->next_ms. */
static void recover(duro_engine *e, cron_trigger *t, int64_t now) {
  journal_cron st;
  t->recovered = 1;
  if (journal_cron_state(engine_journal(e), t->key, &st) != 0) {
    t->recovered = 0; /* storage trouble: try again next pass */
    return;
  }
  if (st.since_ms == JOURNAL_NONE) {
    /* New: nothing before now was ever due. */
    journal_batch b = {0};
    journal_op *op = journal_batch_add(&b, JOP_CRON_SINCE);
    op->queue = t->key;
    op->ts_ms = now;
    if (journal_commit(engine_journal(e), &b) != 0)
      t->recovered = 0;
    journal_batch_free(&b);
    t->next_ms = cron_next(&t->expr, now - 1, t->timezone);
    return;
  }
  tick_list cut = {0};
  journal_cron_ticks(engine_journal(e), t->key,
                     duro_cron_tick_state_name(DURO_CRON_TICK_FIRED), 1000,
                     cut_short, &cut);
  for (size_t i = 0; i < cut.n; i++)
    tick_set(e, t->key, cut.v[i], DURO_CRON_TICK_FAILED,
             "\"the host stopped while the handler ran\"");
  free(cut.v);
  if (t->workflow)
    journal_cron_ticks(engine_journal(e), t->key,
                       duro_cron_tick_state_name(DURO_CRON_TICK_COMPLETE), 1,
                       newest_instance, &t->last_instance);
  int64_t from =
      st.last_tick_ms != JOURNAL_NONE ? st.last_tick_ms : st.since_ms - 1;
  t->next_ms = settle_late(e, t, cron_next(&t->expr, from, t->timezone), now,
                           "while no host ran");
}

/* ---- dispatch -------------------------------------------------------------
 */

size_t duro_crons_dispatch(duro_engine *e, int64_t *next_ms) {
  struct cron_registry *r = registry_if_any(e);
  int64_t next = INT64_MAX;
  size_t fired = 0;
  /* The set walked stays put while referenced (a reload publishes a new
   * one), and one thread (the scheduler) dispatches, so each trigger's
   * memory fields are its own but for `running` (under the mutex). */
  cron_set *s = r ? set_take(r) : NULL;
  for (size_t i = 0; s && i < s->n; i++) {
    cron_trigger *t = s->v[i];
    int64_t now = engine_now(e);
    if (!t->recovered)
      recover(e, t, now);
    /* The scheduler stalled (the machine slept, say): as after a stop. */
    if (t->recovered && t->next_ms != CRON_NEVER && t->next_ms < now - LATE_MS)
      t->next_ms = settle_late(e, t, t->next_ms, now,
                               "while the host could not fire them");
    while (t->recovered && t->next_ms != CRON_NEVER && t->next_ms <= now) {
      fire_tick(e, t, t->next_ms, now);
      fired++;
      t->next_ms = cron_next(&t->expr, t->next_ms, t->timezone);
    }
    if (t->next_ms < next)
      next = t->next_ms;
  }
  if (s)
    set_drop(r, s);
  if (next_ms)
    *next_ms = next;
  return fired;
}

/* A fire by hand of a handler trigger runs where its ticks run (a
 * handler thread of its own, named in the crash ledger, counted
 * `running` so that an overlap: skip tick sees it and a stop waits for
 * it), while the caller waits for its result.  fn is counted running
 * (handler_take_locked); the runner puts it back. */
static int fire_by_hand(duro_engine *e, cron_trigger *t, int64_t tick,
                        duro_scheduled_fn fn) {
  fire_wait w = {.done = 0, .rc = -1};
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.cv, NULL);
  fire *f = fire_of(e, t, tick);
  f->fn = fn;
  f->by_hand = &w;
  start_fire(e, t, f); /* f is the runner's now */
  pthread_mutex_lock(&w.mu);
  while (!w.done)
    pthread_cond_wait(&w.cv, &w.mu);
  pthread_mutex_unlock(&w.mu);
  pthread_cond_destroy(&w.cv);
  pthread_mutex_destroy(&w.mu);
  return w.rc;
}

/* One more result in r, zeroed, for trigger t. */
static duro_cron_fire_result *fire_result_add(duro_cron_fire_results *r,
                                              const cron_trigger *t) {
  r->v = xrealloc(r->v, (r->n + 1) * sizeof *r->v);
  duro_cron_fire_result *o = &r->v[r->n++];
  *o = (duro_cron_fire_result){.plugin = xstrdup(t->plugin),
                               .schedule = xstrdup(t->schedule)};
  return o;
}

int duro_cron_fire_by_hand(duro_engine *e, const char *schedule,
                           duro_cron_fire_results *out) {
  *out = (duro_cron_fire_results){0};
  struct cron_registry *r = registry(e);
  int64_t now = engine_now(e);
  int64_t tick = now - now % 60000; /* the current minute */
  cron_set *s = set_take(r);
  for (size_t i = 0; s && i < s->n; i++) {
    cron_trigger *t = s->v[i];
    if (strcmp(t->schedule, schedule) != 0)
      continue;
    duro_cron_fire_result *o = fire_result_add(out, t);
    if (t->workflow) {
      /* "exists": the minute's id was taken (by its tick, an earlier fire
       * or a client), so nothing was created. */
      char id[128];
      int created = 0;
      int ok = fire_workflow(e, t, tick, now, NULL, 0, &created) == 1 &&
               cron_expand_id(t->id, tick, t->timezone, id, sizeof id) == 0;
      o->state = !ok       ? DURO_CRON_FIRE_FAILED
                 : created ? DURO_CRON_FIRE_COMPLETE
                           : DURO_CRON_FIRE_EXISTS;
      if (ok)
        o->instance = xstrdup(id);
    } else {
      pthread_mutex_lock(&r->mu);
      duro_scheduled_fn fn = handler_take_locked(r, t->plugin);
      pthread_mutex_unlock(&r->mu);
      int rc = fn ? fire_by_hand(e, t, tick, fn) : -1;
      o->state = rc == 0 ? DURO_CRON_FIRE_COMPLETE : DURO_CRON_FIRE_FAILED;
      if (!fn)
        o->error = xstrdup("the plugin has no scheduled handler");
      else if (rc)
        o->error = xasprintf("the scheduled handler returned %d", rc);
    }
  }
  if (s)
    set_drop(r, s);
  return out->n ? 0 : DURO_E_CRON_NOT_FOUND;
}

void duro_cron_fire_results_clear(duro_cron_fire_results *r) {
  for (size_t i = 0; i < r->n; i++) {
    free(r->v[i].plugin);
    free(r->v[i].schedule);
    free(r->v[i].instance);
    free(r->v[i].error);
  }
  free(r->v);
  *r = (duro_cron_fire_results){0};
}

int duro_crons_sweep(duro_engine *e, size_t *deleted) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_CRON_SWEEP);
  op->ts_ms = engine_now(e) - TICK_RETENTION_MS;
  int rc = journal_commit(engine_journal(e), &b);
  if (deleted)
    *deleted = rc ? 0 : (size_t)b.ops[0].out_rowid;
  journal_batch_free(&b);
  return rc;
}

/* ---- listing --------------------------------------------------------------
 */

/* A tick row's error as text: the journal holds it as JSON (a string),
 * or, in rows written before that, as the text itself. */
static char *tick_error_text(const char *stored) {
  json_t *v = json_loads(stored, JSON_DECODE_ANY, NULL);
  char *text =
      json_is_string(v) ? xstrdup(json_string_value(v)) : xstrdup(stored);
  json_decref(v);
  return text;
}

static void last_tick(void *ctx, const journal_cron_tick *tk) {
  duro_cron_trigger_info *o = ctx;
  duro_cron_tick_info *l = &o->last;
  o->has_last = 1;
  *l = (duro_cron_tick_info){.tick_ms = tk->tick_ms,
                             .state = DURO_CRON_TICK_FAILED,
                             .fired_ms = tk->fired_ms};
  duro_cron_tick_state_parse(tk->state, &l->state);
  if (tk->instance)
    l->instance = xstrdup(tk->instance);
  if (tk->error)
    l->error = tick_error_text(tk->error);
}

/* What the listing shows of t but its last tick, into *o. */
static int describe_one(duro_engine *e, struct cron_registry *r,
                        const cron_trigger *t, int64_t now,
                        duro_cron_trigger_info *o) {
  *o = (duro_cron_trigger_info){
      .plugin = xstrdup(t->plugin),
      .schedule = xstrdup(t->schedule),
      .timezone = t->timezone ? xstrdup(t->timezone) : NULL,
      .workflow = t->workflow ? xstrdup(t->workflow) : NULL,
      .id = t->workflow ? xstrdup(t->id) : NULL,
      .catch_up = __atomic_load_n(&t->catch_up, __ATOMIC_RELAXED),
      .overlap_allow = __atomic_load_n(&t->overlap_allow, __ATOMIC_RELAXED)};
  int64_t tick = now - 1;
  while (o->n_next < DURO_CRON_NEXT_TICKS) {
    tick = cron_next(&t->expr, tick, t->timezone);
    if (tick == CRON_NEVER)
      break;
    o->next[o->n_next++] = tick;
  }
  journal_cron st;
  int rc = journal_cron_state(engine_journal(e), t->key, &st);
  pthread_mutex_lock(&r->mu);
  o->running = t->running;
  pthread_mutex_unlock(&r->mu);
  o->complete = st.complete;
  o->failed = st.failed;
  o->missed = st.missed;
  o->skipped = st.skipped;
  return rc;
}

int duro_cron_describe(duro_engine *e, duro_cron_trigger_infos *out) {
  *out = (duro_cron_trigger_infos){0};
  struct cron_registry *r = registry(e);
  int64_t now = engine_now(e);
  int rc = 0;
  cron_set *s = set_take(r);
  if (s && s->n)
    out->v = xcalloc(s->n, sizeof *out->v);
  for (size_t i = 0; s && i < s->n && rc == 0; i++) {
    duro_cron_trigger_info *o = &out->v[out->n++];
    rc = describe_one(e, r, s->v[i], now, o);
    if (rc == 0)
      rc = journal_cron_ticks(engine_journal(e), s->v[i]->key, NULL, 1,
                              last_tick, o);
  }
  if (s)
    set_drop(r, s);
  if (rc)
    duro_cron_trigger_infos_clear(out);
  return rc;
}

void duro_cron_trigger_infos_clear(duro_cron_trigger_infos *l) {
  for (size_t i = 0; i < l->n; i++) {
    duro_cron_trigger_info *o = &l->v[i];
    free(o->plugin);
    free(o->schedule);
    free(o->timezone);
    free(o->workflow);
    free(o->id);
    free(o->last.instance);
    free(o->last.error);
  }
  free(l->v);
  *l = (duro_cron_trigger_infos){0};
}

/* ---- the engine driver (driver.h) ----------------------------------------
 */

static void *driver_create(duro_engine *e) {
  (void)e;
  cron_state *s = xcalloc(1, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  return s;
}

/* The ticks that fired never make the pass go again at once: the next
 * one is at *next_ms. */
static int driver_dispatch(duro_engine *e, void *state, int64_t *next_ms) {
  (void)state;
  duro_crons_dispatch(e, next_ms);
  return 0;
}

static int driver_sweep(duro_engine *e, void *state, size_t budget) {
  (void)state;
  (void)budget; /* one statement deletes the old ticks */
  if (duro_crons_sweep(e, NULL) != 0)
    log_error("cron tick sweep failed: %s", journal_errmsg(engine_journal(e)));
  return 0;
}

static void driver_metrics(duro_engine *e, void *state, FILE *out) {
  (void)state;
  cron_metrics(e, out);
}

static uint32_t driver_drain(void *state, const struct timespec *until) {
  cron_state *s = state;
  pthread_mutex_lock(&s->mu);
  struct cron_registry *r = s->r;
  pthread_mutex_unlock(&s->mu);
  return cron_registry_wait(r, until);
}

static void driver_free(void *state) {
  cron_state *s = state;
  cron_registry_free(s->r);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

const duro_driver cron_driver = {
    .name = "cron",
    .create = driver_create,
    .dispatch = driver_dispatch,
    .sweep = driver_sweep,
    .metrics = driver_metrics,
    .drain = driver_drain,
    .free = driver_free,
};
