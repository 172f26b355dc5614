/* reload_list.c — GET /plugins' list: each plugin, its loaded builds with
 * the instances pinned to each, and what its config gives it to serve. */
#include <jansson.h>
#include <pthread.h>
#include <string.h>

#include "reload_internal.h"

typedef struct pin_count {
  const plugin_state *p;
  const char *build;
  int64_t n;
} pin_count;

static void count_pins(void *ctx, const char *workflow, const char *build,
                       int64_t n) {
  pin_count *c = ctx;
  if (strcmp(build, c->build) != 0)
    return;
  for (size_t k = 0; k < c->p->cfg->n_workflows; k++)
    if (!strcmp(c->p->cfg->workflows[k].name, workflow))
      c->n += n;
}

/* What a plugin's config gives it to serve: its workflows, the queues
 * it consumes and its cron schedules. */
static json_t *plugin_serves(const config_plugin *c) {
  json_t *wfs = json_array(), *queues = json_array(), *crons = json_array();
  for (size_t i = 0; i < c->n_workflows; i++)
    json_array_append_new(wfs, json_string(c->workflows[i].name));
  for (size_t i = 0; i < c->n_consumers; i++)
    json_array_append_new(queues, json_string(c->consumers[i].queue));
  for (size_t i = 0; i < c->n_crons; i++)
    json_array_append_new(crons, json_string(c->crons[i].schedule));
  return json_pack("{s:o,s:o,s:o}", "workflows", wfs, "queues", queues, "crons",
                   crons);
}

json_t *reload_list(reloader *r) {
  json_t *list = json_array();
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    json_t *builds = json_array();
    for (size_t k = 0; k < p->n; k++) {
      /* how many instances that have not ended are pinned to it */
      pin_count c = {.p = p, .build = p->builds[k].hash};
      if (r->e)
        duro_engine_pinned_builds(r->e, count_pins, &c);
      json_array_append_new(
          builds, json_pack("{s:s,s:b,s:I,s:I}", "build", p->builds[k].hash,
                            "newest", k + 1 == p->n, "loaded_ms",
                            (json_int_t)p->builds[k].loaded_ms, "instances",
                            (json_int_t)c.n));
    }
    json_array_append_new(list,
                          json_pack("{s:s,s:s,s:o,s:o}", "name", p->cfg->name,
                                    "path", p->cfg->path, "builds", builds,
                                    "serves", plugin_serves(p->cfg)));
  }
  pthread_mutex_unlock(&r->mu);
  return json_pack("{s:o}", "plugins", list);
}
