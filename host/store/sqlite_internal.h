/* sqlite_internal.h — what the files of the SQLite backend share: the
 * writer's statements, the store's handle and its readers, binding and
 * reading columns, one read on a reader of the pool, and the calls one
 * file makes in another.  Private to store/ (backend.h is the public
 * face: store_sqlite).
 *
 *   sqlite.c                 the connections opened and closed, the files
 *                            checked; the backend's table
 *   sqlite_schema.c          the schema, its upgrades, the instance counts
 *   sqlite_write.c           the writer's statements, the group's
 *                            transaction, each op to its kind's function
 *   sqlite_write_instance.c  the ops on an instance, its steps and events,
 *                            and the retention sweep
 *   sqlite_write_queue.c     the ops on queue messages
 *   sqlite_write_cron.c      the ops on cron triggers and their ticks
 *   sqlite_read.c            the pool of readers and their statements
 *   sqlite_read_instance.c   an instance, its steps, attempts and events
 *   sqlite_read_sched.c      the reads across instances: due, wakes,
 *                            recovery, queued, the listing, counts, pins
 *   sqlite_read_queue.c      the queues' messages and counts
 *   sqlite_read_cron.c       a trigger's state and ticks
 *   sqlite_copy.c            copying the journal out (migrate.c)
 *   sqlite_checkpoint.c      the log copied back by a thread of its own
 *
 * Invariant: these (sqlite*.c, through this header) are the only files
 * of the host that include sqlite3.h. */
#ifndef DURO_SQLITE_INTERNAL_H
#define DURO_SQLITE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend.h"
#include "duro.h"
#include "journal.h"
#include "util.h"

enum {
  ST_INSTANCE_INSERT,
  ST_INSTANCE_SET,
  ST_INSTANCE_CONTROL,
  ST_INSTANCE_CONTROL_CLEAR,
  ST_STEP_PUT,
  ST_STEPS_DISCARD,
  ST_STEPS_CANCEL,
  ST_INSTANCE_RESTARTED,
  ST_ATTEMPTS_DISCARD,
  ST_STEPS_SHIFT_WAKE,
  ST_ATTEMPT_PUT,
  ST_EVENT_INSERT,
  ST_EVENT_CONSUME,
  ST_WAKE_IF_WAITING,
  ST_WAKE_IF_EVENT_PENDING,
  ST_INSTANCE_PIN,
  ST_INSTANCE_RESCHEDULE,
  ST_INSTANCE_RETAIN,
  ST_SWEEP_PICK,
  ST_SWEEP_STEPS,
  ST_SWEEP_ATTEMPTS,
  ST_SWEEP_EVENTS,
  ST_SWEEP_LOGS,
  ST_SWEEP_ATTRIBUTES, /* before the instances: STEPS..CLEAR run in order */
  ST_SWEEP_INSTANCES,
  ST_SWEEP_CLEAR,
  ST_DELETE_INSTANCE,
  ST_DELETE_STEPS,
  ST_DELETE_ATTEMPTS,
  ST_DELETE_EVENTS,
  ST_DELETE_LOGS,
  ST_DELETE_ATTRIBUTES, /* ST_DELETE_STEPS..ATTRIBUTES run in order */
  ST_ATTRIBUTE_SET,
  ST_ATTRIBUTES_CLEAR_BY_ID,
  ST_ATTRIBUTE_SET_BY_ID,
  ST_LOG_APPEND,
  ST_LOG_TRIM,
  ST_MESSAGE_INSERT,
  ST_MESSAGE_PICK,
  ST_MESSAGE_KEY_POINTER,
  ST_MESSAGE_KEY_POINTER_SET,
  ST_MESSAGE_KEYS_CLEAR,
  ST_MESSAGE_KEY_AHEAD,
  ST_MESSAGE_KEY_PICK,
  ST_MESSAGE_KEY_FILL,
  ST_MESSAGE_LEASE,
  ST_MESSAGE_ACK,
  ST_MESSAGE_HELD,
  ST_MESSAGES_DROPPED,
  ST_MESSAGE_MOVE,
  ST_MESSAGE_DELETE,
  ST_MESSAGES_EXPIRE,
  ST_CRON_SINCE,
  ST_CRON_TICK,
  ST_CRON_TICK_SET,
  ST_CRON_MISSED_EXTRA,
  ST_CRON_COUNT,
  ST_CRON_SWEEP,
  ST_PIPELINE_DECLARE,
  ST_PIPELINE_NEXT,
  ST_PIPELINE_RECORD,
  ST_PIPELINE_PLAN,
  ST_PIPELINE_CLAIM,
  ST_PIPELINE_DONE,
  ST_PIPELINE_DELETE,
  ST_BULK_INSERT,
  ST_BULK_PROGRESS,
  ST_BULK_CANCEL,
  ST_BULK_CLAIM,
  ST_BULK_SWEEP,
  /* JOP_VALUE_RESEAL's, one per journal_field in its order
   * (sqlite_values.c) */
  ST_RESEAL_PARAMS,
  ST_RESEAL_OUTPUT,
  ST_RESEAL_ERROR,
  ST_RESEAL_STEP_RESULT,
  ST_RESEAL_STEP_ERROR,
  ST_RESEAL_ATTEMPT_ERROR,
  ST_RESEAL_EVENT,
  ST_RESEAL_LOG,
  ST_RESEAL_MESSAGE,
  ST_RESEAL_MESSAGE_ERROR,
  ST_BEGIN,
  ST_COMMIT,
  ST_ROLLBACK,
  ST_WRITE_COUNT_
};

/* A keyed consumer's walk (queue_keys.h), the lease's on the writer and
 * the held count's on a reader.  ?3 says whether the stored keys are
 * the consumer's pointer's (the lease makes them so; a read may find
 * them another's): when not, every key is NULL, to be computed from the
 * body, which is read only then.
 *
 * KEY_AHEAD: the messages that hold their key's place without being
 * visible (?1 queue, ?2 now: seq, sent_ms, key, body, leased).
 * KEY_PICK: the visible ones oldest sent first (seq, attempts, body,
 * sent_ms, last_error, traceparent, key), but those of the keys in the
 * JSON array ?4 (queue_keys_full), which messages_age (queue, sent_ms,
 * seq, key) passes over without reading their rows, in the sent order,
 * so that a walk stops where the batch is full. */
#define SQLITE_SQL_KEY_AHEAD                                                   \
  "SELECT seq,sent_ms,CASE WHEN ?3 THEN key END,CASE WHEN ?3 AND key IS NOT "  \
  "NULL THEN NULL ELSE body END,lease IS NOT NULL FROM messages WHERE "        \
  "queue=?1 AND visible_ms>?2 AND (lease IS NOT NULL OR attempts>0)"
#define SQLITE_SQL_KEY_PICK                                                    \
  "SELECT seq,attempts,body,sent_ms,last_error,traceparent,CASE WHEN ?3 "      \
  "THEN key END FROM messages INDEXED BY messages_age WHERE queue=?1 AND "     \
  "(key IS NULL OR key NOT IN (SELECT value FROM json_each(?4))) AND "         \
  "visible_ms<=?2 ORDER BY sent_ms,seq"

/* sqlite_write.c: each statement's SQL, prepared once by sqlite_open. */
extern const char *const sqlite_write_sql[ST_WRITE_COUNT_];

/* A read connection and its cached statements, keyed by the address of
 * their SQL text (always a string literal here). */
#define READER_CACHE 24
typedef struct reader {
  sqlite3 *db;
  struct {
    const char *sql;
    sqlite3_stmt *st;
  } cache[READER_CACHE];
  size_t n;
  struct reader *next; /* every reader, in `readers` */
  struct reader *next_idle;
} reader;

/* Which file a path named (st_dev, st_ino), to find it deleted or
 * replaced later. */
typedef struct file_id {
  dev_t dev;
  ino_t ino;
  int known;
} file_id;

typedef struct sqlite_checkpointer sqlite_checkpointer;

/* The backend's handle: the writer connection with its prepared
 * statements, the pool of readers, and the files they opened. */
typedef struct sqlite_store {
  sqlite3 *wr;
  sqlite3_stmt *ws[ST_WRITE_COUNT_];
  char *path;
  int synchronous_full;
  file_id file, wal;          /* the database and its write-ahead log */
  int counted;                /* instance_counts is kept (counts_setup) */
  pthread_mutex_t readers_mu; /* guards `readers` and `idle` */
  reader *readers;            /* every reader, closed with the store */
  reader *idle;               /* those no read holds, the last freed first */
  sqlite_checkpointer *ckpt;  /* NULL: the writer checkpoints (read-only) */
} sqlite_store;

/* ---- columns bound and read ---- */

static inline void bind_text(sqlite3_stmt *st, int i, const char *s) {
  if (s)
    sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, i);
}

static inline void bind_ms(sqlite3_stmt *st, int i, int64_t v) {
  if (v == JOURNAL_NONE)
    sqlite3_bind_null(st, i);
  else
    sqlite3_bind_int64(st, i, v);
}

static inline char *col_text(sqlite3_stmt *st, int i) {
  const unsigned char *t = sqlite3_column_text(st, i);
  return t ? xstrdup((const char *)t) : NULL;
}

/* The enums of status.h from their stored names (-1, "unknown", for a
 * name that is none of them). */
static inline const char *col_name(sqlite3_stmt *st, int i) {
  return (const char *)sqlite3_column_text(st, i);
}

static inline duro_status col_status(sqlite3_stmt *st, int i) {
  return (duro_status)duro_status_parse(col_name(st, i));
}

static inline int64_t col_ms(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL
             ? JOURNAL_NONE
             : sqlite3_column_int64(st, i);
}

/* ---- sqlite_read.c: the readers' pool ---- */

/* A reader for one read (NULL, the error recorded, when none could be
 * opened); every read gives it back with sqlite_reader_give, which
 * returns rc. */
reader *sqlite_reader_take(sqlite_store *sq);
int sqlite_reader_give(sqlite_store *sq, reader *r, int rc);
/* The reader's cached statement for `sql` (a literal), prepared on first
 * use; sqlite_release_rd ends its use. */
int sqlite_prepare_rd(reader *r, const char *sql, sqlite3_stmt **st);
void sqlite_release_rd(reader *r, sqlite3_stmt *st);
/* The end of a row loop: 0 at SQLITE_DONE, else a storage error. */
int sqlite_rows_end(reader *r, int s);

/* ---- one read ---- */

/* One read on a reader of the pool, the shape of every read (sqlite_read_*.c)
 * but queue_ready's: rd_open takes a reader and prepares `sql` (a literal;
 * the caller binds q->st), rd_row steps to the next row (1 while there is
 * one), rd_close ends the read and returns `rc`, or the storage error that
 * ended its rows.  A read that stopped at a row it wanted no more is
 * whole. */
typedef struct rd {
  sqlite_store *sq;
  reader *r;
  sqlite3_stmt *st;
  int s; /* what the last sqlite3_step said */
} rd;

static inline int rd_open(rd *q, void *db, const char *sql) {
  q->sq = db;
  q->r = sqlite_reader_take(db);
  q->s = SQLITE_DONE;
  return sqlite_prepare_rd(q->r, sql, &q->st);
}

static inline int rd_row(rd *q) {
  return (q->s = sqlite3_step(q->st)) == SQLITE_ROW;
}

static inline int rd_close(rd *q, int rc) {
  if (rc == 0 && q->s != SQLITE_ROW)
    rc = sqlite_rows_end(q->r, q->s);
  sqlite_release_rd(q->r, q->st);
  return sqlite_reader_give(q->sq, q->r, rc);
}

/* ---- sqlite.c ---- */

/* Why `db` failed, for journal_errmsg. */
void sqlite_set_err(sqlite3 *db, const char *what);
/* A connection to path (synchronous_full < 0: read-only), with its
 * pragmas; why it failed in err. */
int sqlite_open_conn(const char *path, int synchronous_full, sqlite3 **out,
                     char *err, size_t errlen);

/* ---- sqlite_checkpoint.c ---- */

/* A thread that checkpoints path's log whenever wr's commits have grown
 * it (NULL, the writer checkpointing as SQLite does, when it cannot
 * start); stopped before wr is closed. */
sqlite_checkpointer *sqlite_checkpointer_start(sqlite3 *wr, const char *path,
                                               int synchronous_full);
void sqlite_checkpointer_stop(sqlite_checkpointer *c, sqlite3 *wr);

/* ---- sqlite_schema.c ---- */

/* The schema created where missing and upgraded, and the instance counts
 * added: 0, or DURO_E_STORAGE with why in err. */
int sqlite_schema_setup(sqlite3 *db, const char *path, char *err,
                        size_t errlen);
/* Whether the file keeps instance_counts. */
int sqlite_counts_kept(sqlite3 *db);
/* A failed sqlite3_exec of the opening's into err (frees msg). */
int sqlite_exec_failed(char *err, size_t errlen, const char *path,
                       const char *what, char *msg);

/* ---- sqlite_write.c ---- */

/* Steps a writer's statement once and resets it: 0, or DURO_E_STORAGE
 * with the error recorded. */
int sqlite_step_done(sqlite_store *sq, sqlite3_stmt *st);
/* sqlite_step_done, then how many rows the statement changed into
 * out_rowid. */
int sqlite_step_changes(sqlite_store *sq, sqlite3_stmt *st, journal_op *op);

/* ---- sqlite_write_*.c: the ops, by kind (sqlite_apply names them) ---- */

/* sqlite_values.c: the values encrypted at rest, scanned and rewritten */
int sqlite_values_each(void *db, int which, int64_t after, size_t limit,
                       const char *skip, journal_value_fn fn, void *ctx,
                       int64_t *last);
int sqlite_value_reseal(sqlite_store *sq, journal_op *op);

int sqlite_instance_insert(sqlite_store *sq, journal_op *op);
int sqlite_instance_set(sqlite_store *sq, journal_op *op);
int sqlite_instance_mark(sqlite_store *sq, journal_op *op);
int sqlite_step_put(sqlite_store *sq, journal_op *op);
int sqlite_steps_change(sqlite_store *sq, journal_op *op);
int sqlite_event_apply(sqlite_store *sq, journal_op *op);
int sqlite_sweep(sqlite_store *sq, journal_op *op);
int sqlite_attribute_set(sqlite_store *sq, int64_t rowid, const duro_attr *a);
int sqlite_attributes(void *db, int64_t rowid,
                      void (*fn)(void *ctx, const duro_attr *a), void *ctx);
int sqlite_last_steps(void *db, const int64_t *rowids, size_t n,
                      void (*fn)(void *ctx, const journal_last_step *s),
                      void *ctx);
int sqlite_instance_delete(sqlite_store *sq, journal_op *op);
int sqlite_message_apply(sqlite_store *sq, journal_op *op);
int sqlite_message_lease(sqlite_store *sq, journal_op *op);
/* Feeds `keys` the rows of SQLITE_SQL_KEY_AHEAD prepared as `st` (bound
 * here: the queue, now, whether the stored keys are current): a keyed
 * lease's, and the held count's.  The last sqlite3_step code
 * (SQLITE_DONE when whole). */
struct queue_keys;
int sqlite_keys_ahead(sqlite3_stmt *st, const char *queue, int64_t now_ms,
                      int current, struct queue_keys *keys);
int sqlite_message_retry(sqlite_store *sq, journal_op *op);
int sqlite_cron_apply(sqlite_store *sq, journal_op *op);
int sqlite_pipeline_apply(sqlite_store *sq, journal_op *op);
int sqlite_log_apply(sqlite_store *sq, journal_op *op);
int sqlite_bulk_apply(sqlite_store *sq, journal_op *op);
int sqlite_bulk_get(void *db, int64_t id, journal_bulk *out);
int sqlite_bulk_list(void *db, const char *workflow, int running, size_t limit,
                     void (*fn)(void *ctx, const journal_bulk *b), void *ctx);
int sqlite_logs_read(void *db, int64_t rowid, int64_t after, size_t limit,
                     journal_log **out, size_t *n);

/* ---- the backend's members (backend.h), by file ---- */

/* sqlite.c */
int sqlite_check(void *db);
/* sqlite_write.c */
int sqlite_apply(void *db, journal_op *op);
int sqlite_begin(void *db);
int sqlite_commit(void *db);
void sqlite_rollback(void *db);
/* sqlite_read_instance.c */
int sqlite_instance_get(void *db, const char *workflow, const char *id,
                        journal_instance *out);
int sqlite_instance_get_rowid(void *db, int64_t rowid, journal_instance *out);
int sqlite_steps_load(void *db, int64_t rowid, journal_step **out, size_t *n);
int sqlite_attempts_each(void *db, int64_t rowid,
                         void (*fn)(void *ctx, const char *key, uint32_t number,
                                    int64_t started_ms, int64_t ended_ms,
                                    const char *error, const char *build),
                         void *ctx);
int sqlite_events_pending(void *db, int64_t rowid, journal_event **out,
                          size_t *n);
int sqlite_events_all(void *db, int64_t rowid, journal_event **out, size_t *n);
/* sqlite_read_sched.c */
int sqlite_due(void *db, int64_t after_ms, int64_t upto_ms, size_t limit,
               int64_t *rowids, int64_t *wakes, size_t *n);
int sqlite_next_wake(void *db, int64_t after_ms, int64_t *wake);
int sqlite_live_each(void *db, const char *workflow, journal_live_fn fn,
                     void *ctx);
int sqlite_children_each(void *db, int64_t parent,
                         void (*fn)(void *ctx, int64_t rowid,
                                    const char *workflow, const char *id,
                                    duro_status status),
                         void *ctx);
int sqlite_orphans_each(void *db, size_t limit,
                        void (*fn)(void *ctx, int64_t rowid,
                                   const char *workflow, const char *id,
                                   int parent_close),
                        void *ctx);
int sqlite_recover_each(void *db,
                        void (*fn)(void *ctx, int64_t rowid, duro_status status,
                                   int control),
                        void *ctx);
int sqlite_queued_from(void *db, int64_t from, size_t limit, int64_t *rowids,
                       size_t *n);
int sqlite_oldest_queued(void *db, const char *workflow, int64_t *created_ms);
int sqlite_list(void *db, const char *workflow, const journal_list_filter *f,
                int64_t cursor, size_t limit,
                void (*fn)(void *ctx, const journal_list_row *row), void *ctx);
int sqlite_count_by_status(void *db,
                           void (*fn)(void *ctx, const char *workflow,
                                      duro_status status, int64_t n),
                           void *ctx);
int sqlite_build_pinned(void *db, const char *workflow, const char *build,
                        int *pinned);
int sqlite_waiting_on(void *db, const char *wait_type,
                      void (*fn)(void *ctx, int64_t rowid,
                                 const char *workflow),
                      void *ctx);
int sqlite_pinned_builds(void *db,
                         void (*fn)(void *ctx, const char *workflow,
                                    const char *build, int64_t n),
                         void *ctx);
/* sqlite_read_queue.c */
int sqlite_queue_stats_each(void *db, const char *queue, int64_t now_ms,
                            void (*fn)(void *ctx, const char *queue,
                                       const journal_queue_stats *st),
                            void *ctx);
int sqlite_queue_ready(void *db, const char *queue, int64_t now_ms,
                       uint32_t limit, journal_queue_ready_info *out);
int sqlite_queue_leases(void *db, const char *queue, int64_t now_ms,
                        const char *token,
                        void (*fn)(void *ctx, const char *lease), void *ctx);
int sqlite_queue_peek(void *db, const char *queue, int64_t now_ms, size_t limit,
                      journal_message **out, size_t *n);
int sqlite_queue_held(void *db, const char *queue, int64_t now_ms,
                      const char *pointer, uint32_t limit,
                      const struct journal_crypt *crypt, int64_t *held);
int sqlite_queue_counts_each(void *db,
                             void (*fn)(void *ctx, const char *queue,
                                        int64_t dropped, int64_t dead_lettered),
                             void *ctx);
/* sqlite_read_cron.c */
int sqlite_cron_state(void *db, const char *trigger, journal_cron *out);
int sqlite_cron_ticks(void *db, const char *trigger, const char *state,
                      size_t limit,
                      void (*fn)(void *ctx, const journal_cron_tick *t),
                      void *ctx);
/* sqlite_read_pipeline.c */
int sqlite_pipeline_get(void *db, const char *pipeline, journal_pipeline *out);
int sqlite_pipeline_sends(void *db, const char *pipeline, int64_t from_seq,
                          int64_t to_seq, size_t limit, int with_body,
                          int (*fn)(void *ctx, const journal_pipeline_send *s),
                          void *ctx);
/* sqlite_copy.c */
int sqlite_schema_version(const char *path, char *version, size_t n, char *err,
                          size_t errlen);
int sqlite_table_count(void *db, const store_table *t, int64_t *n);
int sqlite_table_export(void *db, const store_table *t, int64_t *high,
                        store_row_fn put, void *put_ctx);

#endif
