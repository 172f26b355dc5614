/* pg.c — the PostgreSQL backend of the journal (libpq): the store opened
 * (its schema created or checked, the writer's statements prepared) and
 * closed, and the backend's table (store_pg), whose members give the
 * same results as SQLite's.  The schema, the writes of every JOP_* op,
 * the reads, the builds the hosts share and the copy in are in pg_*.c
 * (pg_internal.h).
 *
 * The journal's "path" is a libpq connection string.  Connections:
 * `wr` is used only by the thread that leads a group commit (begin, apply
 * and commit run on it, in one BEGIN ... COMMIT); a thread that reads
 * takes a connection from a small pool and gives it back (pg_conn.c), so
 * reads wait for each other only when all are busy.  Each connection prepares
 * its statements once (PQprepare) and runs them by name; the writer sends a
 * group's in libpq's pipeline mode (pg_pipe.c).  Reads run in autocommit (READ
 * COMMITTED), so a read started after a commit returned sees it.
 * synchronous_full 1 is synchronous_commit=on (COMMIT returns once the WAL is
 * flushed), 0 is synchronous_commit=off (a crash of the server may lose the
 * last groups, never tear one), -1 a read-only session.
 *
 * Connections and errors are pg_conn.c's, the hosts sharing a database
 * pg_hosts.c's. */
#include <libpq-fe.h>
#include <pthread.h>
#include <stdlib.h>

#include "pg_internal.h"

/* After a failed connect at open: STORE_UNREACHABLE when it may succeed
 * later by itself, DURO_E_STORAGE when the server refused us for good.
 * PQping asks the server's state without logging in: no answer (no server
 * on the socket or port yet) and "not accepting connections" (starting
 * up, in recovery, shutting down) are the server being away.  A server
 * that answers normally refused our login (a wrong password, an unknown
 * user or database), unless it came up between the two calls: one more
 * connect tells; when it succeeds, *c is that connection and 0 returns. */
static int open_failed(const char *conninfo, int synchronous_full, PGconn **c,
                       char *err, size_t errlen) {
  switch (PQping(conninfo)) {
  case PQPING_NO_RESPONSE:
  case PQPING_REJECT:
    return STORE_UNREACHABLE;
  case PQPING_NO_ATTEMPT: /* a connection string libpq cannot use */
    return DURO_E_STORAGE;
  case PQPING_OK:
    break;
  }
  *c = pg_connect(conninfo, synchronous_full, err, errlen);
  return *c ? 0 : DURO_E_STORAGE;
}

static int pg_open(const char *conninfo, int synchronous_full, void **out,
                   char *err, size_t errlen) {
  PGconn *c = pg_connect(conninfo, synchronous_full, err, errlen);
  int rc;
  if (!c && (rc = open_failed(conninfo, synchronous_full, &c, err, errlen)))
    return rc;
  if ((synchronous_full >= 0 && pg_schema_create(c, err, errlen)) ||
      pg_schema_check(c, err, errlen) || pg_prepare_writes(c, err, errlen)) {
    PQfinish(c);
    return DURO_E_STORAGE;
  }
  pg_store *pg = xcalloc(1, sizeof *pg);
  pg->wr = c;
  pg->conninfo = xstrdup(conninfo);
  pg->synchronous_full = synchronous_full;
  pthread_mutex_init(&pg->readers_mu, NULL);
  pthread_cond_init(&pg->readers_cv, NULL);
  pthread_mutex_init(&pg->lease_mu, NULL);
  pthread_cond_init(&pg->lease_cv, NULL);
  pthread_mutex_init(&pg->slots_mu, NULL);
  *out = pg;
  return 0;
}

static void pg_close(void *db) {
  pg_store *pg = db;
  pg_host_leave(pg);
  pg_slots_close(pg);
  PQfinish(pg->wr);
  for (reader *r = pg->readers, *next; r; r = next) {
    next = r->next;
    PQfinish(r->conn);
    free(r);
  }
  pthread_mutex_destroy(&pg->readers_mu);
  pthread_cond_destroy(&pg->readers_cv);
  pthread_mutex_destroy(&pg->lease_mu);
  pthread_cond_destroy(&pg->lease_cv);
  free(pg->conninfo);
  free(pg);
}

const store_backend store_pg = {
    .open = pg_open,
    .close = pg_close,
    .begin = pg_begin,
    .apply = pg_apply,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .instance_get = pg_instance_get,
    .instance_get_rowid = pg_instance_get_rowid,
    .claim_holder = pg_claim_holder,
    .steps_load = pg_steps_load,
    .attempts_each = pg_attempts_each,
    .events_pending = pg_events_pending,
    .events_all = pg_events_all,
    .logs_read = pg_logs_read,
    .values_each = pg_values_each,
    .due = pg_due,
    .next_wake = pg_next_wake,
    .recover_each = pg_recover_each,
    .queued_from = pg_queued_from,
    .live_each = pg_live_each,
    .children_each = pg_children_each,
    .orphans_each = pg_orphans_each,
    .bulk_get = pg_bulk_get,
    .bulk_list = pg_bulk_list,
    .oldest_queued = pg_oldest_queued,
    .build_pinned = pg_build_pinned,
    .pinned_builds = pg_pinned_builds,
    .waiting_on = pg_waiting_on,
    .list = pg_list,
    .attributes = pg_attributes,
    .last_steps = pg_last_steps,
    .count_by_status = pg_count_by_status,
    .queue_stats_each = pg_queue_stats_each,
    .queue_ready = pg_queue_ready,
    .queue_leases = pg_queue_leases,
    .queue_peek = pg_queue_peek,
    .queue_held = pg_queue_held,
    .queue_counts_each = pg_queue_counts_each,
    .cron_state = pg_cron_state,
    .cron_ticks = pg_cron_ticks,
    .pipeline_get = pg_pipeline_get,
    .pipeline_sends = pg_pipeline_sends,
    .table_count = pg_table_count,
    .table_import = pg_table_import,
    .key_continue = pg_key_continue,
    .join = pg_join,
    .takeover = pg_takeover,
    .adopt = pg_adopt,
    .notify = pg_notify,
    .lease_held = pg_lease_held,
    .hosts_each = pg_hosts_each,
    .hosts_idle = pg_hosts_idle,
    .hand_off = pg_hand_off,
    .renew_soon = pg_renew_soon,
    .slots_pass = pg_slots_pass,
    .rates_take = pg_rates_take,
    .claim_take = pg_claim_take,
    .claim_merge = pg_claim_merge,
    .claim_release = pg_claim_release,
    .lease_until = pg_lease_until,
    .quiet = pg_quiet,
    .build_put = pg_build_put,
    .build_get = pg_build_get,
    .builds_prune = pg_builds_prune,
};
