/* queue_driver.c — the queues' hooks into the engine (driver.h): the
 * consumers' dispatch on every scheduler pass, the messages' retention
 * sweep, the replay of a batch a dead engine's handler held, the
 * lifecycle messages of instances (lifecycle.c), the hung handlers
 * /healthz lists, the queues' series of GET /metrics, and the wait for
 * handlers at stop.
 *
 * A batch stopped by the death: the guilty one is retried as its queue's
 * retry policy says, with the crash as the error (so a handler that always
 * crashes ends in the dead-letter queue after max_retries + 1 deliveries);
 * a bystander's messages return at once. */
#include "queue_driver.h"

#include <inttypes.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "error.h"
#include "log.h"
#include "queue.h"
#include "queue_internal.h"
#include "util.h"

queue_state *queue_state_of(duro_engine *e) {
  return duro_engine_driver_state(e, &queue_driver);
}

struct queue_consumers *queue_consumers_of(duro_engine *e) {
  /* Created once and never replaced (consumer_register.c): read without a lock,
   * as every send does. */
  return __atomic_load_n(&queue_state_of(e)->consumers, __ATOMIC_ACQUIRE);
}

static void *create(duro_engine *e) {
  (void)e;
  queue_state *s = xcalloc(1, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  return s;
}

static int dispatch(duro_engine *e, void *state, int64_t *next_ms) {
  (void)state;
  int64_t due;
  /* a full pass handled messages: there may be more, so no wait */
  int busy = queue_consumers_dispatch(e, &due) > 0;
  *next_ms = due == JOURNAL_NONE ? INT64_MAX : due;
  return busy;
}

static int sweep(duro_engine *e, void *state, size_t budget) {
  queue_state *s = state;
  size_t n = 0;
  int rc = duro_queues_sweep(e, budget, &n);
  s->swept += n;
  if (rc == 1)
    return 1; /* more on the next pass */
  if (rc < 0)
    log_error("queue retention sweep failed: %s",
              journal_errmsg(engine_journal(e)));
  else if (s->swept)
    log_info("retention: deleted %zu queue message(s)", s->swept);
  s->swept = 0;
  return 0;
}

static int recover(duro_engine *e, void *state, const ledger_slot *sl,
                   int guilty, const char *how) {
  (void)state;
  char *why = guilty
                  ? xasprintf("the queue handler of plugin \"%s\" crashed the "
                              "engine (%s)",
                              sl->plugin, how)
                  : xasprintf("the engine stopped (%s) while the queue handler "
                              "ran this batch",
                              how);
  char *err = error_json(guilty ? DURO_ERR_CRASHED : DURO_ERR_STOPPED, why);
  if (guilty)
    log_write(DURO_LOG_WARN, NULL, "queue %s: %s; %u message(s) retried",
              sl->workflow, why, sl->count);
  queue_batch_release(e, sl->workflow, sl->key, guilty ? -1 : 0, err);
  free(err);
  free(why);
  return 0; /* a release that failed leaves the leases to run out */
}

/* Queue handlers past their deadline make the engine degraded, as hung
 * steps do. */
static int health(duro_engine *e, void *state, duro_health_parts *parts) {
  (void)state;
  duro_hung_handler *hung;
  size_t n;
  queue_handlers_hung(e, &hung, &n);
  if (n)
    duro_health_add_hung_handlers(parts, "hung_queue_handlers", hung, n);
  return n > 0;
}

/* The int64_t field of `q` at offset `at` (a series' column). */
static int64_t stat_at(const duro_queue_stat *q, size_t at) {
  int64_t v;
  memcpy(&v, (const char *)q + at, sizeof v);
  return v;
}

/* The ready messages of each queue whose consumer limits by key that
 * wait for their key's turn (counted in `ready` too). */
static void metrics_held(const duro_queue_stat_list *qs, FILE *out) {
  int header = 0;
  for (size_t i = 0; i < qs->n; i++) {
    if (!qs->v[i].consumer.concurrency_key)
      continue;
    if (!header++)
      fprintf(out, "# HELP duro_queue_held_messages Ready messages of a "
                   "queue waiting for their concurrency key's turn.\n"
                   "# TYPE duro_queue_held_messages gauge\n");
    fprintf(out, "duro_queue_held_messages{queue=\"%s\"} %" PRId64 "\n",
            qs->v[i].name, qs->v[i].held);
  }
}

/* Each registered queue's depth by state, age and lag, and its messages
 * out of retries (queue names are [A-Za-z0-9_.:-]: safe as labels). */
static void metrics(duro_engine *e, void *state, FILE *out) {
  (void)state;
  duro_queue_stat_list qs;
  if (duro_queue_stats_read(e, NULL, &qs) != 0 || qs.n == 0) {
    duro_queue_stat_list_free(&qs);
    return;
  }
  static const struct {
    const char *name;
    size_t at;
  } states[] = {{"ready", offsetof(duro_queue_stat, ready)},
                {"delayed", offsetof(duro_queue_stat, delayed)},
                {"in_flight", offsetof(duro_queue_stat, in_flight)}};
  fprintf(out, "# HELP duro_queue_messages Messages of a queue by state.\n"
               "# TYPE duro_queue_messages gauge\n");
  for (size_t i = 0; i < qs.n; i++)
    for (size_t k = 0; k < 3; k++)
      fprintf(out,
              "duro_queue_messages{queue=\"%s\",state=\"%s\"} %" PRId64 "\n",
              qs.v[i].name, states[k].name, stat_at(&qs.v[i], states[k].at));
  static const struct {
    const char *name, *type, *help;
    size_t at; /* an int64_t of duro_queue_stat */
    double scale;
  } series[] = {
      {"duro_queue_oldest_age_seconds", "gauge",
       "Age of a queue's oldest message.",
       offsetof(duro_queue_stat, oldest_age_ms), 1e-3},
      {"duro_queue_lag_seconds", "gauge",
       "How long a queue's oldest ready message has waited for a consumer.",
       offsetof(duro_queue_stat, lag_ms), 1e-3},
      {"duro_queue_dropped_total", "counter",
       "Messages dropped out of retries (no dead-letter queue).",
       offsetof(duro_queue_stat, dropped), 1},
      {"duro_queue_dead_lettered_total", "counter",
       "Messages moved to the dead-letter queue out of retries.",
       offsetof(duro_queue_stat, dead_lettered), 1},
  };
  for (size_t k = 0; k < sizeof series / sizeof *series; k++) {
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", series[k].name, series[k].help,
            series[k].name, series[k].type);
    for (size_t i = 0; i < qs.n; i++)
      fprintf(out, "%s{queue=\"%s\"} %g\n", series[k].name, qs.v[i].name,
              (double)stat_at(&qs.v[i], series[k].at) * series[k].scale);
  }
  metrics_held(&qs, out);
  duro_queue_stat_list_free(&qs);
}

static uint32_t drain(void *state, const struct timespec *until) {
  queue_state *s = state;
  return queue_consumers_wait(__atomic_load_n(&s->consumers, __ATOMIC_ACQUIRE),
                              until);
}

static void state_free(void *state) {
  queue_state *s = state;
  queue_consumers_free(s->consumers); /* waits for handlers: before queues */
  queue_registry_free(s->queues);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

const duro_driver queue_driver = {
    .name = "queues",
    .create = create,
    .dispatch = dispatch,
    .sweep = sweep,
    .recover = recover,
    .instance_changed = queue_lifecycle_changed,
    .health = health,
    .metrics = metrics,
    .drain = drain,
    .free = state_free,
};
