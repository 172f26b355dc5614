/* pg_internal.h — what the files of the PostgreSQL backend share: a
 * statement's parameters and its results' columns (text format), the
 * writer's statements, the store's handle and its connections, and the
 * calls one file makes in another.
 *
 *   pg.c               the store opened and closed; the backend's table
 *   pg_schema.c        the schema, created or brought to this version
 *   pg_write.c         the writer's statements, the group's transaction,
 *                      each op to its kind's function
 *   pg_write_instance.c  the ops on an instance, its steps and events, and
 *                      the retention sweep
 *   pg_write_queue.c   the ops on queue messages
 *   pg_write_cron.c    the ops on cron triggers and their ticks
 *   pg_write_pipeline.c  the ops on pipelines and their records
 *   pg_read_instance.c an instance, its steps, attempts and events
 *   pg_read_sched.c    the reads across instances: due, wakes, recovery,
 *                      queued, pins, the listing, counts
 *   pg_read_queue.c    the queues' messages and counts
 *   pg_read_cron.c     a trigger's state and ticks
 *   pg_read_pipeline.c a pipeline's state and records
 *   pg_builds.c        the plugin builds the hosts share
 *   pg_copy.c          copying a journal in (migrate.c)
 *   pg_conn.c          connections: made, dropped when the server went away,
 *                      the pool of readers, errors recorded on one line
 *   pg_pipe.c          how a group's writes go out: libpq's pipeline mode
 *   pg_hosts.c         several hosts on one database: leases, takeover,
 *                      notices
 *   pg_slots.c         flow control's slots the hosts share (advisory
 *                      locks)
 *   pg_rates.c         the rates the hosts share (flow_rates): flow
 *                      control's and shared resources'
 *
 * Invariant: these are the only files that include libpq-fe.h. */
#ifndef DURO_PG_INTERNAL_H
#define DURO_PG_INTERNAL_H

#include <inttypes.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"
#include "journal.h"
#include "util.h"

#define MAX_PARAMS (10 + 2 * DURO_ATTR_MAX)

/* A statement's parameters as text (libpq's text format): integers are
 * formatted into buf, strings are borrowed. */
typedef struct params {
  const char *v[MAX_PARAMS];
  char buf[MAX_PARAMS][24];
  int n;
} params;

static inline void p_text(params *p, const char *s) { p->v[p->n++] = s; }

static inline void p_i64(params *p, int64_t x) {
  snprintf(p->buf[p->n], sizeof p->buf[p->n], "%" PRId64, x);
  p->v[p->n] = p->buf[p->n];
  p->n++;
}

/* A time column: JOURNAL_NONE is NULL. */
static inline void p_ms(params *p, int64_t x) {
  if (x == JOURNAL_NONE)
    p->v[p->n++] = NULL;
  else
    p_i64(p, x);
}

static inline char *get_text(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? NULL : xstrdup(PQgetvalue(r, row, col));
}

/* A borrowed string, NULL for SQL NULL. */
static inline const char *get_str(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? NULL : PQgetvalue(r, row, col);
}

static inline int64_t get_i64(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? 0
                                  : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static inline int64_t get_ms(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? JOURNAL_NONE : get_i64(r, row, col);
}

/* The enums of status.h from their stored names (-1, "unknown", for a
 * name that is none of them). */
static inline duro_status get_status(const PGresult *r, int row, int col) {
  return (duro_status)duro_status_parse(get_str(r, row, col));
}

/* The writer's statements, prepared on the writer connection as "w<i>"
 * (pg_write.c holds their SQL). */
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
  ST_SWEEP,
  ST_INSTANCE_DELETE,
  ST_ATTRIBUTE_SET,
  ST_ATTRIBUTES_CLEAR_BY_ID,
  ST_ATTRIBUTE_SET_BY_ID,
  ST_LOG_APPEND,
  ST_MESSAGE_INSERT,
  ST_MESSAGE_PICK,
  ST_MESSAGE_KEY_LOCK,
  ST_MESSAGE_KEY_POINTER,
  ST_MESSAGE_KEY_AHEAD,
  ST_MESSAGE_KEY_PAGE,
  ST_MESSAGE_KEY_FILL,
  ST_MESSAGE_KEY_LEASE,
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
  ST_PIPELINE_APPEND,
  ST_PIPELINE_PLAN,
  ST_PIPELINE_CLAIM,
  ST_PIPELINE_DONE,
  ST_BULK_INSERT,
  ST_BULK_PROGRESS,
  ST_BULK_CANCEL,
  ST_BULK_CLAIM,
  ST_BULK_SWEEP,
  /* JOP_VALUE_RESEAL's, one per journal_field in its order (pg_values.c) */
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
  ST_NOTIFY,
  ST_FENCE,
  ST_WRITE_COUNT_
};

/* A thread's read connection and the names of its prepared statements,
 * keyed by the address of their SQL text (always a literal here). */
#define READER_CACHE 32
typedef struct reader {
  PGconn *conn;
  const char *sql[READER_CACHE];
  size_t n;
  int64_t named;            /* the host its session is named after, or 0 */
  struct reader *next;      /* every reader (pg_store.readers) */
  struct reader *next_idle; /* pg_store.idle */
} reader;

/* Reader connections are a pool shared by every reading thread: taken for
 * a read (or a short transaction of its own) and given back.  A pool, not
 * a connection per thread: a host's 64 workers and 16 HTTP threads would
 * open 80 sessions, each paying SCRAM's key derivation on both sides. */
#define READERS_MAX 8

typedef struct pg_store {
  PGconn *wr;
  /* Within a group, once a write was queued: `wr` is in pipeline mode
   * (piped), with `queued` writes sent whose results are not read yet
   * (pg_pipe.c). */
  int piped;
  size_t queued;
  /* Which of the `queued` results, counted from the next to read, is
   * the host's fence (pg_write_begin); 0: none unread. */
  size_t fence;
  /* The queued writes whose changed rows are wanted
   * (pg_write_queue_counted), oldest first: the result each is (`at`,
   * counted as `reads` counts them) and where its count goes. */
  struct pg_counted {
    uint64_t at;
    int64_t *out;
  } counted[256];
  size_t counted_head, counted_n;
  uint64_t reads; /* the queued results read since the store opened */
  char *conninfo;
  int synchronous_full;
  pthread_mutex_t readers_mu; /* guards the pool */
  pthread_cond_t readers_cv;  /* a reader was given back */
  reader *readers;            /* every reader, closed with the store */
  reader *idle;               /* those no thread holds */
  size_t n_readers;           /* made or being made, up to READERS_MAX */
  /* Set by join (0: not a host; its instances have owner 0). */
  int64_t host;
  int64_t lease_ms;
  store_host_hooks hooks;
  pthread_t keeper; /* renews the lease, takes the notices (keeper_main) */
  int keeper_started;
  int stopping; /* atomic */
  int lost;     /* atomic: the lease was found lost */
  /* Until when, in CLOCK_BOOTTIME ms, the lease surely holds (atomic; 0
   * once lost): the start of the last renewal that succeeded plus two
   * thirds of the lease (pg_lease_held).  lease_mu and lease_cv: threads
   * waiting for the keeper to renew it; `lease_warned` that one of them
   * said it waited in vain. */
  int64_t lease_until;
  pthread_mutex_t lease_mu;
  pthread_cond_t lease_cv;
  int lease_warned;
  /* Renew now rather than at the next third of the lease (pg_renew_soon). */
  int renew_soon;
  /* flow control's slots (pg_slots.c): their own connection, made on
   * first use, and how many times it was lost (slots_mu guards all). */
  PGconn *slots;
  uint64_t slots_epoch;
  pthread_mutex_t slots_mu;
} pg_store;

/* ---- pg_slots.c ---- */

int pg_slots_pass(void *db, journal_slots_job *jobs, size_t n, uint64_t *epoch);
void pg_slots_close(pg_store *pg);
/* The slots connection (made when missing; NULL when the server cannot
 * be reached) and a failure on it, slots_mu held: pg_rates.c's too. */
PGconn *pg_slots_conn(pg_store *pg);
void pg_slots_failed(pg_store *pg, PGresult *r);

/* ---- pg_rates.c ---- */

/* The function a rates' take runs, made on the slots connection. */
extern const char pg_rates_fn[];
int pg_rates_take(void *db, double now_ms, journal_rates_job *jobs, size_t n);

/* Notices to host N go to channel "duro_host_N". */
#define HOST_CHANNEL "duro_host_"

/* ---- pg_schema.c ---- */

/* Creates the schema, or brings it to this version, unless it is current
 * (one opener at a time). */
int pg_schema_create(PGconn *c, char *err, size_t errlen);
/* The schema version stored in meta is this duro's; 0 or DURO_E_STORAGE. */
int pg_schema_check(PGconn *c, char *err, size_t errlen);

/* ---- pg_write.c ---- */

/* Prepares every write statement on the writer connection as "w<i>". */
int pg_prepare_writes(PGconn *c, char *err, size_t errlen);
/* Runs a write and puts how many rows it changed in out_rowid. */
int pg_write_changes(pg_store *pg, int which, const params *p, journal_op *op);
/* An insert whose RETURNING gives the new id; no row: *inserted = 0. */
int pg_write_returning(pg_store *pg, int which, const params *p, int *inserted,
                       int64_t *id);

/* ---- pg_write_*.c: the ops, by kind (pg_apply names them) ---- */

int pg_instance_insert(pg_store *pg, journal_op *op);
int pg_instance_set(pg_store *pg, journal_op *op);
int pg_instance_mark(pg_store *pg, journal_op *op);
int pg_step_put(pg_store *pg, journal_op *op);
int pg_steps_change(pg_store *pg, journal_op *op);
int pg_event_apply(pg_store *pg, journal_op *op);
int pg_sweep(pg_store *pg, journal_op *op);
int pg_instance_delete(pg_store *pg, journal_op *op);
int pg_attribute_set(pg_store *pg, int64_t rowid, const duro_attr *a);
int pg_attributes(void *db, int64_t rowid,
                  void (*fn)(void *ctx, const duro_attr *a), void *ctx);
int pg_last_steps(void *db, const int64_t *rowids, size_t n,
                  void (*fn)(void *ctx, const journal_last_step *s), void *ctx);
/* pg_query for SQL made for one call (never cached by its address). */
PGresult *pg_query_once(pg_store *pg, const char *sql, const params *p);
int pg_message_apply(pg_store *pg, journal_op *op);
int pg_message_lease(pg_store *pg, journal_op *op);
int pg_message_retry(pg_store *pg, journal_op *op);
int pg_cron_apply(pg_store *pg, journal_op *op);
int pg_pipeline_apply(pg_store *pg, journal_op *op);
int pg_log_apply(pg_store *pg, journal_op *op);
/* pg_values.c: the values encrypted at rest, scanned and rewritten */
int pg_values_each(void *db, int which, int64_t after, size_t limit,
                   const char *skip, journal_value_fn fn, void *ctx,
                   int64_t *last);
int pg_value_reseal(pg_store *pg, journal_op *op);
int pg_bulk_apply(pg_store *pg, journal_op *op);
int pg_bulk_get(void *db, int64_t id, journal_bulk *out);
int pg_bulk_list(void *db, const char *workflow, int running, size_t limit,
                 void (*fn)(void *ctx, const journal_bulk *b), void *ctx);
int pg_logs_read(void *db, int64_t rowid, int64_t after, size_t limit,
                 journal_log **out, size_t *n);

/* ---- the backend's members (backend.h), by file ---- */

/* pg_write.c */
int pg_begin(void *db);
int pg_apply(void *db, journal_op *op);
int pg_commit(void *db);
void pg_rollback(void *db);
/* pg_claims.c */
int pg_claim_holder(void *db, const char *workflow, const char *key, char **id);
int pg_claim_take(void *db, const char *workflow, const char *key,
                  const char *id, char **holder);
int pg_claim_merge(void *db, const char *workflow, const char *key,
                   const char *params, const duro_attr *attrs, size_t n_attrs,
                   const journal_claim_due *due, char **id);
int pg_claim_release(void *db, const char *workflow, const char *id,
                     int64_t now_ms, char **params_out, int64_t *wake_ms);
/* pg_read_instance.c */
int pg_instance_get(void *db, const char *workflow, const char *id,
                    journal_instance *out);
int pg_instance_get_rowid(void *db, int64_t rowid, journal_instance *out);
int pg_steps_load(void *db, int64_t rowid, journal_step **out, size_t *n);
int pg_attempts_each(void *db, int64_t rowid,
                     void (*fn)(void *ctx, const char *key, uint32_t number,
                                int64_t started_ms, int64_t ended_ms,
                                const char *error, const char *build),
                     void *ctx);
int pg_events_pending(void *db, int64_t rowid, journal_event **out, size_t *n);
int pg_events_all(void *db, int64_t rowid, journal_event **out, size_t *n);
/* pg_read_sched.c */
int pg_due(void *db, int64_t after_ms, int64_t upto_ms, size_t limit,
           int64_t *rowids, int64_t *wakes, size_t *n);
int pg_next_wake(void *db, int64_t after_ms, int64_t *wake);
int pg_live_each(void *db, const char *workflow, journal_live_fn fn, void *ctx);
int pg_children_each(void *db, int64_t parent,
                     void (*fn)(void *ctx, int64_t rowid, const char *workflow,
                                const char *id, duro_status status),
                     void *ctx);
int pg_orphans_each(void *db, size_t limit,
                    void (*fn)(void *ctx, int64_t rowid, const char *workflow,
                               const char *id, int parent_close),
                    void *ctx);
int pg_recover_each(void *db,
                    void (*fn)(void *ctx, int64_t rowid, duro_status status,
                               int control),
                    void *ctx);
int pg_queued_from(void *db, int64_t from, size_t limit, int64_t *rowids,
                   size_t *n);
int pg_oldest_queued(void *db, const char *workflow, int64_t *created_ms);
int pg_build_pinned(void *db, const char *workflow, const char *build,
                    int *pinned);
int pg_waiting_on(void *db, const char *wait_type,
                  void (*fn)(void *ctx, int64_t rowid, const char *workflow),
                  void *ctx);
int pg_pinned_builds(void *db,
                     void (*fn)(void *ctx, const char *workflow,
                                const char *build, int64_t n),
                     void *ctx);
int pg_list(void *db, const char *workflow, const journal_list_filter *f,
            int64_t cursor, size_t limit,
            void (*fn)(void *ctx, const journal_list_row *row), void *ctx);
int pg_count_by_status(void *db,
                       void (*fn)(void *ctx, const char *workflow,
                                  duro_status status, int64_t n),
                       void *ctx);
/* pg_read_queue.c */
int pg_queue_stats_each(void *db, const char *queue, int64_t now_ms,
                        void (*fn)(void *ctx, const char *queue,
                                   const journal_queue_stats *st),
                        void *ctx);
int pg_queue_ready(void *db, const char *queue, int64_t now_ms, uint32_t limit,
                   journal_queue_ready_info *out);
int pg_queue_leases(void *db, const char *queue, int64_t now_ms,
                    const char *token, void (*fn)(void *ctx, const char *lease),
                    void *ctx);
int pg_queue_peek(void *db, const char *queue, int64_t now_ms, size_t limit,
                  journal_message **out, size_t *n);
int pg_queue_held(void *db, const char *queue, int64_t now_ms,
                  const char *pointer, uint32_t limit,
                  const struct journal_crypt *crypt, int64_t *held);

/* A keyed consumer's walk (queue_keys.h), the lease's on the writer and
 * the held count's on a reader.  $3 of the first and $6 of the second
 * say whether the stored keys are the consumer's pointer's (the lease
 * makes them so; a read may find them another's): when not (0), every
 * key is NULL, to be computed from the body, which the first reads only
 * then.  The messages holding their key's place without being visible
 * ($1 queue, $2 now: seq, sent_ms, key, body, leased), and a page of the
 * visible ones oldest sent first, after ($3 sent_ms, $4 seq), at most $5
 * (seq, attempts, body, sent_ms, last_error, traceparent, key), on
 * messages_age, but those of the keys in the JSON array $7
 * (queue_keys_full), which it passes over without sending them. */
#define PG_SQL_KEY_AHEAD                                                       \
  "SELECT seq,sent_ms,CASE WHEN $3::int=1 THEN key END,CASE WHEN $3::int=1 "   \
  "AND key IS NOT NULL THEN NULL ELSE body END,(lease IS NOT NULL)::int "      \
  "FROM messages WHERE queue=$1 AND visible_ms>$2 AND (lease IS NOT NULL OR "  \
  "attempts>0)"
#define PG_SQL_KEY_PAGE                                                        \
  "SELECT seq,attempts,body,sent_ms,last_error,traceparent,CASE WHEN "         \
  "$6::int=1 THEN key END FROM messages WHERE queue=$1 AND visible_ms<=$2 "    \
  "AND sent_ms>=$3 AND (sent_ms>$3 OR seq>$4) AND (key IS NULL OR key NOT IN " \
  "(SELECT jsonb_array_elements_text($7::jsonb))) ORDER BY sent_ms,seq "       \
  "LIMIT $5"
#define PG_KEY_PAGE 500 /* rows of one page */
struct queue_keys;
/* Feeds `keys` the rows of a PG_SQL_KEY_AHEAD result. */
void pg_keys_ahead(const PGresult *r, struct queue_keys *keys);
int pg_queue_counts_each(void *db,
                         void (*fn)(void *ctx, const char *queue,
                                    int64_t dropped, int64_t dead_lettered),
                         void *ctx);
/* pg_read_pipeline.c */
int pg_pipeline_get(void *db, const char *pipeline, journal_pipeline *out);
int pg_pipeline_sends(void *db, const char *pipeline, int64_t from_seq,
                      int64_t to_seq, size_t limit, int with_body,
                      int (*fn)(void *ctx, const journal_pipeline_send *s),
                      void *ctx);
/* pg_read_cron.c */
int pg_cron_state(void *db, const char *trigger, journal_cron *out);
int pg_cron_ticks(void *db, const char *trigger, const char *state,
                  size_t limit,
                  void (*fn)(void *ctx, const journal_cron_tick *t), void *ctx);
/* pg_builds.c */
int pg_build_put(void *db, const char *hash, const char *plugin,
                 const char *path, int64_t now_ms);
int pg_build_get(void *db, const char *hash, const char *path);
int pg_builds_prune(void *db, int64_t seen_before_ms, size_t *n);
/* pg_copy.c */
int pg_table_count(void *db, const store_table *t, int64_t *n);
int pg_table_import(void *db, const store_table *t,
                    int (*produce)(void *ctx, store_row_fn put, void *put_ctx),
                    void *ctx, int64_t *n);
int pg_key_continue(void *db, const store_table *t, int64_t high);

/* ---- pg_conn.c ---- */

/* Records libpq's message `msg` (on one line, without its trailing
 * newline) as the calling thread's store error, after "what: ". */
void pg_set_err(const char *what, const char *msg);
/* Why a statement failed: the result's message, or the connection's when
 * the result has none (libpq could not send it, or got no answer). */
const char *pg_failure_of(PGconn *c, const PGresult *r);
/* Closes *c and sets it to NULL when the failure `r` (may be NULL) was the
 * connection's, so that its next use connects again. */
void pg_drop_if_lost(PGconn **c, const PGresult *r);
/* Runs a command with no parameters: 0 or DURO_E_STORAGE with the
 * message recorded and, when err, copied there. */
int pg_exec_cmd(PGconn *c, const char *sql, char *err, size_t errlen);
/* Connects and sets the session as synchronous_full asks (-1: read-only);
 * NULL with why in err. */
PGconn *pg_connect(const char *conninfo, int synchronous_full, char *err,
                   size_t errlen);
/* A reader for the calling thread alone until pg_reader_give: an idle one,
 * a new one while there are fewer than READERS_MAX, or the first given
 * back; connected again when the server had dropped it.  NULL with the
 * error recorded when the server cannot be reached. */
reader *pg_reader_take(pg_store *pg);
void pg_reader_give(pg_store *pg, reader *r);
/* Gives back a reader that ran a transaction: rolled back first when it
 * `failed`, and dropped when its connection was lost. */
void pg_reader_end(pg_store *pg, reader *r, int failed);
/* Runs `sql` on c within the caller's transaction; NULL after a failure
 * (recorded). */
PGresult *pg_tx_exec(PGconn *c, const char *sql, const params *p);
/* Runs a read on this thread's connection (again on a new one, up to
 * three tries, when the server dropped it): the rows (to PQclear), or
 * NULL with the error recorded. */
PGresult *pg_query(pg_store *pg, const char *sql, const params *p);

/* ---- pg_pipe.c: the writer's statements, prepared as "w<which>" ---- */

/* Whether the writer connection sat idle with nothing to read: the server
 * did not close it (that would be there to read), so a group may go out
 * behind a BEGIN it does not wait for. */
int pg_write_quiet(pg_store *pg);
/* Sends BEGIN (unless `begun`: the caller ran it already) and, unless
 * `fence` is -1, the write statement `fence` (with p), without waiting:
 * their results are read with the group's first.  The fence fails with
 * division_by_zero (22012) when this host's lease row is dead: the group
 * fails and pg_host_lost is called. */
int pg_write_begin(pg_store *pg, int begun, int fence, const params *p);
/* Sends a write whose result only needs checking, without waiting for it:
 * its failure shows at the latest at pg_write_finish and fails the group.
 * 0, or DURO_E_STORAGE with the error recorded (a queued write's, maybe). */
int pg_write_queue(pg_store *pg, int which, const params *p);
/* Runs a write whose result is needed now (after the queued ones, in the
 * same round trip): the result (to PQclear), or NULL with the error
 * recorded, a queued write's included. */
PGresult *pg_write_run(pg_store *pg, int which, const params *p);
/* pg_write_queue, with how many rows the write changed put in *changed
 * once its result is read (by pg_write_finish at the latest); -1 until
 * then. */
int pg_write_queue_counted(pg_store *pg, int which, const params *p,
                           int64_t *changed);
/* Sends `last` (a command without parameters, or NULL) behind the queued
 * writes, reads and checks every result and leaves pipeline mode, so that
 * what follows may be anything (COPY, several commands in one string).
 * 0 with last's result in *result (to PQclear; when result is not NULL),
 * or DURO_E_STORAGE with the first failure recorded.  Nothing to do
 * when nothing was queued: 0 and *result NULL. */
int pg_write_finish(pg_store *pg, const char *last, PGresult **result);
/* After a failure: reads what is left of the pipeline, unchecked, and
 * leaves it (or drops the connection). */
void pg_write_abandon(pg_store *pg);

/* ---- pg_hosts.c (backend.h's members of the same names) ---- */

int pg_join(void *db, int64_t lease_ms, const store_host_hooks *hooks,
            int64_t *host, char *err, size_t errlen);
int pg_takeover(void *db, size_t limit,
                void (*fn)(void *ctx, int64_t rowid, int64_t wake_ms),
                void *ctx, size_t *moved);
int pg_adopt(void *db, int64_t rowid, int64_t *owner);
int pg_notify(void *db, int64_t host, const char *text);
int pg_lease_held(void *db);
void pg_renew_soon(void *db);
/* pg_conn.c: the database found away (a connection that would not open
 * or broke) now, and when it last was (clock_boot_ms; 0: never). */
void pg_cut_note(void);
int64_t pg_cut_last(void);
/* pg_handoff.c */
int pg_hosts_idle(void *db, void (*fn)(void *ctx, const journal_host_row *row),
                  void *ctx);
int pg_hand_off(void *db, const int64_t *rowids, size_t n, int64_t to,
                int64_t *moved, size_t *n_moved);
int pg_hosts_each(void *db, void (*fn)(void *ctx, const journal_host_row *row),
                  void *ctx);
int64_t pg_lease_until(void *db);
void pg_quiet(void *db);
/* Names session c after the host this store joined as ("duro host N",
 * its application_name), so that another host can end the sessions of
 * a host past its lease (pg_takeover); nothing before the join.  0, or
 * -1 with why in err. */
int pg_session_name(pg_store *pg, PGconn *c, char *err, size_t errlen);
/* At close: the keeper stops and a host that leaves cleanly marks itself
 * dead, so that its instances move at once, not a lease later. */
void pg_host_leave(pg_store *pg);
/* The lease was found lost: hooks.lost, once. */
void pg_host_lost(pg_store *pg);

#endif
