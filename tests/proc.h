/* proc.h — running and observing child processes, and their temp dirs.
 *
 * The suites that test the real `duro` binary (test_host, test_http,
 * test_cli) start it with fork/exec in a temporary directory of the case's
 * own, capture its stdout and stderr (to files or pipes), wait for it with
 * a deadline, kill it on every way out and look in its output for the
 * "ready ... http on port N" line and for sanitizer reports.  This module
 * holds what they share:
 *
 *  - the directories: proc_fixtures() gives a TCase a base directory made
 *    and removed by the runner process (so it goes even when a forked case
 *    fails without its teardown) and each case a directory of its own
 *    inside it, proc_tmp_dir, where children run; the case's teardown
 *    SIGKILLs proc_live, the started child not yet reaped;
 *  - the children: proc_env() builds an environment before fork,
 *    proc_spawn() / proc_spawn_fd() fork and exec (the child only dups,
 *    chdirs into proc_tmp_dir and execs, and asks for SIGKILL when its
 *    parent dies), proc_wait_exit() reaps with a deadline,
 *    proc_wait_port() reads the port from a host's log, proc_stop() stops
 *    a host with SIGTERM and asserts a clean exit;
 *  - their output: proc_slurp(), proc_tail(), proc_sanitizer_report();
 *  - what a stopped child leaves: proc_remove_db().
 *
 * Failures are Check assertions: the helpers are called from test cases. */
#ifndef DURO_TEST_PROC_H
#define DURO_TEST_PROC_H

#include <check.h>
#include <stdint.h>
#include <sys/types.h>

/* The case's directory, inside the TCase's base directory ("" outside a
 * case).  Children run here, so relative paths in a config land here. */
extern char proc_tmp_dir[320];

/* A started child not yet reaped (-1: none); the case's teardown SIGKILLs
 * and reaps it.  Set it after a spawn whose child may outlive a failed
 * assertion; proc_wait_exit() clears it when it reaps that child. */
extern pid_t proc_live;

/* Adds the fixtures to `tc`: an unchecked one making and removing the
 * base directory "$TMPDIR/NAME-XXXXXX" (TMPDIR unset or empty: /tmp), a
 * checked one making proc_tmp_dir in it and, after the case, killing
 * proc_live and removing proc_tmp_dir.  `name` must outlive the run. */
void proc_fixtures(TCase *tc, const char *name);

/* The monotonic clock in ms, for deadlines. */
int64_t proc_now_ms(void);
void proc_sleep_ms(int ms);

/* The environment of a child, built before fork: ours without the
 * variables named in `drop` (NULL-terminated, may be NULL), plus `add`
 * ("NAME=value", may be NULL).  The array is malloc'ed (free it), the
 * strings borrowed. */
char **proc_env(const char *const *drop, const char *add);

/* fork + exec of argv[0] with `argv` and `envp` (NULL: ours) in
 * proc_tmp_dir, with its stdout on `out_fd` and its stderr on `err_fd`
 * (the caller closes its copies).  Returns the pid. */
pid_t proc_spawn_fd(const char *const *argv, char **envp, int out_fd,
                    int err_fd);

/* proc_spawn_fd() with stdout and stderr going to the files `out` and
 * `err` (the same path: one file), created or truncated. */
pid_t proc_spawn(const char *const *argv, char **envp, const char *out,
                 const char *err);

/* Waits for `pid` to exit, SIGKILLing it past `deadline` (then returns
 * -1).  Otherwise its exit code, 128 + signal when killed. */
int proc_wait_exit(pid_t pid, int64_t deadline);

/* Reads the file `log_path` (a `duro run`'s output) until the line
 * "ready: ... http on port N" and returns N.  Fails when the child exits
 * first or says nothing by `deadline` (then SIGKILLs it). */
int proc_wait_port(pid_t pid, const char *log_path, int64_t deadline);

/* SIGTERM to a host; it must exit 0 by `deadline` with no sanitizer
 * report in the file `log_path` (printed in full to stderr when not).
 * Returns the log's text (free it). */
char *proc_stop(pid_t pid, const char *log_path, int64_t deadline);

/* The whole text file, malloc'ed and NUL-terminated ("" if absent). */
char *proc_slurp(const char *path);

/* The last 1200 bytes of a text: Check refuses longer failure messages. */
const char *proc_tail(const char *s);

/* The mark of a sanitizer (ASan, LSan, UBSan) report in a child's output,
 * or NULL. */
const char *proc_sanitizer_report(const char *log);

/* Removes a SQLite database: `db`, `db`-wal and `db`-shm. */
void proc_remove_db(const char *db);

#endif
