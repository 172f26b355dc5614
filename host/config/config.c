/* config.c — reads the YAML configuration into the plain structs of
 * config.h, or refuses it with every "file:line:column: message" it finds
 * (errlist.h), as a compiler lists its errors.
 *
 * libyaml composes the whole document into a node tree first; this module
 * then walks that tree with one schema per mapping, the tables below
 * (schema.h: a table of fields, each typed, ranged, required or not,
 * walked the same way for every mapping).  A null value (`storage:` with
 * nothing after it) for a section or list means the same as leaving it
 * out; for a scalar field it is refused.
 *
 * Names that must be unique across the whole file (plugin names, workflow
 * names, the one namespace of workflow and producer bindings, and the queue
 * of a consumer, since a queue has one consumer) are recorded as they are
 * parsed, so a duplicate is reported at the second occurrence with the
 * position of the first.  Once every plugin is read, each queue producer
 * must send to a queue some consumer consumes or dead-letters into, and
 * each no-code consumer or cron trigger must name a workflow some plugin
 * declares.  Cron expressions, time zones and instance id templates are
 * checked here too (cron/expr.h), each refused at the line and column of
 * the offending token, so `duro check` catches what `duro run` would.
 *
 * Before any of that, one pass over libyaml's events refuses a document
 * nested deeper than MAX_DEPTH levels, at the first collection past it:
 * composing 100,000 nested flow collections ("[[[...") takes libyaml
 * tens of seconds.
 *
 * Errors do not stop the walk: a refused value leaves its field at its
 * default, as if absent, a refused entry is skipped, and the walk goes on
 * with the next key or entry, so one pass reports all it can.  What an
 * error would make wrong is not reported on top of it: a misspelt key
 * that suggests a required one is not reported as missing too, a name
 * refused is not checked for uniqueness, and when a consumer's queue or
 * a workflow's name was refused (or a list or key that could hold one),
 * references to queues or workflows are not checked, since the one not
 * found may be that one.  Only a YAML syntax error or a document nested
 * too deep ends the parse, where libyaml ends it.
 *
 * Lifecycle: config_parse_all() builds a config with every default filled
 * in, overwrites what the file sets, and when it recorded any error frees
 * it all and returns NULL.  Every string and array in a returned config
 * belongs to it and is released by config_free().  Positions in messages
 * are 1-based; libyaml's marks are 0-based. */
#include "config.h"
#include "duro_config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "duration.h"
#include "duro.h"
#include "errlist.h"
#include "expr.h"
#include "ids.h"
#include "json_pointer.h"
#include "paths.h"
#include "schema.h"
#include "util.h"

/* ---- The parser -------------------------------------------------------- */

/* A name recorded for the uniqueness checks; `name` is borrowed from the
 * config being built, which outlives the parse. */
typedef struct seen_name {
  const char *kind; /* "workflow name", "binding name", ... */
  const char *name;
  config_pos pos;
} seen_name;

typedef struct parser {
  schema_walk w;
  config *cfg;
  seen_name *seen;
  size_t n_seen, cap_seen;
  /* A consumer or a workflow whose name was refused (or an entry, list or
   * section that would have held one) leaves the names declared unknown:
   * a reference to a queue or a workflow that is not found may be to that
   * one, so it is not refused on top. */
  bool unsure_queues, unsure_workflows;
} parser;

/* ---- Schemas ----------------------------------------------------------- */

/* The indexes name the slots schema_mapping() fills with value nodes, which
 * the walkers below use for nested sections and for positions. */
enum { ROOT_STORAGE, ROOT_HTTP, ROOT_ENGINE, ROOT_PLUGINS };
static const schema_field root_fields[] = {
    [ROOT_STORAGE] = {"storage", K_NESTED, 0, false, 0, 0, NULL},
    [ROOT_HTTP] = {"http", K_NESTED, 0, false, 0, 0, NULL},
    [ROOT_ENGINE] = {"engine", K_NESTED, 0, false, 0, 0, NULL},
    [ROOT_PLUGINS] = {"plugins", K_NESTED, 0, false, 0, 0, NULL},
};
static const schema root_schema =
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
};
static const schema storage_schema =
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
};
#define HTTP_ALLOWED_HOSTS 5 /* the index of allowed_hosts above */
static const schema http_schema = SCHEMA("http", "in http", -1, http_fields);

static const schema_field engine_fields[] = {
    {"workers", K_U32, offsetof(config, engine.workers), false, 1, 1024, NULL},
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
static const schema engine_schema =
    SCHEMA("engine", "in engine", -1, engine_fields);

enum { PL_NAME, PL_PATH, PL_WORKFLOWS, PL_QUEUES, PL_TRIGGERS };
static const schema_field plugin_fields[] = {
    [PL_NAME] = {"name", K_STRING, offsetof(config_plugin, name), true, 0, 0,
                 NULL},
    [PL_PATH] = {"path", K_STRING, offsetof(config_plugin, path), true, 0, 0,
                 NULL},
    [PL_WORKFLOWS] = {"workflows", K_NESTED, 0, false, 0, 0, NULL},
    [PL_QUEUES] = {"queues", K_NESTED, 0, false, 0, 0, NULL},
    [PL_TRIGGERS] = {"triggers", K_NESTED, 0, false, 0, 0, NULL},
};
static const schema plugin_schema =
    SCHEMA("plugin", "in plugin", PL_NAME, plugin_fields);

enum {
  WF_NAME,
  WF_BINDING,
  WF_CLASS,
  WF_RETENTION,
  WF_LIMITS,
  WF_VERSIONING,
  WF_DIVERGENCE,
  WF_LIFECYCLE
};
/* Which build an in-flight instance runs after a reload. */
static const schema_choice versioning_choices[] = {
    {"pinned", 0}, {"latest", 1}, {NULL, 0}};
/* What a replay that no longer matches its journal does. */
static const schema_choice divergence_choices[] = {
    {"error", 0}, {"pause", 1}, {NULL, 0}};
static const schema_field workflow_fields[] = {
    [WF_NAME] = {"name", K_STRING, offsetof(config_workflow, name), true, 0, 0,
                 NULL},
    [WF_BINDING] = {"binding", K_STRING, offsetof(config_workflow, binding),
                    true, 0, 0, NULL},
    [WF_CLASS] = {"class_name", K_STRING, offsetof(config_workflow, class_name),
                  true, 0, 0, NULL},
    [WF_RETENTION] = {"retention", K_DURATION,
                      offsetof(config_workflow, retention_ms), false, 0,
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
};
static const schema workflow_schema =
    SCHEMA("workflow", "in workflow", WF_NAME, workflow_fields);

/* limits fills the same config_workflow as its parent. */
static const schema_field limits_fields[] = {
    {"steps", K_U32, offsetof(config_workflow, max_steps), false, 1, 25000,
     NULL},
    {"concurrency", K_U32, offsetof(config_workflow, concurrency), false, 0,
     UINT32_MAX, NULL},
};
static const schema limits_schema =
    SCHEMA("limits", "in limits", -1, limits_fields);

enum { QS_PRODUCERS, QS_CONSUMERS };
static const schema_field queues_fields[] = {
    [QS_PRODUCERS] = {"producers", K_NESTED, 0, false, 0, 0, NULL},
    [QS_CONSUMERS] = {"consumers", K_NESTED, 0, false, 0, 0, NULL},
};
static const schema queues_schema =
    SCHEMA("queues", "in queues", -1, queues_fields);

enum { PR_BINDING, PR_QUEUE };
static const schema_field producer_fields[] = {
    [PR_BINDING] = {"binding", K_STRING, offsetof(config_producer, binding),
                    true, 0, 0, NULL},
    [PR_QUEUE] = {"queue", K_STRING, offsetof(config_producer, queue), true, 0,
                  0, NULL},
};
static const schema producer_schema =
    SCHEMA("producer", "in producer", PR_BINDING, producer_fields);

/* The ranges are Cloudflare Queues' documented limits. */
enum {
  CO_QUEUE,
  CO_BATCH,
  CO_TIMEOUT,
  CO_RETRIES,
  CO_DELAY,
  CO_DLQ,
  CO_CONCURRENCY,
  CO_RETENTION,
  CO_WORKFLOW,
  CO_ID_FROM,
  CO_VISIBILITY
};
static const schema_field consumer_fields[] = {
    [CO_QUEUE] = {"queue", K_STRING, offsetof(config_consumer, queue), true, 0,
                  0, NULL},
    [CO_BATCH] = {"max_batch_size", K_U32,
                  offsetof(config_consumer, max_batch_size), false, 1, 100,
                  NULL},
    [CO_TIMEOUT] = {"max_batch_timeout", K_DURATION,
                    offsetof(config_consumer, max_batch_timeout_ms), false, 0,
                    60 * SECOND_MS, NULL},
    [CO_RETRIES] = {"max_retries", K_U32,
                    offsetof(config_consumer, max_retries), false, 0, 100,
                    NULL},
    [CO_DELAY] = {"retry_delay", K_DURATION,
                  offsetof(config_consumer, retry_delay_ms), false, 0,
                  12 * HOUR_MS, NULL},
    [CO_DLQ] = {"dead_letter_queue", K_STRING,
                offsetof(config_consumer, dead_letter_queue), false, 0, 0,
                NULL},
    [CO_CONCURRENCY] = {"max_concurrency", K_U32,
                        offsetof(config_consumer, max_concurrency), false, 1,
                        250, NULL},
    /* The queue's, kept with its one consumer; parse_consumer refuses
     * less than a minute, which would delete messages as they arrive. */
    [CO_RETENTION] = {"message_retention", K_DURATION,
                      offsetof(config_consumer, message_retention_ms), false, 0,
                      14 * DAY_MS, NULL},
    [CO_WORKFLOW] = {"workflow", K_STRING, offsetof(config_consumer, workflow),
                     false, 0, 0, NULL},
    [CO_ID_FROM] = {"id_from", K_STRING, offsetof(config_consumer, id_from),
                    false, 0, 0, NULL},
    [CO_VISIBILITY] = {"visibility_timeout", K_DURATION,
                       offsetof(config_consumer, visibility_timeout_ms), false,
                       SECOND_MS, 12 * HOUR_MS, NULL},
};
static const schema consumer_schema =
    SCHEMA("consumer", "in consumer", CO_QUEUE, consumer_fields);

enum { TR_CRONS };
static const schema_field triggers_fields[] = {
    [TR_CRONS] = {"crons", K_NESTED, 0, false, 0, 0, NULL},
};
static const schema triggers_schema =
    SCHEMA("triggers", "in triggers", -1, triggers_fields);

/* A cron trigger in its mapping form; the string form is a schedule with
 * every other key at its default. */
enum {
  CR_SCHEDULE,
  CR_TIMEZONE,
  CR_WORKFLOW,
  CR_ID,
  CR_CATCH_UP,
  CR_MAX_CATCH_UP,
  CR_OVERLAP
};
/* What happens to the ticks that passed while the host was down. */
static const schema_choice catch_up_choices[] = {
    {"none", CONFIG_CATCH_UP_NONE},
    {"latest", CONFIG_CATCH_UP_LATEST},
    {"all", CONFIG_CATCH_UP_ALL},
    {NULL, 0}};
/* A tick that comes while the previous one still runs. */
static const schema_choice overlap_choices[] = {
    {"skip", 0}, {"allow", 1}, {NULL, 0}};
static const schema_field cron_fields[] = {
    [CR_SCHEDULE] = {"schedule", K_STRING, offsetof(config_cron, schedule),
                     true, 0, 0, NULL},
    [CR_TIMEZONE] = {"timezone", K_STRING, offsetof(config_cron, timezone),
                     false, 0, 0, NULL},
    [CR_WORKFLOW] = {"workflow", K_STRING, offsetof(config_cron, workflow),
                     false, 0, 0, NULL},
    [CR_ID] = {"id", K_STRING, offsetof(config_cron, id), false, 0, 0, NULL},
    [CR_CATCH_UP] = {"catch_up", K_ENUM, offsetof(config_cron, catch_up), false,
                     0, 0, catch_up_choices},
    [CR_MAX_CATCH_UP] = {"max_catch_up", K_U32,
                         offsetof(config_cron, max_catch_up), false, 1, 10000,
                         NULL},
    [CR_OVERLAP] = {"overlap", K_ENUM, offsetof(config_cron, overlap_allow),
                    false, 0, 0, overlap_choices},
};
static const schema cron_schema = SCHEMA("cron", "in cron", -1, cron_fields);

/* ---- Entries ----------------------------------------------------------- */

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
static int parse_allowed_hosts(parser *p, const yaml_node_t *list,
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

/* Records `name` (the value of node `v`) in the namespace `kind`, or
 * reports it as a duplicate of an earlier one. */
static int unique(parser *p, const char *kind, const char *name,
                  const yaml_node_t *v) {
  schema_shown b;
  if (!name) /* refused or missing: reported already */
    return 0;
  for (size_t i = 0; i < p->n_seen; i++) {
    const seen_name *s = &p->seen[i];
    if (strcmp(s->kind, kind) == 0 && strcmp(s->name, name) == 0)
      return schema_fail(&p->w, v, "duplicate %s \"%s\" (first at %d:%d)", kind,
                         schema_show(&b, name), s->pos.line, s->pos.column);
  }
  if (p->n_seen == p->cap_seen) {
    p->cap_seen = p->cap_seen ? 2 * p->cap_seen : 16;
    p->seen = xrealloc(p->seen, p->cap_seen * sizeof *p->seen);
  }
  p->seen[p->n_seen++] = (seen_name){kind, name, schema_pos(v)};
  return 0;
}

static int queue_name(parser *p, yaml_node_t *node, char **name);

static int parse_workflow(parser *p, yaml_node_t *node, config_workflow *w) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  int rc;

  w->retention_ms = 30 * DAY_MS;
  w->max_steps = 10000;
  w->concurrency = 0;
  w->pos = schema_pos(node);
  rc = schema_mapping(&p->w, node, &workflow_schema, w, v, NULL);
  if (!w->name)
    p->unsure_workflows = true;
  int limits = schema_section(&p->w, v[WF_LIMITS], "limits");
  if (limits > 0) {
    yaml_node_t *lv[SCHEMA_MAX_FIELDS];
    limits = schema_mapping(&p->w, v[WF_LIMITS], &limits_schema, w, lv, NULL);
  }
  if (limits < 0 || unique(p, "workflow name", w->name, v[WF_NAME]) < 0)
    rc = DURO_E_CONFIG;
  if (w->lifecycle_queue &&
      queue_name(p, v[WF_LIFECYCLE], &w->lifecycle_queue) < 0)
    rc = DURO_E_CONFIG;
  w->lifecycle_pos = v[WF_LIFECYCLE] ? schema_pos(v[WF_LIFECYCLE]) : w->pos;
  if (unique(p, "binding name", w->binding, v[WF_BINDING]) < 0)
    rc = DURO_E_CONFIG;
  return rc;
}

/* A queue name as the HTTP routes and the CLI can name it (a queue named
 * otherwise could be declared but never reached): the rule of instance
 * ids (ids.h), which the same routes and verbs take. */
static int queue_name(parser *p, yaml_node_t *node, char **name) {
  if (duro_instance_id_valid(*name))
    return 0;
  schema_shown b;
  schema_fail(&p->w, node,
              "queue names are 1-100 characters of A-Z a-z 0-9 _ . : -, "
              "not \"%s\"",
              schema_show(&b, *name));
  /* As if not given: nothing is checked against a name refused here. */
  free(*name);
  *name = NULL;
  return DURO_E_CONFIG;
}

static int parse_producer(parser *p, yaml_node_t *node, config_producer *pr) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];

  pr->pos = schema_pos(node);
  int rc = schema_mapping(&p->w, node, &producer_schema, pr, v, NULL);
  if (pr->queue) {
    pr->queue_pos = schema_pos(v[PR_QUEUE]);
    if (queue_name(p, v[PR_QUEUE], &pr->queue) < 0)
      rc = DURO_E_CONFIG;
  }
  if (unique(p, "binding name", pr->binding, v[PR_BINDING]) < 0)
    rc = DURO_E_CONFIG;
  return rc;
}

/* The no-code consumer's keys go together; whether its workflow exists is
 * known once every plugin is read (check_consumers).  `bad` has the bits
 * of the fields parse_mapping refused: one of the pair refused is not
 * reported again as missing. */
static int check_id_from(parser *p, config_consumer *c, yaml_node_t **v,
                         unsigned bad) {
  int rc = 0;
  if (c->workflow)
    c->workflow_pos = schema_pos(v[CO_WORKFLOW]);
  bool pair_given = !(bad & (1u << CO_WORKFLOW | 1u << CO_ID_FROM));
  if (pair_given && c->id_from && !c->workflow)
    rc = schema_fail(
        &p->w, v[CO_ID_FROM],
        "\"id_from\" needs \"workflow\": it names where a message's "
        "instance id is");
  if (pair_given && c->workflow && !c->id_from)
    rc = schema_fail(&p->w, v[CO_WORKFLOW],
                     "\"workflow\" needs \"id_from\", the JSON pointer to each "
                     "message's instance id (e.g. \"/jobId\")");
  if (c->id_from && !duro_json_pointer_valid(c->id_from)) {
    schema_shown b;
    rc = schema_fail(&p->w, v[CO_ID_FROM],
                     "\"id_from\" is not a JSON pointer (RFC 6901: \"\" or "
                     "\"/a/b\", with ~0 for '~' and ~1 for '/'): \"%s\"",
                     schema_show(&b, c->id_from));
  }
  return rc;
}

static int parse_consumer(parser *p, yaml_node_t *node, config_consumer *c) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  unsigned bad;

  c->max_batch_size = 10;
  c->max_batch_timeout_ms = 5 * SECOND_MS;
  c->max_retries = 3;
  c->retry_delay_ms = 0;
  c->message_retention_ms = 4 * DAY_MS;
  c->visibility_timeout_ms = 30 * SECOND_MS;
  c->pos = schema_pos(node);
  int rc = schema_mapping(&p->w, node, &consumer_schema, c, v, &bad);
  if (c->message_retention_ms < MINUTE_MS)
    rc = schema_fail(&p->w, v[CO_RETENTION],
                     "\"message_retention\" must be at least 1 minute");
  if (c->queue && queue_name(p, v[CO_QUEUE], &c->queue) < 0)
    rc = DURO_E_CONFIG;
  if (c->dead_letter_queue &&
      queue_name(p, v[CO_DLQ], &c->dead_letter_queue) < 0)
    rc = DURO_E_CONFIG;
  /* What this consumer consumes or dead-letters into is not known. */
  if (!c->queue || (bad & (1u << CO_DLQ)) ||
      (v[CO_DLQ] && !c->dead_letter_queue))
    p->unsure_queues = true;
  /* Dead-lettering into the queue itself would retry a message forever. */
  if (c->queue && c->dead_letter_queue &&
      strcmp(c->dead_letter_queue, c->queue) == 0) {
    schema_shown b;
    rc = schema_fail(
        &p->w, v[CO_DLQ],
        "\"dead_letter_queue\" must differ from the consumer's queue "
        "\"%s\"",
        schema_show(&b, c->queue));
  }
  if (check_id_from(p, c, v, bad) < 0 ||
      unique(p, "consumer for queue", c->queue, v[CO_QUEUE]) < 0)
    rc = DURO_E_CONFIG;
  return rc;
}

static int parse_queues(parser *p, yaml_node_t *node, config_plugin *pl) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  size_t n;

  unsigned bad;
  int rc = schema_mapping(&p->w, node, &queues_schema, pl, v, &bad);
  if (bad & SCHEMA_BAD_UNKNOWN) /* "consumer:" may be the consumers */
    p->unsure_queues = true;
  if (schema_list(&p->w, v[QS_PRODUCERS], "producers", &n) < 0)
    rc = DURO_E_CONFIG;
  if (n > 0) {
    pl->producers = xcalloc(n, sizeof *pl->producers);
    pl->n_producers = n;
  }
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, v[QS_PRODUCERS], i);
    if (schema_entry(&p->w, item, "producers") < 0 ||
        parse_producer(p, item, &pl->producers[i]) < 0)
      rc = DURO_E_CONFIG;
  }

  if (schema_list(&p->w, v[QS_CONSUMERS], "consumers", &n) < 0) {
    p->unsure_queues = true;
    rc = DURO_E_CONFIG;
  }
  if (n > 0) {
    pl->consumers = xcalloc(n, sizeof *pl->consumers);
    pl->n_consumers = n;
  }
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, v[QS_CONSUMERS], i);
    if (schema_entry(&p->w, item, "consumers") < 0) {
      p->unsure_queues = true;
      rc = DURO_E_CONFIG;
    } else if (parse_consumer(p, item, &pl->consumers[i]) < 0) {
      rc = DURO_E_CONFIG;
    }
  }
  return rc;
}

/* The position of byte `offset` of a scalar's value: the scalar's first
 * character, one more past an opening quote, then one column per
 * character (not byte) before it.  Exact for a value on one line without
 * escapes, which is how a cron expression is written; a folded or escaped
 * one is placed on its first line. */
static config_pos scalar_pos(const yaml_node_t *v, size_t offset) {
  config_pos pos = schema_pos(v);
  if (v->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
      v->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE)
    pos.column++;
  const char *s = schema_scalar(v);
  for (size_t i = 0; i < offset && i < v->data.scalar.length; i++)
    if (((unsigned char)s[i] & 0xC0) != 0x80)
      pos.column++;
  return pos;
}

/* Writes `tmpl` with each placeholder replaced by its value at a sample
 * tick into out (NUL-terminated, cut at outlen), or returns -1 with why in
 * msg.  The samples have the width the real values have, so the length
 * checked is the length every tick's id will have ({ts} stays 13 digits
 * until the year 2286). */
static int id_template_sample(const char *tmpl, char *out, size_t outlen,
                              char *msg, size_t msglen) {
  static const struct {
    const char *name;
    const char *sample;
  } ph[] = {{"date", "2025-01-31"},
            {"time", "0930"},
            {"datetime", "2025-01-31T09:30"},
            {"ts", "1738315800000"}};
  size_t o = 0;
  schema_shown b;
  for (const char *q = tmpl; *q; q++) {
    const char *piece = q;
    size_t len = 1;
    if (*q == '}') {
      snprintf(msg, msglen, "a \"}\" with no \"{\" before it");
      return -1;
    }
    if (*q == '{') {
      const char *end = strpbrk(q + 1, "{}");
      if (!end || *end == '{') {
        snprintf(msg, msglen, "a \"{\" with no \"}\" after it");
        return -1;
      }
      size_t n = (size_t)(end - q - 1), k = 0;
      while (k < sizeof ph / sizeof ph[0] &&
             !(strlen(ph[k].name) == n && memcmp(ph[k].name, q + 1, n) == 0))
        k++;
      if (k == sizeof ph / sizeof ph[0]) {
        snprintf(msg, msglen,
                 "unknown placeholder \"{%s}\" (the placeholders are {date}, "
                 "{time}, {datetime} and {ts})",
                 schema_show_n(&b, q + 1, n));
        return -1;
      }
      piece = ph[k].sample;
      len = strlen(piece);
      q = end;
    }
    for (size_t i = 0; i < len && o + 1 < outlen; i++)
      out[o++] = piece[i];
  }
  out[o] = '\0';
  return 0;
}

/* The instance id of every tick must be one the engine takes, or each
 * tick would fail at its fire instead of here. */
static int check_id_template(parser *p, const yaml_node_t *v,
                             const char *tmpl) {
  char sample[256], why[160];
  schema_shown b, t;
  if (id_template_sample(tmpl, sample, sizeof sample, why, sizeof why) < 0)
    return schema_fail(&p->w, v, "\"id\" template \"%s\": %s",
                       schema_show(&t, tmpl), why);
  if (!duro_instance_id_valid(sample))
    return schema_fail(
        &p->w, v,
        "\"id\" template \"%s\" makes ids such as \"%s\", which is "
        "not an instance id (1-100 characters of A-Z a-z 0-9 _ . : "
        "-)",
        schema_show(&t, tmpl), schema_show(&b, sample));
  return 0;
}

static bool same_str(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

/* "UTC" and no zone are the same zone. */
static const char *utc_null(const char *tz) {
  return tz && strcmp(tz, "UTC") == 0 ? NULL : tz;
}

/* The expression itself, `sched` its node: it parses, and some date
 * matches it. */
static int check_schedule(parser *p, const yaml_node_t *sched, config_cron *c) {
  cron_expr e;
  cron_error ce;
  schema_shown b;
  c->schedule_pos = scalar_pos(sched, 0);
  if (cron_parse(c->schedule, &e, &ce) < 0)
    return schema_fail_at(&p->w, scalar_pos(sched, ce.offset),
                          "invalid cron expression \"%s\": %s",
                          schema_show(&b, c->schedule), ce.msg);
  if (!cron_ever_fires(&e))
    return schema_fail_at(&p->w, scalar_pos(sched, 0),
                          "cron \"%s\" never fires: no date matches it",
                          schema_show(&b, c->schedule));
  char note[256];
  if (cron_weekday_note(&e, note, sizeof note))
    c->weekday_note = xstrdup(note);
  return 0;
}

static int check_timezone(parser *p, const yaml_node_t *v, const char *tz) {
  char why[256];
  if (cron_tz_valid(tz, why, sizeof why))
    return 0;
  /* cron_tz_valid() quotes the name as it is: a name that a raw quote
   * would garble is schema_shown escaped instead. */
  bool plain = true;
  for (const char *q = tz; *q; q++)
    if ((unsigned char)*q < 0x20 || *q == '"' || *q == '\\' || *q == 0x7f)
      plain = false;
  schema_shown b;
  if (!plain)
    return schema_fail(
        &p->w, v,
        "unknown time zone \"%s\" (not in the system's time zone "
        "database)",
        schema_show(&b, tz));
  return schema_fail(&p->w, v, "%s", why);
}

/* One entry of triggers.crons: a string (the handler form) or a mapping.
 * Whether its workflow exists is known once every plugin is read
 * (check_crons). */
static int parse_cron(parser *p, yaml_node_t *node, config_cron *c) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  yaml_node_t *sched;
  unsigned bad = 0;
  int rc = 0;

  c->catch_up = CONFIG_CATCH_UP_LATEST;
  c->max_catch_up = 100;
  c->overlap_allow = 0;
  c->pos = schema_pos(node);
  if (node->type == YAML_MAPPING_NODE) {
    rc = schema_mapping(&p->w, node, &cron_schema, c, v, &bad);
    sched = v[CR_SCHEDULE];
  } else {
    if (node->type != YAML_SCALAR_NODE || schema_is_null(node) ||
        node->data.scalar.length == 0)
      return schema_fail(
          &p->w, node,
          "each entry of \"crons\" must be a cron expression or a "
          "mapping with a \"schedule\"");
    if ((rc = schema_take_string(&p->w, node, "crons", &c->schedule)) < 0)
      return rc;
    for (size_t i = 0; i < SCHEMA_MAX_FIELDS; i++)
      v[i] = NULL;
    sched = node;
  }
  if (sched && check_schedule(p, sched, c) < 0)
    rc = DURO_E_CONFIG;
  if (c->timezone && check_timezone(p, v[CR_TIMEZONE], c->timezone) < 0)
    rc = DURO_E_CONFIG;

  /* The id template names the instances of the no-code form; without a
   * workflow there are none to name. */
  if (c->id && !c->workflow && !(bad & (1u << CR_WORKFLOW)))
    rc = schema_fail(&p->w, v[CR_ID],
                     "\"id\" needs \"workflow\": it is the id template of the "
                     "instances a cron creates");
  if (c->workflow) {
    c->workflow_pos = schema_pos(v[CR_WORKFLOW]);
    if (!c->id && !(bad & (1u << CR_ID)))
      c->id = xstrdup("cron-{datetime}");
    else if (c->id && check_id_template(p, v[CR_ID], c->id) < 0)
      rc = DURO_E_CONFIG;
  }
  return rc;
}

/* The same trigger twice would fire twice per tick: two handler calls, or
 * two attempts at the same instance id. */
static int check_cron_twice(parser *p, const config_plugin *pl, size_t i) {
  const config_cron *c = &pl->crons[i];
  for (size_t k = 0; k < i; k++) {
    const config_cron *d = &pl->crons[k];
    if (same_str(c->schedule, d->schedule) &&
        same_str(utc_null(c->timezone), utc_null(d->timezone)) &&
        same_str(c->workflow, d->workflow) && same_str(c->id, d->id)) {
      schema_shown b;
      return schema_fail_at(
          &p->w, c->pos,
          "duplicate cron trigger \"%s\" (first at %d:%d): it "
          "would fire twice",
          schema_show(&b, c->schedule), d->pos.line, d->pos.column);
    }
  }
  return 0;
}

static int parse_triggers(parser *p, yaml_node_t *node, config_plugin *pl) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  size_t n;

  int rc = schema_mapping(&p->w, node, &triggers_schema, pl, v, NULL);
  if (schema_list(&p->w, v[TR_CRONS], "crons", &n) < 0)
    rc = DURO_E_CONFIG;
  if (n > 0) {
    pl->crons = xcalloc(n, sizeof *pl->crons);
    pl->n_crons = n;
  }
  for (size_t i = 0; i < n; i++) {
    config_cron *c = &pl->crons[i];
    /* A refused entry is not compared: its error is reported already. */
    if (parse_cron(p, schema_item(&p->w, v[TR_CRONS], i), c) < 0 ||
        !c->schedule)
      rc = DURO_E_CONFIG;
    else if (check_cron_twice(p, pl, i) < 0)
      rc = DURO_E_CONFIG;
  }
  return rc;
}

static int parse_plugin(parser *p, yaml_node_t *node, config_plugin *pl) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  size_t n;

  unsigned bad;
  pl->pos = schema_pos(node);
  int rc = schema_mapping(&p->w, node, &plugin_schema, pl, v, &bad);
  /* An unknown key ("workflow:", "queue:") may be a list of them. */
  if (bad & SCHEMA_BAD_UNKNOWN)
    p->unsure_workflows = p->unsure_queues = true;
  if (unique(p, "plugin name", pl->name, v[PL_NAME]) < 0)
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
  if (present < 0 || (present > 0 && parse_queues(p, v[PL_QUEUES], pl) < 0))
    rc = DURO_E_CONFIG;

  present = schema_section(&p->w, v[PL_TRIGGERS], "triggers");
  if (present < 0 || (present > 0 && parse_triggers(p, v[PL_TRIGGERS], pl) < 0))
    rc = DURO_E_CONFIG;
  return rc;
}

/* 1 when some consumer of any plugin consumes `queue` or dead-letters
 * into it. */
static int queue_declared(const config *cfg, const char *queue) {
  for (size_t i = 0; i < cfg->n_plugins; i++)
    for (size_t k = 0; k < cfg->plugins[i].n_consumers; k++) {
      const config_consumer *c = &cfg->plugins[i].consumers[k];
      if ((c->queue && strcmp(c->queue, queue) == 0) ||
          (c->dead_letter_queue && strcmp(c->dead_letter_queue, queue) == 0))
        return 1;
    }
  return 0;
}

/* A message sent to a queue nobody consumes would only wait for its
 * retention to run out: refuse the producer, at its queue. */
static int check_producers(parser *p) {
  const config *cfg = p->cfg;
  int rc = 0;
  for (size_t i = 0; i < cfg->n_plugins; i++)
    for (size_t k = 0; k < cfg->plugins[i].n_producers; k++) {
      const config_producer *pr = &cfg->plugins[i].producers[k];
      if (!pr->queue || !pr->binding || queue_declared(cfg, pr->queue))
        continue;
      schema_shown b, q;
      rc = schema_fail_at(&p->w, pr->queue_pos,
                          "producer \"%s\" sends to queue \"%s\", which no "
                          "consumer consumes or names as its dead_letter_queue",
                          schema_show(&b, pr->binding),
                          schema_show(&q, pr->queue));
    }
  return rc;
}

/* The same for a workflow's lifecycle messages. */
static int check_lifecycle_queues(parser *p) {
  const config *cfg = p->cfg;
  int rc = 0;
  for (size_t i = 0; i < cfg->n_plugins; i++)
    for (size_t k = 0; k < cfg->plugins[i].n_workflows; k++) {
      const config_workflow *w = &cfg->plugins[i].workflows[k];
      if (!w->lifecycle_queue || !w->name ||
          queue_declared(cfg, w->lifecycle_queue))
        continue;
      schema_shown b, q;
      rc = schema_fail_at(&p->w, w->lifecycle_pos,
                          "workflow \"%s\" publishes its lifecycle to queue "
                          "\"%s\", which no consumer consumes or names as its "
                          "dead_letter_queue",
                          schema_show(&b, w->name),
                          schema_show(&q, w->lifecycle_queue));
    }
  return rc;
}

/* A no-code consumer's workflow must be declared, by any plugin. */
static int check_consumers(parser *p) {
  const config *cfg = p->cfg;
  int rc = 0;
  for (size_t i = 0; i < cfg->n_plugins; i++)
    for (size_t k = 0; k < cfg->plugins[i].n_consumers; k++) {
      const config_consumer *c = &cfg->plugins[i].consumers[k];
      if (!c->workflow || !c->queue ||
          config_find_workflow(cfg, c->workflow, NULL))
        continue;
      schema_shown b, q;
      rc = schema_fail_at(
          &p->w, c->workflow_pos,
          "consumer of queue \"%s\" creates instances of workflow "
          "\"%s\", which no plugin declares",
          schema_show(&q, c->queue), schema_show(&b, c->workflow));
    }
  return rc;
}

/* The same for a no-code cron trigger. */
static int check_crons(parser *p) {
  const config *cfg = p->cfg;
  int rc = 0;
  for (size_t i = 0; i < cfg->n_plugins; i++)
    for (size_t k = 0; k < cfg->plugins[i].n_crons; k++) {
      const config_cron *c = &cfg->plugins[i].crons[k];
      if (!c->workflow || !c->schedule ||
          config_find_workflow(cfg, c->workflow, NULL))
        continue;
      schema_shown b, q;
      rc = schema_fail_at(&p->w, c->workflow_pos,
                          "cron \"%s\" creates instances of workflow \"%s\", "
                          "which no plugin declares",
                          schema_show(&q, c->schedule),
                          schema_show(&b, c->workflow));
    }
  return rc;
}

/* The references across the whole file, once every plugin is read; those
 * to a kind of name that a refused entry may have declared are left out
 * (unsure_queues, unsure_workflows). */
static int check_references(parser *p) {
  int rc = 0;
  if (!p->unsure_workflows && (check_consumers(p) < 0 || check_crons(p) < 0))
    rc = DURO_E_CONFIG;
  if (!p->unsure_queues &&
      (check_lifecycle_queues(p) < 0 || check_producers(p) < 0))
    rc = DURO_E_CONFIG;
  return rc;
}

/* storage, http and engine: one mapping each, filling the config. */
static int parse_sections(parser *p, yaml_node_t **v) {
  config *cfg = p->cfg;
  yaml_node_t *sv[SCHEMA_MAX_FIELDS];
  int rc = 0;

  static const struct {
    int index;
    const char *key;
    const schema *s;
  } sections[] = {{ROOT_STORAGE, "storage", &storage_schema},
                  {ROOT_HTTP, "http", &http_schema},
                  {ROOT_ENGINE, "engine", &engine_schema}};
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
    /* http.c checks these against the bind policy later, and names them */
    if (sections[i].index == ROOT_HTTP) {
      if (sv[0])
        cfg->http.listen_pos = schema_pos(sv[0]);
      if (sv[1])
        cfg->http.token_env_pos = schema_pos(sv[1]);
      if (parse_allowed_hosts(p, sv[HTTP_ALLOWED_HOSTS], cfg) < 0)
        rc = DURO_E_CONFIG;
    }
  }
  return rc;
}

static int parse_root(parser *p, yaml_node_t *root) {
  config *cfg = p->cfg;
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  unsigned bad;
  size_t n;

  /* An empty file, or one holding only "---", is the all-defaults config. */
  if (!root || schema_is_null(root))
    return 0;
  if (root->type != YAML_MAPPING_NODE)
    return schema_fail(&p->w, root, "the top level must be a mapping");
  int rc = schema_mapping(&p->w, root, &root_schema, cfg, v, &bad);
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
    } else if (parse_plugin(p, item, &cfg->plugins[i]) < 0) {
      rc = DURO_E_CONFIG;
    }
  }
  if (check_references(p) < 0)
    rc = DURO_E_CONFIG;
  return rc;
}

/* How deep collections may nest.  The schema needs 6 levels (the top
 * level, plugins, a plugin, workflows, a workflow, limits); the cap is
 * there because libyaml takes time quadratic in the depth of flow
 * collections (its scanner rechecks every open flow level at each token),
 * so a hostile 100,000 levels would keep `duro check` busy for tens of
 * seconds before any message. */
#define MAX_DEPTH 64

/* Streams the text's events once before it is composed, and refuses it at
 * the first collection nested deeper than MAX_DEPTH, having scanned only
 * that far.  Returns 0 also when libyaml refuses the text: the load that
 * follows meets the same error and reports it in its usual order. */
static int check_depth(parser *p) {
  yaml_parser_t yp;
  yaml_event_t ev;
  int depth = 0, rc = 0;

  if (!yaml_parser_initialize(&yp)) {
    fprintf(stderr, "duro: out of memory creating a YAML parser\n");
    abort();
  }
  yaml_parser_set_input_string(&yp, (const unsigned char *)p->w.text, p->w.len);
  while (rc == 0 && yaml_parser_parse(&yp, &ev)) {
    yaml_event_type_t type = ev.type;
    if (type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) {
      if (++depth > MAX_DEPTH)
        rc = schema_fail_at(&p->w,
                            (config_pos){(int)ev.start_mark.line + 1,
                                         (int)ev.start_mark.column + 1},
                            "mappings and lists nested deeper than %d levels",
                            MAX_DEPTH);
    } else if (type == YAML_SEQUENCE_END_EVENT ||
               type == YAML_MAPPING_END_EVENT) {
      depth--;
    }
    yaml_event_delete(&ev);
    if (type == YAML_STREAM_END_EVENT)
      break;
  }
  yaml_parser_delete(&yp);
  return rc;
}

/* libyaml's own refusal, at its mark.  Reader errors (bad UTF-8, control
 * characters) carry a byte offset instead, turned here into a line and a
 * column counted in characters as libyaml counts them. */
static int yaml_failure(parser *p, const yaml_parser_t *yp) {
  const char *problem = yp->problem ? yp->problem : "unknown error";
  config_pos pos;

  switch (yp->error) {
  case YAML_MEMORY_ERROR:
    fprintf(stderr, "duro: out of memory parsing %s\n", p->w.file);
    abort();
  case YAML_READER_ERROR: {
    pos = (config_pos){1, 1};
    size_t end = yp->problem_offset < p->w.len ? yp->problem_offset : p->w.len;
    for (size_t i = 0; i < end; i++) {
      unsigned char c = (unsigned char)p->w.text[i];
      if (c == '\n') {
        pos.line++;
        pos.column = 1;
      } else if ((c & 0xC0) != 0x80) {
        pos.column++;
      }
    }
    return schema_fail_at(&p->w, pos, "YAML syntax error: %s", problem);
  }
  default:
    pos = (config_pos){(int)yp->problem_mark.line + 1,
                       (int)yp->problem_mark.column + 1};
    if (yp->context)
      return schema_fail_at(
          &p->w, pos, "YAML syntax error: %s (%s started at %d:%d)", problem,
          yp->context, (int)yp->context_mark.line + 1,
          (int)yp->context_mark.column + 1);
    return schema_fail_at(&p->w, pos, "YAML syntax error: %s", problem);
  }
}

/* A config with every default filled in, before the file overrides. */
static config *config_defaults(const char *file) {
  config *cfg = xcalloc(1, sizeof *cfg);
  cfg->file = xstrdup(file);
  cfg->storage.path = xstrdup("var/duro.db");
  cfg->storage.synchronous_full = 1;
  cfg->storage.connect_timeout_ms = 30 * SECOND_MS;
  cfg->storage.lease_ms = 5 * SECOND_MS;
  cfg->http.listen = xstrdup("127.0.0.1:8787");
  cfg->http.token_env = NULL;
  cfg->http.allow_insecure = 0;
  cfg->http.max_body_bytes = 1 * MiB;
  cfg->http.max_wait_ms = 60 * 1000;
  cfg->engine.workers = 64;
  cfg->engine.max_step_result = 1 * MiB;
  cfg->engine.max_instance_state = 1 * GiB;
  cfg->engine.max_crashes = 3;
  cfg->engine.shutdown_grace_ms = 30 * SECOND_MS;
  return cfg;
}

/* libyaml stops at a syntax error, so does the parse: what the document
 * held past it is unknown.  Every other error is recorded and the walk
 * goes on. */
config *config_parse_all(const char *name, const char *text, size_t len,
                         errlist *errs) {
  parser p = {.w = {.file = name ? name : "<config>",
                    .text = text ? text : "",
                    .len = text ? len : 0,
                    .errs = errs}};
  yaml_parser_t yp;
  yaml_document_t doc, next;
  size_t before = errlist_total(errs);

  config *cfg = config_defaults(p.w.file);
  p.cfg = cfg;
  if (check_depth(&p) < 0)
    goto out;
  if (!yaml_parser_initialize(&yp)) {
    fprintf(stderr, "duro: out of memory creating a YAML parser\n");
    abort();
  }
  yaml_parser_set_input_string(&yp, (const unsigned char *)p.w.text, p.w.len);

  /* On failure yaml_parser_load() has already released the document. */
  if (!yaml_parser_load(&yp, &doc)) {
    yaml_failure(&p, &yp);
    goto out_parser;
  }
  p.w.doc = &doc;
  parse_root(&p, yaml_document_get_root_node(&doc));

  /* A second document would be ignored silently; refuse it instead. */
  if (!yaml_parser_load(&yp, &next)) {
    yaml_failure(&p, &yp);
    goto out_doc;
  }
  yaml_node_t *extra = yaml_document_get_root_node(&next);
  if (extra)
    schema_fail(&p.w, extra, "only one YAML document is allowed");
  yaml_document_delete(&next);

out_doc:
  yaml_document_delete(&doc);
out_parser:
  yaml_parser_delete(&yp);
out:
  free(p.seen);
  if (errlist_total(errs) > before) {
    config_free(cfg);
    return NULL;
  }
  return cfg;
}

config *config_parse(const char *name, const char *text, size_t len, char *err,
                     size_t errlen) {
  errlist errs = {0};
  config *cfg = config_parse_all(name, text, len, &errs);
  if (!cfg)
    errlist_join(&errs, err, errlen);
  else if (err && errlen > 0)
    err[0] = '\0';
  errlist_clear(&errs);
  return cfg;
}

/* *slot resolved against dir (paths.h), replacing it. */
static void resolve_into(char **slot, const char *dir) {
  char *resolved = config_resolve_path(dir, *slot);
  free(*slot);
  *slot = resolved;
}

/* Every file path of a config read from `file`, the default database's
 * too, anchored to the file's directory: a config then names the same
 * files from any current directory, and a plugin path always holds a
 * '/', so dlopen never searches the library path for it. */
static void resolve_paths(config *cfg, const char *file) {
  char *dir = config_dir_of(file);
  resolve_into(&cfg->storage.path, dir);
  for (size_t i = 0; i < cfg->n_plugins; i++)
    resolve_into(&cfg->plugins[i].path, dir);
  free(dir);
}

config *config_load_all(const char *path, errlist *errs) {
  FILE *f = NULL;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  config *cfg = NULL;

  if (!path) {
    errlist_add(errs, 0, 0, xstrdup("config: no file given"));
    return NULL;
  }
  if (!(f = fopen(path, "rb")))
    goto fail_io;
  for (;;) {
    if (cap - len < 4096) {
      cap = cap ? 2 * cap : 16384;
      buf = xrealloc(buf, cap);
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f))
        goto fail_io; /* errno is fread's, e.g. EISDIR for a directory */
      break;
    }
  }
  cfg = config_parse_all(path, buf, len, errs);
  if (cfg)
    resolve_paths(cfg, path);
  goto out;

fail_io:
  errlist_add(errs, 0, 0,
              xasprintf("%s: cannot read: %s", path, strerror(errno)));
out:
  if (f)
    fclose(f);
  free(buf);
  return cfg;
}

config *config_load(const char *path, char *err, size_t errlen) {
  errlist errs = {0};
  config *cfg = config_load_all(path, &errs);
  if (!cfg)
    errlist_join(&errs, err, errlen);
  else if (err && errlen > 0)
    err[0] = '\0';
  errlist_clear(&errs);
  return cfg;
}

void config_free(config *cfg) {
  if (!cfg)
    return;
  for (size_t i = 0; i < cfg->n_plugins; i++) {
    config_plugin *pl = &cfg->plugins[i];
    for (size_t j = 0; j < pl->n_workflows; j++) {
      free(pl->workflows[j].name);
      free(pl->workflows[j].binding);
      free(pl->workflows[j].class_name);
      free(pl->workflows[j].lifecycle_queue);
    }
    free(pl->workflows);
    for (size_t j = 0; j < pl->n_producers; j++) {
      free(pl->producers[j].binding);
      free(pl->producers[j].queue);
    }
    free(pl->producers);
    for (size_t j = 0; j < pl->n_consumers; j++) {
      free(pl->consumers[j].queue);
      free(pl->consumers[j].dead_letter_queue);
      free(pl->consumers[j].workflow);
      free(pl->consumers[j].id_from);
    }
    free(pl->consumers);
    for (size_t j = 0; j < pl->n_crons; j++) {
      free(pl->crons[j].schedule);
      free(pl->crons[j].timezone);
      free(pl->crons[j].workflow);
      free(pl->crons[j].id);
      free(pl->crons[j].weekday_note);
    }
    free(pl->crons);
    free(pl->name);
    free(pl->path);
  }
  free(cfg->plugins);
  free(cfg->storage.path);
  free(cfg->storage.postgresql);
  free(cfg->http.listen);
  free(cfg->http.token_env);
  for (size_t i = 0; i < cfg->http.n_allowed_hosts; i++)
    free(cfg->http.allowed_hosts[i]);
  free(cfg->http.allowed_hosts);
  free(cfg->file);
  free(cfg);
}

const config_workflow *config_find_workflow(const config *cfg, const char *name,
                                            const config_plugin **plugin_out) {
  if (plugin_out)
    *plugin_out = NULL;
  if (!cfg || !name)
    return NULL;
  for (size_t i = 0; i < cfg->n_plugins; i++) {
    const config_plugin *pl = &cfg->plugins[i];
    for (size_t j = 0; j < pl->n_workflows; j++) {
      if (pl->workflows[j].name && strcmp(pl->workflows[j].name, name) == 0) {
        if (plugin_out)
          *plugin_out = pl;
        return &pl->workflows[j];
      }
    }
  }
  return NULL;
}
