/* config_plugin.c — one entry of plugins: its name and path, its
 * workflows (each with its limits, versioning and lifecycle queue), and
 * its queues and triggers sections, walked by config_queues.c and
 * config_cron.c.  Names are recorded as they are parsed (config_unique),
 * so a duplicate is reported at the second occurrence. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "attr.h"
#include "config_internal.h"
#include "duration.h"
#include "duro.h"
#include "json_pointer.h"
#include "schema.h"
#include "util.h"

/* ---- Schemas ----------------------------------------------------------- */

enum {
  PL_NAME,
  PL_PATH,
  PL_WORKERS,
  PL_CONCURRENCY,
  PL_CRASH_STORM,
  PL_ON_CRASH_STORM,
  PL_LIMITS,
  PL_WORKFLOWS,
  PL_QUEUES,
  PL_TRIGGERS,
  PL_TAIL
};
/* What the crash-storm breaker does to a build that crashes too often. */
static const schema_choice on_crash_storm_choices[] = {
    {"pause", 0}, {"rollback", 1}, {NULL, 0}};
static const schema_field plugin_fields[] = {
    [PL_NAME] = {"name", K_STRING, offsetof(config_plugin, name), true, 0, 0,
                 NULL},
    [PL_PATH] = {"path", K_STRING, offsetof(config_plugin, path), true, 0, 0,
                 NULL},
    [PL_WORKERS] = {"workers", K_U32, offsetof(config_plugin, workers), false,
                    0, CONFIG_MAX_WORKERS, NULL},
    [PL_CONCURRENCY] = {"concurrency", K_U32,
                        offsetof(config_plugin, concurrency), false, 1,
                        CONFIG_MAX_CONCURRENCY, NULL},
    [PL_CRASH_STORM] = {"crash_storm", K_NESTED, 0, false, 0, 0, NULL},
    [PL_ON_CRASH_STORM] = {"on_crash_storm", K_ENUM,
                           offsetof(config_plugin, crash_storm.rollback), false,
                           0, 0, on_crash_storm_choices},
    [PL_LIMITS] = {"limits", K_NESTED, 0, false, 0, 0, NULL},
    [PL_WORKFLOWS] = {"workflows", K_NESTED, 0, false, 0, 0, NULL},
    [PL_QUEUES] = {"queues", K_NESTED, 0, false, 0, 0, NULL},
    [PL_TRIGGERS] = {"triggers", K_NESTED, 0, false, 0, 0, NULL},
    [PL_TAIL] = {"tail_consumers", K_NESTED, 0, false, 0, 0, NULL},
};
const schema config_plugin_schema =
    SCHEMA("plugin", "in plugin", PL_NAME, plugin_fields);

enum {
  WF_NAME,
  WF_BINDING,
  WF_CLASS,
  WF_RETENTION,
  WF_TIMEOUT,
  WF_LIMITS,
  WF_VERSIONING,
  WF_DIVERGENCE,
  WF_LIFECYCLE,
  WF_ON_TIMEOUT,
  WF_FLOW,
  WF_TAIL,
  WF_INDEX
};
/* Which build an in-flight instance runs after a reload. */
static const schema_choice versioning_choices[] = {
    {"pinned", 0}, {"latest", 1}, {NULL, 0}};
/* What a replay that no longer matches its journal does. */
static const schema_choice divergence_choices[] = {
    {"error", 0}, {"pause", 1}, {NULL, 0}};
/* What an instance past its deadline does before it ends errored. */
static const schema_choice on_timeout_choices[] = {
    {"error", 0}, {"rollback", 1}, {NULL, 0}};
static const schema_field workflow_fields[] = {
    [WF_NAME] = {"name", K_STRING, offsetof(config_workflow, name), true, 0, 0,
                 NULL},
    [WF_BINDING] = {"binding", K_STRING, offsetof(config_workflow, binding),
                    true, 0, 0, NULL},
    [WF_CLASS] = {"class_name", K_STRING, offsetof(config_workflow, class_name),
                  true, 0, 0, NULL},
    /* a duration, or a mapping by outcome (parse_retention) */
    [WF_RETENTION] = {"retention", K_NESTED, 0, false, 0, 0, NULL},
    [WF_TIMEOUT] = {"timeout", K_DURATION,
                    offsetof(config_workflow, timeout_ms), false, 0,
                    DURATION_MAX_MS, NULL},
    [WF_LIMITS] = {"limits", K_NESTED, 0, false, 0, 0, NULL},
    [WF_VERSIONING] = {"versioning", K_ENUM,
                       offsetof(config_workflow, versioning_latest), false, 0,
                       0, versioning_choices},
    [WF_DIVERGENCE] = {"on_divergence", K_ENUM,
                       offsetof(config_workflow, pause_on_divergence), false, 0,
                       0, divergence_choices},
    [WF_LIFECYCLE] = {"lifecycle_queue", K_STRING,
                      offsetof(config_workflow, lifecycle_queue), false, 0, 0,
                      NULL},
    [WF_ON_TIMEOUT] = {"on_timeout", K_ENUM,
                       offsetof(config_workflow, rollback_on_timeout), false, 0,
                       0, on_timeout_choices},
    [WF_FLOW] = {"flow", K_NESTED, 0, false, 0, 0, NULL},
    [WF_TAIL] = {"tail_consumers", K_NESTED, 0, false, 0, 0, NULL},
    [WF_INDEX] = {"index", K_NESTED, 0, false, 0, 0, NULL},
};
const schema config_workflow_schema =
    SCHEMA("workflow", "in workflow", WF_NAME, workflow_fields);

/* retention as one duration, for every outcome ... */
static const schema_field retention_field = {
    "retention", K_DURATION, offsetof(config_workflow, retention_ms),
    false,       0,          DURATION_MAX_MS,
    NULL};
/* ... or by outcome, each left out the default; the same config_workflow
 * as its parent. */
static const schema_field retention_fields[] = {
    {"complete", K_DURATION, offsetof(config_workflow, retention_ms), false, 0,
     DURATION_MAX_MS, NULL},
    {"errored", K_DURATION, offsetof(config_workflow, retention_errored_ms),
     false, 0, DURATION_MAX_MS, NULL},
    {"terminated", K_DURATION,
     offsetof(config_workflow, retention_terminated_ms), false, 0,
     DURATION_MAX_MS, NULL},
};
const schema config_retention_schema =
    SCHEMA("retention", "in retention", -1, retention_fields);

/* limits fills the same config_workflow as its parent. */
static const schema_field limits_fields[] = {
    {"steps", K_U32, offsetof(config_workflow, max_steps), false, 1, 25000,
     NULL},
    {"concurrency", K_U32, offsetof(config_workflow, concurrency), false, 0,
     UINT32_MAX, NULL},
    {"parallel", K_U32, offsetof(config_workflow, parallel), false, 1,
     DURO_PARALLEL_MAX, NULL},
    {"logs", K_U32, offsetof(config_workflow, max_logs), false, 1, 100000,
     NULL},
};
const schema config_limits_schema =
    SCHEMA("limits", "in limits", -1, limits_fields);
/* flow: its concurrency rules and its rates, each a mapping of its own. */
enum {
  FLOW_CONCURRENCY,
  FLOW_RATE,
  FLOW_ON_EXCESS,
  FLOW_PRIORITY,
  FLOW_FAIRNESS,
  FLOW_SINGLETON,
  FLOW_DEBOUNCE
};
/* What a create over a flow rule does: wait queued, or get refused. */
static const schema_choice on_excess_choices[] = {
    {"queue", 0}, {"reject", 1}, {NULL, 0}};
static const schema_field flow_fields[] = {
    [FLOW_CONCURRENCY] = {"concurrency", K_NESTED, 0, false, 0, 0, NULL},
    [FLOW_RATE] = {"rate", K_NESTED, 0, false, 0, 0, NULL},
    [FLOW_ON_EXCESS] = {"on_excess", K_ENUM,
                        offsetof(config_workflow, flow_reject), false, 0, 0,
                        on_excess_choices},
    [FLOW_PRIORITY] = {"priority", K_NESTED, 0, false, 0, 0, NULL},
    [FLOW_FAIRNESS] = {"fairness", K_NESTED, 0, false, 0, 0, NULL},
    [FLOW_SINGLETON] = {"singleton", K_NESTED, 0, false, 0, 0, NULL},
    [FLOW_DEBOUNCE] = {"debounce", K_NESTED, 0, false, 0, 0, NULL},
};
const schema config_flow_schema = SCHEMA("flow", "in flow", -1, flow_fields);

/* flow.priority: the backlogs served highest first. */
enum { ORDER_KEY };
static const schema_field priority_fields[] = {
    [ORDER_KEY] = {"key", K_STRING, offsetof(config_workflow, priority_key),
                   true, 0, 0, NULL},
    {"default", K_I64, offsetof(config_workflow, priority_default), false,
     -CONFIG_FLOW_PRIORITY_MAX, CONFIG_FLOW_PRIORITY_MAX, NULL},
};
const schema config_flow_priority_schema =
    SCHEMA("priority", "in priority", -1, priority_fields);

/* flow.fairness: the backlogs served round the values of a key. */
enum { FAIR_KEY, FAIR_WEIGHTS };
static const schema_field fairness_fields[] = {
    [FAIR_KEY] = {"key", K_STRING, offsetof(config_workflow, fairness_key),
                  true, 0, 0, NULL},
    [FAIR_WEIGHTS] = {"weights", K_NESTED, 0, false, 0, 0, NULL},
};
const schema config_flow_fairness_schema =
    SCHEMA("fairness", "in fairness", -1, fairness_fields);

/* flow.singleton fills the workflow's singleton_key and _mode: a create
 * whose key has a live instance is skipped, or queued behind it. */
enum { SINGLETON_KEY, SINGLETON_MODE };
static const schema_choice singleton_mode_choices[] = {
    {"skip", CONFIG_SINGLETON_SKIP},
    {"queue", CONFIG_SINGLETON_QUEUE},
    {NULL, 0}};
static const schema_field flow_singleton_fields[] = {
    [SINGLETON_KEY] = {"key", K_STRING,
                       offsetof(config_workflow, singleton_key), true, 0, 0,
                       NULL},
    [SINGLETON_MODE] = {"mode", K_ENUM,
                        offsetof(config_workflow, singleton_mode), true, 0, 0,
                        singleton_mode_choices},
};
const schema config_flow_singleton_schema =
    SCHEMA("singleton", "in singleton", -1, flow_singleton_fields);

/* flow.debounce fills the workflow's debounce_*: the creates of a key
 * within `period` of the last are one instance, started after a quiet
 * `period` (or `max_wait` after the first). */
enum { DEBOUNCE_KEY, DEBOUNCE_PERIOD, DEBOUNCE_MAX_WAIT };
static const schema_field flow_debounce_fields[] = {
    [DEBOUNCE_KEY] = {"key", K_STRING, offsetof(config_workflow, debounce_key),
                      false, 0, 0, NULL},
    [DEBOUNCE_PERIOD] = {"period", K_DURATION,
                         offsetof(config_workflow, debounce_ms), true, 1,
                         7 * DAY_MS, NULL},
    [DEBOUNCE_MAX_WAIT] = {"max_wait", K_DURATION,
                           offsetof(config_workflow, debounce_max_wait_ms),
                           false, 1, 365 * DAY_MS, NULL},
};
const schema config_flow_debounce_schema =
    SCHEMA("debounce", "in debounce", -1, flow_debounce_fields);

enum { RULE_KEY, RULE_LIMIT };
static const schema_field flow_rule_fields[] = {
    [RULE_KEY] = {"key", K_STRING, offsetof(config_flow_rule, key), false, 0, 0,
                  NULL},
    [RULE_LIMIT] = {"limit", K_U32, offsetof(config_flow_rule, limit), true, 1,
                    1000000, NULL},
};
const schema config_flow_rule_schema =
    SCHEMA("concurrency rule", "in a concurrency rule", -1, flow_rule_fields);

static const schema_field flow_rate_fields[] = {
    [RULE_KEY] = {"key", K_STRING, offsetof(config_flow_rule, key), false, 0, 0,
                  NULL},
    [RULE_LIMIT] = {"limit", K_U32, offsetof(config_flow_rule, limit), true, 1,
                    1000000, NULL},
    {"period", K_DURATION, offsetof(config_flow_rule, period_ms), true, 1,
     DAY_MS, NULL},
    {"burst", K_U32, offsetof(config_flow_rule, burst), false, 1, 1000000,
     NULL},
};
const schema config_flow_rate_schema =
    SCHEMA("rate rule", "in a rate rule", -1, flow_rate_fields);

/* index: [{name: customer, from: /customerId, type: string}], a
 * workflow's search attributes (base/attr.h). */
enum { ATTR_NAME, ATTR_FROM, ATTR_TYPE };
static const schema_choice attr_type_choices[] = {
    {"string", DURO_ATTR_STRING}, {"number", DURO_ATTR_NUMBER}, {NULL, 0}};
static const schema_field attr_fields[] = {
    [ATTR_NAME] = {"name", K_STRING, offsetof(config_attr, name), true, 0, 0,
                   NULL},
    [ATTR_FROM] = {"from", K_STRING, offsetof(config_attr, from), false, 0, 0,
                   NULL},
    [ATTR_TYPE] = {"type", K_ENUM, offsetof(config_attr, type), false, 0, 0,
                   attr_type_choices},
};
const schema config_attr_schema =
    SCHEMA("attribute", "in an index attribute", ATTR_NAME, attr_fields);

/* crash_storm fills the plugin's crash_storm. */
static const schema_field crash_storm_fields[] = {
    {"crashes", K_U32, offsetof(config_plugin, crash_storm.crashes), false, 0,
     100000, NULL},
    {"window", K_DURATION, offsetof(config_plugin, crash_storm.window_ms),
     false, 1000, DAY_MS, NULL},
    {"rate", K_RATIO, offsetof(config_plugin, crash_storm.rate_ppm), false, 0,
     1000000, NULL},
};
const schema config_crash_storm_schema =
    SCHEMA("crash_storm", "in crash_storm", -1, crash_storm_fields);

/* limits fills the plugin's limits: memory per worker process (at least
 * 16 MiB: a worker's own RSS is about 10), CPU time per attempt, the
 * processes and threads of a worker process (at least 16: the worker's
 * own threads count), the CPUs it may use (a hundredth at least: the
 * kernel's least quota is 1 ms a 100 ms period). */
static const schema_field plugin_limits_fields[] = {
    {"memory", K_BYTES, offsetof(config_plugin, limits.memory), false, 16 * MiB,
     1024 * GiB, NULL},
    {"cpu", K_DURATION, offsetof(config_plugin, limits.cpu_ms), false, 10,
     DAY_MS, NULL},
    {"processes", K_U32, offsetof(config_plugin, limits.processes), false, 16,
     4194304, NULL},
    {"cpus", K_DECIMAL, offsetof(config_plugin, limits.cpus_ppm), false, 10000,
     1024000000, NULL},
};
const schema config_plugin_limits_schema =
    SCHEMA("limits", "in limits", -1, plugin_limits_fields);

/* ---- Entries ----------------------------------------------------------- */

/* 0 when s is a JSON pointer (or NULL), else an error at `node`. */
static int check_pointer(config_parser *p, yaml_node_t *node, const char *s) {
  if (s && !duro_json_pointer_valid(s))
    return schema_fail(&p->w, node,
                       "\"key\" must be a JSON pointer into the params, "
                       "such as \"/customerId\"");
  return 0;
}

/* One list of flow rules (`name`: "concurrency" or "rate"), each a
 * mapping of `sch`'s, at most CONFIG_FLOW_MAX_RULES, one a key. */
static int parse_rules(config_parser *p, yaml_node_t *list, const char *name,
                       const schema *sch, config_flow_rule **out,
                       size_t *n_out) {
  size_t n;
  if (schema_list(&p->w, list, name, &n) < 0)
    return -1;
  if (n > CONFIG_FLOW_MAX_RULES)
    return schema_fail(&p->w, list, "\"%s\" holds at most %d rules, not %zu",
                       name, CONFIG_FLOW_MAX_RULES, n);
  if (n == 0)
    return 0;
  config_flow_rule *v = *out = xcalloc(n, sizeof *v);
  *n_out = n;
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, list, i);
    config_flow_rule *r = &v[i];
    yaml_node_t *rv[SCHEMA_MAX_FIELDS];
    if (schema_entry(&p->w, item, name) < 0 ||
        schema_mapping(&p->w, item, sch, r, rv, NULL) < 0) {
      rc = -1;
      continue;
    }
    r->pos = schema_pos(item);
    if (check_pointer(p, rv[RULE_KEY], r->key) < 0) {
      rc = -1;
      continue;
    }
    for (size_t k = 0; k < i; k++) {
      const char *a = v[k].key, *b = r->key;
      if ((!a && !b) || (a && b && !strcmp(a, b))) {
        rc = schema_fail(&p->w, item,
                         "a second %s rule for %s%s%s (the first "
                         "is at %d:%d)",
                         name, b ? "the key \"" : "the whole workflow",
                         b ? b : "", b ? "\"" : "", v[k].pos.line,
                         v[k].pos.column);
        break;
      }
    }
  }
  return rc;
}

/* fairness.weights: {acme: 3, globex: 2}, a value's turns a round. */
static int parse_weights(config_parser *p, yaml_node_t *node,
                         config_workflow *w) {
  if (!node || schema_is_null(node))
    return 0;
  if (node->type != YAML_MAPPING_NODE)
    return schema_fail(&p->w, node,
                       "\"weights\" must be a mapping of the fairness key's "
                       "values to their turns a round ({acme: 3})");
  yaml_node_pair_t *pair = node->data.mapping.pairs.start;
  size_t n = (size_t)(node->data.mapping.pairs.top - pair);
  if (n > CONFIG_FLOW_MAX_WEIGHTS)
    return schema_fail(&p->w, node, "\"weights\" holds at most %d values",
                       CONFIG_FLOW_MAX_WEIGHTS);
  w->weights = n ? xcalloc(n, sizeof *w->weights) : NULL;
  int rc = 0;
  for (; pair < node->data.mapping.pairs.top; pair++) {
    yaml_node_t *k = schema_node(&p->w, pair->key);
    yaml_node_t *v = schema_node(&p->w, pair->value);
    const char *text = v && v->type == YAML_SCALAR_NODE ? schema_scalar(v) : "";
    char *end = NULL;
    long weight = strtol(text, &end, 10);
    if (!k || k->type != YAML_SCALAR_NODE || schema_is_null(k)) {
      rc = schema_fail(&p->w, k ? k : node,
                       "a fairness weight's value must be a scalar");
      continue;
    }
    if (!*text || *end || weight < 1 || weight > 1000) {
      rc = schema_fail(&p->w, v ? v : k,
                       "the weight of \"%s\" must be an integer between 1 "
                       "and 1000 (its turns a round)",
                       schema_scalar(k));
      continue;
    }
    w->weights[w->n_weights++] = (config_flow_weight){
        .value = xstrdup(schema_scalar(k)), .weight = (uint32_t)weight};
  }
  return rc;
}

/* flow.singleton: {key: /userId, mode: skip | queue}, both required. */
static int parse_singleton(config_parser *p, yaml_node_t *node,
                           config_workflow *w) {
  int present = schema_section(&p->w, node, "singleton");
  if (present <= 0)
    return present;
  yaml_node_t *sv[SCHEMA_MAX_FIELDS];
  /* a bad mode and a bad key are both said (the walk fills sv anyway) */
  int rc =
      schema_mapping(&p->w, node, &config_flow_singleton_schema, w, sv, NULL);
  if (w->singleton_key && sv[SINGLETON_KEY] &&
      !duro_json_pointer_valid(w->singleton_key))
    rc = schema_fail(&p->w, sv[SINGLETON_KEY],
                     "\"key\" must be a JSON pointer into the params, "
                     "such as \"/userId\"");
  return rc < 0 ? -1 : 0;
}

/* flow.debounce: {key: /docId, period: 30s, max_wait: 5m}, period
 * required; max_wait at least period; not with a singleton (both decide
 * what a create of a live key does). */
static int parse_debounce(config_parser *p, yaml_node_t *node,
                          config_workflow *w, yaml_node_t *singleton) {
  int present = schema_section(&p->w, node, "debounce");
  if (present <= 0)
    return present;
  yaml_node_t *dv[SCHEMA_MAX_FIELDS];
  int rc =
      schema_mapping(&p->w, node, &config_flow_debounce_schema, w, dv, NULL);
  if (rc >= 0 && check_pointer(p, dv[DEBOUNCE_KEY], w->debounce_key) < 0)
    rc = -1;
  if (rc >= 0 && w->debounce_max_wait_ms &&
      w->debounce_max_wait_ms < w->debounce_ms)
    rc = schema_fail(&p->w, dv[DEBOUNCE_MAX_WAIT],
                     "\"max_wait\" must be at least \"period\" (it bounds "
                     "how long the quiet spells may put a start off)");
  if (rc >= 0 && singleton)
    rc = schema_fail(&p->w, node,
                     "a flow has \"debounce\" or \"singleton\", not both "
                     "(each decides what a create of a live key does)");
  return rc < 0 ? -1 : 0;
}

/* flow: {concurrency: [{key: /customerId, limit: 2}, {limit: 200}],
 *        rate: [{key: /tenant, limit: 100, period: 1m, burst: 20}],
 *        priority: {key: /tier, default: 0},
 *        fairness: {key: /tenant, weights: {acme: 3}}}. */
static int parse_flow(config_parser *p, yaml_node_t *node, config_workflow *w) {
  yaml_node_t *fv[SCHEMA_MAX_FIELDS];
  if (schema_mapping(&p->w, node, &config_flow_schema, w, fv, NULL) < 0)
    return -1;
  int rc = 0;
  yaml_node_t *ov[SCHEMA_MAX_FIELDS];
  int section = schema_section(&p->w, fv[FLOW_PRIORITY], "priority");
  if (section < 0 ||
      (section > 0 &&
       (schema_mapping(&p->w, fv[FLOW_PRIORITY], &config_flow_priority_schema,
                       w, ov, NULL) < 0 ||
        check_pointer(p, ov[ORDER_KEY], w->priority_key) < 0)))
    rc = -1;
  section = schema_section(&p->w, fv[FLOW_FAIRNESS], "fairness");
  if (section < 0 ||
      (section > 0 &&
       (schema_mapping(&p->w, fv[FLOW_FAIRNESS], &config_flow_fairness_schema,
                       w, ov, NULL) < 0 ||
        check_pointer(p, ov[FAIR_KEY], w->fairness_key) < 0 ||
        parse_weights(p, ov[FAIR_WEIGHTS], w) < 0)))
    rc = -1;
  if (fv[FLOW_CONCURRENCY] &&
      parse_rules(p, fv[FLOW_CONCURRENCY], "concurrency",
                  &config_flow_rule_schema, &w->flow, &w->n_flow) < 0)
    rc = -1;
  if (fv[FLOW_RATE] &&
      parse_rules(p, fv[FLOW_RATE], "rate", &config_flow_rate_schema, &w->rates,
                  &w->n_rates) < 0)
    rc = -1;
  /* they order what waits for a rule's turn: with no rule, nothing does */
  const char *what = w->priority_key ? "priority" : "fairness";
  yaml_node_t *order = fv[w->priority_key ? FLOW_PRIORITY : FLOW_FAIRNESS];
  if (rc == 0 && (w->priority_key || w->fairness_key) && !w->n_flow &&
      !w->n_rates)
    rc = schema_fail(&p->w, order,
                     "\"%s\" orders the instances waiting for a flow rule's "
                     "turn, and this flow has no concurrency or rate rule "
                     "(limit the whole workflow with concurrency: "
                     "[{limit: N}])",
                     what);
  if (fv[FLOW_SINGLETON] && parse_singleton(p, fv[FLOW_SINGLETON], w) < 0)
    rc = -1;
  if (fv[FLOW_DEBOUNCE] &&
      parse_debounce(p, fv[FLOW_DEBOUNCE], w, fv[FLOW_SINGLETON]) < 0)
    rc = -1;
  return rc;
}

/* index: a list of attributes, each a valid name once, a JSON pointer,
 * at most CONFIG_MAX_ATTRS. */
static int parse_index(config_parser *p, yaml_node_t *list,
                       config_workflow *w) {
  size_t n;
  if (schema_list(&p->w, list, "index", &n) < 0)
    return -1;
  if (n > CONFIG_MAX_ATTRS)
    return schema_fail(&p->w, list,
                       "\"index\" holds at most %d attributes, not %zu",
                       CONFIG_MAX_ATTRS, n);
  if (n == 0)
    return 0;
  w->index = xcalloc(n, sizeof *w->index);
  w->n_index = n;
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, list, i);
    config_attr *a = &w->index[i];
    yaml_node_t *av[SCHEMA_MAX_FIELDS];
    a->pos = schema_pos(item);
    if (schema_entry(&p->w, item, "index") < 0 ||
        schema_mapping(&p->w, item, &config_attr_schema, a, av, NULL) < 0) {
      rc = -1;
      continue;
    }
    schema_shown b;
    if (!duro_attr_name_valid(a->name)) {
      rc = schema_fail(&p->w, av[ATTR_NAME],
                       "an attribute's name is 1-%d characters of A-Z a-z "
                       "0-9 _, not starting with a digit, not \"%s\"",
                       DURO_ATTR_NAME_MAX, schema_show(&b, a->name));
      continue;
    }
    if (a->from && !duro_json_pointer_valid(a->from)) {
      rc = schema_fail(&p->w, av[ATTR_FROM],
                       "\"from\" is not a JSON pointer into the params "
                       "(RFC 6901: \"/customerId\", with ~0 for '~' and ~1 "
                       "for '/'): \"%s\"",
                       schema_show(&b, a->from));
      continue;
    }
    for (size_t k = 0; k < i; k++)
      if (w->index[k].name && !strcmp(w->index[k].name, a->name)) {
        rc = schema_fail(&p->w, av[ATTR_NAME],
                         "a second attribute named \"%s\" (the first is at "
                         "%d:%d)",
                         a->name, w->index[k].pos.line, w->index[k].pos.column);
        break;
      }
  }
  return rc;
}

static int parse_tail_consumers(config_parser *p, yaml_node_t *list,
                                char ***names, config_pos **pos, size_t *n) {
  int rc = schema_list(&p->w, list, "tail_consumers", n);
  if (*n == 0)
    return rc;
  *names = xcalloc(*n, sizeof **names);
  *pos = xcalloc(*n, sizeof **pos);
  for (size_t i = 0; i < *n; i++) {
    yaml_node_t *item = schema_item(&p->w, list, i);
    (*pos)[i] = schema_pos(item);
    if (schema_take_string(&p->w, item, "tail_consumers", &(*names)[i]) < 0) {
      rc = DURO_E_CONFIG;
      continue;
    }
    for (size_t k = 0; k < i; k++)
      if ((*names)[k] && !strcmp((*names)[k], (*names)[i])) {
        schema_shown b;
        rc = schema_fail(&p->w, item,
                         "\"tail_consumers\" names plugin \"%s\" twice "
                         "(first at %d:%d)",
                         schema_show(&b, (*names)[i]), (*pos)[k].line,
                         (*pos)[k].column);
        break;
      }
  }
  return rc < 0 ? DURO_E_CONFIG : rc;
}

/* retention: one duration for every outcome, or a mapping {complete,
 * errored, terminated}. */
static int parse_retention(config_parser *p, yaml_node_t *v,
                           config_workflow *w) {
  if (v->type == YAML_MAPPING_NODE) {
    yaml_node_t *rv[SCHEMA_MAX_FIELDS];
    return schema_mapping(&p->w, v, &config_retention_schema, w, rv, NULL);
  }
  if (v->type != YAML_SCALAR_NODE)
    return schema_fail(&p->w, v,
                       "\"retention\" must be a duration such as \"30d\", "
                       "or a mapping {complete, errored, terminated} of "
                       "durations");
  if (schema_value(&p->w, &retention_field, v, w) < 0)
    return DURO_E_CONFIG;
  w->retention_errored_ms = w->retention_terminated_ms = w->retention_ms;
  return 0;
}

static int parse_workflow(config_parser *p, yaml_node_t *node,
                          config_workflow *w) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  int rc;

  w->retention_ms = w->retention_errored_ms = w->retention_terminated_ms =
      30 * DAY_MS;
  w->max_steps = 10000;
  w->max_logs = 1000;
  w->concurrency = 0;
  w->parallel = CONFIG_DEFAULT_PARALLEL;
  w->pos = schema_pos(node);
  rc = schema_mapping(&p->w, node, &config_workflow_schema, w, v, NULL);
  if (!w->name)
    p->unsure_workflows = true;
  if (v[WF_RETENTION] && parse_retention(p, v[WF_RETENTION], w) < 0)
    rc = DURO_E_CONFIG;
  int limits = schema_section(&p->w, v[WF_LIMITS], "limits");
  if (limits > 0) {
    yaml_node_t *lv[SCHEMA_MAX_FIELDS];
    limits =
        schema_mapping(&p->w, v[WF_LIMITS], &config_limits_schema, w, lv, NULL);
  }
  if (limits < 0 || config_unique(p, "workflow name", w->name, v[WF_NAME]) < 0)
    rc = DURO_E_CONFIG;
  int flow = schema_section(&p->w, v[WF_FLOW], "flow");
  if (flow < 0 || (flow > 0 && parse_flow(p, v[WF_FLOW], w) < 0))
    rc = DURO_E_CONFIG;
  if (w->lifecycle_queue &&
      config_queue_name(p, v[WF_LIFECYCLE], &w->lifecycle_queue) < 0)
    rc = DURO_E_CONFIG;
  w->lifecycle_pos = v[WF_LIFECYCLE] ? schema_pos(v[WF_LIFECYCLE]) : w->pos;
  if (v[WF_TAIL] &&
      parse_tail_consumers(p, v[WF_TAIL], &w->tail_consumers, &w->tail_pos,
                           &w->n_tail_consumers) < 0)
    rc = DURO_E_CONFIG;
  if (config_unique(p, "binding name", w->binding, v[WF_BINDING]) < 0)
    rc = DURO_E_CONFIG;
  if (v[WF_INDEX] && parse_index(p, v[WF_INDEX], w) < 0)
    rc = DURO_E_CONFIG;
  return rc;
}

int config_parse_plugin(config_parser *p, yaml_node_t *node,
                        config_plugin *pl) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  size_t n;

  unsigned bad;
  pl->pos = schema_pos(node);
  pl->workers = CONFIG_DEFAULT_WORKERS;
  pl->concurrency = CONFIG_DEFAULT_CONCURRENCY;
  pl->crash_storm.crashes = 5;
  pl->crash_storm.window_ms = MINUTE_MS;
  pl->crash_storm.rate_ppm = CONFIG_DEFAULT_CRASH_RATE_PPM;
  int rc = schema_mapping(&p->w, node, &config_plugin_schema, pl, v, &bad);
  int storm = schema_section(&p->w, v[PL_CRASH_STORM], "crash_storm");
  if (storm > 0) {
    yaml_node_t *sv[SCHEMA_MAX_FIELDS];
    storm = schema_mapping(&p->w, v[PL_CRASH_STORM], &config_crash_storm_schema,
                           pl, sv, NULL);
  }
  if (storm < 0)
    rc = DURO_E_CONFIG;
  /* In the engine (workers: 0) it bounds the engine threads its
   * callbacks hold: 0, unsaid, is half of them (engine_admit.c). */
  if (!pl->workers && !v[PL_CONCURRENCY])
    pl->concurrency = 0;
  int limits = schema_section(&p->w, v[PL_LIMITS], "limits");
  if (limits > 0) {
    yaml_node_t *lv[SCHEMA_MAX_FIELDS];
    limits = schema_mapping(&p->w, v[PL_LIMITS], &config_plugin_limits_schema,
                            pl, lv, NULL);
  }
  if (limits < 0)
    rc = DURO_E_CONFIG;
  else if (!pl->workers && (pl->limits.memory || pl->limits.cpu_ms ||
                            pl->limits.processes || pl->limits.cpus_ppm))
    rc = schema_fail(&p->w, v[PL_LIMITS],
                     "\"limits\" apply to worker processes: they need "
                     "\"workers\" above 0");
  /* An unknown key ("workflow:", "queue:") may be a list of them. */
  if (bad & SCHEMA_BAD_UNKNOWN)
    p->unsure_workflows = p->unsure_queues = true;
  if (config_unique(p, "plugin name", pl->name, v[PL_NAME]) < 0)
    rc = DURO_E_CONFIG;

  if (schema_list(&p->w, v[PL_WORKFLOWS], "workflows", &n) < 0) {
    p->unsure_workflows = true;
    rc = DURO_E_CONFIG;
  }
  if (n > 0) {
    pl->workflows = xcalloc(n, sizeof *pl->workflows);
    pl->n_workflows = n;
  }
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, v[PL_WORKFLOWS], i);
    if (schema_entry(&p->w, item, "workflows") < 0) {
      p->unsure_workflows = true;
      rc = DURO_E_CONFIG;
    } else if (parse_workflow(p, item, &pl->workflows[i]) < 0) {
      rc = DURO_E_CONFIG;
    }
  }

  int present = schema_section(&p->w, v[PL_QUEUES], "queues");
  if (present < 0)
    p->unsure_queues = true;
  if (present < 0 ||
      (present > 0 && config_parse_queues(p, v[PL_QUEUES], pl) < 0))
    rc = DURO_E_CONFIG;

  if (v[PL_TAIL] &&
      parse_tail_consumers(p, v[PL_TAIL], &pl->tail_consumers, &pl->tail_pos,
                           &pl->n_tail_consumers) < 0)
    rc = DURO_E_CONFIG;

  present = schema_section(&p->w, v[PL_TRIGGERS], "triggers");
  if (present < 0 ||
      (present > 0 && config_parse_triggers(p, v[PL_TRIGGERS], pl) < 0))
    rc = DURO_E_CONFIG;
  return rc;
}
