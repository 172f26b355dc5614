/* config_keys.h — every key duro.yaml accepts, walked from the parser's
 * own schema tables (schema.h), so that what documents the keys
 * (doc/reference/config.md) can be checked against what the parser takes.
 * Read-only: the tables are the parser's, not copies. */
#ifndef DURO_CONFIG_KEYS_H
#define DURO_CONFIG_KEYS_H

#include <stddef.h>

#include "schema.h"

/* The struct of config.h a key's offset is into. */
typedef enum config_key_in {
  CONFIG_IN_CONFIG,    /* config: storage, http, engine */
  CONFIG_IN_PLUGIN,    /* config_plugin: plugins[], its crash_storm, limits */
  CONFIG_IN_WORKFLOW,  /* config_workflow: plugins[].workflows[], limits */
  CONFIG_IN_PRODUCER,  /* config_producer: plugins[].queues.producers[] */
  CONFIG_IN_CONSUMER,  /* config_consumer: plugins[].queues.consumers[] */
  CONFIG_IN_CRON,      /* config_cron: plugins[].triggers.crons[] */
  CONFIG_IN_FLOW_RULE, /* config_flow_rule: ...workflows[].flow.concurrency[] */
  CONFIG_IN_ATTR,      /* config_attr: ...workflows[].index[] */
  CONFIG_IN_PIPELINE,  /* config_pipeline: pipelines[], its sink and roll */
  /* config_pipeline too, for the keys of sink.s3: the same struct, but
   * filled only in a pipeline whose sink is s3 */
  CONFIG_IN_S3_PIPELINE,
  CONFIG_IN_RESOURCE, /* config_resource: resources[], its rate */
  CONFIG_IN_API_KEY,  /* config_api_key: http.keys[] */
  /* config_encryption_key: storage.encryption.keys[] */
  CONFIG_IN_ENCRYPTION_KEY
} config_key_in;

typedef enum config_key_shape {
  CONFIG_KEY_SCALAR,  /* field->kind says which: a string, a duration... */
  CONFIG_KEY_LIST,    /* a list of strings (http.allowed_hosts) */
  CONFIG_KEY_MAPPING, /* a mapping of any keys, taken whole (a cron's
                         params) */
  CONFIG_KEY_UNKNOWN  /* a nested key config_keys.c has no table for: the
                         walk is incomplete until it gets one */
} config_key_shape;

typedef struct config_key {
  const char *path;          /* "plugins[].workflows[].limits.steps" */
  const schema_field *field; /* its row of the parser's table */
  config_key_in in;
  config_key_shape shape;
} config_key;

/* Calls fn for every key in the order of the tables, the sections'
 * mappings and lists walked into; the path is valid during the call. */
void config_keys_walk(void (*fn)(const config_key *key, void *ctx), void *ctx);

#endif
