/* cli_cron.c — `cron list` (each trigger, its next and last ticks) and
 * `cron trigger EXPR` (fire the triggers of an expression now, as the
 * host's tick would). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli_internal.h"
#include "describe.h"
#include "util.h"

int cli_build_crons(cli_ctx *c, const cli_verb *v, const cli_args *a,
                    cli_req *r) {
  (void)c, (void)v, (void)a;
  r->method = "GET";
  r->path = xstrdup("/crons");
  return CLI_OK;
}

/* POST /__scheduled?cron=EXPR: EXPR is one argument ("0 3 * * *", quoted
 * against the shell's globbing), escaped whole. */
int cli_build_cron_trigger(cli_ctx *c, const cli_verb *v, const cli_args *a,
                           cli_req *r) {
  (void)v;
  r->method = "POST";
  r->path = xstrdup("/__scheduled");
  cli_query_add(c, &r->path, "cron", a->pos[0]);
  r->body = xstrdup("{}");
  return CLI_OK;
}

void cli_print_crons(const cli_args *a, const json_t *r) {
  (void)a;
  describe_crons(stdout, r);
}

/* One line per trigger fired: "PLUGIN: STATE", the instance it created,
 * and the handler's error; "PLUGIN: instance X already exists: nothing
 * was created" when the minute's instance was there before. */
void cli_print_cron_fired(const cli_args *a, const json_t *r) {
  (void)a;
  size_t i;
  const json_t *t;
  json_array_foreach(r, i, t) {
    cli_put(t, "plugin");
    fputs(": ", stdout);
    if (!strcmp(cli_str_or(t, "state"), "exists")) {
      fputs("instance ", stdout);
      cli_put(t, "instance");
      puts(" already exists: nothing was created");
      continue;
    }
    cli_put(t, "state");
    if (json_string_value(json_object_get(t, "instance"))) {
      fputs(" instance ", stdout);
      cli_put(t, "instance");
    }
    const json_t *err = json_object_get(t, "error");
    if (json_is_string(err)) {
      fputs(": ", stdout);
      describe_text(stdout, json_string_value(err), 200, 0);
    } else if (err && !json_is_null(err)) {
      char *text = cli_dump((json_t *)err);
      fputs(": ", stdout);
      describe_text(stdout, text, 200, 0);
      free(text);
    }
    fputc('\n', stdout);
  }
}
