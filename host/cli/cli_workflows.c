/* cli_workflows.c — `workflows describe` (a workflow's instances by
 * status and its backlog) and `workflows list` (every workflow each
 * plugin serves, one GET /workflows/{wf} each). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"
#include "describe.h"
#include "util.h"

int cli_build_workflow(cli_ctx *c, const cli_verb *v, const cli_args *a,
                       cli_req *r) {
  if (cli_check_instance(v, a, 0))
    return CLI_USAGE;
  char *w = cli_escape(c, a->pos[0]);
  r->method = "GET";
  r->path = xasprintf("/workflows/%s", w);
  free(w);
  return CLI_OK;
}

/* The workflow's instances by status, its backlog and how long its
 * oldest queued instance has waited. */
void cli_print_workflow(const cli_args *a, const json_t *r) {
  (void)a;
  fputs("workflow:      ", stdout);
  cli_put(r, "name");
  fputc('\n', stdout);
  const char *status;
  const json_t *n;
  json_object_foreach((json_t *)json_object_get(r, "instances"), status, n)
      printf("%-14s %" JSON_INTEGER_FORMAT "\n", status, json_integer_value(n));
  printf("backlog        %" JSON_INTEGER_FORMAT
         " (oldest queued %" JSON_INTEGER_FORMAT " ms)\n",
         json_integer_value(json_object_get(r, "backlog")),
         json_integer_value(json_object_get(r, "oldest_queued_age_ms")));
}

/* The answer's total of instances, over every status. */
static json_int_t instance_total(const json_t *w) {
  const char *status;
  const json_t *n;
  json_int_t total = 0;
  json_object_foreach((json_t *)json_object_get(w, "instances"), status, n)
      total += json_integer_value(n);
  return total;
}

/* One workflow per line: its plugin, its instances in all and by status,
 * and its backlog. */
static void print_workflows(const json_t *list) {
  size_t i, wf_w = 8, pl_w = 6;
  const json_t *w;
  if (!json_array_size(list)) {
    puts("no workflows");
    return;
  }
  json_array_foreach(list, i, w) {
    const char *name = json_string_value(json_object_get(w, "name"));
    const char *plugin = json_string_value(json_object_get(w, "plugin"));
    wf_w = name && strlen(name) > wf_w ? strlen(name) : wf_w;
    pl_w = plugin && strlen(plugin) > pl_w ? strlen(plugin) : pl_w;
  }
  printf("%-*s  %-*s  %9s  %7s  %s\n", (int)wf_w, "WORKFLOW", (int)pl_w,
         "PLUGIN", "INSTANCES", "BACKLOG", "BY STATUS");
  json_array_foreach(list, i, w) {
    describe_text(stdout, json_string_value(json_object_get(w, "name")), 0,
                  wf_w + 2);
    describe_text(stdout, json_string_value(json_object_get(w, "plugin")), 0,
                  pl_w + 2);
    printf("%9" JSON_INTEGER_FORMAT "  %7" JSON_INTEGER_FORMAT "  ",
           instance_total(w),
           json_integer_value(json_object_get(w, "backlog")));
    const char *status;
    const json_t *n;
    int first = 1;
    json_object_foreach((json_t *)json_object_get(w, "instances"), status, n) {
      printf("%s", first ? "" : ", ");
      describe_text(stdout, status, 0, 0);
      printf(" %" JSON_INTEGER_FORMAT, json_integer_value(n));
      first = 0;
    }
    puts(first ? "-" : "");
  }
}

/* `workflows list` starts as `plugins list` does; run_verb then hands the
 * answer to cli_list_workflows instead of printing it. */
int cli_build_workflows_list(cli_ctx *c, const cli_verb *v, const cli_args *a,
                             cli_req *r) {
  return cli_build_plugins(c, v, a, r);
}

/* `workflows list`: GET /plugins names the workflows each plugin serves
 * (its "serves"), then GET /workflows/{wf} counts each one's instances;
 * prints them, or with --json their answers, each with its "plugin". */
int cli_list_workflows(cli_ctx *c, const cli_args *a, const json_t *plugins) {
  json_t *all = json_array();
  int rc = CLI_OK;
  size_t i, k;
  const json_t *p, *w;
  json_array_foreach(json_object_get(plugins, "plugins"), i, p) {
    const json_t *serves = json_object_get(p, "serves");
    json_array_foreach(json_object_get(serves, "workflows"), k, w) {
      if (!json_string_value(w))
        continue;
      char *e = cli_escape(c, json_string_value(w));
      cli_req r = {.method = "GET", .path = xasprintf("/workflows/%s", e)};
      json_t *stats = NULL;
      rc = cli_send_request(c, &r, &stats);
      free(r.path);
      free(e);
      if (rc != CLI_OK)
        goto done;
      json_object_set(stats, "plugin", json_object_get(p, "name"));
      json_array_append_new(all, stats);
    }
  }
  if (a->json) {
    char *s = json_dumps(all, JSON_INDENT(2));
    if (s)
      puts(s);
    free(s);
  } else {
    print_workflows(all);
  }
done:
  json_decref(all);
  return rc;
}
