/* cfgdiff.c — the difference between the running config and the file
 * read again, and the live part of it given to the engine (cfgdiff.h).
 *
 * The comparison is field by field, each field on one side of the line:
 * live or restart.  Plugins, workflows, producers and consumers are
 * matched by name (their binding, their queue), cron triggers by what
 * makes them one trigger (plugin, schedule, zone, workflow, id): a
 * trigger whose schedule changes is one removed and one added.  Each
 * sentence names the field and both values, so the answer of a refused
 * reload says what to undo or that the host must restart.  The
 * PostgreSQL connection string is never shown (it may hold a password). */
#include "cfgdiff.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "queue.h"
#include "trigger.h"
#include "util.h"

static void note(json_t *list, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(json_t *list, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = xvasprintf(fmt, ap);
  va_end(ap);
  json_array_append_new(list, json_string(s));
  free(s);
}

static int same(const char *a, const char *b) {
  return a == b || (a && b && !strcmp(a, b));
}

static const char *shown(const char *s) { return s ? s : "(none)"; }

/* A string field: a sentence when it differs. */
static void str_field(json_t *to, const char *what, const char *a,
                      const char *b) {
  if (!same(a, b))
    note(to, "%s: %s -> %s", what, shown(a), shown(b));
}

/* A workflow's flow rules: any change needs a restart (the running
 * counts belong to the rules they were taken under). */
static int same_rules(const config_flow_rule *a, size_t na,
                      const config_flow_rule *b, size_t nb) {
  if (na != nb)
    return 0;
  for (size_t i = 0; i < na; i++)
    if (!same(a[i].key, b[i].key) || a[i].limit != b[i].limit ||
        a[i].period_ms != b[i].period_ms || a[i].burst != b[i].burst)
      return 0;
  return 1;
}

static int same_weights(const config_workflow *a, const config_workflow *b) {
  if (a->n_weights != b->n_weights)
    return 0;
  for (size_t i = 0; i < a->n_weights; i++)
    if (strcmp(a->weights[i].value, b->weights[i].value) ||
        a->weights[i].weight != b->weights[i].weight)
      return 0;
  return 1;
}

static int same_flow(const config_workflow *a, const config_workflow *b) {
  return a->flow_reject == b->flow_reject &&
         same(a->priority_key, b->priority_key) &&
         a->priority_default == b->priority_default &&
         same(a->fairness_key, b->fairness_key) && same_weights(a, b) &&
         same(a->singleton_key, b->singleton_key) &&
         a->singleton_mode == b->singleton_mode &&
         same(a->debounce_key, b->debounce_key) &&
         a->debounce_ms == b->debounce_ms &&
         a->debounce_max_wait_ms == b->debounce_max_wait_ms &&
         same_rules(a->flow, a->n_flow, b->flow, b->n_flow) &&
         same_rules(a->rates, a->n_rates, b->rates, b->n_rates);
}

/* The search attributes, in order: a change needs a restart (the
 * engine's index of them is the one it registered). */
static int same_index(const config_workflow *a, const config_workflow *b) {
  if (a->n_index != b->n_index)
    return 0;
  for (size_t i = 0; i < a->n_index; i++)
    if (!same(a->index[i].name, b->index[i].name) ||
        !same(a->index[i].from, b->index[i].from) ||
        a->index[i].type != b->index[i].type)
      return 0;
  return 1;
}

static void int_field(json_t *to, const char *what, int64_t a, int64_t b) {
  if (a != b)
    note(to, "%s: %" PRId64 " -> %" PRId64, what, a, b);
}

/* A duration as the config writes it: the largest unit that divides it
 * ("30d", "5m", "1500ms"). */
static void dur_text(int64_t ms, char *out, size_t len) {
  static const struct {
    int64_t ms;
    const char *unit;
  } units[] = {{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}};
  for (size_t i = 0; i < sizeof units / sizeof *units; i++)
    if (ms && ms % units[i].ms == 0) {
      snprintf(out, len, "%" PRId64 "%s", ms / units[i].ms, units[i].unit);
      return;
    }
  snprintf(out, len, "%" PRId64 "ms", ms);
}

static void dur_field(json_t *to, const char *what, int64_t a, int64_t b) {
  char x[32], y[32];
  dur_text(a, x, sizeof x);
  dur_text(b, y, sizeof y);
  if (a != b)
    note(to, "%s: %s -> %s", what, x, y);
}

/* Whether a workflow's retention is one duration for every outcome. */
static int same_retention(const config_workflow *w) {
  return w->retention_ms == w->retention_errored_ms &&
         w->retention_ms == w->retention_terminated_ms;
}

/* A two-valued field, by the names of its values. */
static void flag_field(json_t *to, const char *what, int a, int b,
                       const char *yes, const char *no) {
  if (!a != !b)
    note(to, "%s: %s -> %s", what, a ? yes : no, b ? yes : no);
}

/* ---- the sections that need a restart ------------------------------------
 */

static void compare_host(const config *o, const config *c, json_t *restart) {
  str_field(restart, "storage.path", o->storage.path, c->storage.path);
  flag_field(restart, "storage.synchronous", o->storage.synchronous_full,
             c->storage.synchronous_full, "full", "normal");
  if (!same(o->storage.postgresql, c->storage.postgresql))
    note(restart, "storage.postgresql: changed");
  dur_field(restart, "storage.connect_timeout", o->storage.connect_timeout_ms,
            c->storage.connect_timeout_ms);
  dur_field(restart, "storage.lease", o->storage.lease_ms, c->storage.lease_ms);
  str_field(restart, "http.listen", o->http.listen, c->http.listen);
  str_field(restart, "http.token_env", o->http.token_env, c->http.token_env);
  flag_field(restart, "http.allow_insecure", o->http.allow_insecure,
             c->http.allow_insecure, "true", "false");
  int_field(restart, "http.max_body_bytes", o->http.max_body_bytes,
            c->http.max_body_bytes);
  dur_field(restart, "http.max_wait", o->http.max_wait_ms, c->http.max_wait_ms);
  int hosts_same = o->http.n_allowed_hosts == c->http.n_allowed_hosts;
  for (size_t i = 0; hosts_same && i < o->http.n_allowed_hosts; i++)
    hosts_same = same(o->http.allowed_hosts[i], c->http.allowed_hosts[i]);
  if (!hosts_same)
    note(restart, "http.allowed_hosts: changed");
  int_field(restart, "engine.threads", o->engine.workers, c->engine.workers);
  int_field(restart, "engine.max_step_result", o->engine.max_step_result,
            c->engine.max_step_result);
  int_field(restart, "engine.max_instance_state", o->engine.max_instance_state,
            c->engine.max_instance_state);
  int_field(restart, "engine.max_crashes", o->engine.max_crashes,
            c->engine.max_crashes);
  dur_field(restart, "engine.shutdown_grace", o->engine.shutdown_grace_ms,
            c->engine.shutdown_grace_ms);
  int_field(restart, "engine.max_queued", o->engine.max_queued,
            c->engine.max_queued);
  flag_field(restart, "log.format", o->log.json, c->log.json, "json", "text");
  str_field(restart, "telemetry.otlp_endpoint", o->telemetry.otlp_endpoint,
            c->telemetry.otlp_endpoint);
  str_field(restart, "telemetry.service_name", o->telemetry.service_name,
            c->telemetry.service_name);
  int_field(restart, "telemetry.sample", o->telemetry.sample,
            c->telemetry.sample);
  int_field(restart, "telemetry.max_spans", o->telemetry.max_spans,
            c->telemetry.max_spans);
  dur_field(restart, "telemetry.interval", o->telemetry.interval_ms,
            c->telemetry.interval_ms);
  int_field(restart, "tail.buffer", o->tail.buffer, c->tail.buffer);
  int_field(restart, "tail.buffer_bytes", o->tail.buffer_bytes,
            c->tail.buffer_bytes);
  int_field(restart, "tail.max_batch_size", o->tail.max_batch_size,
            c->tail.max_batch_size);
  dur_field(restart, "tail.max_batch_timeout", o->tail.max_batch_timeout_ms,
            c->tail.max_batch_timeout_ms);
  dur_field(restart, "tail.timeout", o->tail.timeout_ms, c->tail.timeout_ms);
}

static int same_columns(const config_pipeline *a, const config_pipeline *b) {
  if (a->n_columns != b->n_columns)
    return 0;
  for (size_t i = 0; i < a->n_columns; i++)
    if (!same(a->columns[i], b->columns[i]))
      return 0;
  return 1;
}

/* Pipelines are the host's, read at start: any change needs a restart. */
static void compare_pipelines(const config *o, const config *c,
                              json_t *restart) {
  for (size_t i = 0; i < o->n_pipelines || i < c->n_pipelines; i++) {
    const config_pipeline *a = i < o->n_pipelines ? &o->pipelines[i] : NULL;
    const config_pipeline *b = i < c->n_pipelines ? &c->pipelines[i] : NULL;
    if (!a || !b || !same(a->name, b->name) || !same(a->binding, b->binding) ||
        !same(a->path, b->path) || !same(a->partition, b->partition) ||
        !same(a->s3.endpoint, b->s3.endpoint) ||
        !same(a->s3.bucket, b->s3.bucket) ||
        !same(a->s3.prefix, b->s3.prefix) ||
        !same(a->s3.region, b->s3.region) ||
        !same(a->s3.access_key_env, b->s3.access_key_env) ||
        !same(a->s3.secret_key_env, b->s3.secret_key_env) ||
        a->format != b->format || !same_columns(a, b) ||
        a->compression != b->compression || a->roll_size != b->roll_size ||
        a->roll_interval_ms != b->roll_interval_ms ||
        a->max_backlog != b->max_backlog ||
        a->max_retry_delay_ms != b->max_retry_delay_ms) {
      note(restart, "pipelines: changed");
      return;
    }
  }
}

/* Resources are the host's, read at start: any change needs a restart. */
static void compare_resources(const config *o, const config *c,
                              json_t *restart) {
  for (size_t i = 0; i < o->n_resources || i < c->n_resources; i++) {
    const config_resource *a = i < o->n_resources ? &o->resources[i] : NULL;
    const config_resource *b = i < c->n_resources ? &c->resources[i] : NULL;
    if (!a || !b || !same(a->name, b->name) ||
        a->concurrency != b->concurrency || a->rate.limit != b->rate.limit ||
        a->rate.period_ms != b->rate.period_ms ||
        a->rate.burst != b->rate.burst) {
      note(restart, "resources: changed");
      return;
    }
  }
}

/* ---- workflows and producers ---------------------------------------------
 */

static const config_workflow *find_workflow(const config_plugin *p,
                                            const char *name) {
  for (size_t i = 0; i < p->n_workflows; i++)
    if (!strcmp(p->workflows[i].name, name))
      return &p->workflows[i];
  return NULL;
}

/* Two lists of names, in order. */
static int same_names(char *const *a, size_t na, char *const *b, size_t nb) {
  if (na != nb)
    return 0;
  for (size_t i = 0; i < na; i++)
    if (!same(a[i], b[i]))
      return 0;
  return 1;
}

static void compare_workflows(const config_plugin *o, const config_plugin *c,
                              json_t *live, json_t *restart) {
  for (size_t i = 0; i < o->n_workflows; i++)
    if (!find_workflow(c, o->workflows[i].name))
      note(restart, "plugin %s: workflow %s removed", o->name,
           o->workflows[i].name);
  for (size_t i = 0; i < c->n_workflows; i++) {
    const config_workflow *b = &c->workflows[i];
    const config_workflow *a = find_workflow(o, b->name);
    if (!a) {
      note(restart, "plugin %s: workflow %s added", c->name, b->name);
      continue;
    }
    char what[300];
#define WF(field)                                                              \
  (snprintf(what, sizeof what, "workflow %s: %s", b->name, field), what)
    str_field(restart, WF("binding"), a->binding, b->binding);
    str_field(restart, WF("class_name"), a->class_name, b->class_name);
    flag_field(restart, WF("versioning"), a->versioning_latest,
               b->versioning_latest, "latest", "pinned");
    flag_field(restart, WF("on_divergence"), a->pause_on_divergence,
               b->pause_on_divergence, "pause", "error");
    str_field(restart, WF("lifecycle_queue"), a->lifecycle_queue,
              b->lifecycle_queue);
    int_field(restart, WF("limits.concurrency"), a->concurrency,
              b->concurrency);
    int_field(restart, WF("limits.logs"), a->max_logs, b->max_logs);
    if (!same_flow(a, b))
      note(restart, "%s", WF("flow changed"));
    if (!same_index(a, b))
      note(restart, "%s", WF("index changed"));
    if (!same_names(a->tail_consumers, a->n_tail_consumers, b->tail_consumers,
                    b->n_tail_consumers))
      note(live, "%s", WF("tail_consumers changed"));
    if (same_retention(a) && same_retention(b)) {
      dur_field(live, WF("retention"), a->retention_ms, b->retention_ms);
    } else {
      dur_field(live, WF("retention.complete"), a->retention_ms,
                b->retention_ms);
      dur_field(live, WF("retention.errored"), a->retention_errored_ms,
                b->retention_errored_ms);
      dur_field(live, WF("retention.terminated"), a->retention_terminated_ms,
                b->retention_terminated_ms);
    }
    dur_field(live, WF("timeout"), a->timeout_ms, b->timeout_ms);
    flag_field(live, WF("on_timeout"), a->rollback_on_timeout,
               b->rollback_on_timeout, "rollback", "error");
    int_field(live, WF("limits.steps"), a->max_steps, b->max_steps);
    int_field(live, WF("limits.parallel"), a->parallel, b->parallel);
#undef WF
  }
}

static void compare_producers(const config_plugin *o, const config_plugin *c,
                              json_t *restart) {
  int same_list = o->n_producers == c->n_producers;
  for (size_t i = 0; same_list && i < o->n_producers; i++)
    same_list = same(o->producers[i].binding, c->producers[i].binding) &&
                same(o->producers[i].queue, c->producers[i].queue);
  if (!same_list)
    note(restart,
         "plugin %s: queues.producers changed (bindings are bound "
         "at start)",
         o->name);
}

/* ---- consumers -----------------------------------------------------------
 */

static const config_consumer *find_consumer(const config_plugin *p,
                                            const char *queue) {
  for (size_t i = 0; i < p->n_consumers; i++)
    if (!strcmp(p->consumers[i].queue, queue))
      return &p->consumers[i];
  return NULL;
}

static void compare_consumer(const config_consumer *a, const config_consumer *b,
                             json_t *live, json_t *restart) {
  char what[300];
#define Q(field)                                                               \
  (snprintf(what, sizeof what, "queue %s: %s", b->queue, field), what)
  str_field(restart, Q("workflow"), a->workflow, b->workflow);
  str_field(restart, Q("id_from"), a->id_from, b->id_from);
  int_field(live, Q("max_batch_size"), a->max_batch_size, b->max_batch_size);
  dur_field(live, Q("max_batch_timeout"), a->max_batch_timeout_ms,
            b->max_batch_timeout_ms);
  int_field(live, Q("max_retries"), a->max_retries, b->max_retries);
  dur_field(live, Q("retry_delay"), a->retry_delay_ms, b->retry_delay_ms);
  str_field(live, Q("dead_letter_queue"), a->dead_letter_queue,
            b->dead_letter_queue);
  int_field(live, Q("max_concurrency"), a->max_concurrency, b->max_concurrency);
  dur_field(live, Q("visibility_timeout"), a->visibility_timeout_ms,
            b->visibility_timeout_ms);
  str_field(live, Q("concurrency.key"), a->concurrency_key, b->concurrency_key);
  int_field(live, Q("concurrency.limit"), a->concurrency_limit,
            b->concurrency_limit);
  dur_field(live, Q("message_retention"), a->message_retention_ms,
            b->message_retention_ms);
#undef Q
}

static void compare_consumers(const config_plugin *o, const config_plugin *c,
                              json_t *live, json_t *restart) {
  for (size_t i = 0; i < o->n_consumers; i++)
    if (!find_consumer(c, o->consumers[i].queue))
      note(restart, "plugin %s: the consumer of queue %s removed", o->name,
           o->consumers[i].queue);
  for (size_t i = 0; i < c->n_consumers; i++) {
    const config_consumer *a = find_consumer(o, c->consumers[i].queue);
    if (a)
      compare_consumer(a, &c->consumers[i], live, restart);
    else
      note(restart, "plugin %s: a consumer of queue %s added", c->name,
           c->consumers[i].queue);
  }
}

/* ---- cron triggers -------------------------------------------------------
 */

static const char *const catch_up_name[] = {"latest", "none", "all"};

/* The same trigger: what the engine's key is made of. */
static int same_trigger(const config_cron *a, const config_cron *b) {
  return !strcmp(a->schedule, b->schedule) && same(a->timezone, b->timezone) &&
         same(a->workflow, b->workflow) && same(a->id, b->id);
}

static const config_cron *find_cron(const config_plugin *p,
                                    const config_cron *c) {
  for (size_t i = 0; i < p->n_crons; i++)
    if (same_trigger(&p->crons[i], c))
      return &p->crons[i];
  return NULL;
}

static void compare_crons(const config_plugin *o, const config_plugin *c,
                          json_t *live) {
  for (size_t i = 0; i < o->n_crons; i++)
    if (!find_cron(c, &o->crons[i]))
      note(live, "cron %s removed (plugin %s)", o->crons[i].schedule, o->name);
  for (size_t i = 0; i < c->n_crons; i++) {
    const config_cron *b = &c->crons[i];
    const config_cron *a = find_cron(o, b);
    if (!a) {
      note(live, "cron %s added (plugin %s%s%s)", b->schedule, c->name,
           b->workflow ? ", workflow " : "", b->workflow ? b->workflow : "");
      continue;
    }
    if (a->catch_up != b->catch_up)
      note(live, "cron %s (plugin %s): catch_up %s -> %s", b->schedule, c->name,
           catch_up_name[a->catch_up % 3], catch_up_name[b->catch_up % 3]);
    if (a->max_catch_up != b->max_catch_up)
      note(live, "cron %s (plugin %s): max_catch_up %u -> %u", b->schedule,
           c->name, a->max_catch_up, b->max_catch_up);
    if (a->overlap_allow != b->overlap_allow)
      note(live, "cron %s (plugin %s): overlap %s -> %s", b->schedule, c->name,
           a->overlap_allow ? "allow" : "skip",
           b->overlap_allow ? "allow" : "skip");
    if (!same(a->params, b->params))
      note(live, "cron %s (plugin %s): params %s -> %s", b->schedule, c->name,
           a->params ? a->params : "none", b->params ? b->params : "none");
  }
}

/* ---- the whole file ------------------------------------------------------
 */

const config_plugin *cfgdiff_plugin(const config *cur, const char *name) {
  for (size_t i = 0; i < cur->n_plugins; i++)
    if (!strcmp(cur->plugins[i].name, name))
      return &cur->plugins[i];
  return NULL;
}

void cfgdiff_compare(const config *old, const config *cur, json_t *live,
                     json_t *restart) {
  compare_host(old, cur, restart);
  compare_pipelines(old, cur, restart);
  compare_resources(old, cur, restart);
  for (size_t i = 0; i < old->n_plugins; i++)
    if (!cfgdiff_plugin(cur, old->plugins[i].name))
      note(restart, "plugin %s removed", old->plugins[i].name);
  for (size_t i = 0; i < cur->n_plugins; i++) {
    const config_plugin *c = &cur->plugins[i];
    const config_plugin *o = cfgdiff_plugin(old, c->name);
    if (!o) {
      note(restart, "plugin %s added", c->name);
      continue;
    }
    if (!same(o->path, c->path))
      note(live, "plugin %s: path %s -> %s", c->name, o->path, c->path);
    /* The worker processes and the breaker are set up at start. */
    char what[300];
    snprintf(what, sizeof what, "plugin %s: workers", c->name);
    int_field(restart, what, o->workers, c->workers);
    snprintf(what, sizeof what, "plugin %s: concurrency", c->name);
    int_field(restart, what, o->concurrency, c->concurrency);
    snprintf(what, sizeof what, "plugin %s: crash_storm.crashes", c->name);
    int_field(restart, what, o->crash_storm.crashes, c->crash_storm.crashes);
    snprintf(what, sizeof what, "plugin %s: crash_storm.window (ms)", c->name);
    int_field(restart, what, o->crash_storm.window_ms,
              c->crash_storm.window_ms);
    snprintf(what, sizeof what, "plugin %s: crash_storm.rate (millionths)",
             c->name);
    int_field(restart, what, o->crash_storm.rate_ppm, c->crash_storm.rate_ppm);
    snprintf(what, sizeof what, "plugin %s: limits.memory (bytes)", c->name);
    int_field(restart, what, o->limits.memory, c->limits.memory);
    snprintf(what, sizeof what, "plugin %s: limits.cpu (ms)", c->name);
    int_field(restart, what, o->limits.cpu_ms, c->limits.cpu_ms);
    snprintf(what, sizeof what, "plugin %s: limits.processes", c->name);
    int_field(restart, what, o->limits.processes, c->limits.processes);
    snprintf(what, sizeof what, "plugin %s: limits.cpus (millionths)", c->name);
    int_field(restart, what, o->limits.cpus_ppm, c->limits.cpus_ppm);
    if (o->crash_storm.rollback != c->crash_storm.rollback)
      note(restart, "plugin %s: on_crash_storm: %s -> %s", c->name,
           o->crash_storm.rollback ? "rollback" : "pause",
           c->crash_storm.rollback ? "rollback" : "pause");
    if (!same_names(o->tail_consumers, o->n_tail_consumers, c->tail_consumers,
                    c->n_tail_consumers))
      note(live, "plugin %s: tail_consumers changed", c->name);
    compare_workflows(o, c, live, restart);
    compare_producers(o, c, restart);
    compare_consumers(o, c, live, restart);
    compare_crons(o, c, live);
  }
}

/* ---- applying it ---------------------------------------------------------
 */

/* Each consumer's queue options, a dead-letter queue new to the engine
 * registered as register_queues does at start, and the no-code
 * consumers again (their batch size). */
static int apply_queues(const config *cur, duro_engine *e) {
  const duro_queue_options unconsumed = {.max_retries =
                                             DURO_QUEUE_NO_RETRY_LIMIT};
  int rc = 0;
  for (size_t i = 0; i < cur->n_plugins && !rc; i++)
    for (size_t k = 0; k < cur->plugins[i].n_consumers && !rc; k++) {
      const config_consumer *c = &cur->plugins[i].consumers[k];
      if (c->dead_letter_queue && !duro_queue_exists(e, c->dead_letter_queue))
        rc = duro_queue_register(e, c->dead_letter_queue, &unconsumed);
      duro_queue_options o = {.max_retries = (int32_t)c->max_retries,
                              .retry_delay_ms = c->retry_delay_ms,
                              .dead_letter = c->dead_letter_queue,
                              .retention_ms = c->message_retention_ms};
      if (!rc)
        rc = duro_queue_register(e, c->queue, &o);
      if (!rc && c->workflow)
        rc = duro_queue_consume_workflow(e, c->queue, c->workflow, c->id_from,
                                         c->max_batch_size);
    }
  return rc;
}

duro_cron_spec cfgdiff_cron_spec(const config_plugin *p, const config_cron *c) {
  return (duro_cron_spec){.plugin = p->name,
                          .schedule = c->schedule,
                          .timezone = c->timezone,
                          .workflow = c->workflow,
                          .id = c->id,
                          .catch_up = c->catch_up,
                          .max_catch_up = c->max_catch_up,
                          .overlap_allow = c->overlap_allow,
                          .params = c->params};
}

static int apply_crons(const config *cur, duro_engine *e, char *err,
                       size_t errlen) {
  size_t n = 0;
  for (size_t i = 0; i < cur->n_plugins; i++)
    n += cur->plugins[i].n_crons;
  duro_cron_spec *specs = xcalloc(n ? n : 1, sizeof *specs);
  n = 0;
  for (size_t i = 0; i < cur->n_plugins; i++)
    for (size_t k = 0; k < cur->plugins[i].n_crons; k++)
      specs[n++] =
          cfgdiff_cron_spec(&cur->plugins[i], &cur->plugins[i].crons[k]);
  int rc = duro_cron_replace(e, specs, n, err, errlen);
  free(specs);
  return rc;
}

int cfgdiff_apply(const config *cur, duro_engine *e, char *err, size_t errlen) {
  /* The triggers first: all are checked before any changes, so a refusal
   * there leaves everything as it was (config_load checked them too). */
  if (apply_crons(cur, e, err, errlen) != 0)
    return -1;
  int rc = apply_queues(cur, e);
  if (rc) {
    snprintf(err, errlen, "the queues: %s", duro_err_str(rc));
    return -1;
  }
  for (size_t i = 0; i < cur->n_plugins; i++)
    for (size_t k = 0; k < cur->plugins[i].n_workflows; k++) {
      const config_workflow *w = &cur->plugins[i].workflows[k];
      const duro_workflow_limits retention = {
          .retention_ms = w->retention_ms,
          .retention_errored_ms = w->retention_errored_ms,
          .retention_terminated_ms = w->retention_terminated_ms};
      duro_engine_set_limits(e, w->name, &retention, w->timeout_ms,
                             w->max_steps, w->parallel, w->rollback_on_timeout);
    }
  return 0;
}
