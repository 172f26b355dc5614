/* test_bulk.c — bulk actions (bulk/bulk.h) against the real engine on a
 * virtual clock (and on PostgreSQL in `make test`), the batches run by
 * the test (duro_bulk_pass) as the driver's thread runs them:
 *
 *  - each action (terminate, pause, resume, restart, delete) over a
 *    filter changes exactly the instances that match it, and no other:
 *    not another status, prefix or workflow; the job's counts say what
 *    it did, its state ends done with its end time;
 *  - delete skips live instances (counted skipped) unless terminate;
 *  - dry_run counts the matches, changes nothing and makes no job;
 *  - a job sees only the instances that existed when it was made;
 *  - it goes a batch (DURO_BULK_BATCH) a pass, and a cancel stops it
 *    after the batch under way: the rest stay as they were;
 *  - a restart's batch cut short by a crash resumes from its plan: an
 *    instance it restarted already is not restarted again;
 *  - ended jobs are swept a week after their end, not before, nor running
 *    ones;
 *  - chosen ids (filter ids) take only those of them that pass the rest
 *    of the filter, none other; ids unknown are not matched; the job
 *    shows them; over two batches and a restart of the engine it goes
 *    on with the same ids;
 *  - a status never stored (running), an unknown workflow, more than
 *    DURO_BULK_IDS ids and one that is not an id are refused. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "bulk.h"
#include "core.h"
#include "error.h"
#include "harness.h"
#include "journal.h"
#include "suite_run.h"
#include "view_bulk.h"

#define WF "wf"
#define OTHER "other"
#define DAY (24 * 3600 * 1000LL)

static harness H;

/* params "fail": errored; "done": complete; else it waits for "go". */
static duro_rc flow(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  if (ev->params && strstr(ev->params, "fail"))
    return duro_fail(step, "declined");
  if (ev->params && strstr(ev->params, "done"))
    return duro_set_output(step, "1");
  const char *event;
  DURO_TRY(duro_wait_for_event(step, "go", "go", "30 days", &event));
  return duro_set_output(step, "2");
}

/* wf's search attribute: customer, from /c */
static const duro_attr_decl index_decls[] = {
    {"customer", "/c", DURO_ATTR_STRING}};
static const duro_workflow_limits indexed = {.index = index_decls,
                                             .n_index = 1};

static void setup(void) {
  harness_open(&H);
  harness_register_limits(&H, WF, flow, &indexed);
  harness_register(&H, OTHER, flow);
  harness_start(&H);
}

static void teardown(void) { harness_close(&H); }

/* Instances prefix-1..n of wf, each with params (NULL: it waits), run
 * until they wait or end. */
static void make(const char *wf, const char *prefix, int n,
                 const char *params) {
  for (int i = 1; i <= n; i++) {
    char id[64];
    snprintf(id, sizeof id, "%s%d", prefix, i);
    harness_create(&H, wf, id, params, 0);
  }
  harness_run(&H);
}

/* Fails unless every one of prefix-1..n of wf has `status`. */
static void assert_all(const char *wf, const char *prefix, int n,
                       const char *status) {
  for (int i = 1; i <= n; i++) {
    char id[64];
    snprintf(id, sizeof id, "%s%d", prefix, i);
    if (!strcmp(status, "gone")) {
      duro_status st;
      ck_assert_msg(duro_instance_status(H.e, wf, id, &st) == DURO_E_NOT_FOUND,
                    "%s/%s is still there", wf, id);
    } else {
      ck_assert_msg(!strcmp(harness_status(&H, wf, id), status),
                    "%s/%s is %s, expected %s", wf, id,
                    harness_status(&H, wf, id), status);
    }
  }
}

static int64_t restarts_of(const char *id) {
  journal_instance in = {0};
  ck_assert_int_eq(journal_instance_get(engine_journal(H.e), WF, id, &in), 0);
  int64_t n = in.restarts;
  journal_instance_clear(&in);
  return n;
}

/* A job of `action` over filter f (terminate: delete's option); its id,
 * with its matches checked. */
static int64_t job(duro_bulk_action action, duro_list_filter f, int terminate,
                   int64_t matched) {
  duro_bulk_spec spec = {
      .workflow = WF, .action = action, .filter = f, .terminate = terminate};
  int64_t id, n;
  ck_assert_int_eq(duro_bulk_create(H.e, &spec, 0, &id, &n), 0);
  ck_assert_int_gt(id, 0);
  ck_assert_int_eq(n, matched);
  return id;
}

/* Passes until the job is no longer running (at most `passes`). */
static void run_job(int64_t id, int passes) {
  for (int i = 0; i < passes; i++) {
    duro_bulk_job j;
    ck_assert_int_eq(duro_bulk_get(H.e, id, &j), 0);
    int running = !strcmp(j.state, "running");
    duro_bulk_job_free(&j);
    if (!running)
      return;
    duro_bulk_pass(H.e);
    harness_run(&H);
  }
  ck_abort_msg("job %lld still runs after %d passes", (long long)id, passes);
}

/* Fails unless the job's state and counts are these. */
static void assert_job(int64_t id, const char *state, int64_t matched,
                       int64_t done, int64_t failed, int64_t skipped) {
  duro_bulk_job j;
  ck_assert_int_eq(duro_bulk_get(H.e, id, &j), 0);
  ck_assert_str_eq(j.state, state);
  ck_assert_int_eq(j.matched, matched);
  ck_assert_int_eq(j.done, done);
  ck_assert_int_eq(j.failed, failed);
  ck_assert_int_eq(j.skipped, skipped);
  if (!strcmp(state, "running"))
    ck_assert_int_eq(j.ended_ms, DURO_NO_TIME);
  else
    ck_assert_int_eq(j.ended_ms, duro_clock_now(&H.clock));
  duro_bulk_job_free(&j);
}

static duro_list_filter by(int status, const char *prefix) {
  return (duro_list_filter){.status = status, .prefix = prefix};
}

START_TEST(terminate_takes_only_matches) {
  make(WF, "w-", 5, NULL);
  make(WF, "x-", 3, NULL);
  make(WF, "c-", 2, "\"done\"");
  make(OTHER, "w-", 2, NULL);
  int64_t id = job(DURO_BULK_TERMINATE, by(DURO_STATUS_WAITING, "w-"), 0, 5);
  assert_job(id, "running", 5, 0, 0, 0);
  run_job(id, 3);
  assert_job(id, "done", 5, 5, 0, 0);
  assert_all(WF, "w-", 5, "terminated");
  assert_all(WF, "x-", 3, "waiting");
  assert_all(WF, "c-", 2, "complete");
  assert_all(OTHER, "w-", 2, "waiting");
}
END_TEST

/* A filter's search attribute terms: the job takes the instances whose
 * attribute passes, keeps its terms in its row (shown in the job) and
 * reads them again for each batch. */
START_TEST(where_takes_only_its_attribute) {
  make(WF, "a-", 4, "{\"c\":\"acme\"}");
  make(WF, "b-", 3, "{\"c\":\"bolt\"}");
  duro_attr_filter w;
  char err[200];
  ck_assert_int_eq(
      duro_list_where_parse(H.e, WF, "customer:acme", &w, err, sizeof err), 0);
  duro_list_filter f = {
      .status = DURO_STATUS_WAITING, .where = &w, .n_where = 1};
  int64_t id = job(DURO_BULK_TERMINATE, f, 0, 4);
  duro_attr_filter_clear(&w);
  run_job(id, 3);
  assert_job(id, "done", 4, 4, 0, 0);
  assert_all(WF, "a-", 4, "terminated");
  assert_all(WF, "b-", 3, "waiting");
  json_t *j = NULL;
  ck_assert_int_eq(duro_bulk_job_json(H.e, id, &j), 0);
  json_t *where = json_object_get(json_object_get(j, "filter"), "where");
  ck_assert_int_eq(json_array_size(where), 1);
  ck_assert_str_eq(json_string_value(json_array_get(where, 0)),
                   "customer:acme");
  json_decref(j);
}
END_TEST

/* Chosen ids, with the filter's other fields and with its search
 * attributes: only the chosen ones that pass. */
START_TEST(ids_take_only_the_chosen) {
  make(WF, "w-", 5, NULL);
  make(WF, "c-", 2, "\"done\"");
  make(WF, "a-", 2, "{\"c\":\"acme\"}");
  make(OTHER, "w-", 2, NULL);
  const char *ids[] = {"w-2", "w-4", "c-1", "nope", "a-1", "a-2"};
  duro_bulk_spec spec = {.workflow = WF,
                         .action = DURO_BULK_TERMINATE,
                         .filter = by(-1, NULL),
                         .ids = ids,
                         .n_ids = 5};
  int64_t id, n;
  ck_assert_int_eq(duro_bulk_create(H.e, &spec, 0, &id, &n), 0);
  ck_assert_int_eq(n, 4); /* w-2, w-4, c-1 (ended: skipped), a-1 */
  run_job(id, 3);
  assert_job(id, "done", 4, 3, 0, 1);
  assert_all(WF, "c-", 2, "complete");
  ck_assert_str_eq(harness_status(&H, WF, "w-2"), "terminated");
  ck_assert_str_eq(harness_status(&H, WF, "w-4"), "terminated");
  ck_assert_str_eq(harness_status(&H, WF, "a-1"), "terminated");
  ck_assert_str_eq(harness_status(&H, WF, "a-2"), "waiting");
  ck_assert_str_eq(harness_status(&H, WF, "w-1"), "waiting");
  ck_assert_str_eq(harness_status(&H, WF, "w-3"), "waiting");
  ck_assert_str_eq(harness_status(&H, WF, "w-5"), "waiting");
  assert_all(OTHER, "w-", 2, "waiting");
  json_t *j = NULL;
  ck_assert_int_eq(duro_bulk_job_json(H.e, id, &j), 0);
  json_t *shown = json_object_get(json_object_get(j, "filter"), "ids");
  ck_assert_int_eq(json_array_size(shown), 5);
  ck_assert_str_eq(json_string_value(json_array_get(shown, 4)), "a-1");
  json_decref(j);
  /* with the filter's status and a search attribute: a-2 alone */
  duro_attr_filter w;
  char err[200];
  ck_assert_int_eq(
      duro_list_where_parse(H.e, WF, "customer:acme", &w, err, sizeof err), 0);
  spec.filter = (duro_list_filter){
      .status = DURO_STATUS_WAITING, .where = &w, .n_where = 1};
  spec.action = DURO_BULK_PAUSE;
  spec.n_ids = 6;
  ck_assert_int_eq(duro_bulk_create(H.e, &spec, 0, &id, &n), 0);
  duro_attr_filter_clear(&w);
  ck_assert_int_eq(n, 1);
  run_job(id, 3);
  assert_job(id, "done", 1, 1, 0, 0);
  ck_assert_str_eq(harness_status(&H, WF, "a-2"), "paused");
  ck_assert_str_eq(harness_status(&H, WF, "w-1"), "waiting");
}
END_TEST

/* More chosen ids than a batch takes: the job's row keeps them, so after
 * a restart of the engine between two batches it goes on with them. */
START_TEST(ids_go_on_across_a_restart) {
  make(WF, "w-", DURO_BULK_BATCH + 30, NULL);
  static char names[DURO_BULK_BATCH + 20][16];
  const char *ids[DURO_BULK_BATCH + 20];
  for (int i = 0; i < DURO_BULK_BATCH + 20; i++) { /* w-1 .. w-120 */
    snprintf(names[i], sizeof names[i], "w-%d", i + 1);
    ids[i] = names[i];
  }
  duro_bulk_spec spec = {.workflow = WF,
                         .action = DURO_BULK_TERMINATE,
                         .filter = by(-1, NULL),
                         .ids = ids,
                         .n_ids = DURO_BULK_BATCH + 20};
  int64_t id, n;
  ck_assert_int_eq(duro_bulk_create(H.e, &spec, 0, &id, &n), 0);
  ck_assert_int_eq(n, DURO_BULK_BATCH + 20);
  duro_bulk_pass(H.e);
  harness_run(&H);
  assert_job(id, "running", n, DURO_BULK_BATCH, 0, 0);
  harness_reopen(&H);
  run_job(id, 3);
  assert_job(id, "done", n, n, 0, 0);
  assert_all(WF, "w-", DURO_BULK_BATCH + 20, "terminated");
  for (int i = DURO_BULK_BATCH + 21; i <= DURO_BULK_BATCH + 30; i++) {
    char other[16];
    snprintf(other, sizeof other, "w-%d", i);
    ck_assert_str_eq(harness_status(&H, WF, other), "waiting");
  }
}
END_TEST

START_TEST(pause_then_resume) {
  make(WF, "w-", 4, NULL);
  make(WF, "x-", 2, NULL);
  int64_t id = job(DURO_BULK_PAUSE, by(-1, "w-"), 0, 4);
  run_job(id, 3);
  assert_job(id, "done", 4, 4, 0, 0);
  assert_all(WF, "w-", 4, "paused");
  assert_all(WF, "x-", 2, "waiting");
  /* the paused ones only: a resume of a waiting one would be refused */
  id = job(DURO_BULK_RESUME, by(DURO_STATUS_PAUSED, NULL), 0, 4);
  run_job(id, 3);
  assert_job(id, "done", 4, 4, 0, 0);
  assert_all(WF, "w-", 4, "waiting");
  /* with no filter, resume meets the waiting ones too: refused, skipped */
  id = job(DURO_BULK_RESUME, by(-1, NULL), 0, 6);
  run_job(id, 3);
  assert_job(id, "done", 6, 0, 0, 6);
}
END_TEST

START_TEST(restart_the_errored_ones) {
  make(WF, "e-", 3, "\"fail\"");
  make(WF, "c-", 2, "\"done\"");
  make(OTHER, "e-", 2, "\"fail\"");
  int64_t id = job(DURO_BULK_RESTART, by(DURO_STATUS_ERRORED, NULL), 0, 3);
  run_job(id, 3);
  assert_job(id, "done", 3, 3, 0, 0);
  /* each ran again once (and failed again) */
  assert_all(WF, "e-", 3, "errored");
  for (int i = 1; i <= 3; i++) {
    char eid[8];
    snprintf(eid, sizeof eid, "e-%d", i);
    ck_assert_int_eq(restarts_of(eid), 1);
  }
  ck_assert_int_eq(restarts_of("c-1"), 0);
  ck_assert_int_eq(restarts_of("c-2"), 0);
  journal_instance in = {0};
  ck_assert_int_eq(journal_instance_get(engine_journal(H.e), OTHER, "e-1", &in),
                   0);
  ck_assert_int_eq(in.restarts, 0);
  journal_instance_clear(&in);
}
END_TEST

START_TEST(delete_skips_live_unless_terminate) {
  make(WF, "c-", 3, "\"done\"");
  make(WF, "w-", 2, NULL);
  make(WF, "e-", 1, "\"fail\"");
  int64_t id = job(DURO_BULK_DELETE, by(DURO_STATUS_COMPLETE, NULL), 0, 3);
  run_job(id, 3);
  assert_job(id, "done", 3, 3, 0, 0);
  assert_all(WF, "c-", 3, "gone");
  assert_all(WF, "w-", 2, "waiting");
  assert_all(WF, "e-", 1, "errored");
  /* live ones are refused as DELETE refuses them: skipped */
  id = job(DURO_BULK_DELETE, by(-1, NULL), 0, 3);
  run_job(id, 3);
  assert_job(id, "done", 3, 1, 0, 2);
  assert_all(WF, "w-", 2, "waiting");
  assert_all(WF, "e-", 1, "gone");
  /* with terminate, they go too */
  id = job(DURO_BULK_DELETE, by(DURO_STATUS_WAITING, "w-"), 1, 2);
  run_job(id, 3);
  assert_job(id, "done", 2, 2, 0, 0);
  assert_all(WF, "w-", 2, "gone");
}
END_TEST

START_TEST(dry_run_changes_nothing) {
  make(WF, "w-", 3, NULL);
  make(WF, "c-", 2, "\"done\"");
  duro_bulk_spec spec = {.workflow = WF,
                         .action = DURO_BULK_DELETE,
                         .filter = by(-1, NULL),
                         .terminate = 1};
  int64_t id = -1, n = -1;
  ck_assert_int_eq(duro_bulk_create(H.e, &spec, 1, &id, &n), 0);
  ck_assert_int_eq(n, 5);
  ck_assert_int_eq(id, 0);
  duro_bulk_pass(H.e);
  harness_run(&H);
  assert_all(WF, "w-", 3, "waiting");
  assert_all(WF, "c-", 2, "complete");
  duro_bulk_job *v;
  size_t jobs;
  ck_assert_int_eq(duro_bulk_list(H.e, WF, 10, &v, &jobs), 0);
  ck_assert_uint_eq(jobs, 0);
  free(v);
}
END_TEST

START_TEST(job_sees_only_instances_made_before_it) {
  make(WF, "a-", 3, NULL);
  int64_t id = job(DURO_BULK_TERMINATE, by(DURO_STATUS_WAITING, NULL), 0, 3);
  make(WF, "b-", 2, NULL);
  run_job(id, 3);
  assert_job(id, "done", 3, 3, 0, 0);
  assert_all(WF, "a-", 3, "terminated");
  assert_all(WF, "b-", 2, "waiting");
}
END_TEST

START_TEST(a_batch_a_pass_and_cancel_stops_it) {
  int n = DURO_BULK_BATCH * 2 + 50;
  make(WF, "w-", n, NULL);
  int64_t id = job(DURO_BULK_TERMINATE, by(DURO_STATUS_WAITING, NULL), 0, n);
  ck_assert_uint_eq(duro_bulk_pass(H.e), DURO_BULK_BATCH);
  harness_run(&H);
  assert_job(id, "running", n, DURO_BULK_BATCH, 0, 0);
  ck_assert_int_eq(duro_bulk_cancel(H.e, id), 0);
  assert_job(id, "cancelled", n, DURO_BULK_BATCH, 0, 0);
  ck_assert_uint_eq(duro_bulk_pass(H.e), 0);
  harness_run(&H);
  /* newest first: the last made went, the first stayed */
  char last[16], first[16];
  snprintf(last, sizeof last, "w-%d", n);
  snprintf(first, sizeof first, "w-%d", 1);
  ck_assert_str_eq(harness_status(&H, WF, last), "terminated");
  ck_assert_str_eq(harness_status(&H, WF, first), "waiting");
  json_t *stats = NULL;
  ck_assert_int_eq(duro_workflow_stats(H.e, WF, &stats), 0);
  ck_assert_int_eq(json_integer_value(json_object_get(
                       json_object_get(stats, "instances"), "waiting")),
                   n - DURO_BULK_BATCH);
  json_decref(stats);
  /* a second cancel: it has ended */
  ck_assert_int_eq(duro_bulk_cancel(H.e, id), DURO_E_INVALID_ARGUMENT);
  ck_assert_int_eq(duro_bulk_cancel(H.e, id + 100), DURO_E_NOT_FOUND);
}
END_TEST

/* The job's row as a crash left it: a restart's plan recorded (each
 * instance's restart count before it), one of them restarted already. */
START_TEST(restart_plan_resumes_without_restarting_twice) {
  make(WF, "e-", 3, "\"fail\"");
  int64_t id = job(DURO_BULK_RESTART, by(DURO_STATUS_ERRORED, NULL), 0, 3);
  journal_bulk row;
  ck_assert_int_eq(journal_bulk_get(engine_journal(H.e), id, &row), 0);
  char plan[128];
  journal_instance a = {0}, b = {0}, c = {0};
  journal *j = engine_journal(H.e);
  ck_assert_int_eq(journal_instance_get(j, WF, "e-3", &a), 0);
  ck_assert_int_eq(journal_instance_get(j, WF, "e-2", &b), 0);
  ck_assert_int_eq(journal_instance_get(j, WF, "e-1", &c), 0);
  snprintf(plan, sizeof plan, "%lld:0,%lld:0,%lld:0", (long long)a.rowid,
           (long long)b.rowid, (long long)c.rowid);
  journal_instance_clear(&a);
  journal_instance_clear(&b);
  journal_instance_clear(&c);
  free(row.plan);
  row.plan = strdup(plan);
  journal_batch batch = {0};
  journal_op *op = journal_batch_add(&batch, JOP_BULK_PROGRESS);
  op->bulk = &row;
  ck_assert_int_eq(journal_commit(j, &batch), 0);
  ck_assert_int_eq(op->out_rowid, 1);
  journal_batch_free(&batch);
  journal_bulk_clear(&row);
  /* the batch had restarted e-3 before the crash; it failed again since */
  ck_assert_int_eq(duro_instance_restart(H.e, WF, "e-3", NULL, 0), 0);
  harness_run(&H);
  assert_all(WF, "e-", 3, "errored");

  run_job(id, 4);
  assert_job(id, "done", 3, 3, 0, 0);
  ck_assert_int_eq(restarts_of("e-3"), 1);
  ck_assert_int_eq(restarts_of("e-2"), 1);
  ck_assert_int_eq(restarts_of("e-1"), 1);
}
END_TEST

START_TEST(ended_jobs_swept_after_a_week) {
  make(WF, "w-", 2, NULL);
  int64_t old = job(DURO_BULK_PAUSE, by(-1, "w-1"), 0, 1);
  run_job(old, 3);
  harness_advance(&H, 6 * DAY);
  int64_t young = job(DURO_BULK_PAUSE, by(-1, "w-2"), 0, 1);
  run_job(young, 3);
  int64_t live = job(DURO_BULK_RESUME, by(-1, NULL), 0, 2);
  harness_advance(&H, 2 * DAY);
  ck_assert_uint_eq(duro_bulk_sweep(H.e, 100), 1);
  duro_bulk_job j;
  ck_assert_int_eq(duro_bulk_get(H.e, old, &j), DURO_E_NOT_FOUND);
  ck_assert_int_eq(duro_bulk_get(H.e, young, &j), 0);
  duro_bulk_job_free(&j);
  ck_assert_int_eq(duro_bulk_get(H.e, live, &j), 0); /* running: kept */
  duro_bulk_job_free(&j);
}
END_TEST

START_TEST(refusals) {
  make(WF, "w-", 1, NULL);
  int64_t id, n;
  duro_bulk_spec spec = {.workflow = WF,
                         .action = DURO_BULK_TERMINATE,
                         .filter = by(DURO_STATUS_RUNNING, NULL)};
  ck_assert_int_eq(duro_bulk_create(H.e, &spec, 0, &id, &n),
                   DURO_E_INVALID_ARGUMENT);
  spec.filter = by(-1, NULL);
  spec.workflow = "nope";
  ck_assert_int_eq(duro_bulk_create(H.e, &spec, 0, &id, &n),
                   DURO_E_WORKFLOW_NOT_FOUND);
  spec.workflow = WF;
  spec.action = (duro_bulk_action)42;
  ck_assert_int_eq(duro_bulk_create(H.e, &spec, 0, &id, &n),
                   DURO_E_INVALID_ARGUMENT);
  /* chosen ids: at most DURO_BULK_IDS, each an instance id */
  static const char *many[DURO_BULK_IDS + 1];
  for (size_t i = 0; i <= DURO_BULK_IDS; i++)
    many[i] = "w-1";
  spec.action = DURO_BULK_TERMINATE;
  spec.ids = many;
  spec.n_ids = DURO_BULK_IDS + 1;
  ck_assert_int_eq(duro_bulk_create(H.e, &spec, 1, &id, &n),
                   DURO_E_INVALID_ARGUMENT);
  const char *bad[] = {"w-1", "not an id"};
  spec.ids = bad;
  spec.n_ids = 2;
  ck_assert_int_eq(duro_bulk_create(H.e, &spec, 1, &id, &n),
                   DURO_E_INVALID_ARGUMENT);
  spec.n_ids = 0;
  /* an empty workflow: a job of nothing, done at its first pass */
  spec.workflow = OTHER;
  spec.action = DURO_BULK_TERMINATE;
  ck_assert_int_eq(duro_bulk_create(H.e, &spec, 0, &id, &n), 0);
  ck_assert_int_eq(n, 0);
  run_job(id, 2);
  assert_job(id, "done", 0, 0, 0, 0);
}
END_TEST

static Suite *bulk_suite(void) {
  Suite *s = suite_create("bulk");
  TCase *tc = tcase_create("bulk");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, terminate_takes_only_matches);
  tcase_add_test(tc, where_takes_only_its_attribute);
  tcase_add_test(tc, ids_take_only_the_chosen);
  tcase_add_test(tc, ids_go_on_across_a_restart);
  tcase_add_test(tc, pause_then_resume);
  tcase_add_test(tc, restart_the_errored_ones);
  tcase_add_test(tc, delete_skips_live_unless_terminate);
  tcase_add_test(tc, dry_run_changes_nothing);
  tcase_add_test(tc, job_sees_only_instances_made_before_it);
  tcase_add_test(tc, a_batch_a_pass_and_cancel_stops_it);
  tcase_add_test(tc, restart_plan_resumes_without_restarting_twice);
  tcase_add_test(tc, ended_jobs_swept_after_a_week);
  tcase_add_test(tc, refusals);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(bulk_suite()); }
