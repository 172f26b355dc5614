/* config_keys.c — the walk of every key the config's schema tables accept
 * (config_keys.h).  The tables say which keys hold a nested mapping or
 * list (K_NESTED) but not which table walks it, since each part's walker
 * knows that in code; the one table below says it for the walk.  A nested
 * key missing from it is reported as CONFIG_KEY_UNKNOWN, so a new section
 * cannot go unlisted silently. */
#include "config_keys.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config_internal.h"

typedef struct nest {
  const schema *parent;
  const char *key;
  const schema *child; /* NULL: taken whole, a list of strings (list) or a
                          mapping of any keys */
  bool list;           /* a list (of child's mappings, or of strings) */
  config_key_in in;    /* the struct the child's offsets are into */
} nest;

static const nest nests[] = {
    {&config_root_schema, "storage", &config_storage_schema, false,
     CONFIG_IN_CONFIG},
    {&config_root_schema, "http", &config_http_schema, false, CONFIG_IN_CONFIG},
    {&config_root_schema, "engine", &config_engine_schema, false,
     CONFIG_IN_CONFIG},
    {&config_root_schema, "log", &config_log_schema, false, CONFIG_IN_CONFIG},
    {&config_root_schema, "telemetry", &config_telemetry_schema, false,
     CONFIG_IN_CONFIG},
    {&config_root_schema, "tail", &config_tail_schema, false, CONFIG_IN_CONFIG},
    {&config_http_schema, "allowed_hosts", NULL, true, CONFIG_IN_CONFIG},
    {&config_http_schema, "tls", &config_tls_schema, false, CONFIG_IN_CONFIG},
    {&config_http_schema, "keys", &config_api_key_schema, true,
     CONFIG_IN_API_KEY},
    {&config_api_key_schema, "scopes", NULL, true, CONFIG_IN_API_KEY},
    {&config_api_key_schema, "workflows", NULL, true, CONFIG_IN_API_KEY},
    {&config_api_key_schema, "queues", NULL, true, CONFIG_IN_API_KEY},
    {&config_storage_schema, "encryption", &config_encryption_schema, false,
     CONFIG_IN_CONFIG},
    {&config_encryption_schema, "keys", &config_encryption_key_schema, true,
     CONFIG_IN_ENCRYPTION_KEY},
    {&config_plugin_schema, "tail_consumers", NULL, true, CONFIG_IN_PLUGIN},
    {&config_workflow_schema, "tail_consumers", NULL, true, CONFIG_IN_WORKFLOW},
    {&config_root_schema, "plugins", &config_plugin_schema, true,
     CONFIG_IN_PLUGIN},
    {&config_plugin_schema, "crash_storm", &config_crash_storm_schema, false,
     CONFIG_IN_PLUGIN},
    {&config_plugin_schema, "limits", &config_plugin_limits_schema, false,
     CONFIG_IN_PLUGIN},
    {&config_plugin_schema, "workflows", &config_workflow_schema, true,
     CONFIG_IN_WORKFLOW},
    {&config_workflow_schema, "limits", &config_limits_schema, false,
     CONFIG_IN_WORKFLOW},
    {&config_workflow_schema, "retention", &config_retention_schema, false,
     CONFIG_IN_WORKFLOW},
    {&config_workflow_schema, "flow", &config_flow_schema, false,
     CONFIG_IN_WORKFLOW},
    {&config_workflow_schema, "index", &config_attr_schema, true,
     CONFIG_IN_ATTR},
    {&config_flow_schema, "concurrency", &config_flow_rule_schema, true,
     CONFIG_IN_FLOW_RULE},
    {&config_flow_schema, "rate", &config_flow_rate_schema, true,
     CONFIG_IN_FLOW_RULE},
    {&config_flow_schema, "priority", &config_flow_priority_schema, false,
     CONFIG_IN_WORKFLOW},
    {&config_flow_schema, "fairness", &config_flow_fairness_schema, false,
     CONFIG_IN_WORKFLOW},
    {&config_flow_fairness_schema, "weights", NULL, false, CONFIG_IN_WORKFLOW},
    {&config_flow_schema, "singleton", &config_flow_singleton_schema, false,
     CONFIG_IN_WORKFLOW},
    {&config_flow_schema, "debounce", &config_flow_debounce_schema, false,
     CONFIG_IN_WORKFLOW},
    {&config_plugin_schema, "queues", &config_queues_schema, false,
     CONFIG_IN_PLUGIN},
    {&config_queues_schema, "producers", &config_producer_schema, true,
     CONFIG_IN_PRODUCER},
    {&config_queues_schema, "consumers", &config_consumer_schema, true,
     CONFIG_IN_CONSUMER},
    {&config_consumer_schema, "concurrency",
     &config_consumer_concurrency_schema, false, CONFIG_IN_CONSUMER},
    {&config_plugin_schema, "triggers", &config_triggers_schema, false,
     CONFIG_IN_PLUGIN},
    {&config_triggers_schema, "crons", &config_cron_schema, true,
     CONFIG_IN_CRON},
    {&config_cron_schema, "params", NULL, false, CONFIG_IN_CRON},
    {&config_root_schema, "pipelines", &config_pipeline_schema, true,
     CONFIG_IN_PIPELINE},
    {&config_pipeline_schema, "columns", NULL, true, CONFIG_IN_PIPELINE},
    {&config_pipeline_schema, "sink", &config_sink_schema, false,
     CONFIG_IN_PIPELINE},
    {&config_sink_schema, "files", &config_files_sink_schema, false,
     CONFIG_IN_PIPELINE},
    {&config_sink_schema, "s3", &config_s3_sink_schema, false,
     CONFIG_IN_S3_PIPELINE},
    {&config_pipeline_schema, "roll", &config_roll_schema, false,
     CONFIG_IN_PIPELINE},
    {&config_root_schema, "resources", &config_resource_schema, true,
     CONFIG_IN_RESOURCE},
    {&config_resource_schema, "rate", &config_resource_rate_schema, false,
     CONFIG_IN_RESOURCE},
};

static const nest *find_nest(const schema *parent, const char *key) {
  for (size_t i = 0; i < sizeof nests / sizeof nests[0]; i++)
    if (nests[i].parent == parent && strcmp(nests[i].key, key) == 0)
      return &nests[i];
  return NULL;
}

static void walk(const schema *s, const char *prefix, config_key_in in,
                 void (*fn)(const config_key *, void *), void *ctx) {
  for (size_t i = 0; i < s->n_fields; i++) {
    const schema_field *f = &s->fields[i];
    char path[256];
    snprintf(path, sizeof path, "%s%s", prefix, f->key);
    config_key k = {.path = path, .field = f, .in = in};
    if (f->kind != K_NESTED) {
      k.shape = CONFIG_KEY_SCALAR;
      fn(&k, ctx);
      continue;
    }
    const nest *n = find_nest(s, f->key);
    if (!n || !n->child) {
      k.shape = !n        ? CONFIG_KEY_UNKNOWN
                : n->list ? CONFIG_KEY_LIST
                          : CONFIG_KEY_MAPPING;
      fn(&k, ctx);
      continue;
    }
    char inner[sizeof path + 3];
    snprintf(inner, sizeof inner, "%s%s.", path, n->list ? "[]" : "");
    walk(n->child, inner, n->in, fn, ctx);
  }
}

void config_keys_walk(void (*fn)(const config_key *key, void *ctx), void *ctx) {
  walk(&config_root_schema, "", CONFIG_IN_CONFIG, fn, ctx);
}
