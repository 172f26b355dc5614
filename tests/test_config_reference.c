/* test_config_reference.c — doc/reference/config.md against the config's
 * parser: the keys its schema tables accept (walked by config_keys.h) and
 * the rows of the reference's key tables must be the same set; each row's
 * type must be its field's kind (for a choice, the same choices); a
 * required field must say "required", and any other field's default must
 * be the value the parser gives a config that leaves it out.
 *
 * A key table is one whose header starts "| key | type | default |"; a
 * row's first cell is the key as a code span (`plugins[].concurrency`),
 * its default cell starts with the value as a code span (`30d`, `none`
 * for no value) or the word "required".  The defaults are read from a
 * parse of FIXTURE below, a config holding one entry of every list with
 * only its required keys.  A list of strings (http.allowed_hosts) or a
 * mapping taken whole (a cron's params) has no offset to read: its default
 * is not compared.
 *
 * `test_config_reference --rows` prints a row for every key as the parser
 * has it, for a reference being written. */
#include <check.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_keys.h"
#include "suite_run.h"

#ifndef SOURCE_ROOT
#error "SOURCE_ROOT: the tree the reference is read from (tests/meson.build)"
#endif
#define REFERENCE SOURCE_ROOT "/doc/reference/config.md"

/* One entry of every list, each with its required keys only (and a
 * second pipeline, for the keys of the other sink; a resource needs a
 * concurrency or a rate: its rate's). */
static const char FIXTURE[] = "storage:\n"
                              "  encryption:\n"
                              "    keys:\n"
                              "      - id: k1\n"
                              "        key_env: K1\n"
                              "    active: k1\n"
                              "http:\n"
                              "  keys:\n"
                              "    - name: k\n"
                              "      token_env: K\n"
                              "      scopes: [read]\n"
                              "plugins:\n"
                              "  - name: p\n"
                              "    path: p.so\n"
                              "    workflows:\n"
                              "      - name: wf\n"
                              "        binding: WF\n"
                              "        class_name: Wf\n"
                              "        flow:\n"
                              "          concurrency:\n"
                              "            - limit: 1\n"
                              "        index:\n"
                              "          - name: a\n"
                              "    queues:\n"
                              "      producers:\n"
                              "        - binding: JOBS\n"
                              "          queue: jobs\n"
                              "      consumers:\n"
                              "        - queue: jobs\n"
                              "    triggers:\n"
                              "      crons:\n"
                              "        - schedule: \"0 3 * * *\"\n"
                              "pipelines:\n"
                              "  - name: events\n"
                              "    binding: EVENTS\n"
                              "    sink:\n"
                              "      files:\n"
                              "        path: var/events\n"
                              "  - name: objects\n"
                              "    binding: OBJECTS\n"
                              "    sink:\n"
                              "      s3:\n"
                              "        endpoint: http://127.0.0.1:9000\n"
                              "        bucket: objects\n"
                              "        access_key_env: KEY\n"
                              "        secret_key_env: SECRET\n"
                              "resources:\n"
                              "  - name: payments\n"
                              "    rate:\n"
                              "      limit: 50\n"
                              "      period: 1s\n";

/* ---- What the parser has ----------------------------------------------- */

typedef struct key {
  char path[256];
  const schema_field *field;
  config_key_in in;
  config_key_shape shape;
} key;

typedef struct keys {
  key k[256];
  size_t n;
} keys;

static void collect(const config_key *ck, void *ctx) {
  keys *ks = ctx;
  if (ks->n == sizeof ks->k / sizeof ks->k[0]) {
    fprintf(stderr, "more keys than the test has room for\n");
    abort();
  }
  key *k = &ks->k[ks->n++];
  snprintf(k->path, sizeof k->path, "%s", ck->path);
  k->field = ck->field;
  k->in = ck->in;
  k->shape = ck->shape;
}

static void walk(keys *ks) {
  ks->n = 0;
  config_keys_walk(collect, ks);
}

/* A duration as the config would write it: the largest unit that divides
 * it (duration_parse reads each of them back). */
static void fmt_duration(char *out, size_t len, int64_t ms) {
  static const struct {
    int64_t ms;
    const char *unit;
  } units[] = {{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}};
  if (ms == 0) {
    snprintf(out, len, "0");
    return;
  }
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (ms % units[i].ms == 0) {
      snprintf(out, len, "%" PRId64 "%s", ms / units[i].ms, units[i].unit);
      return;
    }
  snprintf(out, len, "%" PRId64 "ms", ms);
}

/* A ratio in millionths as a fraction: 500000 is 0.5. */
static void fmt_ratio(char *out, size_t len, uint32_t ppm) {
  int n = snprintf(out, len, "%" PRIu32 ".%06" PRIu32, ppm / 1000000,
                   ppm % 1000000);
  while (n > 1 && out[n - 1] == '0')
    out[--n] = '\0';
  if (n > 1 && out[n - 1] == '.')
    out[--n] = '\0';
}

static void fmt_bytes(char *out, size_t len, int64_t b) {
  static const struct {
    int64_t n;
    const char *unit;
  } units[] = {{1LL << 30, "GiB"}, {1LL << 20, "MiB"}, {1LL << 10, "KiB"}};
  for (size_t i = 0; b != 0 && i < sizeof units / sizeof units[0]; i++)
    if (b % units[i].n == 0) {
      snprintf(out, len, "%" PRId64 "%s", b / units[i].n, units[i].unit);
      return;
    }
  snprintf(out, len, "%" PRId64, b);
}

/* The struct a key's offset is into, in the parsed fixture. */
static const char *base_of(const config *cfg, config_key_in in) {
  const config_plugin *pl = &cfg->plugins[0];
  switch (in) {
  case CONFIG_IN_CONFIG:
    return (const char *)cfg;
  case CONFIG_IN_PLUGIN:
    return (const char *)pl;
  case CONFIG_IN_WORKFLOW:
    return (const char *)&pl->workflows[0];
  case CONFIG_IN_PRODUCER:
    return (const char *)&pl->producers[0];
  case CONFIG_IN_CONSUMER:
    return (const char *)&pl->consumers[0];
  case CONFIG_IN_CRON:
    return (const char *)&pl->crons[0];
  case CONFIG_IN_FLOW_RULE:
    return (const char *)&pl->workflows[0].flow[0];
  case CONFIG_IN_ATTR:
    return (const char *)&pl->workflows[0].index[0];
  case CONFIG_IN_PIPELINE:
    return (const char *)&cfg->pipelines[0];
  case CONFIG_IN_S3_PIPELINE:
    return (const char *)&cfg->pipelines[1];
  case CONFIG_IN_RESOURCE:
    return (const char *)&cfg->resources[0];
  case CONFIG_IN_API_KEY:
    return (const char *)&cfg->http.keys[0];
  case CONFIG_IN_ENCRYPTION_KEY:
    return (const char *)&cfg->storage.encryption.keys[0];
  }
  return NULL;
}

/* The value the parser gave key k in cfg, as the reference writes it. */
static void fmt_value(char *out, size_t len, const config *cfg, const key *k) {
  const char *p = base_of(cfg, k->in) + k->field->offset;
  int64_t i64;
  int i;
  uint32_t u32;
  const char *s;
  switch (k->field->kind) {
  case K_STRING:
    memcpy(&s, p, sizeof s);
    snprintf(out, len, "%s", s ? s : "none");
    return;
  case K_BOOL:
    memcpy(&i, p, sizeof i);
    snprintf(out, len, "%s", i ? "true" : "false");
    return;
  case K_U32:
    memcpy(&u32, p, sizeof u32);
    snprintf(out, len, "%" PRIu32, u32);
    return;
  case K_I64:
    memcpy(&i64, p, sizeof i64);
    snprintf(out, len, "%" PRId64, i64);
    return;
  case K_DURATION:
    memcpy(&i64, p, sizeof i64);
    fmt_duration(out, len, i64);
    return;
  case K_BYTES:
    memcpy(&i64, p, sizeof i64);
    fmt_bytes(out, len, i64);
    return;
  case K_RATIO:
  case K_DECIMAL:
    memcpy(&u32, p, sizeof u32);
    fmt_ratio(out, len, u32);
    return;
  case K_ENUM:
    memcpy(&i, p, sizeof i);
    for (const schema_choice *c = k->field->choices; c && c->name; c++)
      if (c->value == i) {
        snprintf(out, len, "%s", c->name);
        return;
      }
    snprintf(out, len, "(no choice has value %d)", i);
    return;
  case K_NESTED:
    break;
  }
  snprintf(out, len, "(nested)");
}

/* The type cell's first words for a key. */
static const char *type_word(const key *k) {
  if (k->shape == CONFIG_KEY_LIST)
    return "list of strings";
  if (k->shape == CONFIG_KEY_MAPPING)
    return "mapping";
  switch (k->field->kind) {
  case K_STRING:
    return "string";
  case K_BOOL:
    return "boolean";
  case K_U32:
  case K_I64:
    return "integer";
  case K_DURATION:
    return "duration";
  case K_BYTES:
    return "size";
  case K_RATIO:
    return "ratio";
  case K_DECIMAL:
    return "number";
  case K_ENUM:
    return "one of";
  case K_NESTED:
    break;
  }
  return "(nested)";
}

static void fmt_bound(char *out, size_t len, const key *k, int64_t v) {
  if (k->field->kind == K_DURATION)
    fmt_duration(out, len, v);
  else if (k->field->kind == K_BYTES)
    fmt_bytes(out, len, v);
  else if (k->field->kind == K_RATIO || k->field->kind == K_DECIMAL)
    fmt_ratio(out, len, (uint32_t)v);
  else
    snprintf(out, len, "%" PRId64, v);
}

static config *parse_fixture(char *err, size_t len) {
  return config_parse("fixture.yaml", FIXTURE, strlen(FIXTURE), err, len);
}

static config *fixture(void) {
  char err[4096];
  config *cfg = parse_fixture(err, sizeof err);
  ck_assert_msg(cfg != NULL, "the fixture does not parse: %s", err);
  return cfg;
}

/* ---- What the reference says ------------------------------------------- */

typedef struct row {
  char key[256];
  char type[512];
  char deflt[512];
  int line;
  bool matched;
} row;

typedef struct rows {
  row r[256];
  size_t n;
} rows;

/* Cell i (0-based) of a table row, trimmed, into out. */
static bool cell(const char *line, int i, char *out, size_t len) {
  const char *p = line;
  for (int c = 0; c <= i; c++) {
    p = strchr(p, '|');
    if (!p)
      return false;
    p++;
  }
  const char *end = strchr(p, '|');
  if (!end)
    return false;
  while (p < end && *p == ' ')
    p++;
  while (end > p && end[-1] == ' ')
    end--;
  snprintf(out, len, "%.*s", (int)(end - p), p);
  return true;
}

/* The first code span of s into out; false when it has none. */
static bool code_span(const char *s, char *out, size_t len) {
  const char *a = strchr(s, '`');
  const char *b = a ? strchr(a + 1, '`') : NULL;
  if (!b)
    return false;
  snprintf(out, len, "%.*s", (int)(b - a - 1), a + 1);
  return true;
}

static void read_reference(rows *rs) {
  FILE *f = fopen(REFERENCE, "re");
  ck_assert_msg(f != NULL, "cannot open %s", REFERENCE);
  char line[8192];
  bool in_table = false;
  int n = 0;
  rs->n = 0;
  while (fgets(line, sizeof line, f)) {
    n++;
    if (strncmp(line, "| key | type | default |", 24) == 0) {
      in_table = true;
      continue;
    }
    if (line[0] != '|') {
      in_table = false;
      continue;
    }
    if (!in_table || strncmp(line, "|---", 4) == 0)
      continue;
    ck_assert_uint_lt(rs->n, sizeof rs->r / sizeof rs->r[0]);
    row *r = &rs->r[rs->n++];
    memset(r, 0, sizeof *r);
    r->line = n;
    char first[512];
    ck_assert_msg(cell(line, 0, first, sizeof first) &&
                      code_span(first, r->key, sizeof r->key),
                  "%s:%d: a key row without its key as a code span", REFERENCE,
                  n);
    ck_assert_msg(cell(line, 1, r->type, sizeof r->type) &&
                      cell(line, 2, r->deflt, sizeof r->deflt),
                  "%s:%d: a key row without type and default cells", REFERENCE,
                  n);
  }
  fclose(f);
  ck_assert_msg(rs->n > 0, "%s holds no key table", REFERENCE);
}

static row *find_row(rows *rs, const char *path) {
  for (size_t i = 0; i < rs->n; i++)
    if (strcmp(rs->r[i].key, path) == 0)
      return &rs->r[i];
  return NULL;
}

/* Whether cell holds exactly the field's choices as code spans. */
static bool same_choices(const char *cellv, const schema_field *f) {
  size_t listed = 0;
  const char *p = cellv;
  char span[128];
  while (code_span(p, span, sizeof span)) {
    bool known = false;
    for (const schema_choice *c = f->choices; c && c->name; c++)
      known |= strcmp(c->name, span) == 0;
    if (!known)
      return false;
    listed++;
    p = strchr(strchr(p, '`') + 1, '`') + 1;
  }
  size_t n = 0;
  for (const schema_choice *c = f->choices; c && c->name; c++)
    n++;
  return listed == n;
}

/* ---- The cases --------------------------------------------------------- */

START_TEST(test_every_key_listed) {
  keys ks;
  rows rs;
  walk(&ks);
  read_reference(&rs);
  config *cfg = fixture();
  int missing = 0;
  for (size_t i = 0; i < ks.n; i++) {
    const key *k = &ks.k[i];
    ck_assert_msg(k->shape != CONFIG_KEY_UNKNOWN,
                  "%s holds a mapping or list that config_keys.c's table "
                  "of nested sections does not name",
                  k->path);
    if (find_row(&rs, k->path))
      continue;
    char v[256] = "";
    if (k->shape == CONFIG_KEY_SCALAR)
      fmt_value(v, sizeof v, cfg, k);
    fprintf(stderr, "%s: no row for `%s` (%s, default %s)\n", REFERENCE,
            k->path, type_word(k), k->field->required ? "required" : v);
    missing++;
  }
  config_free(cfg);
  ck_assert_msg(missing == 0,
                "%d key(s) the parser accepts are missing from %s (listed "
                "above)",
                missing, REFERENCE);
}
END_TEST

START_TEST(test_every_row_accepted) {
  keys ks;
  rows rs;
  walk(&ks);
  read_reference(&rs);
  int unknown = 0;
  for (size_t i = 0; i < rs.n; i++) {
    bool found = false;
    for (size_t j = 0; j < ks.n && !found; j++)
      found = strcmp(ks.k[j].path, rs.r[i].key) == 0;
    if (!found) {
      fprintf(stderr, "%s:%d: `%s` is not a key the parser accepts\n",
              REFERENCE, rs.r[i].line, rs.r[i].key);
      unknown++;
    }
  }
  for (size_t i = 0; i < rs.n; i++)
    for (size_t j = i + 1; j < rs.n; j++)
      ck_assert_msg(strcmp(rs.r[i].key, rs.r[j].key) != 0,
                    "%s:%d: `%s` is listed twice", REFERENCE, rs.r[j].line,
                    rs.r[j].key);
  ck_assert_msg(unknown == 0, "%d row(s) of %s name keys the parser refuses",
                unknown, REFERENCE);
}
END_TEST

START_TEST(test_types_and_defaults) {
  keys ks;
  rows rs;
  walk(&ks);
  read_reference(&rs);
  config *cfg = fixture();
  int wrong = 0;
  for (size_t i = 0; i < ks.n; i++) {
    const key *k = &ks.k[i];
    row *r = find_row(&rs, k->path);
    if (!r || k->shape == CONFIG_KEY_UNKNOWN)
      continue; /* the cases above report them */
    const char *want = type_word(k);
    if (strncmp(r->type, want, strlen(want)) != 0 ||
        (k->field->kind == K_ENUM && !same_choices(r->type, k->field))) {
      fprintf(stderr, "%s:%d: `%s`: type \"%s\", the parser's is %s%s\n",
              REFERENCE, r->line, k->path, r->type, want,
              k->field->kind == K_ENUM ? " (with its choices)" : "");
      wrong++;
    }
    if (k->field->required) {
      if (strncmp(r->deflt, "required", 8) != 0) {
        fprintf(stderr, "%s:%d: `%s` is required, not \"%s\"\n", REFERENCE,
                r->line, k->path, r->deflt);
        wrong++;
      }
      continue;
    }
    if (k->shape != CONFIG_KEY_SCALAR)
      continue; /* taken whole: nothing to read at an offset */
    char have[256], said[256];
    fmt_value(have, sizeof have, cfg, k);
    if (!code_span(r->deflt, said, sizeof said) || r->deflt[0] != '`' ||
        strcmp(said, have) != 0) {
      fprintf(stderr, "%s:%d: `%s`: default \"%s\", the parser's is `%s`\n",
              REFERENCE, r->line, k->path, r->deflt, have);
      wrong++;
    }
  }
  config_free(cfg);
  ck_assert_msg(wrong == 0, "%d type(s) or default(s) of %s are wrong", wrong,
                REFERENCE);
}
END_TEST

/* The walk itself: the keys every section of config.h is known to hold,
 * so that a table the walk missed does not pass as a smaller reference. */
START_TEST(test_walk_reaches_every_section) {
  keys ks;
  walk(&ks);
  static const char *const some[] = {
      "storage.path",
      "http.allowed_hosts",
      "engine.threads",
      "engine.workers",
      "plugins[].concurrency",
      "plugins[].crash_storm.window",
      "plugins[].limits.memory",
      "plugins[].workflows[].limits.steps",
      "plugins[].queues.producers[].queue",
      "plugins[].queues.consumers[].max_batch_size",
      "plugins[].triggers.crons[].overlap",
      "pipelines[].sink.files.partition",
      "pipelines[].sink.s3.bucket",
      "pipelines[].roll.interval",
      "resources[].rate.burst",
  };
  for (size_t i = 0; i < sizeof some / sizeof some[0]; i++) {
    bool found = false;
    for (size_t j = 0; j < ks.n && !found; j++)
      found = strcmp(ks.k[j].path, some[i]) == 0;
    ck_assert_msg(found, "the walk of the schema tables misses %s", some[i]);
  }
}
END_TEST

/* ---- --rows ------------------------------------------------------------ */

static int print_rows(void) {
  keys ks;
  char err[4096];
  walk(&ks);
  config *cfg = parse_fixture(err, sizeof err);
  if (!cfg) {
    fprintf(stderr, "the fixture does not parse: %s\n", err);
    return 1;
  }
  for (size_t i = 0; i < ks.n; i++) {
    const key *k = &ks.k[i];
    char v[256] = "", lo[64], hi[64], bounds[200] = "";
    if (k->shape == CONFIG_KEY_SCALAR)
      fmt_value(v, sizeof v, cfg, k);
    if (k->field->kind == K_U32 || k->field->kind == K_I64 ||
        k->field->kind == K_DURATION || k->field->kind == K_BYTES ||
        k->field->kind == K_RATIO || k->field->kind == K_DECIMAL) {
      fmt_bound(lo, sizeof lo, k, k->field->min);
      fmt_bound(hi, sizeof hi, k, k->field->max);
      snprintf(bounds, sizeof bounds, "`%s`–`%s`", lo, hi);
    }
    char type[256];
    snprintf(type, sizeof type, "%s", type_word(k));
    for (const schema_choice *c = k->field->choices;
         k->field->kind == K_ENUM && c && c->name; c++) {
      size_t l = strlen(type);
      snprintf(type + l, sizeof type - l, "%s`%s`",
               c == k->field->choices ? " " : ", ", c->name);
    }
    printf("| `%s` | %s | %s%s%s | %s | | |\n", k->path, type,
           k->field->required ? "required" : "`", k->field->required ? "" : v,
           k->field->required ? "" : "`", bounds);
  }
  config_free(cfg);
  return 0;
}

static Suite *reference_suite(void) {
  Suite *s = suite_create("config_reference");
  TCase *tc = tcase_create("reference");
  tcase_add_test(tc, test_walk_reaches_every_section);
  tcase_add_test(tc, test_every_key_listed);
  tcase_add_test(tc, test_every_row_accepted);
  tcase_add_test(tc, test_types_and_defaults);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--rows") == 0)
    return print_rows();
  return suite_run(reference_suite());
}
