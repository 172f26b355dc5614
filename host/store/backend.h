/* backend.h — what a storage backend implements for the journal.
 *
 * journal.c owns everything that does not depend on the database: the
 * batches, the group commit (its queue, the leadership, the writer
 * thread), the error state and the metrics.  A backend owns the database:
 * its connections, the schema and its migrations, how each JOP_* op is
 * written, and every read query.  journal.c calls it through this table.
 *
 * Threads: begin, apply, commit and rollback are only ever called by the
 * thread that leads the group commit, one group at a time, so a backend
 * needs one writer connection and no locking of its own for it.  Reads
 * come from any thread, concurrently with each other and with a group's
 * transaction: a backend gives each read a connection of its own while
 * it reads (one of a pool, in both backends: threads come and go), or
 * otherwise makes reads thread-safe, and a read must see every group
 * whose commit returned.
 *
 * Errors: a member that fails returns DURO_E_STORAGE (reads may also
 * return DURO_E_NOT_FOUND where journal.h says so) after calling
 * store_error() on the failing thread with the underlying message. */
#ifndef DURO_BACKEND_H
#define DURO_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "duro.h"
#include "journal.h"

/* A table of the schema, as a copy between backends names it
 * (migrate.h lists schema 6's). */
typedef struct store_table {
  const char *name;
  const char *columns; /* "a,b,c": every column, in the copy's order */
  size_t n_columns;
  /* The key the database numbers (instances.rowid, events.seq,
   * messages.seq), or NULL. */
  const char *serial;
} store_table;

/* One row of a copy: n_columns values as text, NULL for SQL NULL.
 * Returns 0 to go on. */
typedef int (*store_row_fn)(void *ctx, const char *const *values);

/* What open returns for a store that is away, not refusing (see open). */
#define STORE_UNREACHABLE DURO_E_IO

typedef struct store_backend {
  /* Opens (creating it unless read-only) the store at `path`, bringing
   * its schema to the current version: the schema version and its
   * migrations are the backend's.  synchronous_full as journal_open.  On
   * failure, a message in err and nothing left open: STORE_UNREACHABLE
   * when the store could not be reached but may be later by itself (a
   * database server that is down or still starting; the caller may open
   * again), else DURO_E_STORAGE.  *db is the handle every other member
   * gets. */
  int (*open)(const char *path, int synchronous_full, void **db, char *err,
              size_t errlen);
  /* Closes every connection, the readers' too.  No call is running or
   * will come. */
  void (*close)(void *db);

  /* ---- the group's transaction (leader thread only) ---------------------
   * begin, then apply for every op of every batch of the group, then
   * commit: all of the group's ops are durable together, or none is.
   * When any of them fails, rollback follows. */

  /* Starts the group's transaction on the writer connection, taking
   * whatever write lock the database has at once (SQLite: BEGIN
   * IMMEDIATE), so that no apply fails for want of it. */
  int (*begin)(void *db);
  /* Writes one op within the transaction, as journal.h's journal_op_kind
   * describes it, and fills its results (rc, out_rowid, messages and
   * n_messages).  Ops come in order and each sees the writes of those
   * before it, in its own batch or an earlier one of the group.  An op-level
   * outcome (a duplicate instance, an event for an ended instance) is op->rc
   * with 0 returned; a nonzero return fails the whole group.  May allocate
   * op->messages even when it fails. */
  int (*apply)(void *db, journal_op *op);
  /* Makes the transaction durable: it returns only once the group is on
   * disk as synchronous_full asked.  A failure means the group is not
   * committed. */
  int (*commit)(void *db);
  /* After a failed begin, apply or commit: leaves no transaction open
   * (whatever is left of it is rolled back), so the next group starts
   * clean.  Must not fail in a way that matters; its own error is
   * ignored. */
  void (*rollback)(void *db);
  /* Whether the store is still the one opened (after each group's
   * commit, on the leading thread, and journal_check, from the engine's
   * scheduler thread; never two at once): 0, or DURO_E_STORAGE with why
   * (naming the path) when writes would go where no restart finds them
   * (SQLite: the file, or its -wal, deleted or replaced under the host).
   * On the commit path: keep it cheap.  NULL: nothing to check. */
  int (*check)(void *db);

  /* ---- reads (any thread; see journal.h for each contract) -------------
   * Each is journal.h's function of the same name, on the backend's
   * handle. */
  int (*instance_get)(void *db, const char *workflow, const char *id,
                      journal_instance *out);
  int (*instance_get_rowid)(void *db, int64_t rowid, journal_instance *out);
  /* journal_claim_holder; NULL on a store that keeps no claim keys. */
  int (*claim_holder)(void *db, const char *workflow, const char *key,
                      char **id);
  int (*steps_load)(void *db, int64_t rowid, journal_step **out, size_t *n);
  int (*attempts_each)(void *db, int64_t rowid,
                       void (*fn)(void *ctx, const char *key, uint32_t number,
                                  int64_t started_ms, int64_t ended_ms,
                                  const char *error, const char *build),
                       void *ctx);
  int (*events_pending)(void *db, int64_t rowid, journal_event **out,
                        size_t *n);
  int (*events_all)(void *db, int64_t rowid, journal_event **out, size_t *n);
  int (*logs_read)(void *db, int64_t rowid, int64_t after, size_t limit,
                   journal_log **out, size_t *n);
  int (*due)(void *db, int64_t after_ms, int64_t upto_ms, size_t limit,
             int64_t *rowids, int64_t *wakes, size_t *n);
  int (*next_wake)(void *db, int64_t after_ms, int64_t *wake);
  int (*recover_each)(void *db,
                      void (*fn)(void *ctx, int64_t rowid, duro_status status,
                                 int control),
                      void *ctx);
  int (*queued_from)(void *db, int64_t from, size_t limit, int64_t *rowids,
                     size_t *n);
  int (*live_each)(void *db, const char *workflow, journal_live_fn fn,
                   void *ctx);
  int (*children_each)(void *db, int64_t parent,
                       void (*fn)(void *ctx, int64_t rowid,
                                  const char *workflow, const char *id,
                                  duro_status status),
                       void *ctx);
  int (*orphans_each)(void *db, size_t limit,
                      void (*fn)(void *ctx, int64_t rowid, const char *workflow,
                                 const char *id, int parent_close),
                      void *ctx);
  int (*oldest_queued)(void *db, const char *workflow, int64_t *created_ms);
  int (*build_pinned)(void *db, const char *workflow, const char *build,
                      int *pinned);
  int (*pinned_builds)(void *db,
                       void (*fn)(void *ctx, const char *workflow,
                                  const char *build, int64_t n),
                       void *ctx);
  int (*waiting_on)(void *db, const char *wait_type,
                    void (*fn)(void *ctx, int64_t rowid, const char *workflow),
                    void *ctx);
  int (*list)(void *db, const char *workflow, const journal_list_filter *f,
              int64_t cursor, size_t limit,
              void (*fn)(void *ctx, const journal_list_row *row), void *ctx);
  int (*attributes)(void *db, int64_t rowid,
                    void (*fn)(void *ctx, const duro_attr *a), void *ctx);
  int (*last_steps)(void *db, const int64_t *rowids, size_t n,
                    void (*fn)(void *ctx, const journal_last_step *s),
                    void *ctx);
  int (*bulk_get)(void *db, int64_t id, journal_bulk *out);
  int (*bulk_list)(void *db, const char *workflow, int running, size_t limit,
                   void (*fn)(void *ctx, const journal_bulk *b), void *ctx);
  /* The stored values (journal_value) of the instances whose rowid is
   * above `after`, up to `limit` instances in rowid order, with their
   * steps', attempts', events' and log lines' (which =
   * JOURNAL_VALUES_INSTANCES), or of the queue messages whose seq is
   * above `after`, up to `limit` (JOURNAL_VALUES_MESSAGES): each handed
   * to fn as stored, but NULLs and those starting with `skip` (NULL:
   * none skipped).  *last = the greatest rowid or seq looked at (`after`
   * when none is left).  A read: it sees committed rows only. */
  int (*values_each)(void *db, int which, int64_t after, size_t limit,
                     const char *skip, journal_value_fn fn, void *ctx,
                     int64_t *last);
  int (*count_by_status)(void *db,
                         void (*fn)(void *ctx, const char *workflow,
                                    duro_status status, int64_t n),
                         void *ctx);
  int (*queue_stats_each)(void *db, const char *queue, int64_t now_ms,
                          void (*fn)(void *ctx, const char *queue,
                                     const journal_queue_stats *st),
                          void *ctx);
  int (*queue_ready)(void *db, const char *queue, int64_t now_ms,
                     uint32_t limit, journal_queue_ready_info *out);
  int (*queue_leases)(void *db, const char *queue, int64_t now_ms,
                      const char *token,
                      void (*fn)(void *ctx, const char *lease), void *ctx);
  int (*queue_peek)(void *db, const char *queue, int64_t now_ms, size_t limit,
                    journal_message **out, size_t *n);
  /* crypt opens the bodies it reads keys from (journal_set_crypt's) */
  int (*queue_held)(void *db, const char *queue, int64_t now_ms,
                    const char *pointer, uint32_t limit,
                    const struct journal_crypt *crypt, int64_t *held);
  int (*queue_counts_each)(void *db,
                           void (*fn)(void *ctx, const char *queue,
                                      int64_t dropped, int64_t dead_lettered),
                           void *ctx);
  int (*cron_state)(void *db, const char *trigger, journal_cron *out);
  int (*cron_ticks)(void *db, const char *trigger, const char *state,
                    size_t limit,
                    void (*fn)(void *ctx, const journal_cron_tick *t),
                    void *ctx);
  int (*pipeline_get)(void *db, const char *pipeline, journal_pipeline *out);
  int (*pipeline_sends)(void *db, const char *pipeline, int64_t from_seq,
                        int64_t to_seq, size_t limit, int with_body,
                        int (*fn)(void *ctx, const journal_pipeline_send *s),
                        void *ctx);

  /* ---- copying a journal to another backend (migrate.c) ----------------
   * Only on the thread that copies, with no host on either database.
   * A backend that is never a source leaves table_export NULL; one that
   * is never a target leaves table_import and key_continue NULL. */

  /* The schema version the store at `path` records, read without opening
   * it as a journal (nothing is created or upgraded): 0 with it in
   * version; DURO_E_NOT_FOUND when `path` holds no journal, with why in
   * err.  NULL on a backend that is never a source. */
  int (*schema_version)(const char *path, char *version, size_t n, char *err,
                        size_t errlen);
  /* How many rows `t` holds. */
  int (*table_count)(void *db, const store_table *t, int64_t *n);
  /* Calls put with each row of `t`, its columns in t->columns' order as
   * text (integers in decimal, NULL for SQL NULL), and, when t->serial,
   * sets *key_high to the highest value the key has ever taken, deleted
   * rows included (0 for none).  Stops at put's first nonzero return and
   * returns it. */
  int (*table_export)(void *db, const store_table *t, int64_t *key_high,
                      store_row_fn put, void *put_ctx);
  /* Within the group transaction (begin ... commit): bulk-loads into `t`
   * the rows `produce` hands to put (each as table_export gives them),
   * keeping every value, keys included.  *n gets how many were loaded. */
  int (*table_import)(void *db, const store_table *t,
                      int (*produce)(void *ctx, store_row_fn put,
                                     void *put_ctx),
                      void *ctx, int64_t *n);
  /* Within the same transaction: makes t->serial's next value greater
   * than `high` and than every key in the table, so that no id is
   * handed out twice. */
  int (*key_continue)(void *db, const store_table *t, int64_t high);

  /* ---- several hosts on one store (NULL where a store has one host:
   * SQLite, whose lock file beside it guards it) ----------------------
   * journal.h's journal_join, journal_takeover, journal_adopt and
   * journal_notify, on the backend's handle.  Once joined, every
   * instance the journal inserts is this host's, and the reads of
   * runnable work (due, next_wake, recover_each, queued_from) see only
   * this host's instances. */
  int (*join)(void *db, int64_t lease_ms, const store_host_hooks *hooks,
              int64_t *host, char *err, size_t errlen);
  int (*takeover)(void *db, size_t limit,
                  void (*fn)(void *ctx, int64_t rowid, int64_t wake_ms),
                  void *ctx, size_t *moved);
  int (*adopt)(void *db, int64_t rowid, int64_t *owner);
  int (*notify)(void *db, int64_t host, const char *text);
  /* journal_slots_pass (and its one-key forms), on a joined store; NULL
   * on a store one host has to itself. */
  int (*slots_pass)(void *db, journal_slots_job *jobs, size_t n,
                    uint64_t *epoch);
  /* journal_rates_take, on a joined store; NULL on a store one host has
   * to itself. */
  int (*rates_take)(void *db, double now_ms, journal_rates_job *jobs, size_t n);
  /* journal_claim_take, on a joined store; NULL on a store one host has
   * to itself. */
  int (*claim_take)(void *db, const char *workflow, const char *key,
                    const char *id, char **holder);
  /* journal_claim_merge and journal_claim_release, likewise. */
  int (*claim_merge)(void *db, const char *workflow, const char *key,
                     const char *params, const duro_attr *attrs, size_t n_attrs,
                     const journal_claim_due *due, char **id);
  int (*claim_release)(void *db, const char *workflow, const char *id,
                       int64_t now_ms, char **params, int64_t *wake_ms);
  /* journal_hosts_each, on a joined store. */
  int (*hosts_each)(void *db,
                    void (*fn)(void *ctx, const journal_host_row *row),
                    void *ctx);
  /* journal_renew_soon, on a joined store. */
  void (*renew_soon)(void *db);
  /* journal_hosts_idle and journal_hand_off, on a joined store. */
  int (*hosts_idle)(void *db,
                    void (*fn)(void *ctx, const journal_host_row *row),
                    void *ctx);
  int (*hand_off)(void *db, const int64_t *rowids, size_t n, int64_t to,
                  int64_t *moved, size_t *n_moved);
  /* journal_lease_held, on a joined store. */
  int (*lease_held)(void *db);
  /* journal_lease_until, on a joined store. */
  int64_t (*lease_until)(void *db);
  /* Stops calling the hooks (journal_quiet); the host stays joined. */
  void (*quiet)(void *db);
  /* journal_build_put, journal_build_get, journal_builds_prune. */
  int (*build_put)(void *db, const char *hash, const char *plugin,
                   const char *path, int64_t now_ms);
  int (*build_get)(void *db, const char *hash, const char *path);
  int (*builds_prune)(void *db, int64_t seen_before_ms, size_t *n);
} store_backend;

/* The SQLite backend (sqlite*.c), the one journal_open uses. */
extern const store_backend store_sqlite;

#include "duro_config.h"
#if DURO_HAVE_PG
/* The PostgreSQL backend (pg*.c), built when libpq is found: `path` is a
 * libpq connection string. */
extern const store_backend store_pg;
#endif

/* What storage.postgresql selects: store_pg, or NULL in a build without
 * libpq (where the configuration refuses the key). */
const store_backend *store_backend_postgresql(void);

/* journal_open on the given backend: `be` must outlive the journal. */
int journal_open_backend(const store_backend *be, const char *path,
                         int synchronous_full, journal **out, char *err,
                         size_t errlen);

/* Records why the calling thread's operation failed: what journal_errmsg
 * returns on this thread (and, for a group's transaction, on every thread
 * that waited on it). */
void store_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Whether the `len` bytes of body are exactly n > 0 lines, each ended by
 * a newline: a JOP_PIPELINE_APPEND's records, checked by each backend
 * before it reserves their seqs, so no seq is ever left without its
 * record. */
int store_pipeline_lines_are(const char *body, size_t len, int64_t n);

#endif
