/* route_dashboard.c — GET / and /ui/NAME: the dashboard's files, compiled
 * into the binary (dashboard.h), sent with a policy that lets no other
 * page frame them and runs only their own script. */
#include "http_internal.h"

#include <string.h>

#include "dashboard.h"

/* The dashboard's pages: their own files only, never in a frame. */
#define DASHBOARD_CSP                                                          \
  "default-src 'none'; script-src 'self'; style-src 'self'; "                  \
  "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "                \
  "form-action 'none'; frame-ancestors 'none'"

/* GET / and /ui/NAME: the dashboard's files, from the binary, with a
 * policy that lets no other page frame them and runs only their own
 * script. */
int dashboard_route(http_exchange *x) {
  x->rs.dashboard = 1;
  if (!method_is(x, "GET"))
    return wrong_method(x, "GET");
  const dashboard_file *f = dashboard_find(x->rq.path);
  if (!f)
    return send_error(x, 404, "route.not_found", "no dashboard file %s",
                      x->rq.path);
  send_text(x, 200, f->type, (const char *)f->data, f->len);
  return 0;
}

/* On the loop: the headers of a page's answer (x->rs.dashboard). */
void dashboard_headers(h2o_req_t *req) {
  static const char *const page[][2] = {
      {"content-security-policy", DASHBOARD_CSP},
      {"x-frame-options", "DENY"},
      {"x-content-type-options", "nosniff"}};
  for (size_t i = 0; i < sizeof page / sizeof page[0]; i++)
    h2o_add_header_by_str(&req->pool, &req->res.headers, page[i][0],
                          strlen(page[i][0]), 0, NULL, page[i][1],
                          strlen(page[i][1]));
}
