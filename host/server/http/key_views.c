/* key_views.c — what a key limited to some workflows or queues
 * (http.keys[].workflows, .queues) is shown of the listings that span
 * them: each listing as it is for any key, less what names a workflow or
 * queue off the key's lists, so such a key can be used day to day (the
 * dashboard's pages among them) instead of being refused the listing.
 *
 *  - GET /queues: its queues.
 *  - GET /crons: the triggers of its workflows (a trigger belongs to the
 *    workflow it starts; a handler's trigger, which starts none, is not
 *    shown to a key with a workflows list).
 *  - GET /plugins: each plugin's serves cut to its workflows, queues and
 *    the schedules of those crons; a plugin left serving none of them is
 *    not shown; held_instances and a hold's workflows cut to its
 *    workflows.  A build's pinned instances stay counted whole.
 *  - GET /workflows/{wf}/instances/{id}: its children of the key's
 *    workflows (its parent, one name, is shown as it is).
 *  - GET /healthz: its status whole; the entries of its lists (hung
 *    attempts, hung queue handlers) that name another workflow or queue
 *    left out.
 *
 * A key without lists, an admin key and a listener without keys see
 * each listing whole. */
#include "http_internal.h"

#include <string.h>

#include "view_cron.h"

/* Whether k sees every listing whole. */
static int sees_all(const http_key *k) {
  return !k || (k->scopes & CONFIG_SCOPE_ADMIN) ||
         (!k->workflows && !k->queues);
}

typedef int (*sees_name)(const http_key *k, const char *name);

/* The strings of `names` (an array) that k sees, in place. */
static void cut_names(const http_key *k, json_t *names, sees_name sees) {
  for (size_t i = json_array_size(names); i-- > 0;)
    if (!sees(k, json_string_value(json_array_get(names, i))))
      json_array_remove(names, i);
}

/* The objects of `items` (an array) whose member `field` k sees, in
 * place; an object without one is left out when `absent_hidden`. */
static void cut_items(const http_key *k, json_t *items, const char *field,
                      sees_name sees, int absent_hidden) {
  for (size_t i = json_array_size(items); i-- > 0;) {
    json_t *v = json_object_get(json_array_get(items, i), field);
    if (v ? !sees(k, json_string_value(v)) : absent_hidden)
      json_array_remove(items, i);
  }
}

json_t *keys_filter_queues(const http_exchange *x, json_t *queues) {
  if (!sees_all(x->key))
    cut_items(x->key, queues, "name", keys_see_queue, 1);
  return queues;
}

json_t *keys_filter_crons(const http_exchange *x, json_t *crons) {
  const http_key *k = x->key;
  if (!sees_all(k) && k->workflows)
    cut_items(k, crons, "workflow", keys_see_workflow, 1);
  return crons;
}

/* Whether `crons` (GET /crons' list, cut to the key's) holds plugin's
 * trigger of `schedule`. */
static int has_trigger(const json_t *crons, const char *plugin,
                       const char *schedule) {
  size_t i;
  json_t *t;
  json_array_foreach(crons, i, t) {
    const char *p = json_string_value(json_object_get(t, "plugin"));
    const char *sc = json_string_value(json_object_get(t, "schedule"));
    if (p && sc && plugin && schedule && !strcmp(p, plugin) &&
        !strcmp(sc, schedule))
      return 1;
  }
  return 0;
}

/* One plugin of GET /plugins cut to what k sees: 1 when anything it
 * serves is left. */
static int cut_plugin(const http_key *k, json_t *p, const json_t *crons) {
  json_t *serves = json_object_get(p, "serves");
  json_t *wfs = json_object_get(serves, "workflows");
  json_t *queues = json_object_get(serves, "queues");
  json_t *schedules = json_object_get(serves, "crons");
  cut_names(k, wfs, keys_see_workflow);
  cut_names(k, queues, keys_see_queue);
  if (k->workflows) {
    const char *name = json_string_value(json_object_get(p, "name"));
    for (size_t i = json_array_size(schedules); i-- > 0;)
      if (!has_trigger(crons, name,
                       json_string_value(json_array_get(schedules, i))))
        json_array_remove(schedules, i);
  }
  size_t i;
  json_t *b;
  json_array_foreach(json_object_get(p, "builds"), i, b)
      cut_names(k, json_object_get(json_object_get(b, "held"), "workflows"),
                keys_see_workflow);
  return json_array_size(wfs) + json_array_size(queues) +
             json_array_size(schedules) >
         0;
}

json_t *keys_filter_plugins(http_server *s, const http_exchange *x,
                            json_t *list) {
  const http_key *k = x->key;
  if (sees_all(k))
    return list;
  json_t *crons = NULL;
  if (k->workflows && duro_cron_list(s->engine, &crons) == 0)
    keys_filter_crons(x, crons);
  json_t *plugins = json_object_get(list, "plugins");
  for (size_t i = json_array_size(plugins); i-- > 0;)
    if (!cut_plugin(k, json_array_get(plugins, i), crons))
      json_array_remove(plugins, i);
  json_decref(crons);
  json_t *held = json_object_get(list, "held_instances");
  const char *wf;
  json_t *n;
  void *tmp;
  json_object_foreach_safe(held, tmp, wf, n) {
    if (!keys_see_workflow(k, wf))
      json_object_del(held, wf);
  }
  return list;
}

json_t *keys_filter_instance(const http_exchange *x, json_t *instance) {
  const http_key *k = x->key;
  if (!sees_all(k) && k->workflows)
    cut_items(k, json_object_get(instance, "children"), "workflow",
              keys_see_workflow, 0);
  return instance;
}

json_t *keys_filter_health(const http_exchange *x, json_t *health) {
  const http_key *k = x->key;
  if (sees_all(k))
    return health;
  const char *key;
  json_t *v;
  json_object_foreach(health, key, v) {
    if (!json_is_array(v))
      continue;
    cut_items(k, v, "workflow", keys_see_workflow, 0);
    cut_items(k, v, "queue", keys_see_queue, 0);
  }
  return health;
}
