/* storage_keys.h — storage.encryption's keys read from the environment
 * variables the configuration names, for the journal (`duro run`, `duro
 * check`). */
#ifndef DURO_STORAGE_KEYS_H
#define DURO_STORAGE_KEYS_H

#include <stddef.h>

#include "config.h"

struct journal_crypt;

/* The keys cfg lists, the active one activated, into *out (free with
 * journal_crypt_free; NULL when the configuration lists none): 0, or -1
 * with why in err as "file:line:column: message", naming the variable
 * that is unset or does not hold a key. */
int storage_keys_load(const config *cfg, struct journal_crypt **out, char *err,
                      size_t errlen);

#endif
