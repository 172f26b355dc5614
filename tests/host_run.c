/* host_run.c — a real `duro run` under test: its config, environment,
 * start and stop, what its log says and requests to it (see host_run.h).
 * DURO_BIN, the binary it starts, comes from the build. */
#include "host_run.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef DURO_BIN
#error "build with -DDURO_BIN=\"<path of the built duro binary>\""
#endif

#define READY_MS 20000 /* for a host to say ready */

/* ---- the host ------------------------------------------------------------ */

void host_init(host_run *h, const char *name) {
  memset(h, 0, sizeof *h);
  snprintf(h->config, sizeof h->config, "%s/%s.yaml", proc_tmp_dir, name);
  snprintf(h->log, sizeof h->log, "%s/%s.log", proc_tmp_dir, name);
}

void host_setenv(host_run *h, const char *name, const char *value) {
  snprintf(h->env_extra, sizeof h->env_extra, "%s=%s", name, value);
}

void host_write_config(const host_run *h, const char *db, const char *engine,
                       const char *plugin, const char *path,
                       const char *workflows) {
  FILE *f = fopen(h->config, "w");
  ck_assert_msg(f != NULL, "%s: %s", h->config, strerror(errno));
  fprintf(f,
          "storage: { path: %s, synchronous: normal }\n"
          "http: { listen: \"127.0.0.1:0\" }\n"
          "engine: %s\n"
          "%s"
          "plugins:\n"
          "  - name: %s\n"
          "    path: %s\n"
          "%s%s%s"
          "    workflows:\n"
          "%s",
          db, engine, h->sections ? h->sections : "", plugin, path,
          h->plugin_keys ? "    " : "", h->plugin_keys ? h->plugin_keys : "",
          h->plugin_keys ? "\n" : "", workflows);
  ck_assert(fclose(f) == 0);
}

/* ASAN_OPTIONS or UBSAN_OPTIONS as we have it, plus the handlers off (see
 * host_run.h), into `buf` as "NAME=value". */
static void sanitizer_env(char *buf, size_t len, const char *name) {
  const char *have = getenv(name);
  snprintf(buf, len, "%s=%s%shandle_segv=0:handle_sigbus=0:handle_abort=0",
           name, have && *have ? have : "", have && *have ? ":" : "");
}

/* Our environment with the sanitizer options above and host_setenv()'s
 * variable; the strings live in `h`.  The array is malloc'ed (free it). */
static char **host_env(host_run *h) {
  char extra[64];
  snprintf(extra, sizeof extra, "%.*s", (int)strcspn(h->env_extra, "="),
           h->env_extra);
  const char *const drop[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS",
                              extra[0] ? extra : NULL, NULL};
  sanitizer_env(h->env_asan, sizeof h->env_asan, "ASAN_OPTIONS");
  sanitizer_env(h->env_ubsan, sizeof h->env_ubsan, "UBSAN_OPTIONS");
  char **base = proc_env(drop, NULL);
  size_t n = 0;
  while (base[n])
    n++;
  char **envp = realloc(base, (n + 4) * sizeof *envp);
  ck_assert(envp != NULL);
  envp[n++] = h->env_asan;
  envp[n++] = h->env_ubsan;
  if (extra[0])
    envp[n++] = h->env_extra;
  envp[n] = NULL;
  return envp;
}

pid_t host_spawn(host_run *h, const char *verb) {
  const char *argv[] = {DURO_BIN, verb, h->config, NULL};
  char **envp = host_env(h);
  pid_t pid = proc_spawn(argv, envp, h->log, h->log);
  free(envp);
  return pid;
}

void host_start(host_run *h) {
  h->pid = host_spawn(h, "run");
  proc_live = h->pid;
  h->port = proc_wait_port(h->pid, h->log, proc_now_ms() + READY_MS);
  /* The supervisor logs the fork before the engine can take the storage
   * lock it hands over, so the line is there once the engine is ready. */
  char *log = proc_slurp(h->log);
  pid_t pids[64];
  size_t n = host_engine_pids(log, pids, 64);
  h->engine = n ? pids[n - 1] : 0;
  ck_assert_msg(h->engine > 0 && h->engine != h->pid,
                "no engine pid (supervisor %d) in:\n%s", (int)h->pid,
                proc_tail(log));
  free(log);
}

int host_cli(const host_run *h, const char *const *args, char **out) {
  const char *with[30] = {"workflows"};
  size_t k = 1;
  while (*args && k < 28)
    with[k++] = *args++;
  return host_cli_verb(h, with, out);
}

int host_cli_verb(const host_run *h, const char *const *args, char **out) {
  const char *argv[32] = {DURO_BIN};
  size_t n = 1;
  while (*args && n < 28)
    argv[n++] = *args++;
  char url[64], path[460];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", h->port);
  argv[n++] = "--url";
  argv[n++] = url;
  argv[n] = NULL;
  snprintf(path, sizeof path, "%s/cli.out", proc_tmp_dir);
  pid_t pid = proc_spawn(argv, NULL, path, path);
  int code = proc_wait_exit(pid, proc_now_ms() + READY_MS);
  *out = proc_slurp(path);
  return code;
}

int host_running(pid_t pid) {
  int st;
  if (waitpid(pid, &st, WNOHANG) == 0)
    return 1;
  if (pid == proc_live)
    proc_live = -1;
  return 0;
}

int host_pid_gone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH)
    return 1;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  char *text = proc_slurp(path);       /* "" once the process is gone */
  const char *rp = strrchr(text, ')'); /* after "pid (comm)" comes the state */
  int gone = !rp || rp[2] == 'Z' || rp[2] == 'X';
  free(text);
  return gone;
}

int host_wait_gone(pid_t pid, int ms) {
  int64_t deadline = proc_now_ms() + ms;
  while (!host_pid_gone(pid)) {
    if (proc_now_ms() >= deadline)
      return 0;
    proc_sleep_ms(10);
  }
  return 1;
}

void host_stop(host_run *h, int64_t deadline, int excuse_dead) {
  pid_t engine = host_last_engine(h);
  ck_assert_int_eq(kill(h->pid, SIGTERM), 0);
  int code = proc_wait_exit(h->pid, deadline);
  char *log = proc_slurp(h->log);
  if (code != 0)
    fprintf(stderr, "---- %s ----\n%s---- end ----\n", h->log, log);
  ck_assert_msg(code == 0, "exit %d after SIGTERM (-1: hung); output:\n%s",
                code, proc_tail(log));
  ck_assert_msg(host_wait_gone(engine, 2000),
                "engine %d still there after the supervisor exited",
                (int)engine);
  static pid_t pids[HOST_MAX_ENGINES];
  size_t n = host_engine_pids(log, pids, HOST_MAX_ENGINES);
  host_assert_no_report(log, pids, excuse_dead && n ? n - 1 : 0);
  free(log);
}

/* ---- the host's log ------------------------------------------------------ */

size_t host_engine_pids(const char *log, pid_t *pids, size_t max) {
  static const char mark[] = "engine started (pid ";
  size_t n = 0;
  for (const char *p = strstr(log, mark); p && n < max; p = strstr(p + 1, mark))
    pids[n++] = (pid_t)atoi(p + strlen(mark));
  return n;
}

size_t host_workers_of(pid_t engine, pid_t *pids, size_t max) {
  size_t found = 0;
  DIR *d = opendir("/proc");
  struct dirent *de;
  while (d && found < max && (de = readdir(d)) != NULL) {
    pid_t pid = (pid_t)atoi(de->d_name);
    char path[64], stat[512] = {0}, cmd[64] = {0};
    if (pid <= 0)
      continue;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
    if (f)
      fclose(f);
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    f = fopen(path, "r");
    size_t cmd_len = f ? fread(cmd, 1, sizeof cmd - 1, f) : 0;
    if (f)
      fclose(f);
    /* "pid (comm) state ppid ...": the comm may hold spaces; the
     * cmdline is "duro\0__worker\0..." */
    const char *close = len ? strrchr(stat, ')') : NULL;
    int ppid = 0;
    char state;
    size_t arg1 = strnlen(cmd, cmd_len) + 1;
    if (close && sscanf(close + 1, " %c %d", &state, &ppid) == 2 &&
        ppid == engine && state != 'Z' && arg1 < cmd_len &&
        !strcmp(cmd + arg1, "__worker"))
      pids[found++] = pid;
  }
  if (d)
    closedir(d);
  return found;
}

pid_t host_worker_of(pid_t engine) {
  pid_t pid;
  return host_workers_of(engine, &pid, 1) ? pid : 0;
}

pid_t host_last_engine(const host_run *h) {
  static const char mark[] = "engine started (pid ";
  int64_t deadline = proc_now_ms() + 5000;
  for (;;) {
    char *log = proc_slurp(h->log);
    /* the last line, however many engines came before it */
    const char *last = NULL;
    for (const char *p = strstr(log, mark); p; p = strstr(p + 1, mark))
      last = p;
    if (last) {
      pid_t pid = (pid_t)atoi(last + strlen(mark));
      free(log);
      ck_assert_msg(pid > 0 && pid != h->pid, "engine pid %d, supervisor %d",
                    (int)pid, (int)h->pid);
      return pid;
    }
    if (proc_now_ms() >= deadline)
      ck_abort_msg("no \"engine started (pid N)\" line in:\n%s",
                   proc_tail(log));
    free(log);
    proc_sleep_ms(10);
  }
}

char *host_lines_with(const char *log, const char *needle, int *count) {
  size_t cap = strlen(log) + 1, len = 0;
  char *out = malloc(cap);
  ck_assert(out != NULL);
  out[0] = '\0';
  *count = 0;
  for (const char *l = log; *l;) {
    const char *end = strchr(l, '\n');
    size_t n = end ? (size_t)(end - l) : strlen(l);
    char *line = strndup(l, n);
    if (strstr(line, needle)) {
      memcpy(out + len, line, n);
      len += n;
      out[len++] = '\n';
      out[len] = '\0';
      (*count)++;
    }
    free(line);
    l += n + (end ? 1 : 0);
  }
  return out;
}

int host_count_lines(const host_run *h, const char *needle) {
  char *log = proc_slurp(h->log);
  int n;
  free(host_lines_with(log, needle, &n));
  free(log);
  return n;
}

void host_wait_lines(const host_run *h, const char *needle, int count,
                     int64_t deadline) {
  for (;;) {
    int n = host_count_lines(h, needle);
    if (n >= count)
      return;
    if (proc_now_ms() >= deadline) {
      char *log = proc_slurp(h->log);
      ck_abort_msg("%d line(s) with \"%s\", want %d, by the deadline:\n%s", n,
                   needle, count, proc_tail(log));
    }
    proc_sleep_ms(10);
  }
}

void host_assert_no_report(const char *log, const pid_t *excused,
                           size_t n_excused) {
  const char *ub = strstr(log, "runtime error:");
  ck_assert_msg(ub == NULL, "UBSan report: %.600s", ub);
  for (const char *p = strstr(log, "=="); p; p = strstr(p + 2, "==")) {
    char *end;
    long pid = strtol(p + 2, &end, 10);
    if (end == p + 2 || strncmp(end, "==", 2) != 0 ||
        (strncmp(end + 2, "ERROR", 5) && strncmp(end + 2, "WARNING", 7)))
      continue;
    int ok = 0;
    for (size_t i = 0; i < n_excused; i++)
      ok |= excused[i] == (pid_t)pid;
    if (!ok)
      fprintf(stderr, "---- sanitizer report ----\n%s---- end ----\n", p);
    ck_assert_msg(ok, "sanitizer report of pid %ld: %.300s", pid, p);
    p = end;
  }
}

/* ---- HTTP (libcurl, tests/http_client.h) -------------------------------- */

int host_request_try(const host_run *h, http_resp *r, const char *method,
                     const char *path, const char *body) {
  http_req q = {.method = method,
                .path = path,
                .body = body,
                .timeout_ms = h->request_ms};
  return http_send(h->port, &q, r) == CURLE_OK ? 0 : -1;
}

void host_request(const host_run *h, http_resp *r, const char *method,
                  const char *path, const char *body) {
  ck_assert_msg(host_request_try(h, r, method, path, body) == 0,
                "%s %s: no answer from port %d", method, path, h->port);
}

json_t *host_describe(const host_run *h, const char *wf, const char *id) {
  char path[256];
  snprintf(path, sizeof path, "/workflows/%s/instances/%s", wf, id);
  http_resp r;
  if (!h->restarts)
    host_request(h, &r, "GET", path, NULL);
  else if (host_request_try(h, &r, "GET", path, NULL) != 0)
    return NULL;
  ck_assert_msg(r.status == 200, "GET %s: %ld %s", path, r.status,
                r.body ? r.body : "");
  json_t *d = json_incref(r.json);
  http_resp_free(&r);
  return d;
}

json_t *host_wait_status(const host_run *h, const char *wf, const char *id,
                         const char *want, int64_t deadline) {
  json_t *d = NULL;
  for (;;) {
    json_decref(d);
    d = host_describe(h, wf, id);
    const char *st = d ? jstr(d, "status") : "";
    if (!strcmp(st, want) || !strcmp(st, "complete") ||
        !strcmp(st, "errored") || !strcmp(st, "terminated") ||
        proc_now_ms() >= deadline)
      break;
    proc_sleep_ms(20);
  }
  char *text = jdump(d);
  ck_assert_msg(d && !strcmp(jstr(d, "status"), want),
                "%s/%s: status never became %s; last: %s", wf, id, want,
                proc_tail(text));
  free(text);
  return d;
}

json_t *host_plugin_builds(const host_run *h, const char *name) {
  http_resp r;
  host_request(h, &r, "GET", "/plugins", NULL);
  ck_assert_int_eq(r.status, 200);
  json_t *out = NULL, *p;
  size_t i;
  json_array_foreach(jget(r.json, "plugins"), i, p) {
    if (!strcmp(jstr(p, "name"), name))
      out = json_incref(jget(p, "builds"));
  }
  http_resp_free(&r);
  ck_assert_msg(out != NULL, "no plugin %s in GET /plugins", name);
  return out;
}
