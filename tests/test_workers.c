/* test_workers.c — worker processes serving steps as real ones are:
 * callbacks that block on I/O, large values, a plugin's concurrency and
 * outside kills of its worker, each on a real `duro run` with the faults
 * plugin's "Io" class (FAULTS_PLUGIN, plugins/faults/faults.c) in its
 * default worker process.
 *
 *   io_steps_run_side_by_side       200 instances whose steps block: many
 *                                   more callbacks at once than the
 *                                   engine has threads
 *   large_values_beside_blocking    600 KB results both ways while other
 *                                   callbacks block: all complete, intact
 *   engine_never_waits_on_a_reader  a 600 KB frame to a worker that stops
 *                                   reading holds no engine thread: a
 *                                   hung step's timeout fires on time
 *   timeout_starts_when_it_begins   callbacks past the plugin's
 *                                   concurrency wait for a place without
 *                                   their timeout running
 *   two_kills_do_not_wedge          the worker SIGKILLed twice from
 *                                   outside while instances run: all
 *                                   complete on the next one
 *   failed_load_in_worker_waits     a build whose init fails in a new
 *                                   worker: its instances wait (none
 *                                   errored) and complete once it loads
 *   crash_on_plugin_thread_is_blamed  a segfault on a thread the plugin
 *                                   started: its instance is blamed, the
 *                                   others complete
 *   death_seen_through_forked_child a child forked by a step holds the
 *                                   worker's channels: its death is seen
 *                                   (pidfd), the step charged
 *   result_over_limit_refused       a 3 MB result: step.output_too_large,
 *                                   no worker death
 *   pause_revokes_a_call_not_begun  a pause that comes while a step's
 *                                   CALL waits unread in its worker
 *                                   revokes it: the callback never begins
 *                                   (before: the pause was answered
 *                                   after 200 ms, and it began later)
 *   kill_group_reaches_no_engine    kill(0, SIGTERM) from a step ends its
 *                                   worker only, and is blamed
 *   engine_runs_no_plugin_code      at start and across a hot reload, the
 *                                   build's constructor and init run in
 *                                   the load probe and the worker, never
 *                                   in the engine; its workflow, queue
 *                                   handler and cron handler all run
 *   children_started_and_awaited    duro_child_start and duro_child_wait
 *                                   in run(), in a worker and in the
 *                                   engine: ten children complete, the
 *                                   parent's describe lists them, each
 *                                   names its parent
 *   children_survive_engine_kills   a fan-out of 30 children while the
 *                                   engine is SIGKILLed three times:
 *                                   exactly 30 children, all complete
 *   wait_any_woken_over_http        duro_wait_any in run(), in a worker
 *                                   and in the engine: an event of its
 *                                   second type sent over HTTP completes
 *                                   it, another type does not
 *   parallel_branches_side_by_side  duro_do_all in a worker: four
 *                                   branches that each wait for all four
 *                                   to begin run at once; in the engine
 *                                   (workers: 0) one after another; the
 *                                   results in call order either way
 *   parallel_bound_in_flight        six branches, at most two at once:
 *                                   never more than two run, all six
 *                                   complete
 *   rollbacks_in_the_worker         three steps with rollbacks, then one
 *                                   that fails for good, in a worker and
 *                                   in the engine: the rollbacks run in
 *                                   the worker, newest first, each once,
 *                                   handed its step's output, and the
 *                                   instance errors with the cause
 *   parallel_branch_crash_is_its_own  a branch that segfaults its worker
 *                                   beside three others: it alone is
 *                                   charged plugin.crashed, the others
 *                                   are cut short at most, and all four
 *                                   complete
 *
 * and, in tcase "attacks", what a hostile or buggy plugin does to the
 * host:
 *
 *   blocked_plugin_starves_no_other 140 activations of one plugin
 *                                   blocked 3 min in their callbacks:
 *                                   100 instances of another plugin all
 *                                   complete
 *   blocked_in_engine_starves_no_other  the same with both plugins in
 *                                   the engine (workers: 0): the hung
 *                                   one's callbacks hold at most half
 *                                   the engine threads, the rest wait
 *                                   parked; the other's all complete,
 *                                   and the bound reached is logged
 *   run_killed_outside_step_is_blamed  a run() that SIGKILLs its worker
 *                                   outside any step beside 100 healthy
 *                                   instances: it errors plugin.crashed,
 *                                   they complete, nothing is held
 *   run_over_memory_is_blamed       a run() that takes 640 MiB outside
 *                                   any step, under limits.memory 512
 *                                   MiB, beside healthy callbacks: it
 *                                   errors plugin.memory_exceeded, none
 *                                   of them is charged, all complete
 *   frame_flood_is_bounded          six 200 MiB frames written onto the
 *                                   channel by a callback: refused at the
 *                                   first's length, the worker killed,
 *                                   the engine's peak RSS unmoved */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_run.h"
#include "http_client.h"
#include "proc.h"
#include "sidelog_read.h"

#ifndef FAULTS_PLUGIN
#error "build with -DFAULTS_PLUGIN=\"<path of libfaults.so>\""
#endif
#ifndef FAULTS_REGRESSED_PLUGIN
#error "build with -DFAULTS_REGRESSED_PLUGIN=\"<libfaults-regressed.so>\""
#endif

#define FLOW "io-flow"
#define WF "/workflows/" FLOW "/instances"

/* $DURO_FAULTS_LOG's path in the case's directory. */
static const char *faults_log(void) {
  static char path[400];
  snprintf(path, sizeof path, "%s/faults.log", proc_tmp_dir);
  return path;
}

/* A host of the faults plugin (its log at faults_log()) with `engine` as
 * the engine mapping, `keys` (NULL: none) more keys of the plugin's
 * entry and one workflow: `name` of class `cls`. */
static void start_flow(host_run *h, const char *engine, const char *keys,
                       const char *name, const char *cls) {
  char db[400], wf[256];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  snprintf(wf, sizeof wf,
           "      - name: %s\n"
           "        binding: THE_FLOW\n"
           "        class_name: %s\n",
           name, cls);
  host_init(h, "host");
  host_setenv(h, "DURO_FAULTS_LOG", faults_log());
  h->request_ms = 10000;
  h->plugin_keys = keys;
  host_write_config(h, db, engine, "faults", FAULTS_PLUGIN, wf);
  host_start(h);
}

/* The Io class as FLOW. */
static void start(host_run *h, const char *engine, const char *keys) {
  start_flow(h, engine, keys, FLOW, "Io");
}

/* POST /workflows/WF/instances/batch of ids PREFIX-0 .. PREFIX-(N-1), in
 * batches of at most 100. */
static void create_many_of(const host_run *h, const char *wf,
                           const char *prefix, int n, const char *params) {
  char path[160];
  snprintf(path, sizeof path, "/workflows/%s/instances/batch", wf);
  for (int first = 0; first < n; first += 100) {
    int k = n - first < 100 ? n - first : 100;
    size_t cap = (size_t)k * (strlen(params) + 64) + 32, len = 0;
    char *body = malloc(cap);
    len += (size_t)snprintf(body + len, cap - len, "{\"instances\":[");
    for (int i = 0; i < k; i++)
      len += (size_t)snprintf(body + len, cap - len,
                              "%s{\"id\":\"%s-%d\",\"params\":%s}",
                              i ? "," : "", prefix, first + i, params);
    snprintf(body + len, cap - len, "]}");
    http_resp r;
    host_request(h, &r, "POST", path, body);
    ck_assert_msg(r.status == 201 || r.status == 200, "batch: %ld %s", r.status,
                  r.body ? r.body : "");
    http_resp_free(&r);
    free(body);
  }
}

static void create_many(const host_run *h, const char *prefix, int n,
                        const char *params) {
  create_many_of(h, FLOW, prefix, n, params);
}

/* GET /workflows/WF's count of `status` (0 when none). */
static long count_of(const host_run *h, const char *wf, const char *status) {
  http_resp r;
  char path[160];
  snprintf(path, sizeof path, "/workflows/%s", wf);
  host_request(h, &r, "GET", path, NULL);
  char key[64];
  snprintf(key, sizeof key, "instances.%s", status);
  long n = r.status == 200 ? (long)json_integer_value(jget(r.json, key)) : -1;
  http_resp_free(&r);
  return n;
}

static long count_status(const host_run *h, const char *status) {
  return count_of(h, FLOW, status);
}

/* How many instances of WF an activation runs now (never stored, so not
 * among GET /workflows/WF's counts). */
static long count_running(const host_run *h, const char *wf) {
  http_resp r;
  char path[160];
  snprintf(path, sizeof path,
           "/workflows/%s/instances?status=running&limit=1000", wf);
  host_request(h, &r, "GET", path, NULL);
  long n = r.status == 200
               ? (long)json_array_size(json_object_get(r.json, "instances"))
               : -1;
  http_resp_free(&r);
  return n;
}

/* Waits until `n` instances of WF are complete; fails at the deadline
 * saying how far they got. */
static void wait_complete_of(const host_run *h, const char *wf, long n,
                             int64_t deadline) {
  for (;;) {
    long done = count_of(h, wf, "complete");
    if (done == n)
      return;
    ck_assert_msg(proc_now_ms() < deadline,
                  "%s: %ld of %ld complete (errored %ld, running %ld, "
                  "queued %ld)\n%s",
                  wf, done, n, count_of(h, wf, "errored"),
                  count_of(h, wf, "running"), count_of(h, wf, "queued"),
                  proc_tail(proc_slurp(h->log)));
    proc_sleep_ms(100);
  }
}

static void wait_complete(const host_run *h, long n, int64_t deadline) {
  wait_complete_of(h, FLOW, n, deadline);
}

static json_t *output_of(const host_run *h, const char *id) {
  json_t *d = host_describe(h, FLOW, id);
  ck_assert_msg(d != NULL, "%s: no description", id);
  json_t *out = json_incref(jget(d, "output"));
  json_decref(d);
  ck_assert_msg(json_is_object(out), "%s: output %s", id,
                out ? jdump(out) : "none");
  return out;
}

/* ---- cases --------------------------------------------------------------- */

START_TEST(io_steps_run_side_by_side) {
  host_run H;
  /* two engine threads: before callbacks had threads of their own in
   * the worker, no more than two of them ran at once */
  start(&H, "{ workers: 2 }", NULL);
  create_many(&H, "io", 200, "{\"steps\":2,\"hold_ms\":500}");
  wait_complete(&H, 200, proc_now_ms() + 120000);
  json_t *out = output_of(&H, "io-199");
  int max = (int)json_integer_value(json_object_get(out, "max_running"));
  json_decref(out);
  /* 200 callbacks of 500 ms created at once: far more than the engine's
   * threads run side by side, however slow the machine */
  ck_assert_msg(max >= 20, "at most %d callbacks ran at once", max);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

START_TEST(large_values_beside_blocking) {
  host_run H;
  start(&H, "{ workers: 2 }", NULL);
  /* each step blocks 300 ms and returns 600 KB: results cross to the
   * engine, and back to run() on replay-free duro_do returns, while the
   * other instances' callbacks block */
  create_many(&H, "big", 30, "{\"steps\":2,\"hold_ms\":300,\"bytes\":600000}");
  wait_complete(&H, 30, proc_now_ms() + 120000);
  for (int i = 0; i < 30; i += 7) {
    char id[32];
    snprintf(id, sizeof id, "big-%d", i);
    json_t *out = output_of(&H, id);
    /* the string's quotes and its 600,000 bytes, as run() got it back */
    ck_assert_int_eq(json_integer_value(json_object_get(out, "len")), 600002);
    json_decref(out);
  }
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

START_TEST(timeout_starts_when_it_begins) {
  host_run H;
  /* two callbacks at once: the other six wait for a place; each holds
   * 1.5 s under a 2 s timeout and no retry, so one whose timeout ran
   * while it waited would fail TimeoutError */
  start(&H, "{ workers: 2 }", "concurrency: 2");
  create_many(&H, "t", 8, "{\"steps\":1,\"hold_ms\":1500,\"timeout_s\":2}");
  wait_complete(&H, 8, proc_now_ms() + 120000);
  json_t *out = output_of(&H, "t-7");
  int max = (int)json_integer_value(json_object_get(out, "max_running"));
  json_decref(out);
  ck_assert_msg(max <= 2, "%d callbacks ran at once under concurrency 2", max);
  ck_assert_int_eq(count_status(&H, "errored"), 0);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* The pid of host h's worker process (a child of its engine), or 0. */
static pid_t worker_pid(const host_run *h) {
  return host_worker_of(host_last_engine(h));
}

/* Instances of two_kills_do_not_wedge: enough that callbacks run at both
 * kills; under the sanitizers (`make test`) 50, not 100 (100 took 23 s
 * of the suite's time); the release build runs 100 (`make
 * chaos-storms`). */
#if defined(__SANITIZE_ADDRESS__)
#define KILLED_MANY 50
#else
#define KILLED_MANY 100
#endif

START_TEST(two_kills_do_not_wedge) {
  host_run H;
  start(&H, "{ workers: 2, max_crashes: 5 }", NULL);
  create_many(&H, "k", KILLED_MANY, "{\"steps\":4,\"hold_ms\":300}");
  /* SIGKILL (no handler sees it) twice, half a second apart, while the
   * callbacks run: each cut short or charged a kill, none wedged */
  for (int kill_no = 0; kill_no < 2; kill_no++) {
    pid_t w = 0;
    for (int i = 0; i < 100 && !(w = worker_pid(&H)); i++)
      proc_sleep_ms(50);
    ck_assert_msg(w > 0, "kill %d: no worker process", kill_no);
    ck_assert_int_eq(kill(w, SIGKILL), 0);
    proc_sleep_ms(500);
  }
  wait_complete(&H, KILLED_MANY, proc_now_ms() + 120000);
  host_stop(&H, proc_now_ms() + 10000, 0);
  ck_assert_msg(host_count_lines(&H, "died: SIGKILL") >= 2,
                "the kills were not seen");
}
END_TEST

START_TEST(failed_load_in_worker_waits) {
  host_run H;
  char noinit[420];
  snprintf(noinit, sizeof noinit, "%s.noinit", faults_log());
  start(&H, "{ workers: 2 }", NULL);
  /* From now on the build's init fails in a new worker process (it ran
   * where the host checked it): its instances wait, none errors */
  FILE *f = fopen(noinit, "w");
  ck_assert_ptr_nonnull(f);
  fclose(f);
  create_many(&H, "w", 5, "{\"steps\":1,\"hold_ms\":0}");
  host_wait_lines(&H, "cannot run in its worker", 1, proc_now_ms() + 30000);
  proc_sleep_ms(500);
  ck_assert_int_eq(count_status(&H, "errored"), 0);
  ck_assert_int_eq(count_status(&H, "complete"), 0);
  unlink(noinit); /* the dependency is back */
  wait_complete(&H, 5, proc_now_ms() + 60000);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* One instance whose step does `fault` on every attempt beside
 * `healthy` ordinary ones of three 200 ms steps (the Fault class): it
 * errors plugin.crashed, they complete, one engine throughout. */
static void poisoned_beside_healthy(const char *fault, int healthy) {
  host_run H;
  start_flow(&H, "{ workers: 2, max_crashes: 3 }", NULL, "fault-flow", "Fault");
  char body[160];
  http_resp r;
  for (int i = -1; i < healthy; i++) {
    if (i < 0)
      snprintf(body, sizeof body,
               "{\"id\":\"p\",\"params\":{\"fault\":\"%s\",\"steps\":1}}",
               fault);
    else
      snprintf(body, sizeof body,
               "{\"id\":\"h-%d\",\"params\":{\"fault\":\"none\","
               "\"steps\":3,\"hold_ms\":200}}",
               i);
    host_request(&H, &r, "POST", "/workflows/fault-flow/instances", body);
    ck_assert_int_eq(r.status, 201);
    http_resp_free(&r);
  }
  json_t *d = host_wait_status(&H, "fault-flow", "p", "errored",
                               proc_now_ms() + 120000);
  ck_assert_str_eq(jstr(d, "error.name"), "plugin.crashed");
  json_decref(d);
  for (int i = 0; i < healthy; i++) {
    char id[16];
    snprintf(id, sizeof id, "h-%d", i);
    json_decref(host_wait_status(&H, "fault-flow", id, "complete",
                                 proc_now_ms() + 60000));
  }
  host_stop(&H, proc_now_ms() + 10000, 0);
  /* one engine throughout: the supervisor never restarted it */
  ck_assert_int_eq(host_count_lines(&H, "restarting in"), 0);
}

/* A crash on a thread the plugin started names no activation: the
 * callbacks in flight are charged a kill and run alone, so the one whose
 * thread crashes is blamed when it crashes again alone. */
START_TEST(crash_on_plugin_thread_is_blamed) {
  poisoned_beside_healthy("thread", 10);
}
END_TEST

/* A step that forks a child (which sleeps a minute holding the worker's
 * channels open) and then segfaults: the worker's death is seen all the
 * same, well before the child ends, and its attempt charged. */
START_TEST(death_seen_through_forked_child) {
  poisoned_beside_healthy("fork", 3);
}
END_TEST

/* kill(0, SIGTERM) from a step: it reaches the worker's own session, not
 * the engine (one engine throughout), and is blamed as a kill no handler
 * saw once the step runs alone. */
START_TEST(kill_group_reaches_no_engine) {
  poisoned_beside_healthy("killgroup", 5);
}
END_TEST

/* A result over engine.max_step_result (1 MiB by default) is refused as
 * the engine refuses it, step.output_too_large, not sent (a frame that
 * large would be cut as garbage and the worker charged a crash). */
START_TEST(result_over_limit_refused) {
  host_run H;
  start(&H, "{ workers: 2 }", NULL);
  http_resp r;
  host_request(&H, &r, "POST", WF,
               "{\"id\":\"huge\",\"params\":{\"steps\":1,\"hold_ms\":0,"
               "\"bytes\":3000000}}");
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  json_t *d =
      host_wait_status(&H, FLOW, "huge", "errored", proc_now_ms() + 30000);
  char *text = jdump(d);
  ck_assert_msg(strstr(text, "step.output_too_large"), "%s", text);
  free(text);
  json_decref(d);
  create_many(&H, "ok", 3, "{\"steps\":1,\"hold_ms\":0}");
  wait_complete(&H, 3, proc_now_ms() + 30000);
  host_stop(&H, proc_now_ms() + 10000, 0);
  ck_assert_int_eq(host_count_lines(&H, "died"), 0);
}
END_TEST

/* The "exec" records of `id`'s step 1 in the faults log. */
static int execs_of(const char *id) {
  size_t n;
  sidelog_rec *v = sidelog_read(faults_log(), &n);
  int k = 0;
  for (size_t i = 0; i < n; i++)
    k +=
        !strcmp(v[i].kind, "exec") && !strcmp(v[i].inst, id) && v[i].index == 1;
  free(v);
  return k;
}

/* PATCH WF/ID/status {"status": STATUS}: its HTTP status. */
static long patch_status(const host_run *h, const char *wf, const char *id,
                         const char *status) {
  char path[200], body[64];
  snprintf(path, sizeof path, "/workflows/%s/instances/%s/status", wf, id);
  snprintf(body, sizeof body, "{\"status\":\"%s\"}", status);
  http_resp r;
  host_request(h, &r, "PATCH", path, body);
  long code = r.status;
  http_resp_free(&r);
  return code;
}

/* One engine thread, so one channel to the one worker.  Its step
 * function, warmed to run inline, holds the channel's thread 1.5 s in
 * one instance's first callback while the other instance's CALL waits
 * unread behind it.  Both are paused then: the one whose callback began
 * runs on and pauses at its step's end; the other's CALL is revoked through the
 * shared page, so it never begins, even once the channel's thread reads
 * it.  A round where both callbacks began at once (the function was not
 * inline: a slow return on a busy machine) proves nothing and is run
 * again. */
START_TEST(pause_revokes_a_call_not_begun) {
  host_run H;
  start_flow(&H, "{ workers: 1 }", NULL, "fault-flow", "Fault");
  int tried = 0;
  for (int round = 0; round < 5; round++) {
    char warm[32], a[32], b[32];
    snprintf(warm, sizeof warm, "w%d", round);
    create_many_of(&H, "fault-flow", warm, 1,
                   "{\"fault\":\"none\",\"steps\":40,\"hold_ms\":0}");
    wait_complete_of(&H, "fault-flow", 1 + 3 * round, proc_now_ms() + 30000);
    snprintf(a, sizeof a, "p%d-0", round);
    snprintf(b, sizeof b, "p%d-1", round);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "p%d", round);
    /* stopped while both RUNs are written: let go, it reads them in one
     * read, asks both DOs in one write, and reads both CALLs in one */
    pid_t w = worker_pid(&H);
    ck_assert_msg(w > 0, "no worker process");
    ck_assert_int_eq(kill(w, SIGSTOP), 0);
    create_many_of(&H, "fault-flow", prefix, 2,
                   "{\"fault\":\"none\",\"steps\":2,\"hold_ms\":1500}");
    proc_sleep_ms(300);
    ck_assert_int_eq(kill(w, SIGCONT), 0);
    /* both CALLs sent, one callback begun and holding the channel */
    int64_t deadline = proc_now_ms() + 20000;
    while (execs_of(a) + execs_of(b) == 0) {
      ck_assert_msg(proc_now_ms() < deadline, "no callback began");
      proc_sleep_ms(20);
    }
    proc_sleep_ms(300);
    ck_assert_int_eq(patch_status(&H, "fault-flow", a, "pause"), 200);
    ck_assert_int_eq(patch_status(&H, "fault-flow", b, "pause"), 200);
    int began = execs_of(a) + execs_of(b);
    json_decref(
        host_wait_status(&H, "fault-flow", a, "paused", proc_now_ms() + 20000));
    json_decref(
        host_wait_status(&H, "fault-flow", b, "paused", proc_now_ms() + 20000));
    proc_sleep_ms(500); /* a revoked CALL read late would begin by now */
    if (began == 2) {
      ck_assert_int_eq(execs_of(a) + execs_of(b), 2);
    } else {
      tried++;
      /* the one behind it never began, once the channel was free */
      ck_assert_int_eq(execs_of(a) + execs_of(b), 1);
    }
    ck_assert_int_eq(patch_status(&H, "fault-flow", a, "resume"), 200);
    ck_assert_int_eq(patch_status(&H, "fault-flow", b, "resume"), 200);
    wait_complete_of(&H, "fault-flow", 3 + 3 * round, proc_now_ms() + 30000);
    ck_assert_int_eq(execs_of(a), 1);
    ck_assert_int_eq(execs_of(b), 1);
    if (tried)
      break;
  }
  host_stop(&H, proc_now_ms() + 10000, 0);
  sidelog_assert_no_rerun(faults_log());
  ck_assert_msg(tried, "no round held a CALL unread behind a callback");
}
END_TEST

/* A worker whose channel thread stops reading (a step function that had
 * always returned at once runs inline there, and this time hangs) while
 * the engine's one thread sends it a 600 KB RUN: the engine thread does
 * not wait for it to read, so the hung step's 2 s timeout still fires
 * and kills the worker (it hangs 120 s), and the big instance runs on the
 * next worker. */
START_TEST(engine_never_waits_on_a_reader) {
  host_run H;
  start(&H, "{ workers: 1 }", NULL);
  /* warm: io_step_fn returns at once 40 times in a row */
  create_many(&H, "warm", 1, "{\"steps\":40,\"hold_ms\":0}");
  wait_complete(&H, 1, proc_now_ms() + 60000);
  create_many(&H, "hang", 1,
              "{\"steps\":1,\"hold_ms\":120000,\"timeout_s\":2}");
  json_decref(
      host_wait_status(&H, FLOW, "hang-0", "running", proc_now_ms() + 30000));
  proc_sleep_ms(300); /* its CALL is in the worker */
  size_t pad = 600000;
  char *params = malloc(pad + 64);
  int len = snprintf(params, 64, "{\"steps\":1,\"hold_ms\":0,\"pad\":\"");
  memset(params + len, 'p', pad);
  strcpy(params + len + pad, "\"}");
  create_many(&H, "big", 1, params);
  free(params);
  int64_t created = proc_now_ms();
  /* 40 s: twenty times its timeout, a third of the hang */
  json_t *d = host_wait_status(&H, FLOW, "hang-0", "errored", created + 40000);
  char *text = jdump(d);
  ck_assert_msg(strstr(text, "TimeoutError"), "%s", text);
  free(text);
  json_decref(d);
  json_decref(
      host_wait_status(&H, FLOW, "big-0", "complete", proc_now_ms() + 60000));
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* ---- one plugin's blocked activations -------------------------------- */

#define QUICK "quick-flow"

/* A host of two plugins, each with `workers` (a YAML value): "faults"
 * (FLOW, the Io class) and "quick", the regressed build of the same
 * plugin under another name (QUICK, the Io class too). */
static void start_two(host_run *h, const char *workers) {
  char db[400], rest[1024], keys[64];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  snprintf(rest, sizeof rest,
           "      - name: " FLOW "\n"
           "        binding: THE_FLOW\n"
           "        class_name: Io\n"
           "  - name: quick\n"
           "    path: %s\n"
           "    workers: %s\n"
           "    workflows:\n"
           "      - name: " QUICK "\n"
           "        binding: QUICK_FLOW\n"
           "        class_name: Io\n",
           FAULTS_REGRESSED_PLUGIN, workers);
  snprintf(keys, sizeof keys, "workers: %s", workers);
  host_init(h, "host");
  host_setenv(h, "DURO_FAULTS_LOG", faults_log());
  h->request_ms = 10000;
  h->plugin_keys = keys; /* read by host_write_config only */
  /* a short grace: the stop does not wait for the blocked callbacks */
  host_write_config(h, db, "{ shutdown_grace: 1s }", "faults", FAULTS_PLUGIN,
                    rest);
  host_start(h);
}

/* 140 activations of one plugin blocked in a hung dependency (callbacks
 * that block three minutes, longer than the case waits, so that the quick
 * ones cannot complete by the hung ones letting go) beside 100 quick
 * instances of another plugin: the quick ones all complete (once, one
 * plugin's blocked activations took every activation slot of the engine,
 * and no other plugin ran). */
/* Both cases: 140 hung activations until `running` of them run, then
 * 100 quick ones of the other plugin, which must all complete while no
 * hung one does. */
static void hung_beside_quick(host_run *h, long running) {
  create_many(h, "hung", 140, "{\"steps\":1,\"hold_ms\":180000}");
  int64_t deadline = proc_now_ms() + 30000;
  while (count_running(h, FLOW) < running) {
    ck_assert_msg(proc_now_ms() < deadline, "%ld of 140 running",
                  count_running(h, FLOW));
    proc_sleep_ms(100);
  }
  proc_sleep_ms(500);
  create_many_of(h, QUICK, "q", 100, "{\"steps\":2,\"hold_ms\":0}");
  wait_complete_of(h, QUICK, 100, proc_now_ms() + 60000);
  ck_assert_int_eq(count_status(h, "complete"), 0);
}

/* Instances whose callback blocks two minutes under a create's timeout
 * of 1 s, beside healthy ones with none, with the plugin in a worker
 * (_i 0) and in the engine (_i 1): each blocked one ends errored
 * instance.timed_out (its attempt cut to the deadline, the blocked
 * callback given up on), the healthy ones complete, nothing retried. */
START_TEST(deadline_ends_a_blocked_callback) {
  host_run H;
  start(&H, "{ workers: 2 }", _i ? "workers: 0" : NULL);
  for (int i = 0; i < 3; i++) {
    char body[160];
    snprintf(body, sizeof body,
             "{\"id\":\"d-%d\",\"timeout\":\"1s\",\"params\":"
             "{\"steps\":1,\"hold_ms\":120000}}",
             i);
    http_resp r;
    host_request(&H, &r, "POST", "/workflows/" FLOW "/instances", body);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    http_resp_free(&r);
  }
  create_many(&H, "ok", 10, "{\"steps\":2,\"hold_ms\":20}");
  wait_complete(&H, 10, proc_now_ms() + 60000);
  int64_t deadline = proc_now_ms() + 60000;
  while (count_status(&H, "errored") < 3) {
    ck_assert_msg(proc_now_ms() < deadline, "%ld of 3 timed out",
                  count_status(&H, "errored"));
    proc_sleep_ms(100);
  }
  for (int i = 0; i < 3; i++) {
    char id[16];
    snprintf(id, sizeof id, "d-%d", i);
    json_t *d =
        host_wait_status(&H, FLOW, id, "errored", proc_now_ms() + 10000);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(d, "error"), "name")),
        "instance.timed_out");
    /* never retried: at most one attempt (in the engine, the watchdog
     * gives up on the hung one without a step row) */
    json_t *steps = json_object_get(d, "steps");
    json_t *att = json_object_get(json_array_get(steps, 0), "attempts");
    char *text = json_dumps(d, JSON_COMPACT);
    ck_assert_msg(json_array_size(steps) <= 1 && json_array_size(att) <= 1,
                  "%s", text);
    free(text);
    json_decref(d);
  }
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

START_TEST(blocked_plugin_starves_no_other) {
  host_run H;
  start_two(&H, "1");
  /* all of them: parked on the worker's channel, they take no share of
   * an engine thread */
  hung_beside_quick(&H, 140);
  host_stop(&H, proc_now_ms() + 20000, 0);
}
END_TEST

/* The same with both plugins in the engine (workers: 0): each engine
 * thread runs its callbacks, and a blocked one holds its thread.  The
 * hung plugin's callbacks hold at most half the engine's 64 threads (its
 * bound, plugins[].concurrency unsaid); the rest wait parked, taking
 * none, and the quick plugin runs on the other threads (once, the hung
 * callbacks took every thread in turn: none of the quick ones ran, and
 * nothing was logged).  The bound reached with no callback returning is
 * logged once. */
START_TEST(blocked_in_engine_starves_no_other) {
  host_run H;
  start_two(&H, "0");
  /* as many as the engine has threads: each would hold one */
  hung_beside_quick(&H, 64);
  /* all of them begun: 32 in their callbacks, the rest parked */
  ck_assert_int_eq(count_running(&H, FLOW), 140);
  const char *warned = "its step callbacks hold 32 engine threads";
  int64_t deadline = proc_now_ms() + 20000;
  while (host_count_lines(&H, warned) == 0) {
    ck_assert_msg(proc_now_ms() < deadline, "no warning logged\n%s",
                  proc_tail(proc_slurp(H.log)));
    proc_sleep_ms(200);
  }
  ck_assert_int_eq(host_count_lines(&H, warned), 1);
  host_stop(&H, proc_now_ms() + 20000, 0);
}
END_TEST

/* ---- run() killed outside any step ----------------------------------------
 */

/* N healthy instances of the Fault class (3 steps holding `hold_ms`)
 * under `keys`, then, once 10 run, one ("p") whose run() does `in_run`
 * outside any step: it must end errored `error` ("outside any step"),
 * and the healthy all complete.  The host is left running. */
static void run_fault_beside_healthy(host_run *h, const char *keys, int n,
                                     int hold_ms, const char *in_run,
                                     const char *error) {
  char params[96], body[128];
  start_flow(h, "{ max_crashes: 3 }", keys, "fault-flow", "Fault");
  snprintf(params, sizeof params,
           "{\"fault\":\"none\",\"steps\":3,\"hold_ms\":%d}", hold_ms);
  create_many_of(h, "fault-flow", "h", n, params);
  int64_t deadline = proc_now_ms() + 30000;
  while (count_running(h, "fault-flow") < 10) {
    ck_assert_msg(proc_now_ms() < deadline, "%ld running",
                  count_running(h, "fault-flow"));
    proc_sleep_ms(50);
  }
  snprintf(body, sizeof body,
           "{\"id\":\"p\",\"params\":{\"in_run\":\"%s\",\"steps\":1}}", in_run);
  http_resp r;
  host_request(h, &r, "POST", "/workflows/fault-flow/instances", body);
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  json_t *d =
      host_wait_status(h, "fault-flow", "p", "errored", proc_now_ms() + 60000);
  ck_assert_str_eq(jstr(d, "error.name"), error);
  assert_contains(jstr(d, "error.message"), "outside any step");
  json_decref(d);
  wait_complete_of(h, "fault-flow", n, proc_now_ms() + 60000);
  ck_assert_int_eq(count_of(h, "fault-flow", "errored"), 1);
}

/* One instance whose run() SIGKILLs its own worker before its first step,
 * on every activation, beside 100 healthy ones of the same build: it is
 * blamed (errored plugin.crashed after engine.max_crashes kills), the
 * healthy all complete and nothing is held (once, the kills were charged
 * to the callbacks beside it, and the breaker held the healthy build). */
START_TEST(run_killed_outside_step_is_blamed) {
  host_run H;
  run_fault_beside_healthy(&H, NULL, 100, 200, "kill", "plugin.crashed");
  json_t *builds = host_plugin_builds(&H, "faults"), *b;
  size_t i;
  json_array_foreach(builds, i, b) {
    ck_assert_msg(jget(b, "held") == NULL, "build %s held: %s",
                  jstr(b, "build"), jdump(b));
  }
  json_decref(builds);
  host_stop(&H, proc_now_ms() + 10000, 0);
  ck_assert_int_ge(host_count_lines(&H, "died: SIGKILL"), 3);
  /* no callback beside it was charged a kill or blamed */
  ck_assert_int_eq(host_count_lines(&H, "beside others, when its worker"), 0);
  ck_assert_int_eq(host_count_lines(&H, "crashed its worker process: "), 0);
}
END_TEST

/* run() code outside any step takes 640 MiB (and keeps it) under a
 * 512 MiB limits.memory, while 40 healthy instances' callbacks run in
 * the same worker: run() is blamed, not the callbacks that ran beside it
 * (before, they were charged plugin.memory_exceeded and the leak ran
 * again on every activation).  The worker's watch names whose code
 * touched the pages: where the kernel keeps the limit (a cgroup), on the
 * shared page, for the engine to lay the kernel's kill on; where the
 * watch keeps it, in its own report. */
START_TEST(run_over_memory_is_blamed) {
  host_run H;
  run_fault_beside_healthy(&H, "limits: { memory: 512MiB }", 40, 300, "hog",
                           "plugin.memory_exceeded");
  host_stop(&H, proc_now_ms() + 10000, 0);
  /* no callback beside it was charged the memory */
  ck_assert_int_eq(host_count_lines(&H, "the attempt's callback ran while"), 0);
}
END_TEST

/* ---- a frame flood ------------------------------------------------------- */

/* The most memory process `pid` held (VmHWM), in bytes; -1 if unread. */
static long long peak_rss(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %lld kB", &kb) == 1)
      break;
  if (f)
    fclose(f);
  return kb < 0 ? -1 : kb << 10;
}

/* A step's callback that writes six 200 MiB frames straight onto its
 * worker's channels: the engine refuses the first at its length, before
 * it reads or allocates any of it, and kills the worker; the attempt is
 * charged, the instance errors at engine.max_crashes, and the engine's
 * memory stays where it was (once, it read the frames whole: a peak of
 * 3.5 GiB, 1.2 GiB kept). */
START_TEST(frame_flood_is_bounded) {
  host_run H;
  start_flow(&H, "{ max_crashes: 2 }", NULL, "fault-flow", "Fault");
  pid_t engine = host_last_engine(&H);
  long long before = peak_rss(engine);
  ck_assert_int_gt(before, 0);
  http_resp r;
  host_request(&H, &r, "POST", "/workflows/fault-flow/instances",
               "{\"id\":\"p\",\"params\":{\"fault\":\"flood\","
               "\"steps\":1}}");
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  json_t *d =
      host_wait_status(&H, "fault-flow", "p", "errored", proc_now_ms() + 60000);
  ck_assert_str_eq(jstr(d, "error.name"), "plugin.crashed");
  json_decref(d);
  create_many_of(&H, "fault-flow", "h", 3, "{\"fault\":\"none\",\"steps\":1}");
  wait_complete_of(&H, "fault-flow", 3, proc_now_ms() + 30000);
  long long after = peak_rss(engine);
  /* what the engine may take of a frame: a few MiB (twice
   * max_step_result and one more), nowhere near one 200 MiB frame */
  ck_assert_msg(after - before < (64ll << 20),
                "the engine's peak RSS grew from %lld to %lld MiB",
                before >> 20, after >> 20);
  host_stop(&H, proc_now_ms() + 10000, 0);
  /* refused at the first frame's length, each of the two attempts */
  ck_assert_msg(host_count_lines(&H, "sent a frame of 209715200 bytes") >= 2,
                "%s", proc_tail(proc_slurp(H.log)));
}
END_TEST

/* ---- the engine runs no plugin code -------------------------------------- */

/* The faults plugin's record of every constructor and init run. */
static const char *loads_log(void) {
  static char path[420];
  snprintf(path, sizeof path, "%s.loads", faults_log());
  return path;
}

/* Copies `from` over `to` as a new file (a deploy: rename into place). */
static void deploy(const char *from, const char *to) {
  char tmp[500], cmd[1400];
  snprintf(tmp, sizeof tmp, "%s.new", to);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s' && mv '%s' '%s'", from, tmp, tmp, to);
  ck_assert_int_eq(system(cmd), 0);
}

/* How many `kind` records the side log at `path` holds (0 when it does
 * not exist yet). */
static size_t count_kind(const char *path, const char *kind) {
  if (access(path, F_OK) != 0)
    return 0;
  size_t n, c = 0;
  sidelog_rec *v = sidelog_read(path, &n);
  for (size_t i = 0; i < n; i++)
    c += !strcmp(v[i].kind, kind);
  free(v);
  return c;
}

static void wait_kind(const host_run *h, const char *kind, size_t n) {
  int64_t deadline = proc_now_ms() + 30000;
  while (count_kind(faults_log(), kind) < n) {
    ck_assert_msg(proc_now_ms() < deadline, "%zu \"%s\" record(s), not %zu\n%s",
                  count_kind(faults_log(), kind), kind, n,
                  proc_tail(proc_slurp(h->log)));
    proc_sleep_ms(50);
  }
}

/* Round `n` (1, 2, ...) of the plugin's three kinds of code: instance
 * s-n completes, a message to "jobs" reaches the queue handler, and the
 * nightly cron, fired by hand, its scheduled handler. */
static void serve_round(const host_run *h, int n) {
  char body[96];
  http_resp r;
  snprintf(body, sizeof body,
           "{\"id\":\"s-%d\",\"params\":{\"steps\":1,\"hold_ms\":0}}", n);
  host_request(h, &r, "POST", WF, body);
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  wait_complete(h, n, proc_now_ms() + 30000);
  snprintf(body, sizeof body, "{\"body\":{\"n\":%d}}", n);
  host_request(h, &r, "POST", "/queues/jobs/messages", body);
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  wait_kind(h, "msg", (size_t)n);
  host_request(h, &r, "POST", "/__scheduled?cron=0%203%20*%20*%20*", "{}");
  ck_assert_msg(r.status == 200, "fire: %ld %s", r.status,
                r.body ? r.body : "");
  http_resp_free(&r);
  wait_kind(h, "tick", (size_t)n);
}

/* No record of the side log at `path` was made by process `pid`. */
static void assert_none_by(const char *path, pid_t pid, const char *who) {
  size_t n;
  sidelog_rec *v = sidelog_read(path, &n);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(atoi(v[i].token) != (int)pid, "%s: \"%s %s\" ran in the %s",
                  path, v[i].kind, v[i].inst, who);
  free(v);
}

/* A plugin in a worker (workers: 1) is loaded by the load probe and by its
 * worker only: the engine runs none of its constructors or init, at
 * start or at a hot reload, and still serves its workflow, its queue
 * handler and its cron handler on each build. */
START_TEST(engine_runs_no_plugin_code) {
  host_run H;
  char db[400], live[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  snprintf(live, sizeof live, "%s/faults-live.so", proc_tmp_dir);
  deploy(FAULTS_PLUGIN, live);
  host_init(&H, "host");
  host_setenv(&H, "DURO_FAULTS_LOG", faults_log());
  H.request_ms = 10000;
  H.plugin_keys = "workers: 1";
  host_write_config(&H, db, "{ workers: 2 }", "faults", live,
                    "      - name: " FLOW "\n"
                    "        binding: THE_FLOW\n"
                    "        class_name: Io\n"
                    "    queues:\n"
                    "      consumers:\n"
                    "        - { queue: jobs, max_batch_timeout: 10ms }\n"
                    "    triggers:\n"
                    "      crons:\n"
                    "        - { schedule: \"0 3 * * *\" }\n");
  host_start(&H);
  serve_round(&H, 1);
  size_t inits = count_kind(loads_log(), "init");

  deploy(FAULTS_REGRESSED_PLUGIN, live);
  http_resp r;
  host_request(&H, &r, "POST", "/plugins/faults/reload", NULL);
  ck_assert_int_eq(r.status, 200);
  json_t *rep = json_array_get(jget(r.json, "plugins"), 0);
  ck_assert_str_eq(jstr(rep, "status"), "loaded");
  ck_assert_str_ne(jstr(rep, "build"), jstr(rep, "previous"));
  http_resp_free(&r);
  serve_round(&H, 2);
  /* the new build's probe and its load in the worker */
  ck_assert_uint_ge(count_kind(loads_log(), "init"), inits + 2);

  pid_t engine = H.engine, supervisor = H.pid;
  host_stop(&H, proc_now_ms() + 10000, 0);
  ck_assert_int_eq(host_count_lines(&H, "engine started"), 1);
  /* each build: a probe and the worker, constructor and init each */
  ck_assert_uint_ge(count_kind(loads_log(), "ctor"), 4);
  ck_assert_uint_ge(count_kind(loads_log(), "init"), 4);
  assert_none_by(loads_log(), engine, "engine");
  assert_none_by(loads_log(), supervisor, "supervisor");
  /* and every step, message and tick ran in the worker */
  assert_none_by(faults_log(), engine, "engine");
}
END_TEST

/* duro_wait_any in a plugin's run(), in its worker (_i 0, the default)
 * and in the engine (_i 1, workers: 0): the instance waits, showing both
 * types; an event of another type leaves it waiting, one of its second
 * type sent over HTTP completes it; a call without types fails with the
 * engine's error, naming the step. */
/* A host of the faults plugin with `keys` (NULL: none) more keys of its
 * entry, two engine workers, and the workflows `workflows` (YAML lines). */
static void start_faults(host_run *h, const char *keys, const char *workflows) {
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_init(h, "host");
  host_setenv(h, "DURO_FAULTS_LOG", faults_log());
  h->request_ms = 10000;
  h->plugin_keys = keys;
  host_write_config(h, db, "{ workers: 2 }", "faults", FAULTS_PLUGIN,
                    workflows);
  host_start(h);
}

/* Its workflows fan-flow (the Fan class, binding FAN) and the children
 * that starts, kid-flow (Io, binding KID). */
static void start_fan(host_run *h, const char *keys) {
  start_faults(h, keys,
               "      - { name: fan-flow, binding: FAN, class_name: Fan }\n"
               "      - { name: kid-flow, binding: KID, class_name: Io }\n");
}

/* A run() in its worker (_i 0) and in the engine (_i 1) that starts ten
 * children (of the Io class) and waits for each: it completes with ten,
 * its describe lists them complete, and each names it as its parent. */
START_TEST(children_started_and_awaited) {
  host_run H;
  start_fan(&H, _i ? "workers: 0" : NULL);
  http_resp r;
  host_request(&H, &r, "POST", "/workflows/fan-flow/instances",
               "{\"id\":\"f1\",\"params\":{\"n\":10}}");
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  json_t *d =
      host_wait_status(&H, "fan-flow", "f1", "complete", proc_now_ms() + 60000);
  ck_assert_int_eq(json_integer_value(json_object_get(
                       json_object_get(d, "output"), "children")),
                   10);
  json_t *kids = json_object_get(d, "children");
  ck_assert_uint_eq(json_array_size(kids), 10);
  char kid[128];
  snprintf(kid, sizeof kid, "%s",
           json_string_value(json_object_get(json_array_get(kids, 4), "id")));
  size_t i;
  json_t *k;
  json_array_foreach(kids, i, k)
      ck_assert_str_eq(jstr(k, "status"), "complete");
  json_decref(d);
  d = host_wait_status(&H, "kid-flow", kid, "complete", proc_now_ms() + 10000);
  ck_assert_str_eq(jstr(json_object_get(d, "parent"), "id"), "f1");
  json_decref(d);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* A fan-out of 30 children (each a step that blocks 300 ms) while its
 * engine is SIGKILLed three times: the supervisor starts it again each
 * time, and in the end exactly 30 children exist (a start journaled once,
 * never twice, none lost), all complete, and the parent with them. */
START_TEST(children_survive_engine_kills) {
  host_run H;
  start_fan(&H, NULL);
  http_resp r;
  host_request(&H, &r, "POST", "/workflows/fan-flow/instances",
               "{\"id\":\"f1\",\"params\":{\"n\":30,\"hold_ms\":300}}");
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  for (int k = 0; k < 3; k++) {
    proc_sleep_ms(400);
    pid_t engine = host_last_engine(&H);
    ck_assert_int_gt(engine, 0);
    ck_assert_int_eq(kill(engine, SIGKILL), 0);
    host_wait_lines(&H, "ready:", k + 2, proc_now_ms() + 30000);
  }
  json_t *d = host_wait_status(&H, "fan-flow", "f1", "complete",
                               proc_now_ms() + 120000);
  ck_assert_int_eq(json_integer_value(json_object_get(
                       json_object_get(d, "output"), "children")),
                   30);
  ck_assert_uint_eq(json_array_size(json_object_get(d, "children")), 30);
  json_decref(d);
  ck_assert_int_eq(count_of(&H, "kid-flow", "complete"), 30);
  host_request(&H, &r, "GET", "/workflows/kid-flow/instances?limit=1000", NULL);
  ck_assert_uint_eq(json_array_size(json_object_get(r.json, "instances")), 30);
  http_resp_free(&r);
  host_stop(&H, proc_now_ms() + 10000, 1);
}
END_TEST

START_TEST(wait_any_woken_over_http) {
  host_run H;
  start_flow(&H, "{ workers: 2 }", _i ? "workers: 0" : NULL, "answer-flow",
             "Answer");
  const char *path = "/workflows/answer-flow/instances";
  http_resp r;
  host_request(&H, &r, "POST", path, "{\"id\":\"a1\"}");
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  json_t *d = host_wait_status(&H, "answer-flow", "a1", "waiting",
                               proc_now_ms() + 30000);
  ck_assert_str_eq(jstr(d, "wait_type"), "approve|reject");
  ck_assert_int_eq(json_integer_value(jget(d, "wake_ms")),
                   json_integer_value(jget(d, "created_ms")) + 3600000);
  json_t *step = json_array_get(jget(d, "steps"), 0);
  ck_assert_str_eq(jstr(step, "type"), "waitAny");
  ck_assert_str_eq(jstr(step, "key"), "answer#1");
  json_decref(d);

  host_request(&H, &r, "POST",
               "/workflows/answer-flow/instances/a1/events/other", "1");
  ck_assert_int_eq(r.status, 202);
  http_resp_free(&r);
  proc_sleep_ms(500);
  d = host_describe(&H, "answer-flow", "a1");
  ck_assert_str_eq(jstr(d, "status"), "waiting");
  json_decref(d);

  host_request(&H, &r, "POST",
               "/workflows/answer-flow/instances/a1/events/reject",
               "{\"by\":\"ann\"}");
  ck_assert_int_eq(r.status, 202);
  http_resp_free(&r);
  d = host_wait_status(&H, "answer-flow", "a1", "complete",
                       proc_now_ms() + 30000);
  ck_assert_str_eq(jstr(d, "output.type"), "reject");
  ck_assert_str_eq(jstr(d, "output.payload.by"), "ann");
  json_t *events = jget(d, "events");
  ck_assert_uint_eq(json_array_size(events), 2);
  ck_assert(json_is_null(jget(json_array_get(events, 0), "consumed_by")));
  ck_assert_str_eq(jstr(json_array_get(events, 1), "consumed_by"), "answer#1");
  json_decref(d);

  host_request(&H, &r, "POST", path, "{\"id\":\"bad\",\"params\":{\"bad\":1}}");
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  d = host_wait_status(&H, "answer-flow", "bad", "complete",
                       proc_now_ms() + 30000);
  ck_assert_str_eq(jstr(d, "output.name"), "Error");
  const char *msg = jstr(d, "output.message");
  ck_assert_msg(strstr(msg, "\"answer#1\"") && strstr(msg, "types is NULL"),
                "%s", msg);
  json_decref(d);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* A host of the faults plugin whose par-flow runs the Par class. */
static void start_par(host_run *h, const char *keys) {
  start_faults(h, keys,
               "      - { name: par-flow, binding: PAR, class_name: Par }\n");
}

/* Creates par-flow instance `id` with `params` and waits for it to end
 * `status`: its describe. */
static json_t *run_par(host_run *h, const char *id, const char *params,
                       const char *status) {
  char body[512];
  snprintf(body, sizeof body, "{\"id\":\"%s\",\"params\":%s}", id, params);
  http_resp r;
  host_request(h, &r, "POST", "/workflows/par-flow/instances", body);
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  return host_wait_status(h, "par-flow", id, status, proc_now_ms() + 60000);
}

/* The results a Par instance's output lists, as "0,1,2". */
static void par_results(json_t *d, char *buf, size_t len) {
  json_t *res = json_object_get(json_object_get(d, "output"), "results");
  size_t i, at = 0;
  json_t *v;
  buf[0] = '\0';
  json_array_foreach(res, i, v) at += (size_t)snprintf(
      buf + at, len - at, "%s%lld", i ? "," : "",
      json_is_integer(v) ? (long long)json_integer_value(v) : -1LL);
}

/* The callbacks of instance id that began (its "exec" records). */
static int par_execs(const char *id) {
  size_t n;
  sidelog_rec *v = sidelog_read(faults_log(), &n);
  int k = 0;
  for (size_t i = 0; i < n; i++)
    k += !strcmp(v[i].kind, "exec") && !strcmp(v[i].inst, id);
  free(v);
  return k;
}

static long long par_max_running(json_t *d) {
  return json_integer_value(
      json_object_get(json_object_get(d, "output"), "max_running"));
}

/* duro_do_all in a worker (_i 0): four branches that each wait until all
 * four have begun (20 s at most, else the instance takes that long and
 * max_running says 1) ran at once; in the engine (_i 1, workers: 0) the
 * callbacks hold the thread and run one after another.  The results come
 * back in call order either way. */
START_TEST(parallel_branches_side_by_side) {
  host_run H;
  start_par(&H, _i ? "workers: 0" : NULL);
  json_t *d = run_par(&H, "p1",
                      _i ? "{\"n\":4}" : "{\"n\":4,\"meet\":4,\"hold_ms\":50}",
                      "complete");
  char res[128];
  par_results(d, res, sizeof res);
  ck_assert_str_eq(res, "0,1,2,3");
  ck_assert_int_eq(par_max_running(d), _i ? 1 : 4);
  /* each a do step of its own, keyed as four duro_do calls would be */
  char *text = jdump(d);
  for (int k = 1; k <= 4; k++) {
    char key[32];
    snprintf(key, sizeof key, "\"par#%d\"", k);
    ck_assert_msg(strstr(text, key), "no step %s in %s", key, text);
  }
  free(text);
  json_decref(d);
  host_stop(&H, proc_now_ms() + 10000, 0);
  ck_assert_int_eq(par_execs("p1"), 4);
}
END_TEST

/* Six branches, at most two in flight (the call's bound), each waiting
 * until two have begun: never more than two at once, all six complete. */
START_TEST(parallel_bound_in_flight) {
  host_run H;
  start_par(&H, NULL);
  json_t *d = run_par(
      &H, "p2", "{\"n\":6,\"max\":2,\"meet\":2,\"hold_ms\":100}", "complete");
  char res[128];
  par_results(d, res, sizeof res);
  ck_assert_str_eq(res, "0,1,2,3,4,5");
  ck_assert_int_eq(par_max_running(d), 2);
  json_decref(d);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* The error names a step's attempts carry in describe, joined. */
static void attempt_errors(json_t *d, const char *key, char *buf, size_t len) {
  buf[0] = '\0';
  size_t i, k, at = 0;
  json_t *s, *a;
  json_array_foreach(json_object_get(d, "steps"), i, s) {
    if (strcmp(jstr(s, "key"), key) != 0)
      continue;
    json_array_foreach(json_object_get(s, "attempts"), k, a) {
      json_t *err = json_object_get(a, "error");
      const char *name = json_string_value(json_object_get(err, "name"));
      at += (size_t)snprintf(buf + at, len - at, "%s;", name ? name : "-");
    }
  }
}

/* Branch 2 of four segfaults its worker on its first attempt while the
 * others hold theirs: it alone is charged (plugin.crashed, from the crash
 * handler's naming it), the others' attempts in that process are cut
 * short, and all four complete on a new worker. */
START_TEST(parallel_branch_crash_is_its_own) {
  host_run H;
  start_par(&H, NULL);
  json_t *d =
      run_par(&H, "p3", "{\"n\":4,\"segv\":2,\"hold_ms\":500}", "complete");
  char res[128], errs[256];
  par_results(d, res, sizeof res);
  ck_assert_str_eq(res, "0,1,2,3");
  attempt_errors(d, "par#3", errs, sizeof errs);
  ck_assert_msg(strstr(errs, "plugin.crashed"), "par#3: %s", errs);
  for (int k = 1; k <= 4; k++) {
    if (k == 3)
      continue;
    char key[16];
    snprintf(key, sizeof key, "par#%d", k);
    attempt_errors(d, key, errs, sizeof errs);
    ck_assert_msg(!strstr(errs, "plugin.crashed"), "%s: %s", key, errs);
  }
  json_decref(d);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* A Saga instance (plugins/faults): in its worker (_i 0) and in the
 * engine (_i 1), its three rollbacks ran newest first, once each, and
 * the instance errored with the step's error that caused them. */
START_TEST(rollbacks_in_the_worker) {
  host_run H;
  start_faults(
      &H, _i ? "workers: 0" : NULL,
      "      - { name: saga-flow, binding: SAGA, class_name: Saga }\n");
  http_resp r;
  host_request(&H, &r, "POST", "/workflows/saga-flow/instances",
               "{\"id\":\"g1\",\"params\":{\"n\":3}}");
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  json_t *d =
      host_wait_status(&H, "saga-flow", "g1", "errored", proc_now_ms() + 60000);
  char *text = jdump(d);
  ck_assert_msg(strstr(text, "out of stock") && !strstr(text, "\"rollback\":{"),
                "%s", text);
  for (int k = 1; k <= 3; k++) {
    char key[32];
    snprintf(key, sizeof key, "\"s#%d/rollback\"", k);
    ck_assert_msg(strstr(text, key), "no %s in %s", key, text);
  }
  free(text);
  json_decref(d);
  host_stop(&H, proc_now_ms() + 10000, 0);
  size_t n;
  sidelog_rec *v = sidelog_read(faults_log(), &n);
  char order[16] = "";
  int execs = 0;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(v[i].inst, "g1") != 0)
      continue;
    execs += !strcmp(v[i].kind, "exec");
    if (!strcmp(v[i].kind, "undo") && strlen(order) + 1 < sizeof order)
      order[strlen(order)] = (char)('0' + v[i].index);
  }
  free(v);
  ck_assert_str_eq(order, "210");
  ck_assert_int_eq(execs, 3);
}
END_TEST

static Suite *workers_suite(void) {
  Suite *s = suite_create("workers");
  TCase *io = tcase_create("io");
  proc_fixtures(io, "duro-workers");
  tcase_set_timeout(io, 240);
  tcase_add_test(io, io_steps_run_side_by_side);
  tcase_add_test(io, large_values_beside_blocking);
  tcase_add_test(io, engine_never_waits_on_a_reader);
  tcase_add_test(io, timeout_starts_when_it_begins);
  tcase_add_loop_test(io, deadline_ends_a_blocked_callback, 0, 2);
  tcase_add_loop_test(io, children_started_and_awaited, 0, 2);
  tcase_add_test(io, children_survive_engine_kills);
  tcase_add_test(io, two_kills_do_not_wedge);
  tcase_add_test(io, failed_load_in_worker_waits);
  tcase_add_test(io, crash_on_plugin_thread_is_blamed);
  tcase_add_test(io, death_seen_through_forked_child);
  tcase_add_test(io, kill_group_reaches_no_engine);
  tcase_add_test(io, result_over_limit_refused);
  tcase_add_test(io, pause_revokes_a_call_not_begun);
  tcase_add_test(io, engine_runs_no_plugin_code);
  tcase_add_loop_test(io, wait_any_woken_over_http, 0, 2);
  suite_add_tcase(s, io);
  /* a hostile or buggy plugin's attacks on the host */
  TCase *par = tcase_create("parallel");
  proc_fixtures(par, "duro-workers");
  tcase_set_timeout(par, 120);
  tcase_add_loop_test(par, parallel_branches_side_by_side, 0, 2);
  tcase_add_test(par, parallel_bound_in_flight);
  tcase_add_test(par, parallel_branch_crash_is_its_own);
  tcase_add_loop_test(par, rollbacks_in_the_worker, 0, 2);
  suite_add_tcase(s, par);

  TCase *attacks = tcase_create("attacks");
  proc_fixtures(attacks, "duro-workers");
  tcase_set_timeout(attacks, 240);
  tcase_add_test(attacks, blocked_plugin_starves_no_other);
  tcase_add_test(attacks, blocked_in_engine_starves_no_other);
  tcase_add_test(attacks, run_killed_outside_step_is_blamed);
  tcase_add_test(attacks, run_over_memory_is_blamed);
  tcase_add_test(attacks, frame_flood_is_bounded);
  suite_add_tcase(s, attacks);
  return s;
}

int main(void) { return http_suite_run(workers_suite()); }
