/* chaos_pg.h — what `make chaos-pg` (tests/chaos.c with CHAOS_PG=1) needs
 * of PostgreSQL: a throwaway cluster for the run (tests/pg_cluster.h) and
 * the checks of the `hosts` and `instances` tables that stand in for
 * SQLite's `PRAGMA integrity_check`.  Kept apart so that chaos.c builds
 * without libpq. */
#ifndef DURO_TEST_CHAOS_PG_H
#define DURO_TEST_CHAOS_PG_H

#include <stddef.h>

/* Starts the run's cluster; its connection string into `conninfo`.
 * Returns 0, or -1 with the reason in `err`.  chaos_pg_stop() is safe to
 * call at any time after (an atexit handler), also more than once. */
int chaos_pg_start(char *conninfo, size_t n, char *err, size_t err_n);
void chaos_pg_stop(void);

/* While hosts come and go: no unended instance is owned by a host id
 * that has no `hosts` row (a dead host's row goes only once it owns no
 * unended instance).  1 when that holds, else 0 with what was found in
 * `why`. */
int chaos_pg_owners_known(const char *conninfo, char *why, size_t n);

/* Once every instance has ended and `live` hosts run: within `wait_ms`
 * (the dead ones' leases running out) exactly `live` hosts are not dead,
 * no dead host's row is left, and no unended instance is owned by
 * anything but a live host.  1 when that holds, else 0 with `why`. */
int chaos_pg_settled(const char *conninfo, int live, int wait_ms, char *why,
                     size_t n);

/* After every host stopped cleanly: none is left alive. */
int chaos_pg_none_alive(const char *conninfo, char *why, size_t n);

/* The `hosts` table and every instance's owner and status, as text, into
 * `path` (the evidence of a failed run: the cluster goes with the run). */
void chaos_pg_dump(const char *conninfo, const char *path);

#endif
