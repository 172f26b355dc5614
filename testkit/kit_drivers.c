/* kit_drivers.c — queues, pipelines and cron triggers in the kit's
 * engine: a step's queue and pipeline sends kept where the test can read
 * them, and ticks fired by the virtual clock.  What the test declares is kept
 * here and declared again on every engine the kit opens (a crash run's
 * processes open their own). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "kit_internal.h"
#include "loader.h"
#include "pipeline.h"
#include "queue.h"
#include "trigger.h"
#include "util.h"

/* A pipeline whose records stay in the journal for the test to read: its
 * files would be written only after a century of virtual time or past
 * 1 TiB of records. */
static int pipeline_declare(duro_test *t, const kit_pipeline *p) {
  char dir[300];
  snprintf(dir, sizeof dir, "%s/pipelines", t->dir);
  duro_pipeline_options o = {.dir = dir,
                             .partition = "{yyyy}",
                             .compression = DURO_PIPELINE_NONE,
                             .roll_size = 1LL << 40,
                             .roll_interval_ms = 100LL * 366 * 86400000,
                             .max_backlog = 1LL << 40};
  int rc = duro_pipeline_register(t->e, p->name, &o);
  if (rc == 0 && p->binding)
    rc = duro_pipeline_bind(t->e, p->binding, p->name);
  return rc;
}

int kit_drivers_declare(duro_test *t) {
  char err[512];
  for (size_t i = 0; i < t->n_pipelines; i++) {
    int rc = pipeline_declare(t, &t->pipelines[i]);
    if (rc != 0)
      return kit_fail(t, rc, "pipeline \"%s\": %s", t->pipelines[i].name,
                      duro_err_name(rc));
  }
  for (size_t i = 0; i < t->n_queues; i++) {
    const kit_queue *q = &t->queues[i];
    duro_queue_options opt = {.max_retries = -1};
    int rc = duro_queue_register(t->e, q->name, &opt);
    if (rc == 0 && q->binding)
      rc = duro_queue_bind(t->e, q->binding, q->name);
    if (rc != 0)
      return kit_fail(t, rc, "queue \"%s\": %s", q->name, duro_err_name(rc));
  }
  for (size_t i = 0; i < t->n_crons; i++) {
    const kit_cron *c = &t->crons[i];
    duro_cron_spec spec = {.plugin = "test",
                           .schedule = c->schedule,
                           .workflow = c->workflow,
                           .params = c->params};
    int rc = duro_cron_register(t->e, &spec, err, sizeof err);
    if (rc != 0)
      return kit_fail(t, rc, "cron \"%s\": %s", c->schedule, err);
  }
  if (t->scheduled)
    duro_cron_set_handler(t->e, "test", t->scheduled, NULL);
  return 0;
}

void kit_drivers_free(duro_test *t) {
  for (size_t i = 0; i < t->n_queues; i++) {
    free(t->queues[i].name);
    free(t->queues[i].binding);
  }
  free(t->queues);
  for (size_t i = 0; i < t->n_pipelines; i++) {
    free(t->pipelines[i].name);
    free(t->pipelines[i].binding);
  }
  free(t->pipelines);
  for (size_t i = 0; i < t->n_crons; i++) {
    free(t->crons[i].schedule);
    free(t->crons[i].workflow);
    free(t->crons[i].params);
  }
  free(t->crons);
}

int duro_test_queue(duro_test *t, const char *name, const char *binding) {
  if (t->started)
    return kit_fail(t, DURO_E_INVALID_ARGUMENT,
                    "queue \"%s\": declare queues before the first create",
                    name);
  t->queues = xrealloc(t->queues, (t->n_queues + 1) * sizeof *t->queues);
  t->queues[t->n_queues++] = (kit_queue){
      .name = xstrdup(name), .binding = binding ? xstrdup(binding) : NULL};
  duro_queue_options opt = {.max_retries = -1};
  int rc = duro_queue_register(t->e, name, &opt);
  if (rc == 0 && binding)
    rc = duro_queue_bind(t->e, binding, name);
  if (rc != 0) {
    t->n_queues--;
    free(t->queues[t->n_queues].name);
    free(t->queues[t->n_queues].binding);
    return kit_fail(t, rc, "queue \"%s\": %s", name, duro_err_name(rc));
  }
  return 0;
}

const char *duro_test_queue_messages(duro_test *t, const char *name) {
  duro_queue_message_list l = {0};
  char err[512];
  if (duro_queue_peek_messages(t->e, name, 100, &l, err, sizeof err) != 0) {
    kit_fail(t, DURO_E_QUEUE_NOT_FOUND, "queue \"%s\": %s", name, err);
    return NULL;
  }
  json_t *bodies = json_array();
  for (size_t i = 0; i < l.n; i++) {
    json_t *b = json_loads(l.v[i].body, JSON_DECODE_ANY, NULL);
    json_array_append_new(bodies, b ? b : json_string(l.v[i].body));
  }
  duro_queue_message_list_free(&l);
  char *s = json_dumps(bodies, JSON_COMPACT);
  json_decref(bodies);
  return kit_keep(t, KIT_KEEP_QUEUE, s);
}

int duro_test_pipeline(duro_test *t, const char *name, const char *binding) {
  if (t->started)
    return kit_fail(t, DURO_E_INVALID_ARGUMENT,
                    "pipeline \"%s\": declare pipelines before the first "
                    "create",
                    name);
  kit_pipeline p = {.name = xstrdup(name),
                    .binding = binding ? xstrdup(binding) : NULL};
  int rc = pipeline_declare(t, &p);
  if (rc != 0) {
    free(p.name);
    free(p.binding);
    return kit_fail(t, rc, "pipeline \"%s\": %s", name, duro_err_name(rc));
  }
  t->pipelines =
      xrealloc(t->pipelines, (t->n_pipelines + 1) * sizeof *t->pipelines);
  t->pipelines[t->n_pipelines++] = p;
  return 0;
}

static int add_record(void *ctx, const char *body) {
  json_t *v = json_loads(body, JSON_DECODE_ANY, NULL);
  json_array_append_new(ctx, v ? v : json_string(body));
  return 0;
}

const char *duro_test_pipeline_records(duro_test *t, const char *name) {
  json_t *records = json_array();
  int rc = duro_pipeline_peek(t->e, name, 100000, add_record, records);
  if (rc != 0) {
    json_decref(records);
    kit_fail(t, rc, "pipeline \"%s\": %s", name,
             rc == DURO_E_NOT_FOUND ? "not declared" : duro_err_name(rc));
    return NULL;
  }
  char *s = json_dumps(records, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(records);
  return kit_keep(t, KIT_KEEP_PIPELINE, s);
}

int duro_test_cron(duro_test *t, const char *schedule, const char *workflow,
                   const char *params) {
  if (t->started)
    return kit_fail(t, DURO_E_INVALID_ARGUMENT,
                    "cron \"%s\": declare triggers before the first create",
                    schedule);
  if (!workflow) {
    /* the handler form: the scheduled handler of a plugin the test loaded */
    for (size_t i = 0; i < t->n_plugins && !t->scheduled; i++)
      t->scheduled = loader_info(t->plugins[i])->scheduled;
    if (!t->scheduled)
      return kit_fail(t, DURO_E_INVALID_ARGUMENT,
                      "cron \"%s\" without a workflow calls a plugin's "
                      "scheduled handler, and no plugin loaded has one",
                      schedule);
    duro_cron_set_handler(t->e, "test", t->scheduled, NULL);
  }
  duro_cron_spec spec = {.plugin = "test",
                         .schedule = schedule,
                         .workflow = workflow,
                         .params = params};
  char err[512];
  int rc = duro_cron_register(t->e, &spec, err, sizeof err);
  if (rc != 0)
    return kit_fail(t, rc, "cron \"%s\": %s", schedule, err);
  t->crons = xrealloc(t->crons, (t->n_crons + 1) * sizeof *t->crons);
  t->crons[t->n_crons++] =
      (kit_cron){.schedule = xstrdup(schedule),
                 .workflow = workflow ? xstrdup(workflow) : NULL,
                 .params = params ? xstrdup(params) : NULL};
  return 0;
}

int64_t kit_next_tick(duro_test *t) {
  int64_t next = INT64_MAX;
  if (t->n_crons)
    duro_crons_dispatch(t->e, &next);
  return next;
}
