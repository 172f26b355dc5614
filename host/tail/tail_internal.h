/* tail_internal.h — what the files of tail/ share.  Not for other
 * modules.
 *
 *   tail.c          the driver: options, the consumers and the workflows
 *                   they observe, the buffers an activation's end fills,
 *                   metrics
 *   tail_item.c     an activation's report copied (tail_rec), and a
 *                   batch of them made the JSON array a handler reads
 *   tail_deliver.c  the scheduler's pass: a due batch taken and run on a
 *                   thread of its own, its outcome counted */
#ifndef DURO_TAIL_INTERNAL_H
#define DURO_TAIL_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "ledger.h"
#include "map.h"
#include "tail.h"

/* One activation as its report said it, shared by the consumers that
 * buffer it (refs, under the driver's lock). */
typedef struct tail_rec {
  unsigned refs;
  char *workflow, *id, *build, *traceparent;
  int64_t created_ms;
  const char *outcome; /* static */
  duro_status status;
  int64_t started_ms, ended_ms;
  duro_activation_log *logs; /* strings owned */
  size_t n_logs;
  uint32_t logs_dropped;
  duro_activation_error *errors; /* strings owned */
  size_t n_errors;
  uint32_t errors_dropped;
  size_t bytes; /* what it holds, against buffer_bytes */
} tail_rec;

typedef struct tail_consumer {
  char *plugin;
  duro_tail_fn fn; /* NULL: none (yet) */
  void *ctx;
  tail_rec **ring; /* opt.buffer of them, from head, n used */
  size_t head, n;
  int64_t bytes;          /* of those in the ring and in the running batch */
  size_t in_batch;        /* items in the running batch */
  int64_t oldest_ms;      /* engine_now when the ring's first item came */
  duro_tail_fn running;   /* the handler a batch runs now, or NULL */
  uint64_t dropped_since; /* told the next batch */
  uint64_t delivered, dropped, batches, failed_batches;
  int warned; /* no handler: said once */
} tail_consumer;

typedef struct tail_state {
  duro_engine *e;
  duro_tail_options opt;
  pthread_mutex_t mu; /* guards what follows */
  pthread_cond_t idle;
  tail_consumer **consumers;
  size_t n_consumers;
  strmap observed;   /* workflow → tail_watch */
  size_t n_observed; /* workflows with a consumer */
  unsigned threads;  /* batch threads running */
} tail_state;

/* A workflow's consumers (the state's, which live as long as it); the
 * map's key is its workflow. */
typedef struct tail_watch {
  char *workflow;
  tail_consumer **v;
  size_t n;
} tail_watch;

tail_state *tail_state_of(duro_engine *e);
/* The consumer named `plugin`, made when new (mu held). */
tail_consumer *tail_consumer_locked(tail_state *t, const char *plugin);

/* tail_item.c: r copied (refs 0), its bytes counted. */
tail_rec *tail_rec_copy(const duro_activation_report *r);
void tail_rec_free(tail_rec *r);
/* v[0..n) as a JSON array of items (malloc'ed). */
char *tail_items_json(tail_rec *const *v, size_t n);

/* tail_deliver.c: the driver's dispatch and drain. */
int tail_dispatch(duro_engine *e, void *state, int64_t *next_ms);
uint32_t tail_drain(void *state, const struct timespec *until);

#endif
