/* cli_print.c — what the verbs' printers share, and the answer printed:
 * the verb's text, or with --json the server's JSON as it came
 * (describe.c renders the list table and the describe report). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli_internal.h"
#include "describe.h"
#include "status.h"

void cli_put(const json_t *o, const char *key) {
  describe_text(stdout, json_string_value(json_object_get(o, key)), 0, 0);
}

/* The string at `key`, "" when there is none. */
const char *cli_str_or(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

void cli_print_answer(const cli_verb *v, const cli_args *a, const json_t *r) {
  if (!a->json) {
    v->print(a, r);
    return;
  }
  char *s = json_dumps(r, JSON_INDENT(2) | JSON_ENCODE_ANY);
  if (s)
    puts(s);
  free(s);
}

int cli_status_ended(const char *status) {
  return status && duro_status_ended((duro_status)duro_status_parse(status));
}

void cli_put_time(int64_t ms) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  char when[32] = "?";
  if (gmtime_r(&t, &tm))
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  printf("%s.%03dZ", when, (int)(ms % 1000));
}
