/* consumer_release.c — a batch whose engine died in its handler (the
 * crash ledger's replay, queue_driver.c): the leases its messages still
 * hold retried at once, rather than left to run out. */
#include <stdlib.h>

#include "consumer_internal.h"
#include "core.h"
#include "log.h"
#include "queue_internal.h"

typedef struct held {
  char *lease[DURO_QUEUE_MAX_BATCH];
  size_t n;
} held;

static void collect_lease(void *ctx, const char *lease) {
  held *h = ctx;
  if (h->n < DURO_QUEUE_MAX_BATCH)
    h->lease[h->n++] = xstrdup(lease);
}

int queue_batch_release(duro_engine *e, const char *queue, const char *prefix,
                        int64_t delay_ms, const char *error) {
  if (!duro_queue_exists(e, queue))
    return 0; /* not a queue this config knows: its leases run out */
  held h = {.n = 0};
  int64_t now = engine_now(e);
  if (journal_queue_leases(engine_journal(e), queue, now, prefix, collect_lease,
                           &h)) {
    log_error("queue %s: finding a stopped batch: %s", queue,
              journal_errmsg(engine_journal(e)));
    return DURO_E_STORAGE;
  }
  /* Fewer than the batch: the handler acked or retried some before the
   * death (a settle is one commit: all or none). */
  duro_queue_retry r[DURO_QUEUE_MAX_BATCH];
  for (size_t i = 0; i < h.n; i++)
    r[i] = (duro_queue_retry){h.lease[i], delay_ms, error};
  duro_queue_ack_result res = {0};
  char err[256];
  int rc =
      h.n ? duro_queue_settle(e, queue, NULL, 0, r, h.n, &res, err, sizeof err)
          : 0;
  if (rc)
    log_error("queue %s: releasing a batch of %zu: %s", queue, h.n, err);
  duro_queue_ack_result_free(&res);
  for (size_t i = 0; i < h.n; i++)
    free(h.lease[i]);
  return rc;
}
