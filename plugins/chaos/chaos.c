/* chaos.c — the plugin of the long durability run (tests/chaos.c, `make
 * chaos`): workflow class "Chaos" mixes every kind of step an instance can
 * be suspended in, so that the host killed at random moments is killed
 * inside each of them; class "Fan" (further down) fans out to Chaos
 * children and sums their outputs, and class "Par" (at the end) runs
 * parallel steps and rollbacks.  Chaos's params (all optional):
 *
 *   {"steps": N, "events": E, "nap_every": K, "nap_ms": M, "hold_ms": H,
 *    "flaky": F, "hog": G}
 *
 * It runs step#1 .. step#N; each callback takes H ms.  After every K-th
 * step it sleeps M ms ("nap").  Event waits ("go", type "go") are spread
 * over the run: by the end of step i it has received i*E/N of the E
 * distinct events {"k": 1..E, "send": S}.  The sender may deliver an
 * event twice (it retries a request whose answer a kill cut off, and sends
 * the events again after a restart, whose re-run needs new ones), so a
 * wait that gets a k already seen just waits again: the workflow consumes
 * events the way an idempotent consumer does.  Step F fails its first
 * attempt, so a back-off wait is among the suspensions too.  Step G's
 * first attempt takes 256 MiB and holds it, as a leak would: the
 * driver's config gives the plugin a smaller limits.memory, so that its
 * worker is killed in that callback (an attempt failed
 * plugin.memory_exceeded, the worker's other callbacks cut short).
 *
 * Like the chain plugin, it writes what its steps do to the file named by
 * $DURO_CHAOS_LOG, outside the journal, in fixed 64-byte O_APPEND records
 * (plugins/sidelog.h):
 *
 *   exec <instance> <i> <token>   step i's callback started
 *   fail <instance> <i> <token>   that attempt failed on purpose (flaky)
 *   seen <instance> <i> <token>   run() got step i's result from duro_do
 *   got <instance> <k> s<S>       run() got event k of the sender's send S
 *
 * "seen" is written only after duro_do returned DURO_OK, which the host
 * allows only once the result is committed: an "exec" after a "seen" of
 * the same step of the same run of the instance is a completed step that
 * ran again.  (The driver adds records of its own to the same file to
 * mark restarts, pauses and terminates; see tests/chaos.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "duro.h"
#include "params.h"
#include "sidelog.h"

#define LOG_ENV "DURO_CHAOS_LOG"
#define MAX_EVENTS 16

typedef struct chaos_step {
  const char *instance;
  int index;
  int hold_ms;
  int flaky; /* fail the first attempt */
  int hog;   /* take 256 MiB in the first attempt */
} chaos_step;

/* 256 MiB taken and touched, 16 MiB every 2 ms, then held: the worker's
 * watch of limits.memory kills the process.  Without a limit it gives
 * up after 5 s and fails the attempt (its memory is freed). */
static int hog(duro_attempt *a) {
  enum { CHUNKS = 16, CHUNK = 16 << 20 };
  char *held[CHUNKS] = {0};
  for (int i = 0; i < CHUNKS; i++) {
    held[i] = malloc(CHUNK);
    if (held[i])
      memset(held[i], i + 1, CHUNK);
    struct timespec nap = {0, 2000000L};
    nanosleep(&nap, NULL);
  }
  struct timespec wait = {5, 0};
  nanosleep(&wait, NULL);
  for (int i = 0; i < CHUNKS; i++)
    free(held[i]);
  return duro_attempt_fail(a, "the memory limit did not end this attempt");
}

static int run_step(duro_attempt *a, void *arg) {
  const chaos_step *cs = arg;
  char token[40];
  sidelog_token(token, sizeof token);
  sidelog_append(LOG_ENV, "exec", cs->instance, cs->index, token);
  if (cs->hold_ms > 0) {
    struct timespec nap = {cs->hold_ms / 1000,
                           (long)(cs->hold_ms % 1000) * 1000000L};
    nanosleep(&nap, NULL);
  }
  if (cs->hog && duro_attempt_number(a) == 1)
    return hog(a);
  if (cs->flaky && duro_attempt_number(a) == 1) {
    /* Recorded, so the driver can tell a failure it asked for from an
     * attempt a kill interrupted. */
    sidelog_append(LOG_ENV, "fail", cs->instance, cs->index, token);
    return duro_attempt_fail(a, "flaky on purpose");
  }
  char json[64];
  snprintf(json, sizeof json, "\"%s\"", token);
  return duro_attempt_result(a, json);
}

static duro_rc chaos(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int n = param_int(ev->params, "steps", 5);
  int events = param_int(ev->params, "events", 0);
  int nap_every = param_int(ev->params, "nap_every", 0);
  int hold_ms = param_int(ev->params, "hold_ms", 0);
  int flaky = param_int(ev->params, "flaky", 0);
  int hog_at = param_int(ev->params, "hog", 0);
  char nap[16];
  snprintf(nap, sizeof nap, "%d", param_int(ev->params, "nap_ms", 10));
  if (events < 0 || events > MAX_EVENTS)
    events = 0;
  /* Replayed from the journal on every activation: the waits' results
   * rebuild the same set each time (rule 3: branch only on results). */
  int got[MAX_EVENTS + 1] = {0}, distinct = 0;
  duro_retries retries = {
      .limit = 5, .delay = "30", .backoff = DURO_BACKOFF_CONSTANT};
  duro_step_config cfg = {.retries = &retries};
  for (int i = 1; i <= n; i++) {
    chaos_step cs = {.instance = ev->instance_id,
                     .index = i,
                     .hold_ms = hold_ms,
                     .flaky = i == flaky,
                     .hog = i == hog_at};
    const char *result;
    DURO_TRY(duro_do(step, "step", &cfg, run_step, &cs, &result));
    sidelog_seen(LOG_ENV, ev->instance_id, i, result);
    if (nap_every > 0 && i % nap_every == 0)
      DURO_TRY(duro_sleep(step, "nap", nap));
    while (distinct < events * i / n) {
      const char *event;
      DURO_TRY(duro_wait_for_event(step, "go", "go", "1 hour", &event));
      const char *k = strstr(event, "\"k\":");
      const char *send = strstr(event, "\"send\":");
      int v = k ? atoi(k + 4) : 0;
      /* Written on every replay too, and possibly before the consumption
       * is committed (a kill then leaves the event first in line, to be
       * consumed again): the driver reads "consumed at least once". */
      char tag[24];
      snprintf(tag, sizeof tag, "s%d", send ? atoi(send + 7) : 0);
      sidelog_append(LOG_ENV, "got", ev->instance_id, v, tag);
      if (v >= 1 && v <= events && !got[v]) {
        got[v] = 1;
        distinct++;
      }
    }
  }
  char out[64];
  snprintf(out, sizeof out, "{\"steps\":%d,\"events\":%d}", n, events);
  return duro_set_output(step, out);
}

/* Class "Fan": a parent that starts one child of the workflow bound to
 * CHAOS (class Chaos) per element of its params' "kids", each with that
 * element as its params, then waits for each and sums their outputs'
 * "steps":
 *
 *   {"kids": [{"steps": 2, "nap_every": 1, "nap_ms": 40}, ...]}
 *     -> {"kids": K, "sum": the children's steps}
 *
 * Child i is started as step "kid <i>" with the id "<parent>.<i>": the
 * driver knows every child's id, and a second start for the same (parent,
 * name) would find the id taken and fail the parent for good
 * (instance.already_exists).  The children's steps write the side log as
 * any Chaos instance's do, under their own ids. */
#define MAX_KIDS 16

static duro_rc fan(duro_step *step, const duro_event *ev, duro_env *env) {
  duro_workflow *kid = duro_env_workflow(env, "CHAOS");
  if (!kid)
    return duro_fail(step, "no CHAOS binding in the config");
  const char *ids[MAX_KIDS];
  int n = 0;
  for (; n < MAX_KIDS; n++) {
    char at[32], name[32], id[128];
    snprintf(at, sizeof at, "/kids/%d", n);
    const char *params = duro_json_value(ev->params, at);
    if (!params)
      break;
    snprintf(name, sizeof name, "kid %d", n);
    snprintf(id, sizeof id, "%s.%d", ev->instance_id, n);
    DURO_TRY(duro_child_start(step, name, kid, id, params,
                              DURO_PARENT_CLOSE_TERMINATE, &ids[n]));
  }
  int64_t sum = 0;
  for (int i = 0; i < n; i++) {
    const char *out;
    int64_t steps = 0;
    DURO_TRY(duro_child_wait(step, "kid done", kid, ids[i], &out));
    duro_json_integer(out, "/steps", &steps);
    sum += steps;
  }
  return duro_set_output(step,
                         duro_json_pack("{s:i, s:I}", "kids", n, "sum", sum));
}

/* Class "Par": parallel steps, then for some instances a saga.  One
 * duro_do_all "branch" of 3 to 6 branches (branch#k, side log index k),
 * then, when "saga" is S > 0, S steps "saga" with rollbacks (saga#j,
 * index 10 + j) and a step "doom" (index 20) that fails for good, so that
 * the instance ends errored once the rollbacks ran, newest first:
 *
 *   {"hold": [H1, ..., HB], "flaky": F, "in_flight": M, "saga": S,
 *    "saga_hold": SH, "branch_undo": BU, "undo_ms": U, "undo_flaky": UF,
 *    "undo_final": UX, "explicit": X}
 *
 * Branch k holds Hk ms and fails its first attempt when bit k of F is
 * set; at most M run at once (0: limits.parallel).  Without a saga the
 * instance completes with {"branches": [the branch results, in order]}.
 * With BU the branches carry rollbacks too (older than the saga steps',
 * so undone last).  A rollback naps U ms; it fails its first attempt when
 * bit <index> of UF is set, and fails for good when its step's index is
 * UX (the error then says so beside the cause).  With X, run() handles
 * doom's error itself: duro_rollback, then it completes with
 * {"rolled_back": true}.
 *
 * Records, as Chaos's (exec, fail, seen: after duro_do_all or
 * duro_do_with_rollback returned OK), and of the rollbacks:
 *
 *   undo <instance> <i> <token>   the rollback of step i began
 *   undf <instance> <i> <token>   that attempt failed on purpose
 *
 * A step's result is {"t": token, ...}: a rollback runs after run()
 * returned, so what it needs (its nap, how to fail) is in the output it
 * is handed, and its result {"t": its token, "of": the step's token}
 * shows it got the right one. */
#define PAR_MAX 6
#define SAGA_MAX 3
#define SAGA_INDEX 10 /* saga#j's side log index: SAGA_INDEX + j */
#define DOOM_INDEX 20

typedef struct par_step {
  const char *instance;
  int index, hold_ms, flaky;
  /* its rollback's nap and behaviour: NULL, "ok", "flaky" or "final" */
  int undo_ms;
  const char *undo;
} par_step;

static void nap_ms(int64_t ms) {
  if (ms <= 0)
    return;
  struct timespec nap = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  nanosleep(&nap, NULL);
}

static int par_step_run(duro_attempt *a, void *arg) {
  const par_step *ps = arg;
  char token[40];
  sidelog_token(token, sizeof token);
  sidelog_append(LOG_ENV, "exec", ps->instance, ps->index, token);
  nap_ms(ps->hold_ms);
  if (ps->flaky && duro_attempt_number(a) == 1) {
    sidelog_append(LOG_ENV, "fail", ps->instance, ps->index, token);
    return duro_attempt_fail(a, "flaky on purpose");
  }
  char json[128];
  if (ps->undo)
    snprintf(json, sizeof json, "{\"t\":\"%s\",\"undo_ms\":%d,\"undo\":\"%s\"}",
             token, ps->undo_ms, ps->undo);
  else
    snprintf(json, sizeof json, "{\"t\":\"%s\"}", token);
  return duro_attempt_result(a, json);
}

static int doom(duro_attempt *a, void *arg) {
  const par_step *ps = arg;
  char token[40];
  sidelog_token(token, sizeof token);
  sidelog_append(LOG_ENV, "exec", ps->instance, ps->index, token);
  nap_ms(ps->hold_ms);
  sidelog_append(LOG_ENV, "fail", ps->instance, ps->index, token);
  return duro_attempt_fail_final(a, "doomed on purpose");
}

/* The rollback of branch#k or saga#j: its instance and step from its key,
 * "<instance>/<step key>/rollback"; the rest from the step's output. */
static int undo(duro_attempt *a, const char *output, void *arg) {
  (void)arg;
  char inst[32];
  snprintf(inst, sizeof inst, "%s", duro_attempt_idempotency_key(a));
  char *key = strchr(inst, '/');
  if (!key)
    return duro_attempt_fail_final(a, "no instance in the key %s", inst);
  *key++ = '\0';
  const char *hash = strchr(key, '#');
  int index = hash ? atoi(hash + 1) : 0;
  if (!strncmp(key, "saga#", 5))
    index += SAGA_INDEX;
  char token[40];
  sidelog_token(token, sizeof token);
  sidelog_append(LOG_ENV, "undo", inst, index, token);
  int64_t ms = 0;
  duro_json_integer(output, "/undo_ms", &ms);
  nap_ms(ms);
  const char *how = duro_json_string(output, "/undo");
  if (how && !strcmp(how, "final")) {
    sidelog_append(LOG_ENV, "undf", inst, index, token);
    return duro_attempt_fail_final(a, "undo refused on purpose");
  }
  if (how && !strcmp(how, "flaky") && duro_attempt_number(a) == 1) {
    sidelog_append(LOG_ENV, "undf", inst, index, token);
    return duro_attempt_fail(a, "undo flaky on purpose");
  }
  const char *of = duro_json_string(output, "/t");
  char json[128];
  snprintf(json, sizeof json, "{\"t\":\"%s\",\"of\":\"%s\"}", token,
           of ? of : "");
  return duro_attempt_result(a, json);
}

/* Rule 7, and rollbacks run after run() returned: constant data. */
static const duro_retries par_retries = {
    .limit = 5, .delay = "30", .backoff = DURO_BACKOFF_CONSTANT};
static const duro_step_config par_cfg = {.retries = &par_retries};
static const duro_rollback_cfg undo_cfg = {.fn = undo, .retries = &par_retries};

/* "seen" of a {"t": token} result. */
static void par_seen(const char *instance, int index, const char *result) {
  const char *t = duro_json_string(result, "/t");
  sidelog_append(LOG_ENV, "seen", instance, index, t ? t : "none");
}

static const char *undo_how(int index, int flaky_mask, int final_index) {
  return index == final_index        ? "final"
         : (flaky_mask >> index) & 1 ? "flaky"
                                     : "ok";
}

static duro_rc par(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int flaky = param_int(ev->params, "flaky", 0);
  int in_flight = param_int(ev->params, "in_flight", 0);
  int saga = param_int(ev->params, "saga", 0);
  int saga_hold = param_int(ev->params, "saga_hold", 0);
  int branch_undo = param_int(ev->params, "branch_undo", 0) && saga > 0;
  int undo_ms = param_int(ev->params, "undo_ms", 0);
  int undo_flaky = param_int(ev->params, "undo_flaky", 0);
  int undo_final = param_int(ev->params, "undo_final", 0);
  int explicit_rb = param_int(ev->params, "explicit", 0);
  if (saga < 0 || saga > SAGA_MAX)
    saga = 0;
  par_step ps[PAR_MAX];
  duro_branch b[PAR_MAX];
  int n = 0;
  for (; n < PAR_MAX; n++) {
    char at[16];
    int64_t hold = 0;
    snprintf(at, sizeof at, "/hold/%d", n);
    if (!duro_json_integer(ev->params, at, &hold))
      break;
    int k = n + 1;
    ps[n] = (par_step){.instance = ev->instance_id,
                       .index = k,
                       .hold_ms = (int)hold,
                       .flaky = (flaky >> k) & 1,
                       .undo_ms = undo_ms,
                       .undo = branch_undo ? undo_how(k, undo_flaky, undo_final)
                                           : NULL};
    b[n] = (duro_branch){.fn = par_step_run,
                         .arg = &ps[n],
                         .cfg = &par_cfg,
                         .rollback = branch_undo ? &undo_cfg : NULL};
  }
  if (n == 0)
    return duro_fail(step, "no branches in the params");
  DURO_TRY(duro_do_all(step, "branch", b, (size_t)n, (uint32_t)in_flight, 0));
  for (int i = 0; i < n; i++)
    par_seen(ev->instance_id, i + 1, b[i].result);
  if (saga == 0) {
    char out[512];
    size_t at = (size_t)snprintf(out, sizeof out, "{\"branches\":[");
    for (int i = 0; i < n && at < sizeof out; i++)
      at += (size_t)snprintf(out + at, sizeof out - at, "%s%s", i ? "," : "",
                             b[i].result);
    if (at < sizeof out)
      snprintf(out + at, sizeof out - at, "]}");
    return duro_set_output(step, out);
  }
  for (int j = 1; j <= saga; j++) {
    int index = SAGA_INDEX + j;
    par_step s = {.instance = ev->instance_id,
                  .index = index,
                  .hold_ms = saga_hold,
                  .undo_ms = undo_ms,
                  .undo = undo_how(index, undo_flaky, undo_final)};
    const char *result;
    DURO_TRY(duro_do_with_rollback(step, "saga", &par_cfg, par_step_run, &s,
                                   &undo_cfg, &result));
    par_seen(ev->instance_id, index, result);
  }
  par_step d = {
      .instance = ev->instance_id, .index = DOOM_INDEX, .hold_ms = saga_hold};
  const char *result;
  duro_rc rc = duro_do(step, "doom", &par_cfg, doom, &d, &result);
  if (rc == DURO_OK)
    return duro_fail(step, "doom#1 completed");
  if (rc == DURO_ERROR && explicit_rb) {
    DURO_TRY(duro_rollback(step));
    return duro_set_output(step, "{\"rolled_back\":true}");
  }
  return rc; /* unhandled: the rollbacks run, then it errors */
}

static const duro_workflow_def workflows[] = {
    {"Chaos", chaos}, {"Fan", fan}, {"Par", par}};

DURO_PLUGIN(.name = "chaos", .version = "1", DURO_WORKFLOWS(workflows));
