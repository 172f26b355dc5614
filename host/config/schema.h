/* schema.h — the walk of one YAML mapping against a table of fields, for
 * the config's parser (config.c and the config_*.c it hands parts to).
 *
 * A schema is a table of fields: key, type, where the value goes in the
 * struct being filled, whether it is required, its range.  Walking a
 * table rather than hand-written code per key gives every mapping the
 * same checks: unknown keys (with the nearest known one, suggest.h),
 * repeated keys, wrong types, ranges, missing required fields.  Scalars
 * are typed by their field, not by YAML's guess: a string field takes any
 * scalar, an integer or boolean field only a plain (unquoted) one, so
 * `workers: "8"` is refused like any other string.  Integers are decimal,
 * booleans are exactly true or false, durations go through
 * duration_parse() (a plain integer is milliseconds).
 *
 * Every error is recorded in the walk's errlist with its position and the
 * walk goes on: a refused value leaves its field at its default, as if
 * absent, and sets the field's bit in *bad for the caller; a repeated key
 * keeps the first value.  Positions are 1-based; libyaml's marks are
 * 0-based. */
#ifndef DURO_CONFIG_SCHEMA_H
#define DURO_CONFIG_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "config.h"
#include "errlist.h"

#define MiB (1024LL * 1024)
#define GiB (1024LL * MiB)
#define SECOND_MS 1000LL
#define MINUTE_MS (60LL * SECOND_MS)
#define HOUR_MS (3600LL * SECOND_MS)
#define DAY_MS (24LL * HOUR_MS)

/* One document being walked, and where its errors go. */
typedef struct schema_walk {
  const char *file; /* named in every message */
  const char *text; /* the input, to place reader errors */
  size_t len;
  yaml_document_t *doc;
  errlist *errs;
} schema_walk;

/* User text quoted into a message: escaped so a key holding a newline or a
 * quote cannot garble the one-line message, and cut short so a megabyte of
 * key does not make a megabyte of message. */
#define SCHEMA_SHOW_MAX 64
typedef struct schema_shown {
  char s[SCHEMA_SHOW_MAX * 4 + 4];
} schema_shown;

typedef enum schema_kind {
  K_STRING,   /* char *, non-empty */
  K_BOOL,     /* int, 0 or 1 */
  K_U32,      /* uint32_t in [min, max] */
  K_I64,      /* int64_t in [min, max] */
  K_DURATION, /* int64_t milliseconds in [min, max], max <= DURATION_MAX_MS */
  K_ENUM,     /* int, the value of the matching choice */
  K_BYTES,    /* int64_t bytes in [min, max]: an integer, or one with a unit
                 (B, KiB, MiB, GiB, KB, MB, GB): "256MiB", "1 GiB" */
  K_RATIO,    /* uint32_t millionths in [min, max]: a fraction ("0.5", "1")
                 or a percentage ("50%", "0.2%") */
  K_DECIMAL,  /* uint32_t millionths in [min, max]: a decimal number
                 ("1.5", "2", "0.25"), at most 4294 */
  K_NESTED    /* a mapping or list the caller walks itself */
} schema_kind;

typedef struct schema_choice {
  const char *name;
  int value;
} schema_choice;

typedef struct schema_field {
  const char *key;
  schema_kind kind;
  size_t offset; /* into the struct the schema fills */
  bool required;
  int64_t min, max;
  const schema_choice *choices; /* K_ENUM, ended by a NULL name */
} schema_field;

#define SCHEMA_MAX_FIELDS 16
/* The bit schema_mapping() sets in *bad for a key it does not know (or one
 * that is not a string): whatever that key held was not read. */
#define SCHEMA_BAD_UNKNOWN (1u << 31)

typedef struct schema {
  const char *noun;  /* "workflow", for "workflow ... is missing ..." */
  const char *where; /* "in workflow", for "unknown key ... in workflow" */
  int label;         /* the K_STRING field naming an entry, or -1 */
  const schema_field *fields;
  size_t n_fields;
} schema;

#define SCHEMA(noun_, where_, label_, fields_)                                 \
  {                                                                            \
    .noun = noun_, .where = where_, .label = label_, .fields = fields_,        \
    .n_fields = sizeof fields_ / sizeof fields_[0]                             \
  }

/* The position of a node. */
config_pos schema_pos(const yaml_node_t *node);

/* Records "file:line:column: message" at the node, or at pos, and returns
 * DURO_E_CONFIG; the caller goes on. */
int schema_fail(schema_walk *w, const yaml_node_t *node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int schema_fail_at(schema_walk *w, config_pos pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* s (len bytes, or up to its NUL) escaped and cut into b, which it
 * returns. */
const char *schema_show_n(schema_shown *b, const char *s, size_t len);
const char *schema_show(schema_shown *b, const char *s);

/* A scalar node's value, and whether it is a YAML 1.2 core schema null
 * (a quoted "null" is a string). */
const char *schema_scalar(const yaml_node_t *n);
bool schema_is_null(const yaml_node_t *n);

/* The document's node number `index`. */
yaml_node_t *schema_node(schema_walk *w, int index);

/* Copies a non-empty string scalar into *out, replacing a default. */
int schema_take_string(schema_walk *w, const yaml_node_t *v, const char *key,
                       char **out);

/* Stores one value node into base as field f (a scalar field's kind),
 * as a mapping's walk would; DURO_E_CONFIG when it is refused. */
int schema_value(schema_walk *w, const schema_field *f, const yaml_node_t *v,
                 void *base);

/* Walks one mapping against s, storing every scalar field into base and
 * leaving each field's value node in vals[field index] (NULL when absent
 * or refused); *bad (when bad is not NULL) gets the bits of the refused
 * fields and SCHEMA_BAD_UNKNOWN.  Returns DURO_E_CONFIG when anything in
 * the mapping was refused, having walked all of it. */
int schema_mapping(schema_walk *w, yaml_node_t *node, const schema *s,
                   void *base, yaml_node_t **vals, unsigned *bad);

/* A section's value: 1 when it is a mapping to walk, 0 when it is null or
 * absent (the same), or an error. */
int schema_section(schema_walk *w, const yaml_node_t *v, const char *key);

/* A list's value: 0 with its item count in *n_out (0 for null or
 * absent), or an error with *n_out 0. */
int schema_list(schema_walk *w, const yaml_node_t *v, const char *key,
                size_t *n_out);
yaml_node_t *schema_item(schema_walk *w, const yaml_node_t *list, size_t i);

/* Refuses an entry of list `key` that is not a mapping. */
int schema_entry(schema_walk *w, const yaml_node_t *item, const char *key);

#endif
