/* test_crash.c — durability against a real `duro` process killed with
 * SIGKILL at random moments.
 *
 * The chain plugin (plugins/chain/chain.c) writes a line to a file outside
 * the journal each time a step callback runs ("exec") and each time run()
 * gets a step's result back ("seen", which the host allows only after the
 * result is committed).  The test creates instances, then starts and kills
 * the host again and again at varied points, lets a last run finish, and
 * checks from that file and the journal that:
 *   - every instance completed with every step;
 *   - no step callback ran after its step had completed ("exec" after
 *     "seen"), i.e. no completed step ran twice;
 *   - a completed step's result never changed (every "seen" of a step
 *     carries the same token, and it is the one in the journal). */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "map.h"
#include "proc.h"
#include "suite_run.h"
#include "view_instance.h"

#define N_INSTANCES 32
#define N_STEPS 40
#define MAX_KILLS 40

typedef struct crash_env {
  char dir[128];
  char cfg[192];
  char db[192];
  char log[192];
  char err[192];
} crash_env;

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

static void setup_env(crash_env *c, const char *synchronous) {
  snprintf(c->dir, sizeof c->dir, "/tmp/duro-crash-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(c->dir));
  snprintf(c->cfg, sizeof c->cfg, "%s/duro.yaml", c->dir);
  snprintf(c->db, sizeof c->db, "%s/duro.db", c->dir);
  snprintf(c->log, sizeof c->log, "%s/chain.log", c->dir);
  snprintf(c->err, sizeof c->err, "%s/host.err", c->dir);
  char yaml[1024];
  snprintf(yaml, sizeof yaml,
           "storage: { path: %s, synchronous: %s }\n"
           "http: { listen: \"127.0.0.1:0\" }\n"
           "engine: { workers: 4 }\n"
           "plugins:\n"
           "  - name: chain\n"
           "    path: %s\n"
           "    workflows:\n"
           "      - { name: chain, binding: CHAIN, class_name: Chain }\n",
           c->db, synchronous, CHAIN_PLUGIN);
  write_file(c->cfg, yaml);
}

static duro_rc never_run(duro_step *s, const duro_event *ev, duro_env *env) {
  (void)s, (void)ev, (void)env;
  return DURO_ERROR;
}

/* The test process opens the journal with the engine library to create
 * and inspect instances; it never starts workers, so it runs nothing. */
static duro_engine *open_engine(const crash_env *c) {
  duro_engine_options opt = {.db_path = c->db, .synchronous_full = 1};
  duro_engine *e = NULL;
  char err[512];
  ck_assert_msg(duro_engine_open(&opt, &e, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(
      duro_engine_register(e, "chain", "CHAIN", never_run, NULL, NULL), 0);
  return e;
}

static void create_instances(const crash_env *c) {
  duro_engine *e = open_engine(c);
  duro_create_req reqs[N_INSTANCES];
  char ids[N_INSTANCES][32];
  char params[64];
  snprintf(params, sizeof params, "{\"steps\":%d,\"nap_every\":4}", N_STEPS);
  for (int i = 0; i < N_INSTANCES; i++) {
    snprintf(ids[i], sizeof ids[i], "chain-%02d", i);
    reqs[i] =
        (duro_create_req){.id = ids[i], .params = params, .retention_ms = -1};
  }
  json_t *res = NULL;
  ck_assert_int_eq(
      duro_instance_create_batch(e, "chain", reqs, N_INSTANCES, &res), 0);
  ck_assert_int_eq(json_array_size(json_object_get(res, "created")),
                   N_INSTANCES);
  json_decref(res);
  duro_engine_close(e);
}

static int count_complete(const crash_env *c) {
  duro_engine *e = open_engine(c);
  int done = 0;
  for (int i = 0; i < N_INSTANCES; i++) {
    char id[32];
    snprintf(id, sizeof id, "chain-%02d", i);
    duro_status s;
    ck_assert_int_eq(duro_instance_status(e, "chain", id, &s), 0);
    ck_assert_msg(s != DURO_STATUS_ERRORED, "%s errored", id);
    done += s == DURO_STATUS_COMPLETE;
  }
  duro_engine_close(e);
  return done;
}

static pid_t start_host(const crash_env *c, const char *log_level) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    int fd = open(c->err, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0)
      dup2(fd, STDERR_FILENO);
    setenv("DURO_CHAIN_LOG", c->log, 1);
    setenv("DURO_LOG", log_level, 1);
    execl(DURO_BIN, "duro", "run", c->cfg, (char *)NULL);
    _exit(127);
  }
  return pid;
}

/* Reads the whole file: the negative checks ("no exec of step 2") must
 * see every line, however long the log has grown. */
static int file_contains(const char *path, const char *needle) {
  char *text = proc_slurp(path);
  int found = strstr(text, needle) != NULL;
  free(text);
  return found;
}

typedef struct step_seen {
  int executed;
  char token[64];
} step_seen;

/* Replays the chain log and fails on the first completed step that ran
 * again or changed its result. */
static void check_log(const crash_env *c,
                      step_seen seen[N_INSTANCES][N_STEPS + 1], int *execs) {
  FILE *f = fopen(c->log, "r");
  ck_assert_ptr_nonnull(f);
  char kind[8], inst[32], token[64];
  int idx, line = 0;
  *execs = 0;
  while (fscanf(f, "%7s %31s %d %63s", kind, inst, &idx, token) == 4) {
    line++;
    int i = atoi(inst + strlen("chain-"));
    ck_assert(i >= 0 && i < N_INSTANCES && idx >= 1 && idx <= N_STEPS);
    step_seen *s = &seen[i][idx];
    if (!strcmp(kind, "exec")) {
      (*execs)++;
      s->executed++;
      ck_assert_msg(s->token[0] == '\0',
                    "line %d: %s step %d ran again after it completed with "
                    "%s",
                    line, inst, idx, s->token);
    } else {
      ck_assert_msg(s->executed > 0, "line %d: %s step %d seen, never run",
                    line, inst, idx);
      if (s->token[0])
        ck_assert_msg(!strcmp(s->token, token),
                      "line %d: %s step %d result changed from %s to %s", line,
                      inst, idx, s->token, token);
      else
        snprintf(s->token, sizeof s->token, "%s", token);
    }
  }
  fclose(f);
}

/* Passed: remove the evidence (a failure leaves it for a look). */
static void remove_env(const crash_env *c) {
  const char *files[] = {c->cfg, c->log, c->err};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++)
    unlink(files[i]);
  char out[256];
  snprintf(out, sizeof out, "%s/cli.out", c->dir);
  unlink(out);
  proc_remove_db(c->db);
  rmdir(c->dir);
}

static void crash_loop(const char *synchronous) {
  crash_env c;
  setup_env(&c, synchronous);
  create_instances(&c);
  srand((unsigned)time(NULL) ^ (unsigned)getpid());

  int kills = 0, interrupted = 0, done = 0;
  while (kills < MAX_KILLS && (done = count_complete(&c)) < N_INSTANCES) {
    pid_t pid = start_host(&c, "warn");
    /* Vary the moment: early (during recovery), mid-run, late. */
    proc_sleep_ms(2 + rand() % 40);
    kill(pid, SIGKILL);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFSIGNALED(st),
                  "host exited on its own (status %d): "
                  "see %s",
                  st, c.err);
    kills++;
    int after = count_complete(&c);
    interrupted += after < N_INSTANCES;
  }
  ck_assert_msg(interrupted >= 5, "only %d kills landed while work was left",
                interrupted);

  /* A last run finishes whatever the kills left.  It must be up (its
   * signal handlers installed, which it says with "ready") before the
   * SIGTERM that stops it. */
  truncate(c.err, 0);
  pid_t pid = start_host(&c, "info");
  int waited = 0;
  for (; waited < 120000 &&
         (!file_contains(c.err, " ready") || count_complete(&c) < N_INSTANCES);
       waited += 50)
    proc_sleep_ms(50);
  kill(pid, SIGTERM);
  int st;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                "host did not stop cleanly on SIGTERM (status %d)", st);
  ck_assert_int_eq(count_complete(&c), N_INSTANCES);

  static step_seen seen[N_INSTANCES][N_STEPS + 1];
  memset(seen, 0, sizeof seen);
  int execs;
  check_log(&c, seen, &execs);

  /* Every step completed once, and the journal holds the seen result. */
  duro_engine *e = open_engine(&c);
  for (int i = 0; i < N_INSTANCES; i++) {
    char id[32];
    snprintf(id, sizeof id, "chain-%02d", i);
    json_t *d = NULL;
    ck_assert_int_eq(duro_instance_describe(e, "chain", id, &d), 0);
    ck_assert_str_eq(json_string_value(json_object_get(d, "status")),
                     "complete");
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(d, "output"), "steps")),
                     N_STEPS);
    for (int k = 1; k <= N_STEPS; k++) {
      ck_assert_msg(seen[i][k].token[0], "%s step %d never seen", id, k);
      char key[16];
      snprintf(key, sizeof key, "step#%d", k);
      size_t x;
      json_t *s, *found = NULL;
      json_array_foreach(json_object_get(d, "steps"), x, s) {
        if (!strcmp(json_string_value(json_object_get(s, "key")), key))
          found = s;
      }
      ck_assert_ptr_nonnull(found);
      ck_assert_str_eq(json_string_value(json_object_get(found, "result")),
                       seen[i][k].token);
    }
    json_decref(d);
  }
  duro_engine_close(e);
  remove_env(&c);
  fprintf(stderr,
          "crash test (synchronous=%s): %d kills, %d step executions for %d "
          "steps\n",
          synchronous, kills, execs, N_INSTANCES * N_STEPS);
}

/* A pause and a terminate acknowledged while an instance is inside a
 * step are persisted at once: after a SIGKILL and a restart they take
 * effect, and no further step runs. */
static void cli(const char *verb, const char *id, int port, const char *log,
                const char *want) {
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
  const char *argv[] = {DURO_BIN, "workflows", "instances", verb, "chain",
                        id,       "--url",     url,         NULL};
  char **envp = proc_env(NULL, NULL);
  pid_t pid = proc_spawn(argv, envp, log, log);
  free(envp);
  ck_assert_int_eq(proc_wait_exit(pid, proc_now_ms() + 10000), 0);
  ck_assert_msg(file_contains(log, want), "%s %s: expected \"%s\"", verb, id,
                want);
}

START_TEST(acknowledged_control_survives_kill_9) {
  crash_env c;
  setup_env(&c, "full");
  snprintf(proc_tmp_dir, sizeof proc_tmp_dir, "%s", c.dir); /* the CLI's cwd */
  duro_engine *e = open_engine(&c);
  const char *params = "{\"steps\":3,\"hold_ms\":5000}";
  ck_assert_int_eq(duro_instance_create(e, "chain", "held-p", params, -1, NULL),
                   0);
  ck_assert_int_eq(duro_instance_create(e, "chain", "held-t", params, -1, NULL),
                   0);
  duro_engine_close(e);

  pid_t pid = start_host(&c, "info");
  int port = proc_wait_port(pid, c.err, proc_now_ms() + 10000);
  for (int t = 0; t < 400 && !(file_contains(c.log, "exec held-p 1") &&
                               file_contains(c.log, "exec held-t 1"));
       t++)
    proc_sleep_ms(25);
  char out[256];
  snprintf(out, sizeof out, "%s/cli.out", c.dir);
  cli("pause", "held-p", port, out, "held-p: waitingForPause");
  cli("terminate", "held-t", port, out, "held-t: terminated");
  kill(pid, SIGKILL);
  int st;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);

  /* Up (past its start-up, where a SIGTERM is not yet its own to handle)
   * before it is looked at: both controls may be on disk already, as a
   * terminate's answer waits until its activation took it. */
  pid = start_host(&c, "info");
  for (int t = 0; t < 400; t++) {
    char *text = proc_slurp(c.err);
    const char *first = strstr(text, "ready:");
    int second = first && strstr(first + 1, "ready:");
    free(text);
    if (second)
      break;
    proc_sleep_ms(25);
  }
  duro_status sp = DURO_STATUS_QUEUED, stt = DURO_STATUS_QUEUED;
  for (int t = 0; t < 400; t++) {
    e = open_engine(&c);
    ck_assert_int_eq(duro_instance_status(e, "chain", "held-p", &sp), 0);
    ck_assert_int_eq(duro_instance_status(e, "chain", "held-t", &stt), 0);
    duro_engine_close(e);
    if (sp == DURO_STATUS_PAUSED && stt == DURO_STATUS_TERMINATED)
      break;
    proc_sleep_ms(25);
  }
  ck_assert_str_eq(duro_status_name(sp), "paused");
  ck_assert_str_eq(duro_status_name(stt), "terminated");
  ck_assert(!file_contains(c.log, "exec held-p 2"));
  ck_assert(!file_contains(c.log, "exec held-t 2"));
  kill(pid, SIGTERM);
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  remove_env(&c);
}
END_TEST

START_TEST(kill_9_full) { crash_loop("full"); }
END_TEST

START_TEST(kill_9_normal) {
  /* This cannot tell normal from full: synchronous only decides when
   * SQLite fsyncs, and a SIGKILL loses nothing the kernel already holds,
   * so both keep every commit; only a power cut or a kernel crash (which
   * no test here makes) would show normal losing its last commits.  What
   * it checks is that storage.synchronous: normal works end to end (the
   * config, the host, the journal's NORMAL pragma) and that the same
   * guarantees hold at its commit timing, an order of magnitude faster,
   * which moves where the kills land. */
  crash_loop("normal");
}
END_TEST

/* file_contains() finds a line however far into the file it is: a log
 * longer than any fixed buffer must not make a negative check pass. */
START_TEST(file_contains_reads_whole_file) {
  char path[] = "/tmp/duro-crash-log-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  FILE *f = fdopen(fd, "w");
  ck_assert_ptr_nonnull(f);
  for (int i = 0; i < 4000; i++) /* about 80 KiB of lines before it */
    fprintf(f, "exec chain-%02d %d t%d\n", i % 32, i % 40 + 1, i);
  fputs("exec held-p 2 late\n", f);
  fclose(f);
  ck_assert(file_contains(path, "exec held-p 2"));
  ck_assert(!file_contains(path, "exec held-t 2"));
  unlink(path);
}
END_TEST

int main(void) {
  Suite *s = suite_create("crash");
  TCase *tc = tcase_create("sigkill");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, kill_9_full);
  tcase_add_test(tc, kill_9_normal);
  tcase_add_test(tc, acknowledged_control_survives_kill_9);
  suite_add_tcase(s, tc);

  tc = tcase_create("helpers");
  tcase_add_test(tc, file_contains_reads_whole_file);
  suite_add_tcase(s, tc);
  return suite_run(s);
}
