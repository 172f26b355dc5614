/* config_internal.h — what the pieces of the config's parser share: the
 * parser's state and the walkers one file calls in another.  Private to
 * config/ (config.h is the public face).
 *
 * The pieces, one concept each:
 *   config.c          reading a file or a text: the depth check, libyaml's
 *                     errors, the defaults, the paths resolved
 *   config_root.c     the top level and the host's sections (storage,
 *                     http, engine)
 *   config_plugin.c   a plugin and its workflows
 *   config_queues.c   a plugin's queues: producers and consumers
 *   config_cron.c     a plugin's cron triggers
 *   config_pipelines.c  the pipelines and their sinks
 *   config_resources.c  the shared resources steps name
 *   config_access.c   http.tls and http.keys: who may reach the listener
 *   config_refs.c     the names of the whole file: each unique, each
 *                     reference declared
 *   config_free.c     config_free()
 *   config_keys.c     every key the tables accept, walked for the
 *                     reference's test (config_keys.h) */
#ifndef DURO_CONFIG_INTERNAL_H
#define DURO_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

#include "config.h"
#include "schema.h"

/* A name recorded for the uniqueness checks; `name` is borrowed from the
 * config being built, which outlives the parse. */
typedef struct seen_name {
  const char *kind; /* "workflow name", "binding name", ... */
  const char *name;
  config_pos pos;
} seen_name;

typedef struct config_parser {
  schema_walk w;
  config *cfg;
  seen_name *seen;
  size_t n_seen, cap_seen;
  /* A consumer or a workflow whose name was refused (or an entry, list or
   * section that would have held one) leaves the names declared unknown:
   * a reference to a queue or a workflow that is not found may be to that
   * one, so it is not refused on top. */
  bool unsure_queues, unsure_workflows;
} config_parser;

/* The schema tables of each part, read by its walker and by config_keys.c:
 * config_root.c's */
extern const schema config_root_schema, config_storage_schema,
    config_http_schema, config_engine_schema, config_log_schema,
    config_telemetry_schema, config_tail_schema;
/* config_plugin.c's */
extern const schema config_plugin_schema, config_workflow_schema,
    config_limits_schema, config_crash_storm_schema,
    config_plugin_limits_schema, config_flow_schema, config_flow_rule_schema,
    config_flow_rate_schema, config_flow_priority_schema,
    config_flow_fairness_schema, config_flow_singleton_schema,
    config_attr_schema, config_flow_debounce_schema, config_retention_schema;
/* config_queues.c's and config_cron.c's */
extern const schema config_queues_schema, config_producer_schema,
    config_consumer_schema, config_triggers_schema, config_cron_schema;
extern const schema config_consumer_concurrency_schema;
/* config_pipelines.c's */
extern const schema config_pipeline_schema, config_sink_schema,
    config_files_sink_schema, config_s3_sink_schema, config_roll_schema;
/* config_access.c's */
extern const schema config_tls_schema, config_api_key_schema;
/* config_resources.c's */
extern const schema config_resource_schema, config_resource_rate_schema;
/* config_encryption.c's */
extern const schema config_encryption_schema, config_encryption_key_schema;

/* config_root.c: the document's root node into p->cfg. */
int config_parse_root(config_parser *p, yaml_node_t *root);

/* config_access.c: http.tls and http.keys (either node may be NULL);
 * token_env is http.token_env's value node, or NULL. */
int config_parse_http_access(config_parser *p, yaml_node_t *tls,
                             yaml_node_t *keys, yaml_node_t *token_env);

/* config_plugin.c: one entry of plugins. */
int config_parse_plugin(config_parser *p, yaml_node_t *node, config_plugin *pl);

/* config_queues.c: a plugin's queues section, and the rule of a queue's
 * name (a refused one is freed and set to NULL). */
int config_parse_queues(config_parser *p, yaml_node_t *node, config_plugin *pl);
int config_queue_name(config_parser *p, yaml_node_t *node, char **name);

/* config_cron.c: a plugin's triggers section. */
int config_parse_triggers(config_parser *p, yaml_node_t *node,
                          config_plugin *pl);

/* config_pipelines.c: the top-level pipelines list. */
int config_parse_pipelines(config_parser *p, yaml_node_t *list);

/* config_encryption.c: storage.encryption. */
int config_parse_encryption(config_parser *p, yaml_node_t *node);

/* config_resources.c: the top-level resources list. */
int config_parse_resources(config_parser *p, yaml_node_t *list);

/* config_refs.c: records `name` (the value of node `v`) in the namespace
 * `kind`, or reports it as a duplicate of an earlier one; and the
 * references across the whole file, once every plugin is read. */
int config_unique(config_parser *p, const char *kind, const char *name,
                  const yaml_node_t *v);
int config_check_references(config_parser *p);

#endif
