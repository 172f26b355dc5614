/* config_encryption.c — storage.encryption: the keys that open the
 * journal's values encrypted at rest, each an id and the environment
 * variable that holds it, and the active one, which seals.  The variables
 * are read at start (server/host.c), not here: a file is checked on a
 * machine that may not hold its keys. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_internal.h"
#include "duro.h"
#include "schema.h"
#include "util.h"

enum { ENC_KEYS, ENC_ACTIVE };
static const schema_field encryption_fields[] = {
    [ENC_KEYS] = {"keys", K_NESTED, 0, true, 0, 0, NULL},
    [ENC_ACTIVE] = {"active", K_STRING,
                    offsetof(config, storage.encryption.active), true, 0, 0,
                    NULL},
};
const schema config_encryption_schema = SCHEMA(
    "storage.encryption", "in storage.encryption", -1, encryption_fields);

enum { KEY_ID, KEY_ENV };
static const schema_field key_fields[] = {
    [KEY_ID] = {"id", K_STRING, offsetof(config_encryption_key, id), true, 0, 0,
                NULL},
    [KEY_ENV] = {"key_env", K_STRING, offsetof(config_encryption_key, key_env),
                 true, 0, 0, NULL},
};
const schema config_encryption_key_schema =
    SCHEMA("key", "in a key of storage.encryption", KEY_ID, key_fields);

/* A key id is stored in front of every value it seals: 1-32 characters
 * of A-Z a-z 0-9 _ - (store/journal_crypt.h's rule). */
static bool key_id_ok(const char *id) {
  size_t n = strlen(id);
  return n >= 1 && n <= 32 &&
         strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789_-") == n;
}

static int parse_key(config_parser *p, yaml_node_t *node,
                     config_encryption_key *k) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  k->pos = schema_pos(node);
  int rc =
      schema_mapping(&p->w, node, &config_encryption_key_schema, k, v, NULL);
  if (v[KEY_ENV])
    k->env_pos = schema_pos(v[KEY_ENV]);
  if (k->id && !key_id_ok(k->id)) {
    schema_shown b;
    rc = schema_fail(&p->w, v[KEY_ID],
                     "key ids are 1-32 characters of A-Z a-z 0-9 _ -, not "
                     "\"%s\"",
                     schema_show(&b, k->id));
    free(k->id);
    k->id = NULL;
  }
  if (config_unique(p, "storage.encryption key id", k->id, v[KEY_ID]) < 0)
    rc = DURO_E_CONFIG;
  return rc < 0 ? DURO_E_CONFIG : rc;
}

int config_parse_encryption(config_parser *p, yaml_node_t *node) {
  config *cfg = p->cfg;
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  int present = schema_section(&p->w, node, "encryption");
  if (present <= 0)
    return present;
  int rc = schema_mapping(&p->w, node, &config_encryption_schema, cfg, v, NULL);
  if (v[ENC_ACTIVE])
    cfg->storage.encryption.active_pos = schema_pos(v[ENC_ACTIVE]);
  size_t n;
  if (schema_list(&p->w, v[ENC_KEYS], "keys", &n) < 0)
    rc = DURO_E_CONFIG;
  else if (n == 0 && v[ENC_KEYS])
    rc = schema_fail(&p->w, v[ENC_KEYS],
                     "\"keys\" lists at least one key: {id, key_env}");
  if (n > 0) {
    cfg->storage.encryption.keys =
        xcalloc(n, sizeof *cfg->storage.encryption.keys);
    cfg->storage.encryption.n_keys = n;
  }
  bool all_read = n > 0;
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, v[ENC_KEYS], i);
    config_encryption_key *k = &cfg->storage.encryption.keys[i];
    if (schema_entry(&p->w, item, "keys") < 0 || parse_key(p, item, k) < 0)
      rc = DURO_E_CONFIG;
    if (!k->id)
      all_read = false;
  }
  /* the active key must be one listed (unless a refused entry was it) */
  const char *active = cfg->storage.encryption.active;
  bool found = false;
  for (size_t i = 0; active && i < n; i++)
    found = found || (cfg->storage.encryption.keys[i].id &&
                      !strcmp(cfg->storage.encryption.keys[i].id, active));
  if (active && all_read && !found) {
    schema_shown b;
    rc = schema_fail(&p->w, v[ENC_ACTIVE],
                     "\"active\" names key \"%s\", which \"keys\" does not "
                     "list",
                     schema_show(&b, active));
  }
  return rc < 0 ? DURO_E_CONFIG : rc;
}
