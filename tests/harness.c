/* harness.c — see harness.h. */
#include "harness.h"

#include "children.h"
#include "debounce.h"
#include "flow.h"
#include "pipeline.h"
#include "queue.h"
#include "resources.h"
#include "singleton.h"
#include "tail.h"
#include "trigger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "error.h"
#if DURO_HAVE_PG
#include "pg_fixture.h"
#endif

const duro_api *duro_api_ptr_;

typedef struct reg {
  const char *name;
  const char *binding; /* NULL = none */
  duro_run_fn run;
  const duro_workflow_limits *limits; /* NULL = the defaults */
} reg;

static reg regs[32];
static size_t n_regs;

typedef struct queue_reg {
  const char *name;
  duro_queue_options opt;
} queue_reg;
static queue_reg queues[8];
static size_t n_queues;

typedef struct pipeline_reg {
  const char *name;
  duro_pipeline_options opt;
} pipeline_reg;
static pipeline_reg pipelines[4];
static size_t n_pipelines;

typedef struct resource_reg {
  const char *name;
  duro_resource_options opt;
} resource_reg;
static resource_reg resources[4];
static size_t n_resources;

static duro_cron_spec crons[8];
static size_t n_crons;
static struct {
  const char *plugin;
  duro_scheduled_fn fn;
} cron_handlers[4];
static size_t n_cron_handlers;

static int64_t state_limit;     /* 0 = the engine's default */
static size_t runnable_cap;     /* 0 = the engine's default */
static size_t queued_cap;       /* 0 = none */
static ledger *crash_ledger;    /* NULL = the engine's private one */
static uint32_t max_crashes;    /* 0 = the engine's default */
static uint32_t worker_threads; /* 0 = inline, on the virtual clock */
static int virtual_workers;     /* the threads run on the virtual clock */
static const struct journal_crypt *crypt_keys; /* NULL = none */
/* The journal's backend; NULL = SQLite at h->db. */
static const struct store_backend *journal_backend;

static void open_engine(harness *h) {
  duro_engine_options opt = {
      .db_path = h->db,
      .backend = journal_backend,
      .synchronous_full = 0,
      .workers = worker_threads,
      .max_instance_state = state_limit,
      .max_runnable = runnable_cap,
      .max_queued = queued_cap,
      .ledger = crash_ledger,
      .max_crashes = max_crashes,
      .crypt = crypt_keys,
      .clock = worker_threads && !virtual_workers ? NULL : &h->clock};
  char err[512];
  int rc = duro_engine_open(&opt, &h->e, err, sizeof err);
  ck_assert_msg(rc == 0, "engine open: %s", err);
  for (size_t i = 0; i < n_regs; i++)
    ck_assert_int_eq(duro_engine_register(h->e, regs[i].name, regs[i].binding,
                                          regs[i].run, regs[i].limits, "test"),
                     0);
  for (size_t i = 0; i < n_queues; i++)
    ck_assert_int_eq(duro_queue_register(h->e, queues[i].name, &queues[i].opt),
                     0);
  for (size_t i = 0; i < n_pipelines; i++)
    ck_assert_int_eq(
        duro_pipeline_register(h->e, pipelines[i].name, &pipelines[i].opt), 0);
  for (size_t i = 0; i < n_resources; i++)
    ck_assert_int_eq(
        duro_resource_register(h->e, resources[i].name, &resources[i].opt), 0);
  for (size_t i = 0; i < n_crons; i++)
    ck_assert_int_eq(duro_cron_register(h->e, &crons[i], err, sizeof err), 0);
  for (size_t i = 0; i < n_cron_handlers; i++)
    duro_cron_set_handler(h->e, cron_handlers[i].plugin, cron_handlers[i].fn,
                          NULL);
}

/* DURO_TEST_PG=<libpq connection string of a running server>: every
 * engine the harness opens journals in a new database there (PostgreSQL
 * backend) instead of a SQLite file, to run engine suites on it.  Cases
 * that open h->db with SQLite themselves do not apply. */
static void on_test_pg(harness *h) {
  const char *server = getenv("DURO_TEST_PG");
  if (!server || !*server)
    return;
#if DURO_HAVE_PG
  static int n;
  char name[64];
  snprintf(name, sizeof name, "h_%d_%d", (int)getpid(), n++);
  pg_create_database(server, name, h->db, sizeof h->db);
  journal_backend = &store_pg;
  rmdir(h->dir); /* nothing of the journal goes there */
#else
  (void)h;
  ck_abort_msg("DURO_TEST_PG: built without libpq");
#endif
}

static void harness_init(harness *h, uint32_t workers) {
  memset(h, 0, sizeof *h);
  n_regs = 0;
  n_queues = 0;
  n_pipelines = 0;
  n_resources = 0;
  n_crons = 0;
  n_cron_handlers = 0;
  state_limit = 0;
  runnable_cap = queued_cap = 0;
  crash_ledger = NULL;
  max_crashes = 0;
  worker_threads = workers;
  virtual_workers = 0;
  crypt_keys = NULL;
  journal_backend = NULL;
  duro_api_ptr_ = duro_host_api();
  snprintf(h->dir, sizeof h->dir, "/tmp/duro-test-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(h->dir));
  snprintf(h->db, sizeof h->db, "%s/duro.db", h->dir);
  on_test_pg(h);
  duro_clock_virtual_init(&h->clock, T0_MS);
  open_engine(h);
}

void harness_open(harness *h) { harness_init(h, 0); }

void harness_open_workers(harness *h, uint32_t workers) {
  harness_init(h, workers);
}

void harness_open_workers_virtual(harness *h, uint32_t workers) {
  harness_init(h, workers);
  duro_engine_close(h->e);
  virtual_workers = 1;
  open_engine(h);
}

static void harness_close_files(harness *h);

const struct store_backend *harness_backend(void) { return journal_backend; }

journal *harness_journal_open(harness *h) {
  journal *j = NULL;
  char err[512];
  int rc =
      journal_open_backend(journal_backend ? journal_backend : &store_sqlite,
                           h->db, 0, &j, err, sizeof err);
  ck_assert_msg(rc == 0, "journal open: %s", err);
  return j;
}

void harness_open_backend(harness *h, const struct store_backend *be,
                          const char *path) {
  harness_init(h, 0);
  duro_engine_close(h->e);
  ck_assert_uint_lt(strlen(path), sizeof h->db);
  harness_close_files(h);
  snprintf(h->db, sizeof h->db, "%s", path);
  journal_backend = be;
  open_engine(h);
}

void harness_register_binding(harness *h, const char *name, const char *binding,
                              duro_run_fn run) {
  ck_assert(n_regs < sizeof regs / sizeof *regs);
  regs[n_regs++] = (reg){name, binding, run, NULL};
  ck_assert_int_eq(duro_engine_register(h->e, name, binding, run, NULL, "test"),
                   0);
}

void harness_register_limits(harness *h, const char *name, duro_run_fn run,
                             const duro_workflow_limits *limits) {
  ck_assert(n_regs < sizeof regs / sizeof *regs);
  regs[n_regs++] = (reg){name, NULL, run, limits};
  ck_assert_int_eq(duro_engine_register(h->e, name, NULL, run, limits, "test"),
                   0);
}

void harness_register(harness *h, const char *name, duro_run_fn run) {
  harness_register_binding(h, name, NULL, run);
}

void harness_register_queue(harness *h, const char *name,
                            const duro_queue_options *opt) {
  ck_assert(n_queues < sizeof queues / sizeof *queues);
  queues[n_queues++] = (queue_reg){name, opt ? *opt : (duro_queue_options){0}};
  if (!opt)
    queues[n_queues - 1].opt.max_retries = -1;
  ck_assert_int_eq(duro_queue_register(h->e, name, &queues[n_queues - 1].opt),
                   0);
}

void harness_register_resource(harness *h, const char *name,
                               const duro_resource_options *opt) {
  ck_assert(n_resources < sizeof resources / sizeof *resources);
  resources[n_resources++] = (resource_reg){name, *opt};
  ck_assert_int_eq(duro_resource_register(h->e, name, opt), 0);
}

void harness_register_pipeline(harness *h, const char *name,
                               const duro_pipeline_options *opt) {
  ck_assert(n_pipelines < sizeof pipelines / sizeof *pipelines);
  pipelines[n_pipelines++] = (pipeline_reg){name, *opt};
  ck_assert_int_eq(duro_pipeline_register(h->e, name, opt), 0);
}

void harness_register_cron(harness *h, const duro_cron_spec *spec) {
  ck_assert(n_crons < sizeof crons / sizeof *crons);
  crons[n_crons++] = *spec;
  char err[256];
  int rc = duro_cron_register(h->e, spec, err, sizeof err);
  ck_assert_msg(rc == 0, "cron: %s", err);
}

void harness_set_cron_handler(harness *h, const char *plugin,
                              duro_scheduled_fn fn) {
  ck_assert(n_cron_handlers < sizeof cron_handlers / sizeof *cron_handlers);
  cron_handlers[n_cron_handlers].plugin = plugin;
  cron_handlers[n_cron_handlers++].fn = fn;
  duro_cron_set_handler(h->e, plugin, fn, NULL);
}

void harness_start(harness *h) { ck_assert_int_eq(duro_engine_start(h->e), 0); }

void harness_set_backlog_limits(harness *h, size_t max_runnable,
                                size_t max_queued) {
  runnable_cap = max_runnable;
  queued_cap = max_queued;
  harness_reopen(h);
}

void harness_set_state_limit(harness *h, int64_t bytes) {
  state_limit = bytes;
  harness_reopen(h);
}

void harness_set_crypt(harness *h, const struct journal_crypt *c) {
  crypt_keys = c;
  harness_reopen(h);
}

void harness_set_ledger(harness *h, ledger *l, uint32_t crashes) {
  crash_ledger = l;
  max_crashes = crashes;
  harness_reopen(h);
}

void harness_reopen(harness *h) {
  duro_engine_close(h->e);
  open_engine(h);
  harness_start(h);
}

void harness_down_for(harness *h, int64_t ms) {
  duro_engine_close(h->e);
  duro_clock_advance(&h->clock, ms);
  open_engine(h);
  harness_start(h);
}

/* Removes the SQLite files, if any, and the directory. */
static void harness_close_files(harness *h) {
  char path[320];
  const char *suffix[] = {"", "-wal", "-shm"};
  for (size_t i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s%s", h->db, suffix[i]);
    unlink(path);
  }
  rmdir(h->dir);
}

void harness_close(harness *h) {
  duro_engine_close(h->e);
  h->e = NULL;
  if (!journal_backend)
    harness_close_files(h);
}

size_t harness_run(harness *h) {
  /* the engine's queue consumers, as its scheduler thread runs them */
  size_t total = 0, n;
  do {
    n = duro_crons_dispatch(h->e, NULL);
    n += duro_queues_dispatch(h->e);
    n += duro_children_dispatch(h->e);
    n += duro_pipelines_dispatch(h->e);
    n += duro_tail_dispatch(h->e);
    n += duro_flow_dispatch(h->e);
    n += duro_singleton_dispatch(h->e);
    n += duro_debounce_dispatch(h->e);
    n += duro_resources_dispatch(h->e);
    n += duro_engine_run_until_idle(h->e);
    total += n;
  } while (n);
  return total;
}

size_t harness_advance(harness *h, int64_t ms) {
  duro_clock_advance(&h->clock, ms);
  return harness_run(h);
}

void harness_create(harness *h, const char *wf, const char *id,
                    const char *params, int64_t timeout_ms) {
  duro_create_req req = {
      .id = id, .params = params, .retention_ms = -1, .timeout_ms = timeout_ms};
  duro_create_result res;
  ck_assert_int_eq(duro_instance_create_many(h->e, wf, &req, 1, &res), 0);
  ck_assert_msg(res.n_created == 1, "create %s/%s: %s", wf, id,
                res.n_errors ? duro_err_name(res.errors[0].code) : "?");
  duro_create_result_free(&res);
}

json_t *harness_describe(harness *h, const char *wf, const char *id) {
  json_t *d = NULL;
  int rc = duro_instance_describe(h->e, wf, id, &d);
  ck_assert_msg(rc == 0, "describe %s/%s: %d", wf, id, rc);
  return d;
}

const char *harness_status(harness *h, const char *wf, const char *id) {
  duro_status s;
  int rc = duro_instance_status(h->e, wf, id, &s);
  ck_assert_msg(rc == 0, "status %s/%s: %d", wf, id, rc);
  return duro_status_name(s);
}

json_t *harness_step(json_t *desc, const char *key) {
  size_t i;
  json_t *s;
  json_array_foreach(json_object_get(desc, "steps"), i, s) {
    if (!strcmp(json_string_value(json_object_get(s, "key")), key))
      return s;
  }
  return NULL;
}

int harness_wait_for(pthread_mutex_t *mu, pthread_cond_t *cv,
                     int (*pred)(void)) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 60;
  pthread_mutex_lock(mu);
  int ok;
  while (!(ok = pred()) && pthread_cond_timedwait(cv, mu, &until) == 0)
    ;
  pthread_mutex_unlock(mu);
  return ok;
}
