/* config_pipelines.c — the top-level pipelines list: each pipeline's
 * name and binding, its sink (a directory of files, or a bucket of object
 * storage), the format (JSON lines, or CSV of the columns it names) and
 * compression of its batches, when a batch is
 * rolled, how much may wait unwritten, and how long a failed write waits
 * at most before it is tried again. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_internal.h"
#include "duro.h"
#include "ids.h"
#include "json_pointer.h"
#include "schema.h"
#include "util.h"

/* ---- Schemas ----------------------------------------------------------- */

enum {
  PL_NAME,
  PL_BINDING,
  PL_SINK,
  PL_FORMAT,
  PL_COLUMNS,
  PL_COMPRESSION,
  PL_ROLL,
  PL_MAX_BACKLOG,
  PL_MAX_RETRY_DELAY
};
static const schema_choice format_choices[] = {
    {"jsonl", CONFIG_FORMAT_JSONL}, {"csv", CONFIG_FORMAT_CSV}, {NULL, 0}};
static const schema_choice compression_choices[] = {
    {"gzip", CONFIG_COMPRESSION_GZIP},
    {"zstd", CONFIG_COMPRESSION_ZSTD},
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
    [PL_COLUMNS] = {"columns", K_NESTED, 0, false, 0, 0, NULL},
    [PL_COMPRESSION] = {"compression", K_ENUM,
                        offsetof(config_pipeline, compression), false, 0, 0,
                        compression_choices},
    [PL_ROLL] = {"roll", K_NESTED, 0, false, 0, 0, NULL},
    /* At least a record's largest size, so that one record always fits. */
    [PL_MAX_BACKLOG] = {"max_backlog", K_BYTES,
                        offsetof(config_pipeline, max_backlog), false, MiB,
                        1024 * GiB, NULL},
    /* From the first retry's 1 s (pipeline_internal.h). */
    [PL_MAX_RETRY_DELAY] = {"max_retry_delay", K_DURATION,
                            offsetof(config_pipeline, max_retry_delay_ms),
                            false, SECOND_MS, HOUR_MS, NULL},
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

enum {
  S3_ENDPOINT,
  S3_BUCKET,
  S3_PREFIX,
  S3_REGION,
  S3_ACCESS_KEY_ENV,
  S3_SECRET_KEY_ENV,
  S3_PARTITION
};
static const schema_field s3_fields[] = {
    [S3_ENDPOINT] = {"endpoint", K_STRING,
                     offsetof(config_pipeline, s3.endpoint), true, 0, 0, NULL},
    [S3_BUCKET] = {"bucket", K_STRING, offsetof(config_pipeline, s3.bucket),
                   true, 0, 0, NULL},
    [S3_PREFIX] = {"prefix", K_STRING, offsetof(config_pipeline, s3.prefix),
                   false, 0, 0, NULL},
    [S3_REGION] = {"region", K_STRING, offsetof(config_pipeline, s3.region),
                   false, 0, 0, NULL},
    [S3_ACCESS_KEY_ENV] = {"access_key_env", K_STRING,
                           offsetof(config_pipeline, s3.access_key_env), true,
                           0, 0, NULL},
    [S3_SECRET_KEY_ENV] = {"secret_key_env", K_STRING,
                           offsetof(config_pipeline, s3.secret_key_env), true,
                           0, 0, NULL},
    [S3_PARTITION] = {"partition", K_STRING,
                      offsetof(config_pipeline, partition), false, 0, 0, NULL},
};
const schema config_s3_sink_schema =
    SCHEMA("s3 sink", "in sink.s3", -1, s3_fields);

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

/* An endpoint: "http://" or "https://", a host of [A-Za-z0-9.-] or an
 * IPv6 address in brackets, an optional ":port", at most a trailing '/'
 * (the bucket and key follow it).  NULL when it is one, else what is
 * wrong. */
static const char *endpoint_wrong(const char *url) {
  const char *h = !strncmp(url, "http://", 7)    ? url + 7
                  : !strncmp(url, "https://", 8) ? url + 8
                                                 : NULL;
  if (!h)
    return "it does not start with http:// or https://";
  size_t n = *h == '['   ? strspn(h + 1, "0123456789abcdefABCDEF:") + 2
             : *h != ':' ? strspn(h, "abcdefghijklmnopqrstuvwxyz"
                                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-")
                         : 0;
  if (n == 0 || (*h == '[' && h[n - 1] != ']'))
    return "it names no host";
  const char *c = h + n;
  if (*c == ':') {
    size_t digits = strspn(c + 1, "0123456789");
    if (digits == 0 || digits > 5 || atoi(c + 1) == 0 || atoi(c + 1) > 65535)
      return "its port is not 1-65535";
    c += 1 + digits;
  }
  if (*c == '/')
    c++;
  return *c ? "it holds more than a scheme, a host and a port (the bucket "
              "goes in \"bucket\", a key's start in \"prefix\")"
            : NULL;
}

/* A bucket name: 3-63 of a-z 0-9 . -, starting and ending with a letter
 * or digit (path-style URLs take it as it is). */
static int bucket_valid(const char *b) {
  size_t n = strlen(b);
  return n >= 3 && n <= 63 &&
         strspn(b, "abcdefghijklmnopqrstuvwxyz0123456789.-") == n &&
         b[0] != '.' && b[0] != '-' && b[n - 1] != '.' && b[n - 1] != '-';
}

/* A key prefix: the partition's characters (no field), never starting
 * with '/' nor holding "//", so a key needs no escaping in the URL and
 * the signature. */
static int prefix_valid(const char *s) {
  size_t n = strlen(s);
  return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                   "0123456789_.=-/") == n &&
         s[0] != '/' && !strstr(s, "//");
}

/* An environment variable's name: [A-Za-z_][A-Za-z0-9_]*. */
static int env_name_valid(const char *s) {
  return !strchr("0123456789", s[0]) &&
         strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                   "0123456789_") == strlen(s);
}

/* sink.s3's values beyond their types. */
static int check_s3(config_parser *p, config_pipeline *pl, yaml_node_t **v) {
  int rc = 0;
  schema_shown b;
  const char *wrong = pl->s3.endpoint ? endpoint_wrong(pl->s3.endpoint) : NULL;
  if (wrong)
    rc = schema_fail(&p->w, v[S3_ENDPOINT],
                     "\"endpoint\" \"%s\" is not a URL such as "
                     "\"https://s3.example.com\": %s",
                     schema_show(&b, pl->s3.endpoint), wrong);
  if (pl->s3.bucket && !bucket_valid(pl->s3.bucket))
    rc = schema_fail(&p->w, v[S3_BUCKET],
                     "\"bucket\" \"%s\" is not a bucket name: 3-63 "
                     "characters of a-z 0-9 . -, starting and ending with a "
                     "letter or digit",
                     schema_show(&b, pl->s3.bucket));
  if (pl->s3.prefix && !prefix_valid(pl->s3.prefix))
    rc = schema_fail(&p->w, v[S3_PREFIX],
                     "\"prefix\" \"%s\" may hold only A-Z a-z 0-9 _ . = - /, "
                     "not start with '/' nor hold \"//\"",
                     schema_show(&b, pl->s3.prefix));
  /* it goes into libcurl's "aws:amz:REGION:s3" */
  if (pl->s3.region &&
      strspn(pl->s3.region, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
          strlen(pl->s3.region))
    rc = schema_fail(&p->w, v[S3_REGION],
                     "\"region\" \"%s\" may hold only a-z 0-9 -",
                     schema_show(&b, pl->s3.region));
  static const int env_keys[] = {S3_ACCESS_KEY_ENV, S3_SECRET_KEY_ENV};
  char *const envs[] = {pl->s3.access_key_env, pl->s3.secret_key_env};
  for (size_t i = 0; i < 2; i++)
    if (envs[i] && !env_name_valid(envs[i]))
      rc = schema_fail(&p->w, v[env_keys[i]],
                       "\"%s\" \"%s\" is not an environment variable's "
                       "name (it names the variable holding the key, not the "
                       "key)",
                       s3_fields[env_keys[i]].key, schema_show(&b, envs[i]));
  if (!pl->s3.region)
    pl->s3.region = xstrdup("us-east-1");
  return rc;
}

/* sink: exactly one of files and s3. */
static int parse_sink(config_parser *p, yaml_node_t *node, config_pipeline *pl,
                      const yaml_node_t *owner) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS], *fv[SCHEMA_MAX_FIELDS];
  int present = schema_section(&p->w, node, "sink");
  if (present <= 0)
    return present < 0 ? present
                       : schema_fail(&p->w, node ? node : owner,
                                     "\"sink\" needs \"files\" or \"s3\"");
  int rc = schema_mapping(&p->w, node, &config_sink_schema, pl, v, NULL);
  int files = schema_section(&p->w, v[SI_FILES], "files");
  int s3 = schema_section(&p->w, v[SI_S3], "s3");
  if (files < 0 || s3 < 0)
    return DURO_E_CONFIG;
  if (files && s3)
    return schema_fail(&p->w, v[SI_S3],
                       "\"sink\" takes one of \"files\" and \"s3\", not both");
  if (!files && !s3)
    return schema_fail(&p->w, node, "\"sink\" needs \"files\" or \"s3\"");
  int part = files ? FI_PARTITION : S3_PARTITION;
  if (files && schema_mapping(&p->w, v[SI_FILES], &config_files_sink_schema, pl,
                              fv, NULL) < 0)
    rc = DURO_E_CONFIG;
  if (s3 && (schema_mapping(&p->w, v[SI_S3], &config_s3_sink_schema, pl, fv,
                            NULL) < 0 ||
             check_s3(p, pl, fv) < 0))
    rc = DURO_E_CONFIG;
  const char *wrong = pl->partition ? partition_wrong(pl->partition) : NULL;
  if (wrong) {
    schema_shown b;
    rc = schema_fail(&p->w, fv[part],
                     "\"partition\" \"%s\" may not hold %s: it is a relative "
                     "directory such as \"{yyyy}/{mm}/{dd}/{hh}\"",
                     schema_show(&b, pl->partition), wrong);
  }
  return rc;
}

/* columns: a list of keys or JSON pointers, for csv and only for it.
 * `bad`: the fields schema_mapping refused (a refused format is not
 * reported again here). */
static int parse_columns(config_parser *p, yaml_node_t **v, unsigned bad,
                         config_pipeline *pl) {
  size_t n;
  int rc = schema_list(&p->w, v[PL_COLUMNS], "columns", &n);
  if (n > 0)
    pl->columns = xcalloc(n, sizeof *pl->columns);
  pl->n_columns = n; /* a refused entry stays NULL */
  schema_shown b;
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, v[PL_COLUMNS], i);
    char **c = &pl->columns[i];
    if (schema_take_string(&p->w, item, "columns", c) < 0)
      rc = DURO_E_CONFIG;
    else if (**c == '/' && !duro_json_pointer_valid(*c))
      rc = schema_fail(&p->w, item,
                       "\"columns\" entry \"%s\" is not a JSON pointer "
                       "(RFC 6901: \"/a/b\", with ~0 for '~' and ~1 for "
                       "'/'); a column is a top-level key or a pointer",
                       schema_show(&b, *c));
  }
  if (bad & (1u << PL_FORMAT) || rc < 0)
    return rc;
  const char *name = pl->name ? schema_show(&b, pl->name) : "?";
  if (pl->format == CONFIG_FORMAT_CSV && n == 0)
    return schema_fail(&p->w, v[PL_FORMAT],
                       "pipeline \"%s\": \"format: csv\" needs \"columns\", "
                       "the list of each record's keys (or JSON pointers such "
                       "as \"/user/id\") to write",
                       name);
  if (pl->format != CONFIG_FORMAT_CSV && v[PL_COLUMNS] && n > 0)
    return schema_fail(&p->w, v[PL_COLUMNS],
                       "pipeline \"%s\": \"columns\" is for \"format: csv\"; "
                       "a jsonl pipeline writes each record whole",
                       name);
  return 0;
}

static int parse_pipeline(config_parser *p, yaml_node_t *node,
                          config_pipeline *pl) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS], *rv[SCHEMA_MAX_FIELDS];

  pl->format = CONFIG_FORMAT_JSONL;
  pl->compression = CONFIG_COMPRESSION_GZIP;
  pl->roll_size = 100 * 1000 * 1000;
  pl->roll_interval_ms = 300 * SECOND_MS;
  pl->max_backlog = 1000 * 1000 * 1000;
  pl->max_retry_delay_ms = MINUTE_MS;
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
  if (parse_columns(p, v, bad, pl) < 0)
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
