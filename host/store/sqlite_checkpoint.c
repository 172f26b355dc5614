/* sqlite_checkpoint.c — the write-ahead log copied back into the database
 * by a thread of its own, not by the thread that commits.
 *
 * SQLite's automatic checkpoint runs inside the COMMIT that takes the log
 * past 1000 pages: that group's callers wait while ~1 MB of pages is read
 * from the log, written to the database and fsync'd.  Here the writer's
 * WAL hook only signals; the checkpointer, on its own connection, runs a
 * PASSIVE checkpoint (it never blocks the writer or a reader) while the
 * next groups commit.  Should the log outgrow CKPT_HARD_PAGES (the
 * checkpointer cannot finish while commits keep appending, or a reader
 * holds an old snapshot), the writer checkpoints inline as SQLite would,
 * so the log stays bounded. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "sqlite_internal.h"

/* Pages of log (1 KiB each in a journal duro created) past which the
 * checkpointer is woken, and past which the writer checkpoints itself. */
#define CKPT_PAGES 1000
#define CKPT_HARD_PAGES 65536

struct sqlite_checkpointer {
  sqlite3 *db; /* the checkpointer's own connection */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int wanted; /* the log passed CKPT_PAGES since the last checkpoint */
  int stop;
};

static void *checkpoint_loop(void *arg) {
  sqlite_checkpointer *c = arg;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (!c->wanted && !c->stop)
      pthread_cond_wait(&c->cv, &c->mu);
    if (c->stop)
      break;
    c->wanted = 0;
    pthread_mutex_unlock(&c->mu);
    int s = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE,
                                      NULL, NULL);
    if (s != SQLITE_OK && s != SQLITE_BUSY)
      log_warn("journal: checkpoint: %s", sqlite3_errmsg(c->db));
    pthread_mutex_lock(&c->mu);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

/* The writer's hook after each commit: pages is the log's length. */
static int wal_committed(void *arg, sqlite3 *wr, const char *name, int pages) {
  sqlite_checkpointer *c = arg;
  if (pages >= CKPT_HARD_PAGES) {
    sqlite3_wal_checkpoint_v2(wr, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK;
  }
  if (pages >= CKPT_PAGES) {
    pthread_mutex_lock(&c->mu);
    if (!c->wanted) {
      c->wanted = 1;
      pthread_cond_signal(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
  }
  return SQLITE_OK;
}

sqlite_checkpointer *sqlite_checkpointer_start(sqlite3 *wr, const char *path,
                                               int synchronous_full) {
  char err[256];
  sqlite3 *db;
  if (sqlite_open_conn(path, synchronous_full, &db, err, sizeof err) != 0) {
    log_warn("journal: %s; the writer checkpoints", err);
    return NULL; /* SQLite's automatic checkpoint stays */
  }
  sqlite_checkpointer *c = xcalloc(1, sizeof *c);
  c->db = db;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  if (pthread_create(&c->thread, NULL, checkpoint_loop, c) != 0) {
    log_warn("journal: no checkpoint thread; the writer checkpoints");
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    sqlite3_close(db);
    free(c);
    return NULL;
  }
  sqlite3_wal_hook(wr, wal_committed, c); /* replaces the automatic one */
  return c;
}

void sqlite_checkpointer_stop(sqlite_checkpointer *c, sqlite3 *wr) {
  if (!c)
    return;
  sqlite3_wal_hook(wr, NULL, NULL);
  pthread_mutex_lock(&c->mu);
  c->stop = 1;
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
  pthread_join(c->thread, NULL);
  sqlite3_close(c->db);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c);
}
