/* view_pipeline.c — GET /pipelines' JSON (view_pipeline.h). */
#include "view_pipeline.h"

#include <stdint.h>
#include <stdlib.h>

#include "util.h"

/* A time the stat holds, or null for INT64_MIN (none). */
static json_t *time_json(int64_t ms) {
  return ms == INT64_MIN ? json_null() : json_integer(ms);
}

/* An s3 sink's path is "s3://bucket/prefix", beside its endpoint and
 * region; its keys are never shown. */
static json_t *sink_json(const duro_pipeline_options *o) {
  char *path = o->s3.endpoint
                   ? xasprintf("s3://%s/%s", o->s3.bucket, o->s3.prefix)
                   : xstrdup(o->dir);
  json_t *j = json_pack(
      "{ss,ss,ss,ss,sI,sI,sI,sI}", "type", o->s3.endpoint ? "s3" : "files",
      "path", path, "partition", o->partition, "compression",
      o->compression == DURO_PIPELINE_GZIP   ? "gzip"
      : o->compression == DURO_PIPELINE_ZSTD ? "zstd"
                                             : "none",
      "roll_size", (json_int_t)o->roll_size, "roll_interval_ms",
      (json_int_t)o->roll_interval_ms, "max_backlog",
      (json_int_t)o->max_backlog, "max_retry_delay_ms",
      (json_int_t)o->max_retry_delay_ms);
  free(path);
  json_object_set_new(
      j, "format",
      json_string(o->format == DURO_PIPELINE_CSV ? "csv" : "jsonl"));
  if (o->format == DURO_PIPELINE_CSV) {
    json_t *cols = json_array();
    for (size_t i = 0; i < o->n_columns; i++)
      json_array_append_new(cols, json_string(o->columns[i]));
    json_object_set_new(j, "columns", cols);
  }
  if (o->s3.endpoint) {
    json_object_set_new(j, "endpoint", json_string(o->s3.endpoint));
    json_object_set_new(j, "region", json_string(o->s3.region));
  }
  return j;
}

static json_t *stat_json(const duro_pipeline_stat *p) {
  json_t *o = json_pack(
      "{ss,sI,sI,sI,sI,sI,s{sI,sI},so,so,so,sI,so}", "name", p->name,
      "accepted", (json_int_t)p->accepted, "accepted_bytes",
      (json_int_t)p->accepted_bytes, "written", (json_int_t)p->written,
      "written_bytes", (json_int_t)p->written_bytes, "files",
      (json_int_t)p->files, "backlog", "records", (json_int_t)p->backlog,
      "bytes", (json_int_t)p->backlog_bytes, "oldest_ms",
      time_json(p->oldest_ms), "last_flush_ms", time_json(p->last_flush_ms),
      "last_error", p->last_error ? json_string(p->last_error) : json_null(),
      "write_errors", (json_int_t)p->write_errors, "sink",
      sink_json(p->options));
  /* a batch planned and not yet done: the file being written */
  if (p->plan_first > 0)
    json_object_set_new(o, "writing",
                        json_pack("{sI,sI}", "first", (json_int_t)p->plan_first,
                                  "last", (json_int_t)p->plan_last));
  return o;
}

int duro_pipeline_stats(duro_engine *e, const char *name, json_t **out) {
  duro_pipeline_stat_list l;
  *out = NULL;
  int rc = duro_pipeline_stats_read(e, name, &l);
  if (rc == 0 && name) {
    *out = stat_json(&l.v[0]);
  } else if (rc == 0) {
    *out = json_array();
    for (size_t i = 0; i < l.n; i++)
      json_array_append_new(*out, stat_json(&l.v[i]));
  }
  duro_pipeline_stat_list_free(&l);
  return rc;
}
