/* storage_keys.c — storage.encryption's keys from their environment
 * variables (storage_keys.h).  Each variable holds 32 bytes as 64 hex
 * digits or as base64 (journal_crypt_parse_key); the bytes are copied
 * into the journal's keys and wiped from this stack. */
#include "storage_keys.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>

#include "journal_crypt.h"

int storage_keys_load(const config *cfg, struct journal_crypt **out, char *err,
                      size_t errlen) {
  *out = NULL;
  const config_encryption_key *keys = cfg->storage.encryption.keys;
  size_t n = cfg->storage.encryption.n_keys;
  if (n == 0)
    return 0;
  journal_crypt *c = journal_crypt_new();
  unsigned char key[JOURNAL_CRYPT_KEY_BYTES];
  for (size_t i = 0; i < n; i++) {
    const config_encryption_key *k = &keys[i];
    const char *text = getenv(k->key_env);
    if (!text || !*text) {
      snprintf(err, errlen,
               "%s:%d:%d: storage.encryption key \"%s\": key_env names %s, "
               "which is not set or empty",
               cfg->file, k->env_pos.line, k->env_pos.column, k->id,
               k->key_env);
      goto fail;
    }
    if (journal_crypt_parse_key(text, key) != 0) {
      snprintf(err, errlen,
               "%s:%d:%d: storage.encryption key \"%s\": %s does not hold a "
               "key: 32 bytes as 64 hex digits or as base64 (44 characters), "
               "e.g. the output of `openssl rand -hex 32`",
               cfg->file, k->env_pos.line, k->env_pos.column, k->id,
               k->key_env);
      goto fail;
    }
    if (journal_crypt_add(c, k->id, key) != 0) { /* the parser refused it */
      snprintf(err, errlen, "%s:%d:%d: storage.encryption key \"%s\" refused",
               cfg->file, k->pos.line, k->pos.column, k->id);
      goto fail;
    }
  }
  OPENSSL_cleanse(key, sizeof key);
  if (journal_crypt_activate(c, cfg->storage.encryption.active) != 0) {
    const config_pos *p = &cfg->storage.encryption.active_pos;
    snprintf(err, errlen,
             "%s:%d:%d: storage.encryption.active \"%s\" is not one of its "
             "keys",
             cfg->file, p->line, p->column, cfg->storage.encryption.active);
    journal_crypt_free(c);
    return -1;
  }
  *out = c;
  return 0;
fail:
  OPENSSL_cleanse(key, sizeof key);
  journal_crypt_free(c);
  return -1;
}
