/* cli_hosts.c — `hosts list`: the hosts sharing the store of the host
 * asked (GET /hosts), each on a line (id, machine and pid, alive or not,
 * the instances it runs that have not ended, its last heartbeat) and its
 * counts on the next; on a shared store the totals last. */
#include <jansson.h>
#include <stdio.h>

#include "cli_internal.h"
#include "describe.h"
#include "util.h"

int cli_build_hosts(cli_ctx *c, const cli_verb *v, const cli_args *a,
                    cli_req *r) {
  (void)c, (void)v, (void)a;
  r->method = "GET";
  r->path = xstrdup("/hosts");
  return CLI_OK;
}

static json_int_t int_of(const json_t *o, const char *key) {
  return json_integer_value(json_object_get(o, key));
}

/* The counts GET /hosts gives a host, or its totals. */
static void print_counts(const char *lead, const json_t *c) {
  if (!json_is_object(c))
    return;
  printf("%sbacklog %" JSON_INTEGER_FORMAT "  in flight %" JSON_INTEGER_FORMAT
         "  steps done %" JSON_INTEGER_FORMAT
         "  failed attempts %" JSON_INTEGER_FORMAT
         "  created %" JSON_INTEGER_FORMAT "\n",
         lead, int_of(c, "backlog"), int_of(c, "in_flight"),
         int_of(c, "steps_completed"), int_of(c, "attempts_failed"),
         int_of(c, "instances_created"));
}

void cli_print_hosts(const cli_args *a, const json_t *r) {
  (void)a;
  size_t i;
  const json_t *h;
  if (!json_is_true(json_object_get(r, "shared")))
    fputs("one host on its own store (SQLite):\n", stdout);
  json_array_foreach(json_object_get(r, "hosts"), i, h) {
    char t[32];
    const char *state = json_is_true(json_object_get(h, "dead")) ? "dead"
                        : json_is_true(json_object_get(h, "alive"))
                            ? "alive"
                            : "lease lapsed";
    printf("%" JSON_INTEGER_FORMAT "  %s pid %" JSON_INTEGER_FORMAT
           "  %s  %" JSON_INTEGER_FORMAT " instance(s)  started %s",
           int_of(h, "id"), json_string_value(json_object_get(h, "name")),
           int_of(h, "pid"), state, int_of(h, "instances"),
           describe_time(t, int_of(h, "started_ms")));
    if (json_is_true(json_object_get(r, "shared")))
      printf("  heartbeat %" JSON_INTEGER_FORMAT
             " ms ago (lease %" JSON_INTEGER_FORMAT " ms)",
             int_of(h, "heartbeat_age_ms"), int_of(h, "lease_ms"));
    fputs(json_is_true(json_object_get(h, "me")) ? "  (this one)\n" : "\n",
          stdout);
    print_counts("    ", json_object_get(h, "counts"));
  }
  if (json_is_true(json_object_get(r, "shared"))) {
    const json_t *t = json_object_get(r, "totals");
    printf("all hosts: %" JSON_INTEGER_FORMAT " instance(s)  ",
           int_of(t, "instances"));
    print_counts("", t);
  }
}
