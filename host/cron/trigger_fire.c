/* trigger_fire.c — a tick fired: an on-time one after the overlap check,
 * late ones of a catch-up without it; the no-code form's instance created
 * with its tick row in one commit (the handler form: trigger_handler.c). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "log.h"
#include "trigger_internal.h"

/* A no-code tick's instance params: the trigger's schedule and tick,
 * then the config's params (a JSON object without those two keys,
 * checked at load), read under the registry's lock (a reload swaps
 * them). */
static char *fire_params(duro_engine *e, cron_trigger *t, int64_t tick) {
  struct cron_registry *r = cron_registry_if_any(e);
  pthread_mutex_lock(&r->mu);
  const char *more = t->params && strcmp(t->params, "{}") ? t->params : NULL;
  /* "{...}" less its opening brace follows a comma */
  char *params =
      xasprintf("{\"cron\":\"%s\",\"scheduled_ms\":%lld%s%s", t->schedule,
                (long long)tick, more ? "," : "}", more ? more + 1 : "");
  pthread_mutex_unlock(&r->mu);
  return params;
}

/* No-code form: the instance and the tick row, one commit.  An instance
 * that exists already (its id came from an earlier tick, or from a fire
 * outside the schedule) makes the tick complete all the same; *created
 * (may be NULL) says whether this call made it.  Returns 1 when it
 * committed (and claimed the tick, with a `key`), 0 when the tick was
 * claimed before, -1 on failure.  An instance fired `late` by a catch-up
 * is not the one overlap: skip looks at. */
int cron_fire_workflow(duro_engine *e, cron_trigger *t, int64_t tick,
                       int64_t now, const char *key, int late, int *created) {
  char id[128];
  const wf_reg *wf = engine_find_workflow(e, t->workflow);
  if (cron_expand_id(t->id, tick, t->timezone, id, sizeof id) != 0 || !wf) {
    char *err =
        wf ? cron_error_text("id \"%s\" makes no valid instance id", t->id)
           : cron_error_text("workflow \"%s\" is not loaded", t->workflow);
    if (key)
      cron_tick_put(e, t, tick, DURO_CRON_TICK_FAILED, now, NULL, err);
    log_warn("cron %s (plugin %s): %s", t->schedule, t->plugin, err);
    free(err);
    return -1;
  }
  char *params = fire_params(e, t, tick);
  duro_create_req req = {.params = params, .retention_ms = -1};
  journal_instance row = {0};
  journal_batch b = {0};
  engine_instance_insert_op(wf, id, &req, now, &row, &b);
  if (key)
    cron_tick_op(&b, key, tick, DURO_CRON_TICK_COMPLETE, now)->lease = id;
  int rc = journal_commit(engine_journal(e), &b);
  int claimed = rc == 0 && (!key || b.ops[b.n - 1].out_rowid == 1);
  if (rc != 0)
    log_error("cron %s (plugin %s): creating %s/%s: %s", t->schedule, t->plugin,
              t->workflow, id, journal_errmsg(engine_journal(e)));
  else if (b.ops[0].rc == 0)
    engine_instance_created(e, b.ops[0].out_rowid);
  if (created)
    *created = rc == 0 && b.ops[0].rc == 0;
  journal_batch_free(&b);
  free(params);
  struct cron_registry *r = cron_registry_if_any(e);
  pthread_mutex_lock(&r->mu);
  if (rc == 0 && !late) {
    free(t->last_instance);
    t->last_instance = xstrdup(id);
  }
  pthread_mutex_unlock(&r->mu);
  return rc ? -1 : claimed;
}

/* Whether the previous tick still runs (its handler, or its instance). */
static int still_running(duro_engine *e, const cron_trigger *t) {
  struct cron_registry *r = cron_registry_if_any(e);
  pthread_mutex_lock(&r->mu);
  int running = t->running > t->catching;
  char *last = t->last_instance ? xstrdup(t->last_instance) : NULL;
  pthread_mutex_unlock(&r->mu);
  if (!t->workflow || !last) {
    free(last);
    return !t->workflow && running;
  }
  journal_instance in = {0};
  int busy =
      journal_instance_get(engine_journal(e), t->workflow, last, &in) == 0 &&
      !duro_status_ended(in.status);
  journal_instance_clear(&in);
  free(last);
  return busy;
}

/* An on-time tick.  The first after an outage fires whatever ran before
 * it: what ran then is an outage old (an instance whose sleep ended
 * meanwhile, say, has not been resumed yet), not an overlap. */
void cron_fire_tick(duro_engine *e, cron_trigger *t, int64_t tick,
                    int64_t now) {
  int after_outage = t->after_outage;
  t->after_outage = 0;
  if (!__atomic_load_n(&t->overlap_allow, __ATOMIC_RELAXED) && !after_outage &&
      still_running(e, t)) {
    char *err = cron_error_text("overlap: skip, and the previous tick's %s was "
                                "still running",
                                t->workflow ? "instance" : "handler");
    cron_tick_put(e, t, tick, DURO_CRON_TICK_SKIPPED, JOURNAL_NONE, NULL, err);
    free(err);
    return;
  }
  if (t->workflow)
    cron_fire_workflow(e, t, tick, now, t->key, 0, NULL);
  else
    cron_fire_handler(e, t, tick, now);
}

/* Fires the late ticks of a catch-up, oldest first, without the overlap
 * check: a burst of late ticks is not an overlap, and none of them is the
 * previous tick the next on-time one looks at.  Returns how many this
 * host fired (another host on the same journal may have claimed some). */
size_t cron_fire_late(duro_engine *e, cron_trigger *t, const int64_t *ticks,
                      size_t n, int64_t now) {
  if (!t->workflow)
    return cron_fire_handler_late(e, t, ticks, n, now);
  size_t fired = 0;
  for (size_t i = 0; i < n; i++)
    fired += cron_fire_workflow(e, t, ticks[i], now, t->key, 1, NULL) == 1;
  return fired;
}
