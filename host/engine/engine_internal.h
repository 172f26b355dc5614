/* engine_internal.h — the engine's struct and what its own files share,
 * a section a file (each names it): engine.c the engine opened, started,
 * stopped and closed; engine_registry.c the workflows; engine_runnable.c
 * the entries and the runnable set; engine_worker.c the worker threads
 * and the commits of steps; engine_create.c the creation of instances;
 * engine_json.c JSON text checked; step*.c the step API inside an
 * activation; and the others of engine/.  Not for other modules: a
 * feature beside the engine (queues, cron) includes core.h.
 *
 * The in-memory state of the engine is only about instances something is
 * happening to: an `entry` exists while an instance is runnable (QUEUED),
 * running an activation (ACTIVE) or under a control operation (CONTROL).
 * Invariant: while an instance has no entry, its database row is current
 * and nobody writes it; so whoever creates the entry (under `mu`) owns the
 * row's status until the entry goes away. */
#ifndef DURO_ENGINE_INTERNAL_H
#define DURO_ENGINE_INTERNAL_H

#include <jansson.h> /* params, results and errors: JSON text checked and built */
#include <pthread.h>

#include "core.h"
#include "driver.h"
#include "engine.h"
#include "journal.h"
#include "ledger.h"
#include "log.h"
#include "map.h"
#include "metrics.h"

/* A FIFO of entries linked through entry.next. */
typedef struct entry_fifo {
  struct entry *head, *tail;
  size_t n;
} entry_fifo;

/* One build (a plugin's .so, by content hash) of a workflow. */
/* A build held (holds.c): its hash and the wait_type its instances show. */
typedef struct build_hold {
  char *hash, *reason;
} build_hold;

typedef struct wf_build {
  char *hash; /* NULL: a build with no identity (in-process workflows) */
  duro_run_fn run;
  void *ctx;        /* handed to run() through step_build_ctx (a worker's) */
  uint32_t running; /* activations on it now (the workflow's builds_mu) */
  /* How often it was acquired (builds_mu): a retirement that sees it
   * unchanged knows nobody took the build while it read the journal. */
  uint64_t acquired;
  /* Its attempts in worker processes that ended (returned, failed, timed
   * out, crashed; not cut short): an atomic counter that only grows, the
   * crash-storm breaker's denominator (step_attempt_ended). */
  uint64_t attempts;
  /* The size of duro_step_config its code was built with (its plugin's
   * layout): a member past it is not read.  0: this host's. */
  uint16_t step_config_size;
} wf_build;

struct wf_reg {
  duro_engine *engine;
  char *name;
  char *binding;
  duro_workflow_limits limits;
  /* Its builds, oldest first; the last is the newest, which new instances
   * (and every activation of a `latest` workflow) run.  Older ones stay
   * while an instance pinned to them has not ended.  builds_mu guards the
   * array and the counts; a wf_build lives until it is retired. */
  pthread_mutex_t builds_mu;
  wf_build **builds;
  size_t n_builds;
  /* The builds held (holds.c), under builds_mu; n_holds is also read
   * without it, to keep the common case (none) off the lock. */
  build_hold *holds;
  size_t n_holds;
  /* Guarded by the engine's mu: activations running now, and instances
   * that were due while `limits.concurrency` of them ran. */
  uint32_t running;
  entry_fifo deferred;
  /* Its plugin's callbacks on engine threads, bounded (engine_admit.c);
   * NULL: none (in worker processes, or no plugin). */
  struct engine_admit *admit;
  /* Its activations pass the drivers' admission gate (flow control):
   * its limits name flow rules (limits.flow_concurrency, a copy it owns). */
  int gated;
};

enum {
  ENTRY_QUEUED = 1,
  ENTRY_ACTIVE,
  ENTRY_CONTROL,
  ENTRY_RETRY,  /* its activation could not write: runs after a back-off */
  ENTRY_HANDOFF /* being handed to another host (rebalance.c) */
};

/* rebalance.c's state: when it looks next, the hosts it gave work to
 * lately (given more once they renewed twice since), and the notice of
 * work handed to this host. */
#define REBALANCE_HOSTS 16
typedef struct engine_gift {
  int64_t host, heartbeat_ms;
  int renewals;
} engine_gift;
typedef struct engine_rebalance {
  int64_t next_ms;
  engine_gift gifts[REBALANCE_HOSTS];
  size_t n_gifts;
  int received; /* atomic: set by the notice, taken by the scheduler */
  int fed;      /* given work it has not been through yet */
} engine_rebalance;

/* The engine's counters over the last minutes (history.c): ring slot
 * number % HISTORY_BUCKETS holds bucket `number` (engine time divided by
 * HISTORY_BUCKET_MS), how much each series grew in it. */
#define HISTORY_BUCKET_MS 10000
#define HISTORY_BUCKETS 60 /* ten minutes */
#define HISTORY_SERIES 6
typedef struct history_bucket {
  int64_t number; /* -1: never used */
  uint64_t n[HISTORY_SERIES];
} history_bucket;

typedef struct engine_history {
  pthread_mutex_t mu;
  int64_t since_ms;              /* when the engine began counting */
  int64_t newest;                /* the bucket of the latest sample */
  uint64_t seen[HISTORY_SERIES]; /* the counters at the latest sample */
  history_bucket ring[HISTORY_BUCKETS];
} engine_history;

typedef struct entry {
  int64_t rowid;
  int state;
  /* Requests that reach an ACTIVE instance; the activation reads them at
   * every step boundary (atomically) and applies them when it ends. */
  int pause_req;
  int terminate_req;
  /* The terminate asks for the instance's rollbacks first (set before
   * terminate_req). */
  int rollback_req;
  /* A restart's rollbacks run (step_rollback.c): no pause is taken. */
  int restart_req;
  /* An event (or wake) arrived while the entry was busy: run again. */
  int rerun;
  /* Queued to have a pause or terminate applied rather than to run. */
  int apply_control;
  struct entry *next;  /* runnable FIFO, or its workflow's deferred one */
  wf_reg *deferred_in; /* set while waiting for a concurrency slot */
  /* The admission gates (drivers' admit: flow.singleton, flow control):
   * parked until its turn by gate gate_parked - 1 (0: none), or admitted
   * with gate_holds (one a gate), which its end gives back. */
  int gate_parked, gate_held;
  /* Made runnable by a gate that keeps its turn for it (by rowid) until
   * it is admitted: never handed to another host (rebalance.c). */
  int gate_granted;
  void *gate_holds[ENGINE_MAX_GATES];
  wf_reg *counted;         /* the workflow whose slot this activation holds */
  int64_t retry_at;        /* ENTRY_RETRY: when (engine_mono_ms) */
  uint32_t write_failures; /* in a row, for the back-off */
  int admitted;            /* ACTIVE and past the concurrency check: what
                              readers see as "running" */
  /* The callbacks handed to a worker process, not yet returned (several
   * for a duro_do_all): a pause or terminate sets each one's revoke bit
   * in its word (shared with the worker), and a callback never begins
   * unless it had (mu; step_dispatch_set; worker_proto.h's
   * WM_PAGE_BEGAN). */
  struct entry_dispatch {
    uint64_t *word;
    uint64_t revoke;
  } * dispatch;
  uint32_t n_dispatch, cap_dispatch;
} entry;

/* A worker thread.  Its `mu` is the handshake between the end of an
 * attempt and the watchdog: whoever takes it first decides whether the
 * attempt's outcome counts (the worker) or was given up on (the
 * watchdog, once the attempt is past its deadline). */
typedef struct worker {
  duro_engine *e;
  pthread_t thread;
  ledger_slot *slot;
  pthread_mutex_t mu;
  struct duro_attempt *attempt; /* the callback running now (mu) */
  int abandoned;                /* its attempt was given up on (mu) */
  /* What it hangs in, once abandoned, for /healthz (engine mu). */
  char *hung_workflow, *hung_id, *hung_key;
  uint32_t hung_attempt;
  int64_t hung_since_ms;
  int exited; /* worker_main returned (engine mu) */
  /* Activations on their own fibers (fiber.h), all on this thread: those
   * whose step commit landed wait in `ready` to be resumed (engine mu). */
  struct engine_task *ready_head, *ready_tail;
  uint32_t tasks;       /* started, not finished (engine mu) */
  pthread_cond_t wake;  /* a task became ready, or stopping (engine mu) */
  struct fiber **spare; /* finished fibers kept for the next task (own) */
  uint32_t n_spare;
  /* Tasks parked until a file descriptor is ready (engine_park_fd: a
   * worker process's channel), and the eventfd a commit writes to wake
   * the thread while it polls them (engine mu). */
  struct engine_task *fd_head;
  uint32_t fd_parked; /* on fd_head: they wait on plugin code, not here */
  uint32_t fd_long;   /* of them, parked long enough to hold no share */
  uint32_t held;      /* waiting for their plugin's admission: neither (mu) */
  int wake_fd;
  int polling;
} worker;

struct duro_engine {
  duro_engine_options opt;
  duro_clock *clock;
  journal *j;
  wf_reg *wfs;
  size_t n_wfs;
  int64_t max_step_result;
  int64_t max_instance_state;
  /* The share of traces the exporter keeps (engine_set_trace_sample):
   * an attempt's traceparent says whether its trace is sampled.  0 until
   * telemetry is on: nothing is recorded. */
  double trace_sample;
  /* The drivers that observe activations, a bit each by registration
   * (engine_observe_activations): while any does, activations keep their
   * log lines and failures for the activation_ended hooks; atomic. */
  uint32_t observe_activations;

  pthread_mutex_t mu;
  /* Held by a create of a workflow with claims (a singleton, a debounce)
   * from its first claim until its commit is queued, so that the
   * commits come in the order claimed (a debounce's params put on the
   * instance a create before it inserts); taken before mu. */
  pthread_mutex_t claim_mu;
  pthread_cond_t work;    /* a runnable entry was queued, or stopping */
  pthread_cond_t changed; /* an entry left the CONTROL or ACTIVE state */
  idmap entries;          /* rowid → entry */
  entry_fifo runnable;
  int64_t polled_through; /* poll_due has queued every wake up to here */
  int stopping;
  /* Worker threads (never freed while the engine lives: the watchdog and
   * stuck threads hold pointers); guarded by mu. */
  worker **workers;
  uint32_t n_workers;
  uint32_t live;  /* workers in worker_main, not abandoned */
  uint32_t stuck; /* abandoned workers still inside a plugin callback */
  uint32_t max_stuck;
  int stuck_cap_logged;
  pthread_t watchdog;
  int watchdog_started;
  pthread_cond_t watch; /* wakes the watchdog early: stopping */

  /* The gate callbacks pass while attempts are charged with a kill
   * (step_gate.c, faults.c): `alone` while a suspect's callback runs,
   * `waiting` suspects that want to, `shared` other callbacks running. */
  pthread_mutex_t gate_mu;
  pthread_cond_t gate_cv;
  uint32_t gate_shared, gate_waiting;
  int gate_alone;
  int64_t gate_open_ms; /* engine_mono_ms from which suspects may run */

  /* The scheduler thread (scheduler.c): due wakes, storage retries,
   * reconciliation with the journal, the retention sweep. */
  pthread_t scheduler;
  int scheduler_started;
  pthread_cond_t sched; /* a wake moved earlier, a retry queued, stopping */
  int sched_kick;
  entry_fifo retrying; /* ENTRY_RETRY entries */

  /* Control requests on one instance are serialized (flag set and
   * persisted in one critical section), in stripes by rowid. */
  pthread_mutex_t control_mu[16];

  /* Waiters for instances to end (watch.c): rowid → its duro_watch
   * list.  A lock of its own, never held while calling out. */
  pthread_mutex_t watches_mu;
  idmap watches;
  /* Followers of instances' rows (changes.c): rowid → its duro_changes
   * list, and how many there are (atomic: a commit with none looks no
   * further). */
  pthread_mutex_t changes_mu;
  idmap changes;
  uint32_t n_changes;

  ledger *ledger;
  int own_ledger;
  uint32_t max_crashes;

  /* The features that run beside the engine (driver.h), in registration
   * order; the count is stored with release once a slot is filled. */
  struct registered_driver {
    const duro_driver *d;
    void *state;
  } drivers[DURO_ENGINE_MAX_DRIVERS];
  size_t n_drivers;
  /* The backlog beyond max_runnable (mu): new instances that got no
   * entry stay `queued` rows only, and the scheduler pulls them back in
   * rowid order (engine_refill) as the runnable FIFO drains.  spill_min
   * is the lowest such rowid (INT64_MAX: none); spilled counts them. */
  /* The plugins whose callbacks run on engine threads, each bounded
   * (engine_admit.c); set at registration. */
  struct engine_admit **admits;
  size_t n_admits;
  size_t max_runnable;
  int64_t spill_min;
  size_t spilled;

  /* The other hosts of a shared store (hosts.c): control requests this
   * host forwarded, waiting for their answers (fw_mu), and when the
   * scheduler next renews the lease and takes over stopped hosts'
   * instances (engine_mono_ms; the scheduler thread's). */
  pthread_mutex_t fw_mu;
  pthread_cond_t fw_cv;
  struct forward_wait *fw_list;
  uint64_t fw_next;
  /* Hosts waiting for instances of this one to end (fw_mu): rowid → its
   * list; remote_watched counts the rowids, read without the lock. */
  idmap remote_watches;
  size_t remote_watched;
  int64_t next_takeover;
  engine_rebalance rebalance;
  /* The notices whose work waits on the store, off the keeper thread. */
  struct notice_queue *notices;

  /* The scheduler pass's own state (scheduler.c; only the thread that
   * runs passes touches it): the retention sweep, which deletes a bounded
   * batch a pass while one is under way so that the passes between keep
   * wakes and the drivers' dispatch on time, and the journal failures
   * already reconciled. */
  struct {
    int started;      /* next is set */
    int64_t next;     /* when the next sweep starts (engine_mono_ms) */
    int running;      /* a sweep is under way */
    int drivers;      /* its instances are done: the drivers' rows now */
    size_t driver;    /* the driver whose rows it deletes */
    size_t instances; /* deleted by it so far */
    uint32_t passes;  /* passes it took so far */
  } sweep;
  uint64_t reconciled_failures;

  /* GET /metrics; updated with relaxed atomics from any thread */
  struct {
    uint64_t activations;
    uint64_t steps_completed;
    uint64_t attempts_failed;
    uint64_t retries_scheduled;
    uint64_t instances_created;
    uint64_t events_sent;
    metrics_hist attempt_us;
  } m;
  engine_history history; /* m's counters per 10 s (history.c) */
};

/* ---- the engine (engine.c) ---- */

/* The synchronous forms of asynchronous operations wait on one of these:
 * engine_wait_done (any thread) hands over rc and a result, and
 * engine_wait_for (the waiting thread) returns rc once it came. */
typedef struct engine_wait {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, rc;
  void *result;
} engine_wait;
#define ENGINE_WAIT_INIT                                                       \
  { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER }
void engine_wait_done(engine_wait *w, int rc, void *result);
int engine_wait_for(engine_wait *w, void **result);

/* ---- workflows (engine_registry.c) ---- */

wf_reg *engine_find_binding(const duro_engine *e, const char *binding);

/* attributes.c: a workflow's index copied into its limits (registration)
 * and freed; the attributes a create's params give (an array the batch
 * owns, with its strings; NULL, 0 when none); whether an instance's
 * stored attributes pass a list's `where`; the decl of `name`. */
void engine_index_copy(duro_workflow_limits *l);
void engine_index_free(duro_workflow_limits *l);
duro_attr *engine_attrs_of_params(const wf_reg *wf, const char *params,
                                  journal_batch *b, size_t *n);
int engine_attrs_pass(duro_engine *e, int64_t rowid, const duro_list_filter *f);
/* An instance's stored attributes, copies (engine_attrs_free). */
int engine_attrs_read(duro_engine *e, int64_t rowid, duro_attr **out,
                      size_t *n);
void engine_attrs_free(duro_attr *v, size_t n);
const duro_attr_decl *engine_attr_decl(const wf_reg *wf, const char *name);

/* ---- admission of in-engine plugins' callbacks (engine_admit.c) ---- */

typedef struct engine_admit engine_admit;
typedef struct engine_task engine_task;
/* The bound of `plugin` (found, or made with `threads` places: 0 = half
 * the engine's threads, at most all but one); at registration. */
engine_admit *engine_admit_for(duro_engine *e, const char *plugin,
                               uint32_t threads);
void engine_admits_free(duro_engine *e);
enum {
  ADMIT_IN = 0,
  ADMIT_WAITED = 1,
  ADMIT_BOUNDARY = -1,
  ADMIT_ORPHANED = -2
};
/* Takes a place before a callback runs, its fiber parked (no share of
 * its thread) while the plugin is at its bound: ADMIT_IN, or
 * ADMIT_WAITED once handed one (others ran on the thread meanwhile);
 * else none was taken: ADMIT_BOUNDARY (the engine stops, or a pause or
 * terminate came for ent: look at the step boundary) or ADMIT_ORPHANED
 * (the watchdog gave up on its thread meanwhile, and on it). */
int engine_admit_enter(duro_engine *e, engine_admit *g, struct entry *ent);
/* Gives the place back as the callback returned: to the first waiter. */
void engine_admit_leave(duro_engine *e, engine_admit *g);
/* Every waiter resumes with ADMIT_BOUNDARY (mu held). */
void engine_admits_stop_locked(duro_engine *e);
/* The waiter of ent's activation, if any, resumes with ADMIT_BOUNDARY:
 * a pause or terminate came (mu held). */
void engine_admit_wake_locked(duro_engine *e, struct entry *ent);
/* The waiters on worker w, taken off their FIFOs (mu held): w is given
 * up on; into *out (the caller's), their count returned. */
size_t engine_admit_orphans_locked(duro_engine *e, worker *w,
                                   engine_task ***out);
/* Logs a plugin at its bound none of whose callbacks returned for a
 * while, once (the watchdog, each period). */
void engine_admits_watch(duro_engine *e);

/* ---- entries and the runnable set (engine_runnable.c) ---- */

/* Entries (call with mu held). */
/* Creates the instance's entry in `state`. */
entry *entry_take(duro_engine *e, int64_t rowid, int state);
/* Forgets the entry (its row is current again). */
void entry_drop(duro_engine *e, entry *ent);
/* Queues the entry to run. */
void runnable_push(duro_engine *e, entry *ent);
/* The next entry to run, or NULL; draining kicks the scheduler to pull
 * in the backlog. */
entry *runnable_pop(duro_engine *e);
/* Takes a queued entry out of whichever queue holds it. */
void runnable_remove(duro_engine *e, entry *ent);
/* The drivers' admission gate (driver.c; mu held): ent's activation of
 * wf admitted (1) or parked (0); its hold given back; a parked ent taken
 * away. */
int engine_gate_admit_locked(duro_engine *e, const wf_reg *wf, entry *ent,
                             const char *params, int first);
void engine_gate_release_locked(duro_engine *e, entry *ent);
/* A create of wf at the gate (flow_reject): 0, or DURO_E_FLOW_REJECTED
 * with *retry_after_ms. */
int engine_gate_check_create_locked(duro_engine *e, const wf_reg *wf,
                                    const char *params,
                                    int64_t *retry_after_ms);
void engine_gate_forget_locked(duro_engine *e, entry *ent);
/* A create of wf whose limits name a singleton or a debounce, before its
 * commit (the drivers' claim_create): DURO_CLAIM_* with *claim, or
 * DURO_E_FLOW_REJECTED; one claimed DURO_CLAIM_HELD or _MERGE is settled
 * (driver.h's claim_settled) once its commit is done. */
int engine_gate_claim_locked(duro_engine *e, const wf_reg *wf, const char *id,
                             const char *params, duro_claim *claim);
void engine_gate_settle_locked(duro_engine *e, const wf_reg *wf, int claim,
                               const char *id, int64_t rowid);

/* Gives back the activation's concurrency slot and lets one parked
 * instance of the workflow run. */
void release_slot_locked(duro_engine *e, entry *ent);
void fifo_push(entry_fifo *q, entry *ent);
entry *fifo_pop(entry_fifo *q);
void fifo_remove(entry_fifo *q, entry *ent);

/* Called by activation_run once it knows the workflow: takes one of its
 * concurrency slots and returns 1, or parks the entry until a slot frees
 * and returns 0 (the activation must then return without running or
 * calling engine_activation_done). */
int engine_activation_admit(duro_engine *e, entry *ent, wf_reg *wf,
                            const char *params, int first);

/* A queued instance with no entry: runnable now, or left to the backlog
 * when the runnable FIFO is full (mu held). */
void engine_queue_new_locked(duro_engine *e, int64_t rowid);
/* Pulls backlog rows into the runnable FIFO (the scheduler thread). */
void engine_refill(duro_engine *e);
/* Instances queued: runnable in memory and in the backlog. */
size_t engine_backlog(duro_engine *e);

/* An event is on disk; `wake` is its committed JOP_WAKE_IF_WAITING op,
 * which says whether the commit made the instance due (it waits for the
 * type) and which host runs it.  On this host: engine_instance_poke. */
void engine_event_stored(duro_engine *e, const journal_op *wake);
/* engine_event_stored for each JOP_WAKE_IF_WAITING of committed batch b
 * (a driver's event in an instance's commit). */
void engine_batch_woke(duro_engine *e, const journal_batch *b);
/* A new instance id (malloc'ed): a UUIDv7 of now_ms (engine_create.c). */
char *engine_random_id(int64_t now_ms);
/* Something for instance `rowid` (an event) arrived: an activation
 * running it runs it again; an idle one runs when `woke`. */
void engine_instance_poke(duro_engine *e, int64_t rowid, int woke);

/* build_acquire, unless the build is held (holds.c): then NULL, with the
 * hold's reason (malloc'ed) in *held; the activation waits, to look
 * again at the latest in engine_hold_recheck_ms.  An instance pinned to
 * a held build that ran no step on it (`unrun`: its journal holds no
 * outcome a replay would hand back) gets the newest build instead when
 * that one is not held: its pin moves there at its next commit. */
wf_build *build_acquire_unless_held(wf_reg *wf, const char *pinned, int unrun,
                                    char **held);
int64_t engine_hold_recheck_ms(void);
void holds_free(wf_reg *wf);

/* The status of an activation that found no row of its instance to run
 * (swept meanwhile, or its workflow unknown): not one of duro_status. */
#define ENGINE_STATUS_NONE ((duro_status)-1)

/* Called when the instance's new row is committed: removes or requeues
 * the entry.  may_commit = 0 when called from a commit callback (which
 * must not commit): a pause or terminate that arrived too late for the
 * activation is then handed to a worker instead of applied here. */
void engine_activation_done(duro_engine *e, entry *ent, duro_status status,
                            int64_t wake_ms, int may_commit);

/* ---- worker threads and commits (engine_worker.c) ---- */

/* The calling thread's worker (NULL when activations run inline) and its
 * ledger slot (NULL when it has none). */
worker *engine_thread_worker(void);
ledger_slot *engine_thread_slot(void);

/* Starts one more worker thread (mu held). */
int engine_spawn_worker_locked(duro_engine *e);

/* Commits a step's batch.  On a worker's fiber the worker runs other
 * activations until the batch is durable; elsewhere the thread waits.
 * *orphaned: the worker hung in another activation meanwhile, so this one
 * was handed back to the engine (runs again from its journal): touch
 * nothing of the instance.  Orphans only unwind. */
int engine_commit_step(duro_engine *e, journal_batch *b, int *orphaned);

/* An activation's last writes, committed without waiting; fn(ctx, rc)
 * runs when they are durable.  A busy worker hands them to the writer
 * thread rather than lead the group through its fsync. */
void engine_commit_final(duro_engine *e, journal_batch *b, journal_done_fn fn,
                         void *ctx);

/* The task running on this thread's fiber (NULL on no fiber: inline),
 * parked until fd is ready for what events(ctx) says at the time (poll's
 * POLLIN, POLLOUT: a channel with frames still to write; asked before
 * each poll, on this thread), engine_unpark(task), or engine_mono_ms
 * reaches `until` (INT64_MAX: never); engine_park_fd returns once
 * resumed: 1 when the task was orphaned meanwhile (its worker abandoned:
 * touch nothing of the instance).  *revents (if not NULL) is what poll
 * saw ready on fd, 0 when something else resumed it.  The tasks parked
 * on one fd share its events function. */
struct engine_task *engine_current_task(void);
int engine_park_fd(int fd, short (*events)(void *ctx), void *ctx, int64_t until,
                   short *revents);
void engine_unpark(struct engine_task *t);
/* The running task waits for its plugin's admission (engine_admit.c):
 * counted as no share of its thread (mu held); then parks until
 * engine_task_release_locked, and returns 1 when it was orphaned
 * meanwhile. */
void engine_task_hold_locked(struct engine_task *t);
int engine_task_held_yield(struct engine_task *t);
/* A held task made ready on its thread (mu held). */
void engine_task_release_locked(struct engine_task *t);

/* A branch of the running task's activation (a parallel step's, in
 * step_parallel.c): fn(arg) on a fiber of its own on this thread, begun
 * once the task yields.  NULL when the task runs on no fiber (inline) or
 * no fiber could be had: then run fn here.  engine_branch_wait parks the
 * task until engine_branch_wake(task) (at once if it was called since
 * the last wait), holding no share of its thread meanwhile: 1 when it
 * was orphaned meanwhile.  All on the task's own thread. */
struct engine_task *engine_branch_start(void (*fn)(void *arg), void *arg);
int engine_branch_wait(void);
void engine_branch_wake(struct engine_task *t);

/* The watchdog gave up on w (mu held): ready tasks become orphans; their
 * entries go to *out (the caller releases them, unlocked). */
size_t engine_orphan_ready_locked(worker *w, struct entry ***out);

/* ---- JSON (engine_json.c) ---- */

/* json_text_check (core.h); on DURO_E_INVALID_OUTPUT it writes why and
 * where the parse failed ("... at line L, column C (byte P)") into why
 * (may be NULL). */
int json_text_check_at(const char *text, int64_t limit, char *why,
                       size_t why_len);

/* ---- the step runner (step*.c; step_internal.h names the pieces) ---- */

/* Runs one activation of the instance behind `ent` (state ACTIVE) and
 * queues its outcome for commit; engine_activation_done follows once that
 * commit landed, possibly on another thread. step.c. */
void activation_run(duro_engine *e, entry *ent);

/* Replays the instance `rowid` of workflow `wf` on `run` (another build)
 * without running, waiting or writing anything, into *out (its strings
 * the caller's).  step_dry.c. */
void activation_dry_run(duro_engine *e, wf_reg *wf, int64_t rowid,
                        duro_run_fn run, duro_dry_run_instance *out);

/* What the watchdog keeps of an attempt it gives up on: copies, owned. */
typedef struct hung_attempt {
  entry *ent;
  int64_t rowid;
  char *workflow, *id, *build;
  journal_step step; /* status waiting; its strings owned */
  uint32_t number;
  int64_t started_ms;
  const char *error_name; /* "TimeoutError" or "instance.terminated" */
  char *message;
  char *cut_short_by; /* set: cut short by a stop, not failed */
} hung_attempt;

/* Copies what the watchdog needs of attempt `at`, still running (call
 * with its worker's mu held, so the attempt cannot end meanwhile).
 * step_hung.c. */
struct duro_attempt;
/* 1 when `at` is past its deadline at `mono` (engine_mono_ms), and runs
 * for `ent` unless NULL. */
int attempt_is_hung(const struct duro_attempt *at, int64_t mono,
                    const entry *ent);
/* 1 when `at` runs for `ent`. */
int attempt_runs_for(const struct duro_attempt *at, const entry *ent);
/* terminated: the attempt is abandoned because its instance was
 * terminated, not because it hung. */
void attempt_describe(const struct duro_attempt *at, int terminated,
                      hung_attempt *out);
void hung_attempt_clear(hung_attempt *h);
/* How long an engine must have lived before a suspect's callback runs
 * alone: one that an outside kill -9 storm keeps restarting runs none
 * (so none is charged a kill it did not cause), one a poisoned callback
 * kills serves HTTP this long between deaths. */
#define ENGINE_SUSPECT_SETTLE_MS 1000

/* The watchdog gave up on `at` (its worker's mu held): the callbacks its
 * place in the gate held back go on.  step_gate.c. */
void attempt_gate_leave(struct duro_attempt *at);

/* ---- faults (faults.c) ---- */

/* Records the attempts a dead engine's ledger holds: the one to blame as
 * a failed attempt `plugin.crashed` (erroring an instance whose step
 * reached max_crashes), the others inside their callbacks as cut short.
 * Runs at start, before any activation. */
int engine_record_crashes(duro_engine *e);

/* How many attempts of step `key` of instance `rowid` the journal has
 * as plugin.crashed, into *n; 0 or the journal's error. */
int engine_crashes_of(duro_engine *e, int64_t rowid, const char *key,
                      uint32_t *n);

/* Adds to `b` attempt `number` of step `s` (copied by the caller, its
 * row rewritten: attempts = number, due at once) as cut short `by` ("a
 * stop", "the engine's death (SIGKILL)") at `now`: a failed attempt
 * attempt.cut_short the retry policy does not charge, logged for `where`
 * ("workflow/id").  Its error JSON goes to *owned (the caller frees it
 * after the commit). */
void engine_cut_short(journal_batch *b, const log_ctx *where, int64_t rowid,
                      journal_step *s, uint32_t number, int64_t started_ms,
                      const char *build, const char *by, int64_t now,
                      char **owned);

/* The engine stops with callbacks still running past its grace: each is
 * journaled cut short by the stop (and whatever it returns later is
 * discarded).  Returns how many.  Call without mu. */
uint32_t engine_cut_short_running(duro_engine *e, int64_t grace_ms);

/* Gives up on the attempt worker `w` runs if it is past its deadline
 * (and, when `ent` is not NULL, belongs to that entry): records it as
 * failed, releases the instance, and starts a replacement worker.
 * Returns 1 when it did.  Call without mu. */
int engine_abandon_hung(duro_engine *e, worker *w, entry *ent);

/* Gives up on whichever attempt runs for entry `ent`, hung or not: a
 * terminate must not wait for a callback.  Returns 1 when it did. */
int engine_abandon_entry(duro_engine *e, entry *ent);

/* The watchdog thread: looks for hung attempts every 100 ms. */
void *engine_watchdog_main(void *arg);

/* ---- drivers (driver.c) ---- */

/* Registers the built-in drivers (at open). */
int engine_drivers_open(duro_engine *e);
/* Each driver's dispatch on the scheduler pass: 1 when one may have more
 * due now; *next_ms the earliest next time (engine clock, INT64_MAX). */
int engine_drivers_dispatch(duro_engine *e, int64_t *next_ms);
/* The drivers' part of the retention sweep, from e->sweep.driver on:
 * 1 while rows remain. */
int engine_drivers_sweep(duro_engine *e, size_t budget);
/* Whether a driver claims crash ledger slots in state st, and the replay
 * of one such slot of a dead engine. */
int engine_drivers_owns(const duro_engine *e, const ledger_slot *sl);
int engine_drivers_recover(duro_engine *e, const ledger_slot *sl, int guilty,
                           const char *how);
/* Each driver's start hook, at duro_engine_start. */
void engine_drivers_start(duro_engine *e);
/* Each driver's instance_changed (driver.h) for a row of workflow wf
 * (may be NULL) written in b, in the commit that writes it. */
/* Each driver's committed hook with batch b, on disk. */
void engine_drivers_committed(duro_engine *e, const journal_batch *b);
void engine_drivers_activation_ended(duro_engine *e,
                                     const duro_activation_report *r);
void engine_drivers_instance_changed(duro_engine *e, const wf_reg *wf,
                                     journal_batch *b,
                                     const journal_instance *row,
                                     duro_status from_status,
                                     int64_t from_started_ms, int64_t now);
/* What a step's attempt claimed of a driver (step_claim): which driver,
 * and what it gets back (step_unclaim). */
typedef struct step_claim {
  int driver; /* its index, -1: nothing claimed */
  void *hold;
} step_claim;
/* Asks the drivers for what step `key` of instance rowid (workflow) names
 * (`name`): DURO_STEP_CLAIM_GO (*claim filled), _WAIT (*wait_type,
 * *recheck_ms), _FAIL (*error_name, *message malloc'ed; also when no
 * driver serves the name). */
int engine_drivers_step_claim(duro_engine *e, const char *name, int64_t rowid,
                              const char *workflow, const char *key,
                              step_claim *claim, const char **wait_type,
                              int64_t *recheck_ms, const char **error_name,
                              char **message);
/* Gives back what was claimed, once (claim->driver is -1 after). */
void engine_drivers_step_unclaim(duro_engine *e, step_claim *claim);
/* The drivers' parts of /healthz; 1 when one makes it degraded. */
int engine_drivers_health(duro_engine *e, duro_health_parts *parts);
/* The drivers' series of GET /metrics. */
void engine_drivers_metrics(duro_engine *e, FILE *out);
/* The drivers' threads still running at `until` (stop), and close. */
struct timespec;
uint32_t engine_drivers_drain(duro_engine *e, const struct timespec *until);
void engine_drivers_free(duro_engine *e);

/* ---- the counters' history (history.c) ---- */

/* Init at open, free at close; the scheduler thread samples at every
 * pass. */
void engine_history_init(duro_engine *e);
void engine_history_free(duro_engine *e);
void engine_history_sample(duro_engine *e);

/* ---- builds (builds.c) ---- */

/* The build an activation of an instance runs: the one it is pinned to
 * (`pinned`, may be NULL: not yet pinned) under versioning: pinned, else
 * the newest.  Counted as running until build_release.  NULL when the
 * pinned build is not loaded. */
wf_build *build_acquire(wf_reg *wf, const char *pinned);
void build_release(wf_reg *wf, wf_build *b);
/* The newest build's hash (may be NULL). */
const char *build_newest_hash(wf_reg *wf);
void builds_free(wf_reg *wf);

/* ---- watches (watch.c) ---- */

/* The instance `rowid` ended with `status`, now committed: calls and
 * forgets its watches.  Call without mu. */
void engine_watch_fire(duro_engine *e, int64_t rowid, const char *status);
/* Forgets watches never given back (at close). */
void engine_watches_free(duro_engine *e);

/* ---- followers of instances' rows (changes.c) ---- */

/* The journal's commit hook (ctx: the engine). */
void engine_changes_committed(void *ctx, const journal_batch *b);
void engine_changes_free(duro_engine *e);

/* ---- the scheduler (scheduler.c) ---- */

/* The activation of `ent` could not write (storage): its uncommitted
 * work is dropped and the instance runs again, from its journal, after a
 * back-off (0.1 s doubling to 5 s).  Nothing acknowledged is lost: a step
 * result is acknowledged only once on disk.  mu not held. */
void engine_activation_retry(duro_engine *e, entry *ent);

/* Requeues retry entries whose time came (mu held); the next retry's
 * time, or INT64_MAX. */
int64_t engine_retries_due_locked(duro_engine *e, int64_t now);

/* Makes every instance the journal says is runnable, and has no entry,
 * runnable; applies persisted pause/terminate requests nobody holds.
 * Start-up recovery, and a periodic pass after storage failures. */
int engine_reconcile(duro_engine *e);

void *engine_scheduler_main(void *arg);

/* ---- other hosts on a shared store (hosts.c) ---- */

/* Joins the store as a host when the options say so (at open). */
int engine_join(duro_engine *e, char *err, size_t errlen);
/* This host's counts as they are now (hosts_list.c), and as the JSON
 * object's text its lease's renewals leave for the other hosts
 * (store_host_hooks.counts; malloc'd). */
void engine_host_counts(duro_engine *e, duro_host_counts *out);
char *engine_host_counts_text(void *engine);
/* Another host's counts from the text it left (NULL, or not counts: 0). */
int engine_host_counts_parse(const char *text, duro_host_counts *out);
/* rebalance.c: hands queued instances to idle hosts when this one has a
 * backlog (the scheduler's pass; returns when it looks next), and notes
 * instances handed to this one (a notice, on the keeper's thread). */
int64_t engine_rebalance_tick(duro_engine *e, int64_t mono);
void engine_rebalance_received(duro_engine *e, int64_t least, int64_t n);
/* The hosts of a shared store's counts and totals in GET /metrics. */
void engine_hosts_metrics(duro_engine *e, FILE *out);
/* The lease of this host (the option, or its default). */
int64_t engine_lease_ms(const duro_engine *e);
/* Renews the lease and takes over stopped hosts' instances, then makes
 * them runnable as recovery does.  At start, and from the scheduler. */
void engine_takeover(duro_engine *e);
/* The scheduler's turn: engine_takeover when due; when it next is. */
int64_t engine_hosts_tick(duro_engine *e, int64_t mono);
/* Whether a control request for instance `rowid` belongs to another
 * host: 1 with it in *owner, 0 when it runs here, or an error. */
int engine_control_elsewhere(duro_engine *e, int64_t rowid, int64_t *owner);
enum {
  CONTROL_OP_PAUSE,
  CONTROL_OP_TERMINATE,
  CONTROL_OP_RESUME,
  CONTROL_OP_RESTART,
  CONTROL_OP_TERMINATE_ROLLBACK,
  CONTROL_OP_RESTART_ROLLBACK,
  CONTROL_OP_DELETE,
  CONTROL_OP_DELETE_TERMINATE
};
/* A watch on this host for instance `rowid`, which host `owner` runs:
 * asks that host to say when it ends. */
void engine_watch_elsewhere(duro_engine *e, int64_t owner, int64_t rowid);
/* Instance `rowid` of this host ended (committed): tells the hosts that
 * wait for it. */
void engine_remote_watches_fire(duro_engine *e, int64_t rowid,
                                const char *status);
/* At close. */
void engine_hosts_free(duro_engine *e);
/* No notice from another host is taken from now on, and none is being
 * worked on (journal_quiet, then the notices thread ends): before what
 * they use goes away. */
void engine_hosts_quiet(duro_engine *e);
/* Sends control request `op` for instance `rowid` to host `owner` and
 * waits for its answer: what the owner's duro_instance_* returned (and,
 * for a restart, *why); FORWARD_HERE when the owner died meanwhile and
 * this host took the instance over (carry it out here); or
 * DURO_E_HOST_UNAVAILABLE when no answer came in time.  Should the owner
 * die after applying it, the request is applied again by the new owner,
 * which then refuses it (a 409 for what is already done). */
#define FORWARD_HERE 1
/* A control operation found the instance it holds handed to another host
 * since it read the owner (rebalance.c): it asks again, and forwards. */
#define CONTROL_MOVED 2
int engine_forward_control(duro_engine *e, int64_t rowid, int64_t owner, int op,
                           const char *workflow, const char *id,
                           const char *from, uint32_t count, char **why);

/* ---- control (control.c) ---- */

/* Applies a pause or terminate an activation handed over (its CONTROL
 * entry `ent`), then ends the control operation. */
void control_on_entry(duro_engine *e, entry *ent, int control);
/* Applies a pause or terminate found persisted at start (no activation
 * runs the instance); a persisted restart with rollbacks goes on. */
int apply_control_idle(duro_engine *e, int64_t rowid, int control);
/* A restart of `in` from the step at call position from_seq (-1: the
 * top) into batch b, before b's JOP_INSTANCE_SET of `in` (with
 * clear_control), which it makes queued with no output, error or times
 * (their strings are the caller's to free first, if it owns them). */
/* ---- retention (retention.c) ---- */

/* The retention_ms an instance of wf is inserted with: its create's own
 * (own_ms >= 0), or its workflow's, marked as such. */
int64_t engine_retention_at_create(const wf_reg *wf, int64_t own_ms);
/* For a row that ends now (it was from_status): the retention of its
 * workflow for the way it ended, appended to b, unless its create gave
 * its own.  wf NULL: nothing (a workflow no longer registered). */
void engine_retention_ops(const wf_reg *wf, journal_batch *b,
                          const journal_instance *row, duro_status from_status);

void engine_restart_ops(duro_engine *e, journal_batch *b, journal_instance *in,
                        int64_t from_seq);

/* Reads an instance's row after checking the workflow and the id:
 * DURO_E_WORKFLOW_NOT_FOUND, DURO_E_INVALID_ID, DURO_E_NOT_FOUND. */
int engine_instance_get(duro_engine *e, const char *workflow, const char *id,
                        journal_instance *in);

/* ---- reading instances (inspect.c) ---- */

/* The status a reader should see: a running activation overlays the
 * stored one. */
duro_status engine_live_status(duro_engine *e, int64_t rowid,
                               duro_status stored);

#endif
