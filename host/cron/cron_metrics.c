/* cron_metrics.c — the cron triggers' series of GET /metrics (their
 * driver's metrics hook, trigger_driver.c): ticks by outcome and the next fire
 * time of each trigger, labelled by plugin and schedule. */
#include <inttypes.h>
#include <stdio.h>

#include "metrics.h"
#include "trigger.h"

static void put_cron_labels(FILE *out, const char *name,
                            const duro_cron_trigger_info *t) {
  fprintf(out, "%s{plugin=\"", name);
  metrics_label_put(out, t->plugin);
  fputs("\",schedule=\"", out);
  metrics_label_put(out, t->schedule);
  fputs("\"} ", out);
}

/* Each cron trigger's ticks by outcome, from duro_cron_describe's counts
 * (journaled, so they survive restarts), and its next tick. */
void cron_metrics(duro_engine *e, FILE *out) {
  duro_cron_trigger_infos ts;
  if (duro_cron_describe(e, &ts) != 0 || ts.n == 0) {
    duro_cron_trigger_infos_clear(&ts);
    return;
  }
  enum { RUNNING, COMPLETE, FAILED, MISSED, SKIPPED, NONE };
  static const struct {
    const char *name, *help;
    int counts[3];
  } series[] = {
      {"duro_cron_fires_total",
       "Cron ticks fired (running, complete or failed).",
       {RUNNING, COMPLETE, FAILED}},
      {"duro_cron_failures_total",
       "Cron ticks whose handler failed, crashed or was cut short.",
       {FAILED, NONE, NONE}},
      {"duro_cron_missed_total",
       "Cron ticks that passed while the host was down.",
       {MISSED, NONE, NONE}},
      {"duro_cron_skipped_total",
       "Cron ticks skipped while the previous one still ran.",
       {SKIPPED, NONE, NONE}},
  };
  for (size_t k = 0; k < sizeof series / sizeof *series; k++) {
    fprintf(out, "# HELP %s %s\n# TYPE %s counter\n", series[k].name,
            series[k].help, series[k].name);
    for (size_t i = 0; i < ts.n; i++) {
      const duro_cron_trigger_info *t = &ts.v[i];
      const int64_t count[] = {t->running, t->complete, t->failed, t->missed,
                               t->skipped};
      int64_t n = 0;
      for (size_t c = 0; c < 3 && series[k].counts[c] != NONE; c++)
        n += count[series[k].counts[c]];
      put_cron_labels(out, series[k].name, t);
      fprintf(out, "%" PRId64 "\n", n);
    }
  }
  fprintf(out, "# HELP duro_cron_next_fire_timestamp_seconds When a cron "
               "trigger fires next (Unix time).\n"
               "# TYPE duro_cron_next_fire_timestamp_seconds gauge\n");
  for (size_t i = 0; i < ts.n; i++) {
    const duro_cron_trigger_info *t = &ts.v[i];
    if (t->n_next == 0) /* a schedule with no tick left */
      continue;
    int64_t ms = t->next[0];
    put_cron_labels(out, "duro_cron_next_fire_timestamp_seconds", t);
    if (ms % 1000 == 0)
      fprintf(out, "%" PRId64 "\n", ms / 1000);
    else
      fprintf(out, "%.3f\n", (double)ms / 1000);
  }
  duro_cron_trigger_infos_clear(&ts);
}
