/* attr.h — search attributes: values an instance carries by name (taken
 * from its params at create, or set from its code), indexed so that a
 * list can ask for "customer is c42".  Their types, a value, a filter of
 * the list's `where`, and that filter's syntax, in base/ so that the
 * store, the engine and the routes (the list's, the bulk actions') share
 * one rule. */
#ifndef DURO_ATTR_H
#define DURO_ATTR_H

#include <stddef.h>

#include <jansson.h>

/* A workflow's `index:` holds at most this many; a name is 1-64
 * characters of A-Z a-z 0-9 _, not starting with a digit; a string value
 * is at most DURO_ATTR_STR_MAX bytes (a longer one is not indexed). */
#define DURO_ATTR_MAX 16
#define DURO_ATTR_NAME_MAX 64
#define DURO_ATTR_STR_MAX 256

typedef enum duro_attr_type {
  DURO_ATTR_STRING = 0,
  DURO_ATTR_NUMBER = 1
} duro_attr_type;

/* One declared attribute: its name, the JSON pointer into the params it
 * is taken from at create (NULL: none, set from code only), its type. */
typedef struct duro_attr_decl {
  const char *name;
  const char *from;
  duro_attr_type type;
} duro_attr_decl;

/* One value: a string (str) or, when str is NULL, a number (num).  Who
 * owns the strings is said where an array of them is handed over. */
typedef struct duro_attr {
  char *name;
  char *str;
  double num;
} duro_attr;

typedef enum duro_attr_op {
  DURO_ATTR_EQ, /* name:value */
  DURO_ATTR_LT, /* name<value, numbers only */
  DURO_ATTR_LE,
  DURO_ATTR_GT,
  DURO_ATTR_GE
} duro_attr_op;

/* One term of a `where`: the attribute `name` compares with the value
 * (str for a string attribute, num for a number) by op.  Its strings are
 * malloc'ed (duro_attr_filter_clear). */
typedef struct duro_attr_filter {
  char *name;
  duro_attr_op op;
  char *str; /* NULL: a number, num */
  double num;
} duro_attr_filter;

/* 1 when `name` is a valid attribute name. */
int duro_attr_name_valid(const char *name);

/* A type's name ("string", "number"), and the type of one (-1: none). */
const char *duro_attr_type_name(duro_attr_type t);
int duro_attr_type_parse(const char *name);

/* The declaration named `name` among decls, or NULL. */
const duro_attr_decl *duro_attr_decl_find(const duro_attr_decl *decls, size_t n,
                                          const char *name);

/* A JSON value as an attribute of type `type` into *out (its str
 * malloc'ed; name left alone): 0, or -1 when the value is of another
 * type (a number for a string attribute, say), a string is longer than
 * DURO_ATTR_STR_MAX, or a number is not finite. */
int duro_attr_from_json(const json_t *v, duro_attr_type type, duro_attr *out);

/* Parses one `where` term: "name:value" (equal), or for a number
 * attribute "name>v", "name>=v", "name<v", "name<=v", against the
 * declared attributes: 0 and *out (free with duro_attr_filter_clear), or
 * -1 with err saying what is wrong (an unknown attribute, a number that
 * is not one, a comparison on a string). */
int duro_attr_where_parse(const char *text, const duro_attr_decl *decls,
                          size_t n, duro_attr_filter *out, char *err,
                          size_t errlen);
void duro_attr_filter_clear(duro_attr_filter *f);

/* Whether value `v` passes filter `f` (of the same attribute). */
int duro_attr_passes(const duro_attr_filter *f, const duro_attr *v);

#endif
