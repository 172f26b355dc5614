/* config_root.c — the top level of the configuration and the host's own
 * sections, storage, http, engine and log: one mapping each, filling the
 * config; the plugins list is handed entry by entry to config_plugin.c
 * the pipelines list to config_pipelines.c and the resources list to
 * config_resources.c, and once every plugin is
 * read the references across the file are
 * checked (config_refs.c). */
#include "duro_config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_internal.h"
#include "duration.h"
#include "duro.h"
#include "schema.h"
#include "util.h"

/* ---- Schemas ----------------------------------------------------------- */

/* The indexes name the slots schema_mapping() fills with value nodes, which
 * the walkers below use for nested sections and for positions. */
enum {
  ROOT_STORAGE,
  ROOT_HTTP,
  ROOT_ENGINE,
  ROOT_LOG,
  ROOT_TELEMETRY,
  ROOT_TAIL,
  ROOT_PLUGINS,
  ROOT_PIPELINES,
  ROOT_RESOURCES
};
static const schema_field root_fields[] = {
    [ROOT_STORAGE] = {"storage", K_NESTED, 0, false, 0, 0, NULL},
    [ROOT_HTTP] = {"http", K_NESTED, 0, false, 0, 0, NULL},
    [ROOT_ENGINE] = {"engine", K_NESTED, 0, false, 0, 0, NULL},
    [ROOT_LOG] = {"log", K_NESTED, 0, false, 0, 0, NULL},
    [ROOT_TELEMETRY] = {"telemetry", K_NESTED, 0, false, 0, 0, NULL},
    [ROOT_TAIL] = {"tail", K_NESTED, 0, false, 0, 0, NULL},
    [ROOT_PLUGINS] = {"plugins", K_NESTED, 0, false, 0, 0, NULL},
    [ROOT_PIPELINES] = {"pipelines", K_NESTED, 0, false, 0, 0, NULL},
    [ROOT_RESOURCES] = {"resources", K_NESTED, 0, false, 0, 0, NULL},
};
const schema config_root_schema =
    SCHEMA("top level", "at the top level", -1, root_fields);

static const schema_choice synchronous_choices[] = {
    {"full", 1}, {"normal", 0}, {NULL, 0}};
static const schema_field storage_fields[] = {
    {"path", K_STRING, offsetof(config, storage.path), false, 0, 0, NULL},
    {"synchronous", K_ENUM, offsetof(config, storage.synchronous_full), false,
     0, 0, synchronous_choices},
    {"postgresql", K_STRING, offsetof(config, storage.postgresql), false, 0, 0,
     NULL},
    {"connect_timeout", K_DURATION,
     offsetof(config, storage.connect_timeout_ms), false, 0, HOUR_MS, NULL},
    {"lease", K_DURATION, offsetof(config, storage.lease_ms), false,
     SECOND_MS / 2, HOUR_MS, NULL},
    {"encryption", K_NESTED, 0, false, 0, 0, NULL},
};
#define STORAGE_ENCRYPTION 5 /* the index of encryption above */
const schema config_storage_schema =
    SCHEMA("storage", "in storage", -1, storage_fields);

static const schema_field http_fields[] = {
    {"listen", K_STRING, offsetof(config, http.listen), false, 0, 0, NULL},
    {"token_env", K_STRING, offsetof(config, http.token_env), false, 0, 0,
     NULL},
    {"allow_insecure", K_BOOL, offsetof(config, http.allow_insecure), false, 0,
     0, NULL},
    {"max_body_bytes", K_I64, offsetof(config, http.max_body_bytes), false, 1,
     GiB, NULL},
    {"max_wait", K_DURATION, offsetof(config, http.max_wait_ms), false, 0,
     10 * MINUTE_MS, NULL},
    {"allowed_hosts", K_NESTED, 0, false, 0, 0, NULL},
    {"tls", K_NESTED, 0, false, 0, 0, NULL},
    {"keys", K_NESTED, 0, false, 0, 0, NULL},
};
/* the indexes of the nested keys above (config_access.c walks tls, keys) */
#define HTTP_ALLOWED_HOSTS 5
#define HTTP_TLS 6
#define HTTP_KEYS 7
const schema config_http_schema = SCHEMA("http", "in http", -1, http_fields);

/* `threads` is the engine's own threads; `workers`, their old name, is
 * read as the same (a "worker" is a plugin's process now). */
#define ENGINE_THREADS 0
#define ENGINE_WORKERS 1
static const schema_field engine_fields[] = {
    [ENGINE_THREADS] = {"threads", K_U32, offsetof(config, engine.workers),
                        false, 1, 1024, NULL},
    [ENGINE_WORKERS] = {"workers", K_U32, offsetof(config, engine.workers),
                        false, 1, 1024, NULL},
    /* A step result larger than the 1 GiB instance state could never fit. */
    {"max_step_result", K_I64, offsetof(config, engine.max_step_result), false,
     1, GiB, NULL},
    {"max_instance_state", K_I64, offsetof(config, engine.max_instance_state),
     false, 1, 64 * GiB, NULL},
    {"max_crashes", K_U32, offsetof(config, engine.max_crashes), false, 1, 100,
     NULL},
    {"shutdown_grace", K_DURATION, offsetof(config, engine.shutdown_grace_ms),
     false, 0, HOUR_MS, NULL},
    {"max_queued", K_I64, offsetof(config, engine.max_queued), false, 0,
     1000000000, NULL},
};
const schema config_engine_schema =
    SCHEMA("engine", "in engine", -1, engine_fields);
static const schema_choice log_format_choices[] = {
    {"json", 1}, {"text", 0}, {NULL, 0}};
static const schema_field log_fields[] = {
    {"format", K_ENUM, offsetof(config, log.json), false, 0, 0,
     log_format_choices},
};
const schema config_log_schema = SCHEMA("log", "in log", -1, log_fields);
enum { TEL_ENDPOINT };
static const schema_field telemetry_fields[] = {
    [TEL_ENDPOINT] = {"otlp_endpoint", K_STRING,
                      offsetof(config, telemetry.otlp_endpoint), true, 0, 0,
                      NULL},
    {"service_name", K_STRING, offsetof(config, telemetry.service_name), false,
     0, 0, NULL},
    {"sample", K_RATIO, offsetof(config, telemetry.sample), false, 0, 1000000,
     NULL},
    {"max_spans", K_U32, offsetof(config, telemetry.max_spans), false, 100,
     10000000, NULL},
    {"interval", K_DURATION, offsetof(config, telemetry.interval_ms), false,
     100, 60 * SECOND_MS, NULL},
};
const schema config_telemetry_schema =
    SCHEMA("telemetry", "in telemetry", -1, telemetry_fields);
static const schema_field tail_fields[] = {
    {"buffer", K_U32, offsetof(config, tail.buffer), false, 1, 10000000, NULL},
    {"buffer_bytes", K_BYTES, offsetof(config, tail.buffer_bytes), false,
     64 * 1024, 4 * GiB, NULL},
    {"max_batch_size", K_U32, offsetof(config, tail.max_batch_size), false, 1,
     10000, NULL},
    {"max_batch_timeout", K_DURATION,
     offsetof(config, tail.max_batch_timeout_ms), false, 1, 10 * MINUTE_MS,
     NULL},
    {"timeout", K_DURATION, offsetof(config, tail.timeout_ms), false, 1,
     HOUR_MS, NULL},
};
const schema config_tail_schema = SCHEMA("tail", "in tail", -1, tail_fields);

/* ---- Sections ---------------------------------------------------------- */

/* Whether `name` is a host as a Host header gives it: "name", "1.2.3.4",
 * "[::1]", each with an optional ":port"; no scheme, path or spaces. */
static bool host_name_ok(const char *name) {
  if (strpbrk(name, " \t/?#@,\"\\"))
    return false;
  const char *end = name;
  if (name[0] == '[') {
    end = strchr(name, ']');
    if (!end)
      return false;
    end++;
  } else {
    end = name + strcspn(name, ":");
  }
  if (end == name)
    return false;
  if (*end == '\0')
    return true;
  return *end == ':' && end[1] &&
         strspn(end + 1, "0123456789") == strlen(end + 1) &&
         strlen(end + 1) <= 5;
}

/* http.allowed_hosts: a list of host names (host_name_ok). */
static int parse_allowed_hosts(config_parser *p, const yaml_node_t *list,
                               config *cfg) {
  size_t n;
  int rc = schema_list(&p->w, list, "allowed_hosts", &n);
  if (n > 0)
    cfg->http.allowed_hosts = xcalloc(n, sizeof *cfg->http.allowed_hosts);
  cfg->http.n_allowed_hosts = n; /* a refused entry stays NULL */
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, list, i);
    char **name = &cfg->http.allowed_hosts[i];
    if (schema_take_string(&p->w, item, "allowed_hosts", name) < 0) {
      rc = DURO_E_CONFIG;
    } else if (!host_name_ok(*name)) {
      schema_shown b;
      rc = schema_fail(&p->w, item,
                       "\"allowed_hosts\" entries are host names as a Host "
                       "header gives them (\"duro.example.com\" or "
                       "\"duro.example.com:8787\"), not \"%s\"",
                       schema_show(&b, *name));
    }
  }
  return rc;
}

/* storage, http, engine and log: one mapping each, filling the config. */
static int parse_sections(config_parser *p, yaml_node_t **v) {
  config *cfg = p->cfg;
  yaml_node_t *sv[SCHEMA_MAX_FIELDS];
  int rc = 0;

  static const struct {
    int index;
    const char *key;
    const schema *s;
  } sections[] = {{ROOT_STORAGE, "storage", &config_storage_schema},
                  {ROOT_HTTP, "http", &config_http_schema},
                  {ROOT_ENGINE, "engine", &config_engine_schema},
                  {ROOT_LOG, "log", &config_log_schema},
                  {ROOT_TELEMETRY, "telemetry", &config_telemetry_schema},
                  {ROOT_TAIL, "tail", &config_tail_schema}};
  for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
    yaml_node_t *sec = v[sections[i].index];
    int present = schema_section(&p->w, sec, sections[i].key);
    if (present < 0)
      rc = DURO_E_CONFIG;
    if (present <= 0)
      continue;
    if (schema_mapping(&p->w, sec, sections[i].s, cfg, sv, NULL) < 0)
      rc = DURO_E_CONFIG;
    if (sections[i].index == ROOT_STORAGE && sv[2] && !DURO_HAVE_PG)
      rc = schema_fail(&p->w, sv[2],
                       "\"postgresql\": this duro was built without PostgreSQL "
                       "(libpq)");
    if (sections[i].index == ROOT_STORAGE &&
        config_parse_encryption(p, sv[STORAGE_ENCRYPTION]) < 0)
      rc = DURO_E_CONFIG;
    if (sections[i].index == ROOT_ENGINE && sv[ENGINE_THREADS] &&
        sv[ENGINE_WORKERS])
      rc = schema_fail(&p->w, sv[ENGINE_WORKERS],
                       "\"workers\" is the old name of \"threads\": give one");
    /* http.c checks these against the bind policy later, and names them */
    if (sections[i].index == ROOT_HTTP) {
      if (sv[0])
        cfg->http.listen_pos = schema_pos(sv[0]);
      if (sv[1])
        cfg->http.token_env_pos = schema_pos(sv[1]);
      if (parse_allowed_hosts(p, sv[HTTP_ALLOWED_HOSTS], cfg) < 0 ||
          config_parse_http_access(p, sv[HTTP_TLS], sv[HTTP_KEYS], sv[1]) < 0)
        rc = DURO_E_CONFIG;
    }
    /* a collector's base URL: the exporter adds /v1/traces */
    const char *ep = cfg->telemetry.otlp_endpoint;
    if (sections[i].index == ROOT_TELEMETRY && sv[TEL_ENDPOINT] && ep &&
        strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0) {
      schema_shown b;
      rc = schema_fail(&p->w, sv[TEL_ENDPOINT],
                       "\"otlp_endpoint\" is an http:// or https:// URL "
                       "(an OTLP/HTTP collector, e.g. "
                       "\"http://127.0.0.1:4318\"), not \"%s\"",
                       schema_show(&b, ep));
    }
  }
  return rc;
}

int config_parse_root(config_parser *p, yaml_node_t *root) {
  config *cfg = p->cfg;
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  unsigned bad;
  size_t n;

  /* An empty file, or one holding only "---", is the all-defaults config. */
  if (!root || schema_is_null(root))
    return 0;
  if (root->type != YAML_MAPPING_NODE)
    return schema_fail(&p->w, root, "the top level must be a mapping");
  int rc = schema_mapping(&p->w, root, &config_root_schema, cfg, v, &bad);
  if (bad & SCHEMA_BAD_UNKNOWN) /* "plugin:" may be the plugins */
    p->unsure_workflows = p->unsure_queues = true;
  if (parse_sections(p, v) < 0)
    rc = DURO_E_CONFIG;

  if (schema_list(&p->w, v[ROOT_PLUGINS], "plugins", &n) < 0)
    rc = DURO_E_CONFIG;
  if (n > 0) {
    cfg->plugins = xcalloc(n, sizeof *cfg->plugins);
    cfg->n_plugins = n;
  }
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, v[ROOT_PLUGINS], i);
    if (schema_entry(&p->w, item, "plugins") < 0) {
      p->unsure_workflows = p->unsure_queues = true;
      rc = DURO_E_CONFIG;
    } else if (config_parse_plugin(p, item, &cfg->plugins[i]) < 0) {
      rc = DURO_E_CONFIG;
    }
  }
  if (config_parse_pipelines(p, v[ROOT_PIPELINES]) < 0)
    rc = DURO_E_CONFIG;
  if (config_parse_resources(p, v[ROOT_RESOURCES]) < 0)
    rc = DURO_E_CONFIG;
  if (config_check_references(p) < 0)
    rc = DURO_E_CONFIG;
  return rc;
}
