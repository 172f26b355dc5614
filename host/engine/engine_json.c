/* engine_json.c — the JSON text the engine checks (params, step results,
 * an instance's state: valid, and within a limit) and the error JSON it
 * builds ({"name":..,"message":..}). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "error.h"

int json_text_check(const char *text, int64_t limit) {
  return json_text_check_at(text, limit, NULL, 0);
}

int json_text_check_at(const char *text, int64_t limit, char *why,
                       size_t why_len) {
  size_t len = strlen(text);
  if (limit > 0 && (int64_t)len > limit)
    return DURO_E_OUTPUT_TOO_LARGE;
  json_error_t jerr;
  json_t *v = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
  if (!v) {
    if (why)
      snprintf(why, why_len, "%s at line %d, column %d (byte %d)", jerr.text,
               jerr.line, jerr.column, jerr.position);
    return DURO_E_INVALID_OUTPUT;
  }
  json_decref(v);
  return 0;
}

char *error_json(const char *name, const char *message) {
  json_t *o = json_pack("{s:s,s:s}", "name", name, "message", message);
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (!s) {
    fprintf(stderr, "duro: out of memory\n");
    abort();
  }
  /* jansson allocates with malloc, so the caller's free() is right */
  return s;
}
