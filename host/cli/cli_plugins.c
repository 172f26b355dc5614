/* cli_plugins.c — `reload [PLUGIN]` (the config and each plugin read
 * again: what became of each), `plugins list` (each plugin, its loaded
 * builds and the holds on them) and `plugins resume PLUGIN` (its held
 * builds let run again). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"
#include "describe.h"
#include "util.h"

int cli_build_reload(cli_ctx *c, const cli_verb *v, const cli_args *a,
                     cli_req *r) {
  (void)v;
  r->method = "POST";
  r->body = xstrdup("{}");
  if (a->n_pos) {
    char *n = cli_escape(c, a->pos[0]);
    r->path = xasprintf("/plugins/%s/reload", n);
    free(n);
  } else {
    r->path = xstrdup("/plugins/reload");
  }
  return CLI_OK;
}

int cli_build_plugins(cli_ctx *c, const cli_verb *v, const cli_args *a,
                      cli_req *r) {
  (void)c, (void)v, (void)a;
  r->method = "GET";
  r->path = xstrdup("/plugins");
  return CLI_OK;
}

/* The config read again: applied (each change), unchanged or refused
 * (why, and each change that needs a restart). */
static void print_reload_config(const json_t *c) {
  if (!c)
    return;
  printf("config %s: ", json_string_value(json_object_get(c, "file")));
  cli_put(c, "status");
  const char *err = json_string_value(json_object_get(c, "error"));
  if (err)
    printf(": %s", err);
  fputc('\n', stdout);
  size_t i;
  const json_t *v;
  const json_t *restart = json_object_get(c, "restart");
  json_array_foreach(restart, i, v)
      printf("  needs a restart: %s\n", json_string_value(v));
  if (!restart)
    json_array_foreach(json_object_get(c, "changes"), i, v)
        printf("  %s\n", json_string_value(v));
}

/* One line per plugin reloaded: loaded, unchanged or refused (and why),
 * after what became of the config file. */
void cli_print_reload(const cli_args *a, const json_t *r) {
  (void)a;
  print_reload_config(json_object_get(r, "config"));
  size_t i;
  const json_t *p;
  json_array_foreach(json_object_get(r, "plugins"), i, p) {
    cli_put(p, "name");
    fputs(": ", stdout);
    cli_put(p, "status");
    const char *build = json_string_value(json_object_get(p, "build"));
    const char *prev = json_string_value(json_object_get(p, "previous"));
    const char *err = json_string_value(json_object_get(p, "error"));
    if (build && prev && strcmp(build, prev) != 0)
      printf(" build %s (was %s)", build, prev);
    else if (build)
      printf(" build %s", build);
    if (err) {
      fputs(": ", stdout);
      describe_text(stdout, err, 0, 0);
    }
    fputc('\n', stdout);
  }
}

int cli_reload_refused(const json_t *r) {
  int refused = 0;
  const json_t *c = json_object_get(r, "config");
  const char *status = json_string_value(json_object_get(c, "status"));
  if (status && !strcmp(status, "refused")) {
    fprintf(stderr, "duro: reload refused: the config %s was not applied\n",
            cli_str_or(c, "file"));
    refused++;
  }
  size_t i;
  const json_t *p;
  json_array_foreach(json_object_get(r, "plugins"), i, p) {
    status = json_string_value(json_object_get(p, "status"));
    if (status && !strcmp(status, "refused")) {
      fprintf(stderr,
              "duro: reload refused: plugin \"%s\" keeps its "
              "previous build\n",
              cli_str_or(p, "name"));
      refused++;
    }
  }
  return refused ? CLI_FAILED : CLI_OK;
}

/* Each plugin and its loaded builds, the newest marked. */
void cli_print_plugins(const cli_args *a, const json_t *r) {
  (void)a;
  size_t i, k;
  const json_t *p, *b;
  json_array_foreach(json_object_get(r, "plugins"), i, p) {
    cli_put(p, "name");
    fputs("  ", stdout);
    cli_put(p, "path");
    fputc('\n', stdout);
    json_array_foreach(json_object_get(p, "builds"), k, b) {
      char t[32];
      fputs("  ", stdout);
      cli_put(b, "build");
      printf(
          "  loaded %s  %" JSON_INTEGER_FORMAT " pinned instance(s)%s\n",
          describe_time(t, json_integer_value(json_object_get(b, "loaded_ms"))),
          json_integer_value(json_object_get(b, "instances")),
          json_is_true(json_object_get(b, "newest")) ? "  newest" : "");
      const json_t *held = json_object_get(b, "held");
      if (held)
        printf("    held since %s (%s: %" JSON_INTEGER_FORMAT
               " crashes): `duro plugins resume %s` lets it run\n",
               describe_time(
                   t, json_integer_value(json_object_get(held, "since_ms"))),
               json_string_value(json_object_get(held, "reason")),
               json_integer_value(json_object_get(held, "crashes")),
               json_string_value(json_object_get(p, "name")));
    }
  }
  const char *wf;
  const json_t *n;
  json_object_foreach((json_t *)json_object_get(r, "held_instances"), wf, n)
      printf("%" JSON_INTEGER_FORMAT
             " instance(s) of %s held (build.crashing)\n",
             json_integer_value(n), wf);
}

int cli_build_plugin_resume(cli_ctx *c, const cli_verb *v, const cli_args *a,
                            cli_req *r) {
  (void)v;
  r->method = "POST";
  r->body = xstrdup("{}");
  char *n = cli_escape(c, a->pos[0]);
  r->path = xasprintf("/plugins/%s/resume", n);
  free(n);
  return CLI_OK;
}

/* Each build released, and how many of its instances run again. */
void cli_print_plugin_resume(const cli_args *a, const json_t *r) {
  (void)a;
  size_t i;
  const json_t *b;
  const json_t *list = json_object_get(r, "released");
  if (!json_array_size(list))
    printf("plugin %s: no build of it is held\n",
           json_string_value(json_object_get(r, "plugin")));
  json_array_foreach(list, i, b) printf(
      "plugin %s: build %s resumed (%" JSON_INTEGER_FORMAT
      " crashes when held), %" JSON_INTEGER_FORMAT " instance(s) run again\n",
      json_string_value(json_object_get(r, "plugin")),
      json_string_value(json_object_get(b, "build")),
      json_integer_value(json_object_get(b, "crashes")),
      json_integer_value(json_object_get(b, "woken")));
}
