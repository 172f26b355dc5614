/* journal.h — the durable store behind the engine: instances, steps,
 * attempts and events in one SQLite file.
 *
 * Writes are batches of operations.  journal_commit() returns only once its
 * batch is on disk, and batches submitted concurrently by several threads
 * share one transaction (group commit: the first waiting thread commits for
 * all), so durability costs one fsync per group, not per step.
 * Reads go through a separate connection and see every committed batch.
 *
 * The engine sees rows as plain structs, their statuses and kinds as the
 * enums of status.h (a backend writes and reads their names: the stored
 * text).  journal.c does the batches and the group commit; the database
 * is a backend's (backend.h): SQLite, in sqlite*.c, the only files that
 * include sqlite3.h. */
#ifndef DURO_JOURNAL_H
#define DURO_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "attr.h"   /* search attributes */
#include "status.h" /* the statuses and kinds of rows */

typedef struct journal journal;

/* No wake time / no value, for the int64 columns. */
#define JOURNAL_NONE INT64_MIN

/* What joins the event types of a wait on several (duro_wait_any) in an
 * instance's wait_type: "approve|reject".  The wakes match its types
 * whole, one by one (never a part of one: "prove" is not "approve"), and
 * no type a wait takes holds it.  A string, for the SQL it is spliced
 * into. */
#define JOURNAL_WAIT_SEP "|"
/* How long a queue message under a key storage.encryption does not list
 * waits before a lease looks at it again. */
#define JOURNAL_PARKED_MS 60000

typedef struct journal_instance {
  int64_t rowid;
  char *workflow;
  char *id;
  duro_status status; /* never running or waitingForPause */
  char *params;
  char *output; /* NULL = none */
  char *error;  /* {"name","message"} or NULL */
  int64_t created_ms, started_ms, ended_ms;
  int64_t wake_ms;   /* JOURNAL_NONE when no timer */
  int64_t paused_ms; /* when a pause froze the timers */
  /* the event type waited on, several joined with JOURNAL_WAIT_SEP
   * (duro_wait_any), a hold's reason, or NULL */
  char *wait_type;
  int control; /* JOURNAL_CONTROL_* requested while running */
  /* How long it is kept once ended; its lowest bit set when its create
   * gave it (engine/retention.c). */
  int64_t retention_ms;
  char *build; /* the build it is pinned to (content hash), or NULL */
  /* How many times it was restarted; only JOP_INSTANCE_RESTARTED writes
   * it. */
  int64_t restarts;
  /* The host that runs it (journal_host's id; read, never written through
   * this struct): 0 on a store with one host. */
  int64_t owner;
  /* When it is timed out (engine clock, ms; 0 or JOURNAL_NONE: never):
   * written by JOP_INSTANCE_INSERT and JOP_INSTANCE_RESTARTED only, so a
   * row rebuilt elsewhere cannot move it. */
  int64_t deadline_ms;
  /* The instance that started it with duro_child_start (its rowid; 0:
   * none), told of its end by an event, and what that parent's end does
   * to it while it runs (JOURNAL_PARENT_CLOSE_*).  Written at insert
   * only. */
  int64_t parent;
  int parent_close;
  /* The W3C traceparent of whoever created it (an HTTP create, a queue
   * message's sender), version 00, or NULL: its trace continues the
   * caller's (trace_ids.h).  Written at insert only. */
  char *traceparent;
  /* A key no other live instance of its workflow may hold at once, on a
   * store several hosts share (flow.singleton's skip mode): an insert
   * that meets it inserts nothing (DURO_E_ALREADY_EXISTS), and
   * journal_claim_holder names the live one; the key goes when the
   * instance ends.  Written at insert only, never read back; NULL: none. */
  char *claim_key;
  /* Its search attributes (attr.h), written with it by the insert, in
   * the same transaction; never read back through this struct
   * (journal_attributes).  Borrowed, as the op's strings are. */
  const duro_attr *attrs;
  size_t n_attrs;
} journal_instance;

enum {
  JOURNAL_PARENT_CLOSE_TERMINATE = 0,
  JOURNAL_PARENT_CLOSE_ABANDON = 1,
  JOURNAL_PARENT_CLOSE_ROLLBACK = 2
};

enum {
  JOURNAL_CONTROL_NONE = 0,
  JOURNAL_CONTROL_PAUSE = 1,
  JOURNAL_CONTROL_TERMINATE = 2,
  /* a terminate whose rollbacks run first (step_rollback.c) */
  JOURNAL_CONTROL_TERMINATE_ROLLBACK = 3,
  /* A restart whose rollbacks run first: it and every value above it
   * (journal_control_restart), which says where the restart is from. */
  JOURNAL_CONTROL_RESTART_ROLLBACK = 4
};

/* The control value of a restart with rollbacks from the step at call
 * position from_seq (-1: from the top), kept in the one column a
 * persisted request has: RESTART_ROLLBACK + 1 + from_seq.  A step's call
 * position is below limits.steps (25,000) times its branches, far from
 * INT_MAX. */
static inline int journal_control_restart(int64_t from_seq) {
  return JOURNAL_CONTROL_RESTART_ROLLBACK + 1 + (int)from_seq;
}
static inline int journal_control_is_restart(int control) {
  return control >= JOURNAL_CONTROL_RESTART_ROLLBACK;
}
/* The call position a restart request is from (-1: the top). */
static inline int64_t journal_control_restart_from(int control) {
  return (int64_t)control - JOURNAL_CONTROL_RESTART_ROLLBACK - 1;
}

typedef struct journal_step {
  char *key; /* "name#count" */
  char *name;
  uint32_t count;
  int64_t seq; /* call order within an activation */
  duro_step_kind type;
  /* Cancelled: still waiting when its instance errored or was
   * terminated. */
  duro_step_status status;
  char *result; /* JSON or NULL */
  char *error;  /* {"name","message"} or NULL */
  uint32_t attempts;
  int64_t started_ms, ended_ms, wake_ms;
  /* The successful attempt lives in the step row (it has no error to
   * keep): when it started and on which build.  Failed attempts have rows
   * of their own. */
  int64_t attempt_started_ms;
  char *build;
} journal_step;

typedef struct journal_event {
  int64_t seq;
  char *type;
  char *payload;
  int64_t ts_ms;
  char *consumed_by; /* the key of the step that took it; NULL: pending
                        (journal_events_all only) */
} journal_event;

/* A queue message.  visible_ms is when it may next be pulled: its delay,
 * its retry delay, or the end of its lease; lease is the id of the pull
 * that holds it (NULL when none ever did since its last retry). */
typedef struct journal_message {
  int64_t seq; /* arrival order; the message id */
  char *queue;
  char *body; /* JSON text */
  uint32_t attempts;
  int64_t visible_ms, sent_ms;
  char *lease;       /* NULL = not held */
  char *last_error;  /* NULL = none */
  char *traceparent; /* its sender's (trace_ids.h), or NULL */
} journal_message;

/* What a JOP_MESSAGE_RETRY did (in out_rowid). */
enum {
  JOURNAL_RETRY_NOT_HELD = 0, /* no message holds that lease any more */
  JOURNAL_RETRY_DELAYED = 1,
  JOURNAL_RETRY_DEAD_LETTERED = 2,
  JOURNAL_RETRY_DROPPED = 3
};

/* ---- open / close ------------------------------------------------------- */

/* synchronous_full: 1 FULL, 0 NORMAL, -1 read-only (the file must exist,
 * at the current schema; every write fails). */
int journal_open(const char *path, int synchronous_full, journal **out,
                 char *err, size_t errlen);
void journal_close(journal *j);
/* Values encrypted at rest from now on (journal_crypt.h): sealed under
 * c's active key as batches commit, opened as reads give them back.  c
 * is borrowed and must outlive the journal; NULL (the default): values
 * are written as they are, and a read of a sealed one fails naming its
 * key.  Set before the first commit. */
struct journal_crypt;
void journal_set_crypt(journal *j, const struct journal_crypt *c);
/* journal_set_crypt's keys (NULL: none). */
const struct journal_crypt *journal_get_crypt(const journal *j);
/* Returns once every batch queued so far is committed (or failed) and its
 * callback has run: what an engine closing waits for before it frees what
 * those callbacks use (an activation's final commit lets go of its
 * instance there). */
void journal_drain(journal *j);

/* ---- writes -------------------------------------------------------------- */

typedef enum journal_op_kind {
  JOP_INSTANCE_INSERT,  /* inst: workflow,id,status,params,created,retention,
                           deadline, parent, parent_close */
  JOP_INSTANCE_SET,     /* inst: every mutable column of rowid but the
                           build pin (JOP_INSTANCE_PIN) and restarts; with
                           clear_control, also control = NONE; errored or
                           terminated: its waiting steps become
                           cancelled at ended_ms */
  JOP_INSTANCE_CONTROL, /* inst.rowid, inst.control */
  JOP_INSTANCE_CONTROL_CLEAR, /* inst.rowid: control = NONE */
  JOP_STEP_PUT,               /* rowid + step */
  JOP_STEPS_DISCARD,          /* rowid; from_seq (-1 = all): steps and attempts;
                                 the events they consumed stay consumed */
  JOP_STEPS_SHIFT_WAKE,       /* rowid; from_seq holds the delta (ms) added to
                                 the wake time of every waiting step */
  JOP_ATTEMPT_PUT,            /* rowid + attempt */
  JOP_EVENT_INSERT,           /* rowid + event (seq assigned), traceparent
                                 (its sender's, for the traces only; not
                                 stored); rc = DURO_E_INSTANCE_ENDED when
                                 it has ended */
  JOP_EVENT_CONSUME,          /* event seq + step key */
  JOP_WAKE_IF_WAITING,     /* rowid, event_type, ts_ms: wake_ms = ts_ms when the
                              instance waits for that event type (one of its
                              wait_type's, JOURNAL_WAIT_SEP); out_rowid =
                              1 when it did */
  JOP_INSTANCE_RESCHEDULE, /* inst: workflow, id, params (NULL keeps
                              them); ts_ms = its new wake: an instance
                              that has not started (queued or paused)
                              takes the params and starts no sooner
                              (flow.debounce), and with them inst's attrs
                              as its search attributes (run() has set
                              none); out_rowid = 1 when it had not
                              started, else nothing changed */
  JOP_INSTANCE_PIN,        /* rowid, step_key = the build hash it runs on: the
                              instance's pin, written only when it changes */
  JOP_WAKE_IF_EVENT_PENDING, /* rowid, ts_ms: wake_ms = ts_ms when the
                                instance waits for a type of which an
                                unconsumed event is stored; out_rowid = 1
                                when it did */
  JOP_SWEEP,                 /* ts_ms, from_seq = limit: deletes up to `limit`
                                ended instances whose retention ran out by ts_ms,
                                with their steps, attempts and events;
                                out_rowid = how many */
  /* Queue messages; every one names its queue. */
  JOP_MESSAGE_INSERT, /* queue, body, ts_ms = sent, visible_ms,
                         traceparent (may be NULL); out_rowid = the
                         message's seq */
  JOP_MESSAGE_LEASE,  /* queue, ts_ms = now, visible_ms = lease expiry,
                         lease_token, n_leases: up to n_leases visible
                         messages, oldest visible first, each gets lease
                         id "<lease_token>-<seq>" and attempts + 1;
                         max_attempts, dead_letter_queue: messages out of
                         attempts go there (or are deleted), counted in
                         out_rowid; messages/n_messages receive
                         them (free with journal_messages_free, even when
                         the commit failed); with key_pointer, oldest
                         sent first, skipping those queue_keys holds */
                      /* a message whose body or last error is sealed
                         under a key op->crypt does not list is neither
                         leased nor counted: it is put back
                         JOURNAL_PARKED_MS later (journal_crypt_listed) */
  JOP_MESSAGE_ACK,    /* queue, lease, ts_ms: deletes the message whose
                         lease it is, if still held at ts_ms; out_rowid =
                         1 when it did */
  JOP_MESSAGE_RETRY,  /* queue, lease, ts_ms, visible_ms = when to deliver
                         again, error (may be NULL), max_attempts,
                         dead_letter_queue (NULL = drop): out_rowid is a
                         JOURNAL_RETRY_* */
  /* Cron triggers; `queue` names the trigger (its key). */
  JOP_CRON_SINCE,        /* queue, ts_ms: the trigger is known from ts_ms
                            on, unless it was already */
  JOP_CRON_TICK,         /* queue, visible_ms = the tick, body = its state,
                            ts_ms = fired (JOURNAL_NONE: not), lease = the
                            instance (may be NULL), error (may be NULL):
                            claims the tick; out_rowid = 1, or 0 when the
                            tick was claimed before */
  JOP_CRON_TICK_SET,     /* queue, visible_ms = the tick, body = its new
                            state, error (may be NULL): settles a tick
                            still `fired`; out_rowid = 1 when it did */
  JOP_CRON_MISSED_EXTRA, /* queue, from_seq = n: n more missed ticks not
                            recorded one by one */
  JOP_CRON_SWEEP,        /* ts_ms: deletes tick rows older than it but
                            each trigger's newest; out_rowid = how many */
  /* rowid: restarts + 1, and the deadline ts_ms (JOURNAL_NONE: none) */
  JOP_INSTANCE_RESTARTED,
  JOP_MESSAGES_EXPIRE, /* queue, ts_ms, from_seq = limit: deletes up to
                          `limit` messages sent before ts_ms; out_rowid =
                          how many */
  /* Pipelines; `queue` names the pipeline.  A plan is the batch
   * [from_seq, event_seq] being written by host `rowid` (journal_host)
   * until visible_ms (the engine clock). */
  JOP_PIPELINE_DECLARE, /* queue: its row, unless it has one */
  JOP_PIPELINE_APPEND,  /* queue, body = the records of one send as the
                           lines of a file (each a compact JSON text and
                           a newline), from_seq = how many, ts_ms = sent:
                           they get the pipeline's next from_seq seqs in
                           their order (out_rowid = the first's), its
                           counter moved once; the pipeline must be
                           declared (else op rc DURO_E_NOT_FOUND) and the
                           lines as many as from_seq (else
                           DURO_E_INVALID_ARGUMENT, nothing stored) */
  JOP_PIPELINE_PLAN,    /* queue, from_seq, event_seq, ts_ms = planned,
                           rowid, visible_ms: records the plan unless one
                           is recorded; out_rowid = 1 when it did */
  JOP_PIPELINE_CLAIM,   /* queue, rowid, ts_ms = now, visible_ms: the
                           recorded plan becomes host rowid's until
                           visible_ms when it is its own already or its
                           holder's time ran out by ts_ms; out_rowid = 1
                           when it did */
  JOP_PIPELINE_DONE,    /* queue, from_seq, event_seq, rowid, ts_ms: the
                           plan's file is written: when that plan is still
                           recorded and host rowid's, deletes its records,
                           counts them written and clears the plan;
                           out_rowid = 1 when it did */
  /* An instance's log lines (duro_log from its plugin code). */
  JOP_LOG_APPEND, /* rowid = the instance, ts_ms, from_seq = the level,
                     step_key and event_seq = the step and attempt that
                     wrote it (NULL and 0: run()), body = the text,
                     max_attempts = how many lines the instance keeps: the
                     line gets the instance's next number (out_rowid on
                     SQLite; 0 on PostgreSQL, which queues the write),
                     and the oldest past the bound go; nothing when the
                     instance is gone */
  /* rowid: deletes the instance when it has ended, with its steps,
   * attempts, events and logs, as the sweep does; out_rowid = 1 when it
   * did (0: it is live, or gone), `deleted` (may be NULL) receives how
   * many of each of its rows went */
  JOP_INSTANCE_DELETE,
  /* rowid, ts_ms: retention_ms = ts_ms (the retention an instance that
   * ends in this batch is kept for, by the way it ended) */
  JOP_INSTANCE_RETAIN,
  /* rowid, attr: the instance's search attribute attr->name takes the
   * value (a second set replaces it); nothing when the instance is
   * gone */
  JOP_ATTRIBUTE_SET,
  /* Bulk actions' jobs (journal_bulk, host/bulk/). */
  JOP_BULK_INSERT,   /* bulk: the new job's row; out_rowid = its id */
  JOP_BULK_PROGRESS, /* bulk: its cursor, counts, errors and plan, and its
                        state and ended_ms unless it is no longer running
                        (cancelled meanwhile), where bulk->host runs it;
                        out_rowid = 1 when it did */
  JOP_BULK_CANCEL,   /* rowid = the job, ts_ms: a running job is cancelled
                        at ts_ms; out_rowid = 1 when it was running */
  JOP_BULK_CLAIM,    /* rowid = the job, from_seq = this host: a running
                        job becomes this host's when it is its own
                        already, no host's, or a dead host's (the liveness
                        the takeover of instances uses); out_rowid = 1
                        when it is this host's */
  JOP_BULK_SWEEP,    /* ts_ms, from_seq = limit: deletes up to `limit`
                        jobs that ended before ts_ms; out_rowid = how
                        many */
  JOP_VALUE_RESEAL,  /* value = a stored value as values_each gave it,
                        body = what replaces it (its plaintext sealed
                        under another key): written only if the value is
                        still what was read; out_rowid = 1 when it was,
                        0 when its row changed or went meanwhile */
} journal_op_kind;

/* One stored value of the columns journal_crypt.h's fields name, as a
 * scan of them gives it (journal_rekey.h): where it lives, which is also
 * its seal's scope, and its text as stored, sealed or not. */
typedef struct journal_value {
  int field;        /* a journal_field */
  int64_t rowid;    /* its instance's rowid (0: a queue message's) */
  const char *name; /* params: the workflow; a step's and an attempt's:
                       the step key; else NULL */
  int64_t number;   /* an attempt's number, an event's or a message's
                       seq, a log line's n; else 0 */
  const char *stored;
} journal_value;

/* Returns 0 to go on. */
typedef int (*journal_value_fn)(void *ctx, const journal_value *v);

/* What finds a value's row besides its text, for each field, in this
 * order: its instance's rowid, the step key (name), the number. */
enum { JOURNAL_AT_ROWID = 1, JOURNAL_AT_NAME = 2, JOURNAL_AT_NUMBER = 4 };
/* JOURNAL_AT_* of a field (a journal_field), or 0 for none. */
int journal_value_places(int field);

/* What a scan of values walks. */
enum { JOURNAL_VALUES_INSTANCES, JOURNAL_VALUES_MESSAGES };

/* The rows a JOP_INSTANCE_DELETE took with its instance. */
typedef struct journal_deleted {
  int64_t steps, attempts, events, logs;
} journal_deleted;

typedef struct journal_attempt {
  const char *key;
  uint32_t number;
  int64_t started_ms, ended_ms;
  const char *error; /* NULL = success */
  const char *build;
} journal_attempt;

/* One operation.  Strings are borrowed until journal_commit() returns. */
typedef struct journal_op {
  journal_op_kind kind;
  int64_t rowid;
  const journal_instance *inst;
  const journal_step *step;
  journal_attempt attempt;
  int64_t from_seq;
  int64_t event_seq;
  const char *event_type, *event_payload, *step_key;
  int64_t ts_ms;
  int clear_control;
  /* queue messages (JOP_MESSAGE_*) */
  const char *queue, *body, *lease, *error, *dead_letter_queue;
  int64_t visible_ms;
  uint32_t max_attempts;
  const char *lease_token; /* JOP_MESSAGE_LEASE */
  /* JOP_MESSAGE_LEASE of a consumer with concurrency by key
   * (queue_keys.h): the JSON pointer (NULL = none) and its limit */
  const char *key_pointer;
  uint32_t key_limit;
  /* JOP_MESSAGE_INSERT, JOP_EVENT_INSERT: its sender's trace */
  const char *traceparent;
  size_t n_leases;
  /* Set by the journal for the backend: the keys that open the values it
   * reads within the op (a keyed lease's bodies); NULL: none. */
  const struct journal_crypt *crypt;
  /* results */
  int rc;                    /* DURO_E_ALREADY_EXISTS for a duplicate insert */
  int64_t out_rowid;         /* JOP_INSTANCE_INSERT / JOP_EVENT_INSERT */
  int64_t out_owner;         /* JOP_WAKE_IF_WAITING: the host that runs the
                                instance (journal_host: this one) */
  journal_message *messages; /* JOP_MESSAGE_LEASE */
  size_t n_messages;
  journal_deleted *deleted;        /* JOP_INSTANCE_DELETE, may be NULL */
  const duro_attr *attr;           /* JOP_ATTRIBUTE_SET */
  const struct journal_bulk *bulk; /* JOP_BULK_INSERT, JOP_BULK_PROGRESS */
  const journal_value *value;      /* JOP_VALUE_RESEAL */
} journal_op;

typedef struct journal_batch {
  journal_op *ops;
  size_t n, cap;
  /* Memory the batch owns (journal_batch_own), freed by reset and free. */
  void **owned;
  size_t n_owned, cap_owned;
} journal_batch;

/* Appends an op (zeroed but for kind) and returns it to be filled. */
journal_op *journal_batch_add(journal_batch *b, journal_op_kind kind);
/* Hands malloc'ed `p` (a string an op points to, a row) to the batch,
 * which frees it when it is reset or freed (after the commit that wrote
 * it); returns p.  For a writer that
 * adds ops to a batch it does not commit itself (a driver's ops in the
 * engine's commit, driver.h). */
void *journal_batch_own(journal_batch *b, void *p);
void journal_batch_reset(journal_batch *b);
void journal_batch_free(journal_batch *b);

/* Commits the batch durably (group commit).  Returns 0 or DURO_E_STORAGE;
 * per-op results are in the ops. */
int journal_commit(journal *j, journal_batch *b);

/* Queues the batch and returns; fn(ctx, rc) is called exactly once, on
 * whichever thread commits it, after the batch is on disk (or failed).
 * The batch and everything its ops point to must live until then.  fn
 * must not call journal_commit (it runs while its thread leads). */
typedef void (*journal_done_fn)(void *ctx, int rc);
void journal_commit_async(journal *j, journal_batch *b, journal_done_fn fn,
                          void *ctx);

/* Called with each batch once it is on disk, on the thread that
 * committed it, before its committer learns of it: what tells observers
 * that rows changed.  fn must be quick and must not commit.  Set before
 * the first commit (NULL: none). */
typedef void (*journal_committed_fn)(void *ctx, const journal_batch *b);
void journal_on_commit(journal *j, journal_committed_fn fn, void *ctx);

/* journal_commit_async that never commits on the calling thread: when no
 * thread leads, the journal's writer thread (started on first use) does.
 * For callers that must not block on a disk: the HTTP loop. */
void journal_commit_background(journal *j, journal_batch *b, journal_done_fn fn,
                               void *ctx);

/* ---- reads --------------------------------------------------------------- */

/* The id (malloc'ed) of the live instance of `workflow` that holds
 * claim key `key` (journal_instance.claim_key): 0, DURO_E_NOT_FOUND (none
 * holds it, or the store keeps no claim keys), DURO_E_STORAGE. */
int journal_claim_holder(journal *j, const char *workflow, const char *key,
                         char **id);

/* Fills *out (caller frees with journal_instance_clear). DURO_E_NOT_FOUND. */
int journal_instance_get(journal *j, const char *workflow, const char *id,
                         journal_instance *out);
int journal_instance_get_rowid(journal *j, int64_t rowid,
                               journal_instance *out);
void journal_instance_clear(journal_instance *inst);

/* Steps in seq order; *out malloc'ed array, free with journal_steps_free. */
int journal_steps_load(journal *j, int64_t rowid, journal_step **out,
                       size_t *n);
void journal_steps_free(journal_step *steps, size_t n);

/* Attempts of one instance, ordered by key then number; the callback gets
 * borrowed strings. */
int journal_attempts_each(journal *j, int64_t rowid,
                          void (*fn)(void *ctx, const char *key,
                                     uint32_t number, int64_t started_ms,
                                     int64_t ended_ms, const char *error,
                                     const char *build),
                          void *ctx);

/* Unconsumed events in arrival order. */
int journal_events_pending(journal *j, int64_t rowid, journal_event **out,
                           size_t *n);
/* Every event of the instance, consumed or not, in arrival order. */
int journal_events_all(journal *j, int64_t rowid, journal_event **out,
                       size_t *n);
void journal_events_free(journal_event *ev, size_t n);

/* One log line of an instance (JOP_LOG_APPEND). */
typedef struct journal_log {
  int64_t n; /* its number in the instance, from 1, never used twice */
  int64_t ts_ms;
  int level;  /* DURO_LOG_* */
  char *step; /* the step key of the callback that wrote it; NULL: run() */
  uint32_t attempt;
  char *message;
} journal_log;
/* The instance's log lines numbered past `after`, oldest first, at most
 * `limit` of them (free with journal_logs_free). */
int journal_logs_read(journal *j, int64_t rowid, int64_t after, size_t limit,
                      journal_log **out, size_t *n);
void journal_logs_free(journal_log *v, size_t n);

/* The values as stored, sealed or not, page by page (backend.h
 * values_each; journal_rekey.h rewrites them). */
int journal_values_each(journal *j, int which, int64_t after, size_t limit,
                        const char *skip, journal_value_fn fn, void *ctx,
                        int64_t *last);

/* ---- an instance's rows whole --------------------------------------------
 * What `duro workflows instances export` writes out and the test kit's
 * import writes back into another journal (journal_rows.c): the row, the
 * steps, the failed attempts and the events, through the reads and ops
 * above, so on every backend. */

/* A failed attempt's row, owned (journal_attempt's strings are
 * borrowed). */
typedef struct journal_attempt_row {
  char *key;
  uint32_t number;
  int64_t started_ms, ended_ms;
  char *error, *build;
} journal_attempt_row;

typedef struct journal_rows {
  journal_instance inst;
  /* The parent's names (inst.parent is a rowid: it means nothing in
   * another journal); NULL when it has none or it is gone. */
  char *parent_workflow, *parent_id;
  journal_step *steps; /* in seq order */
  size_t n_steps;
  journal_attempt_row *attempts; /* by key, then number */
  size_t n_attempts;
  journal_event *events; /* in arrival order, consumed_by set */
  size_t n_events;
} journal_rows;

/* Reads them into *out (caller frees with journal_rows_free; zeroed on
 * an error), one read after another: an instance that moves meanwhile may
 * show a step newer than its row.  DURO_E_NOT_FOUND. */
int journal_rows_read(journal *j, const char *workflow, const char *id,
                      journal_rows *out);
/* Writes them as a new instance of this journal (its rowid into *rowid,
 * may be NULL): no parent (nothing here to tell of its end), its events
 * numbered anew in their order.  In three commits (its row, for a rowid;
 * the rest; the events' consumption, for their seqs): a failure between
 * them leaves part of it, so it is for a journal of one's own (the test
 * kit's), never a live host's.  DURO_E_ALREADY_EXISTS when the journal
 * has an instance of that workflow and id. */
int journal_rows_write(journal *j, const journal_rows *r, int64_t *rowid);
void journal_rows_free(journal_rows *r);

/* Rowids of instances whose wake time is in (after_ms, upto_ms], at most
 * `limit`, earliest first. */
int journal_due(journal *j, int64_t after_ms, int64_t upto_ms, size_t limit,
                int64_t *rowids, int64_t *wakes, size_t *n);

/* The smallest wake time above after_ms into *wake, JOURNAL_NONE if none.
 * Returns 0 or DURO_E_STORAGE. */
int journal_next_wake(journal *j, int64_t after_ms, int64_t *wake);

/* Calls fn for every instance that is queued or whose control column is
 * set and status not ended (crash recovery). */
int journal_recover_each(journal *j,
                         void (*fn)(void *ctx, int64_t rowid,
                                    duro_status status, int control),
                         void *ctx);

/* An instance that has not ended, as journal_live_each hands it (its
 * strings borrowed for the call). */
typedef struct journal_live_row {
  int64_t rowid;
  const char *id;
  duro_status status;
  int64_t created_ms, started_ms, wake_ms; /* JOURNAL_NONE: none */
  const char *params;
} journal_live_row;

/* Calls fn for each of this host's instances of `workflow` that have not
 * ended, in rowid order (creation order): what flow.singleton and
 * flow.debounce keep of the journal, read at start. */
typedef void (*journal_live_fn)(void *ctx, const journal_live_row *row);
int journal_live_each(journal *j, const char *workflow, journal_live_fn fn,
                      void *ctx);

/* Calls fn for each instance `parent` started (its children), in rowid
 * order. */
int journal_children_each(journal *j, int64_t parent,
                          void (*fn)(void *ctx, int64_t rowid,
                                     const char *workflow, const char *id,
                                     duro_status status),
                          void *ctx);

/* Calls fn for up to `limit` children still running whose parent has
 * ended and whose parent_close is terminate, or rollback when no
 * terminate with rollbacks is persisted for it yet (JOURNAL_PARENT_CLOSE_*
 * in parent_close). */
int journal_orphans_each(journal *j, size_t limit,
                         void (*fn)(void *ctx, int64_t rowid,
                                    const char *workflow, const char *id,
                                    int parent_close),
                         void *ctx);

/* Up to `limit` queued instances from rowid `from` on, in rowid order
 * (instances_status serves it), into rowids; *n how many. */
int journal_queued_from(journal *j, int64_t from, size_t limit, int64_t *rowids,
                        size_t *n);
/* The oldest queued instance's created_ms (JOURNAL_NONE: none), of one
 * workflow or (NULL) of every one. */
int journal_oldest_queued(journal *j, const char *workflow,
                          int64_t *created_ms);

/* Whether an instance of `workflow` that has not ended is pinned to
 * `build`. */
int journal_build_pinned(journal *j, const char *workflow, const char *build,
                         int *pinned);

/* Calls fn for each (workflow, build) that instances that have not ended
 * are pinned to, with how many. */
int journal_pinned_builds(journal *j,
                          void (*fn)(void *ctx, const char *workflow,
                                     const char *build, int64_t n),
                          void *ctx);

/* Calls fn for each of this host's instances waiting with wait_type
 * `wait_type` (a hold's reason, say: duro_engine_hold_build), with its
 * workflow. */
int journal_waiting_on(journal *j, const char *wait_type,
                       void (*fn)(void *ctx, int64_t rowid,
                                  const char *workflow),
                       void *ctx);

/* Which of a workflow's instances journal_list gives.  Times are ms; a
 * bound of 0 is none; an "after" bound takes its instant, a "before" one
 * does not.  A bound on the end leaves out the instances that have not
 * ended. */
typedef struct journal_list_filter {
  int status;         /* a duro_status, or -1 for any */
  const char *prefix; /* ids that start with it; NULL or "": any */
  int64_t created_after, created_before;
  int64_t ended_after, ended_before;
  /* search attributes, all of which must pass (n_where 0: none); the
   * first equality among them (else the first) is the one an index
   * walks, newest first */
  const duro_attr_filter *where;
  size_t n_where;
  /* only these instances: a JSON array of their ids (a bulk job's
   * chosen ones, at most DURO_BULK_IDS); NULL: any */
  const char *ids;
} journal_list_filter;

/* One instance as journal_list gives it (borrowed for the call). */
typedef struct journal_list_row {
  int64_t rowid;
  const char *id;
  duro_status status;
  int64_t created_ms, started_ms, ended_ms; /* JOURNAL_NONE: not yet */
  const char *wait_type;                    /* NULL: none */
} journal_list_row;

/* The least string greater than every string that starts with `prefix`
 * (malloc'ed; NULL: none is, or no prefix): ids in [prefix, end) are
 * those that start with it, a range an index answers. */
char *journal_prefix_end(const char *prefix);

/* A list's time range (creation or end) of at most this many instances
 * of its workflow is read from its index and sorted by rowid (an hour's
 * 3600, 5 ms); a wider one is found walking the instances newest first,
 * a page full after limit * n / matches rows (sorting it all would cost
 * more: a million rows' range). */
#define JOURNAL_LIST_SORTED_MAX 10000

/* Instances of a workflow that pass `f`, newest first, after cursor rowid
 * (0 = start), at most `limit`. */
int journal_list(journal *j, const char *workflow, const journal_list_filter *f,
                 int64_t cursor, size_t limit,
                 void (*fn)(void *ctx, const journal_list_row *row), void *ctx);

/* An instance's last step: the one with the highest call position (the
 * step running, waiting or last run), as a list shows it. */
typedef struct journal_last_step {
  int64_t rowid; /* the instance */
  const char *key, *name;
  duro_step_kind type;
  duro_step_status status;
  uint32_t attempts;
  int64_t wake_ms; /* a sleep's end, a wait's timeout, a retry's time */
} journal_last_step;

/* The last step of each instance of rowids (n of them, at most a list's
 * page): fn gets each that has one, in no order (borrowed for the call).
 * Read from the steps' primary key (instance, key): nothing written for
 * it. */
int journal_last_steps(journal *j, const int64_t *rowids, size_t n,
                       void (*fn)(void *ctx, const journal_last_step *s),
                       void *ctx);

/* The search attributes of instance rowid, in name order: fn gets each
 * (borrowed for the call). */
int journal_attributes(journal *j, int64_t rowid,
                       void (*fn)(void *ctx, const duro_attr *a), void *ctx);
/* A bulk action's job (host/bulk/): an action on every instance of a
 * workflow that passed a filter when it was made, walked newest first by
 * rowid below `cursor` and no higher than `bound` (the newest rowid when
 * it was made), its progress a row updated with each batch. */
typedef struct journal_bulk {
  int64_t id; /* JOP_BULK_INSERT assigns it */
  char *workflow;
  char *action;  /* terminate, restart, resume, pause, delete */
  int terminate; /* delete: live ones are terminated first */
  /* The filter (its prefix and ids owned: journal_bulk_clear frees
   * them); its search attributes are where_terms. */
  journal_list_filter filter;
  int64_t bound;  /* the highest rowid the walk may meet */
  int64_t cursor; /* the walk goes on below it (column `below`) */
  int64_t matched, done, failed, skipped;
  char *state;                  /* running, done, cancelled */
  int64_t created_ms, ended_ms; /* ended_ms JOURNAL_NONE while running */
  int64_t host;                 /* the host that runs it (0: none yet) */
  /* The first few failures, a line each: "<instance id>\t<error>". */
  char *errors;
  /* A restart's batch under way (bulk_run.c): "<rowid>:<restarts>,..."
   * of the instances it is about to restart, or NULL. */
  char *plan;
  /* The filter's search attribute terms ("customer:c42"), a line each,
   * parsed again against the workflow's index when a batch reads its
   * matches (the filter's `where` is empty in the row); NULL: none. */
  char *where_terms;
} journal_bulk;

void journal_bulk_clear(journal_bulk *b);
/* Job `id` into *out (caller clears it): 0, DURO_E_NOT_FOUND. */
int journal_bulk_get(journal *j, int64_t id, journal_bulk *out);
/* Jobs newest first: of `workflow` (NULL: every workflow), only the
 * running ones when `running`, at most `limit`.  The row is borrowed for
 * the call. */
int journal_bulk_list(journal *j, const char *workflow, int running,
                      size_t limit,
                      void (*fn)(void *ctx, const journal_bulk *b), void *ctx);

/* Instance counts per workflow and stored status, in the order of the
 * workflow's name, then the status's. */
int journal_count_by_status(journal *j,
                            void (*fn)(void *ctx, const char *workflow,
                                       duro_status status, int64_t n),
                            void *ctx);

/* Per queue (queue NULL = every queue that holds messages), in name
 * order: messages visible at now_ms (ready), not yet visible and not held
 * (delayed), held by an unexpired lease (in flight), and the oldest
 * message's sent_ms (JOURNAL_NONE when none). */
typedef struct journal_queue_stats {
  int64_t ready, delayed, in_flight, oldest_sent_ms;
  int64_t oldest_ready_ms; /* since when the oldest ready one is visible */
} journal_queue_stats;
int journal_queue_stats_each(journal *j, const char *queue, int64_t now_ms,
                             void (*fn)(void *ctx, const char *queue,
                                        const journal_queue_stats *st),
                             void *ctx);

/* What a consumer needs to decide on a batch: how many messages of the
 * queue are visible at now_ms (counted up to `limit`), since when the
 * oldest of those has been visible, and when the next message becomes
 * visible (a delay or a lease ending); JOURNAL_NONE when there is none. */
typedef struct journal_queue_ready_info {
  uint32_t ready;
  int64_t oldest_visible_ms, next_visible_ms;
} journal_queue_ready_info;
int journal_queue_ready(journal *j, const char *queue, int64_t now_ms,
                        uint32_t limit, journal_queue_ready_info *out);

/* The message a lease id names (its "-<seq>" suffix), or 0 for a string
 * that is not a lease id. */
int64_t journal_lease_seq(const char *lease);

/* Calls fn with each lease of token `token` still held at now_ms in the
 * queue (a batch's, after a crash). */
int journal_queue_leases(journal *j, const char *queue, int64_t now_ms,
                         const char *token,
                         void (*fn)(void *ctx, const char *lease), void *ctx);

/* Up to `limit` messages of the queue, oldest sent first, read without
 * leasing them (nothing changes: a browse).  Each one's lease is its
 * lease id while held at now_ms, else NULL; visible_ms is when it is or
 * becomes visible.  *out (free with journal_messages_free) gets *n. */
int journal_queue_peek(journal *j, const char *queue, int64_t now_ms,
                       size_t limit, journal_message **out, size_t *n);

/* How many of the queue's visible messages at now_ms wait for their
 * key's turn under a consumer's concurrency by key (queue_keys.h): the
 * JSON pointer `pointer`, at most `limit` of a key in handlers.  It
 * reads every visible message of the queue. */
int journal_queue_held(journal *j, const char *queue, int64_t now_ms,
                       const char *pointer, uint32_t limit, int64_t *held);

/* Calls fn with each queue that had messages out of retries, and how
 * many it dropped (no dead-letter queue) and dead-lettered, since the
 * database began. */
int journal_queue_counts_each(journal *j,
                              void (*fn)(void *ctx, const char *queue,
                                         int64_t dropped,
                                         int64_t dead_lettered),
                              void *ctx);

/* A cron trigger as the journal knows it: since when (JOURNAL_NONE:
 * never seen), its newest tick row (JOURNAL_NONE: none), and how its
 * ticks ended so far (counted as the rows were written: the sweep of old
 * rows leaves the counts alone). */
typedef struct journal_cron {
  int64_t since_ms, last_tick_ms;
  int64_t complete, failed, missed, skipped;
} journal_cron;
int journal_cron_state(journal *j, const char *trigger, journal_cron *out);

/* A tick row (strings valid during the callback). */
typedef struct journal_cron_tick {
  int64_t tick_ms;
  const char *state;
  int64_t fired_ms; /* JOURNAL_NONE: never fired */
  const char *instance, *error;
} journal_cron_tick;
/* Calls fn with the trigger's newest `limit` ticks (of `state`, or any
 * when NULL), newest first. */
int journal_cron_ticks(journal *j, const char *trigger, const char *state,
                       size_t limit,
                       void (*fn)(void *ctx, const journal_cron_tick *t),
                       void *ctx);

/* A pipeline as the journal knows it (journal_pipeline_get): its counts
 * since the database began, the records waiting (accepted, not yet
 * written: `backlog` of them, `backlog_bytes`, the oldest sent at
 * oldest_ms), and the plan being written (plan_first 0: none). */
typedef struct journal_pipeline {
  int64_t next_seq; /* the seq the next record gets, less one */
  int64_t accepted, accepted_bytes, written, written_bytes, files;
  int64_t backlog, backlog_bytes;
  int64_t oldest_ms;     /* JOURNAL_NONE: nothing waits */
  int64_t last_flush_ms; /* JOURNAL_NONE: never */
  int64_t plan_first, plan_last, plan_ms, plan_host, plan_until;
} journal_pipeline;
/* DURO_E_NOT_FOUND when the pipeline was never declared. */
int journal_pipeline_get(journal *j, const char *pipeline,
                         journal_pipeline *out);
/* One stored send of a pipeline: records first..last, `bytes` in all
 * (each record's text and a newline); body (when asked for) their lines,
 * `len` bytes, borrowed for the callback. */
typedef struct journal_pipeline_send {
  int64_t first, last, bytes, sent_ms;
  const char *body;
  size_t len;
} journal_pipeline_send;
/* Calls fn with the pipeline's sends from the one holding from_seq up to
 * the one holding to_seq, in seq order, at most `limit` of them, until fn
 * returns nonzero; with_body 0 leaves body NULL (and unread). */
int journal_pipeline_sends(journal *j, const char *pipeline, int64_t from_seq,
                           int64_t to_seq, size_t limit, int with_body,
                           int (*fn)(void *ctx, const journal_pipeline_send *s),
                           void *ctx);
/* Calls fn with the pipeline's records of seq from from_seq to to_seq, in
 * seq order, at most `limit` of them, until fn returns nonzero; `bytes`
 * is the record's size in a file (its text and a newline), body its text
 * (NUL-terminated, borrowed for the callback). */
int journal_pipeline_records(journal *j, const char *pipeline, int64_t from_seq,
                             int64_t to_seq, size_t limit,
                             int (*fn)(void *ctx, int64_t seq, const char *body,
                                       int64_t bytes, int64_t sent_ms),
                             void *ctx);

void journal_messages_free(journal_message *m, size_t n);

/* How long group commits take (one observation per transaction) and how
 * many batches they carried. */
struct metrics_hist;
const struct metrics_hist *journal_commit_latency(journal *j);
uint64_t journal_batches_committed(journal *j);

/* 1 while writes fail (the last group commit failed), with its message in
 * msg (may be NULL); 0 once one succeeds again.  *failures (may be NULL):
 * failed group commits so far. */
int journal_failing(journal *j, char *msg, size_t len, uint64_t *failures);

/* The underlying error message of the calling thread's last failure (for
 * logs); a failed group commit's message reaches every thread that
 * waited on it. */
/* ---- several hosts on one store ------------------------------------------
 * On a store that several hosts share (PostgreSQL), each instance is run
 * by one host, its owner, under that host's lease; see pg_hosts.c.  On one that
 * has a single host (SQLite) these do nothing: every instance is the
 * host's, and journal_host is 0. */

/* What a joined journal tells its host, from a thread of the journal's:
 * notice(ctx, text) for each notice another host sent it (journal_notify)
 * and "resync" after notices may have been missed; lost(ctx), once, when
 * the host's lease was found lost (another host took over its instances):
 * the host must stop, for its writes fail from then on.  And what it asks
 * of it: counts(ctx) (may be NULL), at each renewal of the lease, the
 * host's counts as a JSON object's text (malloc'd, the journal frees it;
 * NULL: none), kept with the host's row for every host to read
 * (journal_host_row.counts). */
typedef struct store_host_hooks {
  void (*notice)(void *ctx, const char *text);
  void (*lost)(void *ctx);
  char *(*counts)(void *ctx);
  void *ctx;
} store_host_hooks;

/* Registers this journal's opener as a host holding a lease of lease_ms
 * that the journal renews; hooks is copied.  0, or DURO_E_STORAGE with
 * why in err. */
int journal_join(journal *j, int64_t lease_ms, const store_host_hooks *hooks,
                 char *err, size_t errlen);
/* This host's id on the store; 0 when it has not joined one. */
int64_t journal_host(journal *j);
/* Slots the hosts of a shared store count together (flow control's
 * concurrency across hosts): `limit` slots under `base` (its low 20 bits
 * clear), each held by at most one host at a time, and given back by
 * the store itself when the host that held it dies.  Shared: 1 on a
 * joined store that has them (PostgreSQL), else 0 and the others refuse.
 * A pass (below) gives back and takes for several keys in one round
 * trip; take and give are its one-key forms.  Take: up to `want` of the
 * slots not in mine[] into got[] (0, with *n_got possibly 0 when the
 * others hold them all), and the epoch of the store's slots (when it
 * moves on, every slot held before is lost).  Give: one slot back
 * (nothing when its epoch is past). */
int journal_slots_shared(journal *j);
int journal_slots_take(journal *j, int64_t base, uint32_t limit,
                       const uint32_t *mine, size_t n_mine, uint32_t want,
                       uint32_t *got, size_t *n_got, uint64_t *epoch);
int journal_slots_give(journal *j, int64_t base, uint32_t slot, uint64_t epoch);
/* Several keys' takes and gives in one round trip: each job's give[]
 * given back (when its give_epoch is the store's), then up to `want` of
 * the slots not in its mine[] taken into its got[] (room for want).
 * *epoch as for a take.
 *
 * And the hosts' turns at a key (so that a host holding every slot of a
 * key does not serve its own waiters while another host's wait): a host
 * short of a key's slots marks it, a host holding them asks whether
 * another host marks it.  `mark` is whether the key should be marked by
 * this host after the pass, `marked` whether it was (counted only when
 * mark_epoch is the store's: a lost connection took the mark with it),
 * and comes back as whether it is; `ask` asks, `contended` the answer. */
typedef struct journal_slots_job {
  int64_t base;
  uint32_t limit, want;
  const uint32_t *mine, *give;
  size_t n_mine, n_give;
  uint64_t give_epoch;
  uint32_t *got;
  size_t n_got;
  int mark, marked, ask, contended;
  uint64_t mark_epoch;
} journal_slots_job;
int journal_slots_pass(journal *j, journal_slots_job *jobs, size_t n,
                       uint64_t *epoch);
/* Rates the hosts of a shared store count together (flow control's rate
 * rules and shared resources' rates across hosts): each key a
 * theoretical arrival time (tat, ms of the hosts' clocks, which NTP
 * keeps in step) in the store, spaced as the generic cell rate algorithm
 * does.  A job takes up to `want` starts of key `key` at `now_ms`: while
 * now_ms >= tat - tolerance_ms, one start, tat = max(tat, at_ms) +
 * interval_ms; `got` the starts taken and `tat` the key's after.  Every
 * job in one transaction (keys locked in ascending order, so hosts never
 * deadlock); 0, or DURO_E_STORAGE (none taken), DURO_E_INVALID_ARGUMENT
 * on a store that is not shared (journal_slots_shared). */
typedef struct journal_rates_job {
  int64_t key;
  double interval_ms, tolerance_ms, at_ms;
  uint32_t want, got;
  double tat;
} journal_rates_job;
int journal_rates_take(journal *j, double now_ms, journal_rates_job *jobs,
                       size_t n);
/* Makes live instance `id` of `workflow` the holder of claim key `key`
 * (journal_instance.claim_key) unless another live instance of the
 * workflow holds it: flow.singleton's turn across the hosts of a shared
 * store.  0: `id` holds it (now, or already did); DURO_E_BUSY: another
 * holds it, named in *holder (malloc'ed, NULL when it ended meanwhile);
 * DURO_E_NOT_FOUND: `id` is not live; DURO_E_STORAGE;
 * DURO_E_INVALID_ARGUMENT on a store that is not shared. */
int journal_claim_take(journal *j, const char *workflow, const char *key,
                       const char *id, char **holder);
/* flow.debounce across the hosts of a shared store: a pending instance's
 * row holds its key's claim key until its start is due.  When its start
 * comes if its key stays quiet: now_ms + period_ms, but no later than
 * max_wait_ms (0: no bound) after the instance was created. */
typedef struct journal_claim_due {
  int64_t now_ms, period_ms, max_wait_ms;
} journal_claim_due;
/* Merges a create into the pending instance of `workflow` whose row holds
 * claim key `key`: its params become `params` (NULL: null), its search
 * attributes attrs[n_attrs] (those the params give), in one statement,
 * and its start moves as `due` says.  0 (the instance's id in *id,
 * malloc'ed), DURO_E_NOT_FOUND (no instance not yet started holds it),
 * DURO_E_STORAGE, DURO_E_INVALID_ARGUMENT on a store that is not shared. */
int journal_claim_merge(journal *j, const char *workflow, const char *key,
                        const char *params, const duro_attr *attrs,
                        size_t n_attrs, const journal_claim_due *due,
                        char **id);
/* The pending instance `id` is due at now_ms: its row lets go of its claim
 * key, so that no create merges into it any more, and the params it
 * starts with are in *params (malloc'ed): 0.  DURO_E_BUSY: a merge moved
 * its start to *wake_ms, with *params (it keeps the key); DURO_E_NOT_FOUND:
 * its row holds no key (let go of before, or never held); DURO_E_STORAGE;
 * DURO_E_INVALID_ARGUMENT on a store that is not shared. */
int journal_claim_release(journal *j, const char *workflow, const char *id,
                          int64_t now_ms, char **params, int64_t *wake_ms);
/* Whether this host surely still holds its lease, so that it may start a
 * step's callback (a host frozen past its lease, SIGSTOP or a paused VM,
 * must not run steps that the host that took over completed meanwhile).
 * 1 on a store with one host, at the cost of a load; on a shared one, 1
 * while the last renewal started less than two thirds of the lease ago
 * (on a clock that counts the time a process was stopped or the machine
 * suspended); past that, it waits for the lease keeper's next renewal
 * to tell, for up to a lease.  0 when the lease was lost, or could not
 * be renewed in that time. */
int journal_lease_held(journal *j);

/* The hosts of a joined store (journal_join) that live, or that were
 * found dead within a day, by id: each one's name (its machine's) and
 * pid, when it joined and last renewed its lease and how long ago that
 * is (the server's clock), its lease, whether a takeover found it dead,
 * and how many instances it owns that have not ended.  Borrowed for the
 * call.  DURO_E_INVALID_ARGUMENT on a store one host has to itself. */
typedef struct journal_host_row {
  int64_t id;
  const char *name;
  int64_t pid;
  int64_t started_ms, heartbeat_ms, heartbeat_age_ms, lease_ms;
  int dead;
  int64_t live;
  const char *counts; /* its hooks' counts at its last renewal, or NULL */
} journal_host_row;
int journal_hosts_each(journal *j,
                       void (*fn)(void *ctx, const journal_host_row *row),
                       void *ctx);
/* The other hosts whose lease holds, each with its id, its last
 * heartbeat and the counts it left (the rest of the row unset): what a
 * host with a backlog looks at for one to hand work to.  Cheap: it counts
 * no instances. */
int journal_hosts_idle(journal *j,
                       void (*fn)(void *ctx, const journal_host_row *row),
                       void *ctx);
/* Has the lease renewed (and the counts left with it) within about 100 ms
 * rather than at its next third. */
void journal_renew_soon(journal *j);
/* Moves to host `to` those of instances rowids[0..n) that are still this
 * host's, queued and without a control request, if `to` is not dead and
 * this host's lease holds, and tells `to` (a notice {"h":[least rowid,
 * count]} sent at the commit).  The caller holds each of them idle (no
 * activation or control operation of its own can begin on them) until
 * this returns.  The moved ones into moved[] (room for n), how many into
 * *n_moved.  See pg_handoff.c. */
int journal_hand_off(journal *j, const int64_t *rowids, size_t n, int64_t to,
                     int64_t *moved, size_t *n_moved);
/* Until when (clock_boot_ms) this host's lease surely holds, as
 * journal_lease_held looks without waiting: what a step's callback handed
 * to another process must begin before, since that process may be frozen
 * with this one (a paused VM).  INT64_MAX on a store with one host; 0 once
 * the lease was lost. */
int64_t journal_lease_until(journal *j);
/* Renews this host's lease, marks dead the hosts whose lease ran out,
 * and moves up to `limit` of the unended instances of dead hosts (or of
 * none) to this host, calling fn for each moved one with its wake time
 * (JOURNAL_NONE for none).  *moved: how many. */
int journal_takeover(journal *j, size_t limit,
                     void (*fn)(void *ctx, int64_t rowid, int64_t wake_ms),
                     void *ctx, size_t *moved);
/* The host that runs instance `rowid`, into *owner: this host when it
 * already did, or when its owner is no live host (the instance is then
 * taken over here at once).  DURO_E_NOT_FOUND when there is no such
 * instance. */
int journal_adopt(journal *j, int64_t rowid, int64_t *owner);
/* Sends `text` (under 8000 bytes) to host `host`'s notice hook. */
int journal_notify(journal *j, int64_t host, const char *text);
/* No hook is called from now on (before what they use goes away); the
 * host stays joined until the journal closes. */
void journal_quiet(journal *j);

/* Plugin builds kept in a shared store for every host (a host that takes
 * over an instance pinned to a build it never had fetches it there).
 * put: stores the file at `path` as build `hash` of `plugin`, or marks it
 * seen at now_ms when it is there already.  get: writes build `hash` to
 * `path`; DURO_E_NOT_FOUND when the store has none.  prune: deletes the
 * builds last seen before `seen_before_ms` that no instance that has not
 * ended is pinned to, *n of them.  On a store with one host: put and
 * prune do nothing, get answers DURO_E_NOT_FOUND. */
int journal_build_put(journal *j, const char *hash, const char *plugin,
                      const char *path, int64_t now_ms);
int journal_build_get(journal *j, const char *hash, const char *path);
int journal_builds_prune(journal *j, int64_t seen_before_ms, size_t *n);

const char *journal_errmsg(journal *j);

/* Checks that the store is still the one opened (backend.h's check).
 * Every group commit checks it too, once committed and before any of its
 * batches is reported done.  Once it is found gone, every commit fails
 * with why (naming the path) and journal_failing says so until the
 * journal closes: a write that cannot be kept is refused, never
 * acknowledged.  Returns 1 the first time a call sees it gone, found by
 * this call or by a commit (the message in journal_errmsg), else 0. */
int journal_check(journal *j);

#endif
