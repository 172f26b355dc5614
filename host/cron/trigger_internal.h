/* trigger_internal.h — what the pieces of the cron triggers share: a
 * trigger, the published set of them, the registry (with each plugin's
 * handler), a fire in flight, and the calls one piece makes in another.
 * Private to cron/ (trigger.h is the public face).
 *
 *   trigger.c           the registry and its sets, referenced and freed
 *   trigger_names.c     the enums' name tables
 *   trigger_id.c        a no-code trigger's instance id from a tick
 *   trigger_register.c  the triggers registered and replaced; handlers
 *   trigger_ticks.c     a tick's row claimed and settled
 *   trigger_fire.c      a tick fired: on time (overlap) or late; the
 *                       no-code form's instance
 *   trigger_handler.c   the handler form: a handler run on its thread
 *   trigger_recover.c   a trigger reconciled with its rows at start
 *   trigger_dispatch.c  the scheduler's pass, a fire by hand, the sweep
 *   trigger_list.c      the listing (GET /crons)
 *   trigger_driver.c    the triggers as an engine driver */
#ifndef DURO_CRON_TRIGGER_INTERNAL_H
#define DURO_CRON_TRIGGER_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "expr.h"
#include "trigger.h"
#include "util.h"

#define LATE_MS 60000         /* a tick older than this at start: missed */
#define MAX_MISSED_ROWS 10000 /* missed ticks recorded one by one */
#define MISSED_CHUNK 1000     /* missed rows per commit */
#define DEFAULT_MAX_CATCH_UP 100
#define DEFAULT_ID "cron-{datetime}"
#define TICK_RETENTION_MS (30LL * 24 * 3600 * 1000) /* rows; counts stay */

typedef struct cron_trigger {
  char *key; /* the journal's name for it: every field that defines it */
  char *plugin, *schedule, *timezone, *workflow, *id;
  cron_expr expr;
  int catch_up;
  uint32_t max_catch_up;
  int overlap_allow;
  char *params; /* no-code: the instances' params beside cron's (mu), or
                   NULL */
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
    void *ctx; /* its env->ctx */
  } * handlers;
  size_t n_handlers;
  /* Ticks inside each handler's code, by its function (not by plugin: a
   * reload replaces a plugin's fn while ticks of the old one run, and the
   * old build stays loaded until none does). */
  struct handler_running {
    duro_scheduled_fn fn;
    uint32_t n;
  } * running;
  size_t n_running;
  uint32_t threads; /* handler threads not yet finished */
};

/* What the engine keeps for the triggers (their driver's state): the
 * registry, created on the first registration. */
typedef struct cron_state {
  pthread_mutex_t mu; /* guards the creation of r */
  struct cron_registry *r;
} cron_state;

/* A copy of what a fire needs, so the registry is not held meanwhile. */
typedef struct fire {
  duro_engine *e;
  cron_trigger *t; /* referenced: its counters are settled at the end */
  char *key, *plugin, *schedule, *timezone, *workflow, *id;
  int64_t tick;
  duro_scheduled_fn fn;
  void *ctx; /* fn's env->ctx */
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

/* ---- trigger.c ---- */

/* The engine's registry, made on the first call. */
struct cron_registry *cron_registry_of(duro_engine *e);
/* The registry, NULL before the first registration. */
struct cron_registry *cron_registry_if_any(duro_engine *e);
void cron_trigger_clear(cron_trigger *t);
/* Lets go of a reference on t, freed with the last (r->mu held). */
void cron_trigger_drop_locked(cron_trigger *t);
/* The set to walk, referenced (NULL: none); cron_set_drop lets go of it. */
cron_set *cron_set_take(struct cron_registry *r);
void cron_set_drop(struct cron_registry *r, cron_set *s);
/* Makes `v` (n triggers, each referenced for the new set) the set. */
void cron_set_publish(struct cron_registry *r, cron_trigger **v, size_t n);

/* ---- trigger_register.c ---- */

/* The plugin's handler, counted as running, with its context in *ctx
 * (r->mu held); NULL: none. */
duro_scheduled_fn cron_handler_take_locked(struct cron_registry *r,
                                           const char *plugin, void **ctx);
/* The handler fn no longer counts one more tick running. */
void cron_handler_put(struct cron_registry *r, duro_scheduled_fn fn);

/* ---- trigger_ticks.c ---- */

/* Adds to b the claim of trigger `key`'s tick in `state`, fired at
 * `fired` (JOURNAL_NONE: not fired). */
journal_op *cron_tick_op(journal_batch *b, const char *key, int64_t tick,
                         duro_cron_tick_state state, int64_t fired);
/* Claims the tick with `state`: 1 when this call claimed it, 0 when it
 * was claimed before, < 0 on a storage error. */
int cron_tick_put(duro_engine *e, const cron_trigger *t, int64_t tick,
                  duro_cron_tick_state state, int64_t fired,
                  const char *instance, const char *error);
/* Settles a tick still `fired` (a failure to is logged). */
void cron_tick_set(duro_engine *e, const char *key, int64_t tick,
                   duro_cron_tick_state state, const char *error);
/* The message as the tick rows hold an error: a JSON string (malloc'ed). */
char *cron_error_text(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* ---- trigger_handler.c ---- */

/* A fire of t's tick (t referenced until it ends). */
fire *cron_fire_of(duro_engine *e, cron_trigger *t, int64_t tick);
/* Runs f on a thread of its own, or inline without workers; f is the
 * runner's. */
void cron_fire_start(duro_engine *e, cron_trigger *t, fire *f);
/* Handler form: claims the tick, then runs the handler. */
void cron_fire_handler(duro_engine *e, cron_trigger *t, int64_t tick,
                       int64_t now);
/* Handler form, catch-up: the late ticks claimed and run as one burst;
 * how many this host claimed. */
size_t cron_fire_handler_late(duro_engine *e, cron_trigger *t,
                              const int64_t *ticks, size_t n, int64_t now);

/* ---- trigger_fire.c ---- */

/* No-code form: the instance and the tick row (with a `key`), one
 * commit: 1 when it committed and claimed, 0 when claimed before, -1 on
 * failure; *created (may be NULL) whether it made the instance. */
int cron_fire_workflow(duro_engine *e, cron_trigger *t, int64_t tick,
                       int64_t now, const char *key, int late, int *created);
/* An on-time tick (the overlap check first). */
void cron_fire_tick(duro_engine *e, cron_trigger *t, int64_t tick, int64_t now);
/* A catch-up's late ticks, oldest first: how many this host fired. */
size_t cron_fire_late(duro_engine *e, cron_trigger *t, const int64_t *ticks,
                      size_t n, int64_t now);

/* ---- trigger_recover.c ---- */

/* Ticks from `tick` on more than LATE_MS old at `now`: recorded missed
 * and fired late as catch_up says; the first tick on time. */
int64_t cron_settle_late(duro_engine *e, cron_trigger *t, int64_t tick,
                         int64_t now, const char *why);
/* The first dispatch for t; sets t->next_ms (t->recovered stays 0 on
 * storage trouble). */
void cron_recover(duro_engine *e, cron_trigger *t, int64_t now);

#endif
