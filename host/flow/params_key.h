/* params_key.h — what flow.singleton and flow.debounce key their
 * instances by (params_key.c): the value a JSON pointer finds in a
 * create's params, a hash of texts, and a map from a key's values to
 * what a driver keeps of each. */
#ifndef DURO_PARAMS_KEY_H
#define DURO_PARAMS_KEY_H

#include <stdint.h>

#include "map.h"

/* The value at `pointer` in the JSON text `params` as compact JSON text
 * (malloc'ed, so values compare as JSON: "1" and 1 differ, key order
 * does not count), NULL when the params lack it or are not JSON. */
char *params_key_value(const char *pointer, const char *params);

/* FNV-1a 64 of a, a newline and b (either may be NULL): a key's value
 * (b NULL), or an instance's workflow and id, as an idmap's key. */
int64_t params_key_hash(const char *a, const char *b);

/* A value of a key in a map of them (an idmap from the value's hash to a
 * chain of nodes): a driver's record of a value begins with one. */
typedef struct params_key_node {
  struct params_key_node *next; /* the next of the same hash */
  char *value;                  /* compact JSON text, the record's */
} params_key_node;

/* The node of `value` in m, or NULL. */
params_key_node *params_keys_find(const idmap *m, const char *value);
/* Adds n, its value set, to m. */
void params_keys_add(idmap *m, params_key_node *n);
/* Takes n out of m (n stays the caller's). */
void params_keys_remove(idmap *m, params_key_node *n);

#endif
