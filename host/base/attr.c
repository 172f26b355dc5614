/* attr.c — search attributes' names, types and values, and the syntax of
 * the list's `where` (attr.h). */
#include "attr.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int duro_attr_name_valid(const char *name) {
  size_t n = name ? strlen(name) : 0;
  if (n == 0 || n > DURO_ATTR_NAME_MAX || isdigit((unsigned char)name[0]))
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)name[i]) && name[i] != '_')
      return 0;
  return 1;
}

const char *duro_attr_type_name(duro_attr_type t) {
  return t == DURO_ATTR_NUMBER ? "number" : "string";
}

int duro_attr_type_parse(const char *name) {
  if (name && !strcmp(name, "string"))
    return DURO_ATTR_STRING;
  if (name && !strcmp(name, "number"))
    return DURO_ATTR_NUMBER;
  return -1;
}

const duro_attr_decl *duro_attr_decl_find(const duro_attr_decl *decls, size_t n,
                                          const char *name) {
  for (size_t i = 0; name && i < n; i++)
    if (!strcmp(decls[i].name, name))
      return &decls[i];
  return NULL;
}

int duro_attr_from_json(const json_t *v, duro_attr_type type, duro_attr *out) {
  if (type == DURO_ATTR_STRING) {
    if (!json_is_string(v) || json_string_length(v) > DURO_ATTR_STR_MAX ||
        strlen(json_string_value(v)) != json_string_length(v))
      return -1;
    out->str = xstrdup(json_string_value(v));
    out->num = 0;
    return 0;
  }
  if (!json_is_number(v) || !isfinite(json_number_value(v)))
    return -1;
  out->str = NULL;
  out->num = json_number_value(v);
  return 0;
}

/* A number as the whole of `s`: 0, or -1. */
static int parse_number(const char *s, double *out) {
  char *end;
  if (!*s || isspace((unsigned char)*s))
    return -1;
  double d = strtod(s, &end);
  if (*end || !isfinite(d))
    return -1;
  *out = d;
  return 0;
}

int duro_attr_where_parse(const char *text, const duro_attr_decl *decls,
                          size_t n, duro_attr_filter *out, char *err,
                          size_t errlen) {
  *out = (duro_attr_filter){0};
  size_t len = strcspn(text, ":<>");
  if (!text[len]) {
    snprintf(err, errlen,
             "\"%.80s\" is not name:value (or, for a number, name>value, "
             "name>=value, name<value, name<=value)",
             text);
    return -1;
  }
  char name[DURO_ATTR_NAME_MAX + 1];
  const duro_attr_decl *d = NULL;
  if (len <= DURO_ATTR_NAME_MAX) {
    memcpy(name, text, len);
    name[len] = 0;
    d = duro_attr_decl_find(decls, n, name);
  }
  if (!d) {
    snprintf(err, errlen,
             "\"%.*s\" is not an attribute of this workflow (its index: "
             "names them)",
             (int)(len < 80 ? len : 80), text);
    return -1;
  }
  const char *v = text + len;
  duro_attr_op op = DURO_ATTR_EQ;
  if (*v == ':')
    v++;
  else if (v[0] == '<' && v[1] == '=')
    op = DURO_ATTR_LE, v += 2;
  else if (v[0] == '>' && v[1] == '=')
    op = DURO_ATTR_GE, v += 2;
  else
    op = *v == '<' ? DURO_ATTR_LT : DURO_ATTR_GT, v++;
  if (d->type == DURO_ATTR_STRING) {
    if (op != DURO_ATTR_EQ) {
      snprintf(err, errlen,
               "\"%s\" is a string attribute: it takes %s:value, not a "
               "comparison",
               name, name);
      return -1;
    }
    if (strlen(v) > DURO_ATTR_STR_MAX) {
      snprintf(err, errlen, "the value of \"%s\" is over %d bytes", name,
               DURO_ATTR_STR_MAX);
      return -1;
    }
    out->str = xstrdup(v);
  } else if (parse_number(v, &out->num) < 0) {
    snprintf(err, errlen,
             "\"%s\" is a number attribute, and \"%.80s\" is not "
             "a number",
             name, v);
    return -1;
  }
  out->name = xstrdup(name);
  out->op = op;
  return 0;
}

void duro_attr_filter_clear(duro_attr_filter *f) {
  free(f->name);
  free(f->str);
  *f = (duro_attr_filter){0};
}

int duro_attr_passes(const duro_attr_filter *f, const duro_attr *v) {
  if (strcmp(f->name, v->name) || !f->str != !v->str)
    return 0;
  if (f->str)
    return !strcmp(f->str, v->str);
  switch (f->op) {
  case DURO_ATTR_EQ:
    return v->num == f->num;
  case DURO_ATTR_LT:
    return v->num < f->num;
  case DURO_ATTR_LE:
    return v->num <= f->num;
  case DURO_ATTR_GT:
    return v->num > f->num;
  case DURO_ATTR_GE:
    return v->num >= f->num;
  }
  return 0;
}
