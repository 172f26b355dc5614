/* config_cron.c — a plugin's triggers section: its cron triggers, each a
 * schedule (the handler form) or a mapping (a zone, the no-code form's
 * workflow and id template, catch-up and overlap).  Cron expressions,
 * time zones and instance id templates are checked here (cron/expr.h),
 * each refused at the line and column of the offending token, so `duro
 * check` catches what `duro run` would. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_internal.h"
#include "duro.h"
#include "expr.h"
#include "ids.h"
#include "schema.h"
#include "util.h"
#include "yaml_json.h"

/* ---- Schemas ----------------------------------------------------------- */

enum { TR_CRONS };
static const schema_field triggers_fields[] = {
    [TR_CRONS] = {"crons", K_NESTED, 0, false, 0, 0, NULL},
};
const schema config_triggers_schema =
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
  CR_OVERLAP,
  CR_PARAMS
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
    [CR_PARAMS] = {"params", K_NESTED, 0, false, 0, 0, NULL},
};
const schema config_cron_schema = SCHEMA("cron", "in cron", -1, cron_fields);
/* ---- Entries ----------------------------------------------------------- */

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
static int check_id_template(config_parser *p, const yaml_node_t *v,
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
static int check_schedule(config_parser *p, const yaml_node_t *sched,
                          config_cron *c) {
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

static int check_timezone(config_parser *p, const yaml_node_t *v,
                          const char *tz) {
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

/* `params`, the no-code form's: a mapping, as the JSON object each
 * instance's params start from (the tick's `cron` and `scheduled_ms` are
 * the host's to set). */
static int check_params(config_parser *p, const yaml_node_t *v,
                        config_cron *c) {
  if (!c->workflow)
    return schema_fail(&p->w, v,
                       "\"params\" needs \"workflow\": they are the params of "
                       "the instances a cron creates");
  if (v->type != YAML_MAPPING_NODE)
    return schema_fail(&p->w, v,
                       "\"params\" must be a mapping: the instances' params, "
                       "a JSON object");
  json_t *j = config_yaml_json(&p->w, v);
  if (!j)
    return DURO_E_CONFIG;
  int rc = 0;
  if (json_object_get(j, "cron") || json_object_get(j, "scheduled_ms"))
    rc = schema_fail(&p->w, v,
                     "\"params\" cannot set \"cron\" or \"scheduled_ms\": "
                     "each instance gets its trigger's schedule and tick "
                     "there");
  else
    c->params = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(j);
  return rc;
}

/* One entry of triggers.crons: a string (the handler form) or a mapping.
 * Whether its workflow exists is known once every plugin is read
 * (check_crons). */
static int parse_cron(config_parser *p, yaml_node_t *node, config_cron *c) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  yaml_node_t *sched;
  unsigned bad = 0;
  int rc = 0;

  c->catch_up = CONFIG_CATCH_UP_LATEST;
  c->max_catch_up = 100;
  c->overlap_allow = 0;
  c->pos = schema_pos(node);
  if (node->type == YAML_MAPPING_NODE) {
    rc = schema_mapping(&p->w, node, &config_cron_schema, c, v, &bad);
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
  if (v[CR_PARAMS] && check_params(p, v[CR_PARAMS], c) < 0)
    rc = DURO_E_CONFIG;
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
static int check_cron_twice(config_parser *p, const config_plugin *pl,
                            size_t i) {
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

int config_parse_triggers(config_parser *p, yaml_node_t *node,
                          config_plugin *pl) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  size_t n;

  int rc = schema_mapping(&p->w, node, &config_triggers_schema, pl, v, NULL);
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
