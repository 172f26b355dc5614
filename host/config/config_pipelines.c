/* config_pipelines.c — the top-level pipelines list: each pipeline's
 * name and binding, its sink (a directory of files; object storage is
 * refused as not yet supported), the format and compression of its
 * files, when a file is rolled, and how much may wait unwritten. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_internal.h"
#include "duro.h"
#include "ids.h"
#include "schema.h"
#include "util.h"

/* ---- Schemas ----------------------------------------------------------- */

enum {
  PL_NAME,
  PL_BINDING,
  PL_SINK,
  PL_FORMAT,
  PL_COMPRESSION,
  PL_ROLL,
  PL_MAX_BACKLOG
};
static const schema_choice format_choices[] = {{"jsonl", CONFIG_FORMAT_JSONL},
                                               {NULL, 0}};
static const schema_choice compression_choices[] = {
    {"gzip", CONFIG_COMPRESSION_GZIP},
    {"none", CONFIG_COMPRESSION_NONE},
    {NULL, 0}};
static const schema_field pipeline_fields[] = {
    [PL_NAME] = {"name", K_STRING, offsetof(config_pipeline, name), true, 0, 0,
                 NULL},
    [PL_BINDING] = {"binding", K_STRING, offsetof(config_pipeline, binding),
                    true, 0, 0, NULL},
    [PL_SINK] = {"sink", K_NESTED, 0, true, 0, 0, NULL},
    [PL_FORMAT] = {"format", K_ENUM, offsetof(config_pipeline, format), false,
                   0, 0, format_choices},
    [PL_COMPRESSION] = {"compression", K_ENUM,
                        offsetof(config_pipeline, compression), false, 0, 0,
                        compression_choices},
    [PL_ROLL] = {"roll", K_NESTED, 0, false, 0, 0, NULL},
    /* At least a record's largest size, so that one record always fits. */
    [PL_MAX_BACKLOG] = {"max_backlog", K_BYTES,
                        offsetof(config_pipeline, max_backlog), false, MiB,
                        1024 * GiB, NULL},
};
const schema config_pipeline_schema =
    SCHEMA("pipeline", "in pipeline", PL_NAME, pipeline_fields);

enum { SI_FILES, SI_S3 };
static const schema_field sink_fields[] = {
    [SI_FILES] = {"files", K_NESTED, 0, false, 0, 0, NULL},
    [SI_S3] = {"s3", K_NESTED, 0, false, 0, 0, NULL},
};
const schema config_sink_schema = SCHEMA("sink", "in sink", -1, sink_fields);

enum { FI_PATH, FI_PARTITION };
static const schema_field files_fields[] = {
    [FI_PATH] = {"path", K_STRING, offsetof(config_pipeline, path), true, 0, 0,
                 NULL},
    [FI_PARTITION] = {"partition", K_STRING,
                      offsetof(config_pipeline, partition), false, 0, 0, NULL},
};
const schema config_files_sink_schema =
    SCHEMA("files sink", "in sink.files", -1, files_fields);

static const schema_field roll_fields[] = {
    {"size", K_BYTES, offsetof(config_pipeline, roll_size), false, 1000, GiB,
     NULL},
    {"interval", K_DURATION, offsetof(config_pipeline, roll_interval_ms), false,
     SECOND_MS, DAY_MS, NULL},
};
const schema config_roll_schema = SCHEMA("roll", "in roll", -1, roll_fields);

/* ---- Entries ----------------------------------------------------------- */

/* A partition template: names of [A-Za-z0-9_.=-] and the fields {yyyy}
 * {mm} {dd} {hh} {mi}, separated by single '/'; never absolute, never
 * "." or "..", so a batch's directory stays under the sink's path.
 * NULL when it is one, else what is wrong. */
static const char *partition_wrong(const char *t) {
  static const char *const fields[] = {"{yyyy}", "{mm}", "{dd}", "{hh}",
                                       "{mi}"};
  const char *seg = t;
  for (const char *c = t;; c++) {
    if (*c == '/' || *c == '\0') {
      size_t n = (size_t)(c - seg);
      if (n == 0)
        return "empty directory names (a leading, trailing or double '/')";
      if ((n == 1 && seg[0] == '.') || (n == 2 && !strncmp(seg, "..", 2)))
        return "\".\" or \"..\"";
      if (*c == '\0')
        return NULL;
      seg = c + 1;
      continue;
    }
    if (*c == '{') {
      size_t k = 0;
      while (k < sizeof fields / sizeof *fields &&
             strncmp(c, fields[k], strlen(fields[k])) != 0)
        k++;
      if (k == sizeof fields / sizeof *fields)
        return "a field other than {yyyy} {mm} {dd} {hh} {mi}";
      c += strlen(fields[k]) - 1;
      continue;
    }
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                "0123456789_.=-",
                *c))
      return "a character other than A-Z a-z 0-9 _ . = - /";
  }
}

/* A pipeline's name as the routes and the CLI name it: the rule of
 * queue names (config_queue_name). */
static int pipeline_name(config_parser *p, yaml_node_t *node, char **name) {
  if (duro_instance_id_valid(*name))
    return 0;
  schema_shown b;
  schema_fail(&p->w, node,
              "pipeline names are 1-100 characters of A-Z a-z 0-9 _ . : -, "
              "not \"%s\"",
              schema_show(&b, *name));
  free(*name);
  *name = NULL;
  return DURO_E_CONFIG;
}

/* sink: the files sink (required, for now the only one). */
static int parse_sink(config_parser *p, yaml_node_t *node, config_pipeline *pl,
                      const yaml_node_t *owner) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS], *fv[SCHEMA_MAX_FIELDS];
  int present = schema_section(&p->w, node, "sink");
  if (present <= 0)
    return present < 0 ? present
                       : schema_fail(&p->w, node ? node : owner,
                                     "\"sink\" needs \"files\"");
  int rc = schema_mapping(&p->w, node, &config_sink_schema, pl, v, NULL);
  if (v[SI_S3])
    rc = schema_fail(&p->w, v[SI_S3],
                     "\"s3\": an object storage sink is not yet supported; "
                     "use \"files\"");
  present = schema_section(&p->w, v[SI_FILES], "files");
  if (present < 0)
    return present;
  if (present == 0) {
    if (!v[SI_S3])
      rc = schema_fail(&p->w, node, "\"sink\" needs \"files\"");
    return rc;
  }
  if (schema_mapping(&p->w, v[SI_FILES], &config_files_sink_schema, pl, fv,
                     NULL) < 0)
    rc = DURO_E_CONFIG;
  const char *wrong = pl->partition ? partition_wrong(pl->partition) : NULL;
  if (wrong) {
    schema_shown b;
    rc = schema_fail(&p->w, fv[FI_PARTITION],
                     "\"partition\" \"%s\" may not hold %s: it is a relative "
                     "directory such as \"{yyyy}/{mm}/{dd}/{hh}\"",
                     schema_show(&b, pl->partition), wrong);
  }
  return rc;
}

static int parse_pipeline(config_parser *p, yaml_node_t *node,
                          config_pipeline *pl) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS], *rv[SCHEMA_MAX_FIELDS];

  pl->format = CONFIG_FORMAT_JSONL;
  pl->compression = CONFIG_COMPRESSION_GZIP;
  pl->roll_size = 100 * 1000 * 1000;
  pl->roll_interval_ms = 300 * SECOND_MS;
  pl->max_backlog = 1000 * 1000 * 1000;
  pl->pos = schema_pos(node);
  unsigned bad;
  int rc = schema_mapping(&p->w, node, &config_pipeline_schema, pl, v, &bad);
  if (pl->name && pipeline_name(p, v[PL_NAME], &pl->name) < 0)
    rc = DURO_E_CONFIG;
  if (config_unique(p, "pipeline name", pl->name, v[PL_NAME]) < 0 ||
      config_unique(p, "binding name", pl->binding, v[PL_BINDING]) < 0)
    rc = DURO_E_CONFIG;
  if (!(bad & (1u << PL_SINK)) && v[PL_SINK] &&
      parse_sink(p, v[PL_SINK], pl, node) < 0)
    rc = DURO_E_CONFIG;
  int roll = schema_section(&p->w, v[PL_ROLL], "roll");
  if (roll < 0 ||
      (roll > 0 && schema_mapping(&p->w, v[PL_ROLL], &config_roll_schema, pl,
                                  rv, NULL) < 0))
    rc = DURO_E_CONFIG;
  if (!pl->partition)
    pl->partition = xstrdup("{yyyy}/{mm}/{dd}/{hh}");
  return rc;
}

int config_parse_pipelines(config_parser *p, yaml_node_t *list) {
  config *cfg = p->cfg;
  size_t n;
  int rc = schema_list(&p->w, list, "pipelines", &n);
  if (n > 0) {
    cfg->pipelines = xcalloc(n, sizeof *cfg->pipelines);
    cfg->n_pipelines = n;
  }
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, list, i);
    if (schema_entry(&p->w, item, "pipelines") < 0 ||
        parse_pipeline(p, item, &cfg->pipelines[i]) < 0)
      rc = DURO_E_CONFIG;
  }
  return rc;
}
