/* harness.h — what the engine suites share: an engine on a fresh database
 * in a temporary directory, a virtual clock, and in-process workflows.
 *
 * Workflows in a test binary are written exactly as in a plugin, against
 * duro.h; the harness points the plugin-side API pointer at the host's
 * table, as the loader's bind() does for a real plugin. */
#ifndef DURO_TEST_HARNESS_H
#define DURO_TEST_HARNESS_H

#include <check.h>
#include <jansson.h>

#include <pthread.h>

#include "clock.h"
#include "duro.h"
#include "engine.h"
#include "ledger.h"
#include "view_instance.h"

#define T0_MS 1767225600000LL /* 2026-01-01T00:00:00Z */

typedef struct harness {
  char dir[256];
  char db[300];
  duro_clock clock;
  duro_engine *e;
} harness;

/* Opens an engine with workers = 0 on a new database and a virtual clock
 * at T0_MS.  Register workflows with harness_register, then call
 * harness_start. */
void harness_open(harness *h);
/* The same with `workers` threads on the real clock: activations run as
 * in the host (harness_run and harness_advance are not for it). */
void harness_open_workers(harness *h, uint32_t workers);
/* The same on the virtual clock (h->clock): the watchdog and the
 * scheduler threads run, but only the test moves the time they read. */
void harness_open_workers_virtual(harness *h, uint32_t workers);
/* Closes and reopens the engine on the same database (a clean restart). */
void harness_reopen(harness *h);
/* Closes the engine, lets `ms` pass on the virtual clock with no engine
 * running, then opens and starts it again (ticks, wakes and leases that
 * came meanwhile are found by the new one). */
void harness_down_for(harness *h, int64_t ms);
/* harness_open on a journal of another backend (store/backend.h):
 * `path` is what it opens (PostgreSQL: a connection string), which must
 * hold no journal yet; harness_close removes nothing there. */
struct store_backend;
void harness_open_backend(harness *h, const struct store_backend *be,
                          const char *path);
/* The backend the harness's engines journal on (NULL = SQLite), for an
 * engine a test opens itself on h->db. */
const struct store_backend *harness_backend(void);
/* Opens h->db as the engine does (on harness_backend()), for a test that
 * writes rows behind the engine's back; the test closes it. */
struct journal;
struct journal *harness_journal_open(harness *h);
/* Reopens the engine with max_runnable and max_queued (0: defaults). */
void harness_set_backlog_limits(harness *h, size_t max_runnable,
                                size_t max_queued);
/* Reopens the engine with max_instance_state = bytes. */
void harness_set_state_limit(harness *h, int64_t bytes);
/* Reopens the engine with storage.encryption's keys `c` (borrowed: the
 * test frees it after harness_close; NULL: none). */
struct journal_crypt;
void harness_set_crypt(harness *h, const struct journal_crypt *c);
/* Reopens the engine with the crash ledger `l` (borrowed; the test frees
 * it after harness_close) and engine.max_crashes = crashes (0: default):
 * its start records what the ledger's last view holds. */
void harness_set_ledger(harness *h, ledger *l, uint32_t crashes);
void harness_start(harness *h);
void harness_close(harness *h);
void harness_register(harness *h, const char *name, duro_run_fn run);
/* harness_register with limits (which must outlive the harness: a
 * reopen registers them again). */
void harness_register_limits(harness *h, const char *name, duro_run_fn run,
                             const duro_workflow_limits *limits);
/* Registers a workflow with a binding name, so that steps can reach it with
 * duro_env_workflow(env, binding).  `name` and `binding` must outlive the
 * harness (string literals): harness_reopen registers them again. */
void harness_register_binding(harness *h, const char *name, const char *binding,
                              duro_run_fn run);

/* Registers a queue (opt NULL: the defaults), again at each reopen before
 * the engine starts, as the host does; name and opt's strings must
 * outlive the harness. */
struct duro_queue_options;
void harness_register_queue(harness *h, const char *name,
                            const struct duro_queue_options *opt);

/* Registers a pipeline (pipeline.h), again at each reopen before the
 * engine starts, as the host does; name and opt's strings must outlive
 * the harness.  harness_run writes its due batches. */
struct duro_pipeline_options;
void harness_register_pipeline(harness *h, const char *name,
                               const struct duro_pipeline_options *opt);
/* Registers a shared resource (resources.h), again at each reopen before
 * the engine starts, as the host does; name must outlive the harness. */
struct duro_resource_options;
void harness_register_resource(harness *h, const char *name,
                               const struct duro_resource_options *opt);

/* Registers a cron trigger (trigger.h) and a plugin's scheduled handler,
 * again at each reopen before the engine starts, as the host does; the
 * strings must outlive the harness.  harness_run fires the due ticks. */
struct duro_cron_spec;
void harness_register_cron(harness *h, const struct duro_cron_spec *spec);
void harness_set_cron_handler(harness *h, const char *plugin,
                              duro_scheduled_fn fn);

/* Advances the virtual clock and runs every activation that becomes due. */
size_t harness_advance(harness *h, int64_t ms);
size_t harness_run(harness *h);

/* Waits, holding mu, until pred() holds or 60 s pass (cv is broadcast
 * when what pred reads changes): whether it held.  For cases whose
 * activations run on real engine threads. */
int harness_wait_for(pthread_mutex_t *mu, pthread_cond_t *cv,
                     int (*pred)(void));

/* Creates instance `id` of wf with `params` (NULL: null) and its own
 * timeout (0: the workflow's), asserting it was created. */
void harness_create(harness *h, const char *wf, const char *id,
                    const char *params, int64_t timeout_ms);

/* The instance's describe JSON (test fails when missing); caller decrefs. */
json_t *harness_describe(harness *h, const char *wf, const char *id);
/* The instance's status name ("complete", ...). */
const char *harness_status(harness *h, const char *wf, const char *id);
/* The step `key` in a describe JSON, or NULL. */
json_t *harness_step(json_t *desc, const char *key);

#endif
