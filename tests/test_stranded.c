/* test_stranded.c — nothing acknowledged is stranded: storage that fails
 * (a full disk, failed fsyncs and reads, a database that cannot be
 * opened), events that race an activation, control requests whose write
 * fails, and clock steps.
 *
 * Storage faults come from a SQLite VFS that fails chosen I/O
 * (faulty_vfs.h), under a real engine with worker threads.  What the
 * tests hold the engine to: a create, event or control request answered
 * with success is carried out; one answered with an error left nothing
 * behind; once writes succeed again every instance proceeds without a
 * restart; a step whose result the workflow saw never runs again; the
 * database passes PRAGMA integrity_check. */
#include <check.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "error.h"
#include "faulty_vfs.h"
#include "harness.h"
#include "journal.h"
#include "suite_run.h"
#include "view_health.h"

#define WF "flow"
#define N_STEPS 4
#define MAX_INST 400

static harness H;

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- a workflow that keeps a log outside the journal --------------------- */

/* Per instance (its id is "i<number>") and step: how often the callback
 * ran, and whether run() got its result back (then it must never run
 * again). */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int runs[MAX_INST][N_STEPS];
static int seen[MAX_INST][N_STEPS];
static int reran; /* a callback ran after its result was seen */

typedef struct step_arg {
  int inst, step;
} step_arg;

static int work(duro_attempt *a, void *arg) {
  const step_arg *s = arg;
  pthread_mutex_lock(&log_mu);
  if (seen[s->inst][s->step])
    reran++;
  runs[s->inst][s->step]++;
  pthread_mutex_unlock(&log_mu);
  sleep_ms(1);
  return duro_attempt_result(a, "1");
}

static duro_rc flow(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int inst = atoi(ev->instance_id + 1);
  for (int i = 0; i < N_STEPS; i++) {
    step_arg arg = {inst, i};
    DURO_TRY(duro_do(step, "work", NULL, work, &arg, NULL));
    pthread_mutex_lock(&log_mu);
    seen[inst][i] = 1;
    pthread_mutex_unlock(&log_mu);
    if (i == 1)
      DURO_TRY(duro_sleep(step, "nap", "20"));
    if (i == 2 && strstr(ev->params, "event"))
      DURO_TRY(duro_wait_for_event(step, "go", "go", "1 hour", NULL));
  }
  return duro_set_output(step, "\"done\"");
}

static void open_threaded(void) {
  faulty_vfs_install((uint64_t)time(NULL) ^ (uint64_t)getpid());
  faulty_vfs_set(NULL);
  harness_open_workers(&H, 4);
  harness_register(&H, WF, flow);
  harness_start(&H);
}

/* Creates instance i until the engine acknowledges it; only storage
 * errors are retried.  Returns how many refusals it took. */
static int create_acked(int i, int with_event) {
  char id[16];
  snprintf(id, sizeof id, "i%d", i);
  int refused = 0;
  for (;;) {
    int rc = duro_instance_create(H.e, WF, id,
                                  with_event ? "\"event\"" : "null", -1, NULL);
    if (rc == 0)
      return refused;
    if (rc == DURO_E_ALREADY_EXISTS)
      return refused; /* an earlier try landed though it was refused? */
    ck_assert_msg(rc == DURO_E_STORAGE, "create %s: %s", id, duro_err_str(rc));
    refused++;
    sleep_ms(5);
  }
}

static void send_acked(int i) {
  char id[16];
  snprintf(id, sizeof id, "i%d", i);
  for (;;) {
    int rc = duro_instance_send_event(H.e, WF, id, "go", "1");
    if (rc == 0)
      return;
    ck_assert_msg(rc == DURO_E_STORAGE, "event %s: %s", id, duro_err_str(rc));
    sleep_ms(5);
  }
}

/* Every instance 0..n-1 completes by the deadline, without a restart. */
static void assert_all_complete(int n, int64_t within_ms) {
  int64_t until = mono_ms() + within_ms;
  for (int i = 0; i < n; i++) {
    char id[16];
    snprintf(id, sizeof id, "i%d", i);
    for (;;) {
      duro_status st;
      int rc = duro_instance_status(H.e, WF, id, &st);
      if (rc == 0 && st == DURO_STATUS_COMPLETE)
        break;
      if (mono_ms() >= until) {
        json_t *d = NULL;
        duro_instance_describe(H.e, WF, id, &d);
        char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
        ck_abort_msg("%s: not complete (rc %d, status %s): %.900s", id, rc,
                     rc ? "-" : duro_status_name(st), text ? text : "");
      }
      sleep_ms(20);
    }
  }
  pthread_mutex_lock(&log_mu);
  ck_assert_int_eq(reran, 0);
  for (int i = 0; i < n; i++)
    for (int s = 0; s < N_STEPS; s++)
      ck_assert_msg(seen[i][s] && runs[i][s] >= 1, "i%d step %d", i, s);
  pthread_mutex_unlock(&log_mu);
}

static void assert_integrity(void) {
  sqlite3 *db;
  ck_assert_int_eq(sqlite3_open_v2(H.db, &db, SQLITE_OPEN_READONLY, NULL),
                   SQLITE_OK);
  sqlite3_stmt *st;
  ck_assert_int_eq(
      sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL),
      SQLITE_OK);
  ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
  ck_assert_str_eq((const char *)sqlite3_column_text(st, 0), "ok");
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static int health_says_storage(void) {
  json_t *h = duro_engine_health(H.e);
  const char *status = json_string_value(json_object_get(h, "status"));
  int degraded = status && !strcmp(status, "degraded") &&
                 json_object_get(h, "storage") != NULL;
  json_decref(h);
  return degraded;
}

/* A full disk while instances run: creates are refused (not lost), the
 * running instances wait, /healthz says degraded; once space is back,
 * everything completes without a restart. */
START_TEST(full_disk_then_space) {
  open_threaded();
  for (int i = 0; i < 100; i++)
    create_acked(i, 0);
  sleep_ms(10);
  faulty_vfs_set(&(faulty_plan){.write_per_mille = 1000});
  char id[] = "i100";
  ck_assert_int_eq(duro_instance_create(H.e, WF, id, NULL, -1, NULL),
                   DURO_E_STORAGE);
  int64_t until = mono_ms() + 2000;
  while (!health_says_storage() && mono_ms() < until)
    sleep_ms(10);
  ck_assert_msg(health_says_storage(), "health does not say storage");
  sleep_ms(300);
  faulty_vfs_set(NULL);
  faulty_counts c;
  faulty_vfs_counts(&c);
  ck_assert_uint_gt(c.writes, 0);
  create_acked(100, 0);
  assert_all_complete(101, 20000);
  json_t *h = duro_engine_health(H.e);
  ck_assert_str_eq(json_string_value(json_object_get(h, "status")), "ok");
  json_decref(h);
  assert_integrity();
  harness_close(&H);
}
END_TEST

/* Writes, fsyncs and reads failing at random while instances are
 * created, step, sleep and take events; then the faults stop. */
START_TEST(random_faults_mixed_workload) {
  open_threaded();
  faulty_vfs_set(&(faulty_plan){
      .write_per_mille = 30, .sync_per_mille = 30, .read_per_mille = 20});
  int n = 150;
  for (int i = 0; i < n; i++) {
    create_acked(i, i % 3 == 0);
    if (i % 3 == 0 && i >= 30)
      send_acked(i - 30);
  }
  for (int i = n - 30; i < n; i++)
    if (i % 3 == 0)
      send_acked(i);
  sleep_ms(500);
  faulty_vfs_set(NULL);
  faulty_counts c;
  faulty_vfs_counts(&c);
  ck_assert_msg(c.writes + c.syncs + c.reads > 0, "no fault was injected");
  assert_all_complete(n, 30000);
  assert_integrity();
  harness_close(&H);
}
END_TEST

/* ---- inline, on the virtual clock ---------------------------------------- */

static int activations;

static duro_rc sleeper(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  activations++;
  DURO_TRY(duro_sleep(step, "nap", "10 seconds"));
  return duro_set_output(step, "1");
}

static void open_inline(void) {
  faulty_vfs_install(1);
  faulty_vfs_set(NULL);
  harness_open(&H);
  harness_register(&H, "sleeper", sleeper);
  harness_start(&H);
}

/* A failed read of the due wakes must not move the poll past them. */
START_TEST(read_error_keeps_the_watermark) {
  open_inline();
  ck_assert_int_eq(duro_instance_create(H.e, "sleeper", "s", NULL, -1, NULL),
                   0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, "sleeper", "s"), "waiting");
  faulty_vfs_set(&(faulty_plan){.read_per_mille = 1000});
  duro_clock_advance(&H.clock, 20000);
  duro_engine_poll_due(H.e); /* fails: nothing read */
  faulty_vfs_set(NULL);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, "sleeper", "s"), "complete");
  harness_close(&H);
}
END_TEST

/* A database that a new reader cannot open answers a storage error; the
 * process does not abort.  Readers are pooled, so the read must need a
 * new one: that of a second journal on the file, whose pool is empty. */
START_TEST(unopenable_database_is_an_error) {
  open_inline();
  ck_assert_int_eq(duro_instance_create(H.e, "sleeper", "s", NULL, -1, NULL),
                   0);
  journal *j = harness_journal_open(&H);
  journal_instance in;
  faulty_vfs_set(&(faulty_plan){.open_per_mille = 1000});
  ck_assert_int_eq(journal_instance_get(j, "sleeper", "s", &in),
                   DURO_E_STORAGE);
  faulty_vfs_set(NULL);
  ck_assert_int_eq(journal_instance_get(j, "sleeper", "s", &in), 0);
  journal_instance_clear(&in);
  journal_close(j);
  harness_close(&H);
}
END_TEST

/* After the clock steps back, a sleep that started meanwhile waits its
 * time: it never spins. */
START_TEST(clock_step_back_does_not_spin) {
  open_inline();
  harness_advance(&H, 3600 * 1000); /* the poll has looked an hour ahead */
  H.clock.virtual_ms -= 3600 * 1000;
  ck_assert_int_eq(duro_instance_create(H.e, "sleeper", "s", NULL, -1, NULL),
                   0);
  harness_run(&H);
  ck_assert_int_le(activations, 2);
  ck_assert_str_eq(harness_status(&H, "sleeper", "s"), "waiting");
  harness_advance(&H, 9999);
  ck_assert_str_eq(harness_status(&H, "sleeper", "s"), "waiting");
  harness_advance(&H, 1);
  ck_assert_str_eq(harness_status(&H, "sleeper", "s"), "complete");
  ck_assert_int_le(activations, 3);
  harness_close(&H);
}
END_TEST

/* A forward step ends sleeps early (documented): wake times are wall
 * clock times. */
START_TEST(clock_step_forward_ends_sleeps) {
  open_inline();
  ck_assert_int_eq(duro_instance_create(H.e, "sleeper", "s", NULL, -1, NULL),
                   0);
  harness_run(&H);
  H.clock.virtual_ms += 3600 * 1000;
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, "sleeper", "s"), "complete");
  harness_close(&H);
}
END_TEST

/* ---- an event that arrives while the activation runs --------------------- */

static int64_t stored_wake_on_second;
static int evt_activations;

static int send_b(duro_attempt *a, void *arg) {
  (void)arg;
  /* The event arrives while the activation runs, after it read the
   * instance's events (at its first wait). */
  ck_assert_int_eq(duro_instance_send_event(H.e, "evt", "e1", "b", "2"), 0);
  return duro_attempt_result(a, "1");
}

static duro_rc evt(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  if (++evt_activations == 2) {
    /* What a stop right after the first activation would have left. */
    json_t *d = harness_describe(&H, "evt", "e1");
    stored_wake_on_second = json_integer_value(json_object_get(d, "wake_ms"));
    json_decref(d);
  }
  DURO_TRY(duro_wait_for_event(step, "a", "a", "1 hour", NULL));
  DURO_TRY(duro_do(step, "send b", NULL, send_b, NULL, NULL));
  DURO_TRY(duro_wait_for_event(step, "b", "b", "1 hour", NULL));
  return duro_set_output(step, "1");
}

/* The event and the instance's wake are one durable fact: the stored row
 * is due at once, so a stop before the next activation strands nothing. */
START_TEST(event_during_activation_is_durable) {
  harness_open(&H);
  harness_register(&H, "evt", evt);
  harness_start(&H);
  ck_assert_int_eq(duro_instance_create(H.e, "evt", "e1", NULL, -1, NULL), 0);
  ck_assert_int_eq(duro_instance_send_event(H.e, "evt", "e1", "a", "1"), 0);
  harness_run(&H);
  ck_assert_str_eq(harness_status(&H, "evt", "e1"), "complete");
  ck_assert_int_eq(evt_activations, 2);
  ck_assert_msg(stored_wake_on_second <= T0_MS,
                "stored wake %lld, an hour away: a stop would strand it",
                (long long)stored_wake_on_second);
  harness_close(&H);
}
END_TEST

/* ---- a control request whose write fails --------------------------------- */

static volatile int hold_started;

static int hold(duro_attempt *a, void *arg) {
  (void)arg;
  hold_started = 1;
  sleep_ms(400);
  return duro_attempt_result(a, "1");
}

static duro_rc held(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "hold", NULL, hold, NULL, NULL));
  DURO_TRY(duro_do(step, "after", NULL, hold, NULL, NULL));
  return duro_set_output(step, "1");
}

/* A pause refused with a storage error takes nothing effect: the
 * instance does not pause at its next step boundary. */
START_TEST(failed_pause_leaves_no_request) {
  faulty_vfs_install(2);
  faulty_vfs_set(NULL);
  harness_open_workers(&H, 2);
  harness_register(&H, "held", held);
  harness_start(&H);
  ck_assert_int_eq(duro_instance_create(H.e, "held", "h", NULL, -1, NULL), 0);
  while (!hold_started)
    sleep_ms(5);
  faulty_vfs_set(&(faulty_plan){.write_per_mille = 1000});
  ck_assert_int_eq(duro_instance_pause(H.e, "held", "h"), DURO_E_STORAGE);
  faulty_vfs_set(NULL);
  int64_t until = mono_ms() + 10000;
  duro_status st;
  do {
    sleep_ms(20);
    ck_assert_int_eq(duro_instance_status(H.e, "held", "h", &st), 0);
    ck_assert_msg(st != DURO_STATUS_PAUSED &&
                      st != DURO_STATUS_WAITING_FOR_PAUSE,
                  "a refused pause took effect: %s", duro_status_name(st));
  } while (st != DURO_STATUS_COMPLETE && mono_ms() < until);
  ck_assert_int_eq(st, DURO_STATUS_COMPLETE);
  harness_close(&H);
}
END_TEST

/* ---- a failed commit's own message --------------------------------------- */

/* Each callback leaves a message of its own in its thread's journal
 * error, as a failed read on that thread would: a later failure on the
 * thread must not be reported with it. */
static int stale(duro_attempt *a, void *arg) {
  (void)arg;
  store_error("a leftover error of this thread");
  sleep_ms(1);
  return duro_attempt_result(a, "1");
}

static duro_rc stale_flow(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  (void)ev, (void)env;
  for (int i = 0; i < 8; i++)
    DURO_TRY(duro_do(step, "s", NULL, stale, NULL, NULL));
  return duro_set_output(step, "1");
}

/* Commits fail while activations park on them (one worker, many
 * instances: their step commits go to the writer thread): each failure is
 * logged with the failed commit's own message, not with whatever the
 * worker's thread held (the plugin's own earlier error, here). */
START_TEST(parked_commit_failure_names_its_error) {
  faulty_vfs_install(3);
  faulty_vfs_set(NULL);
  harness_open_workers(&H, 1);
  harness_register(&H, "stale", stale_flow);
  harness_start(&H);
  char path[] = "/tmp/duro-stranded-log-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
  char id[16];
  for (int i = 0; i < 20; i++) {
    snprintf(id, sizeof id, "s%d", i);
    ck_assert_int_eq(duro_instance_create(H.e, "stale", id, NULL, -1, NULL), 0);
  }
  sleep_ms(20);
  faulty_vfs_set(&(faulty_plan){.write_per_mille = 1000});
  sleep_ms(300);
  faulty_vfs_set(NULL);
  for (int i = 0; i < 20; i++) {
    snprintf(id, sizeof id, "s%d", i);
    int64_t until = mono_ms() + 20000;
    while (strcmp(harness_status(&H, "stale", id), "complete") &&
           mono_ms() < until)
      sleep_ms(20);
    ck_assert_str_eq(harness_status(&H, "stale", id), "complete");
  }
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  static char buf[1 << 20];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  close(fd);
  unlink(path);
  ck_assert_int_ge(n, 0);
  buf[n] = '\0';
  int failed = 0;
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
    if (!strstr(line, "journal commit failed: "))
      continue;
    failed++;
    ck_assert_msg(strstr(line, "full") && !strstr(line, "leftover"),
                  "a failed commit logged with another error: %s", line);
  }
  ck_assert_int_gt(failed, 0);
  harness_close(&H);
}
END_TEST

int main(void) {
  Suite *s = suite_create("stranded");
  TCase *storage = tcase_create("storage");
  tcase_set_timeout(storage, 120);
  tcase_add_test(storage, full_disk_then_space);
  tcase_add_test(storage, random_faults_mixed_workload);
  tcase_add_test(storage, read_error_keeps_the_watermark);
  tcase_add_test(storage, unopenable_database_is_an_error);
  tcase_add_test(storage, failed_pause_leaves_no_request);
  tcase_add_test(storage, parked_commit_failure_names_its_error);
  suite_add_tcase(s, storage);
  TCase *races = tcase_create("races");
  tcase_add_test(races, event_during_activation_is_durable);
  tcase_add_test(races, clock_step_back_does_not_spin);
  tcase_add_test(races, clock_step_forward_ends_sleeps);
  suite_add_tcase(s, races);
  return suite_run(s);
}
