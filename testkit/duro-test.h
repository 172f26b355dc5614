/* duro-test.h — test your workflows: a duro engine inside the test
 * process, on a journal of its own and a virtual clock, with mocked steps
 * and a crash at every step boundary.
 *
 * Build a test against it with `pkg-config --cflags --libs duro-test`
 * (after duro's `make install`); it is a plain C library, usable from
 * Check, cmocka, ctest or a `main` of your own:
 *
 *   duro_test *t = duro_test_open();
 *   duro_test_load(t, "./liborders.so", "order-flow", "OrderFlow");
 *   duro_test_create(t, "order-flow", "o-1", "{\"amount\":10}");
 *   duro_test_advance(t, "3 days");            // no real waiting
 *   DURO_TEST_ASSERT_STATUS(t, "order-flow", "o-1", "complete");
 *   duro_test_close(t);
 *
 * Your plugin's code runs in the test process, on the test's thread (as
 * a host's `workers: 0` runs it), under the same step runner, journal and
 * retry policy as in a host: what passes here behaves the same there.
 *
 * Every function that can fail returns 0 or a negative duro error code
 * (duro.h) and writes why into duro_test_error_text(t).  The engine logs
 * warnings and errors to stderr (DURO_LOG=info for every line). */
#ifndef DURO_TEST_H
#define DURO_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "duro.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct duro_test duro_test;

/* Opens an engine on a new journal in a temporary directory, its clock
 * virtual and stopped at 2026-01-01T00:00:00Z.  Never NULL: a failure to
 * open prints why and aborts (a test cannot go on without it). */
duro_test *duro_test_open(void);
/* Closes the engine and removes its directory. */
void duro_test_close(duro_test *t);

/* Why the last call that failed did, or "". */
const char *duro_test_error_text(const duro_test *t);

/* ---- workflows ---------------------------------------------------------
 * Register every workflow before the first create. */

/* Loads a plugin .so (checked as a host checks it: ABI, layout, init) and
 * registers its class `class_name` as workflow `workflow`.  `binding`
 * (may be NULL) is the name steps reach it by (duro_env_workflow). */
int duro_test_load(duro_test *t, const char *path, const char *workflow,
                   const char *class_name, const char *binding);
/* The same for a plugin linked into the test program: pass its
 * duro_plugin() (DURO_PLUGIN defines it). */
int duro_test_load_info(duro_test *t, const duro_plugin_info *info,
                        const char *workflow, const char *class_name,
                        const char *binding);

/* ---- running -------------------------------------------------------- */

/* Creates instance `id` (NULL: a random one, not returned) of workflow
 * with params (JSON text, NULL: null).  It runs at the next run or
 * advance. */
int duro_test_create(duro_test *t, const char *workflow, const char *id,
                     const char *params);
/* Runs every activation that can run now, until none can. */
size_t duro_test_run(duro_test *t);
/* Moves the virtual clock on by `duration` ("90s", "2 days", "1h30m")
 * and runs what became due, in order (a sleep that ends in between runs
 * at its own time, not at the end).  Returns how many activations ran,
 * or a negative code for a duration it cannot read. */
int64_t duro_test_advance(duro_test *t, const char *duration);
/* Runs the instance until it has ended or waits for an event that was
 * not sent, moving the clock to each wake (sleeps, retries' back-offs,
 * timeouts) as it goes, at most `limit` ("30 days"; NULL: 365 days) on.
 * Returns 0 once it ended, DURO_E_BUSY if it had not within limit. */
int duro_test_run_to_end(duro_test *t, const char *workflow, const char *id,
                         const char *limit);
/* Sends an event (payload JSON text, NULL: null) to the instance. */
int duro_test_send_event(duro_test *t, const char *workflow, const char *id,
                         const char *type, const char *payload);
/* The virtual clock's reading, Unix ms. */
int64_t duro_test_now_ms(const duro_test *t);

/* ---- queues, pipelines and cron triggers ---------------------------------
 * Declared before the first create, as a host's config declares them. */

/* Declares queue `name` (its defaults), which steps send to as `binding`
 * (duro_env_queue; NULL: none).  Nothing consumes it: the test reads what
 * was sent with duro_test_queue_messages. */
int duro_test_queue(duro_test *t, const char *name, const char *binding);
/* The messages in the queue (sent and committed, up to 100, oldest
 * first) as a JSON array of their bodies, or NULL for an unknown queue. */
const char *duro_test_queue_messages(duro_test *t, const char *name);
/* Declares pipeline `name`, which plugin code sends to as `binding`
 * (duro_env_pipeline; NULL: none).  Its records stay in the test's
 * journal (no file is written): duro_test_pipeline_records reads them. */
int duro_test_pipeline(duro_test *t, const char *name, const char *binding);
/* The records sent to the pipeline and committed (a step's with its
 * result), in the order accepted, as a JSON array; NULL for a pipeline
 * not declared. */
const char *duro_test_pipeline_records(duro_test *t, const char *name);
/* A cron trigger on `schedule` (a cron expression, UTC): each tick the
 * virtual clock passes creates an instance of `workflow` (id
 * "cron-YYYY-MM-DDTHH:MM", params from `params`, NULL: none), or, with
 * workflow NULL, calls the scheduled handler of a plugin the test loaded. */
int duro_test_cron(duro_test *t, const char *schedule, const char *workflow,
                   const char *params);

/* ---- reading ------------------------------------------------------------
 * Strings returned here are the test's until duro_test_close or the next
 * read of the same kind: don't free them. */

/* "queued", "running", "waiting", "paused", "complete", "errored",
 * "terminated", or NULL for an unknown instance. */
const char *duro_test_status(duro_test *t, const char *workflow,
                             const char *id);
/* The instance's output, its error ({"name","message"}), or a step's
 * result (by key, "charge#1"), as JSON text; NULL when there is none. */
const char *duro_test_output(duro_test *t, const char *workflow,
                             const char *id);
const char *duro_test_error(duro_test *t, const char *workflow, const char *id);
const char *duro_test_step_result(duro_test *t, const char *workflow,
                                  const char *id, const char *key);
/* A step's attempts so far (0: no such step). */
int duro_test_step_attempts(duro_test *t, const char *workflow, const char *id,
                            const char *key);
/* How many times the step's callback was called in this test, attempts
 * and mocks included (by key, or by name for all its keys). */
int duro_test_calls(duro_test *t, const char *workflow, const char *step);
/* Everything the journal holds of the instance, as `duro workflows
 * instances describe` prints it (JSON). */
const char *duro_test_describe(duro_test *t, const char *workflow,
                               const char *id);

/* ---- assertions -----------------------------------------------------------
 * On a mismatch they print what was expected, what was found and the
 * instance's journal (describe) to stderr, then call the failure handler
 * (default: abort(), which every test runner counts as a failure). */
void duro_test_on_failure(duro_test *t, void (*fail)(void *ctx), void *ctx);

#define DURO_TEST_ASSERT_STATUS(t, wf, id, status)                             \
  duro_test_expect_status_((t), (wf), (id), (status), __FILE__, __LINE__)
#define DURO_TEST_ASSERT_OUTPUT(t, wf, id, json)                               \
  duro_test_expect_output_((t), (wf), (id), (json), __FILE__, __LINE__)
#define DURO_TEST_ASSERT_ATTEMPTS(t, wf, id, key, n)                           \
  duro_test_expect_attempts_((t), (wf), (id), (key), (n), __FILE__, __LINE__)

/* ---- mocked steps ---------------------------------------------------------
 * `step` is a key ("charge#2": that call only) or a name ("charge": every
 * call of it).  The plugin's code is untouched: its callback is replaced
 * in the calls that match, and attempts, back-offs and timeouts still
 * follow the step's policy on the virtual clock. */

/* Every attempt returns `json` (its result). */
int duro_test_mock_result(duro_test *t, const char *workflow, const char *step,
                          const char *json);
/* The first `n` attempts fail ("mocked failure" or message), then the
 * step runs as mocked otherwise (or its own callback). */
int duro_test_mock_fail(duro_test *t, const char *workflow, const char *step,
                        uint32_t n, const char *message);
/* Every attempt fails for good (no retry). */
int duro_test_mock_fail_final(duro_test *t, const char *workflow,
                              const char *step, const char *message);
/* Every attempt calls fn(attempt, arg) instead of the plugin's callback.
 * A test file that calls duro.h's functions itself, as such a callback
 * does, says DURO_TEST_API once at file scope (unless it links a
 * plugin's source, whose DURO_PLUGIN does the same). */
int duro_test_mock_fn(duro_test *t, const char *workflow, const char *step,
                      duro_step_fn fn, void *arg);

/* ---- a crash at every step boundary --------------------------------------
 * Runs a new instance of the workflow to its end once without a crash,
 * then once for each boundary it passed — before each attempt's callback,
 * after its callback returned (its result not yet journaled), after each
 * step's commit, each branch of a duro_do_all included — each time in a
 * process that is killed there (all memory lost, as kill -9) and a
 * process that recovers from the journal as a restarted host would.
 * Each recovering process reads the wall clock a day later (time(),
 * gettimeofday, CLOCK_REALTIME) and rand()/random() seeded anew, so that
 * run() code that depends on them outside a step shows.  It checks, at
 * every boundary:
 *   - run() asks for the same steps in the same order on every replay
 *     (names built from the clock or randomness, branches on them);
 *   - no step's callback runs again once its completion was journaled;
 *   - a step run again after a crash before its commit returns the same
 *     result (its effect is idempotent);
 *   - the instance ends with the same status and output.
 * Events in `events` (pairs of type and payload, NULL-terminated; NULL
 * for none) are sent right after each creation.  Returns 0 when every
 * boundary passed; else DURO_ERROR with the first failure in *report
 * (may be NULL): which boundary, which step, what differed.  n_boundaries
 * (may be NULL) receives how many boundaries were tried. */
typedef struct duro_test_crash_report {
  size_t boundary;    /* the failing boundary, from 1 */
  char where[256];    /* "after the commit of charge#1" */
  char message[1024]; /* what differed */
} duro_test_crash_report;

int duro_test_crash_everywhere(duro_test *t, const char *workflow,
                               const char *params, const char *const *events,
                               size_t *n_boundaries,
                               duro_test_crash_report *report);

/* ---- replays of real journals ---------------------------------------------
 * An instance's journal, as `duro workflows instances export WF ID >
 * journal.json` writes it on a host (the document "duro-journal-1": its
 * params, steps and their results and attempts, events, status), brought
 * into the test: to see what your new code would do to an instance in
 * production before you deploy it.  `path_or_json` is a file's path, or
 * the document's text itself (text beginning with '{').  A document that
 * is not JSON, of another format version, of a workflow this test did not
 * register, or with a bad field fails with what and where in
 * duro_test_error_text ("journal.json: steps[2].status: \"done\" is not
 * a step status"). */

/* The instance's journal as export writes it (JSON text), or NULL for an
 * unknown instance: to make documents in a test, or keep one to replay
 * later. */
const char *duro_test_export(duro_test *t, const char *workflow,
                             const char *id);

/* Writes an exported instance into the test's journal as it was there,
 * then recovers it as a restarted host would: duro_test_run,
 * duro_test_advance, duro_test_send_event... then run it on the code the
 * test loaded for its workflow, which it is pinned to (the build it ran
 * on stays in its attempts' history).  The virtual clock moves on to the
 * export's time when it is behind it, so that its timers fall due when
 * they would have.  Its parent, if it had one, is not in the test: its
 * end tells no one.  *id_out (may be NULL) gets its id (the test's until
 * the next import). */
int duro_test_import(duro_test *t, const char *path_or_json,
                     const char **id_out);

/* What a replay found. */
typedef struct duro_test_replay_report {
  char workflow[128], id[128];
  /* "replays": the journal replays and the instance would go on, from
   * `next`; "completes": it would complete; "diverged": the code asks
   * for steps its journal does not have. */
  char outcome[16];
  unsigned journaled; /* the journaled steps the replay went through */
  char next[256];     /* the step it would run or wait at next, or "" */
  /* diverged: the step the code asked for ("rest#1"), the one the
   * journal has at that call ("cool off#1"; "" when none), and why. */
  char step[256], journal_step[256];
  char message[1024];
} duro_test_replay_report;

/* Imports the document (as duro_test_import) and replays its journal on
 * the code the test loaded for its workflow, running, waiting and
 * writing nothing (the test-time form of `duro check --replay`): journaled
 * steps return their results and the replay stops at the first step that
 * would run.  Returns 0 when it replays or completes, DURO_ERROR when it
 * diverged (the message in duro_test_error_text too), or a negative code
 * for a document it could not import or an instance that has ended (an
 * ended instance runs no more code).  The instance stays imported: the
 * test may go on to run it. */
int duro_test_replay(duro_test *t, const char *path_or_json,
                     duro_test_replay_report *report);

/* The API table the kit binds plugins to. */
const duro_api *duro_test_api(void);

#define DURO_TEST_API                                                          \
  DURO_HIDDEN_ const duro_api *duro_api_ptr_;                                  \
  __attribute__((constructor)) static void duro_test_bind_(void) {             \
    duro_api_ptr_ = duro_test_api();                                           \
  }                                                                            \
  extern int duro_test_api_bound_

/* The assertions' implementations (use the macros). */
int duro_test_expect_status_(duro_test *t, const char *workflow, const char *id,
                             const char *status, const char *file, int line);
int duro_test_expect_output_(duro_test *t, const char *workflow, const char *id,
                             const char *json, const char *file, int line);
int duro_test_expect_attempts_(duro_test *t, const char *workflow,
                               const char *id, const char *key, int n,
                               const char *file, int line);

#ifdef __cplusplus
}
#endif

#endif
