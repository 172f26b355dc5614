/* tail.c — the tail handlers' driver (tail.h): its options, the
 * consumers (plugins with a tail handler, by name) and the workflows each
 * observes, the buffers an activation's end fills through the engine's
 * activation_ended hook, and the counts in /metrics.  The batches go out
 * on the scheduler's pass (tail_deliver.c). */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "tail_internal.h"
#include "util.h"

tail_state *tail_state_of(duro_engine *e) {
  return duro_engine_driver_state(e, &tail_driver);
}

static void *tail_create(duro_engine *e) {
  tail_state *t = xcalloc(1, sizeof *t);
  t->e = e;
  t->opt = (duro_tail_options){
      .buffer = DURO_TAIL_DEFAULT_BUFFER,
      .buffer_bytes = DURO_TAIL_DEFAULT_BUFFER_BYTES,
      .max_batch = DURO_TAIL_DEFAULT_MAX_BATCH,
      .batch_timeout_ms = DURO_TAIL_DEFAULT_BATCH_TIMEOUT_MS,
      .timeout_ms = DURO_TAIL_DEFAULT_TIMEOUT_MS,
  };
  pthread_mutex_init(&t->mu, NULL);
  engine_cond_init(&t->idle);
  return t;
}

int duro_tail_configure(duro_engine *e, const duro_tail_options *o) {
  tail_state *t = tail_state_of(e);
  if (!t || !o)
    return DURO_E_INVALID_ARGUMENT;
  pthread_mutex_lock(&t->mu);
  if (t->n_consumers) { /* the rings are sized: before any consumer */
    pthread_mutex_unlock(&t->mu);
    return DURO_E_INVALID_ARGUMENT;
  }
  if (o->buffer)
    t->opt.buffer = o->buffer;
  if (o->buffer_bytes)
    t->opt.buffer_bytes = o->buffer_bytes;
  if (o->max_batch)
    t->opt.max_batch = o->max_batch;
  if (o->batch_timeout_ms)
    t->opt.batch_timeout_ms = o->batch_timeout_ms;
  if (o->timeout_ms)
    t->opt.timeout_ms = o->timeout_ms;
  pthread_mutex_unlock(&t->mu);
  return 0;
}

tail_consumer *tail_consumer_locked(tail_state *t, const char *plugin) {
  for (size_t i = 0; i < t->n_consumers; i++)
    if (!strcmp(t->consumers[i]->plugin, plugin))
      return t->consumers[i];
  tail_consumer *c = xcalloc(1, sizeof *c);
  c->plugin = xstrdup(plugin);
  c->ring = xcalloc(t->opt.buffer, sizeof *c->ring);
  t->consumers =
      xrealloc(t->consumers, (t->n_consumers + 1) * sizeof *t->consumers);
  t->consumers[t->n_consumers++] = c;
  return c;
}

void duro_tail_observe(duro_engine *e, const char *workflow,
                       const char *const *consumers, size_t n) {
  tail_state *t = tail_state_of(e);
  if (!t)
    return;
  pthread_mutex_lock(&t->mu);
  tail_watch *w = strmap_get(&t->observed, workflow);
  if (!w && n) {
    w = xcalloc(1, sizeof *w);
    w->workflow = xstrdup(workflow);
    strmap_put(&t->observed, w->workflow, w);
  }
  if (w) {
    t->n_observed += (n > 0) - (w->n > 0);
    free(w->v);
    w->v = n ? xcalloc(n, sizeof *w->v) : NULL;
    for (size_t i = 0; i < n; i++)
      w->v[i] = tail_consumer_locked(t, consumers[i]);
    w->n = n;
  }
  int on = t->n_observed > 0;
  pthread_mutex_unlock(&t->mu);
  engine_observe_activations(e, &tail_driver, on);
}

void duro_tail_set_handler(duro_engine *e, const char *plugin, duro_tail_fn fn,
                           void *ctx) {
  tail_state *t = tail_state_of(e);
  if (!t)
    return;
  pthread_mutex_lock(&t->mu);
  tail_consumer *c = tail_consumer_locked(t, plugin);
  c->fn = fn;
  c->ctx = ctx;
  if (fn)
    c->warned = 0;
  pthread_mutex_unlock(&t->mu);
}

int duro_tail_handler_running(duro_engine *e, duro_tail_fn fn) {
  tail_state *t = tail_state_of(e);
  int running = 0;
  if (!t || !fn)
    return 0;
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < t->n_consumers && !running; i++)
    running = t->consumers[i]->running == fn;
  pthread_mutex_unlock(&t->mu);
  return running;
}

int duro_tail_stats_of(duro_engine *e, const char *plugin,
                       duro_tail_stats *out) {
  tail_state *t = tail_state_of(e);
  int rc = DURO_E_NOT_FOUND;
  if (!t)
    return rc;
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < t->n_consumers; i++) {
    const tail_consumer *c = t->consumers[i];
    if (strcmp(c->plugin, plugin) != 0)
      continue;
    *out = (duro_tail_stats){.delivered = c->delivered,
                             .dropped = c->dropped,
                             .batches = c->batches,
                             .failed_batches = c->failed_batches,
                             .buffered = c->n + c->in_batch};
    rc = 0;
  }
  pthread_mutex_unlock(&t->mu);
  return rc;
}

/* rec into c's ring, or dropped (counted) when it is full; 1 when c now
 * holds a whole batch (mu held). */
static int buffer_locked(tail_state *t, tail_consumer *c, tail_rec *rec) {
  if (c->n >= t->opt.buffer ||
      c->bytes + (int64_t)rec->bytes > t->opt.buffer_bytes) {
    c->dropped++;
    c->dropped_since++;
    return 0;
  }
  if (c->n == 0)
    c->oldest_ms = engine_now(t->e);
  c->ring[(c->head + c->n) % t->opt.buffer] = rec;
  c->n++;
  c->bytes += (int64_t)rec->bytes;
  rec->refs++;
  return c->n == t->opt.max_batch;
}

/* An activation ended: its item into the buffer of each consumer of its
 * workflow.  On the thread that committed it: a copy, no JSON. */
static void tail_activation_ended(duro_engine *e, void *state,
                                  const duro_activation_report *r) {
  tail_state *t = state;
  pthread_mutex_lock(&t->mu);
  const tail_watch *w = strmap_get(&t->observed, r->workflow);
  if (!w || !w->n) {
    pthread_mutex_unlock(&t->mu);
    return;
  }
  tail_rec *rec = tail_rec_copy(r);
  int full = 0;
  for (size_t i = 0; i < w->n; i++)
    full |= buffer_locked(t, w->v[i], rec);
  if (!rec->refs)
    tail_rec_free(rec);
  pthread_mutex_unlock(&t->mu);
  if (full)
    engine_kick_scheduler(e); /* a whole batch waits: send it now */
}

static void tail_metrics(duro_engine *e, void *state, FILE *out) {
  (void)e;
  tail_state *t = state;
  static const struct {
    const char *name, *type, *help;
  } series[] = {
      {"duro_tail_items_delivered_total", "counter",
       "Trace items handed to a tail handler that returned 0"},
      {"duro_tail_items_dropped_total", "counter",
       "Trace items lost: the consumer's buffer was full, it has no tail "
       "handler, or its batch failed"},
      {"duro_tail_batches_failed_total", "counter",
       "Batches whose tail handler failed, crashed or passed tail.timeout"},
      {"duro_tail_items_buffered", "gauge",
       "Trace items waiting for a tail handler, or in its running batch"},
  };
  pthread_mutex_lock(&t->mu);
  for (size_t s = 0; t->n_consumers && s < sizeof series / sizeof *series;
       s++) {
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", series[s].name, series[s].help,
            series[s].name, series[s].type);
    for (size_t i = 0; i < t->n_consumers; i++) {
      const tail_consumer *c = t->consumers[i];
      uint64_t v = s == 0   ? c->delivered
                   : s == 1 ? c->dropped
                   : s == 2 ? c->failed_batches
                            : (uint64_t)(c->n + c->in_batch);
      fprintf(out, "%s{consumer=\"%s\"} %llu\n", series[s].name, c->plugin,
              (unsigned long long)v);
    }
  }
  pthread_mutex_unlock(&t->mu);
}

static void tail_free(void *state) {
  tail_state *t = state;
  for (size_t i = 0; i < t->n_consumers; i++) {
    tail_consumer *c = t->consumers[i];
    for (size_t k = 0; k < c->n; k++) {
      tail_rec *r = c->ring[(c->head + k) % t->opt.buffer];
      if (--r->refs == 0)
        tail_rec_free(r);
    }
    free(c->ring);
    free(c->plugin);
    free(c);
  }
  free(t->consumers);
  for (size_t i = 0; i < t->observed.cap; i++) {
    tail_watch *w = t->observed.vals[i];
    if (!t->observed.keys[i] || !w)
      continue;
    free(w->v);
    free(w->workflow);
    free(w);
  }
  strmap_free(&t->observed);
  pthread_cond_destroy(&t->idle);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

const duro_driver tail_driver = {
    .name = "tail",
    .create = tail_create,
    .dispatch = tail_dispatch,
    .activation_ended = tail_activation_ended,
    .metrics = tail_metrics,
    .drain = tail_drain,
    .free = tail_free,
};
