/* test_host.c — the `duro` binary as an operator meets it.
 *
 * Every case runs the real DURO_BIN (fork/exec, stdout and stderr captured,
 * a deadline on every wait) on a small YAML config generated in a fresh
 * temporary directory, and asserts on the exit code and the messages:
 *
 *  - `duro check` of a good config (the good_v1 fixture, class "Hello")
 *    exits 0, says ok, and creates no database;
 *  - each bad config (unknown key, wrong type, missing field, a missing
 *    .so, a .so without `duro_plugin`, a wrong ABI major, a layout
 *    fingerprint mismatch, a class the plugin does not export) makes
 *    `duro check` exit non-zero with "FILE:LINE:COLUMN: " pointing at the
 *    offending node, plus the words that say what is wrong;
 *  - a config with three errors makes `duro check` and `duro run` print
 *    all three, in file order, then "3 errors in FILE"; three plugin
 *    problems are all reported by `duro check` and counted the same way;
 *  - `duro run` of the good config logs "ready" and exits 0 on SIGTERM and
 *    on SIGINT;
 *  - `duro run` of each bad config exits non-zero with the same message,
 *    creates no database where there was none, and leaves an existing
 *    database (made by a brief good run) byte for byte as it was;
 *  - a storage.encryption key whose variable is unset is refused by both,
 *    naming the key and the variable;
 *  - an unknown verb, or none, exits 2 with the usage.
 *
 * Children are killed on every way out: the helpers (proc.h) SIGKILL a child
 * past its deadline, the teardown kills one still running, the child asks
 * for SIGKILL when its parent dies, and in fork mode Check kills the case's
 * process group when the case ends, passed, failed or timed out. */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "duro.h"
#include "proc.h"
#include "suite_run.h"

#ifndef DURO_BIN
#error "build with -DDURO_BIN=\"<path of the built duro binary>\""
#endif
#ifndef FIXTURES_DIR
#error "build with -DFIXTURES_DIR=\"<dir holding libfixture_*.so>\""
#endif

#define WAIT_MS 15000 /* for any one child to say ready or to exit */

/* ---- running duro ------------------------------------------------------ */

#define OUT_MAX 65536

typedef struct child {
  pid_t pid;
  int fd[2]; /* stdout, stderr; -1 once at EOF */
  char text[2][OUT_MAX];
  size_t len[2];
  int code; /* exit status, 128 + signal when killed; -1 while running */
} child;

#define p_out(p) ((p)->text[0])
#define p_err(p) ((p)->text[1])

/* Starts DURO_BIN with args (NULL-terminated, without argv[0]) in
 * proc_tmp_dir, so relative paths in a config land there. */
static void child_start(child *p, const char *const *args) {
  const char *argv[8] = {DURO_BIN};
  size_t n = 1;
  for (; args[n - 1]; n++) {
    ck_assert(n < sizeof argv / sizeof argv[0] - 1);
    argv[n] = args[n - 1];
  }
  argv[n] = NULL;

  int out[2], err[2];
  ck_assert(pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0);
  memset(p, 0, sizeof *p);
  p->code = -1;
  pid_t pid = proc_spawn_fd(argv, NULL, out[1], err[1]);
  proc_live = pid;
  close(out[1]);
  close(err[1]);
  p->pid = pid;
  p->fd[0] = out[0];
  p->fd[1] = err[0];
}

/* Reads the child's output until `until` appears in its stderr (NULL:
 * until both pipes are closed) or `deadline` (monotonic ms).  Returns 1 on
 * success, 0 on timeout. */
static int child_read(child *p, const char *until, int64_t deadline) {
  for (;;) {
    if (until && strstr(p_err(p), until))
      return 1;
    if (p->fd[0] < 0 && p->fd[1] < 0)
      return until == NULL;
    int64_t left = deadline - proc_now_ms();
    if (left <= 0)
      return 0;
    struct pollfd pf[2] = {{.fd = p->fd[0], .events = POLLIN},
                           {.fd = p->fd[1], .events = POLLIN}};
    int r = poll(pf, 2, (int)left);
    if (r < 0 && errno == EINTR)
      continue;
    ck_assert_msg(r >= 0, "poll: %s", strerror(errno));
    for (int i = 0; i < 2; i++) {
      if (p->fd[i] < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      char buf[4096];
      ssize_t got = read(p->fd[i], buf, sizeof buf);
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0) {
        close(p->fd[i]);
        p->fd[i] = -1;
        continue;
      }
      size_t room = OUT_MAX - 1 - p->len[i];
      size_t take = (size_t)got < room ? (size_t)got : room;
      memcpy(p->text[i] + p->len[i], buf, take);
      p->len[i] += take;
      p->text[i][p->len[i]] = '\0';
    }
  }
}

/* Reads to EOF and reaps the child, killing it past the deadline (which
 * fails the case).  Returns the exit code. */
static int child_wait(child *p, int64_t deadline) {
  int in_time = child_read(p, NULL, deadline);
  p->code = proc_wait_exit(p->pid, deadline);
  for (int i = 0; i < 2; i++)
    if (p->fd[i] >= 0) {
      close(p->fd[i]);
      p->fd[i] = -1;
    }
  ck_assert_msg(in_time && p->code >= 0,
                "duro did not exit within %d ms; stderr:\n%s", WAIT_MS,
                p_err(p));
  return p->code;
}

/* Runs `duro VERB CONFIG` (or any args) to completion. */
static int duro(child *p, const char *const *args) {
  child_start(p, args);
  return child_wait(p, proc_now_ms() + WAIT_MS);
}

/* A non-zero exit by the program itself, not a crash. */
#define assert_refused(p)                                                      \
  ck_assert_msg((p)->code > 0 && (p)->code < 128,                              \
                "expected a non-zero exit, got %d; stderr:\n%s", (p)->code,    \
                p_err(p))

#define assert_contains(hay, needle)                                           \
  ck_assert_msg(strstr((hay), (needle)) != NULL, "expected \"%s\" in:\n%s",    \
                (needle), (hay))

/* ---- configs ------------------------------------------------------------
 * Templates with @DB@ (the storage path), @FIX@ (the fixtures dir) and
 * @TMP@ (the case's temporary directory).  The layout is fixed so that the
 * positions below hold: the plugin entry's mapping starts at 9:5, the
 * workflow entry's at 12:9. */

static void write_config(const char *file, const char *tmpl, const char *db,
                         char *path_out, size_t path_len) {
  snprintf(path_out, path_len, "%s/%s", proc_tmp_dir, file);
  FILE *f = fopen(path_out, "w");
  ck_assert_msg(f != NULL, "%s: %s", path_out, strerror(errno));
  for (const char *s = tmpl; *s;) {
    if (!strncmp(s, "@DB@", 4)) {
      fputs(db, f);
      s += 4;
    } else if (!strncmp(s, "@FIX@", 5)) {
      fputs(FIXTURES_DIR, f);
      s += 5;
    } else if (!strncmp(s, "@TMP@", 5)) {
      fputs(proc_tmp_dir, f);
      s += 5;
    } else {
      fputc(*s++, f);
    }
  }
  ck_assert(fclose(f) == 0);
}

#define HEAD                                                                   \
  "storage:\n"                                                                 \
  "  path: @DB@\n"                                                             \
  "  synchronous: full\n"                                                      \
  "http:\n"                                                                    \
  "  listen: 127.0.0.1:0\n"                                                    \
  "engine:\n"                                                                  \
  "  workers: 2\n"                                                             \
  "plugins:\n"

#define PLUGIN(so)                                                             \
  "  - name: fixture\n"                                                        \
  "    path: " so "\n"                                                         \
  "    workflows:\n"

#define WORKFLOW(cls)                                                          \
  "      - name: hello\n"                                                      \
  "        binding: HELLO\n"                                                   \
  "        class_name: " cls "\n"

static const char good_config[] =
    HEAD PLUGIN("@FIX@/libfixture_good_v1.so") WORKFLOW("Hello");

typedef struct bad_case {
  const char *name;
  const char *yaml;
  const char *where;   /* "line:column" */
  const char *says[4]; /* substrings of the message, "@TMP@" expanded */
  const char *field;   /* a field named with its value and the host's */
  unsigned theirs, ours;
} bad_case;

/* clang-format off */
static const bad_case bad_cases[] = {
    {"unknown key",
     "storage:\n"
     "  path: @DB@\n"
     "  sync: full\n" /* 3:3 */
     "plugins:\n" PLUGIN("@FIX@/libfixture_good_v1.so") WORKFLOW("Hello"),
     "3:3",
     {"unknown key", "\"sync\""},
     NULL, 0, 0},
    {"wrong type (string for an integer)",
     "storage:\n"
     "  path: @DB@\n"
     "  synchronous: full\n"
     "http:\n"
     "  listen: 127.0.0.1:0\n"
     "engine:\n"
     "  workers: many\n" /* 7:12 */
     "plugins:\n" PLUGIN("@FIX@/libfixture_good_v1.so") WORKFLOW("Hello"),
     "7:12",
     {"\"workers\"", "integer"},
     NULL, 0, 0},
    {"wrong type (scalar for a list)",
     "storage:\n"
     "  path: @DB@\n"
     "plugins: fixture\n", /* 3:10 */
     "3:10",
     {"\"plugins\"", "list"},
     NULL, 0, 0},
    {"missing field",
     HEAD PLUGIN("@FIX@/libfixture_good_v1.so")
     "      - name: hello\n" /* 12:9 */
     "        binding: HELLO\n",
     "12:9",
     {"missing", "\"class_name\"", "\"hello\""},
     NULL, 0, 0},
    {"missing .so",
     HEAD PLUGIN("@TMP@/nowhere/libmissing.so") WORKFLOW("Hello"),
     "9:5",
     {"@TMP@/nowhere/libmissing.so", "\"fixture\""},
     NULL, 0, 0},
    {"no duro_plugin symbol",
     HEAD PLUGIN("@FIX@/libfixture_no_entry.so") WORKFLOW("Hello"),
     "9:5",
     {"@FIX@/libfixture_no_entry.so", "duro_plugin"},
     NULL, 0, 0},
    {"wrong ABI major",
     HEAD PLUGIN("@FIX@/libfixture_abi_major_mismatch.so") WORKFLOW("Hello"),
     "9:5",
     {"@FIX@/libfixture_abi_major_mismatch.so"},
     "abi_major", 99, DURO_ABI_MAJOR},
    {"layout fingerprint mismatch",
     HEAD PLUGIN("@FIX@/libfixture_fingerprint_mismatch.so") WORKFLOW("Hello"),
     "9:5",
     {"@FIX@/libfixture_fingerprint_mismatch.so", "layout"},
     "event_size", 999, (unsigned)sizeof(duro_event)},
    {"class not exported",
     HEAD PLUGIN("@FIX@/libfixture_good_v1.so") WORKFLOW("Nope"),
     "12:9",
     {"\"Nope\"", "class", "\"fixture\""},
     NULL, 0, 0},
    {"non-loopback listen without a token",
     "storage:\n"
     "  path: @DB@\n"
     "http:\n"
     "  listen: 0.0.0.0:0\n" /* 4:11 */
     "plugins:\n" PLUGIN("@FIX@/libfixture_good_v1.so") WORKFLOW("Hello"),
     "4:11",
     {"http.listen", "loopback", "token_env"},
     NULL, 0, 0},
    {"encryption key not in the environment",
     "storage:\n"
     "  path: @DB@\n"
     "  encryption:\n"
     "    keys:\n"
     "      - id: k1\n"
     "        key_env: DURO_TEST_UNSET_KEY\n" /* 6:18 */
     "    active: k1\n"
     "plugins:\n" PLUGIN("@FIX@/libfixture_good_v1.so") WORKFLOW("Hello"),
     "6:18",
     {"key \"k1\"", "DURO_TEST_UNSET_KEY", "not set"},
     NULL, 0, 0},
};
/* clang-format on */

#define N_BAD ((int)(sizeof bad_cases / sizeof bad_cases[0]))

/* `needle` with @TMP@ and @FIX@ expanded. */
static const char *expand(char *buf, size_t len, const char *needle) {
  if (!strncmp(needle, "@TMP@", 5))
    snprintf(buf, len, "%s%s", proc_tmp_dir, needle + 5);
  else if (!strncmp(needle, "@FIX@", 5))
    snprintf(buf, len, "%s%s", FIXTURES_DIR, needle + 5);
  else
    snprintf(buf, len, "%s", needle);
  return buf;
}

/* 1 when `s` holds the decimal `n` as a whole number (not inside a longer
 * one) after position `from`. */
static int has_number_after(const char *s, const char *from, unsigned n) {
  char num[16];
  snprintf(num, sizeof num, "%u", n);
  size_t len = strlen(num);
  for (const char *q = strstr(from, num); q; q = strstr(q + 1, num)) {
    int left_ok = q == s || q[-1] < '0' || q[-1] > '9';
    int right_ok = q[len] < '0' || q[len] > '9';
    if (left_ok && right_ok)
      return 1;
  }
  return 0;
}

/* The message of a refused config: "CONFIG:LINE:COLUMN: ..." and what is
 * wrong. */
static void assert_message(const child *p, const char *config,
                           const bad_case *c) {
  char want[1024];
  snprintf(want, sizeof want, "%s:%s: ", config, c->where);
  assert_contains(p_err(p), want);
  for (size_t i = 0; i < sizeof c->says / sizeof c->says[0] && c->says[i]; i++)
    assert_contains(p_err(p), expand(want, sizeof want, c->says[i]));
  if (c->field) {
    const char *at = strstr(p_err(p), c->field);
    ck_assert_msg(at != NULL, "expected \"%s\" in:\n%s", c->field, p_err(p));
    ck_assert_msg(has_number_after(p_err(p), at, c->theirs) &&
                      has_number_after(p_err(p), at, c->ours),
                  "expected %s with %u and %u in:\n%s", c->field, c->theirs,
                  c->ours, p_err(p));
  }
}

/* ---- files ------------------------------------------------------------- */

static int exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

/* The whole file, malloc'ed; *len its size. */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (cap - n < 65536) {
      cap = cap ? 2 * cap : 65536;
      buf = realloc(buf, cap);
      ck_assert(buf != NULL);
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0)
      break;
  }
  ck_assert(!ferror(f));
  fclose(f);
  *len = n;
  return buf;
}

/* The names in `dir`, sorted, one per line. */
static void list_dir(const char *dir, char *out, size_t len) {
  struct dirent **names;
  int n = scandir(dir, &names, NULL, alphasort);
  ck_assert_msg(n >= 0, "scandir %s: %s", dir, strerror(errno));
  size_t o = 0;
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    if (o < len)
      o += (size_t)snprintf(out + o, len - o, "%s\n", names[i]->d_name);
    free(names[i]);
  }
  free(names);
}

/* ---- duro check ---------------------------------------------------------- */

START_TEST(check_good_config) {
  char config[512], db[512];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  write_config("good.yaml", good_config, db, config, sizeof config);
  child p;
  int code = duro(&p, (const char *[]){"check", config, NULL});
  ck_assert_msg(code == 0, "exit %d; stderr:\n%s", code, p_err(&p));
  assert_contains(p_out(&p), "ok");
  /* Validating opens no database. */
  ck_assert_msg(!exists(db), "duro check created %s", db);
}
END_TEST

/* A numbered weekday field gets a note saying which days it means (1 =
 * Sunday here); names get none; the check still passes. */
START_TEST(check_notes_numbered_weekdays) {
  static const char yaml[] =
      HEAD PLUGIN("@FIX@/libfixture_good_v1.so") WORKFLOW(
          "Hello") "    triggers:\n"
                   "      crons:\n"
                   "        - { schedule: \"0 9 * * 1-5\", workflow: hello }\n"
                   "        - { schedule: \"0 9 * * MON-FRI\", workflow: hello "
                   "}\n";
  char config[512], db[512];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  write_config("cron.yaml", yaml, db, config, sizeof config);
  child p;
  int code = duro(&p, (const char *[]){"check", config, NULL});
  ck_assert_msg(code == 0, "exit %d; stderr:\n%s", code, p_err(&p));
  assert_contains(p_err(&p), "weekday field \"1-5\" means Sunday to Thursday");
  const char *note = strstr(p_err(&p), "note: ");
  ck_assert_ptr_nonnull(note);
  ck_assert_ptr_null(strstr(note + 1, "note: ")); /* MON-FRI: none */
}
END_TEST

START_TEST(check_bad_config) {
  const bad_case c = bad_cases[_i];
  char config[512], db[512];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  write_config("bad.yaml", c.yaml, db, config, sizeof config);
  child p;
  duro(&p, (const char *[]){"check", config, NULL});
  assert_refused(&p);
  assert_message(&p, config, &c);
  ck_assert_msg(strstr(p_out(&p), "ok") == NULL, "%s: stdout says ok: %s",
                c.name, p_out(&p));
  ck_assert_msg(!exists(db), "%s: duro check created %s", c.name, db);
}
END_TEST

START_TEST(check_missing_config_file) {
  char config[512];
  snprintf(config, sizeof config, "%s/absent.yaml", proc_tmp_dir);
  child p;
  duro(&p, (const char *[]){"check", config, NULL});
  assert_refused(&p);
  assert_contains(p_err(&p), config);
}
END_TEST

/* Three errors in three sections: each on its own line with its
 * position, in file order, then their count; nothing is created.  `duro
 * run` refuses to start with the same lines. */
static const char three_errors[] =
    "storage:\n"
    "  path: @DB@\n"
    "  sync: full\n" /* 3:3 */
    "engine:\n"
    "  workers: lots\n" /* 5:12 */
    "plugins:\n" PLUGIN(
        "@FIX@/libfixture_good_v1.so") "      - name: hello\n" /* 10:9 */
                                       "        binding: HELLO\n";

START_TEST(check_reports_every_error) {
  const char *verb = _i ? "run" : "check";
  char config[512], db[512], want[4096];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  write_config("three.yaml", three_errors, db, config, sizeof config);
  child p;
  duro(&p, (const char *[]){verb, config, NULL});
  assert_refused(&p);
  snprintf(want, sizeof want,
           "%s:3:3: unknown key \"sync\" in storage\n"
           "%s:5:12: \"workers\" must be an integer\n"
           "%s:10:9: workflow \"hello\" is missing \"class_name\"\n"
           "3 errors in %s\n",
           config, config, config, config);
  ck_assert_msg(strcmp(p_err(&p), want) == 0, "%s: got\n%s\nexpected\n%s", verb,
                p_err(&p), want);
  ck_assert_msg(!exists(db), "duro %s created %s", verb, db);
}
END_TEST

/* Every plugin problem is reported, each at its entry, by duro check and
 * by duro run: two classes the plugin does not export, then a plugin
 * whose file is missing. */
static const char plugin_errors[] =
    HEAD PLUGIN("@FIX@/libfixture_good_v1.so") "      - name: a\n" /* 12:9 */
                                               "        binding: A\n"
                                               "        class_name: Nope\n"
                                               "      - name: b\n" /* 15:9 */
                                               "        binding: B\n"
                                               "        class_name: Nada\n"
                                               "  - name: gone\n" /* 18:5 */
                                               "    path: @TMP@/absent.so\n";

START_TEST(check_reports_every_plugin_error) {
  char config[512], db[512], want[1024];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  write_config("plugins.yaml", plugin_errors, db, config, sizeof config);
  child p;
  /* duro check, then duro run: the run's probe names every class too */
  duro(&p, (const char *[]){_i ? "run" : "check", config, NULL});
  assert_refused(&p);
  const char *at[3];
  const char *where[3] = {
      ":12:9: workflow \"a\": ", ":15:9: workflow \"b\": ", ":18:5: "};
  for (int i = 0; i < 3; i++) {
    snprintf(want, sizeof want, "%s%s", config, where[i]);
    at[i] = strstr(p_err(&p), want);
    ck_assert_msg(at[i] != NULL, "expected \"%s\" in:\n%s", want, p_err(&p));
    ck_assert_msg(i == 0 || at[i] > at[i - 1], "out of order:\n%s", p_err(&p));
  }
  assert_contains(at[0], "\"Nope\"");
  assert_contains(at[1], "\"Nada\"");
  assert_contains(at[2], "absent.so");
  snprintf(want, sizeof want, "\n3 errors in %s\n", config);
  size_t n = strlen(p_err(&p)), w = strlen(want);
  ck_assert_msg(n >= w && strcmp(p_err(&p) + n - w, want) == 0,
                "expected the last line \"%s\" in:\n%s", want + 1, p_err(&p));
}
END_TEST

/* ---- duro check of loads that never return or fork ----------------------
 * The load runs in a child, given the 10 s `duro run` gives its probe. */

static const char spin_config[] =
    HEAD PLUGIN("@FIX@/libfixture_ctor_spin.so") WORKFLOW("Hello");
static const char fork_config[] =
    HEAD PLUGIN("@FIX@/libfixture_ctor_fork.so") WORKFLOW("Hello");

/* A constructor that spins: refused after the deadline, which the message
 * names (it used to wait for ever). */
START_TEST(check_gives_up_on_spinning_ctor) {
  char config[512], db[512];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  write_config("spin.yaml", spin_config, db, config, sizeof config);
  child p;
  duro(&p, (const char *[]){"check", config, NULL});
  assert_refused(&p);
  assert_contains(p_err(&p), "plugin \"fixture\" (");
  assert_contains(p_err(&p),
                  "libfixture_ctor_spin.so): its constructor or init did not "
                  "return within 10 s");
}
END_TEST

/* Whether process `pid` is gone (a zombie no one reaped yet counts). */
static int pid_gone(pid_t pid) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 1;
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = '\0';
  const char *end = strrchr(line, ')');
  return end && end[1] == ' ' && (end[2] == 'Z' || end[2] == 'X');
}

/* A constructor that forks a child that stays: refused, naming the child,
 * which is ended (it used to be left running, holding duro check's
 * stderr open; `duro run`'s probe waited 10 s for that stderr, then said
 * it "did not finish loading"). */
START_TEST(check_ends_forked_child) {
  const char *verb = _i ? "run" : "check";
  char config[512], db[512], pidfile[512];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  snprintf(pidfile, sizeof pidfile, "%s/forked.pid", proc_tmp_dir);
  ck_assert(setenv("DURO_FIXTURE_PIDFILE", pidfile, 1) == 0);
  write_config("fork.yaml", fork_config, db, config, sizeof config);
  child p;
  duro(&p, (const char *[]){verb, config, NULL});
  assert_refused(&p);
  const char *at = strstr(p_err(&p), "forked a child (pid ");
  ck_assert_msg(at != NULL, "no \"forked a child\" in:\n%s", p_err(&p));
  int pid = atoi(at + strlen("forked a child (pid "));
  assert_contains(p_err(&p), "), which was ended");
  ck_assert_msg(pid > 0, "%s", p_err(&p));
  /* The child may have been ended before it wrote its pid. */
  FILE *f = fopen(pidfile, "r");
  int written = 0;
  if (f) {
    ck_assert(fscanf(f, "%d", &written) == 1);
    fclose(f);
    ck_assert_int_eq(written, pid);
  }
  /* SIGKILL was sent before duro check exited; it lands at once. */
  int64_t deadline = proc_now_ms() + 2000;
  while (!pid_gone(pid) && proc_now_ms() < deadline)
    proc_sleep_ms(10);
  ck_assert_msg(pid_gone(pid), "the forked child %d still runs", pid);
}
END_TEST

/* ---- duro run ------------------------------------------------------------ */

/* Starts `duro run CONFIG`, waits for "ready", stops it with `sig` and
 * asserts a clean exit. */
static void run_until_ready_then_stop(const char *config, int sig) {
  child p;
  child_start(&p, (const char *[]){"run", config, NULL});
  int ready = child_read(&p, "ready", proc_now_ms() + WAIT_MS);
  if (!ready) {
    kill(p.pid, SIGKILL);
    child_wait(&p, proc_now_ms() + WAIT_MS);
    ck_abort_msg("duro run never said ready (exit %d); stderr:\n%s", p.code,
                 p_err(&p));
  }
  ck_assert_int_eq(kill(p.pid, sig), 0);
  int code = child_wait(&p, proc_now_ms() + WAIT_MS);
  ck_assert_msg(code == 0, "exit %d after signal %d; stderr:\n%s", code, sig,
                p_err(&p));
}

static const int stop_signals[] = {SIGTERM, SIGINT};

START_TEST(run_good_config_stops_cleanly) {
  char config[512], db[512];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  write_config("good.yaml", good_config, db, config, sizeof config);
  run_until_ready_then_stop(config, stop_signals[_i]);
  ck_assert_msg(exists(db), "duro run did not create %s", db);
}
END_TEST

/* A refused config must not create the database, nor its directory. */
START_TEST(run_bad_config_creates_nothing) {
  const bad_case c = bad_cases[_i];
  char config[512], dir[512], db[600];
  snprintf(dir, sizeof dir, "%s/fresh", proc_tmp_dir);
  snprintf(db, sizeof db, "%s/sub/duro.db", dir);
  write_config("bad.yaml", c.yaml, db, config, sizeof config);
  child p;
  duro(&p, (const char *[]){"run", config, NULL});
  assert_refused(&p);
  assert_message(&p, config, &c);
  ck_assert_msg(!exists(dir), "%s: duro run created %s (for %s)", c.name, dir,
                db);
}
END_TEST

/* A refused config must not touch an existing database: its bytes, and
 * the files beside it, are the same before and after. */
START_TEST(run_bad_config_keeps_database) {
  const bad_case c = bad_cases[_i];
  char good[512], bad[512], dir[512], db[600];
  snprintf(dir, sizeof dir, "%s/var", proc_tmp_dir);
  snprintf(db, sizeof db, "%s/duro.db", dir);
  write_config("good.yaml", good_config, db, good, sizeof good);
  run_until_ready_then_stop(good, SIGTERM);

  size_t len_before, len_after;
  char *before = slurp(db, &len_before);
  char files_before[1024], files_after[1024];
  list_dir(dir, files_before, sizeof files_before);

  write_config("bad.yaml", c.yaml, db, bad, sizeof bad);
  child p;
  duro(&p, (const char *[]){"run", bad, NULL});
  assert_refused(&p);
  assert_message(&p, bad, &c);

  char *after = slurp(db, &len_after);
  ck_assert_msg(len_before == len_after && !memcmp(before, after, len_after),
                "%s: duro run changed %s (%zu bytes before, %zu after)", c.name,
                db, len_before, len_after);
  list_dir(dir, files_after, sizeof files_after);
  ck_assert_msg(!strcmp(files_before, files_after),
                "%s: files beside the database changed:\n%s---\n%s", c.name,
                files_before, files_after);
  free(before);
  free(after);
}
END_TEST

/* A free port of 127.0.0.1, as the kernel hands out: bound to port 0,
 * read back and let go. */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ck_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
            getsockname(fd, (struct sockaddr *)&a, &len) == 0);
  close(fd);
  return ntohs(a.sin_port);
}

/* The status of GET /healthz on 127.0.0.1:port, 0 when no answer came. */
static int healthz_status(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  char req[128], reply[256] = "";
  int n = snprintf(req, sizeof req,
                   "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                   "Connection: close\r\n\r\n",
                   port);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      send(fd, req, (size_t)n, MSG_NOSIGNAL) == n)
    (void)!recv(fd, reply, sizeof reply - 1, MSG_WAITALL);
  close(fd);
  return strncmp(reply, "HTTP/1.1 ", 9) ? 0 : atoi(reply + 9);
}

/* A supervisor that restarts `duro run` the moment it died (systemd's
 * Restart=always with RestartSec=0, a shell loop) must get a serving host
 * at once: the killed host's engine dies a few milliseconds after its
 * supervisor and holds the port (and the storage lock) until then. */
START_TEST(run_again_right_after_kill_9) {
  char config[512], db[512], yaml[1024];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  int port = free_port();
  char listen[64];
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  const char *at = strstr(good_config, "127.0.0.1:0");
  ck_assert(at != NULL);
  snprintf(yaml, sizeof yaml, "%.*s%s%s", (int)(at - good_config), good_config,
           listen, at + strlen("127.0.0.1:0"));
  write_config("good.yaml", yaml, db, config, sizeof config);
  for (int round = 0; round < 10; round++) {
    child p;
    child_start(&p, (const char *[]){"run", config, NULL});
    /* "ready:", as "ready" is also in "Address already in use" */
    int ready = child_read(&p, "ready:", proc_now_ms() + WAIT_MS);
    if (!ready) {
      kill(p.pid, SIGKILL);
      child_wait(&p, proc_now_ms() + WAIT_MS);
      ck_abort_msg("round %d: duro run never said ready (exit %d); "
                   "stderr:\n%s",
                   round, p.code, p_err(&p));
    }
    ck_assert_msg(healthz_status(port) == 200,
                  "round %d: no 200 for /healthz; stderr:\n%s", round,
                  p_err(&p));
    if (round == 9) {
      ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
      int code = child_wait(&p, proc_now_ms() + WAIT_MS);
      ck_assert_msg(code == 0, "exit %d; stderr:\n%s", code, p_err(&p));
      break;
    }
    /* Only the supervisor is reaped: its engine, dying, still holds the
     * output pipes (reading them to their end would wait for it). */
    ck_assert_int_eq(kill(p.pid, SIGKILL), 0);
    int code = proc_wait_exit(p.pid, proc_now_ms() + WAIT_MS);
    ck_assert_msg(code == 128 + SIGKILL, "round %d: exit %d", round, code);
    close(p.fd[0]);
    close(p.fd[1]);
  }
}
END_TEST

START_TEST(run_missing_config_file) {
  char config[512], var[512];
  snprintf(config, sizeof config, "%s/absent.yaml", proc_tmp_dir);
  snprintf(var, sizeof var, "%s/var", proc_tmp_dir); /* the default storage */
  child p;
  duro(&p, (const char *[]){"run", config, NULL});
  assert_refused(&p);
  assert_contains(p_err(&p), config);
  ck_assert_msg(!exists(var), "duro run created %s", var);
}
END_TEST

/* ---- the command line ---------------------------------------------------- */

START_TEST(unknown_verb_exits_2) {
  child p;
  int code = duro(&p, (const char *[]){"frobnicate", NULL});
  ck_assert_msg(code == 2, "exit %d; stderr:\n%s", code, p_err(&p));
  assert_contains(p_err(&p), "frobnicate");
  assert_contains(p_err(&p), "usage");
}
END_TEST

START_TEST(no_verb_exits_2) {
  child p;
  int code = duro(&p, (const char *[]){NULL});
  ck_assert_msg(code == 2, "exit %d; stderr:\n%s", code, p_err(&p));
  assert_contains(p_err(&p), "usage");
}
END_TEST

START_TEST(help_exits_0) {
  child p;
  int code = duro(&p, (const char *[]){"help", NULL});
  ck_assert_msg(code == 0, "exit %d; stderr:\n%s", code, p_err(&p));
  assert_contains(p_out(&p), "usage");
}
END_TEST

static Suite *host_suite(void) {
  Suite *s = suite_create("host");

  TCase *tc = tcase_create("check");
  proc_fixtures(tc, "duro-host");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, check_good_config);
  tcase_add_test(tc, check_notes_numbered_weekdays);
  tcase_add_loop_test(tc, check_bad_config, 0, N_BAD);
  tcase_add_test(tc, check_missing_config_file);
  tcase_add_loop_test(tc, check_reports_every_error, 0, 2);
  tcase_add_loop_test(tc, check_reports_every_plugin_error, 0, 2);
  suite_add_tcase(s, tc);

  tc = tcase_create("check_load");
  proc_fixtures(tc, "duro-host");
  tcase_set_timeout(tc, 40);
  tcase_add_test(tc, check_gives_up_on_spinning_ctor);
  tcase_add_loop_test(tc, check_ends_forked_child, 0, 2);
  suite_add_tcase(s, tc);

  tc = tcase_create("run");
  proc_fixtures(tc, "duro-host");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, run_good_config_stops_cleanly, 0,
                      (int)(sizeof stop_signals / sizeof stop_signals[0]));
  tcase_add_loop_test(tc, run_bad_config_creates_nothing, 0, N_BAD);
  tcase_add_loop_test(tc, run_bad_config_keeps_database, 0, N_BAD);
  tcase_add_test(tc, run_missing_config_file);
  tcase_add_test(tc, run_again_right_after_kill_9);
  suite_add_tcase(s, tc);

  tc = tcase_create("cli");
  proc_fixtures(tc, "duro-host");
  tcase_add_test(tc, unknown_verb_exits_2);
  tcase_add_test(tc, no_verb_exits_2);
  tcase_add_test(tc, help_exits_0);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(host_suite()); }
