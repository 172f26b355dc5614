/* host_run.h — a real `duro run` (a supervisor and the engine process it
 * forks) started on a plugin of the suite's own and watched from outside.
 *
 * The suites that run such a host with plugins that crash it or are
 * deployed over it (test_faults, test_reload) start DURO_BIN in the case's
 * own directory (proc_tmp_dir, tests/proc.h) on a generated config, read
 * what it did from the one file its stdout and stderr go to, and talk to
 * it over HTTP (tests/http_client.h).  This module holds what they share:
 *
 *  - the host: host_init() names its config and log, host_setenv() adds a
 *    variable to its environment, host_write_config() writes a config of
 *    one plugin on an HTTP port the kernel picks;
 *  - its processes: host_spawn() runs `duro VERB CONFIG`, host_start()
 *    `duro run` up to its "ready" line, host_stop() stops it with SIGTERM
 *    and checks the exit, the engine's end and the sanitizer reports;
 *    host_running(), host_pid_gone() and host_wait_gone() tell whether a
 *    process is still there;
 *  - its log: the pids of the supervisor's "engine started (pid N)" lines
 *    (host_engine_pids(), host_last_engine()), the lines holding a text
 *    (host_lines_with(), host_count_lines(), host_wait_lines()), sanitizer
 *    reports (host_assert_no_report()) and assert_contains();
 *  - HTTP: a request with the host's timeout (host_request_try(),
 *    host_request()), an instance's description (host_describe()) and a
 *    wait for its status (host_wait_status()).
 *
 * Every process started runs with ASan's and UBSan's SIGSEGV, SIGBUS and
 * SIGABRT handlers off: the suites' plugins crash an engine or a load probe
 * on purpose, and in a sanitizer build that would otherwise become a
 * report and an exit(1) instead of a death by the signal the suites look
 * for.
 *
 * Failures are Check assertions: the helpers are called from test cases. */
#ifndef DURO_TEST_HOST_RUN_H
#define DURO_TEST_HOST_RUN_H

#include <check.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "http_client.h"
#include "proc.h"

/* Fails unless the text `hay` holds `needle`, showing the end of `hay`. */
#define assert_contains(hay, needle)                                           \
  ck_assert_msg(strstr((hay), (needle)) != NULL, "expected \"%s\" in:\n%s",    \
                (needle), proc_tail(hay))

typedef struct host_run {
  pid_t pid;       /* the supervisor, once started */
  pid_t engine;    /* the engine that served host_start()'s "ready" line */
  int port;        /* the engine's HTTP port */
  long request_ms; /* a request's timeout; 0: http_client.h's */
  /* Whether the engine may restart under the case: then a description
   * that gets no answer is none (host_describe() returns NULL) instead of
   * a failure, and host_wait_status() polls on. */
  int restarts;
  char config[400];
  char log[400]; /* the host's stdout and stderr, one file */
  char env_asan[1024], env_ubsan[1024], env_extra[460];
  /* More keys of the plugin's entry, one line ("workers: 0"), or NULL. */
  const char *plugin_keys;
  /* More top-level sections of the config, YAML lines ("log: {...}\n"),
   * or NULL. */
  const char *sections;
} host_run;

/* Clears `h` and names its files in proc_tmp_dir: the config NAME.yaml,
 * the log NAME.log. */
void host_init(host_run *h, const char *name);

/* Adds NAME=value to the environment of the processes `h` starts (one
 * variable; a later call replaces it), in place of any NAME of ours. */
void host_setenv(host_run *h, const char *name, const char *value);

/* Writes the config of `h`: storage `db` (synchronous: normal), HTTP on
 * 127.0.0.1 port 0, `engine` as the engine mapping ("{ workers: 2 }") and
 * one plugin `plugin` at `path` whose workflows are the YAML list items
 * `workflows` (lines indented by 6). */
void host_write_config(const host_run *h, const char *db, const char *engine,
                       const char *plugin, const char *path,
                       const char *workflows);

/* `duro VERB CONFIG` with the config of `h` in proc_tmp_dir, its output
 * in the log of `h` (truncated).  Returns the pid; the caller sets
 * proc_live when the child may outlive a failed assertion. */
pid_t host_spawn(host_run *h, const char *verb);

/* `duro run` (host_spawn()) up to its "ready: ... http on port N" line,
 * within 20 s: sets pid (also as proc_live), port and engine. */
void host_start(host_run *h);

/* `duro workflows ARGS... --url http://127.0.0.1:PORT` against the
 * engine of `h` (`args` NULL-terminated), to its exit within 20 s: its
 * exit code, with its stdout and stderr (one text) in *out (malloc'ed). */
int host_cli(const host_run *h, const char *const *args, char **out);
/* The same for any verb: `duro ARGS... --url ...` ("plugins", "resume",
 * NAME). */
int host_cli_verb(const host_run *h, const char *const *args, char **out);

/* Non-zero while `pid`, our child, has not exited; one that has is
 * reaped. */
int host_running(pid_t pid);

/* Non-zero once `pid` (not our child) is gone: no such process, or a
 * zombie waiting for whoever adopted it. */
int host_pid_gone(pid_t pid);

/* Waits up to `ms` for host_pid_gone(pid); returns it. */
int host_wait_gone(pid_t pid, int ms);

/* SIGTERM to the supervisor: it must exit 0 by `deadline`, its last
 * engine must be gone within 2 s and no sanitizer report appear in the
 * log but those of engines that died before the last one started (when
 * `excuse_dead`). */
void host_stop(host_run *h, int64_t deadline, int excuse_dead);

/* The pids of the "engine started (pid N)" lines of `log` in order, at
 * most `max`; returns how many.  host_stop() excuses at most
 * HOST_MAX_ENGINES of them. */
#define HOST_MAX_ENGINES 4096
size_t host_engine_pids(const char *log, pid_t *pids, size_t max);

/* The pid of the last engine started (the last such line, however many
 * there are), waiting for its line; fails when none shows within 5 s. */
pid_t host_last_engine(const host_run *h);

/* A live worker process of `engine` (a child that runs `duro __worker
 * ...`; a load probe, `duro __load`, is none), or 0. */
pid_t host_worker_of(pid_t engine);
/* Up to `max` of them into pids: how many. */
size_t host_workers_of(pid_t engine, pid_t *pids, size_t max);

/* The lines of `log` that contain `needle`, copied into one malloc'ed
 * text (caller frees); *count gets how many. */
char *host_lines_with(const char *log, const char *needle, int *count);

/* How many lines of the log of `h` hold `needle`. */
int host_count_lines(const host_run *h, const char *needle);

/* GET /plugins' builds of plugin `name` (a new reference); the case fails
 * when there is no such plugin. */
json_t *host_plugin_builds(const host_run *h, const char *name);

/* Waits until `count` lines of the log hold `needle`, by `deadline`. */
void host_wait_lines(const host_run *h, const char *needle, int count,
                     int64_t deadline);

/* Fails on a sanitizer report in `log` other than one of the processes in
 * `excused` (engines crashed on purpose).  ASan and LSan head their
 * reports "==PID==ERROR:" / "==PID==WARNING:"; UBSan's "runtime error:"
 * names no process and is never excused. */
void host_assert_no_report(const char *log, const pid_t *excused,
                           size_t n_excused);

/* METHOD path with `body` (NULL: none), timing out after request_ms.
 * Returns 0, or -1 when no answer came (refused, reset, timed out). */
int host_request_try(const host_run *h, http_resp *r, const char *method,
                     const char *path, const char *body);

/* The same, failing when no answer came. */
void host_request(const host_run *h, http_resp *r, const char *method,
                  const char *path, const char *body);

/* The description of instance `id` of workflow `wf`, which must answer
 * 200 (caller's); NULL when no answer came and the host `restarts`. */
json_t *host_describe(const host_run *h, const char *wf, const char *id);

/* Polls the instance until its status is `want` or one that ends it
 * (complete, errored, terminated), by `deadline`; it must be `want`.
 * Returns the last description (caller's). */
json_t *host_wait_status(const host_run *h, const char *wf, const char *id,
                         const char *want, int64_t deadline);

#endif
