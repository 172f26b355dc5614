/* cron_metrics.c — the cron triggers' series of GET /metrics (their
 * driver's metrics hook, trigger.c): ticks by outcome and the next fire
 * time of each trigger, labelled by plugin and schedule. */
#include <jansson.h>
#include <stdio.h>

#include "trigger.h"

/* A label value as the Prometheus text format wants it: backslash,
 * double quote and newline escaped (a schedule is free text, a plugin
 * name need not be a queue-safe name). */
static void put_label(FILE *out, const char *s) {
  for (; s && *s; s++) {
    if (*s == '\\' || *s == '"')
      fputc('\\', out);
    if (*s == '\n')
      fputs("\\n", out);
    else
      fputc(*s, out);
  }
}

static void put_cron_labels(FILE *out, const char *name, const json_t *t) {
  fprintf(out, "%s{plugin=\"", name);
  put_label(out, json_string_value(json_object_get(t, "plugin")));
  fputs("\",schedule=\"", out);
  put_label(out, json_string_value(json_object_get(t, "schedule")));
  fputs("\"} ", out);
}

static json_int_t cron_count(const json_t *t, const char *key) {
  return json_integer_value(json_object_get(t, key));
}

/* Each cron trigger's ticks by outcome, from duro_cron_list's counts
 * (journaled, so they survive restarts), and its next tick. */
void cron_metrics(duro_engine *e, FILE *out) {
  json_t *ts = NULL;
  if (duro_cron_list(e, &ts) != 0 || json_array_size(ts) == 0) {
    json_decref(ts);
    return;
  }
  static const struct {
    const char *name, *help, *keys[3];
  } series[] = {
      {"duro_cron_fires_total",
       "Cron ticks fired (running, complete or failed).",
       {"running", "complete", "failed"}},
      {"duro_cron_failures_total",
       "Cron ticks whose handler failed, crashed or was cut short.",
       {"failed", NULL, NULL}},
      {"duro_cron_missed_total",
       "Cron ticks that passed while the host was down.",
       {"missed", NULL, NULL}},
      {"duro_cron_skipped_total",
       "Cron ticks skipped while the previous one still ran.",
       {"skipped", NULL, NULL}},
  };
  size_t i;
  json_t *t;
  for (size_t k = 0; k < sizeof series / sizeof *series; k++) {
    fprintf(out, "# HELP %s %s\n# TYPE %s counter\n", series[k].name,
            series[k].help, series[k].name);
    json_array_foreach(ts, i, t) {
      json_int_t n = 0;
      for (size_t c = 0; c < 3 && series[k].keys[c]; c++)
        n += cron_count(t, series[k].keys[c]);
      put_cron_labels(out, series[k].name, t);
      fprintf(out, "%" JSON_INTEGER_FORMAT "\n", n);
    }
  }
  fprintf(out, "# HELP duro_cron_next_fire_timestamp_seconds When a cron "
               "trigger fires next (Unix time).\n"
               "# TYPE duro_cron_next_fire_timestamp_seconds gauge\n");
  json_array_foreach(ts, i, t) {
    json_t *next = json_array_get(json_object_get(t, "next"), 0);
    if (!json_is_integer(next)) /* a schedule with no tick left */
      continue;
    json_int_t ms = json_integer_value(next);
    put_cron_labels(out, "duro_cron_next_fire_timestamp_seconds", t);
    if (ms % 1000 == 0)
      fprintf(out, "%" JSON_INTEGER_FORMAT "\n", ms / 1000);
    else
      fprintf(out, "%.3f\n", (double)ms / 1000);
  }
  json_decref(ts);
}
