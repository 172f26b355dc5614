/* trigger_recover.c — a trigger reconciled with its rows at its first
 * dispatch: ticks cut short by the last stop failed, ticks that came
 * while no host ran (or the host could not fire them) recorded missed
 * and fired late as catch_up says, and a new trigger's start recorded. */
#include <stdint.h>
#include <stdlib.h>

#include "core.h"
#include "log.h"
#include "trigger_internal.h"

typedef struct tick_list {
  int64_t *v;
  size_t n, cap;
} tick_list;

static void cut_short(void *ctx, const journal_cron_tick *tk) {
  tick_list *l = ctx;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 8;
    l->v = xrealloc(l->v, l->cap * sizeof *l->v);
  }
  l->v[l->n++] = tk->tick_ms;
}

/* The newest tick's instance, unless a catch-up fired it late (then it
 * is no previous tick for overlap: skip). */
static void newest_instance(void *ctx, const journal_cron_tick *tk) {
  char **out = ctx;
  if (!*out && tk->instance && tk->fired_ms != JOURNAL_NONE &&
      tk->fired_ms - tk->tick_ms <= LATE_MS)
    *out = xstrdup(tk->instance);
}

static void record_missed(duro_engine *e, const cron_trigger *t,
                          const int64_t *ticks, size_t n, int64_t extra) {
  /* One pass at least: the extra count goes with the first chunk, also
   * when every recorded tick fires late. */
  for (size_t i = 0; i < n || (i == 0 && extra > 0); i += MISSED_CHUNK) {
    journal_batch b = {0};
    for (size_t k = i; k < n && k < i + MISSED_CHUNK; k++)
      cron_tick_op(&b, t->key, ticks[k], DURO_CRON_TICK_MISSED, JOURNAL_NONE)
          ->error =
          "\"nothing fired it when it came: no host ran, or the host could "
          "not (a machine asleep)\"";
    if (i == 0 && extra > 0) {
      journal_op *op = journal_batch_add(&b, JOP_CRON_MISSED_EXTRA);
      op->queue = t->key;
      op->from_seq = extra;
    }
    if (journal_commit(engine_journal(e), &b) != 0)
      log_error("cron: cannot record missed ticks: %s",
                journal_errmsg(engine_journal(e)));
    journal_batch_free(&b);
  }
}

/* Ticks from `tick` on that are more than LATE_MS old at `now` came
 * while nothing could fire them: recorded missed (the newest
 * MAX_MISSED_ROWS one by one, in a ring; older ones only counted), and
 * fired late as catch_up says.  Returns the first tick that is on time. */
int64_t cron_settle_late(duro_engine *e, cron_trigger *t, int64_t tick,
                         int64_t now, const char *why) {
  int64_t *ring = xcalloc(MAX_MISSED_ROWS, sizeof *ring);
  size_t count = 0;
  while (tick != CRON_NEVER && tick < now - LATE_MS) {
    ring[count++ % MAX_MISSED_ROWS] = tick;
    tick = cron_next(&t->expr, tick, t->timezone);
  }
  size_t n = count < MAX_MISSED_ROWS ? count : MAX_MISSED_ROWS;
  int64_t extra = (int64_t)(count - n);
  int64_t *missed = xcalloc(n ? n : 1, sizeof *missed);
  for (size_t k = 0; k < n; k++) /* oldest first */
    missed[k] = ring[(count - n + k) % MAX_MISSED_ROWS];
  free(ring);
  int catch_up = __atomic_load_n(&t->catch_up, __ATOMIC_RELAXED);
  size_t late = catch_up == DURO_CRON_CATCH_UP_ALL
                    ? __atomic_load_n(&t->max_catch_up, __ATOMIC_RELAXED)
                : catch_up == DURO_CRON_CATCH_UP_LATEST ? 1
                                                        : 0;
  if (late > n)
    late = n;
  if (n) {
    t->after_outage = 1;
    record_missed(e, t, missed, n - late, extra);
    size_t fired = cron_fire_late(e, t, missed + (n - late), late, now);
    /* What happened, as GET /crons counts it: the ticks beyond the cap
     * and beyond the rows kept are missed; a late tick another host
     * claimed first is that host's. */
    log_warn("cron %s (plugin %s): %zu tick(s) came %s: %zu fired late "
             "(catch_up: %s), %zu missed",
             t->schedule, t->plugin, count, why, fired,
             duro_cron_catch_up_name(catch_up), count - late);
  }
  free(missed);
  return tick;
}

/* The first dispatch for t: ticks cut short by the last stop, ticks
 * missed while no host ran, and the catch-up.  Sets t->next_ms. */
void cron_recover(duro_engine *e, cron_trigger *t, int64_t now) {
  journal_cron st;
  t->recovered = 1;
  if (journal_cron_state(engine_journal(e), t->key, &st) != 0) {
    t->recovered = 0; /* storage trouble: try again next pass */
    return;
  }
  if (st.since_ms == JOURNAL_NONE) {
    /* New: nothing before now was ever due. */
    journal_batch b = {0};
    journal_op *op = journal_batch_add(&b, JOP_CRON_SINCE);
    op->queue = t->key;
    op->ts_ms = now;
    if (journal_commit(engine_journal(e), &b) != 0)
      t->recovered = 0;
    journal_batch_free(&b);
    t->next_ms = cron_next(&t->expr, now - 1, t->timezone);
    return;
  }
  tick_list cut = {0};
  journal_cron_ticks(engine_journal(e), t->key,
                     duro_cron_tick_state_name(DURO_CRON_TICK_FIRED), 1000,
                     cut_short, &cut);
  for (size_t i = 0; i < cut.n; i++)
    cron_tick_set(e, t->key, cut.v[i], DURO_CRON_TICK_FAILED,
                  "\"the host stopped while the handler ran\"");
  free(cut.v);
  if (t->workflow)
    journal_cron_ticks(engine_journal(e), t->key,
                       duro_cron_tick_state_name(DURO_CRON_TICK_COMPLETE), 1,
                       newest_instance, &t->last_instance);
  int64_t from =
      st.last_tick_ms != JOURNAL_NONE ? st.last_tick_ms : st.since_ms - 1;
  t->next_ms = cron_settle_late(e, t, cron_next(&t->expr, from, t->timezone),
                                now, "while no host ran");
}
