/* route_storage_keys.c — the keys values are encrypted at rest under
 * (keys/keys.h): GET /storage/keys lists storage.encryption's keys and the last
 * rotation or count; POST /storage/keys/rotate rewrites, in the background,
 * every value not under the active key; POST /storage/keys/count counts the
 * values under each key.  Both answer 202 with the run as it started, 409 while
 * one runs. */
#include "http_internal.h"

#include <string.h>

#include "view_keys.h"

static int keys_start(http_server *s, http_exchange *x, int count_only) {
  char err[256];
  duro_keys_run run;
  int rc = duro_keys_start(s->engine, count_only, &run, err, sizeof err);
  if (rc == DURO_E_ALREADY_EXISTS)
    return send_error(x, 409, "keys.running", "%s", err);
  if (rc == DURO_E_INVALID_ARGUMENT)
    return send_error(x, 409, "keys.none", "%s", err);
  if (rc)
    return send_engine_error(x, rc, NULL, NULL);
  return send_json(x, 202, duro_keys_run_json(&run));
}

/* GET /storage/keys, POST /storage/keys/rotate, POST /storage/keys/count. */
int storage_keys_route(http_server *s, http_exchange *x, char **seg, int n) {
  seg++, n--; /* past "storage" */
  if (n == 1) {
    if (!method_is(x, "GET"))
      return wrong_method(x, "GET");
    return send_json(x, 200, duro_keys_json(s->engine));
  }
  if (n == 2 && (!strcmp(seg[1], "rotate") || !strcmp(seg[1], "count"))) {
    if (!method_is(x, "POST"))
      return wrong_method(x, "POST");
    return keys_start(s, x, !strcmp(seg[1], "count"));
  }
  return send_error(x, 404, "route.not_found", "no route for %s %s",
                    x->rq.method, x->rq.path);
}
