/* kit_internal.h — what the test kit's files share (duro-test.h is the
 * user's side).
 *
 * One duro_test is open at a time in a process: the API table the
 * plugins are bound to (kit_api.c) reaches it through kit_current. */
#ifndef DURO_KIT_INTERNAL_H
#define DURO_KIT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "duro-test.h"
#include "engine.h"
#include "map.h"

struct loader_plugin;

/* A registered workflow: what the engine runs is kit_run (kit_api.c),
 * which finds this by the event's workflow name and calls run. */
typedef struct kit_workflow {
  char *name, *binding;
  duro_run_fn run;
  char build[17];
} kit_workflow;

/* A queue the test declared (duro_test_queue), a pipeline
 * (duro_test_pipeline), and a cron trigger. */
typedef struct kit_queue {
  char *name, *binding;
} kit_queue;
typedef kit_queue kit_pipeline;

typedef struct kit_cron {
  char *schedule, *workflow, *params; /* workflow NULL: the handler form */
} kit_cron;

/* A mocked step (duro-test.h). */
typedef struct kit_mock {
  char *workflow, *step; /* step: a key ("a#2") or a name ("a") */
  int by_key;
  char *result;        /* NULL: not set */
  uint32_t fail_first; /* attempts that fail before the rest */
  char *fail_message;
  int fail_final;
  duro_step_fn fn;
  void *arg;
} kit_mock;

/* How many times a step's callback ran (by workflow and key). */
typedef struct kit_calls {
  char *workflow, *key;
  char *name; /* "workflow\tkey", call_index's key */
  int n;
} kit_calls;

/* One step call run() made, as the crash runs compare them. */
typedef struct kit_call {
  char kind[16]; /* "do", "do_all*3" (its branch count), "sleep", ... */
  char *name;
} kit_call;

/* An activation in progress: its run() calls so far. */
typedef struct kit_activation {
  duro_step *step;
  const char *workflow, *id; /* the event's, borrowed */
  char *instance;            /* "workflow/id", owned: the crash runs' name */
  kit_call *calls;
  size_t n_calls, cap_calls;
  int ran_attempt; /* the last do call ran a callback in this activation */
} kit_activation;

/* Whether this process is one of a crash run's (kit_crash.c keeps the
 * rest of that run's state). */
typedef struct kit_crash {
  int active;
} kit_crash;

/* The kinds of string a read returns and the kit keeps (kit_keep). */
enum {
  KIT_KEEP_OUTPUT,
  KIT_KEEP_ERROR,
  KIT_KEEP_RESULT,
  KIT_KEEP_DESCRIBE,
  KIT_KEEP_QUEUE,
  KIT_KEEP_PIPELINE,
  KIT_KEEP_EXPORT,   /* duro_test_export's document (kit_replay.c) */
  KIT_KEEP_IMPORTED, /* the id of the instance imported last */
  KIT_KEEP_KINDS
};

struct duro_test {
  char dir[256], db[300];
  duro_clock clock;
  duro_engine *e;
  int started;
  kit_workflow *wfs;
  size_t n_wfs;
  struct loader_plugin **plugins;
  size_t n_plugins;
  kit_mock *mocks;
  size_t n_mocks;
  kit_calls *calls;
  size_t n_calls;
  strmap call_index; /* "workflow\tkey" -> 1 + its place in calls */
  kit_queue *queues;
  size_t n_queues;
  kit_pipeline *pipelines;
  size_t n_pipelines;
  kit_cron *crons;
  size_t n_crons;
  duro_scheduled_fn scheduled; /* the handler form's handler */
  kit_activation *acts[64];
  size_t n_acts;
  kit_crash crash;
  char err[1024];
  char *strings[KIT_KEEP_KINDS]; /* what each read returned last */
  void (*fail)(void *ctx);
  void *fail_ctx;
};

extern duro_test *kit_current;

/* Keeps s as what the read of kind k (KIT_KEEP_*) returned last,
 * freeing the one before; returns s. */
const char *kit_keep(duro_test *t, int k, char *s);

/* Declares the test's queues, pipelines and cron triggers on t->e
 * (kit_drivers.c); 0 or a code, t->err set.  kit_drivers_free frees what was
 * declared. */
int kit_drivers_declare(duro_test *t);
void kit_drivers_free(duro_test *t);
/* The next cron tick (Unix ms), INT64_MAX when none; fires those due. */
int64_t kit_next_tick(duro_test *t);

/* Writes why into t->err and returns rc. */
int kit_fail(duro_test *t, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The API table plugins loaded by the kit are bound to: the host's, with
 * the step calls recorded and mocks and crash points put in. */
const duro_api *kit_api(void);
/* The run() the engine is given for every workflow. */
duro_rc kit_run(duro_step *step, const duro_event *ev, duro_env *env);
/* The mock for a call of `name` (key NULL: any mock of that name or of a
 * key of it), or NULL. */
kit_mock *kit_mock_find(duro_test *t, const char *workflow, const char *name,
                        const char *key);
void kit_count_call(duro_test *t, const char *workflow, const char *key);

/* Opens (and starts) the engine on t->db with the registered workflows;
 * kit_engine_close closes it.  0 or a code, t->err set. */
int kit_engine_open(duro_test *t);
void kit_engine_close(duro_test *t);
/* Runs the instance to its end as duro_test_run_to_end does. */
int kit_run_to_end(duro_test *t, const char *workflow, const char *id,
                   int64_t limit_ms);

/* A boundary of a crash run (kit_crash.c): counts it and, at the chosen
 * one, ends the process as kill -9 would; `where` names it. */
void kit_boundary(duro_test *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A crash run's checks, from the API table: a call run() made (0, or -1
 * after recording a divergence: the process ends), a callback about to
 * run, one that returned its result, a step completed. */
void kit_crash_call(duro_test *t, kit_activation *a, const char *kind,
                    const char *name);
void kit_crash_activation_end(duro_test *t, const kit_activation *a);
/* kit_crash_attempt returns the time the step's callback is to read
 * (Unix ms: when the first run's attempt of it began), or -1. */
int64_t kit_crash_attempt(duro_test *t, const char *instance, const char *key);
void kit_crash_returned(duro_test *t, const char *instance, const char *key,
                        const char *result);
void kit_crash_completed(duro_test *t, const char *instance, const char *key);

/* The wall clock plugin code reads (kit_clock.c): which code runs on
 * this thread now (kit_clock_enter returns what ran before, for
 * kit_clock_leave), and how much later run() code outside a step reads
 * it in this process (seconds; 0: not at all). */
enum { KIT_HOST = 0, KIT_RUN, KIT_STEP };
int kit_clock_enter(int code);
/* The time a step's callback on this thread reads instead of the test's
 * (Unix ms; -1: the test's). */
void kit_clock_pin(int64_t ms);
void kit_clock_leave(int was);
void kit_clock_shift(int64_t offset_s);

#endif
