/* proc.c — see proc.h. */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

char proc_tmp_dir[320];
pid_t proc_live = -1;

/* ---- the temporary directories -------------------------------------------
 * base_dir is made by the runner process once per TCase (an unchecked
 * fixture) and removed by it afterwards, so it goes even when a case fails:
 * in fork mode a failed assertion ends the case with _exit(), skipping the
 * case's own teardown. */

static const char *base_name = "duro-test";
static char base_dir[256];

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

/* DURO_TEST_KEEP=1 keeps every case's directory (its host log, its
 * database) to look at after a failure. */
static void rm_tree(char *dir) {
  const char *keep = getenv("DURO_TEST_KEEP");
  if (dir[0] && !(keep && *keep == '1'))
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  dir[0] = '\0';
}

static void tcase_setup(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(base_dir, sizeof base_dir, "%s/%s-XXXXXX",
           tmp && *tmp ? tmp : "/tmp", base_name);
  ck_assert_msg(mkdtemp(base_dir) != NULL, "mkdtemp: %s", strerror(errno));
}

static void tcase_teardown(void) { rm_tree(base_dir); }

static void case_setup(void) {
  snprintf(proc_tmp_dir, sizeof proc_tmp_dir, "%s/case-XXXXXX", base_dir);
  ck_assert_msg(mkdtemp(proc_tmp_dir) != NULL, "mkdtemp: %s", strerror(errno));
}

static void case_teardown(void) {
  if (proc_live > 0) {
    kill(proc_live, SIGKILL);
    waitpid(proc_live, NULL, 0);
    proc_live = -1;
  }
  rm_tree(proc_tmp_dir);
}

void proc_fixtures(TCase *tc, const char *name) {
  base_name = name;
  tcase_add_unchecked_fixture(tc, tcase_setup, tcase_teardown);
  tcase_add_checked_fixture(tc, case_setup, case_teardown);
}

void proc_remove_db(const char *db) {
  static const char *suffix[] = {"", "-wal", "-shm"};
  char path[4096];
  for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++) {
    snprintf(path, sizeof path, "%s%s", db, suffix[i]);
    unlink(path);
  }
}

/* ---- time ---------------------------------------------------------------- */

int64_t proc_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void proc_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* ---- children ------------------------------------------------------------ */

char **proc_env(const char *const *drop, const char *add) {
  size_t n = 0;
  while (environ[n])
    n++;
  char **envp = calloc(n + 2, sizeof *envp);
  ck_assert(envp != NULL);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const char *e = environ[i];
    size_t len = strcspn(e, "=");
    int skip = 0;
    for (size_t d = 0; drop && drop[d] && !skip; d++)
      skip = strlen(drop[d]) == len && !strncmp(e, drop[d], len);
    if (!skip)
      envp[k++] = environ[i];
  }
  if (add)
    envp[k++] = (char *)add;
  envp[k] = NULL;
  return envp;
}

pid_t proc_spawn_fd(const char *const *argv, char **envp, int out_fd,
                    int err_fd) {
  if (!envp)
    envp = environ;
  pid_t parent = getpid();
  pid_t pid = fork();
  ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    /* _exit, never exit: nothing of the test process's may run here. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(127);
    if (dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0 || chdir(proc_tmp_dir) != 0)
      _exit(127);
    execve(argv[0], (char *const *)argv, envp);
    dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  return pid;
}

pid_t proc_spawn(const char *const *argv, char **envp, const char *out,
                 const char *err) {
  int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  ck_assert_msg(fo >= 0, "%s: %s", out, strerror(errno));
  int fe = fo;
  if (strcmp(out, err)) {
    fe = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    ck_assert_msg(fe >= 0, "%s: %s", err, strerror(errno));
  }
  pid_t pid = proc_spawn_fd(argv, envp, fo, fe);
  close(fo);
  if (fe != fo)
    close(fe);
  return pid;
}

int proc_wait_exit(pid_t pid, int64_t deadline) {
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid)
      break;
    ck_assert_msg(r == 0 || errno == EINTR, "waitpid: %s", strerror(errno));
    if (proc_now_ms() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      if (pid == proc_live)
        proc_live = -1;
      return -1;
    }
    proc_sleep_ms(2);
  }
  if (pid == proc_live)
    proc_live = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int proc_wait_port(pid_t pid, const char *log_path, int64_t deadline) {
  static const char mark[] = "http on port ";
  for (;;) {
    char *log = proc_slurp(log_path);
    const char *at = strstr(log, mark);
    if (at && strchr(at, '\n')) {
      int port = atoi(at + strlen(mark));
      free(log);
      ck_assert_msg(port > 0 && port < 65536, "bad port in the log");
      return port;
    }
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      if (pid == proc_live)
        proc_live = -1;
      ck_abort_msg("duro run exited (status 0x%x) before ready:\n%s", status,
                   proc_tail(log));
    }
    if (proc_now_ms() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      if (pid == proc_live)
        proc_live = -1;
      ck_abort_msg("duro run never said ready:\n%s", proc_tail(log));
    }
    free(log);
    proc_sleep_ms(5);
  }
}

char *proc_stop(pid_t pid, const char *log_path, int64_t deadline) {
  ck_assert_int_eq(kill(pid, SIGTERM), 0);
  int code = proc_wait_exit(pid, deadline);
  char *log = proc_slurp(log_path);
  if (code != 0 || proc_sanitizer_report(log)) /* in full, for the test log */
    fprintf(stderr, "---- %s ----\n%s---- end ----\n", log_path, log);
  ck_assert_msg(code == 0, "exit %d after SIGTERM (-1: hung); output:\n%s",
                code, proc_tail(log));
  const char *mark = proc_sanitizer_report(log);
  ck_assert_msg(mark == NULL, "sanitizer report (\"%s\") in:\n%s", mark,
                proc_tail(log));
  return log;
}

/* ---- output -------------------------------------------------------------- */

char *proc_slurp(const char *path) {
  char *buf = calloc(1, 1);
  size_t n = 0;
  ck_assert(buf != NULL);
  FILE *f = fopen(path, "rb");
  if (!f)
    return buf;
  char chunk[65536];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
    buf = realloc(buf, n + got + 1);
    ck_assert(buf != NULL);
    memcpy(buf + n, chunk, got);
    n += got;
    buf[n] = '\0';
  }
  fclose(f);
  return buf;
}

const char *proc_tail(const char *s) {
  size_t n = strlen(s);
  return n > 1200 ? s + n - 1200 : s;
}

const char *proc_sanitizer_report(const char *log) {
  static const char *marks[] = {"Sanitizer",
                                "runtime error:", "SUMMARY: ", NULL};
  for (int i = 0; marks[i]; i++)
    if (strstr(log, marks[i]))
      return marks[i];
  return NULL;
}
