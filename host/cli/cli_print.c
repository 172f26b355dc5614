/* cli_print.c — what the verbs' printers share, and the answer printed:
 * the verb's text, or with --json the server's JSON as it came
 * (describe.c renders the list table and the describe report). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_internal.h"
#include "describe.h"

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
