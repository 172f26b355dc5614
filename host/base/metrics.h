/* metrics.h — lock-free counters and latency histograms, rendered in the
 * Prometheus text format for GET /metrics.  Writers on any thread use
 * relaxed atomic adds; a reader may see a histogram mid-update, which
 * Prometheus tolerates. */
#ifndef DURO_METRICS_H
#define DURO_METRICS_H

#include <stdint.h>
#include <stdio.h>

/* Upper bounds in microseconds; the last bucket is +Inf. */
#define METRICS_BUCKETS 12

typedef struct metrics_hist {
  uint64_t buckets[METRICS_BUCKETS + 1];
  uint64_t count;
  uint64_t sum_us;
} metrics_hist;

static inline void metrics_add(uint64_t *counter, uint64_t n) {
  __atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
}

void metrics_hist_observe(metrics_hist *h, int64_t micros);

/* Writes `name` as a histogram in seconds, with HELP and TYPE lines. */
void metrics_hist_render(FILE *out, const char *name, const char *help,
                         const metrics_hist *h);

/* Writes a counter or gauge with HELP and TYPE lines. */
void metrics_counter_render(FILE *out, const char *name, const char *help,
                            uint64_t value);

/* A label's value as the text format wants it: backslash, double quote
 * and newline escaped (NULL writes nothing). */
void metrics_label_put(FILE *out, const char *s);

/* A monotonic clock in microseconds, for latencies. */
int64_t metrics_now_us(void);

#endif
