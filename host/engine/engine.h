/* engine.h — durable workflow instances: the lifecycle API the CLI, the
 * HTTP API and the tests call, and the driving of activations.
 *
 * The engine owns the journal (one SQLite file), the registry of workflows,
 * the set of runnable instances and the worker threads that run
 * activations.  A waiting instance lives only in the database: its wake
 * time is an indexed column, not a timer or a thread.
 *
 * Two ways to drive it:
 *  - workers > 0: duro_engine_start() recovers and starts the threads; the
 *    host loop calls duro_engine_poll_due() when duro_engine_next_wake()
 *    passes (on_wake_change says when that time moved earlier).
 *  - workers = 0 (tests): nothing runs until duro_engine_run_until_idle(),
 *    which runs every runnable activation on the calling thread, so a test
 *    with a virtual clock is deterministic.
 *
 * All functions return 0 or a negative DURO_E_* code (error.h). */
#ifndef DURO_ENGINE_H
#define DURO_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "api.h"  /* duro_host_api(), for those that load plugins */
#include "attr.h" /* search attributes */
#include "clock.h"
#include "duro.h"
#include "ids.h"    /* the ids the engine takes (duro_instance_id_valid) */
#include "status.h" /* duro_status and its names */

typedef struct duro_engine duro_engine;

typedef struct duro_engine_options {
  const char *db_path; /* SQLite file; created if missing */
  /* The journal's backend (store/backend.h), borrowed; NULL = SQLite.
   * Another one opens db_path as its own (PostgreSQL: a connection
   * string).  For tests: the configuration does not set it yet. */
  const struct store_backend *backend;
  int synchronous_full; /* 1: fsync every commit (default); 0: normal */
  int read_only;        /* open the journal read-only (a dry run) */
  /* Joins the store as one of the hosts that share it (journal_join; a
   * PostgreSQL store): this engine then runs only the instances it owns,
   * and takes over those of hosts whose lease ran out.  duro run sets it;
   * an engine that does not runs the instances of no host (tests). */
  int join_store;
  /* The lease of a joined host: renewed every third of it; a host that
   * did not renew it for this long is taken as gone.  0 = 5 s. */
  int64_t lease_ms;
  /* Called (from a thread of the journal's) when this host's lease was
   * found lost: another host took over its instances, so nothing it
   * still runs can be written; the host should exit.  NULL: logged. */
  void (*on_lease_lost)(void *ctx);
  /* Called (from the scheduler thread) when this host took over other
   * hosts' instances, before any of them runs: the host loads the builds
   * they are pinned to (duro_engine_build_fetch). */
  void (*on_takeover)(void *ctx);
  /* Called (from a control request's thread) when an instance needs a
   * build its workflow no longer has: a restart from a step replays the
   * journal on the build it ran on, a resume of an instance paused for
   * want of its build.  The host loads build `hash` (from its build store,
   * or the database's) and gives it to `workflow`: 0, or -1 with why in
   * err.  NULL: such a restart is refused. */
  int (*load_build)(void *ctx, const char *workflow, const char *hash,
                    char *err, size_t errlen);
  /* Called (on the activation's thread) each time plugin code of build
   * `build` of `workflow` crashed the process it ran in and the crash was
   * charged to the build: a crash its handler saw, or a SIGKILL no handler
   * saw that was blamed on a step charged before (a suspect that died
   * again alone), never a first kill from outside.  `attempts` is how
   * many attempts of that build of that workflow ended in its workers so
   * far, this one included (duro_engine_build_attempts).  The host may
   * hold the build.  NULL: nobody counts. */
  void (*on_build_crash)(void *ctx, const char *workflow, const char *build,
                         uint64_t attempts);
  uint32_t workers;        /* activation threads; 0 = run_until_idle only */
  int64_t max_step_result; /* bytes; 0 = 1 MiB */
  /* bytes of params, step results and errors per instance; 0 = 1 GiB */
  int64_t max_instance_state;
  duro_clock *clock; /* NULL = real clock; borrowed */
  /* The crash ledger (engine/ledger.h), borrowed: shared with the
   * supervisor under `duro run`.  NULL = a private one (nothing outlives
   * a crash).  Its slots must be at least ledger_slots_for(workers). */
  struct ledger *ledger;
  /* Crashes of one step after which its instance ends errored with
   * plugin.crashed; 0 = 3. */
  uint32_t max_crashes;
  /* Workers stuck in hung attempts that get a replacement; 0 = as many
   * as `workers`. */
  uint32_t max_hung;
  /* Queued instances kept runnable in memory; past it a backlog stays in
   * the journal and is pulled in as workers free up; 0 = 10000. */
  size_t max_runnable;
  /* Creations are refused with DURO_E_OVERLOADED while this many
   * instances are queued; 0 = never. */
  size_t max_queued;
  /* Called (from any thread) when the earliest wake time may have moved
   * earlier; the host re-arms its timer from duro_engine_next_wake(). */
  void (*on_wake_change)(void *ctx);
  /* Called (from a worker) after an activation stored an ended status
   * (complete, errored, terminated); for benchmarks and embedders. */
  void (*on_instance_end)(void *ctx, duro_status status);
  /* The keys of storage.encryption (store/journal_crypt.h), borrowed: the
   * journal's values are sealed with its active key and opened with any
   * of them.  NULL: written as they are. */
  const struct journal_crypt *crypt;
  void *ctx;
} duro_engine_options;

/* A concurrency rule of a workflow's flow control (flow/flow.c): at most
 * `limit` of its activations run at once among the instances whose
 * params hold the same value at `key` (a JSON pointer such as
 * "/customerId"; NULL: the whole workflow).  An instance whose params
 * lack the key is not limited by the rule. */
typedef struct duro_flow_concurrency {
  const char *key;
  uint32_t limit;
} duro_flow_concurrency;
#define DURO_FLOW_MAX_RULES 8

/* duro_workflow_limits.flow_singleton_mode */
enum { DURO_SINGLETON_SKIP = 1, DURO_SINGLETON_QUEUE = 2 };

/* A rate rule of a workflow's flow control: at most `limit` instances
 * start per `period_ms` among those whose params hold the same value at
 * `key` (NULL: the whole workflow), `burst` of them at once (0: 1),
 * spaced evenly; an instance over it waits queued for its turn, first
 * come first served per key.  A start is an instance's first activation:
 * its later ones (after a sleep, an event) are not held back. */
typedef struct duro_flow_rate {
  const char *key;
  uint32_t limit;
  int64_t period_ms;
  uint32_t burst;
} duro_flow_rate;

/* A weight of flow.fairness: the lane of `value` (the fairness key's
 * value: a string's text, or another value's JSON) takes `weight` turns
 * a round. */
typedef struct duro_flow_weight {
  const char *value;
  uint32_t weight;
} duro_flow_weight;
#define DURO_FLOW_MAX_WEIGHTS 1000
#define DURO_FLOW_PRIORITY_MAX 1000000

/* The order a flow key's backlog is served in (flow/backlog.h): by the
 * integer at `priority_key` in the params (highest first; absent or not
 * an integer in +-DURO_FLOW_PRIORITY_MAX: priority_default), first come
 * first served among equals; and with `fairness_key`, round the values
 * of that key, `weights` turns a round each (1 for a value not listed).
 * NULL keys: neither. */
typedef struct duro_flow_order {
  const char *priority_key;
  int64_t priority_default;
  const char *fairness_key;
  const duro_flow_weight *weights;
  size_t n_weights;
} duro_flow_order;

typedef struct duro_workflow_limits {
  int64_t retention_ms; /* how long an ended instance is kept; 0 = 30 days */
  /* The same for one that ended errored, or terminated, chosen at its
   * end: 0 = retention_ms.  (A create's own retention wins over all.) */
  int64_t retention_errored_ms, retention_terminated_ms;
  /* How long an instance may take from its creation before it ends
   * errored (instance.timed_out); 0 = no limit. */
  int64_t timeout_ms;
  /* on_timeout: past its deadline an instance runs the rollbacks of its
   * completed steps first (1, `rollback`), or ends at once (0, `error`,
   * the default). */
  int rollback_on_timeout;
  uint32_t max_steps; /* 0 = 10000 */
  /* The log lines (its plugin code's duro_log) an instance keeps, the
   * oldest deleted past it; 0 = 1000. */
  uint32_t max_logs;
  uint32_t concurrency; /* running activations at once; 0 = unlimited */
  /* flow.concurrency: rules by key (copied at registration; at most
   * DURO_FLOW_MAX_RULES); n_flow_concurrency 0 = none. */
  const duro_flow_concurrency *flow_concurrency;
  size_t n_flow_concurrency;
  /* flow.rate: the same for rates (at most DURO_FLOW_MAX_RULES). */
  const duro_flow_rate *flow_rate;
  size_t n_flow_rate;
  /* flow.on_excess: reject: a create over a rule is refused
   * (DURO_E_FLOW_REJECTED, HTTP 429) rather than queued; a rate is then
   * counted as instances are created. */
  int flow_reject;
  /* flow.priority and flow.fairness (copied at registration). */
  duro_flow_order flow_order;
  /* flow.singleton (flow/singleton.c): at most one live instance (created
   * and not ended) per value of the params' JSON pointer
   * flow_singleton_key (copied); an instance whose params lack it is not
   * limited.  DURO_SINGLETON_SKIP: a create whose key has a live instance
   * creates nothing and answers with that one's id; DURO_SINGLETON_QUEUE:
   * every create creates, each instance's start waits queued until it is
   * the oldest live one of its key (with flow_reject: a create whose key
   * has a live instance is refused instead).  0: none. */
  const char *flow_singleton_key;
  int flow_singleton_mode;
  /* flow.debounce (flow/debounce.c): the creates whose params hold the
   * same value at flow_debounce_key (copied; NULL: the whole workflow is
   * one key) within flow_debounce_ms of the last are one instance, which
   * takes each one's params and starts once its key has been quiet that
   * long, or flow_debounce_max_wait_ms (0: no bound) after its first
   * create.  0: none. */
  const char *flow_debounce_key;
  int64_t flow_debounce_ms;
  int64_t flow_debounce_max_wait_ms;
  /* A duro_do_all's branches running at once when the call names no
   * bound; 0 = 100. */
  uint32_t parallel;
  /* on_divergence: a replay that diverges pauses the instance (1) rather
   * than erroring it (0, the default). */
  int pause_on_divergence;
  /* versioning: every activation runs the newest build (1, `latest`), or
   * an instance runs the build it started on until it ends (0, `pinned`,
   * the default). */
  int versioning_latest;
  /* A registered queue that gets a message each time an instance starts,
   * completes, errors or is terminated, in the same commit (copied);
   * NULL = none. */
  const char *lifecycle_queue;
  /* Code that runs on the engine's own threads (a plugin with workers:
   * 0): the plugin's name (copied), shared by its workflows, and how many
   * engine threads its step callbacks may hold at once; a callback past
   * it waits, taking no thread, until one of them returns.  0 = half the
   * engine's threads; at most all of them but one.  NULL = no bound. */
  const char *plugin;
  uint32_t plugin_threads;
  /* index: its search attributes (copied; at most DURO_ATTR_MAX, valid
   * names and pointers), each taken from the params at create and
   * settable from its code; n_index 0: none. */
  const duro_attr_decl *index;
  size_t n_index;
} duro_workflow_limits;

/* Opens (creating if needed) the journal. On error *err names the file. */
int duro_engine_open(const duro_engine_options *opt, duro_engine **out,
                     char *err, size_t errlen);

/* Registers a workflow before start. `name` and `binding` are copied;
 * `build` is the plugin build identity recorded on each attempt (may be
 * NULL). */
int duro_engine_register(duro_engine *e, const char *name, const char *binding,
                         duro_run_fn run, const duro_workflow_limits *limits,
                         const char *build);

/* Changes a registered workflow's retention (the three retention_*_ms of
 * `retention`, the only fields read, NULL for the defaults: of the
 * instances that end from now on, but those whose create gave their own)
 * and timeout (of the instances created from now on), limits.steps
 * (checked at each new step), limits.parallel and on_timeout (read at
 * each deadline) while the engine runs (a config reload); 0 values are
 * the defaults.  DURO_E_NOT_FOUND for an unknown workflow. */
int duro_engine_set_limits(duro_engine *e, const char *name,
                           const duro_workflow_limits *retention,
                           int64_t timeout_ms, uint32_t max_steps,
                           uint32_t parallel, int rollback_on_timeout);

/* Adds a build of registered workflow `workflow`: newest = 1 makes it the
 * one new instances (and every activation under versioning: latest) run
 * from now on; newest = 0 keeps it as an older build for the instances
 * pinned to it (at start, from the build store).  A hash already present
 * only becomes the newest.  Safe while the engine runs (a reload). */
int duro_engine_add_build(duro_engine *e, const char *workflow,
                          const char *hash, duro_run_fn run, int newest);

/* Gives build `hash` of `workflow` a context its run() reads with
 * step_build_ctx (step.h): a run() that stands in for code elsewhere (a
 * worker process's) learns which code.  The context outlives the build
 * (its owner frees it after the engine closes). */
int duro_engine_build_set_ctx(duro_engine *e, const char *workflow,
                              const char *hash, void *ctx);

/* Build `hash` of `workflow` was built against a duro.h whose
 * duro_step_config is `size` bytes (its plugin's layout fingerprint): the
 * step runner reads no member past it (an older minor's plugin hands
 * smaller structs).  Without this call, this host's size. */
int duro_engine_build_set_step_config_size(duro_engine *e, const char *workflow,
                                           const char *hash, uint16_t size);

/* Holds build `hash` of `workflows` (a plugin's; a crash-storm
 * breaker's hold, say): an activation of an instance of one of them that
 * would run that build runs none of its code and waits instead, status
 * waiting with wait_type `reason` (copied; at most 100 bytes), until it
 * is woken.  Holding a held build again only changes its reason. */
int duro_engine_hold_build(duro_engine *e, const char *const *workflows,
                           size_t n, const char *hash, const char *reason);
/* Lets build `hash` of `workflows` run again and wakes the instances
 * waiting with its reason (*woken, may be NULL, gets how many);
 * DURO_E_NOT_FOUND when it was not held. */
int duro_engine_release_build(duro_engine *e, const char *const *workflows,
                              size_t n, const char *hash, size_t *woken);
/* How many attempts of build `hash` of `workflow` ended in its worker
 * processes since this engine gave the workflow that build (a count that
 * only grows, kept without a lock on the step's path), into *n;
 * DURO_E_NOT_FOUND when the workflow has no such build. */
int duro_engine_build_attempts(duro_engine *e, const char *workflow,
                               const char *hash, uint64_t *n);
/* Wakes this host's instances waiting with wait_type `reason` to look
 * again at the build they would run (another became the newest): those
 * whose build is still held wait on, unless they ran no step on it (their
 * journal holds no outcome of it): those move to the newest build when it
 * is not held (build_acquire_unless_held). */
int duro_engine_wake_held(duro_engine *e, const char *reason, size_t *woken);
/* Calls fn for each of this host's instances waiting with wait_type
 * `reason`. */
int duro_engine_waiting_on(duro_engine *e, const char *reason,
                           void (*fn)(void *ctx, int64_t rowid,
                                      const char *workflow),
                           void *ctx);

/* Drops a build that is not the newest, once no activation runs it and no
 * instance that has not ended is pinned to it: 0 (the caller may unload
 * its code now), DURO_E_BUSY while still needed, DURO_E_NOT_FOUND. */
int duro_engine_retire_build(duro_engine *e, const char *workflow,
                             const char *hash);

/* The same for every workflow of one plugin at once, since they share the
 * code: the build goes from all of `workflows` (those that have it), or
 * from none while any of them still needs it (DURO_E_BUSY).  A build
 * dropped from one workflow while another still runs it would be loaded
 * and yet missing for the first one's instances that come to need it
 * (taken over from another host, restarted from a step). */
int duro_engine_retire_build_all(duro_engine *e, const char *const *workflows,
                                 size_t n, const char *hash);

/* On a store several hosts share, the plugin builds they may need of each
 * other (journal_build_put and _get): share offers the build file at
 * `path` (or says it is still loaded here), fetch writes build `hash` to
 * `path` (DURO_E_NOT_FOUND when no host shared it), prune drops those no
 * host has offered for `unseen_ms` and no instance needs.  On a store
 * with one host they do nothing (fetch: DURO_E_NOT_FOUND). */
int duro_engine_build_share(duro_engine *e, const char *hash,
                            const char *plugin, const char *path);
int duro_engine_build_fetch(duro_engine *e, const char *hash, const char *path);
int duro_engine_builds_prune(duro_engine *e, int64_t unseen_ms, size_t *n);

/* Calls fn for each (workflow, build) instances that have not ended are
 * pinned to, with how many. */
int duro_engine_pinned_builds(duro_engine *e,
                              void (*fn)(void *ctx, const char *workflow,
                                         const char *build, int64_t n),
                              void *ctx);

/* How an instance's replay on another build went. */
typedef enum duro_dry_run_outcome {
  DURO_DRY_RUN_REPLAYS = 0, /* its journal replays; it would go on */
  DURO_DRY_RUN_COMPLETES,   /* it would complete */
  DURO_DRY_RUN_DIVERGED,    /* the code asks for steps its journal lacks */
  DURO_DRY_RUN_UNREADABLE,  /* its rows could not be read */
} duro_dry_run_outcome;
/* "replays", "completes", "diverged", "unreadable" (builds.c). */
const char *duro_dry_run_outcome_name(duro_dry_run_outcome o);

typedef struct duro_dry_run_instance {
  char *id;      /* NULL when unreadable (then rowid says which) */
  int64_t rowid; /* its row in the journal */
  duro_dry_run_outcome outcome;
  uint32_t journaled; /* the steps it replayed */
  char *next;         /* the step it would run or wait at next; or NULL */
  /* diverged: the error (replay.diverged) and why; unreadable: the
   * journal's message in error_message.  NULL otherwise. */
  char *error_name, *error_message;
  /* diverged: the step the code asked for ("rest#1"), and the one its
   * journal has at that call ("cool off#1"; NULL: none there, the code
   * asked for more steps or for one the journal has elsewhere). */
  char *code_step, *journal_step;
} duro_dry_run_instance;

typedef struct duro_dry_run_report {
  char *workflow;
  duro_dry_run_instance *v; /* in the order of the stored statuses */
  size_t n;
  size_t diverged; /* of them */
} duro_dry_run_report;

/* Replays every instance of `workflow` that has not ended on `run` (the
 * workflow's class in another build) without running, waiting or writing
 * anything, to see whether a deploy would diverge, into *out (caller
 * clears; empty on an error).  Open the engine with read_only to run it
 * beside a live host.  The JSON is duro_engine_dry_run
 * (views/view_dry_run.h). */
int duro_engine_dry_run_report(duro_engine *e, const char *workflow,
                               duro_run_fn run, duro_dry_run_report *out);
void duro_dry_run_report_clear(duro_dry_run_report *r);

/* Recovers instances left queued/running by a crash and starts workers. */
int duro_engine_start(duro_engine *e);

/* Stops workers after their activations end (each suspends at its next
 * step boundary), waiting at most grace_ms (< 0: as long as it takes).
 * Returns how many attempts were still running when it gave up; then the
 * engine must not be closed (threads still use it): the process exits. */
uint32_t duro_engine_stop(duro_engine *e, int64_t grace_ms);

/* duro_engine_stop without a deadline, then closes the journal and frees
 * the engine (left allocated if a hung attempt's thread still runs). */
void duro_engine_close(duro_engine *e);

/* An attempt the watchdog gave up on whose thread still runs: its
 * worker is stuck in the plugin's callback. */
typedef struct duro_hung_attempt {
  char *workflow, *id, *step;
  uint32_t attempt;
  int64_t running_ms; /* since the attempt began */
} duro_hung_attempt;

/* A feature's handler past its deadline whose thread has not returned
 * (a queue consumer's batch). */
typedef struct duro_hung_handler {
  char *queue;  /* where its batch came from */
  char *plugin; /* NULL: not known */
  uint64_t messages;
  int64_t running_ms, timeout_ms;
} duro_hung_handler;

typedef enum duro_health_part_kind {
  DURO_HEALTH_TEXT,          /* a word */
  DURO_HEALTH_HUNG_HANDLERS, /* handlers past their deadline */
} duro_health_part_kind;

/* What a driver (driver.h) adds to the report, under a key of its own. */
typedef struct duro_health_part {
  char *key;
  duro_health_part_kind kind;
  char *text;                  /* DURO_HEALTH_TEXT */
  duro_hung_handler *handlers; /* DURO_HEALTH_HUNG_HANDLERS */
  size_t n_handlers;
} duro_health_part;

typedef struct duro_health_parts {
  duro_health_part *v;
  size_t n;
} duro_health_parts;

/* The engine's health, for /healthz: degraded while journal writes fail,
 * while a hung attempt's thread still runs, or when a driver says so. */
typedef struct duro_health_report {
  int degraded;
  duro_health_parts parts; /* the drivers', in their order */
  int64_t host_id;         /* among hosts sharing the store; 0: alone */
  int64_t host_lease_ms;
  char *storage_error; /* why writes fail; NULL while they succeed */
  duro_hung_attempt *hung;
  size_t n_hung;
  uint32_t stuck_workers, stuck_cap; /* workers stuck, and their cap */
} duro_health_report;

/* The report as it is now, into *out (caller clears).  engine/health.c;
 * the JSON of /healthz is duro_engine_health (views/view_health.h). */
void duro_engine_health_report(duro_engine *e, duro_health_report *out);
void duro_health_report_clear(duro_health_report *r);

/* A host's counts: its counters since it started, and its gauges (the
 * instances queued for a worker, in memory or only in the journal; those
 * runnable, running or under a control operation) when it gave them.  A
 * host gives them to the others with each renewal of its lease. */
typedef struct duro_host_counts {
  int64_t activations, steps_completed, attempts_failed, retries;
  int64_t instances_created, events_sent;
  int64_t backlog, in_flight;
} duro_host_counts;

/* The hosts sharing this engine's store (GET /hosts): on a shared store
 * those alive and those found dead within a day, by id; on a store one
 * host has to itself, this host alone (id 0, shared 0).  Times in ms
 * (the database server's clock on a shared store); `alive` a host whose
 * lease holds (its heartbeat within its lease, not found dead); `live`
 * the instances it owns that have not ended (on a store of one host, all
 * of them); `counts` as it last gave them (this host's as they are now),
 * `counted` 0 for a host that gave none yet.  `totals`: the gauges and
 * `live` of the hosts alive, the counters of every host listed. */
typedef struct duro_host_info {
  int64_t id;
  char *name; /* its machine's */
  int64_t pid;
  int64_t started_ms, heartbeat_ms, heartbeat_age_ms, lease_ms;
  int dead, alive, me;
  int64_t live;
  int counted;
  duro_host_counts counts;
} duro_host_info;
typedef struct duro_host_list {
  duro_host_info *v;
  size_t n;
  int shared;
  duro_host_counts totals;
  int64_t live_total;
} duro_host_list;
int duro_hosts_read(duro_engine *e, duro_host_list *out);
void duro_host_list_free(duro_host_list *l);
/* 1 while journal writes fail, with why into msg (the report's
 * storage_error, e.g. the database file deleted under the host), else 0;
 * cheap enough for every refused write's answer. */
int duro_engine_storage_error(duro_engine *e, char *msg, size_t len);

/* Runs runnable activations on this thread until none is left (queues due
 * wakes first). Returns how many activations ran. */
size_t duro_engine_run_until_idle(duro_engine *e);

/* The earliest wake time of a waiting instance (Unix ms), INT64_MAX if
 * none. */
int64_t duro_engine_next_wake(duro_engine *e);

/* Makes every waiting instance whose wake time has passed runnable. */
void duro_engine_poll_due(duro_engine *e);

/* Deletes ended instances whose retention has run out (params, output,
 * steps, attempts, events); their ids become free again.  *swept (may be
 * NULL) receives how many. */
int duro_engine_sweep(duro_engine *e, size_t *swept);
/* The same, deleting at most `limit` (at most 1000) in one transaction. */
int duro_engine_sweep_some(duro_engine *e, size_t limit, size_t *swept);

/* One pass of the scheduler thread (engine/scheduler.c): due wakes,
 * each driver's dispatch (queue consumers, cron ticks: driver.h), a
 * bounded step of the retention sweep...  An
 * engine started with workers = 0 has no scheduler thread, so a test can
 * run passes itself.  Returns how long (ms) the thread would wait before
 * the next pass: 0 when it would run one at once (more work waits). */
int64_t duro_engine_scheduler_pass(duro_engine *e);

/* ---- instances ---------------------------------------------------------- */

/* Creates an instance.  id NULL = a random id; params NULL = "null";
 * retention_ms < 0 = the workflow's.  *id_out (may be NULL) receives the
 * id, malloc'ed, the caller frees it: under flow.singleton's skip mode
 * or flow.debounce, the id of its key's live instance when one was
 * (nothing created). */
int duro_instance_create(duro_engine *e, const char *workflow, const char *id,
                         const char *params, int64_t retention_ms,
                         char **id_out);

/* Event types beginning so are the host's own (a child workflow's end):
 * no client or plugin may send one (DURO_E_INVALID_ARGUMENT). */
#define DURO_RESERVED_EVENT_PREFIX "duro."
#define DURO_RESERVED_EVENT_PREFIX_LEN 5

typedef struct duro_create_req {
  const char *id;       /* NULL = random */
  const char *params;   /* NULL = "null" */
  int64_t retention_ms; /* < 0 = the workflow's */
  int64_t timeout_ms;   /* 0 = the workflow's (if any) */
  /* The caller's W3C traceparent, or NULL: the instance's trace
   * continues it.  One that is not valid is ignored, never an error. */
  const char *traceparent;
} duro_create_req;

/* A request of a batch the engine refused. */
typedef struct duro_create_error {
  size_t index; /* in the batch */
  char *id;     /* NULL: none was asked for or drawn yet */
  int code;     /* DURO_E_* (error.h: its name and message) */
  /* DURO_E_FLOW_REJECTED: when the request may succeed, ms from now */
  int64_t retry_after_ms;
} duro_create_error;

/* How a request was answered without a creation (duro_create_result's
 * skipped[i]): flow.singleton's skip mode, or flow.debounce, whose
 * instance took the request's params. */
enum { DURO_CREATE_SKIPPED = 1, DURO_CREATE_DEBOUNCED = 2 };

/* What a batch of creations did: the ids created and the requests
 * refused, each in request order.  Duplicates (within the batch or
 * existing) land in errors.  A request answered by its key's live
 * instance (nothing created: flow.singleton's skip mode, flow.debounce)
 * has that instance's id in `created`, in its place, and skipped[i] says
 * how (DURO_CREATE_*): a caller that knows nothing of them follows the
 * instance that does the work. */
typedef struct duro_create_result {
  char **created;
  size_t n_created;
  duro_create_error *errors;
  size_t n_errors;
  /* NULL when every request created, else n_created DURO_CREATE_* or 0 */
  unsigned char *skipped;
  size_t n_skipped;
} duro_create_result;
void duro_create_result_free(duro_create_result *r);

/* Creates many in one commit into *out (caller frees with
 * duro_create_result_free; empty when the call fails).  A refused
 * request never fails the call.  The JSON is duro_instance_create_batch
 * (views/view_instance.h). */
int duro_instance_create_many(duro_engine *e, const char *workflow,
                              const duro_create_req *reqs, size_t n,
                              duro_create_result *out);

/* The same without waiting: returns DURO_E_WORKFLOW_NOT_FOUND, or 0 and
 * then calls done(ctx, rc, result) exactly once — with rc 0 and the
 * result as above once the batch is on disk (what *result holds is
 * done's: duro_create_result_free, or taken), or with a storage error and
 * NULL — on the thread that commits the batch, never this one: a caller
 * that must not wait for a disk (the HTTP loop) may call it.  done must
 * not block: many creations share the commit it runs after.  reqs are
 * copied. */
typedef void (*duro_create_done_fn)(void *ctx, int rc,
                                    duro_create_result *result);
int duro_instance_create_batch_async(duro_engine *e, const char *workflow,
                                     const duro_create_req *reqs, size_t n,
                                     duro_create_done_fn done, void *ctx);

/* A time an instance, a step or an attempt has not reached (yet): its
 * JSON is null. */
#define DURO_NO_TIME INT64_MIN

/* One attempt of a do step: the failed ones as the journal keeps them,
 * and the one that succeeded (kept in its step's row), last. */
typedef struct duro_attempt_info {
  uint32_t number;
  duro_attempt_outcome outcome;
  int64_t started_ms, ended_ms; /* DURO_NO_TIME when none */
  char *error; /* JSON text ({"name","message"}); NULL when it succeeded */
  char *build; /* the build it ran on, or NULL */
} duro_attempt_info;

/* A journaled step, with its attempts (a do step's; none for the others). */
typedef struct duro_step_info {
  char *key; /* "name#count" */
  char *name;
  uint32_t count;
  duro_step_kind kind;
  duro_step_status status;
  char *result; /* JSON text, or NULL */
  char *error;  /* JSON text ({"name","message"}), or NULL */
  int64_t started_ms, ended_ms, wake_ms; /* DURO_NO_TIME when none */
  duro_attempt_info *attempts;
  size_t n_attempts;
} duro_step_info;

/* An event the instance received. */
typedef struct duro_event_info {
  char *type;
  char *payload; /* JSON text, or NULL */
  int64_t sent_ms;
  char *consumed_by; /* the key of the step that took it; NULL: pending */
} duro_event_info;

/* An instance as a reader sees it.  duro_instance_read fills it all;
 * duro_instance_read_summary only what its row holds, up to wake_ms (the
 * rest stays 0 and NULL).  User data (params, output, errors, results,
 * payloads) is the JSON text the journal keeps. */
/* Another instance, as a parent or a child names it. */
typedef struct duro_instance_ref {
  char *workflow, *id;
  duro_status status;
} duro_instance_ref;

typedef struct duro_instance_info {
  char *id, *workflow;
  /* Live: "running" (or "waitingForPause", or "terminated" once a
   * terminate is pending) while an activation holds it. */
  duro_status status;
  char *params; /* JSON text, or NULL */
  char *output; /* JSON text, or NULL */
  char *error;  /* JSON text ({"name","message"}), or NULL */
  int64_t created_ms, started_ms, ended_ms, wake_ms; /* or DURO_NO_TIME */
  /* When it times out (its timeout from creation), or DURO_NO_TIME. */
  int64_t deadline_ms;
  duro_step_info *steps; /* in the journal's order */
  size_t n_steps;
  char *build; /* the build it is pinned to, or NULL */
  /* The builds its attempts ran on, oldest first, once each; more than
   * one means its code changed while it was in flight (versioning:
   * latest, or a restart on another build). */
  char **builds;
  size_t n_builds;
  /* How many times it was restarted: the "@n" of its idempotency keys. */
  int64_t restarts;
  duro_event_info *events; /* in arrival order */
  size_t n_events;
  /* The event type it is blocked on, NULL when it waits for none (only a
   * waiting or paused instance still waits): what a sender needs to move
   * it on. */
  char *wait_type;
  /* The instance that started it (duro_child_start), NULL when none or
   * gone (retention), and those it started, oldest first. */
  char *parent_workflow, *parent_id;
  duro_instance_ref *children;
  size_t n_children;
  /* Its search attributes in name order (duro_instance_read only; names
   * and strings its own). */
  duro_attr *attrs;
  size_t n_attrs;
} duro_instance_info;

/* The instance with its steps, their attempts and its events into *out
 * (caller frees with duro_instance_info_free; zeroed on an error).  The
 * JSON of GET .../instances/{id} is duro_instance_describe
 * (views/view_instance.h). */
int duro_instance_read(duro_engine *e, const char *workflow, const char *id,
                       duro_instance_info *out);

/* The instance from its row alone (no step, attempt or event is read),
 * for clients that poll or wait: id, workflow, status, params, output,
 * error and times.  The JSON is duro_instance_summary (view_instance.h). */
int duro_instance_read_summary(duro_engine *e, const char *workflow,
                               const char *id, duro_instance_info *out);
void duro_instance_info_free(duro_instance_info *in);

/* The instance's rows as its journal holds them (store/journal.h's
 * journal_rows: the row, the steps, the failed attempts and the events),
 * read and never changed, for a copy of it elsewhere; *read_ms (may be
 * NULL) gets the engine clock's now.  Caller frees with
 * journal_rows_free.  DURO_E_WORKFLOW_NOT_FOUND, DURO_E_INVALID_ID,
 * DURO_E_NOT_FOUND.  The document is duro_instance_export
 * (views/view_journal.h). */
struct journal_rows;
int duro_instance_rows(duro_engine *e, const char *workflow, const char *id,
                       struct journal_rows *out, int64_t *read_ms);

/* The status alone. */
int duro_instance_status(duro_engine *e, const char *workflow, const char *id,
                         duro_status *out);

/* ---- waiting for an instance to end (watch.c) ---------------------------
 *
 * Waiters cost no thread: a watch is a callback kept in a map by instance
 * and called by whichever engine thread stored the instance's end, once
 * that row is committed (so a read from fn's caller onwards sees it). */

typedef struct duro_watch duro_watch;
/* status: "complete", "errored" or "terminated" (duro_status_name), or
 * "gone" for an instance another host runs that was deleted before that
 * host told its end; borrowed for the call (a name, not a duro_status,
 * for that last case).  Runs on an engine thread (often the one
 * committing for many instances): it must not block or call into the
 * engine. */
typedef void (*duro_watch_fn)(void *ctx, const char *status);

/* duro_instance_watch's answer for an instance that has ended already. */
#define DURO_WATCH_ENDED 1

/* Registers fn to be called once when the instance ends.  Returns 0 with
 * *out set, DURO_WATCH_ENDED (fn is never called, *out NULL) when it has
 * ended already, or an error (DURO_E_NOT_FOUND, ...).  Every watch
 * returned must be given back with duro_watch_cancel, once, whether fn
 * was called or not. */
int duro_instance_watch(duro_engine *e, const char *workflow, const char *id,
                        duro_watch_fn fn, void *ctx, duro_watch **out);

/* Gives `w` back: returns 0 when fn had not been called, and now never
 * will be; 1 when it was called, or is being called on another thread
 * (exactly once either way).  w is gone afterwards. */
int duro_watch_cancel(duro_engine *e, duro_watch *w);

/* ---- an instance's events, followed ----
 *
 * What a stream of an instance shows (GET .../events/stream), read from
 * its journal rows: its creation, each step's start and end, failed
 * attempts, sleeps, events received, its pause and its end.  Each item
 * has an id derived from the rows (when it was committed, what kind, which
 * step, event or attempt), the same on every read and after a restart,
 * ordered as the items are; a read from an id returns those after it. */

/* Items after `after` (an item's id; NULL or "": from the start), at most
 * `max`, in order: a JSON array of {"id","event","data"} (a new
 * reference in *items); *ended is 1 when the instance has ended and no
 * item is left after the last returned.  DURO_E_INVALID_ARGUMENT for an
 * `after` that is no id; DURO_E_NOT_FOUND... as duro_instance_get. */
/* ---- an instance's log lines ----------------------------------------------
 * What its plugin code logged (duro_log from run() or a step callback),
 * kept in the journal with it: a line is queued to the journal as it is
 * logged, so it is on disk no later than the next step's commit; the
 * oldest go past the workflow's limits.logs. */
typedef struct duro_log_line {
  int64_t n; /* its number in the instance, from 1 */
  int64_t time_ms;
  int level;  /* DURO_LOG_* */
  char *step; /* the step key of the callback that logged it; NULL: run() */
  uint32_t attempt;
  char *message;
} duro_log_line;
typedef struct duro_log_list {
  duro_log_line *v;
  size_t n;
} duro_log_list;
/* The lines numbered past `after`, oldest first, at most `limit`.
 * DURO_E_NOT_FOUND... as duro_instance_get. */
int duro_instance_logs(duro_engine *e, const char *workflow, const char *id,
                       int64_t after, size_t limit, duro_log_list *out);
void duro_log_list_free(duro_log_list *l);

struct json_t;
int duro_instance_events_since(duro_engine *e, const char *workflow,
                               const char *id, const char *after, size_t max,
                               struct json_t **items, int *ended);

/* Whether other hosts share the store: their commits call no follower
 * here, so a follower also reads again now and then. */
int duro_engine_store_shared(duro_engine *e);

/* A follower of an instance's rows: fn(ctx) is called on the committing
 * thread after each commit that changed them (calls may coalesce: read
 * again from what was read last).  fn must only wake its owner; it runs
 * under a lock of the registry's. */
typedef struct duro_changes duro_changes;
typedef void (*duro_changes_fn)(void *ctx);
int duro_instance_changes(duro_engine *e, const char *workflow, const char *id,
                          duro_changes_fn fn, void *ctx, duro_changes **out);
/* fn is not running and is never called again once this returns. */
void duro_changes_cancel(duro_engine *e, duro_changes *c);

/* One instance of a list. */
typedef struct duro_instance_brief {
  char *id;
  duro_status status; /* live */
  int64_t created_ms;
  int64_t started_ms, ended_ms; /* DURO_NO_TIME: not yet */
  char *wait_type;              /* what it waits for, stored; NULL: none */
  /* Its last journaled step (the highest call position): the one it
   * waits in (a sleep, an event, a retry), else the last run; a step's
   * first attempt shows once it ended.  step_key NULL: none yet. */
  char *step_key, *step_name;
  duro_step_kind step_type;
  duro_step_status step_status;
  uint32_t step_attempts;
  int64_t step_wake_ms; /* DURO_NO_TIME: none */
} duro_instance_brief;

/* Which instances a list gives besides its workflow (a zero bound is
 * none; "after" takes its instant, "before" does not; a bound on the
 * end leaves out live instances). */
typedef struct duro_list_filter {
  int status;         /* a duro_status as live, or -1 for any */
  const char *prefix; /* ids that start with it; NULL or "": any */
  int64_t created_after, created_before;
  int64_t ended_after, ended_before;
  /* search attributes, all of which must pass (duro_list_where_parse
   * makes each); n_where 0: none */
  const duro_attr_filter *where;
  size_t n_where;
} duro_list_filter;

/* One term of a list's `where` ("customer:c42", "amount>100": attr.h's
 * syntax) parsed against the search attributes of `workflow`, into *out
 * (free with duro_attr_filter_clear): 0, DURO_E_WORKFLOW_NOT_FOUND, or
 * DURO_E_INVALID_ARGUMENT with err saying what is wrong.  For every route
 * that takes a list's filter. */
int duro_list_where_parse(duro_engine *e, const char *workflow,
                          const char *text, duro_attr_filter *out, char *err,
                          size_t errlen);

/* A page of instances, newest first. */
typedef struct duro_instance_page {
  duro_instance_brief *v;
  size_t n;
  /* Where the next page begins (the `cursor` to pass); "" after a page
   * that looked at fewer rows than its limit: there is no more. */
  char cursor[24];
} duro_instance_page;

/* Lists instances of `workflow` that pass `f` (NULL: all) into *out
 * (caller frees with duro_instance_page_free; empty on an error).  A
 * status filter is of the live status (running ones are found in
 * memory); limit 0 or over 1000 = 1000; cursor NULL or "" = from the
 * newest, else a page's cursor (DURO_E_INVALID_ARGUMENT when it is not
 * one).  The JSON is duro_instance_list (views/view_instance.h). */
int duro_instance_list_page(duro_engine *e, const char *workflow,
                            const duro_list_filter *f, size_t limit,
                            const char *cursor, duro_instance_page *out);
void duro_instance_page_free(duro_instance_page *p);

int duro_instance_pause(duro_engine *e, const char *workflow, const char *id);
int duro_instance_resume(duro_engine *e, const char *workflow, const char *id);
int duro_instance_terminate(duro_engine *e, const char *workflow,
                            const char *id);
/* A terminate whose rollbacks run first: the rollbacks of the instance's
 * completed steps, newest first, then it ends terminated (with a
 * rollback's error when one failed for good).  Answered once requested
 * (persisted): an activation carries it out, replaying run() up to where
 * it is to learn them (step_rollback.c). */
int duro_instance_terminate_rollback(duro_engine *e, const char *workflow,
                                     const char *id);

/* Runs an ended instance again.  from NULL: clear the journal and rerun
 * everything.  Otherwise keep steps journaled before step `from`
 * (occurrence `count`, 0 = 1) and rerun from it.  Events the discarded
 * steps consumed stay consumed; the restart count (in idempotency keys)
 * goes up.  DURO_E_CANNOT_RESTART when the instance has not ended or the
 * journal has no such step. */
int duro_instance_restart(duro_engine *e, const char *workflow, const char *id,
                          const char *from, uint32_t count);
/* The same; on DURO_E_CANNOT_RESTART *why (caller frees; NULL otherwise)
 * says why: the instance's status when it has not ended, or the journaled
 * step keys when `from` names none of them. */
int duro_instance_restart_why(duro_engine *e, const char *workflow,
                              const char *id, const char *from, uint32_t count,
                              char **why);
/* A restart whose rollbacks run first: those of the completed steps the
 * restart discards (from `from` on; every step's when from is NULL)
 * that have not run yet, newest first, each a journaled step; then it
 * restarts as above.  Answered once requested (persisted): an
 * activation carries it out, replaying run() on the build its steps ran
 * on to learn the rollbacks (step_rollback.c).  One that fails for good
 * leaves the instance errored (instance.restart_failed, that rollback's
 * error beside it), not restarted. */
int duro_instance_restart_rollback_why(duro_engine *e, const char *workflow,
                                       const char *id, const char *from,
                                       uint32_t count, char **why);

/* What duro_instance_delete deleted. */
typedef struct duro_deleted {
  /* Another host (the one that runs it, on a store several share)
   * deleted it: what follows is not known here. */
  int elsewhere;
  duro_status status; /* the instance's when deleted: an end */
  int terminated;     /* it was live, and the delete terminated it first */
  int64_t steps, attempts, events, logs; /* its rows that went with it */
} duro_deleted;

/* Deletes an instance now, with its steps, attempts, events and logs, as
 * the retention sweep would once its retention ran out; its id may be
 * created again after.  Only an ended one (complete, errored,
 * terminated): a live one (queued, running, waiting, paused) is
 * DURO_E_CANNOT_DELETE, with *why (may be NULL; caller frees) naming its
 * status, unless `terminate`, which terminates it as
 * duro_instance_terminate does (durably, its activation given up on) and
 * then deletes it.  On a store several hosts share, the host that runs it
 * deletes it.  *out (may be NULL) says what went. */
int duro_instance_delete(duro_engine *e, const char *workflow, const char *id,
                         int terminate, duro_deleted *out, char **why);

/* Stores an event for the instance and wakes it if it waits for `type`.
 * payload NULL = "null".  DURO_E_INSTANCE_ENDED, nothing stored, when the
 * instance has ended (complete, errored, terminated). */
int duro_instance_send_event(duro_engine *e, const char *workflow,
                             const char *id, const char *type,
                             const char *payload);
/* The same without waiting for the commit: returns an error found before
 * it (unknown instance, bad type or payload), or 0 and then calls
 * done(ctx, rc) once the event is on disk (rc 0) or the write failed, on
 * the thread that committed it, never this one.  traceparent: its
 * sender's W3C traceparent (NULL, or invalid: none), which the event's
 * span in the instance's trace links to. */
typedef void (*duro_done_fn)(void *ctx, int rc);
int duro_instance_send_event_async(duro_engine *e, const char *workflow,
                                   const char *id, const char *type,
                                   const char *payload, const char *traceparent,
                                   duro_done_fn done, void *ctx);

/* How many instances of a workflow have one stored status. */
typedef struct duro_status_count {
  duro_status status;
  int64_t n;
} duro_status_count;

/* A workflow at a glance. */
typedef struct duro_workflow_counts {
  char *name;
  /* Its instances by status as stored (running ones show as queued or
   * waiting), the statuses it has only, in the journal's order. */
  duro_status_count *v;
  size_t n;
  int64_t backlog;              /* queued */
  int64_t oldest_queued_age_ms; /* 0 when none is queued */
} duro_workflow_counts;

/* `workflow`'s counts into *out (caller frees with
 * duro_workflow_counts_free; empty on an error).  The JSON of GET
 * /workflows/{wf} is duro_workflow_stats (views/view_instance.h). */
int duro_workflow_counts_read(duro_engine *e, const char *workflow,
                              duro_workflow_counts *out);
void duro_workflow_counts_free(duro_workflow_counts *c);

/* Instances runnable, running or under a control operation right now:
 * 0 means every instance is waiting, paused or ended. */
size_t duro_engine_in_flight(duro_engine *e);

/* Group commits so far: transactions, the write batches they carried, and
 * the time spent committing (what /metrics reports, as numbers). */
typedef struct duro_journal_stats {
  uint64_t commits;
  uint64_t batches;
  uint64_t commit_us;
} duro_journal_stats;
void duro_engine_journal_stats(duro_engine *e, duro_journal_stats *out);

/* The Prometheus text for GET /metrics, malloc'ed (caller frees). */
char *duro_engine_metrics(duro_engine *e);

/* The engine's counters over the last ten minutes (GET /metrics/history):
 * for each series (steps_completed, attempts_failed, retries_scheduled,
 * instances_created, activations, events_sent), how many happened in
 * each bucket of bucket_ms, oldest first; the last one is the bucket
 * now_ms falls in, still filling. */
#define DURO_HISTORY_BUCKETS 60
#define DURO_HISTORY_SERIES 6
typedef struct duro_metrics_history {
  int64_t bucket_ms;
  int64_t now_ms;
  int64_t start_ms; /* when the oldest bucket begins */
  int64_t since_ms; /* when this engine began counting */
  struct {
    const char *name; /* static */
    uint64_t n[DURO_HISTORY_BUCKETS];
  } series[DURO_HISTORY_SERIES];
} duro_metrics_history;
/* Samples the counters, then fills *out (nothing to free).  history.c;
 * the JSON is duro_engine_metrics_history (views/view_metrics.h). */
void duro_engine_history(duro_engine *e, duro_metrics_history *out);

/* Puts the workflow bindings in the plugin API table (api.c assembles
 * it): duro_env_workflow, duro_workflow_create, duro_workflow_send_event.
 * workflow_api.c. */
void workflow_api_fill(duro_api *t);

#endif
