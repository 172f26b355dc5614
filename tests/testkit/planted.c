/* planted.c — workflows for the test kit's own tests (test_testkit.c):
 * one written by the rules, one breaking each rule the kit's crash runs
 * are to catch, and new builds of the first for the replays. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "duro.h"

static int give(duro_attempt *a, void *arg) {
  return duro_attempt_result(a, (const char *)arg);
}

static int add(duro_attempt *a, void *arg) {
  char out[64];
  snprintf(out, sizeof out, "{\"n\":%d}", *(const int *)arg);
  return duro_attempt_result(a, out);
}

/* By the rules: steps, a three-day sleep, a fan-out of three, then a
 * last step that returns `finish` (a later build changes only that). */
static duro_rc good_finishing(duro_step *step, const char *finish) {
  DURO_TRY(duro_do(step, "fetch", NULL, give, "{\"v\":1}", NULL));
  DURO_TRY(duro_sleep(step, "cool off", "3 days"));
  static const int one = 1, two = 2, three = 3;
  duro_branch b[] = {{.fn = add, .arg = (void *)&one},
                     {.fn = add, .arg = (void *)&two},
                     {.fn = add, .arg = (void *)&three}};
  DURO_TRY(duro_do_all(step, "notify", b, 3, 0, 0));
  const char *last = NULL;
  DURO_TRY(duro_do(step, "finish", NULL, give, (void *)finish, &last));
  return duro_set_output(step, last);
}

static duro_rc good(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  return good_finishing(step, "{\"done\":true}");
}

/* Branches on the wall clock outside a step (rule 3). */
static duro_rc clock_branch(duro_step *step, const duro_event *ev,
                            duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "first", NULL, give, "1", NULL));
  const char *name = time(NULL) / 86400 % 2 ? "odd day" : "even day";
  DURO_TRY(duro_do(step, name, NULL, give, "2", NULL));
  return duro_set_output(step, "\"done\"");
}

/* A step name built from rand() (rule 2). */
static duro_rc random_name(duro_step *step, const duro_event *ev,
                           duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "first", NULL, give, "1", NULL));
  char name[32];
  snprintf(name, sizeof name, "item %d", rand() % 100000);
  DURO_TRY(duro_do(step, name, NULL, give, "2", NULL));
  return duro_set_output(step, "\"done\"");
}

/* A step whose effect is a counter outside the journal, in a file named
 * by params.path (a service that does not dedupe): run again, it counts
 * again (rule 4). */
static int reserve(duro_attempt *a, void *arg) {
  const char *path = arg;
  int n = 0;
  FILE *f = fopen(path, "r");
  if (f) {
    if (fscanf(f, "%d", &n) != 1)
      n = 0;
    fclose(f);
  }
  n++;
  f = fopen(path, "w");
  if (!f)
    return duro_attempt_fail(a, "cannot write %s", path);
  fprintf(f, "%d\n", n);
  fclose(f);
  char out[64];
  snprintf(out, sizeof out, "{\"taken\":%d}", n);
  return duro_attempt_result(a, out);
}

static duro_rc counter(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  const char *path = duro_json_string(ev->params, "/path");
  DURO_TRY(duro_do(step, "first", NULL, give, "1", NULL));
  DURO_TRY(duro_do(step, "reserve", NULL, reserve, (void *)path, NULL));
  return duro_set_output(step, "\"reserved\"");
}

/* A step with retries (the mocks' target), then its result as output. */
static duro_rc charge(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  static const duro_retries r = {
      .limit = 3, .delay = "1 minute", .backoff = DURO_BACKOFF_CONSTANT};
  static const duro_step_config cfg = {.retries = &r};
  const char *out = NULL;
  DURO_TRY(duro_do(step, "charge", &cfg, give, "{\"charged\":\"real\"}", &out));
  return duro_set_output(step, out);
}

/* Waits two days for an approval. */
static duro_rc approval(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  const char *e = NULL;
  duro_rc rc = duro_wait_for_event(step, "approval", "approved", "2 days", &e);
  if (rc == DURO_SUSPEND)
    return rc;
  if (rc == DURO_ERROR)
    return duro_set_output(step, "\"timed out\"");
  DURO_TRY(duro_do(step, "ship", NULL, give, "1", NULL));
  return duro_set_output(step, duro_json_value(e, "/payload"));
}

/* A step that sends to the queue bound as NOTES, in its commit. */
static int send_note(duro_attempt *a, void *arg) {
  if (duro_queue_send(arg, "{\"note\":\"shipped\"}", 0) != 0)
    return duro_attempt_fail(a, "the send was refused");
  return duro_attempt_result(a, "true");
}

static duro_rc notify(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev;
  duro_queue *q = duro_env_queue(env, "NOTES");
  if (!q)
    return duro_fail(step, "no queue is bound as NOTES");
  DURO_TRY(duro_do(step, "send", NULL, send_note, q, NULL));
  return duro_set_output(step, "\"sent\"");
}

/* A step that sends two page views to the pipeline bound as VIEWS. */
static int send_views(duro_attempt *a, void *arg) {
  const char *views[] = {"{ \"page\": \"/\" }", "{\"page\":\"/about\"}"};
  if (duro_pipeline_send(arg, views, 2) != 0)
    return duro_attempt_fail(a, "the send was refused");
  return duro_attempt_result(a, "2");
}

static duro_rc views(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev;
  duro_pipeline *p = duro_env_pipeline(env, "VIEWS");
  if (!p)
    return duro_fail(step, "no pipeline is bound as VIEWS");
  DURO_TRY(duro_do(step, "send", NULL, send_views, p, NULL));
  return duro_set_output(step, "\"sent\"");
}

/* Starts two instances of the workflow bound as CHARGE as its children,
 * waits for both, and outputs the second's output. */
static duro_rc parent(duro_step *step, const duro_event *ev, duro_env *env) {
  duro_workflow *w = duro_env_workflow(env, "CHARGE");
  if (!w)
    return duro_fail(step, "no workflow is bound as CHARGE");
  char a[96], b[96];
  snprintf(a, sizeof a, "%s-a", ev->instance_id);
  snprintf(b, sizeof b, "%s-b", ev->instance_id);
  DURO_TRY(duro_child_start(step, "start a", w, a, NULL, 0, NULL));
  DURO_TRY(duro_child_start(step, "start b", w, b, NULL, 0, NULL));
  const char *out = NULL;
  DURO_TRY(duro_child_wait(step, "wait a", w, a, NULL));
  DURO_TRY(duro_child_wait(step, "wait b", w, b, &out));
  return duro_set_output(step, out);
}

/* Good's next builds, for the replays of its exported journals: one that
 * keeps its steps and changes what the last one returns, one that renames
 * its sleep (which an instance in flight cannot follow). */
static duro_rc good_v2(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  return good_finishing(step, "{\"done\":\"v2\"}");
}

static duro_rc good_renamed(duro_step *step, const duro_event *ev,
                            duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "fetch", NULL, give, "{\"v\":1}", NULL));
  DURO_TRY(duro_sleep(step, "rest", "3 days"));
  DURO_TRY(duro_do(step, "finish", NULL, give, "{\"done\":true}", NULL));
  return duro_set_output(step, "\"renamed\"");
}

static const duro_workflow_def defs[] = {
    {"Good", good},
    {"Clock", clock_branch},
    {"Random", random_name},
    {"Counter", counter},
    {"Charge", charge},
    {"Approval", approval},
    {"Notify", notify},
    {"Parent", parent},
    {"Views", views},
    {"GoodV2", good_v2},
    {"GoodRenamed", good_renamed},
};

/* The scheduled handler: each tick starts the workflow bound as CHARGE,
 * its id the tick's time. */
static int on_tick(const duro_scheduled_event *ev, duro_env *env) {
  duro_workflow *w = duro_env_workflow(env, "CHARGE");
  if (!w)
    return -1;
  char id[64];
  snprintf(id, sizeof id, "tick-%lld", (long long)ev->scheduled_ms);
  return duro_workflow_create(w, id, NULL) == 0 ? 0 : -1;
}

DURO_PLUGIN(.name = "planted", .version = "1", DURO_WORKFLOWS(defs),
            .scheduled = on_tick);
