/* config_resources.c — the top-level resources list: each shared
 * resource's name, its concurrency (attempts of the steps naming it that
 * run at once, across every workflow) and its rate (their starts a
 * period, with a burst), at least one of the two, each name once. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_internal.h"
#include "duro.h"
#include "ids.h"
#include "schema.h"
#include "util.h"

enum { RS_NAME, RS_CONCURRENCY, RS_RATE };
static const schema_field resource_fields[] = {
    [RS_NAME] = {"name", K_STRING, offsetof(config_resource, name), true, 0, 0,
                 NULL},
    [RS_CONCURRENCY] = {"concurrency", K_U32,
                        offsetof(config_resource, concurrency), false, 1,
                        1000000, NULL},
    [RS_RATE] = {"rate", K_NESTED, 0, false, 0, 0, NULL},
};
const schema config_resource_schema =
    SCHEMA("resource", "in a resource", RS_NAME, resource_fields);

/* As flow.rate[]'s limit, period and burst. */
static const schema_field rate_fields[] = {
    {"limit", K_U32, offsetof(config_resource, rate.limit), true, 1, 1000000,
     NULL},
    {"period", K_DURATION, offsetof(config_resource, rate.period_ms), true, 1,
     DAY_MS, NULL},
    {"burst", K_U32, offsetof(config_resource, rate.burst), false, 1, 1000000,
     NULL},
};
const schema config_resource_rate_schema =
    SCHEMA("rate", "in a resource's rate", -1, rate_fields);

static int parse_resource(config_parser *p, yaml_node_t *node,
                          config_resource *r) {
  yaml_node_t *v[SCHEMA_MAX_FIELDS], *rv[SCHEMA_MAX_FIELDS];
  r->pos = schema_pos(node);
  int rc = schema_mapping(&p->w, node, &config_resource_schema, r, v, NULL);
  if (r->name && !duro_instance_id_valid(r->name)) {
    schema_shown b;
    rc = schema_fail(&p->w, v[RS_NAME],
                     "resource names are 1-100 characters of A-Z a-z 0-9 _ . "
                     ": -, not \"%s\"",
                     schema_show(&b, r->name));
    free(r->name);
    r->name = NULL;
  }
  if (config_unique(p, "resource name", r->name, v[RS_NAME]) < 0)
    rc = DURO_E_CONFIG;
  int rate = schema_section(&p->w, v[RS_RATE], "rate");
  if (rate < 0 || (rate > 0 && schema_mapping(&p->w, v[RS_RATE],
                                              &config_resource_rate_schema, r,
                                              rv, NULL) < 0))
    rc = DURO_E_CONFIG;
  /* a refused value is not reported again as missing */
  if (rc == 0 && !r->concurrency && rate == 0) {
    schema_shown b;
    rc = schema_fail(&p->w, node,
                     "resource \"%s\" needs a \"concurrency\" or a \"rate\" "
                     "(or both): it would limit nothing",
                     r->name ? schema_show(&b, r->name) : "?");
  }
  return rc < 0 ? DURO_E_CONFIG : rc;
}

int config_parse_resources(config_parser *p, yaml_node_t *list) {
  config *cfg = p->cfg;
  size_t n;
  int rc = schema_list(&p->w, list, "resources", &n);
  if (n > 0) {
    cfg->resources = xcalloc(n, sizeof *cfg->resources);
    cfg->n_resources = n;
  }
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *item = schema_item(&p->w, list, i);
    if (schema_entry(&p->w, item, "resources") < 0 ||
        parse_resource(p, item, &cfg->resources[i]) < 0)
      rc = DURO_E_CONFIG;
  }
  return rc;
}
