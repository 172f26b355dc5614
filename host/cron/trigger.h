/* trigger.h — cron triggers in the engine: each declared schedule fires
 * once per tick, durably.
 *
 * A trigger is a schedule (cron/expr.h) of a plugin, in UTC or a time
 * zone, that either calls the plugin's scheduled handler (duro.h) or, in
 * the no-code form, creates one instance of a workflow per tick with an
 * id built from the tick's time.  Every tick is a row of the journal
 * (cron_ticks), claimed in a transaction before anything runs, so a
 * restart, a crash right after a fire or a slow handler never fires a tick
 * twice; in the no-code form the instance and the tick row are one
 * commit.  Ticks that passed while the host was down are recorded
 * `missed` at start and fired late as catch_up says; a tick that comes
 * while the previous one's handler or instance still runs is `skipped`
 * or fired as overlap says.  Late ticks are no overlap: they all fire,
 * none counts as the previous tick, and the first tick on time after an
 * outage fires whatever ran before it.
 *
 * Tick states: fired (claimed; the handler runs), complete (the handler
 * returned 0, or the instance was created — or existed), failed (the
 * handler returned non-zero, crashed or was cut short by a stop), missed,
 * skipped.  Times are the engine clock's (a virtual one in tests). */
#ifndef DURO_CRON_TRIGGER_H
#define DURO_CRON_TRIGGER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "duro.h"
#include "engine.h"

enum {
  DURO_CRON_CATCH_UP_LATEST = 0, /* the latest missed tick fires late */
  DURO_CRON_CATCH_UP_NONE,       /* missed ticks stay missed */
  DURO_CRON_CATCH_UP_ALL,        /* each fires late, up to max_catch_up */
};

typedef struct duro_cron_spec {
  const char *plugin;    /* its config name (logs, GET /crons) */
  const char *schedule;  /* the expression */
  const char *timezone;  /* IANA name; NULL = UTC */
  const char *workflow;  /* no-code form; NULL = the plugin's handler */
  const char *id;        /* no-code id template; NULL = "cron-{datetime}" */
  int catch_up;          /* DURO_CRON_CATCH_UP_* */
  uint32_t max_catch_up; /* catch_up all: late fires at most; 0 = 100 */
  int overlap_allow;     /* 0: skip a tick while the previous one runs */
  const char *params;    /* no-code: a JSON object each instance's params
                            start from; NULL = none */
} duro_cron_spec;

/* Registers a trigger (strings copied).  An invalid expression, zone or
 * id template is DURO_E_INVALID_ARGUMENT with the reason in err. */
int duro_cron_register(duro_engine *e, const duro_cron_spec *spec, char *err,
                       size_t errlen);

/* Makes specs[0..n) the engine's triggers, while it runs (a config
 * reload): a trigger whose plugin, schedule, zone, workflow and id are
 * those of a spec stays, with its next tick and running handlers, and
 * takes the spec's catch_up, max_catch_up, overlap and params; the others
 * are new
 * (first seen now, unless the journal knew them before) or gone (their
 * tick rows stay).  A tick running for a removed trigger ends as it
 * would have.  All specs are checked first: on DURO_E_INVALID_ARGUMENT
 * (the reason in err) nothing changed. */
int duro_cron_replace(duro_engine *e, const duro_cron_spec *specs, size_t n,
                      char *err, size_t errlen);

/* The scheduled handler of plugin `plugin` (its newest build; NULL: none,
 * ctx: its env->ctx,
 * its handler-form ticks then wait, recorded failed).  Safe while the
 * engine runs (a reload). */
void duro_cron_set_handler(duro_engine *e, const char *plugin,
                           duro_scheduled_fn fn, void *ctx);

/* 1 while a tick runs inside handler fn: its build must stay loaded. */
int duro_cron_handler_running(duro_engine *e, duro_scheduled_fn fn);

/* Fires every tick that is due (and, at the first call, records the
 * ticks missed since each trigger last fired, catching up as its policy
 * says).  Returns how many fired; *next_ms (may be NULL) gets the next
 * tick of any trigger, in the engine clock's ms (INT64_MAX: none).  The
 * scheduler thread calls it; tests on the virtual clock call it inline
 * (handlers then run on the calling thread). */
size_t duro_crons_dispatch(duro_engine *e, int64_t *next_ms);

/* The words of the journal, GET /crons and the log for a tick's state
 * (trigger_names.c holds the one table). */
typedef enum duro_cron_tick_state {
  DURO_CRON_TICK_FIRED = 0, /* claimed; the handler runs */
  DURO_CRON_TICK_COMPLETE,
  DURO_CRON_TICK_FAILED,
  DURO_CRON_TICK_MISSED,
  DURO_CRON_TICK_SKIPPED,
} duro_cron_tick_state;
const char *duro_cron_tick_state_name(duro_cron_tick_state s);
/* The state named `name`; -1 for a word that names none. */
int duro_cron_tick_state_parse(const char *name, duro_cron_tick_state *out);

/* "latest", "none", "all" for a DURO_CRON_CATCH_UP_* (an unknown one is
 * "latest", the default). */
const char *duro_cron_catch_up_name(int catch_up);

/* How a fire by hand of one trigger went. */
typedef enum duro_cron_fire_state {
  DURO_CRON_FIRE_COMPLETE = 0, /* the handler returned 0, or the instance
                                  was created */
  DURO_CRON_FIRE_FAILED,
  DURO_CRON_FIRE_EXISTS, /* the minute's instance existed: none created */
} duro_cron_fire_state;
/* "complete", "failed", "exists". */
const char *duro_cron_fire_state_name(duro_cron_fire_state s);

typedef struct duro_cron_fire_result {
  char *plugin, *schedule;
  duro_cron_fire_state state;
  char *instance; /* no-code form, unless failed: the minute's id; or NULL */
  char *error;    /* why it failed (handler form), or NULL */
} duro_cron_fire_result;

typedef struct duro_cron_fire_results {
  duro_cron_fire_result *v;
  size_t n;
} duro_cron_fire_results;

/* Fires now, outside the schedule, every trigger whose expression is
 * exactly `schedule` (POST /__scheduled?cron=..., `duro cron trigger`):
 * the handler runs where ticks run (a handler thread, named in the crash
 * ledger and counted `running`; inline without workers) while the caller
 * waits for it, or the instance is created with the id of the current
 * minute.  *out (caller clears) gets one result a trigger, in config
 * order.  DURO_E_CRON_NOT_FOUND when no trigger has that expression
 * (*out is then empty).  Not a tick: nothing is recorded.  The JSON form
 * is duro_cron_fire_now (views/view_cron.h). */
int duro_cron_fire_by_hand(duro_engine *e, const char *schedule,
                           duro_cron_fire_results *out);
void duro_cron_fire_results_clear(duro_cron_fire_results *r);

#define DURO_CRON_NEXT_TICKS 5 /* the next ticks a listing names */

/* A tick row, as GET /crons shows the last one. */
typedef struct duro_cron_tick_info {
  int64_t tick_ms;
  duro_cron_tick_state state;
  int64_t fired_ms; /* INT64_MIN: never fired */
  char *instance;   /* NULL: none */
  char *error;      /* why it failed, was missed or skipped; or NULL */
} duro_cron_tick_info;

/* A trigger as it is now. */
typedef struct duro_cron_trigger_info {
  char *plugin, *schedule;
  char *timezone;      /* NULL: UTC */
  char *workflow, *id; /* the no-code form; both NULL: the handler form */
  int catch_up;        /* DURO_CRON_CATCH_UP_* */
  int overlap_allow;   /* 0: skip */
  int64_t next[DURO_CRON_NEXT_TICKS]; /* its next ticks, in ms */
  size_t n_next;                      /* fewer when the schedule runs out */
  int has_last;                       /* 0: no tick yet (last is empty) */
  duro_cron_tick_info last;
  uint32_t running;                          /* handler ticks now */
  int64_t complete, failed, missed, skipped; /* ticks since first seen */
} duro_cron_trigger_info;

typedef struct duro_cron_trigger_infos {
  duro_cron_trigger_info *v;
  size_t n;
} duro_cron_trigger_infos;

/* Every trigger, in config order, into *out (caller clears; empty on an
 * error).  The JSON form is duro_cron_list (views/view_cron.h). */
int duro_cron_describe(duro_engine *e, duro_cron_trigger_infos *out);
void duro_cron_trigger_infos_clear(duro_cron_trigger_infos *l);

/* Expands an id template ({date} YYYY-MM-DD, {time} HHMM, {datetime}
 * YYYY-MM-DDTHH:MM, {ts} Unix ms; the date and time in zone tz, NULL =
 * UTC) for tick_ms into out; -1 for an unknown placeholder, a result too
 * long for out, or one that is not a valid instance id. */
int cron_expand_id(const char *tmpl, int64_t tick_ms, const char *tz, char *out,
                   size_t len);

/* Deletes tick rows older than 30 days, but each trigger's newest (the
 * counts of duro_cron_describe stay); *deleted (may be NULL) gets how many.
 * The engine's retention sweep calls it. */
int duro_crons_sweep(duro_engine *e, size_t *deleted);

/* The triggers as an engine driver (driver.h): their dispatch on every
 * scheduler pass, the ticks' sweep, the wait for handlers at stop. */
struct duro_driver;
extern const struct duro_driver cron_driver;

/* Appends the triggers' series to GET /metrics (cron_metrics.c). */
void cron_metrics(duro_engine *e, FILE *out);

struct cron_registry;
/* Waits until no handler thread runs, or until `until` (CLOCK_MONOTONIC;
 * NULL: no limit); returns how many still run. */
struct timespec;
uint32_t cron_registry_wait(struct cron_registry *r,
                            const struct timespec *until);
void cron_registry_free(struct cron_registry *r);

#endif
