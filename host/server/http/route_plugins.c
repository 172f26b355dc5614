/* route_plugins.c — GET /plugins (each plugin and its loaded builds) and
 * POST /plugins[/{name}]/reload (load changed builds now), on the
 * reloader the host attached (http_attach_plugins); without one, as in
 * the tests and fuzz targets, there are no plugin routes. */
#include "http_internal.h"

#include <string.h>

/* GET /plugins: each plugin and its loaded builds.  POST /plugins/reload
 * and /plugins/{name}/reload: load changed builds now (the reload runs on
 * this pool thread; the file watch and SIGHUP take the same lock). */
int plugins_route(http_server *s, http_exchange *x, char **seg, int n) {
  if (!s->plugins)
    return send_error(x, 404, "route.not_found", "no plugins here");
  if (n == 1)
    return method_is(x, "GET") ? send_json(x, 200, reload_list(s->plugins))
                               : wrong_method(x, "GET");
  const char *name = n == 3 ? seg[1] : NULL;
  if (!((n == 2 && !strcmp(seg[1], "reload")) ||
        (n == 3 && !strcmp(seg[2], "reload"))))
    return send_error(x, 404, "route.not_found", "no route for %s %s",
                      x->rq.method, x->rq.path);
  if (!method_is(x, "POST"))
    return wrong_method(x, "POST");
  json_t *report = NULL;
  if (reload_plugins(s->plugins, name, &report) < 0) {
    json_decref(report);
    return send_error(x, 404, "plugin.not_found", "no plugin \"%s\"", name);
  }
  return send_json(x, 200, report);
}
