/* pg_cluster.h — a throwaway PostgreSQL server for tests and benchmarks.
 *
 * pg_cluster_start() makes a fresh directory "$TMPDIR/duro-pg-XXXXXX"
 * (TMPDIR unset or empty: /tmp) and runs tests/pg/cluster.sh (its path is
 * PG_CLUSTER_SH, given at build time) to initdb and start a server there,
 * listening only on a Unix socket in that directory, with fsync and
 * synchronous_commit on and a database `duro`; it returns the script's
 * libpq connection string.  pg_cluster_stop() stops the server and removes
 * the directory; pg_cluster_kill() and pg_cluster_restart() take the
 * server away and bring it back in between, as a crash and a restart of
 * a database server would.
 *
 * The server is not a child of the caller: it outlives a caller that dies
 * without pg_cluster_stop() (a Check case that fails in fork mode), so
 * suites start and stop clusters where a failure cannot skip the stop (an
 * unchecked fixture, run by Check's runner process), or stop them before
 * asserting.  Nothing here uses Check: the benchmark links it too. */
#ifndef DURO_TEST_PG_CLUSTER_H
#define DURO_TEST_PG_CLUSTER_H

#include <stddef.h>
#include <sys/types.h>

typedef struct pg_cluster {
  char dir[256];      /* the cluster's directory; "" when none */
  char conninfo[512]; /* for PQconnectdb: host=DIR port dbname user password */
  pid_t postmaster;   /* the server's main process; -1 when none */
} pg_cluster;

/* Starts a cluster in a new directory and fills `c`.  Returns 0, or -1 with
 * what went wrong in `err` (the script's own message when it said one, e.g.
 * that the packages are missing); then nothing is left running. */
int pg_cluster_start(pg_cluster *c, char *err, size_t n);

/* Stops the server at once (no checkpoint) and removes its directory;
 * returns when the server and all its processes have exited.  Returns 0,
 * or -1 with the reason in `err`.  Safe on a stopped `c`. */
int pg_cluster_stop(pg_cluster *c, char *err, size_t n);

/* Stops the server at once, as a crash of it would (`cluster.sh kill`):
 * its clients are cut off and connections refused, and its directory and
 * data are kept for pg_cluster_restart().  Returns once every server
 * process has exited: 0, or -1 with the reason in `err`. */
int pg_cluster_kill(pg_cluster *c, char *err, size_t n);

/* Starts a killed cluster again on its data (crash recovery), on the same
 * socket: the same connection string works again.  Returns once it
 * accepts connections: 0, or -1 with the reason in `err`. */
int pg_cluster_restart(pg_cluster *c, char *err, size_t n);

/* Starts a streaming standby of the running cluster `primary` in a new
 * directory (or in c->dir when it is set: one pg_cluster_stop emptied,
 * so that a connection string naming it still does), made the primary's
 * synchronous one (a commit on the primary
 * is acknowledged once the standby has it), and fills `c`: its conninfo
 * names both servers, the writable one wanted
 * (target_session_attrs=read-write), as a client of a pair that fails
 * over has it.  0, or -1 with why in `err` (nothing left running). */
int pg_cluster_standby(const pg_cluster *primary, pg_cluster *c, char *err,
                       size_t n);

/* The standby `c` becomes a primary (pg_ctl promote); returns once it
 * is one: 0, or -1 with why in `err`. */
int pg_cluster_promote(pg_cluster *c, char *err, size_t n);

/* Runs `cluster.sh VERB DIR` itself (for the script's own tests): its
 * stdout into `out`, its stderr into `err` (trailing newlines dropped).
 * Returns its exit status, or -1 when it could not run or hung. */
int pg_cluster_script(const char *verb, const char *dir, char *out,
                      size_t out_n, char *err, size_t err_n);

/* The live processes of the server whose main process is `postmaster`:
 * that one and its children, each a running `postgres` (exited ones not
 * yet reaped do not count).  Writes at most `max` pids to `out` (may be
 * NULL with max 0) and returns how many there are. */
size_t pg_cluster_processes(pid_t postmaster, pid_t *out, size_t max);

/* 1 when `pid` is a running `postgres` process (not a zombie), else 0. */
int pg_process_alive(pid_t pid);

#endif
