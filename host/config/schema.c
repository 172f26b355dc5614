/* schema.c — the walk of a YAML mapping against a table of fields (see
 * schema.h): each value typed by its field, unknown and repeated keys,
 * missing fields, and every error recorded with its position, the walk
 * going on past it. */
#include "schema.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "duro.h"
#include "suggest.h"
#include "util.h"

/* ---- Errors ------------------------------------------------------------ */

config_pos schema_pos(const yaml_node_t *node) {
  return (config_pos){.line = (int)node->start_mark.line + 1,
                      .column = (int)node->start_mark.column + 1};
}

/* Records one error and goes on: every walker skips what was refused and
 * walks the rest, so one pass finds every error it can. */
static int failv(schema_walk *w, config_pos pos, const char *fmt, va_list ap) {
  char *what = xvasprintf(fmt, ap);
  errlist_add(w->errs, pos.line, pos.column,
              xasprintf("%s:%d:%d: %s", w->file, pos.line, pos.column, what));
  free(what);
  return DURO_E_CONFIG;
}

int schema_fail(schema_walk *w, const yaml_node_t *node, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = failv(w, schema_pos(node), fmt, ap);
  va_end(ap);
  return rc;
}

int schema_fail_at(schema_walk *w, config_pos pos, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = failv(w, pos, fmt, ap);
  va_end(ap);
  return rc;
}

/* ---- Messages ---------------------------------------------------------- */

const char *schema_show_n(schema_shown *b, const char *s, size_t len) {
  size_t o = 0;
  size_t n = len;
  if (n > SCHEMA_SHOW_MAX) {
    n = SCHEMA_SHOW_MAX;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
      n--; /* do not split a UTF-8 sequence */
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      b->s[o++] = '\\';
      b->s[o++] = (char)c;
    } else if (c < 0x20 || c == 0x7f) {
      o += (size_t)snprintf(b->s + o, sizeof b->s - o, "\\x%02x", c);
    } else {
      b->s[o++] = (char)c;
    }
  }
  if (n < len) {
    memcpy(b->s + o, "...", 3);
    o += 3;
  }
  b->s[o] = '\0';
  return b->s;
}

const char *schema_show(schema_shown *b, const char *s) {
  return schema_show_n(b, s, strlen(s));
}

/* ---- Scalars ----------------------------------------------------------- */

const char *schema_scalar(const yaml_node_t *n) {
  return (const char *)n->data.scalar.value;
}

static bool is_plain(const yaml_node_t *n) {
  return n->type == YAML_SCALAR_NODE &&
         n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* YAML 1.2 core schema nulls; a quoted "null" is a string. */
bool schema_is_null(const yaml_node_t *n) {
  static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
  if (!is_plain(n))
    return false;
  for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
    if (strcmp(schema_scalar(n), nulls[i]) == 0)
      return true;
  return false;
}

/* Decimal integer with an optional minus sign and nothing else.  Returns 0,
 * 1 when it is an integer too large for int64_t (so out of any range), or
 * -1 when it is not an integer at all. */
static int parse_integer(const char *s, size_t len, int64_t *out) {
  size_t i = 0;
  bool neg = false;
  if (i < len && s[i] == '-') {
    neg = true;
    i++;
  }
  if (i == len)
    return -1;
  int64_t v = 0;
  bool overflow = false;
  for (; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    int d = s[i] - '0';
    if (__builtin_mul_overflow(v, 10, &v) ||
        __builtin_sub_overflow(v, d, &v)) /* negative holds INT64_MIN */
      overflow = true;
  }
  if (overflow)
    return 1;
  if (!neg) {
    if (v == INT64_MIN)
      return 1;
    v = -v;
  }
  *out = v;
  return 0;
}

/* "1 minute", "12 hours": a limit in the largest unit that states it
 * exactly, in words a user can paste back into the file. */
static const char *format_ms(char *buf, size_t size, int64_t ms) {
  static const struct {
    int64_t ms;
    const char *unit;
  } u[] = {{7 * DAY_MS, "week"},  {DAY_MS, "day"},
           {HOUR_MS, "hour"},     {60 * SECOND_MS, "minute"},
           {SECOND_MS, "second"}, {1, "millisecond"}};
  for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
    if (ms % u[i].ms == 0 && (ms != 0 || u[i].ms == 1)) {
      long long n = (long long)(ms / u[i].ms);
      snprintf(buf, size, "%lld %s%s", n, u[i].unit, n == 1 ? "" : "s");
      break;
    }
  }
  return buf;
}

/* ---- Walking ----------------------------------------------------------- */

yaml_node_t *schema_node(schema_walk *w, int index) {
  return yaml_document_get_node(w->doc, index);
}

/* Copies a non-empty string scalar into *out, replacing a default. */
int schema_take_string(schema_walk *w, const yaml_node_t *v, const char *key,
                       char **out) {
  if (v->type != YAML_SCALAR_NODE || schema_is_null(v) ||
      v->data.scalar.length == 0)
    return schema_fail(w, v, "\"%s\" must be a non-empty string", key);
  /* A "\0" escape would silently cut the string short in C. */
  if (memchr(v->data.scalar.value, '\0', v->data.scalar.length))
    return schema_fail(w, v, "\"%s\" must not contain a NUL character", key);
  free(*out); /* a default the file overrides */
  *out = xstrndup(schema_scalar(v), v->data.scalar.length);
  return 0;
}

/* "256MiB", "1 GiB", "4096": bytes into *out; -1 when it is no size,
 * 1 when it is one past INT64_MAX. */
static int parse_bytes(const char *s, int64_t *out) {
  static const struct {
    const char *unit;
    int64_t mult;
  } units[] = {{"", 1},          {"B", 1},          {"KiB", 1024},
               {"MiB", 1 << 20}, {"GiB", 1 << 30},  {"KB", 1000},
               {"MB", 1000000},  {"GB", 1000000000}};
  const char *p = s;
  int64_t n = 0;
  if (*p < '0' || *p > '9')
    return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (n > (INT64_MAX - (*p - '0')) / 10)
      return 1;
    n = n * 10 + (*p - '0');
  }
  if (*p == ' ')
    p++;
  for (size_t i = 0; i < sizeof units / sizeof *units; i++)
    if (!strcmp(p, units[i].unit)) {
      if (n > INT64_MAX / units[i].mult)
        return 1;
      *out = n * units[i].mult;
      return 0;
    }
  return -1;
}

/* "0.5", "1", "50%", "0.2%": millionths into *out (rounded); -1 when
 * it is no ratio, 1 when it is one past a million millionths. */
/* A decimal number, with a percent sign when `percent` allows it, in
 * millionths into *out: 0, -1 when it is not one, 1 when it is over
 * `cap` millionths. */
static int parse_millionths(const char *s, int percent_ok, int64_t cap,
                            int64_t *out) {
  int64_t whole = 0, frac = 0, scale = 1;
  const char *p = s;
  if (*p < '0' || *p > '9')
    return -1;
  for (; *p >= '0' && *p <= '9'; p++)
    if ((whole = whole * 10 + (*p - '0')) > cap)
      return 1;
  if (*p == '.') {
    if (p[1] < '0' || p[1] > '9')
      return -1;
    for (p++; *p >= '0' && *p <= '9'; p++)
      if (scale < 100000000) { /* digits past 1e-8 change nothing */
        frac = frac * 10 + (*p - '0');
        scale *= 10;
      }
  }
  int percent = percent_ok && *p == '%';
  if (*(p + percent))
    return -1;
  int64_t per = percent ? 10000 : 1000000; /* millionths per unit */
  int64_t v = whole * per + (frac * per + scale / 2) / scale;
  if (v > cap)
    return 1;
  *out = v;
  return 0;
}

static int parse_ratio(const char *s, int64_t *out) {
  return parse_millionths(s, 1, 1000000, out);
}

static int take_value(schema_walk *w, const schema_field *f,
                      const yaml_node_t *v, void *base) {
  char *slot = (char *)base + f->offset;
  char limit[32];
  schema_shown b;

  switch (f->kind) {
  case K_STRING:
    return schema_take_string(w, v, f->key, (char **)(void *)slot);

  case K_BOOL:
    if (is_plain(v) && strcmp(schema_scalar(v), "true") == 0)
      *(int *)(void *)slot = 1;
    else if (is_plain(v) && strcmp(schema_scalar(v), "false") == 0)
      *(int *)(void *)slot = 0;
    else
      return schema_fail(w, v, "\"%s\" must be true or false", f->key);
    return 0;

  case K_U32:
  case K_I64: {
    int64_t n = 0;
    int rc = is_plain(v) && !schema_is_null(v)
                 ? parse_integer(schema_scalar(v), v->data.scalar.length, &n)
                 : -1;
    if (rc < 0)
      return schema_fail(w, v, "\"%s\" must be an integer", f->key);
    if (rc > 0 || n < f->min || n > f->max)
      return schema_fail(w, v, "\"%s\" must be between %lld and %lld", f->key,
                         (long long)f->min, (long long)f->max);
    if (f->kind == K_U32)
      *(uint32_t *)(void *)slot = (uint32_t)n;
    else
      *(int64_t *)(void *)slot = n;
    return 0;
  }

  case K_BYTES: {
    int64_t n = 0;
    int rc = v->type == YAML_SCALAR_NODE && !schema_is_null(v) &&
                     !memchr(v->data.scalar.value, '\0', v->data.scalar.length)
                 ? parse_bytes(schema_scalar(v), &n)
                 : -1;
    if (rc < 0)
      return schema_fail(w, v, "\"%s\" must be a size such as \"256MiB\"",
                         f->key);
    if (rc > 0 || n < f->min || n > f->max)
      return schema_fail(w, v, "\"%s\" must be between %lld and %lld bytes",
                         f->key, (long long)f->min, (long long)f->max);
    *(int64_t *)(void *)slot = n;
    return 0;
  }

  case K_RATIO: {
    int64_t n = 0;
    int rc = v->type == YAML_SCALAR_NODE && !schema_is_null(v) &&
                     !memchr(v->data.scalar.value, '\0', v->data.scalar.length)
                 ? parse_ratio(schema_scalar(v), &n)
                 : -1;
    if (rc < 0)
      return schema_fail(w, v,
                         "\"%s\" must be a fraction such as 0.5 or a "
                         "percentage such as \"50%%\"",
                         f->key);
    if (rc > 0 || n < f->min || n > f->max)
      return schema_fail(w, v, "\"%s\" must be between %g and %g", f->key,
                         (double)f->min / 1e6, (double)f->max / 1e6);
    *(uint32_t *)(void *)slot = (uint32_t)n;
    return 0;
  }

  case K_DECIMAL: {
    int64_t n = 0;
    int rc = v->type == YAML_SCALAR_NODE && !schema_is_null(v) &&
                     !memchr(v->data.scalar.value, '\0', v->data.scalar.length)
                 ? parse_millionths(schema_scalar(v), 0, UINT32_MAX, &n)
                 : -1;
    if (rc < 0)
      return schema_fail(w, v, "\"%s\" must be a number such as 1.5", f->key);
    if (rc > 0 || n < f->min || n > f->max)
      return schema_fail(w, v, "\"%s\" must be between %g and %g", f->key,
                         (double)f->min / 1e6, (double)f->max / 1e6);
    *(uint32_t *)(void *)slot = (uint32_t)n;
    return 0;
  }

  case K_DURATION: {
    int64_t ms = 0;
    int too_long = 0;
    if (v->type != YAML_SCALAR_NODE)
      return schema_fail(w, v, "\"%s\" must be a duration such as \"30s\"",
                         f->key);
    if (memchr(v->data.scalar.value, '\0', v->data.scalar.length) ||
        duration_parse_detail(schema_scalar(v), &ms, &too_long) < 0) {
      if (too_long) /* past the parser's limit, so past the field's too */
        return schema_fail(w, v, "\"%s\" must be at most %s", f->key,
                           format_ms(limit, sizeof limit, f->max));
      return schema_fail(
          w, v, "\"%s\" is not a valid duration: \"%s\"", f->key,
          schema_show_n(&b, schema_scalar(v), v->data.scalar.length));
    }
    if (ms < f->min) {
      char least[64];
      return schema_fail(w, v, "\"%s\" must be at least %s", f->key,
                         format_ms(least, sizeof least, f->min));
    }
    if (ms > f->max)
      return schema_fail(w, v, "\"%s\" must be at most %s", f->key,
                         format_ms(limit, sizeof limit, f->max));
    *(int64_t *)(void *)slot = ms;
    return 0;
  }

  case K_ENUM: {
    if (v->type == YAML_SCALAR_NODE) {
      for (const schema_choice *c = f->choices; c->name; c++) {
        if (strlen(c->name) == v->data.scalar.length &&
            memcmp(schema_scalar(v), c->name, v->data.scalar.length) == 0) {
          *(int *)(void *)slot = c->value;
          return 0;
        }
      }
    }
    /* "full" or "normal"; "a", "b" or "c". */
    char list[128] = "";
    size_t o = 0;
    for (const schema_choice *c = f->choices; c->name && o < sizeof list; c++) {
      const char *sep = c == f->choices ? "" : c[1].name ? ", " : " or ";
      o +=
          (size_t)snprintf(list + o, sizeof list - o, "%s\"%s\"", sep, c->name);
    }
    return schema_fail(w, v, "\"%s\" must be %s", f->key, list);
  }

  case K_NESTED:
    return 0; /* the caller walks it */
  }
  return 0;
}

/* An unknown key, with the schema's nearest key when one is close: a
 * typo is the likeliest reason for a key to be unknown.  Returns the index
 * of that nearest field, or -1. */
static int unknown_key(schema_walk *w, const yaml_node_t *k, const schema *s) {
  const char *keys[SCHEMA_MAX_FIELDS];
  schema_shown b;
  for (size_t i = 0; i < s->n_fields; i++)
    keys[i] = s->fields[i].key;
  const char *key = schema_scalar(k);
  size_t len = k->data.scalar.length;
  const char *near = suggest_nearest(key, len, keys, s->n_fields);
  if (!near) {
    schema_fail(w, k, "unknown key \"%s\" %s", schema_show_n(&b, key, len),
                s->where);
    return -1;
  }
  schema_fail(w, k, "unknown key \"%s\" %s — did you mean \"%s\"?",
              schema_show_n(&b, key, len), s->where, near);
  for (size_t i = 0; i < s->n_fields; i++)
    if (keys[i] == near)
      return (int)i;
  return -1;
}

/* The field of `s` that key node k names, or s->n_fields. */
static size_t field_index(const schema *s, const yaml_node_t *k) {
  const char *key = schema_scalar(k);
  size_t key_len = k->data.scalar.length;
  size_t i = 0;
  while (i < s->n_fields && !(strlen(s->fields[i].key) == key_len &&
                              memcmp(s->fields[i].key, key, key_len) == 0))
    i++;
  return i;
}

/* The required fields the mapping lacks, naming the entry by its label
 * field; `given` has a bit for each field the mapping gave (or that an
 * unknown key most likely misspelt, which is the error to report). */
static int check_required(schema_walk *w, yaml_node_t *node, const schema *s,
                          void *base, unsigned given) {
  schema_shown b;
  int rc = 0;
  for (size_t i = 0; i < s->n_fields; i++) {
    if (!s->fields[i].required || (given & (1u << i)))
      continue;
    const char *label =
        s->label >= 0
            ? *(char **)(void *)((char *)base + s->fields[s->label].offset)
            : NULL;
    if (label)
      rc = schema_fail(w, node, "%s \"%s\" is missing \"%s\"", s->noun,
                       schema_show(&b, label), s->fields[i].key);
    else
      rc = schema_fail(w, node, "%s is missing \"%s\"", s->noun,
                       s->fields[i].key);
  }
  return rc;
}

/* Walks one mapping against its schema: refuses keys that are not strings,
 * unknown keys and repeated keys, stores every scalar field into `base`,
 * leaves each field's value node in vals[field index] (NULL when absent),
 * then checks the required fields.  A refused value leaves its field at
 * its default and its vals slot NULL, as if absent, and sets the field's
 * bit in *bad (when bad is not NULL); a repeated key keeps the first
 * value.  Returns DURO_E_CONFIG when anything in the mapping was refused,
 * having walked all of it. */
int schema_value(schema_walk *w, const schema_field *f, const yaml_node_t *v,
                 void *base) {
  return take_value(w, f, v, base);
}

int schema_mapping(schema_walk *w, yaml_node_t *node, const schema *s,
                   void *base, yaml_node_t **vals, unsigned *bad) {
  unsigned given = 0, refused = 0;
  int rc = 0;

  assert(s->n_fields <= SCHEMA_MAX_FIELDS);
  for (size_t i = 0; i < s->n_fields; i++)
    vals[i] = NULL;

  for (yaml_node_pair_t *pair = node->data.mapping.pairs.start;
       pair < node->data.mapping.pairs.top; pair++) {
    yaml_node_t *k = schema_node(w, pair->key);
    yaml_node_t *v = schema_node(w, pair->value);
    if (k->type != YAML_SCALAR_NODE) {
      rc = schema_fail(w, k, "keys must be strings %s", s->where);
      refused |= SCHEMA_BAD_UNKNOWN;
      continue;
    }
    size_t i = field_index(s, k);
    if (i == s->n_fields) {
      int near = unknown_key(w, k, s);
      refused |= SCHEMA_BAD_UNKNOWN;
      if (near >= 0)
        given |= 1u << near;
      rc = DURO_E_CONFIG;
      continue;
    }
    if (vals[i] || (refused & (1u << i))) {
      rc = schema_fail(w, k, "duplicate key \"%s\" %s", s->fields[i].key,
                       s->where);
      continue;
    }
    given |= 1u << i;
    if (take_value(w, &s->fields[i], v, base) < 0) {
      refused |= 1u << i;
      rc = DURO_E_CONFIG;
      continue;
    }
    vals[i] = v;
  }

  if (check_required(w, node, s, base, given) < 0)
    rc = DURO_E_CONFIG;
  if (bad)
    *bad = refused;
  return rc;
}

/* A section's value: 1 when it is a mapping to walk, 0 when it is null
 * (the same as absent), or an error. */
int schema_section(schema_walk *w, const yaml_node_t *v, const char *key) {
  if (!v || schema_is_null(v))
    return 0;
  if (v->type != YAML_MAPPING_NODE)
    return schema_fail(w, v, "\"%s\" must be a mapping", key);
  return 1;
}

/* A list's value: its item count (0 for null or absent), or an error. */
int schema_list(schema_walk *w, const yaml_node_t *v, const char *key,
                size_t *n_out) {
  *n_out = 0;
  if (!v || schema_is_null(v))
    return 0;
  if (v->type != YAML_SEQUENCE_NODE)
    return schema_fail(w, v, "\"%s\" must be a list", key);
  *n_out = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
  return 0;
}

yaml_node_t *schema_item(schema_walk *w, const yaml_node_t *list, size_t i) {
  return schema_node(w, list->data.sequence.items.start[i]);
}

int schema_entry(schema_walk *w, const yaml_node_t *item, const char *key) {
  if (item->type != YAML_MAPPING_NODE)
    return schema_fail(w, item, "each entry of \"%s\" must be a mapping", key);
  return 0;
}
