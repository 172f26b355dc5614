/* cli_logs.c — `duro workflows instances logs WF ID [--after N]
 * [--follow]`: the lines an instance's plugin code logged, one a line
 * ("TIME LEVEL WHERE: MESSAGE", or the server's object a line with
 * --json); with --follow, read again each second from the last line
 * printed until the instance has ended and every line is out. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_internal.h"
#include "describe.h"

#define LOGS_PAGE "1000"
#define LOGS_PAGE_N 1000
#define FOLLOW_EVERY_MS 1000

int cli_build_logs(cli_ctx *c, const cli_verb *v, const cli_args *a,
                   cli_req *r) {
  if (cli_check_instance(v, a, 1))
    return CLI_USAGE;
  char *end;
  if (a->after && (strtoll(a->after, &end, 10) < 0 || *end || !*a->after))
    return cli_usage_error(v, "--after takes a line number, not \"%s\"",
                           a->after);
  r->method = "GET";
  r->path = cli_instances_path(c, a->pos[0], a->pos[1], "/logs");
  cli_query_add(c, &r->path, "after", a->after ? a->after : "0");
  cli_query_add(c, &r->path, "limit", LOGS_PAGE);
  return CLI_OK;
}

static void print_line(const cli_args *a, const json_t *l) {
  if (a->json) {
    char *s = json_dumps(l, JSON_COMPACT);
    if (s)
      puts(s);
    free(s);
    return;
  }
  const char *step = json_string_value(json_object_get(l, "step"));
  cli_put_time(json_integer_value(json_object_get(l, "time_ms")));
  printf(" %-5s ", json_string_value(json_object_get(l, "level")));
  if (step) {
    describe_text(stdout, step, 100, 0);
    printf(" attempt %lld: ",
           (long long)json_integer_value(json_object_get(l, "attempt")));
  } else {
    fputs("run(): ", stdout);
  }
  describe_text(stdout, json_string_value(json_object_get(l, "message")), 0, 0);
  fputc('\n', stdout);
}

/* Prints a page's lines; *next gets its "next"; returns how many. */
static size_t print_page(const cli_args *a, const json_t *page,
                         long long *next) {
  const json_t *lines = json_object_get(page, "logs");
  for (size_t i = 0; i < json_array_size(lines); i++)
    print_line(a, json_array_get(lines, i));
  *next = json_integer_value(json_object_get(page, "next"));
  fflush(stdout);
  return json_array_size(lines);
}

/* The instance's status ended (complete, errored, terminated): 1. */
static int instance_ended(cli_ctx *c, const cli_args *a, int *rc) {
  cli_req r = {.method = "GET"};
  r.path = cli_instances_path(c, a->pos[0], a->pos[1], "/status");
  json_t *st = NULL;
  *rc = cli_send_request(c, &r, &st);
  free(r.path);
  const char *s = json_string_value(json_object_get(st, "status"));
  int ended = cli_status_ended(s);
  json_decref(st);
  return ended;
}

int cli_logs_run(cli_ctx *c, const cli_args *a, const json_t *first) {
  long long next;
  size_t got = print_page(a, first, &next);
  int rc = CLI_OK, last = 0;
  while (rc == CLI_OK && (got == LOGS_PAGE_N || (a->follow && !last))) {
    /* Lines are committed before the end they precede: once it has
     * ended, one more read has them all. */
    if (got < LOGS_PAGE_N) {
      last = instance_ended(c, a, &rc);
      if (rc != CLI_OK)
        break;
      if (!last)
        usleep(FOLLOW_EVERY_MS * 1000);
    }
    char after[32];
    snprintf(after, sizeof after, "%lld", next);
    cli_req r = {.method = "GET"};
    r.path = cli_instances_path(c, a->pos[0], a->pos[1], "/logs");
    cli_query_add(c, &r.path, "after", after);
    cli_query_add(c, &r.path, "limit", LOGS_PAGE);
    json_t *page = NULL;
    rc = cli_send_request(c, &r, &page);
    free(r.path);
    if (rc == CLI_OK)
      got = print_page(a, page, &next);
    json_decref(page);
  }
  return rc;
}
