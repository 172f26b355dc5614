/* telemetry.c — the traces' driver: its options, the bounded buffer the
 * journal's commits fill (span_capture.c), the exporter's thread that
 * posts what waits (span_export.c) each interval or once the buffer is
 * half full, and its counts in /metrics.
 *
 * A batch the collector refuses (or never answers) is kept and tried
 * again, each time after twice the wait (up to a minute); meanwhile the
 * buffer fills, and past it spans are dropped and counted.  At stop what
 * waits gets one more try. */
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "log.h"
#include "telemetry_internal.h"
#include "util.h"

#define BATCH_MAX 512
#define RETRY_MAX_MS 60000

static telemetry *state_of(duro_engine *e) {
  return duro_engine_driver_state(e, &telemetry_driver);
}

int duro_telemetry_enable(duro_engine *e, const duro_telemetry_options *o) {
  telemetry *t = state_of(e);
  if (!t || !o || !o->otlp_endpoint || o->max_spans == 0)
    return DURO_E_INVALID_ARGUMENT;
  t->endpoint = xstrdup(o->otlp_endpoint);
  size_t len = strlen(t->endpoint);
  while (len > 0 && t->endpoint[len - 1] == '/') /* ".../" + "/v1/traces" */
    t->endpoint[--len] = '\0';
  t->service = xstrdup(o->service_name ? o->service_name : "duro");
  t->sample = o->sample;
  t->max = o->max_spans;
  t->interval_ms = o->interval_ms > 0 ? o->interval_ms : 1000;
  t->ring = xcalloc(t->max, sizeof *t->ring);
  engine_set_trace_sample(e, t->sample);
  engine_observe_activations(e, &telemetry_driver, 1); /* their spans */
  t->on = 1;
  return 0;
}

static void deadline_in(struct timespec *ts, int64_t ms) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (ms % 1000) * 1000000;
  if (ts->tv_nsec >= 1000000000) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000;
  }
}

/* Takes up to BATCH_MAX records off the buffer into v (t->mu held). */
static size_t take(telemetry *t, span_slot *v) {
  size_t n = t->n < BATCH_MAX ? t->n : BATCH_MAX;
  for (size_t i = 0; i < n; i++) {
    v[i] = t->ring[t->head];
    memset(&t->ring[t->head], 0, sizeof t->ring[t->head]);
    t->head = (t->head + 1) % t->max;
  }
  t->n -= n;
  return n;
}

/* The names waiting (t->mu held) swapped with *v (the exporter's, of
 * capacity *cap, empty); how many. */
static size_t take_names(telemetry *t, span_slot **v, size_t *cap) {
  size_t n = t->n_names;
  span_slot *mine = *v;
  size_t mine_cap = *cap;
  *v = t->names;
  *cap = t->cap_names;
  t->names = mine;
  t->cap_names = mine_cap;
  t->n_names = 0;
  return n;
}

static void *exporter(void *arg) {
  telemetry *t = arg;
  span_slot *batch = xcalloc(BATCH_MAX, sizeof *batch);
  span_slot *names = NULL; /* the instances named, taken off t */
  size_t names_cap = 0;
  size_t held = 0; /* a batch refused, tried again */
  int64_t wait_ms = t->interval_ms;
  int failing = 0;
  pthread_mutex_lock(&t->mu);
  for (;;) {
    if (!t->stop && (held || t->n * 2 < t->max)) {
      struct timespec until;
      deadline_in(&until, wait_ms);
      while (!t->stop &&
             pthread_cond_timedwait(&t->wake, &t->mu, &until) != ETIMEDOUT &&
             (held || t->n * 2 < t->max))
        ;
    }
    int stopping = t->stop;
    /* the names first: an instance's name is taken with or before its
     * spans (it was committed before them) */
    size_t n_names = take_names(t, &names, &names_cap);
    if (!held)
      held = t->held = take(t, batch);
    pthread_mutex_unlock(&t->mu);
    span_names(t, names, n_names);
    char err[512] = "";
    int rc = held ? span_export(t, batch, held, err, sizeof err) : 0;
    pthread_mutex_lock(&t->mu);
    if (rc == 0) {
      t->exported += held;
      for (size_t i = 0; i < held; i++)
        span_slot_clear(&batch[i]);
      held = t->held = 0;
      wait_ms = t->interval_ms;
      if (failing)
        log_write(DURO_LOG_INFO, "telemetry", "spans reach %s again",
                  t->endpoint);
      failing = 0;
    } else {
      t->errors++;
      if (!failing)
        log_write(DURO_LOG_WARN, "telemetry",
                  "spans not exported (kept, tried again): %s", err);
      failing = 1;
      wait_ms = wait_ms * 2 < RETRY_MAX_MS ? wait_ms * 2 : RETRY_MAX_MS;
    }
    if (stopping && (rc != 0 || t->n == 0))
      break;
  }
  t->dropped += held;
  t->held = 0;
  pthread_mutex_unlock(&t->mu);
  for (size_t i = 0; i < held; i++)
    span_slot_clear(&batch[i]);
  free(batch);
  free(names);
  span_export_free(t);
  return NULL;
}

static void *create(duro_engine *e) {
  telemetry *t = xcalloc(1, sizeof *t);
  t->e = e;
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->wake, NULL);
  return t;
}

static void committed(duro_engine *e, void *state, const journal_batch *b) {
  (void)e;
  telemetry *t = state;
  if (__atomic_load_n(&t->on, __ATOMIC_RELAXED))
    span_capture(t, b);
}

static void activation_ended(duro_engine *e, void *state,
                             const duro_activation_report *r) {
  (void)e;
  telemetry *t = state;
  if (__atomic_load_n(&t->on, __ATOMIC_RELAXED))
    span_capture_activation(t, r);
}

/* The exporter's thread starts with the first pass (after the start). */
static int dispatch(duro_engine *e, void *state, int64_t *next_ms) {
  (void)e;
  telemetry *t = state;
  *next_ms = INT64_MAX;
  if (!t->on)
    return 0;
  pthread_mutex_lock(&t->mu);
  if (!t->started && !t->stop &&
      pthread_create(&t->thread, NULL, exporter, t) == 0)
    t->started = 1;
  pthread_mutex_unlock(&t->mu);
  return 0;
}

static void metrics(duro_engine *e, void *state, FILE *out) {
  (void)e;
  telemetry *t = state;
  if (!t->on)
    return;
  pthread_mutex_lock(&t->mu);
  fprintf(out,
          "# HELP duro_telemetry_spans_total Spans exported to the collector, "
          "or dropped (the buffer full).\n"
          "# TYPE duro_telemetry_spans_total counter\n"
          "duro_telemetry_spans_total{outcome=\"exported\"} %llu\n"
          "duro_telemetry_spans_total{outcome=\"dropped\"} %llu\n"
          "# HELP duro_telemetry_export_errors_total Posts the collector did "
          "not take.\n"
          "# TYPE duro_telemetry_export_errors_total counter\n"
          "duro_telemetry_export_errors_total %llu\n"
          "# HELP duro_telemetry_buffered_spans Spans waiting to be "
          "exported.\n"
          "# TYPE duro_telemetry_buffered_spans gauge\n"
          "duro_telemetry_buffered_spans %zu\n",
          (unsigned long long)t->exported, (unsigned long long)t->dropped,
          (unsigned long long)t->errors, t->n + t->held);
  pthread_mutex_unlock(&t->mu);
}

static uint32_t drain(void *state, const struct timespec *until) {
  (void)until; /* one last post, bounded by its own timeout */
  telemetry *t = state;
  pthread_mutex_lock(&t->mu);
  t->stop = 1;
  int started = t->started;
  t->started = 0;
  pthread_cond_signal(&t->wake);
  pthread_mutex_unlock(&t->mu);
  if (started)
    pthread_join(t->thread, NULL);
  return 0;
}

static void state_free(void *state) {
  telemetry *t = state;
  drain(t, NULL);
  for (size_t i = 0; i < t->n; i++)
    span_slot_clear(&t->ring[(t->head + i) % t->max]);
  for (size_t i = 0; i < t->n_names; i++)
    span_slot_clear(&t->names[i]);
  free(t->names);
  free(t->ring);
  free(t->endpoint);
  free(t->service);
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->wake);
  free(t);
}

const duro_driver telemetry_driver = {
    .name = "telemetry",
    .create = create,
    .dispatch = dispatch,
    .committed = committed,
    .activation_ended = activation_ended,
    .metrics = metrics,
    .drain = drain,
    .free = state_free,
};
