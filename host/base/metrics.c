/* metrics.c — histogram buckets and the Prometheus text format. */
#include "metrics.h"

#include <time.h>

static const int64_t bounds_us[METRICS_BUCKETS] = {
    50,   100,   250,   500,    1000,    2500,
    5000, 10000, 50000, 250000, 1000000, 10000000};

void metrics_hist_observe(metrics_hist *h, int64_t micros) {
  if (micros < 0)
    micros = 0;
  size_t i = 0;
  while (i < METRICS_BUCKETS && micros > bounds_us[i])
    i++;
  __atomic_add_fetch(&h->buckets[i], 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&h->count, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&h->sum_us, (uint64_t)micros, __ATOMIC_RELAXED);
}

void metrics_hist_render(FILE *out, const char *name, const char *help,
                         const metrics_hist *h) {
  fprintf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= METRICS_BUCKETS; i++) {
    cumulative += __atomic_load_n(&h->buckets[i], __ATOMIC_RELAXED);
    if (i < METRICS_BUCKETS)
      fprintf(out, "%s_bucket{le=\"%g\"} %llu\n", name,
              (double)bounds_us[i] / 1e6, (unsigned long long)cumulative);
    else
      fprintf(out, "%s_bucket{le=\"+Inf\"} %llu\n", name,
              (unsigned long long)cumulative);
  }
  fprintf(out, "%s_sum %.6f\n%s_count %llu\n", name,
          (double)__atomic_load_n(&h->sum_us, __ATOMIC_RELAXED) / 1e6, name,
          (unsigned long long)__atomic_load_n(&h->count, __ATOMIC_RELAXED));
}

void metrics_counter_render(FILE *out, const char *name, const char *help,
                            uint64_t value) {
  fprintf(out, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name,
          name, (unsigned long long)value);
}

int64_t metrics_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void metrics_label_put(FILE *out, const char *s) {
  for (; s && *s; s++) {
    if (*s == '\\' || *s == '"')
      fputc('\\', out);
    if (*s == '\n')
      fputs("\\n", out);
    else
      fputc(*s, out);
  }
}
