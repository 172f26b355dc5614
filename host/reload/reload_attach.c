/* reload_attach.c — once the storage lock is held and the engine open:
 * the initial copies moved into the build store, every workflow
 * registered with its newest build, the consumers without a workflow and
 * the cron ticks fed to that build's handlers, and the older builds
 * in-flight instances are pinned to loaded (reload_pinned.c). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "queue.h"
#include "reload_internal.h"
#include "store.h"
#include "tail.h"
#include "trigger.h"
#include "util.h"
#include "worker.h"

/* The plugin's consumers that name no workflow are fed to the newest
 * build's queue handler; without one they are pull consumers (HTTP), and
 * an older build's handler, which may be unloaded, is no longer called.
 * The same build's scheduled handler fires the plugin's cron ticks. */
static void *worker_ctx(reloader *r, const plugin_state *p, const build *b,
                        const char *class_name);

/* The build's queue and cron handlers: in its plugin's workers (the
 * engine runs stand-ins that carry each batch or tick there) unless the
 * plugin runs in the engine. */
void reload_register_consumers(reloader *r, plugin_state *p, const build *b) {
  duro_queue_fn fn = NULL;
  duro_scheduled_fn scheduled = NULL;
  duro_tail_fn tail = NULL;
  void *ctx = worker_ctx(r, p, b, NULL);
  if (b->lp) {
    fn = loader_info(b->lp)->queue;
    scheduled = loader_info(b->lp)->scheduled;
    tail = loader_info(b->lp)->tail;
  } else if (ctx) {
    fn = b->desc->queue ? worker_proxy_queue : NULL;
    scheduled = b->desc->scheduled ? worker_proxy_scheduled : NULL;
    tail = b->desc->tail ? worker_proxy_tail : NULL;
  }
  size_t fed = 0;
  for (size_t k = 0; k < p->cfg->n_consumers; k++) {
    const config_consumer *c = &p->cfg->consumers[k];
    if (c->workflow)
      continue;
    fed++;
    if (!fn) {
      duro_queue_unconsume(r->e, c->queue);
      if (c->concurrency_key) /* a pull consumer: HTTP pulls are not held */
        log_warn("queue \"%s\": \"concurrency\" limits a queue handler, "
                 "and plugin \"%s\" has none: pulls are not limited by key",
                 c->queue, p->cfg->name);
      continue;
    }
    /* a stand-in kills its worker at the deadline, and returns */
    duro_queue_consumer_opts o = {.max_batch_size = c->max_batch_size,
                                  .max_batch_timeout_ms =
                                      c->max_batch_timeout_ms,
                                  .max_concurrency = c->max_concurrency,
                                  .visibility_ms = c->visibility_timeout_ms,
                                  .plugin = p->cfg->name,
                                  .handler_ctx = ctx,
                                  .returns_at_deadline = ctx != NULL,
                                  .concurrency_key = c->concurrency_key,
                                  .concurrency_limit = c->concurrency_limit};
    if (duro_queue_consume(r->e, c->queue, fn, &o) != 0)
      log_error("plugin \"%s\": cannot consume queue \"%s\"", p->cfg->name,
                c->queue);
  }
  /* The newest build's scheduled handler fires the plugin's next ticks,
   * and its tail handler takes the next batches of trace items. */
  duro_cron_set_handler(r->e, p->cfg->name, scheduled, ctx);
  duro_tail_set_handler(r->e, p->cfg->name, tail, ctx);
  /* whom its workflows' trace items go to: the plugin's consumers, then
   * the workflow's own (config_refs.c: each a plugin, named once) */
  for (size_t k = 0; k < p->cfg->n_workflows; k++) {
    const config_workflow *w = &p->cfg->workflows[k];
    size_t n = p->cfg->n_tail_consumers + w->n_tail_consumers;
    const char **names = xcalloc(n + 1, sizeof *names);
    for (size_t i = 0; i < p->cfg->n_tail_consumers; i++)
      names[i] = p->cfg->tail_consumers[i];
    for (size_t i = 0; i < w->n_tail_consumers; i++)
      names[p->cfg->n_tail_consumers + i] = w->tail_consumers[i];
    duro_tail_observe(r->e, w->name, names, n);
    free(names);
  }
  if (fn && !fed)
    log_warn("plugin \"%s\" has a queue handler but its config declares no "
             "consumer for it (queues.consumers without a workflow): it is "
             "never called",
             p->cfg->name);
}

void reload_set_workers(reloader *r, worker_pool *pool) { r->workers = pool; }

/* `workers` cannot change without a restart (cfgdiff.c): a build opened
 * for workers stays in them. */
int reload_in_workers(const reloader *r, const plugin_state *p) {
  return r->workers && p->cfg->workers > 0;
}

/* The context of b's class `class_name` (NULL: of its queue and cron
 * handlers) when p runs in workers, else NULL. */
static void *worker_ctx(reloader *r, const plugin_state *p, const build *b,
                        const char *class_name) {
  if (!reload_in_workers(r, p))
    return NULL;
  char *path = build_store_path(r->store_dir, b->hash);
  worker_limits lim = {.memory = p->cfg->limits.memory,
                       .cpu_ms = p->cfg->limits.cpu_ms,
                       .processes = p->cfg->limits.processes,
                       .cpus_ppm = p->cfg->limits.cpus_ppm,
                       .concurrency = p->cfg->concurrency};
  void *ctx = worker_pool_build(r->workers, p->cfg->name, p->cfg->workers, &lim,
                                path, b->hash, class_name);
  free(path);
  return ctx;
}

/* The engine's run() for class `class_name` of build b, with its context
 * in *ctx: the worker stand-in when p runs in workers, else the build's
 * own in this process (*ctx NULL).  NULL when b does not export it. */
static duro_run_fn run_of(reloader *r, const plugin_state *p, const build *b,
                          const char *class_name, void **ctx) {
  *ctx = NULL;
  if (!reload_build_exports(b, class_name))
    return NULL;
  if (b->lp)
    return loader_find_workflow(b->lp, class_name);
  *ctx = worker_ctx(r, p, b, class_name);
  return *ctx ? worker_proxy_run : NULL;
}

int reload_engine_build(reloader *r, const plugin_state *p, const build *b,
                        const config_workflow *w, int newest) {
  void *ctx;
  duro_run_fn run = run_of(r, p, b, w->class_name, &ctx);
  if (!run)
    return DURO_E_NOT_FOUND;
  int rc = duro_engine_add_build(r->e, w->name, b->hash, run, newest);
  if (rc == 0 && ctx)
    rc = duro_engine_build_set_ctx(r->e, w->name, b->hash, ctx);
  /* its steps' configs are the plugin's size (a worker's stand-in hands
   * the engine this host's, the worker having read the plugin's) */
  if (rc == 0 && b->lp)
    rc = duro_engine_build_set_step_config_size(
        r->e, w->name, b->hash, loader_info(b->lp)->layout.step_config_size);
  return rc;
}

/* Gives the engine build b's run() for each workflow of the plugin. */
void reload_add_to_engine(reloader *r, plugin_state *p, const build *b,
                          int newest) {
  if (newest)
    reload_register_consumers(r, p, b);
  for (size_t k = 0; k < p->cfg->n_workflows; k++)
    reload_engine_build(r, p, b, &p->cfg->workflows[k], newest);
}

static void register_workflows(reloader *r) {
  for (size_t i = 0; i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    const build *newest = &p->builds[p->n - 1];
    reload_register_consumers(r, p, newest);
    for (size_t k = 0; k < p->cfg->n_workflows; k++) {
      const config_workflow *w = &p->cfg->workflows[k];
      duro_workflow_limits lim = {
          .retention_ms = w->retention_ms,
          .retention_errored_ms = w->retention_errored_ms,
          .retention_terminated_ms = w->retention_terminated_ms,
          .timeout_ms = w->timeout_ms,
          .rollback_on_timeout = w->rollback_on_timeout,
          .max_steps = w->max_steps,
          .max_logs = w->max_logs,
          .concurrency = w->concurrency,
          .parallel = w->parallel,
          .pause_on_divergence = w->pause_on_divergence,
          .versioning_latest = w->versioning_latest,
          .lifecycle_queue = w->lifecycle_queue,
          /* its callbacks on engine threads: bounded, shared by its
           * workflows, where another plugin needs threads too (a plugin
           * alone has them all unless its concurrency says otherwise:
           * its blocking callbacks would only wait for nothing) */
          .plugin = reload_in_workers(r, p) ||
                            (r->cfg->n_plugins == 1 && !p->cfg->concurrency)
                        ? NULL
                        : p->cfg->name,
          .plugin_threads = p->cfg->concurrency,
      };
      duro_flow_concurrency flow[CONFIG_FLOW_MAX_RULES];
      for (size_t f = 0; f < w->n_flow; f++)
        flow[f] = (duro_flow_concurrency){.key = w->flow[f].key,
                                          .limit = w->flow[f].limit};
      lim.flow_concurrency = flow;
      lim.n_flow_concurrency = w->n_flow;
      duro_flow_rate rate[CONFIG_FLOW_MAX_RULES];
      for (size_t f = 0; f < w->n_rates; f++)
        rate[f] = (duro_flow_rate){.key = w->rates[f].key,
                                   .limit = w->rates[f].limit,
                                   .period_ms = w->rates[f].period_ms,
                                   .burst = w->rates[f].burst};
      lim.flow_rate = rate;
      lim.n_flow_rate = w->n_rates;
      lim.flow_reject = w->flow_reject;
      _Static_assert(CONFIG_FLOW_MAX_WEIGHTS == DURO_FLOW_MAX_WEIGHTS &&
                         CONFIG_FLOW_PRIORITY_MAX == DURO_FLOW_PRIORITY_MAX,
                     "the config's flow bounds are the engine's");
      duro_flow_weight weights[CONFIG_FLOW_MAX_WEIGHTS];
      for (size_t f = 0; f < w->n_weights; f++)
        weights[f] = (duro_flow_weight){.value = w->weights[f].value,
                                        .weight = w->weights[f].weight};
      lim.flow_order =
          (duro_flow_order){.priority_key = w->priority_key,
                            .priority_default = w->priority_default,
                            .fairness_key = w->fairness_key,
                            .weights = weights,
                            .n_weights = w->n_weights};
      lim.flow_singleton_key = w->singleton_key;
      lim.flow_singleton_mode =
          w->singleton_mode == CONFIG_SINGLETON_QUEUE  ? DURO_SINGLETON_QUEUE
          : w->singleton_mode == CONFIG_SINGLETON_SKIP ? DURO_SINGLETON_SKIP
                                                       : 0;
      lim.flow_debounce_key = w->debounce_key;
      lim.flow_debounce_ms = w->debounce_ms;
      lim.flow_debounce_max_wait_ms = w->debounce_max_wait_ms;
      duro_attr_decl index[CONFIG_MAX_ATTRS];
      for (size_t f = 0; f < w->n_index; f++)
        index[f] = (duro_attr_decl){.name = w->index[f].name,
                                    .from = w->index[f].from,
                                    .type = w->index[f].type};
      lim.index = index;
      lim.n_index = w->n_index;
      /* names are unique (config_refs.c checked), so this cannot fail */
      void *ctx;
      duro_engine_register(r->e, w->name, w->binding,
                           run_of(r, p, newest, w->class_name, &ctx), &lim,
                           newest->hash);
      if (ctx)
        duro_engine_build_set_ctx(r->e, w->name, newest->hash, ctx);
    }
  }
}

int reload_attach(reloader *r, duro_engine *e) {
  pthread_mutex_lock(&r->mu);
  r->e = e;
  for (size_t i = 0; i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    if (p->initial_fd < 0)
      continue; /* served from the store already */
    char err[1024], hash[17], src[64];
    char *stored = NULL;
    snprintf(src, sizeof src, "/proc/self/fd/%d", p->initial_fd);
    if (build_store_import(r->store_dir, src, hash, &stored, err, sizeof err) !=
        0)
      log_error("plugin \"%s\": %s", p->cfg->name, err);
    free(stored);
    reload_remember_newest(r, p);
  }
  reload_close_initial(r);
  register_workflows(r);
  reload_load_pinned_locked(r);
  reload_share_builds(r);
  pthread_mutex_unlock(&r->mu);
  /* An engine the supervisor restarted (after a crash) starts from the
   * config the supervisor read: what reloads applied since is applied
   * again from the file. */
  json_decref(reload_config(r));
  return 0;
}
