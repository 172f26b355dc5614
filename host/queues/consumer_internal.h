/* consumer_internal.h — what the pieces of the engine-run consumers
 * share: a consumer, the list of them (with the batches in handlers, and
 * those on threads of their own), a push batch and the verdict that
 * settles it, and the calls one piece makes in another.  Private to
 * queues/ (queue.h is the public face).
 *
 *   consumer.c           the list freed and waited for, the dispatch pass
 *   consumer_register.c  consumers registered, replaced, removed; their
 *                        settings
 *   consumer_workflow.c  the no-code consumer: a message, an instance
 *   consumer_push.c      a push consumer's pass: a batch leased and
 *                        started
 *   consumer_batch.c     a batch run and settled; handlers and slots
 *   consumer_deadline.c  a hung handler abandoned; the hung listed
 *   consumer_api.c       the plugin's side of a batch
 *   consumer_release.c   a batch whose engine died released */
#ifndef DURO_QUEUES_CONSUMER_INTERNAL_H
#define DURO_QUEUES_CONSUMER_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "queue.h"
#include "queue_driver.h"
#include "util.h"

#define DEFAULT_BATCH 10
/* How much longer than its handler may run a batch on a thread is leased
 * (at most: half the lease for short ones), so that the deadline settles
 * a hung batch before the lease's end would hand it to another. */
#define SETTLE_MARGIN_MS 1000

typedef struct wf_consumer {
  char *queue, *workflow, *id_from; /* workflow NULL: a push consumer */
  char *plugin;                     /* a push consumer's, for the ledger */
  char *key; /* a push consumer's concurrency_key (opt's points here) */
  uint32_t batch;
  duro_queue_fn handler;
  void *handler_ctx; /* its env->ctx */
  duro_queue_consumer_opts opt;
  uint32_t in_flight; /* batches in the handler */
} wf_consumer;

struct queue_consumers {
  pthread_mutex_t mu;
  pthread_cond_t idle; /* a batch left its handler */
  wf_consumer *v;
  size_t n;
  uint32_t threads; /* batch threads not yet finished */
  /* Batches on threads of their own, in their handler (abandoned ones
   * until the thread returns): what the deadline and /healthz look at. */
  struct duro_message_batch **live;
  size_t n_live;
  /* Abandoned batches whose threads have not returned.  Past the cap
   * (the engine's max_hung, as for hung steps) an abandoned batch keeps
   * its max_concurrency slot until its thread returns, so a handler that
   * hangs on every message stalls its queue instead of leaving a thread
   * behind per delivery without end. */
  uint32_t hung;
  int hung_cap_logged;
  /* Handlers with batches inside, and how many: a reload must not unload
   * the code of one (duro_queue_handler_running). */
  struct running {
    duro_queue_fn fn;
    uint32_t n;
  } * running;
  size_t n_running;
};

enum { MARK_NONE, MARK_ACK, MARK_RETRY };

struct duro_message_batch {
  duro_engine *e;
  char *queue, *plugin;
  char prefix[QUEUE_LEASE_PREFIX]; /* its leases' token */
  ledger_slot *slot;               /* its crash ledger slot, or NULL */
  duro_queue_fn handler;
  void *handler_ctx;
  size_t n;
  duro_message *msgs; /* bodies owned */
  char **leases;
  /* mu guards the marks and the fate: once settled (the handler
   * returned) or abandoned (past its deadline), the other side keeps off,
   * and a mark after abandonment is refused. */
  pthread_mutex_t mu;
  int *mark;
  int64_t *delay; /* of a MARK_RETRY */
  int settled, abandoned;
  int slot_kept; /* abandoned past the cap of hung threads: slot held */
  int64_t started_ms, deadline_ms; /* engine_mono_ms */
  int64_t timeout_ms;              /* the consumer's visibility timeout */
  /* When the deadline's watch gives it up (engine_mono_ms): its deadline,
   * or a grace after it for a handler that returns by itself then. */
  int64_t abandon_ms;
};

/* What becomes of a batch's messages: acks and retries, for one commit. */
typedef struct verdict {
  duro_engine *e;
  char *queue;
  size_t n, na, nr;
  const char **acks;
  duro_queue_retry *retries;
  char *reason; /* the unmarked retries' error */
  char **owned; /* the leases, when copied out of the batch; else NULL */
} verdict;

/* The earlier of two times, JOURNAL_NONE being "never". */
static inline int64_t earlier(int64_t a, int64_t b) {
  return a == JOURNAL_NONE ? b : b == JOURNAL_NONE || a < b ? a : b;
}

/* ---- consumer.c ---- */

void consumer_clear(wf_consumer *c);

/* ---- consumer_workflow.c, consumer_push.c: a consumer's pass ---- */

/* Each returns the messages handled; *due when to look again
 * (JOURNAL_NONE: when kicked). */
size_t consumer_dispatch_workflow(duro_engine *e, const wf_consumer *c,
                                  int64_t *due);
size_t consumer_dispatch_push(duro_engine *e, const wf_consumer *c,
                              int64_t *due);

/* ---- consumer_batch.c ---- */

/* Takes the messages' bodies and leases; frees the rest of `msgs`. */
duro_message_batch *consumer_batch_new(duro_engine *e, const wf_consumer *c,
                                       duro_queue_fn fn, void *ctx,
                                       const char *prefix,
                                       journal_message *msgs, size_t n);
void consumer_batch_free(duro_message_batch *b);
/* Runs the handler and settles the batch (unless it was abandoned). */
void consumer_batch_run(duro_message_batch *b);
/* The batch left handler fn: its slot (when `slot`) is free. */
void consumer_batch_done(duro_engine *e, const char *queue, duro_queue_fn fn,
                         int slot, int was_hung);
/* The batch's messages by their marks, the unmarked ones as `unmarked`
 * says with `why`; `copy`: the leases copied, to outlive the batch. */
verdict consumer_verdict_of(const duro_message_batch *b, int unmarked,
                            const char *why, int copy);
/* Commits the verdict (one commit) and frees it. */
void consumer_verdict_settle(verdict *v);
/* Counts a batch in or out of handler fn (cs->mu held). */
void consumer_running_add_locked(struct queue_consumers *cs, duro_queue_fn fn,
                                 int delta);
/* One of the queue's max_concurrency slots is free (cs->mu held). */
void consumer_slot_free_locked(struct queue_consumers *cs, const char *queue);

/* ---- consumer_deadline.c ---- */

/* Abandons every batch past its deadline; the earliest deadline still
 * ahead (engine_mono_ms), INT64_MAX when none. */
int64_t consumer_handlers_watch(duro_engine *e, struct queue_consumers *cs);

#endif
