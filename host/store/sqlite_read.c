/* sqlite_read.c — the SQLite backend's readers: a pool of connections,
 * each with its prepared statements cached, that every read takes one of
 * and gives back (the read itself: rd_open in sqlite_internal.h). */
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>

#include "sqlite_internal.h"

/* A reader for one read, from the pool: an idle one, or a new one when
 * every reader is busy.  Readers belong to the pool, not to threads, so a
 * thread that reads once and ends (a consumer's batch, a cron handler's
 * tick) leaves nothing open behind it; the pool holds as many as reads
 * ever ran at once.  Every read gives its reader back (sqlite_reader_give). */
reader *sqlite_reader_take(sqlite_store *sq) {
  pthread_mutex_lock(&sq->readers_mu);
  reader *r = sq->idle;
  if (r)
    sq->idle = r->next_idle;
  pthread_mutex_unlock(&sq->readers_mu);
  if (r)
    return r;
  r = xcalloc(1, sizeof *r);
  char err[256];
  if (sqlite_open_conn(sq->path, sq->synchronous_full, &r->db, err,
                       sizeof err) != 0) {
    store_error("%s", err);
    /* A deleted file, a broken disk, no descriptors left: this read
     * fails with a storage error, and the next one tries again. */
    free(r);
    return NULL;
  }
  /* A reader looks at one instance at a time: a small page cache keeps
   * the many readers (workers, HTTP pool) from holding megabytes each. */
  sqlite3_exec(r->db, "PRAGMA cache_size=-256", NULL, NULL, NULL);
  pthread_mutex_lock(&sq->readers_mu);
  r->next = sq->readers;
  sq->readers = r;
  pthread_mutex_unlock(&sq->readers_mu);
  return r;
}

/* Ends a read: its reader goes back to the pool; returns rc. */
int sqlite_reader_give(sqlite_store *sq, reader *r, int rc) {
  if (!r)
    return rc;
  pthread_mutex_lock(&sq->readers_mu);
  r->next_idle = sq->idle;
  sq->idle = r;
  pthread_mutex_unlock(&sq->readers_mu);
  return rc;
}

/* The cached statement for `sql` (a literal), prepared on first use. */
int sqlite_prepare_rd(reader *r, const char *sql, sqlite3_stmt **st) {
  *st = NULL;
  if (!r)
    return DURO_E_STORAGE; /* sqlite_reader_take said why */
  for (size_t i = 0; i < r->n; i++)
    if (r->cache[i].sql == sql) {
      *st = r->cache[i].st;
      return 0;
    }
  if (sqlite3_prepare_v3(r->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) !=
      SQLITE_OK) {
    sqlite_set_err(r->db, NULL);
    *st = NULL;
    return DURO_E_STORAGE;
  }
  if (r->n < READER_CACHE) {
    r->cache[r->n].sql = sql;
    r->cache[r->n].st = *st;
    r->n++;
  }
  return 0;
}

/* Ends a read: cached statements are reset, others finalized. */
void sqlite_release_rd(reader *r, sqlite3_stmt *st) {
  if (!r || !st)
    return;
  for (size_t i = 0; i < r->n; i++)
    if (r->cache[i].st == st) {
      sqlite3_reset(st);
      sqlite3_clear_bindings(st);
      return;
    }
  sqlite3_finalize(st);
}

/* The end of a row loop: SQLITE_DONE is the only success; anything else
 * (an I/O error, a corrupt page) is a storage error, never "no more
 * rows". */
int sqlite_rows_end(reader *r, int s) {
  if (s == SQLITE_DONE)
    return 0;
  sqlite_set_err(r->db, NULL);
  return DURO_E_STORAGE;
}
