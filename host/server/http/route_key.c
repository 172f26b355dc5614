/* route_key.c — GET /key: the key the request carries, what it may do
 * and the only workflows and queues it may touch, so a client (the
 * dashboard) offers only what the key may do rather than meet 403s.
 * {"name", "scopes": [...], "workflows": [...] | null, "queues": [...] |
 * null}; a listener without keys answers name null and every scope.  Any
 * key may ask (http_keys.c). */
#include "http_internal.h"

static json_t *names_json(char *const *names, size_t n) {
  if (!names)
    return json_null();
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(a, json_string(names[i]));
  return a;
}

int key_route(http_exchange *x) {
  static const struct {
    unsigned bit;
    const char *name;
  } scopes[] = {{CONFIG_SCOPE_READ, "read"},
                {CONFIG_SCOPE_EVENTS, "events"},
                {CONFIG_SCOPE_OPERATE, "operate"},
                {CONFIG_SCOPE_ADMIN, "admin"}};
  if (!method_is(x, "GET"))
    return wrong_method(x, "GET");
  const http_key *k = x->key;
  unsigned bits = k ? k->scopes : KEY_ALL_SCOPES;
  json_t *have = json_array();
  for (size_t i = 0; i < sizeof scopes / sizeof *scopes; i++)
    if (bits & scopes[i].bit)
      json_array_append_new(have, json_string(scopes[i].name));
  /* admin is every route: its lists, if any, limit nothing */
  int limited = k && !(bits & CONFIG_SCOPE_ADMIN);
  return send_json(
      x, 200,
      json_pack(
          "{s:o,s:o,s:o,s:o}", "name", k ? json_string(k->name) : json_null(),
          "scopes", have, "workflows",
          limited ? names_json(k->workflows, k->n_workflows) : json_null(),
          "queues",
          limited ? names_json(k->queues, k->n_queues) : json_null()));
}
