/* config_access.c — who may reach the listener: http.tls (the
 * certificate, its key and the clients' CA, as paths; the files are read
 * by the server, which names these positions when they are bad) and
 * http.keys (API keys: a name, the variable holding the token, the
 * scopes, the workflows and queues it may touch).  The token variables
 * are read at start, not here: `duro check` and the CLI read configs on
 * machines without them. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_internal.h"
#include "duro.h"
#include "ids.h"
#include "schema.h"
#include "suggest.h"
#include "util.h"

enum { TLS_CERT, TLS_KEY, TLS_CLIENT_CA };
static const schema_field tls_fields[] = {
    [TLS_CERT] = {"cert", K_STRING, offsetof(config, http.tls.cert), true, 0, 0,
                  NULL},
    [TLS_KEY] = {"key", K_STRING, offsetof(config, http.tls.key), true, 0, 0,
                 NULL},
    [TLS_CLIENT_CA] = {"client_ca", K_STRING,
                       offsetof(config, http.tls.client_ca), false, 0, 0, NULL},
};
const schema config_tls_schema = SCHEMA("tls", "in http.tls", -1, tls_fields);

enum { KEY_NAME, KEY_TOKEN_ENV, KEY_SCOPES, KEY_WORKFLOWS, KEY_QUEUES };
static const schema_field key_fields[] = {
    [KEY_NAME] = {"name", K_STRING, offsetof(config_api_key, name), true, 0, 0,
                  NULL},
    [KEY_TOKEN_ENV] = {"token_env", K_STRING,
                       offsetof(config_api_key, token_env), true, 0, 0, NULL},
    [KEY_SCOPES] = {"scopes", K_NESTED, 0, true, 0, 0, NULL},
    [KEY_WORKFLOWS] = {"workflows", K_NESTED, 0, false, 0, 0, NULL},
    [KEY_QUEUES] = {"queues", K_NESTED, 0, false, 0, 0, NULL},
};
const schema config_api_key_schema =
    SCHEMA("key", "in an http key", KEY_NAME, key_fields);

static const char *const scope_names[] = {"read", "events", "operate", "admin"};
#define N_SCOPES (sizeof scope_names / sizeof scope_names[0])

/* The scopes list: each a known name (CONFIG_SCOPE_* is 1 << its index). */
static int parse_scopes(config_parser *p, yaml_node_t *list, const char *name,
                        config_api_key *k) {
  size_t n;
  int rc = schema_list(&p->w, list, "scopes", &n);
  if (rc == 0 && list && n == 0)
    return schema_fail(&p->w, list,
                       "key \"%s\" has no scopes: give at least one of read, "
                       "events, operate, admin",
                       name ? name : "?");
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, list, i);
    char *s = NULL;
    if (schema_take_string(&p->w, item, "scopes", &s) < 0) {
      rc = DURO_E_CONFIG;
      continue;
    }
    size_t j = 0;
    while (j < N_SCOPES && strcmp(s, scope_names[j]) != 0)
      j++;
    if (j < N_SCOPES) {
      k->scopes |= 1u << j;
    } else {
      schema_shown b;
      const char *near = suggest_nearest(s, strlen(s), scope_names, N_SCOPES);
      rc = schema_fail(&p->w, item,
                       "unknown scope \"%s\"%s%s%s: the scopes are read, "
                       "events, operate and admin",
                       schema_show(&b, s), near ? " (did you mean \"" : "",
                       near ? near : "", near ? "\"?)" : "");
    }
    free(s);
  }
  return rc;
}

/* A key's workflows or queues: names, each once; an empty list would
 * let the key touch nothing, and is refused. */
static int parse_names(config_parser *p, yaml_node_t *list, const char *key,
                       char ***names, size_t *n_out) {
  size_t n;
  int rc = schema_list(&p->w, list, key, &n);
  if (rc == 0 && list && n == 0 && !schema_is_null(list))
    return schema_fail(&p->w, list,
                       "\"%s\" is empty: leave it out for any, or name "
                       "some",
                       key);
  if (n == 0)
    return rc;
  *names = xcalloc(n, sizeof **names);
  *n_out = n; /* a refused entry stays NULL */
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, list, i);
    char **slot = &(*names)[i];
    if (schema_take_string(&p->w, item, key, slot) < 0) {
      rc = DURO_E_CONFIG;
      continue;
    }
    for (size_t j = 0; j < i; j++)
      if ((*names)[j] && strcmp((*names)[j], *slot) == 0) {
        schema_shown b;
        rc = schema_fail(&p->w, item, "\"%s\" names \"%s\" twice", key,
                         schema_show(&b, *slot));
        break;
      }
  }
  return rc;
}

static int parse_key(config_parser *p, yaml_node_t *node, config_api_key *k) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS];
  k->pos = schema_pos(node);
  int rc = schema_mapping(&p->w, node, &config_api_key_schema, k, v, NULL);
  if (v[KEY_TOKEN_ENV])
    k->token_env_pos = schema_pos(v[KEY_TOKEN_ENV]);
  if (k->name && !duro_instance_id_valid(k->name)) {
    schema_shown b;
    rc = schema_fail(&p->w, v[KEY_NAME],
                     "key names are 1-100 characters of A-Z a-z 0-9 _ . : -, "
                     "not \"%s\"",
                     schema_show(&b, k->name));
    free(k->name);
    k->name = NULL;
  }
  if (config_unique(p, "key name", k->name, v[KEY_NAME]) < 0 ||
      config_unique(p, "key token_env", k->token_env, v[KEY_TOKEN_ENV]) < 0)
    rc = DURO_E_CONFIG;
  if (parse_scopes(p, v[KEY_SCOPES], k->name, k) < 0 ||
      parse_names(p, v[KEY_WORKFLOWS], "workflows", &k->workflows,
                  &k->n_workflows) < 0 ||
      parse_names(p, v[KEY_QUEUES], "queues", &k->queues, &k->n_queues) < 0)
    rc = DURO_E_CONFIG;
  return rc < 0 ? DURO_E_CONFIG : rc;
}

int config_parse_http_access(config_parser *p, yaml_node_t *tls,
                             yaml_node_t *keys, yaml_node_t *token_env) {
  config *cfg = p->cfg;
  yaml_node_t *tv[SCHEMA_MAX_FIELDS];
  int rc = 0;
  int present = schema_section(&p->w, tls, "tls");
  if (present < 0 ||
      (present > 0 &&
       schema_mapping(&p->w, tls, &config_tls_schema, cfg, tv, NULL) < 0))
    rc = DURO_E_CONFIG;
  if (present > 0) {
    config_pos *pos[] = {&cfg->http.tls.cert_pos, &cfg->http.tls.key_pos,
                         &cfg->http.tls.client_ca_pos};
    for (int i = TLS_CERT; i <= TLS_CLIENT_CA; i++)
      if (tv[i])
        *pos[i] = schema_pos(tv[i]);
  }

  /* token_env is the key "default": its name and variable are taken */
  if (token_env && cfg->http.token_env) {
    static const char name[] = "default";
    config_unique(p, "key name", name, token_env);
    config_unique(p, "key token_env", cfg->http.token_env, token_env);
  }
  size_t n;
  if (schema_list(&p->w, keys, "keys", &n) < 0)
    rc = DURO_E_CONFIG;
  if (n > 0) {
    cfg->http.keys = xcalloc(n, sizeof *cfg->http.keys);
    cfg->http.n_keys = n;
  }
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, keys, i);
    if (schema_entry(&p->w, item, "keys") < 0 ||
        parse_key(p, item, &cfg->http.keys[i]) < 0)
      rc = DURO_E_CONFIG;
  }
  return rc;
}
