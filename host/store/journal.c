/* journal.c — the journal's backend-independent half: batches, group
 * commit, error state and metrics; every read and write reaches the
 * database through a backend (backend.h; sqlite.c is the one there is).
 *
 * Group commit: journal_commit() queues the caller's batch.  One thread at
 * a time leads: it takes every batch queued so far, runs them in one
 * transaction, wakes their owners one by one, and passes the leadership to
 * the owner of the next batch.  Owners arriving during a commit wait for
 * the next one.  journal_commit_async() queues a batch nobody waits for:
 * the leader runs its callback after the commit, so a worker can end an
 * activation without waiting for its last fsync.  Asynchronous batches
 * are the writer thread's: a thread that led its own group leaves the
 * asynchronous ones behind it to the writer, and so returns once its
 * batch is durable.  A batch is reported done only
 * after the backend's commit returned, and with synchronous=FULL that means
 * after the fsync, and once the backend's check found the store still the
 * one opened (not deleted or replaced under the host). */
#include "journal.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "duro.h"
#include "journal_seal.h"
#include "metrics.h"
#include "util.h"

/* A batch waiting in the commit queue.  Each has its own condition
 * variable, so a commit wakes exactly the threads it concerns. */
typedef struct pending {
  journal_batch *batch;
  int done;    /* written before `wake` is posted */
  int handoff; /* the leadership was passed to this waiter */
  int rc;
  /* Synchronous: its owner sleeps here, without the queue's mutex, so a
   * group of waiters wakes without contending for it.  Posted once: when
   * the batch is done, or when the leadership passes to its owner. */
  sem_t wake;
  /* The batch's ops as the backend writes them, their values sealed
   * (journal_set_crypt; ops NULL: written as they are), made by the
   * thread that queued it and freed once its group is applied. */
  journal_sealed sealed;
  journal_done_fn fn; /* asynchronous: called once committed */
  void *ctx;
  struct pending *next;
  char err[256]; /* the group's failure, for the waiting thread */
} pending;

struct journal {
  const store_backend *be;
  void *db; /* the backend's handle */

  pthread_mutex_t mu; /* guards the queue and the leadership */
  pending *head, *tail;
  int leading; /* some thread is committing groups */
  metrics_hist commit_us;
  uint64_t batches;
  /* Writes are failing: the last group commit failed (mu). */
  int failing;
  char failing_err[256];
  uint64_t failures; /* failed group commits so far (mu) */
  /* The store is gone (backend's check, after each group's commit and
   * from journal_check): every group fails with lost_err, written once
   * before lost is set (mu).  lost_told: journal_check reported it. */
  int lost, lost_told;
  char lost_err[256];
  /* Serialises the backend's check: the leader and the scheduler's
   * journal_check both call it, and it learns files as it goes. */
  pthread_mutex_t check_mu;
  /* The writer thread, started by the first background commit: it leads
   * when nobody does, so a caller that must not block (the HTTP loop)
   * never commits on its own thread. */
  pthread_t writer;
  pthread_cond_t writer_cv;
  int writer_started, closing;
  int64_t host;                   /* journal_join's id; 0: not joined */
  journal_committed_fn committed; /* journal_on_commit's */
  const journal_crypt *crypt;     /* journal_set_crypt's, borrowed */
  void *committed_ctx;
};

/* The last failure's message, per thread (like errno): readers fail on
 * their own threads, and a group commit's failure is copied to every
 * thread that waited on it. */
static __thread char last_err[256];

void store_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_err, sizeof last_err, fmt, ap);
  va_end(ap);
}

int store_pipeline_lines_are(const char *body, size_t len, int64_t n) {
  int64_t k = 0;
  for (const char *p = body, *end = body + len;
       p < end && (p = memchr(p, '\n', (size_t)(end - p))); p++)
    k++;
  return n > 0 && k == n && body[len - 1] == '\n';
}

/* ---- open / close -------------------------------------------------------- */

int journal_open(const char *path, int synchronous_full, journal **out,
                 char *err, size_t errlen) {
  return journal_open_backend(&store_sqlite, path, synchronous_full, out, err,
                              errlen);
}

const store_backend *store_backend_postgresql(void) {
#if DURO_HAVE_PG
  return &store_pg;
#else
  return NULL;
#endif
}

int journal_open_backend(const store_backend *be, const char *path,
                         int synchronous_full, journal **out, char *err,
                         size_t errlen) {
  void *db = NULL;
  int rc = be->open(path, synchronous_full, &db, err, errlen);
  if (rc)
    return rc;
  journal *j = xcalloc(1, sizeof *j);
  j->be = be;
  j->db = db;
  pthread_mutex_init(&j->mu, NULL);
  pthread_mutex_init(&j->check_mu, NULL);
  pthread_cond_init(&j->writer_cv, NULL);
  *out = j;
  return 0;
}

void journal_close(journal *j) {
  if (!j)
    return;
  pthread_mutex_lock(&j->mu);
  j->closing = 1;
  pthread_cond_broadcast(&j->writer_cv);
  int writer = j->writer_started;
  pthread_mutex_unlock(&j->mu);
  if (writer)
    pthread_join(j->writer, NULL);
  pthread_cond_destroy(&j->writer_cv);
  j->be->close(j->db);
  pthread_mutex_destroy(&j->check_mu);
  pthread_mutex_destroy(&j->mu);
  free(j);
}

void journal_set_crypt(journal *j, const journal_crypt *c) { j->crypt = c; }

const journal_crypt *journal_get_crypt(const journal *j) { return j->crypt; }

int journal_values_each(journal *j, int which, int64_t after, size_t limit,
                        const char *skip, journal_value_fn fn, void *ctx,
                        int64_t *last) {
  return j->be->values_each(j->db, which, after, limit, skip, fn, ctx, last);
}

void journal_drain(journal *j) {
  pthread_mutex_lock(&j->mu);
  while (j->head || j->leading) {
    pthread_mutex_unlock(&j->mu);
    nanosleep(&(struct timespec){0, 1000000}, NULL);
    pthread_mutex_lock(&j->mu);
  }
  pthread_mutex_unlock(&j->mu);
}

int journal_join(journal *j, int64_t lease_ms, const store_host_hooks *hooks,
                 char *err, size_t errlen) {
  if (!j->be->join)
    return 0;
  return j->be->join(j->db, lease_ms, hooks, &j->host, err, errlen);
}

int64_t journal_host(journal *j) { return j->host; }

int journal_slots_shared(journal *j) { return j->host && j->be->slots_pass; }

int journal_slots_pass(journal *j, journal_slots_job *jobs, size_t n,
                       uint64_t *epoch) {
  for (size_t i = 0; i < n; i++)
    jobs[i].n_got = jobs[i].contended = 0;
  if (!journal_slots_shared(j))
    return DURO_E_INVALID_ARGUMENT;
  return j->be->slots_pass(j->db, jobs, n, epoch);
}

int journal_rates_take(journal *j, double now_ms, journal_rates_job *jobs,
                       size_t n) {
  for (size_t i = 0; i < n; i++)
    jobs[i].got = 0;
  if (!journal_slots_shared(j) || !j->be->rates_take)
    return DURO_E_INVALID_ARGUMENT;
  return j->be->rates_take(j->db, now_ms, jobs, n);
}

int journal_claim_take(journal *j, const char *workflow, const char *key,
                       const char *id, char **holder) {
  *holder = NULL;
  if (!journal_slots_shared(j) || !j->be->claim_take)
    return DURO_E_INVALID_ARGUMENT;
  return j->be->claim_take(j->db, workflow, key, id, holder);
}

int journal_claim_merge(journal *j, const char *workflow, const char *key,
                        const char *params, const duro_attr *attrs,
                        size_t n_attrs, const journal_claim_due *due,
                        char **id) {
  *id = NULL;
  if (!journal_slots_shared(j) || !j->be->claim_merge)
    return DURO_E_INVALID_ARGUMENT;
  char *sealed = j->crypt ? journal_crypt_seal(j->crypt, JOURNAL_FIELD_PARAMS,
                                               0, workflow, params)
                          : NULL;
  int rc = j->be->claim_merge(j->db, workflow, key, sealed ? sealed : params,
                              attrs, n_attrs, due, id);
  free(sealed);
  return rc;
}

int journal_claim_release(journal *j, const char *workflow, const char *id,
                          int64_t now_ms, char **params, int64_t *wake_ms) {
  *params = NULL;
  *wake_ms = 0;
  if (!journal_slots_shared(j) || !j->be->claim_release)
    return DURO_E_INVALID_ARGUMENT;
  int rc = j->be->claim_release(j->db, workflow, id, now_ms, params, wake_ms);
  if ((rc == 0 || rc == DURO_E_BUSY) &&
      journal_open_value(j->crypt, JOURNAL_FIELD_PARAMS, 0, workflow, params) !=
          0) {
    free(*params);
    *params = NULL;
    return DURO_E_STORAGE;
  }
  return rc;
}

int journal_slots_take(journal *j, int64_t base, uint32_t limit,
                       const uint32_t *mine, size_t n_mine, uint32_t want,
                       uint32_t *got, size_t *n_got, uint64_t *epoch) {
  journal_slots_job job = {.base = base,
                           .limit = limit,
                           .want = want,
                           .mine = mine,
                           .n_mine = n_mine,
                           .got = got};
  int rc = journal_slots_pass(j, &job, 1, epoch);
  *n_got = job.n_got;
  return rc;
}

int journal_slots_give(journal *j, int64_t base, uint32_t slot,
                       uint64_t epoch) {
  journal_slots_job job = {
      .base = base, .give = &slot, .n_give = 1, .give_epoch = epoch};
  uint64_t now;
  return journal_slots_pass(j, &job, 1, &now);
}

int journal_hosts_each(journal *j,
                       void (*fn)(void *ctx, const journal_host_row *row),
                       void *ctx) {
  if (!j->host || !j->be->hosts_each)
    return DURO_E_INVALID_ARGUMENT;
  return j->be->hosts_each(j->db, fn, ctx);
}

int journal_hosts_idle(journal *j,
                       void (*fn)(void *ctx, const journal_host_row *row),
                       void *ctx) {
  if (!j->host || !j->be->hosts_idle)
    return DURO_E_INVALID_ARGUMENT;
  return j->be->hosts_idle(j->db, fn, ctx);
}

void journal_renew_soon(journal *j) {
  if (j->host && j->be->renew_soon)
    j->be->renew_soon(j->db);
}

int journal_hand_off(journal *j, const int64_t *rowids, size_t n, int64_t to,
                     int64_t *moved, size_t *n_moved) {
  *n_moved = 0;
  if (!j->host || !j->be->hand_off)
    return DURO_E_INVALID_ARGUMENT;
  return n ? j->be->hand_off(j->db, rowids, n, to, moved, n_moved) : 0;
}

int journal_lease_held(journal *j) {
  return !j->host || !j->be->lease_held || j->be->lease_held(j->db);
}

int64_t journal_lease_until(journal *j) {
  if (!j->host || !j->be->lease_until)
    return INT64_MAX;
  return j->be->lease_until(j->db);
}

int journal_takeover(journal *j, size_t limit,
                     void (*fn)(void *ctx, int64_t rowid, int64_t wake_ms),
                     void *ctx, size_t *moved) {
  *moved = 0;
  if (!j->be->takeover || !j->host)
    return 0;
  return j->be->takeover(j->db, limit, fn, ctx, moved);
}

int journal_adopt(journal *j, int64_t rowid, int64_t *owner) {
  *owner = j->host;
  if (!j->be->adopt || !j->host)
    return 0;
  return j->be->adopt(j->db, rowid, owner);
}

int journal_build_put(journal *j, const char *hash, const char *plugin,
                      const char *path, int64_t now_ms) {
  if (!j->be->build_put || !j->host)
    return 0;
  return j->be->build_put(j->db, hash, plugin, path, now_ms);
}

int journal_build_get(journal *j, const char *hash, const char *path) {
  if (!j->be->build_get || !j->host)
    return DURO_E_NOT_FOUND;
  return j->be->build_get(j->db, hash, path);
}

int journal_builds_prune(journal *j, int64_t seen_before_ms, size_t *n) {
  *n = 0;
  if (!j->be->builds_prune || !j->host)
    return 0;
  return j->be->builds_prune(j->db, seen_before_ms, n);
}

void journal_quiet(journal *j) {
  if (j->be->quiet)
    j->be->quiet(j->db);
}

int journal_notify(journal *j, int64_t host, const char *text) {
  return j->be->notify ? j->be->notify(j->db, host, text) : DURO_E_STORAGE;
}

const char *journal_errmsg(journal *j) {
  (void)j;
  return last_err;
}

int journal_failing(journal *j, char *msg, size_t len, uint64_t *failures) {
  pthread_mutex_lock(&j->mu);
  int failing = j->failing;
  if (msg && len)
    snprintf(msg, len, "%s", failing ? j->failing_err : "");
  if (failures)
    *failures = j->failures;
  pthread_mutex_unlock(&j->mu);
  return failing;
}

/* The backend's check (backend.h), one caller at a time. */
static int check_store(journal *j) {
  if (!j->be->check)
    return 0;
  pthread_mutex_lock(&j->check_mu);
  int rc = j->be->check(j->db);
  pthread_mutex_unlock(&j->check_mu);
  return rc;
}

/* The store is gone, for good: why is this thread's last_err (mu held). */
static void lose_locked(journal *j) {
  if (j->lost)
    return;
  memcpy(j->lost_err, last_err, sizeof j->lost_err);
  j->lost = 1;
}

int journal_check(journal *j) {
  pthread_mutex_lock(&j->mu);
  int lost = j->lost;
  pthread_mutex_unlock(&j->mu);
  int found = !lost && check_store(j) != 0;
  pthread_mutex_lock(&j->mu);
  if (found) {
    lose_locked(j);
    memcpy(j->failing_err, j->lost_err, sizeof j->failing_err);
    j->failing = 1;
    j->failures++;
  }
  /* Found here or by a commit (lead): said once. */
  int tell = j->lost && !j->lost_told;
  if (tell) {
    j->lost_told = 1;
    memcpy(last_err, j->lost_err, sizeof last_err);
  }
  pthread_mutex_unlock(&j->mu);
  return tell;
}

const struct metrics_hist *journal_commit_latency(journal *j) {
  return &j->commit_us;
}

uint64_t journal_batches_committed(journal *j) {
  pthread_mutex_lock(&j->mu);
  uint64_t n = j->batches;
  pthread_mutex_unlock(&j->mu);
  return n;
}

/* ---- batches ------------------------------------------------------------- */

journal_op *journal_batch_add(journal_batch *b, journal_op_kind kind) {
  if (b->n == b->cap) {
    b->cap = b->cap ? b->cap * 2 : 8;
    b->ops = xrealloc(b->ops, b->cap * sizeof *b->ops);
  }
  journal_op *op = &b->ops[b->n++];
  memset(op, 0, sizeof *op);
  op->kind = kind;
  return op;
}

void *journal_batch_own(journal_batch *b, void *p) {
  if (b->n_owned == b->cap_owned) {
    b->cap_owned = b->cap_owned ? b->cap_owned * 2 : 4;
    b->owned = xrealloc(b->owned, b->cap_owned * sizeof *b->owned);
  }
  b->owned[b->n_owned++] = p;
  return p;
}

static void batch_free_owned(journal_batch *b) {
  for (size_t i = 0; i < b->n_owned; i++)
    free(b->owned[i]);
  b->n_owned = 0;
}

void journal_batch_reset(journal_batch *b) {
  b->n = 0;
  batch_free_owned(b);
}

void journal_batch_free(journal_batch *b) {
  batch_free_owned(b);
  free(b->owned);
  free(b->ops);
  memset(b, 0, sizeof *b);
}

int64_t journal_lease_seq(const char *lease) {
  const char *dash = lease ? strrchr(lease, '-') : NULL;
  if (!dash || !dash[1] || strlen(dash + 1) > 18)
    return 0; /* no message has seq 0 */
  int64_t seq = 0;
  for (const char *p = dash + 1; *p; p++) {
    if (*p < '0' || *p > '9')
      return 0;
    seq = seq * 10 + (*p - '0');
  }
  return seq;
}

/* ---- group commit -------------------------------------------------------- */

/* Runs every batch of the group in one transaction.  A failure fails the
 * whole group: nothing of it is reported done.  *gone: the store was
 * found deleted or replaced once the group committed. */
static int commit_group(journal *j, pending *first, pending *last, int lost,
                        int *gone) {
  const store_backend *be = j->be;
  if (lost) {
    store_error("%s", j->lost_err);
    return DURO_E_STORAGE;
  }
  int rc = be->begin(j->db);
  for (pending *p = first; !rc; p = p->next) {
    for (size_t i = 0; i < p->batch->n && !rc; i++) {
      journal_op *op = &p->batch->ops[i];
      if (p->sealed.ops) {
        rc = be->apply(j->db, &p->sealed.ops[i]);
        journal_seal_results(j->crypt, op, &p->sealed.ops[i]);
      } else {
        rc = be->apply(j->db, op);
        /* without keys, a sealed message is still not delivered sealed */
        if (op->kind == JOP_MESSAGE_LEASE)
          journal_seal_results(NULL, op, op);
      }
    }
    if (p == last)
      break;
  }
  if (rc == 0)
    rc = be->commit(j->db);
  /* A rewrite's count is read with the commit on PostgreSQL (pipelined):
   * the sealed copy holds it only now. */
  for (pending *p = first; rc == 0 && j->crypt; p = p->next) {
    for (size_t i = 0; p->sealed.ops && i < p->batch->n; i++)
      if (p->batch->ops[i].kind == JOP_VALUE_RESEAL)
        p->batch->ops[i].out_rowid = p->sealed.ops[i].out_rowid;
    if (p == last)
      break;
  }
  /* Files deleted or replaced since the last group took this one where
   * no restart finds it: it is refused, not acknowledged.  Checked after
   * the commit returned, so a deletion up to its fsync is seen; the
   * scheduler's pass (journal_check) alone left up to a second of
   * acknowledged and lost writes.  Nothing is left to roll back. */
  if (rc == 0 && (rc = check_store(j)) != 0) {
    *gone = 1;
    return rc;
  }
  /* Never leave a failed transaction open, or every later batch would
   * join a transaction that cannot commit; the message stays the one of
   * the failure, not of the rollback. */
  if (rc) {
    char keep[sizeof last_err];
    memcpy(keep, last_err, sizeof keep);
    be->rollback(j->db);
    memcpy(last_err, keep, sizeof keep);
  }
  return rc;
}

static void enqueue(journal *j, pending *p) {
  if (j->tail)
    j->tail->next = p;
  else
    j->head = p;
  j->tail = p;
}

static void *writer_main(void *arg);

/* Whether the writer thread runs, started here if it did not yet (mu
 * held). */
static int writer_running(journal *j) {
  if (!j->writer_started &&
      pthread_create(&j->writer, NULL, writer_main, j) == 0)
    j->writer_started = 1;
  return j->writer_started;
}

/* Commits groups while this thread holds the leadership (mu held on entry
 * and on return).  `mine` is the caller's own waiting batch, or NULL for an
 * asynchronous caller.  A caller other than the writer thread leads one
 * group, the one that holds its own batch, and then passes the leadership
 * on: to the owner of the next batch when that is a synchronous waiter,
 * else to the writer thread, whose work asynchronous batches are.  So no
 * thread that committed once (the scheduler, a worker) stays the committer
 * for a stream of other threads' batches.  The writer keeps going while
 * asynchronous batches come. */
static void lead(journal *j, pending *mine, int writer) {
  for (;;) {
    pending *first = j->head;
    if (!first) {
      j->leading = 0;
      return;
    }
    pending *last = j->tail; /* later arrivals wait for the next group */
    int lost = j->lost;
    pthread_mutex_unlock(&j->mu);
    int64_t t0 = metrics_now_us();
    int gone = 0;
    int rc = commit_group(j, first, last, lost, &gone);
    metrics_hist_observe(&j->commit_us, metrics_now_us() - t0);
    for (pending *p = first;; p = p->next) {
      journal_sealed_free(&p->sealed);
      if (p == last)
        break;
    }
    pthread_mutex_lock(&j->mu);
    if (gone)
      lose_locked(j);
    j->failing = rc != 0;
    if (rc) {
      memcpy(j->failing_err, last_err, sizeof j->failing_err);
      j->failures++;
    }

    j->head = last->next;
    if (!j->head)
      j->tail = NULL;
    for (pending *p = first;; p = p->next) {
      p->rc = rc;
      if (rc)
        memcpy(p->err, last_err, sizeof p->err);
      p->done = 1;
      j->batches++;
      if (p == last)
        break;
    }
    /* Unlocked from here: the group is off the queue, and a waiter owns
     * its pending again as soon as it is posted (read `next` first).
     * Asynchronous callbacks must not commit. */
    pthread_mutex_unlock(&j->mu);
    for (pending *p = first, *next;; p = next) {
      int end = p == last;
      next = p->next;
      if (!p->rc && j->committed)
        j->committed(j->committed_ctx, p->batch);
      if (p->fn) {
        p->fn(p->ctx, p->rc);
        free(p);
      } else if (p != mine) {
        sem_post(&p->wake);
      }
      if (end)
        break;
    }
    pthread_mutex_lock(&j->mu);
    if (j->head && !j->head->fn) {
      j->head->handoff = 1;
      sem_post(&j->head->wake);
      return; /* `leading` stays set: the leadership moved */
    }
    /* Without a writer thread (none could be started) this one goes on. */
    if (j->head && !writer && writer_running(j)) {
      j->leading = 0;
      pthread_cond_signal(&j->writer_cv);
      return;
    }
  }
}

void journal_on_commit(journal *j, journal_committed_fn fn, void *ctx) {
  j->committed = fn;
  j->committed_ctx = ctx;
}

int journal_commit(journal *j, journal_batch *b) {
  if (b->n == 0)
    return 0;
  pending me = {.batch = b};
  if (j->crypt)
    journal_seal_batch(j->crypt, b, &me.sealed);
  sem_init(&me.wake, 0, 0);
  pthread_mutex_lock(&j->mu);
  enqueue(j, &me);
  if (!j->leading) {
    j->leading = 1;
    lead(j, &me, 0);
  }
  int done = me.done;
  pthread_mutex_unlock(&j->mu);
  while (!done) {
    while (sem_wait(&me.wake) != 0) /* EINTR */
      ;
    done = me.done; /* written before the post */
    if (!done && me.handoff) {
      pthread_mutex_lock(&j->mu);
      me.handoff = 0;
      lead(j, &me, 0); /* leads its own group, so it returns done */
      done = me.done;
      pthread_mutex_unlock(&j->mu);
    }
  }
  sem_destroy(&me.wake);
  if (me.rc)
    memcpy(last_err, me.err, sizeof last_err);
  return me.rc;
}

/* The writer thread: leads whenever batches wait and nobody leads. */
static void *writer_main(void *arg) {
  journal *j = arg;
  pthread_mutex_lock(&j->mu);
  for (;;) {
    while (!j->closing && (!j->head || j->leading))
      pthread_cond_wait(&j->writer_cv, &j->mu);
    if (j->closing && (!j->head || j->leading))
      break;
    j->leading = 1;
    lead(j, NULL, 1);
  }
  pthread_mutex_unlock(&j->mu);
  return NULL;
}

/* An asynchronous batch's place in the queue, freed once its callback
 * ran (lead). */
static pending *pending_async(journal *j, journal_batch *b, journal_done_fn fn,
                              void *ctx) {
  pending *p = xcalloc(1, sizeof *p);
  if (j->crypt)
    journal_seal_batch(j->crypt, b, &p->sealed);
  p->batch = b;
  p->fn = fn;
  p->ctx = ctx;
  return p;
}

void journal_commit_background(journal *j, journal_batch *b, journal_done_fn fn,
                               void *ctx) {
  pending *p = pending_async(j, b, fn, ctx);
  pthread_mutex_lock(&j->mu);
  enqueue(j, p);
  if (!j->writer_started) {
    if (pthread_create(&j->writer, NULL, writer_main, j) == 0) {
      j->writer_started = 1;
    } else if (!j->leading) { /* no thread: this one leads after all */
      j->leading = 1;
      lead(j, NULL, 1);
    }
  }
  if (!j->leading)
    pthread_cond_signal(&j->writer_cv);
  pthread_mutex_unlock(&j->mu);
}

void journal_commit_async(journal *j, journal_batch *b, journal_done_fn fn,
                          void *ctx) {
  pending *p = pending_async(j, b, fn, ctx);
  pthread_mutex_lock(&j->mu);
  enqueue(j, p);
  if (!j->leading) {
    j->leading = 1;
    lead(j, NULL, 0);
  }
  pthread_mutex_unlock(&j->mu);
}

/* ---- reads: the backend's ------------------------------------------------ */

int journal_claim_holder(journal *j, const char *workflow, const char *key,
                         char **id) {
  *id = NULL;
  if (!j->be->claim_holder)
    return DURO_E_NOT_FOUND;
  return j->be->claim_holder(j->db, workflow, key, id);
}

/* The reads that give values (journal_seal.h) open them before they hand
 * them on; a value that does not open fails the read, naming its key. */

static int instance_opened(journal *j, int rc, journal_instance *out) {
  if (rc == 0 && (rc = journal_open_instance(j->crypt, out)) != 0)
    journal_instance_clear(out);
  return rc;
}

int journal_instance_get(journal *j, const char *workflow, const char *id,
                         journal_instance *out) {
  return instance_opened(j, j->be->instance_get(j->db, workflow, id, out), out);
}

int journal_instance_get_rowid(journal *j, int64_t rowid,
                               journal_instance *out) {
  return instance_opened(j, j->be->instance_get_rowid(j->db, rowid, out), out);
}

int journal_steps_load(journal *j, int64_t rowid, journal_step **out,
                       size_t *n) {
  int rc = j->be->steps_load(j->db, rowid, out, n);
  if (rc == 0 && (rc = journal_open_steps(j->crypt, rowid, *out, *n)) != 0) {
    journal_steps_free(*out, *n);
    *out = NULL;
    *n = 0;
  }
  return rc;
}

/* What a callback gets in place of a value that does not open (its read
 * fails once every row was handed on). */
#define UNOPENED_ERROR                                                         \
  "{\"name\":\"storage.encrypted\",\"message\":\"cannot decrypt\"}"

typedef struct attempts_opener {
  const journal_crypt *crypt;
  int64_t rowid;
  void (*fn)(void *ctx, const char *key, uint32_t number, int64_t started_ms,
             int64_t ended_ms, const char *error, const char *build);
  void *ctx;
  int rc;
} attempts_opener;

static void attempt_opened(void *ctx, const char *key, uint32_t number,
                           int64_t started_ms, int64_t ended_ms,
                           const char *error, const char *build) {
  attempts_opener *a = ctx;
  char *v = journal_crypt_sealed(error) ? xstrdup(error) : NULL;
  if (v && journal_open_value(a->crypt, JOURNAL_FIELD_ATTEMPT_ERROR, a->rowid,
                              key, &v) != 0)
    a->rc = DURO_E_STORAGE;
  a->fn(a->ctx, key, number, started_ms, ended_ms,
        !v      ? error
        : a->rc ? UNOPENED_ERROR
                : v,
        build);
  free(v);
}

int journal_attempts_each(journal *j, int64_t rowid,
                          void (*fn)(void *ctx, const char *key,
                                     uint32_t number, int64_t started_ms,
                                     int64_t ended_ms, const char *error,
                                     const char *build),
                          void *ctx) {
  attempts_opener a = {.crypt = j->crypt, .rowid = rowid, .fn = fn, .ctx = ctx};
  int rc = j->be->attempts_each(j->db, rowid, attempt_opened, &a);
  return rc ? rc : a.rc;
}

static int events_opened(journal *j, int rc, int64_t rowid, journal_event **out,
                         size_t *n) {
  if (rc == 0 && (rc = journal_open_events(j->crypt, rowid, *out, *n)) != 0) {
    journal_events_free(*out, *n);
    *out = NULL;
    *n = 0;
  }
  return rc;
}

int journal_events_pending(journal *j, int64_t rowid, journal_event **out,
                           size_t *n) {
  return events_opened(j, j->be->events_pending(j->db, rowid, out, n), rowid,
                       out, n);
}

int journal_events_all(journal *j, int64_t rowid, journal_event **out,
                       size_t *n) {
  return events_opened(j, j->be->events_all(j->db, rowid, out, n), rowid, out,
                       n);
}

int journal_logs_read(journal *j, int64_t rowid, int64_t after, size_t limit,
                      journal_log **out, size_t *n) {
  int rc = j->be->logs_read(j->db, rowid, after, limit, out, n);
  if (rc == 0 && (rc = journal_open_logs(j->crypt, rowid, *out, *n)) != 0) {
    journal_logs_free(*out, *n);
    *out = NULL;
    *n = 0;
  }
  return rc;
}

void journal_logs_free(journal_log *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(v[i].step);
    free(v[i].message);
  }
  free(v);
}

int journal_due(journal *j, int64_t after_ms, int64_t upto_ms, size_t limit,
                int64_t *rowids, int64_t *wakes, size_t *n) {
  return j->be->due(j->db, after_ms, upto_ms, limit, rowids, wakes, n);
}

int journal_next_wake(journal *j, int64_t after_ms, int64_t *wake) {
  return j->be->next_wake(j->db, after_ms, wake);
}

int journal_recover_each(journal *j,
                         void (*fn)(void *ctx, int64_t rowid,
                                    duro_status status, int control),
                         void *ctx) {
  return j->be->recover_each(j->db, fn, ctx);
}

typedef struct live_opener {
  const journal_crypt *crypt;
  const char *workflow;
  journal_live_fn fn;
  void *ctx;
  int rc;
} live_opener;

static void live_opened(void *ctx, const journal_live_row *row) {
  live_opener *l = ctx;
  journal_live_row r = *row;
  char *v = journal_crypt_sealed(row->params) ? xstrdup(row->params) : NULL;
  if (v && journal_open_value(l->crypt, JOURNAL_FIELD_PARAMS, 0, l->workflow,
                              &v) != 0) {
    l->rc = DURO_E_STORAGE;
    free(v);
    v = NULL;
    r.params = NULL;
  } else if (v) {
    r.params = v;
  }
  l->fn(l->ctx, &r);
  free(v);
}

int journal_live_each(journal *j, const char *workflow, journal_live_fn fn,
                      void *ctx) {
  live_opener l = {
      .crypt = j->crypt, .workflow = workflow, .fn = fn, .ctx = ctx};
  int rc = j->be->live_each(j->db, workflow, live_opened, &l);
  return rc ? rc : l.rc;
}

int journal_children_each(journal *j, int64_t parent,
                          void (*fn)(void *ctx, int64_t rowid,
                                     const char *workflow, const char *id,
                                     duro_status status),
                          void *ctx) {
  return j->be->children_each(j->db, parent, fn, ctx);
}

void journal_bulk_clear(journal_bulk *b) {
  free(b->workflow);
  free(b->action);
  free((char *)b->filter.prefix);
  free((char *)b->filter.ids);
  free(b->state);
  free(b->errors);
  free(b->plan);
  free(b->where_terms);
  *b = (journal_bulk){0};
}

int journal_bulk_get(journal *j, int64_t id, journal_bulk *out) {
  *out = (journal_bulk){0};
  return j->be->bulk_get(j->db, id, out);
}

int journal_bulk_list(journal *j, const char *workflow, int running,
                      size_t limit,
                      void (*fn)(void *ctx, const journal_bulk *b), void *ctx) {
  return j->be->bulk_list(j->db, workflow, running, limit, fn, ctx);
}

int journal_orphans_each(journal *j, size_t limit,
                         void (*fn)(void *ctx, int64_t rowid,
                                    const char *workflow, const char *id,
                                    int parent_close),
                         void *ctx) {
  return j->be->orphans_each(j->db, limit, fn, ctx);
}

int journal_queued_from(journal *j, int64_t from, size_t limit, int64_t *rowids,
                        size_t *n) {
  return j->be->queued_from(j->db, from, limit, rowids, n);
}

int journal_oldest_queued(journal *j, const char *workflow,
                          int64_t *created_ms) {
  return j->be->oldest_queued(j->db, workflow, created_ms);
}

int journal_build_pinned(journal *j, const char *workflow, const char *build,
                         int *pinned) {
  return j->be->build_pinned(j->db, workflow, build, pinned);
}

int journal_pinned_builds(journal *j,
                          void (*fn)(void *ctx, const char *workflow,
                                     const char *build, int64_t n),
                          void *ctx) {
  return j->be->pinned_builds(j->db, fn, ctx);
}

int journal_waiting_on(journal *j, const char *wait_type,
                       void (*fn)(void *ctx, int64_t rowid,
                                  const char *workflow),
                       void *ctx) {
  return j->be->waiting_on(j->db, wait_type, fn, ctx);
}

int journal_list(journal *j, const char *workflow, const journal_list_filter *f,
                 int64_t cursor, size_t limit,
                 void (*fn)(void *ctx, const journal_list_row *row),
                 void *ctx) {
  return j->be->list(j->db, workflow, f, cursor, limit, fn, ctx);
}

int journal_last_steps(journal *j, const int64_t *rowids, size_t n,
                       void (*fn)(void *ctx, const journal_last_step *s),
                       void *ctx) {
  return n ? j->be->last_steps(j->db, rowids, n, fn, ctx) : 0;
}

int journal_attributes(journal *j, int64_t rowid,
                       void (*fn)(void *ctx, const duro_attr *a), void *ctx) {
  return j->be->attributes(j->db, rowid, fn, ctx);
}

char *journal_prefix_end(const char *prefix) {
  size_t n = prefix ? strlen(prefix) : 0;
  while (n > 0 && (unsigned char)prefix[n - 1] == 0xff)
    n--;
  if (n == 0)
    return NULL;
  char *end = xmalloc(n + 1);
  memcpy(end, prefix, n);
  end[n - 1] = (char)((unsigned char)end[n - 1] + 1);
  end[n] = '\0';
  return end;
}

int journal_count_by_status(journal *j,
                            void (*fn)(void *ctx, const char *workflow,
                                       duro_status status, int64_t n),
                            void *ctx) {
  return j->be->count_by_status(j->db, fn, ctx);
}

int journal_queue_stats_each(journal *j, const char *queue, int64_t now_ms,
                             void (*fn)(void *ctx, const char *queue,
                                        const journal_queue_stats *st),
                             void *ctx) {
  return j->be->queue_stats_each(j->db, queue, now_ms, fn, ctx);
}

int journal_queue_ready(journal *j, const char *queue, int64_t now_ms,
                        uint32_t limit, journal_queue_ready_info *out) {
  return j->be->queue_ready(j->db, queue, now_ms, limit, out);
}

int journal_queue_leases(journal *j, const char *queue, int64_t now_ms,
                         const char *token,
                         void (*fn)(void *ctx, const char *lease), void *ctx) {
  return j->be->queue_leases(j->db, queue, now_ms, token, fn, ctx);
}

int journal_queue_peek(journal *j, const char *queue, int64_t now_ms,
                       size_t limit, journal_message **out, size_t *n) {
  int rc = j->be->queue_peek(j->db, queue, now_ms, limit, out, n);
  if (rc == 0 && (rc = journal_open_messages(j->crypt, *out, *n)) != 0) {
    journal_messages_free(*out, *n);
    *out = NULL;
    *n = 0;
  }
  return rc;
}

int journal_queue_held(journal *j, const char *queue, int64_t now_ms,
                       const char *pointer, uint32_t limit, int64_t *held) {
  return j->be->queue_held(j->db, queue, now_ms, pointer, limit, j->crypt,
                           held);
}

int journal_queue_counts_each(journal *j,
                              void (*fn)(void *ctx, const char *queue,
                                         int64_t dropped,
                                         int64_t dead_lettered),
                              void *ctx) {
  return j->be->queue_counts_each(j->db, fn, ctx);
}

int journal_cron_state(journal *j, const char *trigger, journal_cron *out) {
  return j->be->cron_state(j->db, trigger, out);
}

int journal_cron_ticks(journal *j, const char *trigger, const char *state,
                       size_t limit,
                       void (*fn)(void *ctx, const journal_cron_tick *t),
                       void *ctx) {
  return j->be->cron_ticks(j->db, trigger, state, limit, fn, ctx);
}

int journal_pipeline_get(journal *j, const char *pipeline,
                         journal_pipeline *out) {
  return j->be->pipeline_get(j->db, pipeline, out);
}

int journal_pipeline_sends(journal *j, const char *pipeline, int64_t from_seq,
                           int64_t to_seq, size_t limit, int with_body,
                           int (*fn)(void *ctx, const journal_pipeline_send *s),
                           void *ctx) {
  return j->be->pipeline_sends(j->db, pipeline, from_seq, to_seq, limit,
                               with_body, fn, ctx);
}

/* journal_pipeline_records: each send cut into its lines, those from..to
 * handed on, NUL-terminated in `line`. */
typedef struct records_ctx {
  int64_t from, to;
  size_t left; /* records still wanted */
  int (*fn)(void *ctx, int64_t seq, const char *body, int64_t bytes,
            int64_t sent_ms);
  void *ctx;
  char *line;
  size_t cap;
} records_ctx;

static int records_of_send(void *ctx, const journal_pipeline_send *s) {
  records_ctx *r = ctx;
  const char *p = s->body, *end = s->body + s->len;
  for (int64_t seq = s->first; seq <= s->last && p < end; seq++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (seq > r->to || r->left == 0)
      return 1;
    if (seq >= r->from) {
      if (n + 1 > r->cap) {
        r->cap = n + 1 > 2 * r->cap ? n + 1 : 2 * r->cap;
        r->line = xrealloc(r->line, r->cap);
      }
      memcpy(r->line, p, n);
      r->line[n] = '\0';
      r->left--;
      if (r->fn(r->ctx, seq, r->line, (int64_t)n + 1, s->sent_ms))
        return 1;
    }
    p += n + 1;
  }
  return 0;
}

int journal_pipeline_records(journal *j, const char *pipeline, int64_t from_seq,
                             int64_t to_seq, size_t limit,
                             int (*fn)(void *ctx, int64_t seq, const char *body,
                                       int64_t bytes, int64_t sent_ms),
                             void *ctx) {
  records_ctx r = {
      .from = from_seq, .to = to_seq, .left = limit, .fn = fn, .ctx = ctx};
  /* a send holds at least one record: `limit` sends hold `limit` records */
  int rc = journal_pipeline_sends(j, pipeline, from_seq, to_seq, limit, 1,
                                  records_of_send, &r);
  free(r.line);
  return rc;
}

void journal_instance_clear(journal_instance *in) {
  free(in->workflow);
  free(in->id);
  free(in->params);
  free(in->output);
  free(in->error);
  free(in->wait_type);
  free(in->build);
  free(in->traceparent);
  memset(in, 0, sizeof *in);
}

void journal_steps_free(journal_step *steps, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(steps[i].key);
    free(steps[i].name);
    free(steps[i].result);
    free(steps[i].error);
    free(steps[i].build);
  }
  free(steps);
}

void journal_events_free(journal_event *ev, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(ev[i].type);
    free(ev[i].payload);
    free(ev[i].consumed_by);
  }
  free(ev);
}

void journal_messages_free(journal_message *m, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(m[i].queue);
    free(m[i].body);
    free(m[i].lease);
    free(m[i].last_error);
    free(m[i].traceparent);
  }
  free(m);
}
