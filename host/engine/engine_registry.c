/* engine_registry.c — the workflows an engine runs, registered before it
 * starts: each by name and binding with its limits (their defaults
 * filled in) and its first build; the limits changed later (stored
 * atomically, read without a lock); a workflow looked up by name or by
 * binding. */
#include <pthread.h>
#include <string.h>

#include "engine_internal.h"
#include "error.h"
#include "util.h"

#define DEFAULT_RETENTION_MS (30LL * 24 * 3600 * 1000)
#define DEFAULT_MAX_STEPS 10000
#define DEFAULT_MAX_LOGS 1000
#define DEFAULT_PARALLEL 100

wf_reg *engine_find_workflow(const duro_engine *e, const char *name) {
  for (size_t i = 0; name && i < e->n_wfs; i++)
    if (strcmp(e->wfs[i].name, name) == 0)
      return &e->wfs[i];
  return NULL;
}

const char *engine_workflow_name_at(const duro_engine *e, size_t i) {
  return i < e->n_wfs ? e->wfs[i].name : NULL;
}

const duro_workflow_limits *engine_workflow_limits(const wf_reg *wf) {
  return wf ? &wf->limits : NULL;
}

wf_reg *engine_find_binding(const duro_engine *e, const char *binding) {
  for (size_t i = 0; binding && i < e->n_wfs; i++)
    if (e->wfs[i].binding && strcmp(e->wfs[i].binding, binding) == 0)
      return &e->wfs[i];
  return NULL;
}

int duro_engine_register(duro_engine *e, const char *name, const char *binding,
                         duro_run_fn run, const duro_workflow_limits *limits,
                         const char *build) {
  if (!name || !run || engine_find_workflow(e, name) || e->workers ||
      (limits && (limits->n_flow_concurrency > DURO_FLOW_MAX_RULES ||
                  limits->n_flow_rate > DURO_FLOW_MAX_RULES ||
                  limits->flow_order.n_weights > DURO_FLOW_MAX_WEIGHTS ||
                  limits->n_index > DURO_ATTR_MAX)))
    return DURO_E_INVALID_ARGUMENT;
  /* Registration happens before start; nothing holds pointers yet, so the
   * array may move. */
  e->wfs = xrealloc(e->wfs, (e->n_wfs + 1) * sizeof *e->wfs);
  wf_reg *w = &e->wfs[e->n_wfs++];
  memset(w, 0, sizeof *w);
  w->engine = e;
  w->name = xstrdup(name);
  w->binding = binding ? xstrdup(binding) : NULL;
  pthread_mutex_init(&w->builds_mu, NULL);
  if (limits)
    w->limits = *limits;
  if (w->limits.lifecycle_queue)
    w->limits.lifecycle_queue = xstrdup(w->limits.lifecycle_queue);
  if (w->limits.plugin)
    w->admit = engine_admit_for(e, w->limits.plugin, w->limits.plugin_threads);
  w->limits.plugin = NULL; /* the bound keeps its own copy */
  /* the flow rules, for the admission gate (a driver): a copy it owns */
  duro_flow_concurrency *flow =
      w->limits.n_flow_concurrency
          ? xcalloc(w->limits.n_flow_concurrency, sizeof *flow)
          : NULL;
  for (size_t i = 0; i < w->limits.n_flow_concurrency; i++)
    flow[i] = (duro_flow_concurrency){
        .key = xstrdup_null(limits->flow_concurrency[i].key),
        .limit = limits->flow_concurrency[i].limit};
  w->limits.flow_concurrency = flow;
  duro_flow_rate *rate = w->limits.n_flow_rate
                             ? xcalloc(w->limits.n_flow_rate, sizeof *rate)
                             : NULL;
  for (size_t i = 0; i < w->limits.n_flow_rate; i++) {
    rate[i] = limits->flow_rate[i];
    rate[i].key = xstrdup_null(rate[i].key);
  }
  w->limits.flow_rate = rate;
  duro_flow_order *order = &w->limits.flow_order;
  order->priority_key = xstrdup_null(order->priority_key);
  order->fairness_key = xstrdup_null(order->fairness_key);
  duro_flow_weight *weights =
      order->n_weights ? xcalloc(order->n_weights, sizeof *weights) : NULL;
  for (size_t i = 0; i < order->n_weights; i++)
    weights[i] = (duro_flow_weight){.value = xstrdup(order->weights[i].value),
                                    .weight = order->weights[i].weight};
  order->weights = weights;
  w->limits.flow_singleton_key = xstrdup_null(w->limits.flow_singleton_key);
  w->limits.flow_debounce_key = xstrdup_null(w->limits.flow_debounce_key);
  engine_index_copy(&w->limits);
  w->gated = w->limits.n_flow_concurrency > 0 || w->limits.n_flow_rate > 0 ||
             (w->limits.flow_singleton_mode && w->limits.flow_singleton_key) ||
             w->limits.flow_debounce_ms > 0;
  if (w->limits.retention_ms <= 0)
    w->limits.retention_ms = DEFAULT_RETENTION_MS;
  if (w->limits.max_steps == 0)
    w->limits.max_steps = DEFAULT_MAX_STEPS;
  if (w->limits.max_logs == 0)
    w->limits.max_logs = DEFAULT_MAX_LOGS;
  if (w->limits.parallel == 0)
    w->limits.parallel = DEFAULT_PARALLEL;
  return duro_engine_add_build(e, name, build, run, 1);
}

int duro_engine_set_limits(duro_engine *e, const char *name,
                           const duro_workflow_limits *retention,
                           int64_t timeout_ms, uint32_t max_steps,
                           uint32_t parallel, int rollback_on_timeout) {
  wf_reg *w = engine_find_workflow(e, name);
  if (!w)
    return DURO_E_NOT_FOUND;
  const duro_workflow_limits defaults = {0};
  if (!retention)
    retention = &defaults;
  /* Read where they are used, without a lock: stored atomically. */
  __atomic_store_n(&w->limits.retention_ms,
                   retention->retention_ms > 0 ? retention->retention_ms
                                               : DEFAULT_RETENTION_MS,
                   __ATOMIC_RELAXED);
  __atomic_store_n(&w->limits.retention_errored_ms,
                   retention->retention_errored_ms, __ATOMIC_RELAXED);
  __atomic_store_n(&w->limits.retention_terminated_ms,
                   retention->retention_terminated_ms, __ATOMIC_RELAXED);
  __atomic_store_n(&w->limits.timeout_ms, timeout_ms > 0 ? timeout_ms : 0,
                   __ATOMIC_RELAXED);
  __atomic_store_n(&w->limits.max_steps,
                   max_steps ? max_steps : DEFAULT_MAX_STEPS, __ATOMIC_RELAXED);
  __atomic_store_n(&w->limits.parallel, parallel ? parallel : DEFAULT_PARALLEL,
                   __ATOMIC_RELAXED);
  __atomic_store_n(&w->limits.rollback_on_timeout, rollback_on_timeout != 0,
                   __ATOMIC_RELAXED);
  return 0;
}
