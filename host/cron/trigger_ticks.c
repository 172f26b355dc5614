/* trigger_ticks.c — a trigger's tick rows in the journal: a tick claimed
 * in a state (once: a second claim changes nothing), a fired tick
 * settled, and an error as the rows hold it (JSON text). */
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>

#include "core.h"
#include "log.h"
#include "trigger_internal.h"

/* Claims the tick with `state`; 1 when this call claimed it, 0 when it
 * was claimed before, < 0 on a storage error. */
/* Adds to b the claim of trigger `key`'s tick in `state`, fired at
 * `fired` (JOURNAL_NONE: not fired); the row is inserted only if the
 * tick has none (out_rowid 1). */
journal_op *cron_tick_op(journal_batch *b, const char *key, int64_t tick,
                         duro_cron_tick_state state, int64_t fired) {
  journal_op *op = journal_batch_add(b, JOP_CRON_TICK);
  op->queue = key;
  op->visible_ms = tick;
  op->body = duro_cron_tick_state_name(state);
  op->ts_ms = fired;
  return op;
}

int cron_tick_put(duro_engine *e, const cron_trigger *t, int64_t tick,
                  duro_cron_tick_state state, int64_t fired,
                  const char *instance, const char *error) {
  journal_batch b = {0};
  journal_op *op = cron_tick_op(&b, t->key, tick, state, fired);
  op->lease = instance;
  op->error = error;
  int rc = journal_commit(engine_journal(e), &b);
  int claimed = rc == 0 ? (int)b.ops[0].out_rowid : rc;
  journal_batch_free(&b);
  return claimed;
}

void cron_tick_set(duro_engine *e, const char *key, int64_t tick,
                   duro_cron_tick_state state, const char *error) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_CRON_TICK_SET);
  op->queue = key;
  op->visible_ms = tick;
  op->body = duro_cron_tick_state_name(state);
  op->error = error;
  if (journal_commit(engine_journal(e), &b) != 0)
    log_error("cron: cannot record a tick: %s",
              journal_errmsg(engine_journal(e)));
  journal_batch_free(&b);
}

char *cron_error_text(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = xvasprintf(fmt, ap);
  va_end(ap);
  json_t *s = json_string(msg);
  char *text = json_dumps(s, JSON_ENCODE_ANY);
  json_decref(s);
  free(msg);
  return text;
}
