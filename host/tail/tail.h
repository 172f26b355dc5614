/* tail.h — tail handlers (Cloudflare's Tail Workers): a plugin's `tail`
 * export receives, in batches, a trace item per activation of the
 * workflows whose `tail_consumers` name it — the activation's outcome,
 * the instance's status after it, its duration, the lines its code
 * logged and the failures of its attempts — to forward them to its own
 * analytics or alert on an error pattern.
 *
 * Best effort, and never in the way of the workflows observed: an
 * activation's final commit copies what it did into each consumer's
 * bounded buffer (past it, items are dropped and counted); the
 * scheduler's pass hands a consumer a batch once it holds max_batch
 * items or its oldest waited batch_timeout, on a thread of its own (one
 * batch of a consumer at a time, so it sees its items in order).  A
 * handler that fails, crashes or passes its timeout loses that batch
 * (in a worker process the stand-in kills the worker at the timeout);
 * the next batch says how many items were lost. */
#ifndef DURO_TAIL_H
#define DURO_TAIL_H

#include <stddef.h>
#include <stdint.h>

#include "driver.h"
#include "duro.h"

typedef struct duro_tail_options {
  uint32_t buffer;          /* items buffered per consumer, at most */
  int64_t buffer_bytes;     /* their bytes per consumer, at most */
  uint32_t max_batch;       /* items in one batch, at most */
  int64_t batch_timeout_ms; /* how long the oldest item waits, at most */
  int64_t timeout_ms;       /* how long a handler's call may run */
} duro_tail_options;

/* The defaults of duro_tail_options (and of the config's `tail:`). */
#define DURO_TAIL_DEFAULT_BUFFER 10000
#define DURO_TAIL_DEFAULT_BUFFER_BYTES (16LL << 20)
#define DURO_TAIL_DEFAULT_MAX_BATCH 100
#define DURO_TAIL_DEFAULT_BATCH_TIMEOUT_MS 1000
#define DURO_TAIL_DEFAULT_TIMEOUT_MS 30000

/* Sets the options (a zero member keeps its default); before
 * duro_engine_start.  DURO_E_INVALID_ARGUMENT without the driver. */
int duro_tail_configure(duro_engine *e, const duro_tail_options *o);

/* The plugins consumers[0..n) (names, copied) receive the trace items of
 * `workflow` from now on, instead of those named before (n 0: none). */
void duro_tail_observe(duro_engine *e, const char *workflow,
                       const char *const *consumers, size_t n);

/* Plugin `plugin`'s tail handler, with the context its stand-in needs
 * (NULL fn: it has none, and its items are dropped, counted). */
void duro_tail_set_handler(duro_engine *e, const char *plugin, duro_tail_fn fn,
                           void *ctx);

/* Whether fn runs now (a build whose handler runs is not unloaded). */
int duro_tail_handler_running(duro_engine *e, duro_tail_fn fn);

/* The driver's scheduler pass, for callers that drive the engine's
 * passes themselves (tests, with engine threads 0: inline): runs the
 * batches due now; returns how many. */
size_t duro_tail_dispatch(duro_engine *e);

/* A consumer's counts, for tests and /metrics. */
typedef struct duro_tail_stats {
  uint64_t delivered; /* items handed to a handler that returned 0 */
  uint64_t dropped;   /* items lost: a full buffer, no handler, a failure */
  uint64_t batches, failed_batches;
  size_t buffered; /* items waiting, or in a batch that runs */
} duro_tail_stats;

/* 0 with plugin's counts in *out, or DURO_E_NOT_FOUND. */
int duro_tail_stats_of(duro_engine *e, const char *plugin,
                       duro_tail_stats *out);

extern const duro_driver tail_driver;

#endif
