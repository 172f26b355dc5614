/* route_crons.c — cron triggers: GET /crons (each trigger, its next
 * ticks, its last one and its counts) and /__scheduled?cron=EXPR (fires
 * every trigger declared with exactly EXPR now, as Cloudflare's local dev
 * does), whose query value is decoded as a form's. */
#include "http_internal.h"

#include <string.h>

#include "error.h"
#include "view_cron.h"

static int hex_digit(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

/* Decodes a query value in place as a form does ('+' is a space, %XX a
 * byte): the query reaches the routes as sent, and the spaces of a cron
 * expression come as "+" (Cloudflare's examples) or "%20" (curl's
 * escaping, `duro cron trigger`).  Returns -1 on a broken escape or a NUL
 * byte. */
static int form_decode(char *s) {
  char *w = s;
  for (const char *r = s; *r; r++) {
    if (*r == '+') {
      *w++ = ' ';
    } else if (*r == '%') {
      int hi = hex_digit(r[1]), lo = hi < 0 ? -1 : hex_digit(r[2]);
      if (lo < 0 || (hi == 0 && lo == 0))
        return -1;
      *w++ = (char)(hi << 4 | lo);
      r += 2;
    } else {
      *w++ = *r;
    }
  }
  *w = '\0';
  return 0;
}

int route_is_scheduled(char **seg, int n) {
  return n == 1 && !strcmp(seg[0], "__scheduled");
}

/* POST /__scheduled?cron=EXPR (and GET, as Cloudflare's local dev takes
 * a plain curl): fires every trigger declared with exactly EXPR now, as
 * `wrangler dev --test-scheduled` does; this pool thread waits while the
 * handler runs where its ticks run. */
int scheduled_route(http_server *s, http_exchange *x) {
  if (!method_is(x, "POST") && !method_is(x, "GET"))
    return wrong_method(x, "GET, POST");
  /* a copy the request owns: decoded in place */
  char *cron = (char *)query_param(x, "cron");
  if (!cron || !*cron)
    return send_error(x, 400, duro_err_name(DURO_E_INVALID_ARGUMENT),
                      "the cron expression is required: "
                      "/__scheduled?cron=0+3+*+*+*");
  if (form_decode(cron) < 0)
    return send_error(x, 400, duro_err_name(DURO_E_INVALID_ARGUMENT),
                      "the cron parameter holds a broken %%XX escape or a "
                      "NUL byte");
  json_t *out = NULL;
  int rc = duro_cron_fire_now(s->engine, cron, &out);
  if (rc == DURO_E_CRON_NOT_FOUND) {
    json_decref(out);
    return send_error(x, 404, duro_err_name(rc),
                      "no cron trigger has the expression \"%s\"", cron);
  }
  if (rc) {
    json_decref(out);
    return send_error(x, status_of(rc), duro_err_name(rc), "%s",
                      duro_err_str(rc));
  }
  return send_json(x, 200, out);
}

/* GET /crons: each trigger, its next ticks, its last one and its counts
 * (a limited key's workflows' alone). */
int crons_route(http_server *s, http_exchange *x) {
  if (!method_is(x, "GET"))
    return wrong_method(x, "GET");
  json_t *out = NULL;
  int rc = duro_cron_list(s->engine, &out);
  if (rc) {
    json_decref(out);
    return send_error(x, status_of(rc), duro_err_name(rc), "%s",
                      duro_err_str(rc));
  }
  return send_json(x, 200, keys_filter_crons(x, out));
}
