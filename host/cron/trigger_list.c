/* trigger_list.c — the triggers' listing (GET /crons): each trigger's
 * fields, next ticks, counts, handler ticks running and its last tick. */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>

#include "core.h"
#include "trigger_internal.h"

/* A tick row's error as text: the journal holds it as JSON (a string),
 * or, in rows written before that, as the text itself. */
static char *tick_error_text(const char *stored) {
  json_t *v = json_loads(stored, JSON_DECODE_ANY, NULL);
  char *text =
      json_is_string(v) ? xstrdup(json_string_value(v)) : xstrdup(stored);
  json_decref(v);
  return text;
}

static void last_tick(void *ctx, const journal_cron_tick *tk) {
  duro_cron_trigger_info *o = ctx;
  duro_cron_tick_info *l = &o->last;
  o->has_last = 1;
  *l = (duro_cron_tick_info){.tick_ms = tk->tick_ms,
                             .state = DURO_CRON_TICK_FAILED,
                             .fired_ms = tk->fired_ms};
  duro_cron_tick_state_parse(tk->state, &l->state);
  if (tk->instance)
    l->instance = xstrdup(tk->instance);
  if (tk->error)
    l->error = tick_error_text(tk->error);
}

/* What the listing shows of t but its last tick, into *o. */
static int describe_one(duro_engine *e, struct cron_registry *r,
                        const cron_trigger *t, int64_t now,
                        duro_cron_trigger_info *o) {
  *o = (duro_cron_trigger_info){
      .plugin = xstrdup(t->plugin),
      .schedule = xstrdup(t->schedule),
      .timezone = t->timezone ? xstrdup(t->timezone) : NULL,
      .workflow = t->workflow ? xstrdup(t->workflow) : NULL,
      .id = t->workflow ? xstrdup(t->id) : NULL,
      .catch_up = __atomic_load_n(&t->catch_up, __ATOMIC_RELAXED),
      .overlap_allow = __atomic_load_n(&t->overlap_allow, __ATOMIC_RELAXED)};
  int64_t tick = now - 1;
  while (o->n_next < DURO_CRON_NEXT_TICKS) {
    tick = cron_next(&t->expr, tick, t->timezone);
    if (tick == CRON_NEVER)
      break;
    o->next[o->n_next++] = tick;
  }
  journal_cron st;
  int rc = journal_cron_state(engine_journal(e), t->key, &st);
  pthread_mutex_lock(&r->mu);
  o->running = t->running;
  pthread_mutex_unlock(&r->mu);
  o->complete = st.complete;
  o->failed = st.failed;
  o->missed = st.missed;
  o->skipped = st.skipped;
  return rc;
}

int duro_cron_describe(duro_engine *e, duro_cron_trigger_infos *out) {
  *out = (duro_cron_trigger_infos){0};
  struct cron_registry *r = cron_registry_of(e);
  int64_t now = engine_now(e);
  int rc = 0;
  cron_set *s = cron_set_take(r);
  if (s && s->n)
    out->v = xcalloc(s->n, sizeof *out->v);
  for (size_t i = 0; s && i < s->n && rc == 0; i++) {
    duro_cron_trigger_info *o = &out->v[out->n++];
    rc = describe_one(e, r, s->v[i], now, o);
    if (rc == 0)
      rc = journal_cron_ticks(engine_journal(e), s->v[i]->key, NULL, 1,
                              last_tick, o);
  }
  if (s)
    cron_set_drop(r, s);
  if (rc)
    duro_cron_trigger_infos_clear(out);
  return rc;
}

void duro_cron_trigger_infos_clear(duro_cron_trigger_infos *l) {
  for (size_t i = 0; i < l->n; i++) {
    duro_cron_trigger_info *o = &l->v[i];
    free(o->plugin);
    free(o->schedule);
    free(o->timezone);
    free(o->workflow);
    free(o->id);
    free(o->last.instance);
    free(o->last.error);
  }
  free(l->v);
  *l = (duro_cron_trigger_infos){0};
}
