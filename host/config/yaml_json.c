/* yaml_json.c — a YAML value of the config as JSON (yaml_json.h). */
#include "yaml_json.h"

#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define MAX_DEPTH 64

/* A plain (unquoted) scalar: the only kind YAML types. */
static int plain(const yaml_node_t *n) {
  return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ||
         n->data.scalar.style == YAML_ANY_SCALAR_STYLE;
}

static int is_one_of(const char *s, const char *const *names, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(s, names[i]))
      return 1;
  return 0;
}

/* Whether s matches the extended regular expression re, in full. */
static int matches(const char *s, const char *re) {
  regex_t r;
  if (regcomp(&r, re, REG_EXTENDED | REG_NOSUB) != 0)
    return 0;
  int ok = regexec(&r, s, 0, NULL, 0) == 0;
  regfree(&r);
  return ok;
}

/* A string, refused (NULL, said) when it is not UTF-8. */
static json_t *string_json(schema_walk *w, const yaml_node_t *n) {
  json_t *v =
      json_stringn((const char *)n->data.scalar.value, n->data.scalar.length);
  if (!v)
    schema_fail(w, n, "a value that is not UTF-8");
  return v;
}

static json_t *scalar_json(schema_walk *w, const yaml_node_t *n) {
  const char *s = (const char *)n->data.scalar.value;
  size_t len = n->data.scalar.length;
  if (!plain(n) || memchr(s, '\0', len))
    return string_json(w, n);
  static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
  static const char *const trues[] = {"true", "True", "TRUE"};
  static const char *const falses[] = {"false", "False", "FALSE"};
  if (is_one_of(s, nulls, 5))
    return json_null();
  if (is_one_of(s, trues, 3))
    return json_true();
  if (is_one_of(s, falses, 3))
    return json_false();
  if (matches(s, "^[-+]?[0-9]+$")) {
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == 0)
      return json_integer(v);
    /* past 64 bits: a float, as a JSON reader would take it */
  }
  if (matches(s, "^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$")) {
    double d = strtod(s, NULL);
    if (isfinite(d))
      return json_real(d);
  }
  if (matches(s, "^[-+]?\\.(inf|Inf|INF)$|^\\.(nan|NaN|NAN)$")) {
    schema_shown b;
    schema_fail(w, n, "%s has no JSON form (write it quoted for a string)",
                schema_show(&b, s));
    return NULL;
  }
  return string_json(w, n);
}

static json_t *node_json(schema_walk *w, const yaml_node_t *n, int depth) {
  if (depth > MAX_DEPTH) {
    schema_fail(w, n, "nested more than %d deep", MAX_DEPTH);
    return NULL;
  }
  if (n->type == YAML_SCALAR_NODE)
    return scalar_json(w, n);
  if (n->type == YAML_SEQUENCE_NODE) {
    json_t *a = json_array();
    for (yaml_node_item_t *i = n->data.sequence.items.start;
         i < n->data.sequence.items.top; i++) {
      json_t *v = node_json(w, schema_node(w, *i), depth + 1);
      if (!v) {
        json_decref(a);
        return NULL;
      }
      json_array_append_new(a, v);
    }
    return a;
  }
  json_t *o = json_object();
  for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
       p < n->data.mapping.pairs.top; p++) {
    const yaml_node_t *k = schema_node(w, p->key);
    if (k->type != YAML_SCALAR_NODE) {
      schema_fail(w, k, "a key must be a string");
      json_decref(o);
      return NULL;
    }
    json_t *v = node_json(w, schema_node(w, p->value), depth + 1);
    if (!v) {
      json_decref(o);
      return NULL;
    }
    json_object_setn_new(o, (const char *)k->data.scalar.value,
                         k->data.scalar.length, v);
  }
  return o;
}

json_t *config_yaml_json(schema_walk *w, const yaml_node_t *node) {
  return node_json(w, node, 0);
}
