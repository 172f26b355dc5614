/* sqlite.c — the SQLite backend of the journal: its connections opened
 * (with their pragmas) and closed, the files they opened checked, and the
 * backend's table (store_sqlite).  The schema, the writes and the reads
 * are in sqlite_*.c (sqlite_internal.h).
 *
 * Connections to one WAL-mode file: `wr` is used only by the thread that
 * currently leads a group commit (journal.c runs begin, apply and commit
 * on it); every read takes a reader connection of a pool (with its
 * prepared statements cached) and gives it back, so reads on different
 * workers never wait for each other, and a thread that ends leaves no
 * connection behind.  WAL lets reads proceed
 * while a group commits, and a read started after a commit returns sees
 * it.  With synchronous=FULL, COMMIT returns after the fsync.  The log
 * is checkpointed by a thread of its own (sqlite_checkpoint.c). */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "sqlite_internal.h"

/* Why `db` failed, for journal_errmsg. */
void sqlite_set_err(sqlite3 *db, const char *what) {
  store_error("%s%s%s", what ? what : "", what ? ": " : "",
              db ? sqlite3_errmsg(db) : "no connection");
}

/* synchronous_full < 0: a read-only connection (a dry run beside a running
 * host), which sets nothing. */
int sqlite_open_conn(const char *path, int synchronous_full, sqlite3 **out,
                     char *err, size_t errlen) {
  sqlite3 *db = NULL;
  int flags = synchronous_full < 0 ? SQLITE_OPEN_READONLY
                                   : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "%s: cannot open database: %s", path,
             db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return DURO_E_STORAGE;
  }
  sqlite3_busy_timeout(db, 10000);
  if (synchronous_full < 0) {
    *out = db;
    return 0;
  }
  /* 1 KiB pages (for a new file; an existing one keeps its own): a step's
   * commit appends about two pages to the WAL and fsyncs them, and with
   * 4 KiB pages that fsync cost ~50% more than a bare one-row commit on
   * the development machine; with 1 KiB pages, 5-15% (bench W2). */
  char sql[200];
  snprintf(sql, sizeof sql,
           "PRAGMA page_size=1024; PRAGMA journal_mode=WAL;"
           "PRAGMA synchronous=%s; PRAGMA foreign_keys=OFF;",
           synchronous_full ? "FULL" : "NORMAL");
  char *msg = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    snprintf(err, errlen, "%s: %s", path, msg ? msg : "pragma failed");
    sqlite3_free(msg);
    sqlite3_close(db);
    return DURO_E_STORAGE;
  }
  *out = db;
  return 0;
}

/* Whether path+suffix is no longer the file `id` names: deleted, or
 * another file renamed over it.  A file not seen yet is learned (the
 * write-ahead log appears with the first write). */
static int file_gone(const char *path, const char *suffix, file_id *id) {
  char name[4096];
  snprintf(name, sizeof name, "%s%s", path, suffix);
  struct stat st;
  if (stat(name, &st) != 0)
    return id->known;
  if (!id->known) {
    *id = (file_id){st.st_dev, st.st_ino, 1};
    return 0;
  }
  return st.st_dev != id->dev || st.st_ino != id->ino;
}

/* The files the connections have open are still the ones at the path.
 * Deleted (or replaced), they still take writes, which a restart would
 * never find: every acknowledged write since would be lost. */
int sqlite_check(void *db) {
  sqlite_store *sq = db;
  if (sq->synchronous_full < 0)
    return 0; /* a read-only look writes nothing */
  const char *gone = file_gone(sq->path, "", &sq->file)      ? ""
                     : file_gone(sq->path, "-wal", &sq->wal) ? "-wal"
                                                             : NULL;
  if (!gone)
    return 0;
  store_error("%s%s was deleted or replaced while the host ran: writes "
              "are refused until it restarts",
              sq->path, gone);
  return DURO_E_STORAGE;
}

static int sqlite_open(const char *path, int synchronous_full, void **out,
                       char *err, size_t errlen) {
  sqlite_store *sq = xcalloc(1, sizeof *sq);
  int rc = sqlite_open_conn(path, synchronous_full, &sq->wr, err, errlen);
  if (rc)
    goto fail;
  char *msg = NULL;
  if (synchronous_full < 0)
    goto statements; /* read-only: the schema is as the host left it */
  if ((rc = sqlite_schema_setup(sq->wr, path, err, errlen)) != 0)
    goto fail;
statements:
  sq->counted = sqlite_counts_kept(sq->wr);
  /* The sweep's scratch table lives in the connection's temp database,
   * writable even on a read-only connection. */
  if (sqlite3_exec(sq->wr,
                   "CREATE TEMP TABLE IF NOT EXISTS sweep(id INTEGER "
                   "PRIMARY KEY)",
                   NULL, NULL, &msg) != SQLITE_OK) {
    rc = sqlite_exec_failed(err, errlen, path, NULL, msg);
    goto fail;
  }
  for (int i = 0; i < ST_WRITE_COUNT_; i++) {
    if (sqlite3_prepare_v3(sq->wr, sqlite_write_sql[i], -1,
                           SQLITE_PREPARE_PERSISTENT, &sq->ws[i],
                           NULL) != SQLITE_OK) {
      snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(sq->wr));
      rc = DURO_E_STORAGE;
      goto fail;
    }
  }
  sq->path = xstrdup(path);
  sq->synchronous_full = synchronous_full;
  file_gone(path, "", &sq->file);
  file_gone(path, "-wal", &sq->wal);
  pthread_mutex_init(&sq->readers_mu, NULL);
  if (synchronous_full >= 0)
    sq->ckpt = sqlite_checkpointer_start(sq->wr, path, synchronous_full);
  *out = sq;
  return 0;

fail:
  for (int i = 0; i < ST_WRITE_COUNT_; i++)
    sqlite3_finalize(sq->ws[i]);
  sqlite3_close(sq->wr);
  free(sq);
  return rc;
}

static void sqlite_close(void *db) {
  sqlite_store *sq = db;
  sqlite_checkpointer_stop(sq->ckpt, sq->wr);
  for (int i = 0; i < ST_WRITE_COUNT_; i++)
    sqlite3_finalize(sq->ws[i]);
  sqlite3_close(sq->wr);
  for (reader *r = sq->readers, *next; r; r = next) {
    next = r->next;
    for (size_t i = 0; i < r->n; i++)
      sqlite3_finalize(r->cache[i].st);
    sqlite3_close(r->db);
    free(r);
  }
  pthread_mutex_destroy(&sq->readers_mu);
  free(sq->path);
  free(sq);
}

const store_backend store_sqlite = {
    .open = sqlite_open,
    .close = sqlite_close,
    .begin = sqlite_begin,
    .apply = sqlite_apply,
    .commit = sqlite_commit,
    .rollback = sqlite_rollback,
    .check = sqlite_check,
    .instance_get = sqlite_instance_get,
    .instance_get_rowid = sqlite_instance_get_rowid,
    .steps_load = sqlite_steps_load,
    .attempts_each = sqlite_attempts_each,
    .events_pending = sqlite_events_pending,
    .events_all = sqlite_events_all,
    .logs_read = sqlite_logs_read,
    .values_each = sqlite_values_each,
    .due = sqlite_due,
    .next_wake = sqlite_next_wake,
    .recover_each = sqlite_recover_each,
    .queued_from = sqlite_queued_from,
    .live_each = sqlite_live_each,
    .children_each = sqlite_children_each,
    .orphans_each = sqlite_orphans_each,
    .bulk_get = sqlite_bulk_get,
    .bulk_list = sqlite_bulk_list,
    .oldest_queued = sqlite_oldest_queued,
    .build_pinned = sqlite_build_pinned,
    .pinned_builds = sqlite_pinned_builds,
    .waiting_on = sqlite_waiting_on,
    .list = sqlite_list,
    .attributes = sqlite_attributes,
    .last_steps = sqlite_last_steps,
    .count_by_status = sqlite_count_by_status,
    .queue_stats_each = sqlite_queue_stats_each,
    .queue_ready = sqlite_queue_ready,
    .queue_held = sqlite_queue_held,
    .queue_leases = sqlite_queue_leases,
    .queue_peek = sqlite_queue_peek,
    .queue_counts_each = sqlite_queue_counts_each,
    .cron_state = sqlite_cron_state,
    .cron_ticks = sqlite_cron_ticks,
    .pipeline_get = sqlite_pipeline_get,
    .pipeline_sends = sqlite_pipeline_sends,
    .schema_version = sqlite_schema_version,
    .table_count = sqlite_table_count,
    .table_export = sqlite_table_export,
};
