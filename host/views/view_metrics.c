/* view_metrics.c — the engine's counters' history as the JSON of
 * GET /metrics/history (view_metrics.h). */
#include "view_metrics.h"

json_t *view_metrics_history(const duro_metrics_history *h) {
  json_t *series = json_object();
  for (size_t k = 0; k < DURO_HISTORY_SERIES; k++) {
    json_t *a = json_array();
    for (size_t i = 0; i < DURO_HISTORY_BUCKETS; i++)
      json_array_append_new(a, json_integer((json_int_t)h->series[k].n[i]));
    json_object_set_new(series, h->series[k].name, a);
  }
  return json_pack("{s:i,s:I,s:I,s:I,s:o}", "bucket_ms", (int)h->bucket_ms,
                   "now_ms", (json_int_t)h->now_ms, "start_ms",
                   (json_int_t)h->start_ms, "since_ms", (json_int_t)h->since_ms,
                   "series", series);
}

json_t *duro_engine_metrics_history(duro_engine *e) {
  duro_metrics_history h;
  duro_engine_history(e, &h);
  return view_metrics_history(&h);
}
