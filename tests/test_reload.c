/* test_reload.c — hot reload of a plugin under a real `duro run`.
 *
 * Every case runs DURO_BIN (tests/host_run.h) in a temporary
 * directory of its own, on a config whose one plugin "deploy" is the file
 * plugin.so there, a copy of the deploy fixture's v1 build
 * (plugins/deploy/deploy.c: steps A, a sleep "nap" of params "nap", B;
 * output {"build": "v1" | "v2" | "v2r" | "v2i"}).  The plugin's class
 * Flow serves three workflows: `pinned` (default versioning), `latest`
 * (versioning: latest) and `latestp` (latest, on_divergence: pause).  A
 * deploy writes another build over plugin.so while instances sleep, the
 * way a user would: in place (cp), or written beside and renamed over it.
 * What the host did is read from its log (one file for stdout and stderr:
 * the supervisor's "engine started (pid N)", the engine's "build H is the
 * newest (was H)", "refused", "unloaded" lines), from the instances'
 * descriptions over HTTP (output, error, the build hash of every step
 * attempt), from the build store (var/builds/<hash>.so) and from
 * /proc/PID/maps of the engine and of its worker process (the plugin
 * runs in one: the worker maps its builds, the engine none).
 *
 *  - in place: no process dies, the new build is the newest within 2 s,
 *    pinned instances finish on the build they started on, latest ones
 *    move to the new build (their attempts show both hashes), and the old
 *    build is unloaded and deleted once nothing needs it; the engine
 *    never maps a build, the worker maps both; with `workers: 0` the
 *    engine maps them, and unmaps the old one at its unload;
 *  - write then rename is seen too; a deploy of identical bytes is no
 *    reload at all;
 *  - SIGHUP to the supervisor reloads, also a change the directory watch
 *    cannot see (a write through a hard link elsewhere), and a cp followed
 *    at once by SIGHUP loads the build once, not twice;
 *  - pinned across a host restart: the old build is loaded from the store;
 *  - broken builds (undefined symbol, ABI major, init fails, constructor
 *    crash) are refused with the cause, the engine survives, v1 serves;
 *  - divergence under latest: a renamed or inserted step errors the
 *    instance with replay.diverged naming both step keys, or pauses it
 *    (on_divergence: pause) until a rollback and a resume complete it;
 *  - the config file read again (SIGHUP, POST /plugins/reload): a cron
 *    trigger added exists, fires and survives an engine crash; consumer
 *    settings change; a changed storage.path refuses the whole file; a
 *    file that does not parse is refused with file:line:column.
 *
 * The hosts run with ASan's and UBSan's SIGSEGV handlers off
 * (tests/host_run.h): the constructor-crash build must kill its load probe
 * with a signal, which the refusal then names.  All traffic is on
 * loopback. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host_run.h"
#include "http_client.h"
#include "proc.h"

#if !defined(DEPLOY_V1) || !defined(DEPLOY_V2) ||                              \
    !defined(DEPLOY_V2_RENAMED) || !defined(DEPLOY_V2_INSERTED)
#error "build with -DDEPLOY_V1=\"<path>\" and V2, V2_RENAMED, V2_INSERTED"
#endif
#ifndef FIXTURES_DIR
#error "build with -DFIXTURES_DIR=\"<dir holding libfixture_*.so>\""
#endif

#define NEWEST_MS 2000      /* from a deploy to its "is the newest" line */
#define UNLOAD_MS 15000     /* for an unused build to be unloaded (10 s pass) */
#define SETTLE_MS 15000     /* for an instance to reach a status */
#define QUIET_MS 800        /* past the watch's 250 ms debounce and a probe */
#define NAP "\"3 seconds\"" /* the sleep of instances a deploy lands on */
#define SHORT "{\"nap\":\"200 ms\"}" /* instances that only need to end */

/* ---- files --------------------------------------------------------------- */

/* Writes the bytes of `src` over `dst` in place (open with O_TRUNC, the
 * inode kept), as cp does. */
static void put_file(const char *dst, const char *src) {
  char *data = NULL;
  size_t len = 0;
  FILE *in = fopen(src, "rb");
  ck_assert_msg(in != NULL, "%s: %s", src, strerror(errno));
  char chunk[65536];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, in)) > 0) {
    data = realloc(data, len + got);
    ck_assert(data != NULL);
    memcpy(data + len, chunk, got);
    len += got;
  }
  fclose(in);
  int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  ck_assert_msg(fd >= 0, "%s: %s", dst, strerror(errno));
  for (size_t off = 0; off < len;) {
    ssize_t k = write(fd, data + off, len - off);
    ck_assert_msg(k > 0 || errno == EINTR, "write %s: %s", dst,
                  strerror(errno));
    if (k > 0)
      off += (size_t)k;
  }
  ck_assert(close(fd) == 0);
  free(data);
}

/* A deploy that never shows a half-written file: `src` written to
 * `dst`.tmp, renamed over `dst`. */
static void put_file_renamed(const char *dst, const char *src) {
  char tmp[512];
  snprintf(tmp, sizeof tmp, "%s.tmp", dst);
  put_file(tmp, src);
  ck_assert_msg(rename(tmp, dst) == 0, "rename %s: %s", tmp, strerror(errno));
}

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* ---- the host (tests/host_run.h) ----------------------------------------- */

typedef struct host {
  host_run run;
  char plugin[400]; /* the configured plugin path, deploys go here */
  char store[400];  /* the build store, var/builds */
} host;

/* `duro run` on the config, its output in `log_name` (a file of its own
 * per start: proc_spawn truncates), to its "ready" line. */
static void start(host *h, const char *log_name) {
  snprintf(h->run.log, sizeof h->run.log, "%s/%s", proc_tmp_dir, log_name);
  host_start(&h->run);
}

/* Nothing died: the supervisor runs, the engine it started first is the
 * only one and still runs, and no line says a process died. */
static void assert_alive(host *h) {
  char *log = proc_slurp(h->run.log);
  ck_assert_msg(host_running(h->run.pid), "the supervisor exited:\n%s",
                proc_tail(log));
  pid_t engines[64];
  size_t n = host_engine_pids(log, engines, 64);
  ck_assert_msg(n == 1 && engines[0] == h->run.engine &&
                    !host_pid_gone(engines[0]),
                "engine %d replaced or gone (%d engine(s) started):\n%s",
                (int)h->run.engine, (int)n, proc_tail(log));
  ck_assert_msg(strstr(log, "died") == NULL, "a process died:\n%s",
                proc_tail(log));
  free(log);
}

/* SIGTERM: exit 0, no sanitizer report, the engine gone. */
static void stop(host *h) { host_stop(&h->run, proc_now_ms() + 15000, 0); }

/* ---- the host's log ------------------------------------------------------ */

#define NEWEST_MARK "plugin \"deploy\": build "

/* The `k`th (0-based) "build H is the newest (was P)" line's hashes. */
static void newest_line(const host *h, int k, char hash[17], char was[17]) {
  char *log = proc_slurp(h->run.log);
  int seen = 0;
  for (const char *p = strstr(log, NEWEST_MARK); p;
       p = strstr(p + 1, NEWEST_MARK)) {
    if (sscanf(p + strlen(NEWEST_MARK),
               "%16[0-9a-f] is the newest (was %16[0-9a-f])", hash, was) == 2 &&
        seen++ == k) {
      free(log);
      return;
    }
  }
  ck_abort_msg("no \"is the newest\" line #%d in:\n%s", k + 1, proc_tail(log));
}

/* ---- the build store and the engine's mappings --------------------------- */

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

/* The hashes of the builds in the store (the <hash>.so files), sorted,
 * into `out` as "H1 H2 ..."; returns how many. */
static int store_builds(const host *h, char *out, size_t len) {
  char names[16][17];
  int n = 0;
  DIR *d = opendir(h->store);
  ck_assert_msg(d != NULL, "%s: %s", h->store, strerror(errno));
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (l == 19 && !strcmp(e->d_name + 16, ".so") && n < 16)
      snprintf(names[n++], 17, "%.16s", e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof names[0], by_name);
  out[0] = '\0';
  for (int i = 0; i < n; i++)
    snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? " " : "",
             names[i]);
  return n;
}

/* The hash of the one build in the store (right after the first start). */
static void only_build(const host *h, char hash[17]) {
  char list[400];
  int n = store_builds(h, list, sizeof list);
  ck_assert_msg(n == 1, "%d build(s) in the store: %s", n, list);
  snprintf(hash, 17, "%.16s", list);
}

static int store_has(const host *h, const char *hash) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.so", h->store, hash);
  return file_exists(path);
}

/* Whether process `pid` maps a file named "<hash>.so" (the store's copy
 * or the private copy of the first load, "(deleted)" or not). */
static int maps_build(pid_t pid, const char *hash) {
  char path[64], name[32];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  snprintf(name, sizeof name, "/%s.so", hash);
  char *maps = proc_slurp(path);
  ck_assert_msg(*maps, "%s is empty or unreadable", path);
  int found = strstr(maps, name) != NULL;
  free(maps);
  return found;
}

/* The engine's worker process (`duro __worker ...`, its child), which
 * holds the plugin's code; fails when there is none. */
static pid_t worker_of(const host *h) {
  pid_t found = host_worker_of(h->run.engine);
  ck_assert_msg(found > 0, "engine %d has no worker process",
                (int)h->run.engine);
  return found;
}

/* The three workflows of the deploy plugin's one class. */
#define WORKFLOWS                                                              \
  "      - { name: pinned, binding: PINNED, class_name: Flow }\n"              \
  "      - name: latest\n"                                                     \
  "        binding: LATEST\n"                                                  \
  "        class_name: Flow\n"                                                 \
  "        versioning: latest\n"                                               \
  "      - name: latestp\n"                                                    \
  "        binding: LATESTP\n"                                                 \
  "        class_name: Flow\n"                                                 \
  "        versioning: latest\n"                                               \
  "        on_divergence: pause\n"

/* A host whose config's plugin is plugin.so, a v1 build, started with its
 * output in `log_name`; `v1` gets the hash of that build, the store's
 * only one. */
static void start_v1_env(host *h, const char *log_name, const char *workflows,
                         const char *env, const char *value, const char *keys,
                         char v1[17]) {
  host_init(&h->run, "host");
  h->run.plugin_keys = keys;
  if (env)
    host_setenv(&h->run, env, value);
  h->run.request_ms = 5000;
  snprintf(h->plugin, sizeof h->plugin, "%s/plugin.so", proc_tmp_dir);
  snprintf(h->store, sizeof h->store, "%s/var/builds", proc_tmp_dir);
  put_file(h->plugin, DEPLOY_V1);
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_write_config(&h->run, db, "{ workers: 2 }", "deploy", h->plugin,
                    workflows);
  start(h, log_name);
  only_build(h, v1);
}

static void start_v1_with(host *h, const char *log_name, const char *workflows,
                          char v1[17]) {
  start_v1_env(h, log_name, workflows, NULL, NULL, NULL, v1);
}

static void start_v1(host *h, const char *log_name, char v1[17]) {
  start_v1_with(h, log_name, WORKFLOWS, v1);
}

/* ---- HTTP (tests/host_run.h) --------------------------------------------- */

static void create(const host *h, const char *wf, const char *id,
                   const char *params) {
  char path[128], body[256];
  snprintf(path, sizeof path, "/workflows/%s/instances", wf);
  snprintf(body, sizeof body, "{\"id\":\"%s\",\"params\":%s}", id, params);
  http_resp r;
  host_request(&h->run, &r, "POST", path, body);
  ck_assert_msg(r.status == 201, "create %s/%s: %ld %s", wf, id, r.status,
                r.body ? r.body : "");
  http_resp_free(&r);
}

/* PATCH .../status {"status":"restart"} (from step `from`, NULL: from
 * the top); returns the HTTP status, the body into `body` ("" if none). */
static long restart(const host *h, const char *wf, const char *id,
                    const char *from, char *body, size_t len) {
  char path[128], req[256];
  snprintf(path, sizeof path, "/workflows/%s/instances/%s/status", wf, id);
  if (from)
    snprintf(req, sizeof req,
             "{\"status\":\"restart\",\"from\":{\"name\":\"%s\"}}", from);
  else
    snprintf(req, sizeof req, "{\"status\":\"restart\"}");
  http_resp r;
  host_request(&h->run, &r, "PATCH", path, req);
  snprintf(body, len, "%s", r.body ? r.body : "");
  long status = r.status;
  http_resp_free(&r);
  return status;
}

/* Status `want` now (host_wait_status()), within SETTLE_MS. */
static json_t *settle(const host *h, const char *wf, const char *id,
                      const char *want) {
  return host_wait_status(&h->run, wf, id, want, proc_now_ms() + SETTLE_MS);
}

/* The build of attempt `i` of step `key`, "" when there is none. */
static const char *attempt_build(json_t *d, const char *key, size_t i) {
  json_t *a = json_array_get(jget(step_of(d, key), "attempts"), i);
  return jstr(a, "build");
}

/* The instance completed with output {"build": version}, its steps A and
 * B each in one attempt, A on build `a`, B on build `b`. */
static void assert_ran(json_t *d, const char *version, const char *a,
                       const char *b) {
  char *text = jdump(d);
  ck_assert_msg(!strcmp(jstr(d, "status"), "complete") &&
                    !strcmp(jstr(d, "output.build"), version),
                "want complete with build %s: %s", version, proc_tail(text));
  ck_assert_msg(json_array_size(jget(step_of(d, "A#1"), "attempts")) == 1 &&
                    json_array_size(jget(step_of(d, "B#1"), "attempts")) == 1,
                "A and B in one attempt each: %s", proc_tail(text));
  ck_assert_msg(!strcmp(attempt_build(d, "A#1", 0), a) &&
                    !strcmp(attempt_build(d, "B#1", 0), b),
                "want A on %s, B on %s: %s", a, b, proc_tail(text));
  free(text);
}

/* A new pinned instance `id` completes on build `hash` alone, with
 * output {"build": version}. */
static void assert_new_runs_on(const host *h, const char *id,
                               const char *version, const char *hash) {
  create(h, "pinned", id, SHORT);
  json_t *d = settle(h, "pinned", id, "complete");
  assert_ran(d, version, hash, hash);
  json_decref(d);
}

/* The builds the instance's attempts ran on, as its description lists
 * them ("builds"), into `out` as "H1 H2". */
static const char *builds_of(json_t *d, char *out, size_t len) {
  out[0] = '\0';
  size_t i;
  json_t *b;
  json_array_foreach(jget(d, "builds"), i, b)
      snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? " " : "",
               json_string_value(b) ? json_string_value(b) : "?");
  return out;
}

/* Waits for status `status` with error replay.diverged, whose message
 * names the `journaled` and the `requested` step keys; returns the
 * description (caller's). */
static json_t *wait_diverged(const host *h, const char *wf, const char *id,
                             const char *status, const char *journaled,
                             const char *requested) {
  json_t *d = settle(h, wf, id, status);
  char *text = jdump(d);
  ck_assert_msg(!strcmp(jstr(d, "error.name"), "replay.diverged"),
                "%s/%s: want replay.diverged: %s", wf, id, proc_tail(text));
  const char *msg = jstr(d, "error.message");
  char want1[32], want2[32];
  snprintf(want1, sizeof want1, "\"%s\"", journaled);
  snprintf(want2, sizeof want2, "\"%s\"", requested);
  ck_assert_msg(strstr(msg, want1) && strstr(msg, want2),
                "%s/%s: the message names not both %s and %s: %s", wf, id,
                want1, want2, msg);
  free(text);
  return d;
}

/* Deploys `src` over the plugin in place and waits for the `k`th
 * (1-based) "is the newest" line, within NEWEST_MS; its hashes go to
 * hash and was. */
static void deploy(host *h, const char *src, int k, char hash[17],
                   char was[17]) {
  int64_t t0 = proc_now_ms();
  put_file(h->plugin, src);
  host_wait_lines(&h->run, "is the newest", k, t0 + NEWEST_MS);
  newest_line(h, k - 1, hash, was);
}

/* ---- 1. in place --------------------------------------------------------- */

/* _i 0: the plugin in its worker process (the default); 1: with
 * `workers: 0`, in the engine's own. */
START_TEST(deploy_in_place) {
  int in_engine = _i == 1;
  host H;
  char h1[17], h2[17], was[17], list[400];
  start_v1_env(&H, "host.log", WORKFLOWS, NULL, NULL,
               in_engine ? "workers: 0" : NULL, h1);
  create(&H, "pinned", "p-old", "{\"nap\":" NAP "}");
  create(&H, "latest", "l-old", "{\"nap\":" NAP "}");
  json_decref(settle(&H, "pinned", "p-old", "waiting"));
  json_decref(settle(&H, "latest", "l-old", "waiting"));
  /* the process that holds the plugin's code */
  pid_t holder = in_engine ? H.run.engine : worker_of(&H);
  const char *who = in_engine ? "engine" : "worker";
  ck_assert_msg(maps_build(holder, h1), "the %s does not map build %s", who,
                h1);
  ck_assert_msg(in_engine || !maps_build(H.run.engine, h1),
                "the engine maps build %s: it loaded plugin code", h1);

  deploy(&H, DEPLOY_V2, 1, h2, was);
  ck_assert_str_eq(was, h1);
  ck_assert_str_ne(h2, h1);
  ck_assert_msg(store_has(&H, h2), "build %s not in the store", h2);
  assert_alive(&H);

  create(&H, "pinned", "p-new", SHORT);
  json_t *d = settle(&H, "pinned", "p-new", "complete");
  assert_ran(d, "v2", h2, h2);
  ck_assert_str_eq(builds_of(d, list, sizeof list), h2);
  json_decref(d);

  /* The ones asleep across the deploy: pinned stays on v1, latest
   * replays A's v1 result and runs B on v2. */
  d = settle(&H, "pinned", "p-old", "complete");
  assert_ran(d, "v1", h1, h1);
  ck_assert_str_eq(builds_of(d, list, sizeof list), h1);
  json_decref(d);
  d = settle(&H, "latest", "l-old", "complete");
  assert_ran(d, "v2", h1, h2);
  char both[40];
  snprintf(both, sizeof both, "%s %s", h1, h2);
  ck_assert_str_eq(builds_of(d, list, sizeof list), both);
  json_decref(d);
  assert_alive(&H);

  /* Nothing needs v1 now: unloaded and deleted; v2 stays. */
  char unloaded[128];
  snprintf(unloaded, sizeof unloaded, "build %s unloaded: no instance needs it",
           h1);
  int64_t t0 = proc_now_ms();
  host_wait_lines(&H.run, unloaded, 1, t0 + UNLOAD_MS);
  /* The line is written as the unload starts: dlclose and the deletion
   * follow it. */
  int64_t seen = proc_now_ms();
  /* (a worker keeps its builds loaded for its life) */
  while ((store_has(&H, h1) || (in_engine && maps_build(holder, h1))) &&
         proc_now_ms() < seen + 1000)
    proc_sleep_ms(10);
  ck_assert_msg(!store_has(&H, h1),
                "unloaded build %s still in the store 1 s after its line", h1);
  ck_assert_msg(!in_engine || !maps_build(holder, h1),
                "unloaded build %s still mapped by the engine 1 s after its "
                "line",
                h1);
  ck_assert_msg(store_has(&H, h2) && maps_build(holder, h2),
                "the newest build %s was unloaded", h2);
  ck_assert_msg(in_engine || (!maps_build(H.run.engine, h1) &&
                              !maps_build(H.run.engine, h2)),
                "the engine maps a build: it loaded plugin code");
  snprintf(unloaded, sizeof unloaded, "build %s unloaded", h2);
  ck_assert_int_eq(host_count_lines(&H.run, unloaded), 0);
  assert_alive(&H);
  stop(&H);
}
END_TEST

/* ---- 2. write then rename; identical bytes --------------------------------
 */

START_TEST(deploy_by_rename) {
  host H;
  char h1[17], h2[17], was[17], before[400], after[400];
  start_v1(&H, "host.log", h1);
  int64_t t0 = proc_now_ms();
  put_file_renamed(H.plugin, DEPLOY_V2);
  host_wait_lines(&H.run, "is the newest", 1, t0 + NEWEST_MS);
  newest_line(&H, 0, h2, was);
  ck_assert_str_eq(was, h1);
  ck_assert_str_ne(h2, h1);
  assert_new_runs_on(&H, "n1", "v2", h2);

  /* The same bytes again, in place, by rename, and then SIGHUP: no new
   * build, no log line about one, no new file in the store. */
  store_builds(&H, before, sizeof before);
  put_file(H.plugin, DEPLOY_V2);
  proc_sleep_ms(QUIET_MS);
  put_file_renamed(H.plugin, DEPLOY_V2);
  proc_sleep_ms(QUIET_MS);
  ck_assert_int_eq(kill(H.run.pid, SIGHUP), 0);
  host_wait_lines(&H.run, "SIGHUP: reloading", 1, proc_now_ms() + 2000);
  proc_sleep_ms(QUIET_MS);
  ck_assert_int_eq(host_count_lines(&H.run, "is the newest"), 1);
  ck_assert_int_eq(host_count_lines(&H.run, "refused"), 0);
  /* The unload pass may have deleted v1 meanwhile; nothing else changed. */
  store_builds(&H, after, sizeof after);
  ck_assert_msg(!strcmp(after, before) || !strcmp(after, h2),
                "the store held %s, then %s", before, after);
  assert_new_runs_on(&H, "n2", "v2", h2);
  assert_alive(&H);
  stop(&H);
}
END_TEST

/* ---- 3. SIGHUP ------------------------------------------------------------
 */

START_TEST(sighup_reloads) {
  host H;
  char h1[17], h2[17], hash[17], was[17];
  start_v1(&H, "host.log", h1);

  /* A write through a hard link in another directory changes the file
   * without an event in the plugin's directory: only SIGHUP loads it. */
  char other[400], link_path[420];
  snprintf(other, sizeof other, "%s/elsewhere", proc_tmp_dir);
  snprintf(link_path, sizeof link_path, "%s/plugin.so", other);
  ck_assert(mkdir(other, 0700) == 0);
  ck_assert_msg(link(H.plugin, link_path) == 0, "link: %s", strerror(errno));
  put_file(link_path, DEPLOY_V2);
  proc_sleep_ms(QUIET_MS);
  ck_assert_msg(host_count_lines(&H.run, "is the newest") == 0,
                "the watch saw a write through another link: the case "
                "cannot tell SIGHUP's reload from the watch's");
  int64_t t0 = proc_now_ms();
  ck_assert_int_eq(kill(H.run.pid, SIGHUP), 0);
  host_wait_lines(&H.run, "is the newest", 1, t0 + 1000);
  newest_line(&H, 0, h2, was);
  ck_assert_str_eq(was, h1);
  ck_assert_str_ne(h2, h1);
  assert_new_runs_on(&H, "n1", "v2", h2);

  /* cp and SIGHUP at once: loaded within 1 s, once (the watch's reload
   * that follows finds it unchanged). */
  t0 = proc_now_ms();
  put_file(H.plugin, DEPLOY_V1);
  ck_assert_int_eq(kill(H.run.pid, SIGHUP), 0);
  host_wait_lines(&H.run, "is the newest", 2, t0 + 1000);
  newest_line(&H, 1, hash, was);
  ck_assert_str_eq(hash, h1);
  ck_assert_str_eq(was, h2);
  proc_sleep_ms(QUIET_MS);
  ck_assert_int_eq(host_count_lines(&H.run, "is the newest"), 2);
  ck_assert_int_eq(host_count_lines(&H.run, "SIGHUP: reloading"), 2);
  assert_new_runs_on(&H, "n2", "v1", h1);
  assert_alive(&H);
  stop(&H);
}
END_TEST

/* ---- 4. pinned across a restart ------------------------------------------ */

START_TEST(pinned_across_restart) {
  host H;
  char h1[17], h2[17], was[17];
  start_v1(&H, "first.log", h1);
  create(&H, "pinned", "p-old", "{\"nap\":\"4 seconds\"}");
  create(&H, "latest", "l-old", "{\"nap\":\"4 seconds\"}");
  json_decref(settle(&H, "pinned", "p-old", "waiting"));
  json_decref(settle(&H, "latest", "l-old", "waiting"));
  deploy(&H, DEPLOY_V2, 1, h2, was);
  ck_assert_str_eq(was, h1);
  stop(&H);

  /* The file is v2 now: the start loads it as the newest, and v1 from
   * the store for p-old. */
  start(&H, "second.log");
  char pinned_line[128];
  snprintf(pinned_line, sizeof pinned_line,
           "build %s loaded for the instances pinned to it", h1);
  host_wait_lines(&H.run, pinned_line, 1, proc_now_ms() + 2000);
  /* Still asleep: what follows ran on this host. */
  json_t *d = host_describe(&H.run, "pinned", "p-old");
  char *text = jdump(d);
  ck_assert_msg(!strcmp(jstr(d, "status"), "waiting"),
                "p-old no longer asleep after the restart: %s",
                proc_tail(text));
  free(text);
  json_decref(d);
  assert_new_runs_on(&H, "p-new", "v2", h2);
  d = settle(&H, "pinned", "p-old", "complete");
  assert_ran(d, "v1", h1, h1);
  json_decref(d);
  d = settle(&H, "latest", "l-old", "complete");
  assert_ran(d, "v2", h1, h2);
  json_decref(d);
  assert_alive(&H);
  stop(&H);
}
END_TEST

/* ---- 5. broken builds -----------------------------------------------------
 */

static const struct {
  const char *fixture, *cause;
} broken[] = {
    {"undefined_symbol", "undefined symbol: duro_fixture_missing_function"},
    {"abi_major_mismatch", "abi_major is 99"},
    {"init_fails", "init returned"},
    {"ctor_crash", "crashed while loading (signal 11, SIGSEGV)"},
};

START_TEST(broken_build_refused) {
  host H;
  char h1[17], src[512], want[700];
  start_v1(&H, "host.log", h1);
  snprintf(src, sizeof src, "%s/libfixture_%s.so", FIXTURES_DIR,
           broken[_i].fixture);
  int64_t t0 = proc_now_ms();
  put_file(H.plugin, src);
  host_wait_lines(&H.run, "refused", 1, t0 + 3000);
  char *log = proc_slurp(H.run.log);
  snprintf(want, sizeof want,
           "plugin \"deploy\": new build of %s refused: ", H.plugin);
  assert_contains(log, want);
  assert_contains(log, broken[_i].cause);
  snprintf(want, sizeof want, "; build %s keeps serving", h1);
  assert_contains(log, want);
  ck_assert_msg(strstr(log, "is the newest") == NULL, "a broken build loaded");
  free(log);
  assert_alive(&H);
  /* The refused build leaves nothing in the store. */
  char list[400];
  ck_assert_msg(store_builds(&H, list, sizeof list) == 1 && !strcmp(list, h1),
                "the store holds %s, want only %s", list, h1);
  assert_new_runs_on(&H, "after", "v1", h1);
  assert_alive(&H);
  stop(&H);
}
END_TEST

/* ---- 6. divergence under latest -------------------------------------------
 */

START_TEST(divergence_under_latest) {
  host H;
  char h1[17], hash[17], was[17];
  start_v1(&H, "host.log", h1);
  create(&H, "latest", "renamed", "{\"nap\":" NAP "}");
  create(&H, "latestp", "paused", "{\"nap\":" NAP "}");
  json_decref(settle(&H, "latest", "renamed", "waiting"));
  json_decref(settle(&H, "latestp", "paused", "waiting"));

  /* A renamed to A2 under them: caught at their wake, before any step of
   * the new code runs. */
  deploy(&H, DEPLOY_V2_RENAMED, 1, hash, was);
  json_t *d = wait_diverged(&H, "latest", "renamed", "errored", "A#1", "A2#1");
  ck_assert_msg(step_of(d, "A2#1") == NULL && step_of(d, "B#1") == NULL,
                "a step of the new code ran");
  json_decref(d);
  d = wait_diverged(&H, "latestp", "paused", "paused", "A#1", "A2#1");
  json_decref(d);
  proc_sleep_ms(500);
  d = host_describe(&H.run, "latestp", "paused");
  ck_assert_str_eq(jstr(d, "status"), "paused");
  json_decref(d);

  /* Rolled back to v1, resumed: it completes on v1. */
  deploy(&H, DEPLOY_V1, 2, hash, was);
  ck_assert_str_eq(hash, h1);
  http_resp r;
  host_request(&H.run, &r, "PATCH",
               "/workflows/latestp/instances/paused/status",
               "{\"status\":\"resume\"}");
  ck_assert_msg(r.status == 200, "resume: %ld %s", r.status,
                r.body ? r.body : "");
  http_resp_free(&r);
  d = settle(&H, "latestp", "paused", "complete");
  assert_ran(d, "v1", h1, h1);
  ck_assert_msg(json_is_null(jget(d, "error")), "error kept after resume");
  json_decref(d);

  /* X inserted after A, under an instance asleep past A. */
  create(&H, "latest", "inserted", "{\"nap\":\"2 seconds\"}");
  json_decref(settle(&H, "latest", "inserted", "waiting"));
  deploy(&H, DEPLOY_V2_INSERTED, 3, hash, was);
  d = wait_diverged(&H, "latest", "inserted", "errored", "nap#1", "X#1");
  ck_assert_msg(step_of(d, "X#1") == NULL && step_of(d, "B#1") == NULL,
                "a step of the new code ran");
  json_decref(d);
  assert_alive(&H);
  stop(&H);
}
END_TEST

/* ---- 7. retirement per plugin ---------------------------------------------
 */

/* Two pinned workflows of one class: pa's instance ends on v1 while pb's
 * sleeps on it, so v1 stays loaded.  It must stay pa's too: a restart of
 * the ended pa instance from its step B, whose journal is v1, runs B on
 * v1 (it used to pause with build.unavailable, the code loaded). */
START_TEST(retire_per_plugin) {
  host H;
  char h1[17], h2[17], h3[17], was[17], body[1024], line[128];
  start_v1_with(&H, "host.log",
                "      - { name: pa, binding: PA, class_name: Flow }\n"
                "      - { name: pb, binding: PB, class_name: Flow }\n",
                h1);
  create(&H, "pa", "a", SHORT);
  json_decref(settle(&H, "pa", "a", "complete"));
  create(&H, "pb", "b", "{\"nap\":\"2 minutes\"}");
  json_decref(settle(&H, "pb", "b", "waiting"));
  /* v2 then v3: v2's unload line shows a pass that kept v1 (older, so
   * decided first) came and went. */
  deploy(&H, DEPLOY_V2, 1, h2, was);
  deploy(&H, DEPLOY_V2_INSERTED, 2, h3, was);
  snprintf(line, sizeof line, "build %s unloaded: no instance needs it", h2);
  host_wait_lines(&H.run, line, 1, proc_now_ms() + UNLOAD_MS);
  snprintf(line, sizeof line, "build %s unloaded", h1);
  ck_assert_int_eq(host_count_lines(&H.run, line), 0);

  long st = restart(&H, "pa", "a", "B", body, sizeof body);
  ck_assert_msg(st == 200, "restart from B: %ld %s", st, body);
  json_t *d = settle(&H, "pa", "a", "complete");
  assert_ran(d, "v1", h1, h1);
  json_decref(d);
  d = host_describe(&H.run, "pb", "b");
  ck_assert_str_eq(jstr(d, "status"), "waiting");
  json_decref(d);
  assert_alive(&H);
  stop(&H);
}
END_TEST

/* ---- 8. restarts of ended instances after their build left ---------------
 */

/* Ended instances pin nothing, so v1 is unloaded and deleted once v2 is
 * the newest.  A restart from the top is a new run, on v2; a restart
 * from a step replays the journal's v1 steps, so it needs v1: refused
 * while v1 cannot be had, saying so; run on v1 once its file is back in
 * the build store. */
START_TEST(restart_after_unload) {
  host H;
  char h1[17], h2[17], was[17], body[1024], line[128];
  start_v1(&H, "host.log", h1);
  create(&H, "pinned", "top", SHORT);
  create(&H, "pinned", "step", SHORT);
  json_decref(settle(&H, "pinned", "top", "complete"));
  json_decref(settle(&H, "pinned", "step", "complete"));
  deploy(&H, DEPLOY_V2, 1, h2, was);
  snprintf(line, sizeof line, "build %s unloaded: no instance needs it", h1);
  host_wait_lines(&H.run, line, 1, proc_now_ms() + UNLOAD_MS);
  int64_t seen = proc_now_ms();
  while (store_has(&H, h1) && proc_now_ms() < seen + 1000)
    proc_sleep_ms(10);
  ck_assert_msg(!store_has(&H, h1), "build %s still in the store", h1);

  long st = restart(&H, "pinned", "top", NULL, body, sizeof body);
  ck_assert_msg(st == 200, "restart from the top: %ld %s", st, body);
  json_t *d = settle(&H, "pinned", "top", "complete");
  assert_ran(d, "v2", h2, h2);
  json_decref(d);

  st = restart(&H, "pinned", "step", "B", body, sizeof body);
  ck_assert_msg(st == 409, "restart from B without v1: %ld %s", st, body);
  assert_contains(body, "instance.cannot_restart");
  assert_contains(body, h1);
  assert_contains(body, "is not in the build store");
  assert_contains(body, "a restart from the top runs on the build a new "
                        "instance gets");
  d = host_describe(&H.run, "pinned", "step");
  ck_assert_str_eq(jstr(d, "status"), "complete");
  json_decref(d);

  /* v1 back in the store: the restart loads it and B runs on it. */
  char back[512];
  snprintf(back, sizeof back, "%s/%s.so", H.store, h1);
  put_file(back, DEPLOY_V1);
  st = restart(&H, "pinned", "step", "B", body, sizeof body);
  ck_assert_msg(st == 200, "restart from B with v1 back: %ld %s", st, body);
  d = settle(&H, "pinned", "step", "complete");
  assert_ran(d, "v1", h1, h1);
  json_decref(d);
  assert_new_runs_on(&H, "new", "v2", h2);
  assert_alive(&H);
  stop(&H);
}
END_TEST

/* An instance asleep on v1 across a restart whose store lost v1 pauses
 * with build.unavailable; the advice it gives works: v1's file put back
 * in the store and a resume, and it completes on v1. */
START_TEST(paused_build_advice) {
  host H;
  char h1[17], h2[17], was[17], want[256], back[512];
  start_v1(&H, "first.log", h1);
  create(&H, "pinned", "p", "{\"nap\":\"2 seconds\"}");
  json_decref(settle(&H, "pinned", "p", "waiting"));
  deploy(&H, DEPLOY_V2, 1, h2, was);
  stop(&H);
  snprintf(back, sizeof back, "%s/%s.so", H.store, h1);
  ck_assert_msg(unlink(back) == 0, "%s: %s", back, strerror(errno));
  start(&H, "second.log");
  json_t *d = settle(&H, "pinned", "p", "paused");
  ck_assert_str_eq(jstr(d, "error.name"), "build.unavailable");
  snprintf(want, sizeof want,
           "put its file back in the build store as %s.so and resume the "
           "instance",
           h1);
  assert_contains(jstr(d, "error.message"), want);
  json_decref(d);

  put_file(back, DEPLOY_V1);
  http_resp r;
  host_request(&H.run, &r, "PATCH", "/workflows/pinned/instances/p/status",
               "{\"status\":\"resume\"}");
  ck_assert_msg(r.status == 200, "resume: %ld %s", r.status,
                r.body ? r.body : "");
  http_resp_free(&r);
  d = settle(&H, "pinned", "p", "complete");
  assert_ran(d, "v1", h1, h1);
  json_decref(d);
  assert_alive(&H);
  stop(&H);
}
END_TEST

/* ---- 9. a slow load -------------------------------------------------------
 */

/* The pid of the first "<what>.<pid>" file in `dir`, 0 if none. */
static int first_mark(const char *dir, const char *what) {
  DIR *d = opendir(dir);
  ck_assert_msg(d != NULL, "%s: %s", dir, strerror(errno));
  struct dirent *e;
  int pid = 0;
  size_t n = strlen(what);
  while (!pid && (e = readdir(d)) != NULL)
    if (!strncmp(e->d_name, what, n) && e->d_name[n] == '.')
      pid = atoi(e->d_name + n + 1);
  closedir(d);
  return pid;
}

/* A build whose constructor sleeps 5 s (ctor_slow) is probed, then
 * opened, without the reloader's lock: GET /plugins, which takes it,
 * answers while the probe's constructor still sleeps (it waited for the
 * probe and the load, 10 s, and timed out). */
START_TEST(slow_load_leaves_the_lock) {
  host H;
  char h1[17], dir[400], src[512], end[512];
  snprintf(dir, sizeof dir, "%s/marks", proc_tmp_dir);
  ck_assert(mkdir(dir, 0700) == 0);
  start_v1_env(&H, "host.log", WORKFLOWS, "DURO_FIXTURE_SLOW_DIR", dir, NULL,
               h1);
  snprintf(src, sizeof src, "%s/libfixture_ctor_slow.so", FIXTURES_DIR);
  put_file(H.plugin, src);
  int64_t deadline = proc_now_ms() + 5000;
  int probe = 0;
  while (!(probe = first_mark(dir, "begin")) && proc_now_ms() < deadline)
    proc_sleep_ms(10);
  ck_assert_msg(probe, "no probe of the slow build began within 5 s");

  http_resp r;
  int got = host_request_try(&H.run, &r, "GET", "/plugins", NULL);
  ck_assert_msg(got == 0 && r.status == 200,
                "GET /plugins during the probe: no answer within %ld ms",
                (long)H.run.request_ms);
  http_resp_free(&r);
  snprintf(end, sizeof end, "%s/end.%d", dir, probe);
  ck_assert_msg(!file_exists(end),
                "GET /plugins answered only once the probe had loaded");

  host_wait_lines(&H.run, "is the newest", 1, proc_now_ms() + 20000);
  create(&H, "pinned", "slow", SHORT);
  json_t *d = settle(&H, "pinned", "slow", "complete");
  ck_assert_str_eq(jstr(d, "output.build"), "slow");
  json_decref(d);
  assert_alive(&H);
  stop(&H);
}
END_TEST

/* ---- the config file read again ----------------------------------------- */

/* The config of `h`: storage at `db`, the deploy plugin with WORKFLOWS
 * and `extra` (its triggers and queues sections, "" for none). */
static void write_config_with(const host *h, const char *db,
                              const char *workflows, const char *extra) {
  FILE *f = fopen(h->run.config, "w");
  ck_assert_msg(f != NULL, "%s: %s", h->run.config, strerror(errno));
  fprintf(f,
          "storage: { path: %s, synchronous: normal }\n"
          "http: { listen: \"127.0.0.1:0\" }\n"
          "engine: { workers: 2 }\n"
          "plugins:\n"
          "  - name: deploy\n"
          "    path: %s\n"
          "    workflows:\n"
          "%s%s",
          db, h->plugin, workflows, extra);
  ck_assert(fclose(f) == 0);
}

static void write_config(const host *h, const char *db, const char *extra) {
  write_config_with(h, db, WORKFLOWS, extra);
}

static void start_config(host *h, const char *log_name, const char *extra) {
  host_init(&h->run, "host");
  h->run.request_ms = 5000;
  snprintf(h->plugin, sizeof h->plugin, "%s/plugin.so", proc_tmp_dir);
  snprintf(h->store, sizeof h->store, "%s/var/builds", proc_tmp_dir);
  put_file(h->plugin, DEPLOY_V1);
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  write_config(h, db, extra);
  start(h, log_name);
}

/* A GET or POST answered 200, its body as JSON (caller owns). */
static json_t *ask(const host *h, const char *method, const char *path) {
  http_resp r;
  host_request(&h->run, &r, method, path,
               !strcmp(method, "POST") ? "{}" : NULL);
  ck_assert_msg(r.status == 200, "%s %s: %ld %s", method, path, r.status,
                r.body ? r.body : "");
  json_t *v = json_loads(r.body ? r.body : "", 0, NULL);
  ck_assert_msg(v != NULL, "%s %s: not JSON: %s", method, path, r.body);
  http_resp_free(&r);
  return v;
}

/* POST /plugins/reload (`duro reload`): the "config" part of the answer,
 * whose status must be `want`. */
static json_t *reload_config_as(const host *h, const char *want) {
  json_t *rep = ask(h, "POST", "/plugins/reload");
  json_t *c = json_incref(json_object_get(rep, "config"));
  char *text = jdump(rep);
  ck_assert_msg(c && !strcmp(jstr(c, "status"), want), "want the config %s: %s",
                want, text);
  free(text);
  json_decref(rep);
  return c;
}

/* Whether the JSON array of strings `list` has one containing `needle`. */
static int list_has(json_t *list, const char *needle) {
  size_t i;
  json_t *v;
  json_array_foreach(list, i,
                     v) if (strstr(json_string_value(v), needle)) return 1;
  return 0;
}

static size_t crons_listed(const host *h) {
  json_t *v = ask(h, "GET", "/crons");
  size_t n = json_array_size(v);
  json_decref(v);
  return n;
}

#define NIGHTLY                                                                \
  "    triggers:\n"                                                            \
  "      crons:\n"                                                             \
  "        - { schedule: \"0 3 * * *\", workflow: pinned, id: \"n-{date}\" "   \
  "}\n"
#define NIGHTLY_URL "/__scheduled?cron=0%203%20*%20*%20*"

/* A cron trigger added to the file exists after SIGHUP: listed, and it
 * fires (by hand: no minute to wait); it survives an engine crash;
 * removed by `duro reload`, it is gone. */
START_TEST(config_cron_added) {
  host H;
  start_config(&H, "cron.log", "");
  ck_assert_uint_eq(crons_listed(&H), 0);
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  write_config(&H, db, NIGHTLY);
  ck_assert_int_eq(kill(H.run.pid, SIGHUP), 0);
  host_wait_lines(&H.run,
                  "config reloaded: cron 0 3 * * * added (plugin deploy, "
                  "workflow pinned)",
                  1, proc_now_ms() + 5000);
  json_t *crons = ask(&H, "GET", "/crons");
  ck_assert_uint_eq(json_array_size(crons), 1);
  ck_assert_str_eq(jstr(json_array_get(crons, 0), "schedule"), "0 3 * * *");
  ck_assert_str_eq(jstr(json_array_get(crons, 0), "workflow"), "pinned");
  json_decref(crons);
  json_t *fired = ask(&H, "POST", NIGHTLY_URL);
  json_t *f0 = json_array_get(fired, 0);
  ck_assert_str_eq(jstr(f0, "state"), "complete");
  ck_assert_msg(!strncmp(jstr(f0, "instance"), "n-", 2), "instance %s",
                jstr(f0, "instance"));
  json_t *d = host_describe(&H.run, "pinned", jstr(f0, "instance"));
  ck_assert_ptr_nonnull(d);
  json_decref(d);
  json_decref(fired);
  assert_alive(&H);

  /* An engine the supervisor starts again after a crash has it too (the
   * supervisor's config, read at start, does not). */
  ck_assert_int_eq(kill(H.run.engine, SIGKILL), 0);
  host_wait_lines(&H.run, "ready:", 2, proc_now_ms() + 20000);
  ck_assert_uint_eq(crons_listed(&H), 1);

  write_config(&H, db, "");
  json_t *c = reload_config_as(&H, "applied");
  ck_assert(list_has(jget(c, "changes"), "cron 0 3 * * * removed"));
  json_decref(c);
  ck_assert_uint_eq(crons_listed(&H), 0);
  c = reload_config_as(&H, "unchanged");
  json_decref(c);
  stop(&H);
}
END_TEST

#define JOBS(batch, retries)                                                   \
  "    queues:\n"                                                              \
  "      consumers:\n"                                                         \
  "        - { queue: jobs, workflow: pinned, id_from: /id, "                  \
  "max_batch_size: " batch ", max_retries: " retries " }\n"

/* A consumer's settings changed in the file take effect at `duro reload`:
 * the answer names each, GET /queues shows them. */
START_TEST(config_consumer_settings) {
  host H;
  start_config(&H, "queue.log", JOBS("100", "3"));
  json_t *q = ask(&H, "GET", "/queues/jobs");
  ck_assert_int_eq(json_integer_value(jget(q, "consumer.max_batch_size")), 100);
  json_decref(q);
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  write_config(&H, db, JOBS("10", "5"));
  json_t *c = reload_config_as(&H, "applied");
  char *text = jdump(c);
  ck_assert_msg(
      list_has(jget(c, "changes"), "queue jobs: max_batch_size: 100 -> 10") &&
          list_has(jget(c, "changes"), "queue jobs: max_retries: 3 -> 5"),
      "%s", text);
  free(text);
  json_decref(c);
  q = ask(&H, "GET", "/queues/jobs");
  ck_assert_int_eq(json_integer_value(jget(q, "consumer.max_batch_size")), 10);
  ck_assert_int_eq(json_integer_value(jget(q, "max_retries")), 5);
  json_decref(q);
  /* and the consumer still turns a message into an instance */
  http_resp r;
  host_request(&H.run, &r, "POST", "/queues/jobs/messages",
               "{\"body\":{\"id\":\"job-1\",\"nap\":\"10 ms\"}}");
  ck_assert_msg(r.status / 100 == 2, "send: %ld %s", r.status, r.body);
  http_resp_free(&r);
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (long st = 0; st != 200;) { /* the scheduler's next pass creates it */
    ck_assert_msg(proc_now_ms() < deadline, "no instance job-1");
    proc_sleep_ms(20);
    host_request(&H.run, &r, "GET", "/workflows/pinned/instances/job-1", NULL);
    st = r.status;
    http_resp_free(&r);
  }
  json_decref(settle(&H, "pinned", "job-1", "complete"));
  assert_alive(&H);
  stop(&H);
}
END_TEST

/* WORKFLOWS with `pinned` at limits.steps 2 and a retention of a day. */
#define LIMITED                                                                \
  "      - name: pinned\n"                                                     \
  "        binding: PINNED\n"                                                  \
  "        class_name: Flow\n"                                                 \
  "        retention: 1d\n"                                                    \
  "        limits: { steps: 2 }\n"                                             \
  "      - { name: latest, binding: LATEST, class_name: Flow, versioning: "    \
  "latest }\n"                                                                 \
  "      - { name: latestp, binding: LATESTP, class_name: Flow, versioning: "  \
  "latest, on_divergence: pause }\n"

/* A workflow's limits.steps and retention change at a reload: an instance
 * created after it stops at the new limit. */
START_TEST(config_limits_live) {
  host H;
  start_config(&H, "limits.log", "");
  create(&H, "pinned", "before", SHORT);
  json_decref(settle(&H, "pinned", "before", "complete"));
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  write_config_with(&H, db, LIMITED, "");
  json_t *c = reload_config_as(&H, "applied");
  char *text = jdump(c);
  ck_assert_msg(
      list_has(jget(c, "changes"),
               "workflow pinned: limits.steps: 10000 -> 2") &&
          list_has(jget(c, "changes"), "workflow pinned: retention: 30d -> 1d"),
      "%s", text);
  free(text);
  json_decref(c);
  create(&H, "pinned", "after", SHORT);
  json_t *d = settle(&H, "pinned", "after", "errored");
  text = jdump(d);
  ck_assert_msg(strstr(text, "limit of 2 steps"), "%s", proc_tail(text));
  free(text);
  json_decref(d);
  assert_alive(&H);
  stop(&H);
}
END_TEST

/* A plugin's path moved to another directory by a reload: the build
 * there is loaded (the same bytes: unchanged), and a deploy to the new
 * path is seen by the watch, which followed it. */
START_TEST(config_plugin_path_moves) {
  host H;
  start_config(&H, "path.log", "");
  char dir[400];
  snprintf(dir, sizeof dir, "%s/moved", proc_tmp_dir);
  ck_assert_int_eq(mkdir(dir, 0755), 0);
  snprintf(H.plugin, sizeof H.plugin, "%s/moved/plugin.so", proc_tmp_dir);
  put_file(H.plugin, DEPLOY_V1);
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  write_config(&H, db, "");
  json_t *rep = ask(&H, "POST", "/plugins/reload");
  char *text = jdump(rep);
  ck_assert_msg(!strcmp(jstr(rep, "config.status"), "applied") &&
                    list_has(jget(rep, "config.changes"), "/moved/plugin.so"),
                "%s", text);
  free(text);
  json_decref(rep);
  proc_sleep_ms(QUIET_MS); /* the loop has moved the watch */
  int64_t t0 = proc_now_ms();
  put_file_renamed(H.plugin, DEPLOY_V2);
  host_wait_lines(&H.run, "is the newest", 1, t0 + NEWEST_MS);
  char h2[17], was[17];
  newest_line(&H, 0, h2, was);
  assert_new_runs_on(&H, "n1", "v2", h2);
  assert_alive(&H);
  stop(&H);
}
END_TEST

/* A change that needs a restart refuses the whole file, naming it: the
 * trigger added beside it is not applied, the host runs on, and `duro
 * reload` exits 1. */
START_TEST(config_restart_refused) {
  host H;
  start_config(&H, "restart.log", "");
  char db[400];
  snprintf(db, sizeof db, "%s/var/other.db", proc_tmp_dir);
  write_config(&H, db, NIGHTLY);
  json_t *c = reload_config_as(&H, "refused");
  char *text = jdump(c);
  ck_assert_msg(list_has(jget(c, "restart"), "storage.path: ") &&
                    list_has(jget(c, "restart"), "other.db") &&
                    strstr(jstr(c, "error"), "restart"),
                "%s", text);
  free(text);
  json_decref(c);
  ck_assert_uint_eq(crons_listed(&H), 0);
  /* `duro reload` says so too */
  char url[64], out[512];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", H.run.port);
  snprintf(out, sizeof out, "%s/cli.out", proc_tmp_dir);
  const char *argv[] = {DURO_BIN, "reload", "--url", url, NULL};
  pid_t cli = proc_spawn(argv, NULL, out, out);
  /* and exits 1: a deploy script sees the refusal */
  ck_assert_int_eq(proc_wait_exit(cli, proc_now_ms() + 10000), 1);
  char *said = proc_slurp(out);
  assert_contains(said, "refused: 1 change(s) need a restart");
  assert_contains(said, "  needs a restart: storage.path: ");
  assert_contains(said, "duro: reload refused: the config ");
  free(said);
  ck_assert_int_eq(kill(H.run.pid, SIGHUP), 0);
  host_wait_lines(&H.run, "these changes need a restart: storage.path", 1,
                  proc_now_ms() + 5000);
  create(&H, "pinned", "still", SHORT);
  json_decref(settle(&H, "pinned", "still", "complete"));
  assert_alive(&H);
  stop(&H);
}
END_TEST

/* A file that does not parse is refused with file:line:column; the
 * running config stays. */
START_TEST(config_broken_refused) {
  host H;
  start_config(&H, "broken.log", NIGHTLY);
  char *text = proc_slurp(H.run.config);
  int line = 1; /* of the line appended */
  for (const char *p = text; *p; p++)
    line += *p == '\n';
  free(text);
  FILE *f = fopen(H.run.config, "a");
  ck_assert_ptr_nonnull(f);
  fputs("    bogus_key: 1\n", f);
  ck_assert(fclose(f) == 0);
  json_t *c = reload_config_as(&H, "refused");
  char where[512];
  snprintf(where, sizeof where, "%s:%d:5: ", H.run.config, line);
  ck_assert_msg(strstr(jstr(c, "error"), where), "want %s in %s", where,
                jstr(c, "error"));
  json_decref(c);
  ck_assert_uint_eq(crons_listed(&H), 1);
  assert_alive(&H);
  stop(&H);
}
END_TEST

static Suite *reload_suite(void) {
  Suite *s = suite_create("reload");
  TCase *tc = tcase_create("reload");
  proc_fixtures(tc, "duro-reload");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, deploy_in_place, 0, 2);
  tcase_add_test(tc, deploy_by_rename);
  tcase_add_test(tc, sighup_reloads);
  tcase_add_test(tc, pinned_across_restart);
  tcase_add_loop_test(tc, broken_build_refused, 0,
                      (int)(sizeof broken / sizeof *broken));
  tcase_add_test(tc, divergence_under_latest);
  suite_add_tcase(s, tc);
  /* Builds that instances need again after their workflow let them go. */
  TCase *again = tcase_create("builds");
  proc_fixtures(again, "duro-reload");
  tcase_set_timeout(again, 60);
  tcase_add_test(again, retire_per_plugin);
  tcase_add_test(again, restart_after_unload);
  tcase_add_test(again, paused_build_advice);
  suite_add_tcase(s, again);
  TCase *slow = tcase_create("slow");
  proc_fixtures(slow, "duro-reload");
  tcase_set_timeout(slow, 60);
  tcase_add_test(slow, slow_load_leaves_the_lock);
  suite_add_tcase(s, slow);
  /* The config file read again at a reload. */
  TCase *conf = tcase_create("config");
  proc_fixtures(conf, "duro-reload");
  tcase_set_timeout(conf, 60);
  tcase_add_test(conf, config_cron_added);
  tcase_add_test(conf, config_consumer_settings);
  tcase_add_test(conf, config_limits_live);
  tcase_add_test(conf, config_plugin_path_moves);
  tcase_add_test(conf, config_restart_refused);
  tcase_add_test(conf, config_broken_refused);
  suite_add_tcase(s, conf);
  return s;
}

int main(void) { return http_suite_run(reload_suite()); }
