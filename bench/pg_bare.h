/* pg_bare.h — one bare PostgreSQL commit of one row: what a client pays
 * for a durable write before any engine, the reference a PostgreSQL
 * journal's step latency is compared with.  duro-bench-pg (pg_commit.c)
 * reports it alone; duro-bench's W2 on PostgreSQL beside its steps, so
 * both measure it the same way. */
#ifndef DURO_BENCH_PG_BARE_H
#define DURO_BENCH_PG_BARE_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

/* Connects to `conninfo` and makes the table bench_commit (id bigint
 * primary key, result text) and the prepared statement "insert" of one
 * row.  NULL (nothing left open) with the reason in `err`; otherwise the
 * caller PQfinish()es the connection. */
PGconn *pg_bare_open(const char *conninfo, char *err, size_t n);

/* One commit of row `id`: BEGIN, INSERT (prepared), COMMIT, three round
 * trips, as a client that decides between statements does.  0 or -1. */
int pg_bare_commit(PGconn *conn, long id);

/* One commit of row `id` as "BEGIN; INSERT ...; COMMIT" in one
 * simple-query message: one round trip, the floor.  0 or -1. */
int pg_bare_commit_one_msg(PGconn *conn, long id);

/* Times `n` calls of `commit` after `warmup` untimed ones, rows from
 * `*next_id` on: each one's duration in µs into `us` (n of them).  0, or
 * -1 when a commit failed (its error on stderr). */
int pg_bare_time(PGconn *conn, int (*commit)(PGconn *, long), size_t warmup,
                 size_t n, long *next_id, int64_t *us);

#endif
