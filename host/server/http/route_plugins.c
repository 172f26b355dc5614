/* route_plugins.c — GET /plugins (each plugin, its loaded builds and
 * their holds), POST /plugins[/{name}]/reload (load changed builds now)
 * and POST /plugins/{name}/resume (let its builds the crash-storm breaker
 * holds run again), on the reloader and breaker the host attached
 * (http_attach_plugins, http_attach_breaker); without a reloader, as in
 * the tests and fuzz targets, there are no plugin routes. */
#include "http_internal.h"

#include <string.h>

#include "breaker.h"

/* Each plugin and its builds, with the breaker's counts and holds. */
json_t *plugins_list(http_server *s) {
  json_t *list = reload_list(s->plugins);
  if (s->breaker)
    breaker_annotate(s->breaker, list);
  return list;
}

static int resume(http_server *s, http_exchange *x, const char *name) {
  json_t *report = NULL;
  if (!s->breaker || breaker_resume(s->breaker, name, &report) < 0)
    return send_error(x, 404, "plugin.not_found", "no plugin \"%s\"", name);
  reload_forget_rollback(s->plugins, name);
  return send_json(x, 200, report);
}

/* GET /plugins: each plugin and its loaded builds (what a limited key
 * may see of them, key_views.c).  POST /plugins/reload
 * and /plugins/{name}/reload: load changed builds now (the reload runs on
 * this pool thread; the file watch and SIGHUP take the same lock).  POST
 * /plugins/{name}/resume: release its held builds. */
int plugins_route(http_server *s, http_exchange *x, char **seg, int n) {
  if (!s->plugins)
    return send_error(x, 404, "route.not_found", "no plugins here");
  if (n == 1)
    return method_is(x, "GET")
               ? send_json(x, 200, keys_filter_plugins(s, x, plugins_list(s)))
               : wrong_method(x, "GET");
  const char *name = n == 3 ? seg[1] : NULL;
  int is_resume = n == 3 && !strcmp(seg[2], "resume");
  if (!((n == 2 && !strcmp(seg[1], "reload")) ||
        (n == 3 && !strcmp(seg[2], "reload")) || is_resume))
    return send_error(x, 404, "route.not_found", "no route for %s %s",
                      x->rq.method, x->rq.path);
  if (!method_is(x, "POST"))
    return wrong_method(x, "POST");
  if (is_resume)
    return resume(s, x, name);
  json_t *report = NULL;
  if (reload_plugins(s->plugins, name, &report) < 0) {
    json_decref(report);
    return send_error(x, 404, "plugin.not_found", "no plugin \"%s\"", name);
  }
  return send_json(x, 200, report);
}
