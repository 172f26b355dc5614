/* consumer_deadline.c — a push handler's deadline: a batch on a thread
 * of its own past its consumer's visibility timeout is abandoned (its
 * thread left running, its messages settled now, its slot free up to the
 * cap of hung threads), and the hung handlers listed for /healthz. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "consumer_internal.h"
#include "core.h"
#include "error.h"
#include "log.h"
#include "queue_internal.h"

/* Gives up on batch b, past its deadline (cs->mu and b->mu held): from
 * now on its marks are refused and its return is discarded, its slot is
 * free, and a crash in its thread is not laid on it again.  Returns the
 * verdict to commit — the acked stay acked, the rest are retried as a
 * failed delivery — and in *msg the log line. */
static verdict batch_abandon_locked(struct queue_consumers *cs,
                                    duro_message_batch *b, int64_t now,
                                    char **msg) {
  char *why =
      xasprintf("the queue handler%s%s%s ran past the consumer's "
                "visibility_timeout of %lld ms: abandoned",
                b->plugin ? " of plugin \"" : "", b->plugin ? b->plugin : "",
                b->plugin ? "\"" : "", (long long)b->timeout_ms);
  char *err = error_json(DURO_ERR_TIMEOUT, why);
  b->abandoned = 1;
  verdict v = consumer_verdict_of(b, MARK_RETRY, err, 1);
  *msg = xasprintf("queue %s: %s after %lld ms, its thread left running; "
                   "%zu message(s) retried, %zu acked",
                   b->queue, why, (long long)(now - b->started_ms), v.nr, v.na);
  if (b->slot)
    ledger_set_state(b->slot, LEDGER_ABANDONED);
  if (++cs->hung <= engine_max_hung(b->e)) {
    consumer_slot_free_locked(cs, b->queue);
  } else {
    b->slot_kept = 1;
    if (!cs->hung_cap_logged)
      log_error("%u queue handler threads are hung, the cap: an abandoned "
                "handler now holds its queue's slot until it returns",
                engine_max_hung(b->e));
    cs->hung_cap_logged = 1;
  }
  free(err);
  free(why);
  return v;
}

/* Abandons every batch past its deadline; returns the earliest deadline
 * still ahead (engine_mono_ms), INT64_MAX when none. */
int64_t consumer_handlers_watch(duro_engine *e, struct queue_consumers *cs) {
  int64_t now = engine_mono_ms(e), next = INT64_MAX;
  for (;;) {
    verdict v = {0};
    char *msg = NULL;
    pthread_mutex_lock(&cs->mu);
    for (size_t i = 0; i < cs->n_live && !msg; i++) {
      duro_message_batch *b = cs->live[i];
      pthread_mutex_lock(&b->mu);
      if (!b->settled && !b->abandoned && now >= b->abandon_ms)
        v = batch_abandon_locked(cs, b, now, &msg);
      else if (!b->settled && !b->abandoned && b->abandon_ms < next)
        next = b->abandon_ms;
      pthread_mutex_unlock(&b->mu);
    }
    pthread_mutex_unlock(&cs->mu);
    if (!msg)
      return next;
    log_write(DURO_LOG_WARN, NULL, "%s", msg);
    free(msg);
    consumer_verdict_settle(&v);
  }
}

void queue_handlers_hung(duro_engine *e, duro_hung_handler **out, size_t *n) {
  *out = NULL;
  *n = 0;
  struct queue_consumers *cs = queue_consumers_of(e);
  if (!cs)
    return;
  int64_t now = engine_mono_ms(e);
  pthread_mutex_lock(&cs->mu);
  for (size_t i = 0; i < cs->n_live; i++) {
    duro_message_batch *b = cs->live[i];
    pthread_mutex_lock(&b->mu);
    if (b->abandoned && !b->settled) {
      if (!*out)
        *out = xcalloc(cs->n_live, sizeof **out);
      (*out)[(*n)++] =
          (duro_hung_handler){.queue = xstrdup(b->queue),
                              .plugin = b->plugin ? xstrdup(b->plugin) : NULL,
                              .messages = (uint64_t)b->n,
                              .running_ms = now - b->started_ms,
                              .timeout_ms = b->timeout_ms};
    }
    pthread_mutex_unlock(&b->mu);
  }
  pthread_mutex_unlock(&cs->mu);
}
