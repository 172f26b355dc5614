/* api_json.c — duro.h's JSON accessors in the engine (json_access.h does
 * the work): what they return is kept in the arena of the activation
 * running on this thread (run() or one of its callbacks), else in the
 * scope of the queue or cron handler running on it, else nowhere (NULL:
 * init, or a thread of the plugin's own). */
#include <stdio.h>

#include "api.h"
#include "call_scope.h"
#include "json_access.h"
#include "log.h"
#include "step.h"

static const char *keep(char *s) {
  if (!s)
    return NULL;
  if (step_current_log())
    return step_keep(s);
  return call_scope_keep(s);
}

static const char *api_json_string(const char *json, const char *ptr) {
  return keep(json_access_string(json, ptr));
}

static const char *api_json_value(const char *json, const char *ptr) {
  return keep(json_access_value(json, ptr));
}

static const char *api_json_vpack(const char *fmt, va_list ap) {
  char err[512];
  char *json = json_access_vpack(fmt, ap, err, sizeof err);
  if (!json)
    log_at(DURO_LOG_WARN, step_current_log(), "duro_json_pack: %s", err);
  return keep(json);
}

void json_api_fill(duro_api *t) {
  t->json_str = api_json_string;
  t->json_val = api_json_value;
  t->json_int = json_access_integer;
  t->json_num = json_access_number;
  t->json_bool = json_access_boolean;
  t->json_vpack = api_json_vpack;
}
