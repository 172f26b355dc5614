/* params_key.h — what flow.singleton and flow.debounce key their
 * instances by (params_key.c): the value a JSON pointer finds in a
 * create's params, and a hash of texts for their maps. */
#ifndef DURO_PARAMS_KEY_H
#define DURO_PARAMS_KEY_H

#include <stdint.h>

/* The value at `pointer` in the JSON text `params` as compact JSON text
 * (malloc'ed, so values compare as JSON: "1" and 1 differ, key order
 * does not count), NULL when the params lack it or are not JSON. */
char *params_key_value(const char *pointer, const char *params);

/* FNV-1a 64 of a, a newline and b (either may be NULL): a key's value
 * (b NULL), or an instance's workflow and id, as an idmap's key. */
int64_t params_key_hash(const char *a, const char *b);

#endif
