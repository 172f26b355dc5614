/* yaml_json.h — a YAML value of the config as JSON, for a value the host
 * hands a workflow as it is (a cron trigger's `params`).  Typed by YAML
 * 1.2's core schema: a plain null, true or false, integer or float is
 * that JSON value, anything quoted (or any other plain scalar) a string,
 * a sequence an array and a mapping an object. */
#ifndef DURO_CONFIG_YAML_JSON_H
#define DURO_CONFIG_YAML_JSON_H

#include <jansson.h>
#include <yaml.h>

#include "schema.h"

/* The node as JSON (the caller owns it), or NULL after schema_fail() at
 * the first part JSON cannot hold (.inf, .nan, a key that is not a
 * scalar, nesting deeper than 64). */
json_t *config_yaml_json(schema_walk *w, const yaml_node_t *node);

#endif
