/* pipeline_driver.c — the pipelines' hooks into the engine (driver.h):
 * the flusher's thread woken by every scheduler pass and stopped at the
 * engine's stop, a pipeline whose last write failed in /healthz, and the
 * pipelines' series of GET /metrics.
 *
 * The flusher runs on a thread of its own (pipeline_thread.c), woken by
 * every scheduler pass: a batch is at most roll_size bytes of records,
 * read and written in pages. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "pipeline_internal.h"
#include "util.h"

static void *create(duro_engine *e) {
  (void)e;
  pipeline_state *s = xcalloc(1, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->wake, NULL);
  s->next_ms = s->told_ms = INT64_MAX;
  return s;
}

/* The pass only wakes the flusher's thread (pipeline_thread.c). */
static int dispatch(duro_engine *e, void *state, int64_t *next_ms) {
  pipeline_state *s = state;
  *next_ms = INT64_MAX;
  if (s->n)
    pipeline_thread_wake(e, s, next_ms);
  return 0;
}

/* At stop: the file being written is finished (its "done" committed),
 * so a restart has no plan to redo; a crash would only mean redoing it.
 * An upload under way gives up instead (it may wait on a slow endpoint):
 * its plan is uploaded again after the restart. */
static uint32_t drain(void *state, const struct timespec *until) {
  (void)until;
  pipeline_thread_stop(state);
  return 0;
}

/* A pipeline whose last write failed makes the engine degraded: its
 * records pile up. */
static int health(duro_engine *e, void *state, duro_health_parts *parts) {
  (void)e;
  pipeline_state *s = state;
  int failing = 0;
  for (size_t i = 0; i < s->n; i++) {
    pipeline *p = &s->v[i];
    pthread_mutex_lock(&p->mu);
    if (p->last_error) {
      char key[160];
      snprintf(key, sizeof key, "pipeline_%s", p->name);
      duro_health_add_text(parts, key, p->last_error);
      failing = 1;
    }
    pthread_mutex_unlock(&p->mu);
  }
  return failing;
}

/* Pipeline names are [A-Za-z0-9_.:-]: safe as labels. */
static void metrics(duro_engine *e, void *state, FILE *out) {
  (void)state;
  duro_pipeline_stat_list l;
  if (duro_pipeline_stats_read(e, NULL, &l) != 0 || l.n == 0) {
    duro_pipeline_stat_list_free(&l);
    return;
  }
  static const struct {
    const char *name, *type, *help;
    size_t at; /* an int64_t of duro_pipeline_stat */
  } series[] = {
      {"duro_pipeline_records_accepted_total", "counter",
       "Records a pipeline accepted.", offsetof(duro_pipeline_stat, accepted)},
      {"duro_pipeline_bytes_accepted_total", "counter",
       "Bytes of records a pipeline accepted (a newline each).",
       offsetof(duro_pipeline_stat, accepted_bytes)},
      {"duro_pipeline_records_written_total", "counter",
       "Records a pipeline wrote to its files.",
       offsetof(duro_pipeline_stat, written)},
      {"duro_pipeline_bytes_written_total", "counter",
       "Bytes of records a pipeline wrote, before compression.",
       offsetof(duro_pipeline_stat, written_bytes)},
      {"duro_pipeline_files_total", "counter",
       "Files (objects) a pipeline wrote.",
       offsetof(duro_pipeline_stat, files)},
      {"duro_pipeline_write_errors_total", "counter",
       "Writes (uploads) of a batch that failed, since the host started.",
       offsetof(duro_pipeline_stat, write_errors)},
      {"duro_pipeline_backlog_records", "gauge",
       "Records accepted and not yet written.",
       offsetof(duro_pipeline_stat, backlog)},
      {"duro_pipeline_backlog_bytes", "gauge",
       "Bytes of records accepted and not yet written.",
       offsetof(duro_pipeline_stat, backlog_bytes)},
  };
  for (size_t k = 0; k < sizeof series / sizeof *series; k++) {
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", series[k].name, series[k].help,
            series[k].name, series[k].type);
    for (size_t i = 0; i < l.n; i++) {
      int64_t v;
      memcpy(&v, (const char *)&l.v[i] + series[k].at, sizeof v);
      fprintf(out, "%s{pipeline=\"%s\"} %" PRId64 "\n", series[k].name,
              l.v[i].name, v);
    }
  }
  fprintf(out, "# HELP duro_pipeline_last_flush_seconds When a pipeline last "
               "wrote a file (Unix time; 0: never).\n"
               "# TYPE duro_pipeline_last_flush_seconds gauge\n");
  for (size_t i = 0; i < l.n; i++)
    fprintf(out, "duro_pipeline_last_flush_seconds{pipeline=\"%s\"} %.3f\n",
            l.v[i].name,
            l.v[i].last_flush_ms == INT64_MIN
                ? 0
                : (double)l.v[i].last_flush_ms / 1000);
  fprintf(out, "# HELP duro_pipeline_write_failing Whether a pipeline's "
               "last write failed.\n"
               "# TYPE duro_pipeline_write_failing gauge\n");
  for (size_t i = 0; i < l.n; i++)
    fprintf(out, "duro_pipeline_write_failing{pipeline=\"%s\"} %d\n",
            l.v[i].name, l.v[i].last_error != NULL);
  duro_pipeline_stat_list_free(&l);
}

static void state_free(void *state) {
  pipeline_state *s = state;
  pipeline_thread_stop(s); /* an engine never stopped (drain not called) */
  for (size_t i = 0; i < s->n; i++) {
    pipeline *p = &s->v[i];
    free(p->name);
    free(p->binding);
    free((char *)p->o.dir);
    free((char *)p->o.partition);
    for (size_t k = 0; k < p->o.n_columns; k++)
      free((char *)p->o.columns[k]);
    free((void *)p->o.columns);
    free((char *)p->o.s3.endpoint);
    free((char *)p->o.s3.bucket);
    free((char *)p->o.s3.prefix);
    free((char *)p->o.s3.region);
    free((char *)p->o.s3.access_key);
    free((char *)p->o.s3.secret_key);
    free(p->last_error);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->flush_mu);
  }
  free(s->v);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->wake);
  free(s);
}

const duro_driver pipeline_driver = {
    .name = "pipelines",
    .create = create,
    .dispatch = dispatch,
    .drain = drain,
    .health = health,
    .metrics = metrics,
    .free = state_free,
};
