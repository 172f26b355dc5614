/* cli_queues.c — `queues send`, `queues list`, `queues describe` and
 * `queues peek`: a message sent to a queue, the queues' counts, and a
 * look at a queue's messages without taking them. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"
#include "describe.h"
#include "util.h"

/* "/queues/Q" and `tail`, after checking Q as the server would. */
static int queue_path(cli_ctx *c, const cli_verb *v, const char *q,
                      const char *tail, char **out) {
  if (cli_check_name(v, "QUEUE", q))
    return CLI_USAGE;
  char *e = cli_escape(c, q);
  *out = xasprintf("/queues/%s%s", e, tail);
  free(e);
  return CLI_OK;
}

int cli_build_queue_send(cli_ctx *c, const cli_verb *v, const cli_args *a,
                         cli_req *r) {
  json_t *body;
  unsigned long long delay = 0;
  /* 0 is a valid delay, which cli_parse_count refuses */
  if (a->delay && strcmp(a->delay, "0") &&
      cli_parse_count(v, "--delay", a->delay, &delay))
    return CLI_USAGE;
  if (cli_parse_json_arg(v, "BODY", a->pos[1], &body))
    return CLI_USAGE;
  if (queue_path(c, v, a->pos[0], "/messages", &r->path)) {
    json_decref(body);
    return CLI_USAGE;
  }
  json_t *msg = json_pack("{s:o}", "body", body);
  if (delay)
    json_object_set_new(msg, "delay_seconds", json_integer((json_int_t)delay));
  r->method = "POST";
  r->body = cli_dump(msg);
  json_decref(msg);
  return CLI_OK;
}

int cli_build_queues_list(cli_ctx *c, const cli_verb *v, const cli_args *a,
                          cli_req *r) {
  (void)c, (void)v, (void)a;
  r->method = "GET";
  r->path = xstrdup("/queues");
  return CLI_OK;
}

int cli_build_queue_describe(cli_ctx *c, const cli_verb *v, const cli_args *a,
                             cli_req *r) {
  r->method = "GET";
  return queue_path(c, v, a->pos[0], "", &r->path);
}

int cli_build_queue_peek(cli_ctx *c, const cli_verb *v, const cli_args *a,
                         cli_req *r) {
  unsigned long long limit;
  if (a->limit && cli_parse_count(v, "--limit", a->limit, &limit))
    return CLI_USAGE;
  r->method = "GET";
  if (queue_path(c, v, a->pos[0], "/messages", &r->path))
    return CLI_USAGE;
  cli_query_add(c, &r->path, "limit", a->limit);
  return CLI_OK;
}

void cli_print_queue_sent(const cli_args *a, const json_t *r) {
  printf("sent message %" JSON_INTEGER_FORMAT " to ",
         json_integer_value(json_object_get(r, "id")));
  describe_text(stdout, a->pos[0], 0, 0);
  fputc('\n', stdout);
}

static json_int_t count_of(const json_t *q, const char *key) {
  return json_integer_value(json_object_get(q, key));
}

/* One queue per line: its counts, how old its oldest message is, and
 * how long its oldest ready one has waited for a consumer. */
void cli_print_queues(const cli_args *a, const json_t *r) {
  (void)a;
  size_t i;
  const json_t *q;
  printf("%-24s %8s %8s %9s %8s %8s %14s %10s\n", "QUEUE", "READY", "DELAYED",
         "IN_FLIGHT", "DROPPED", "DEAD", "OLDEST_AGE_MS", "LAG_MS");
  json_array_foreach(r, i, q) {
    const char *name = json_string_value(json_object_get(q, "name"));
    printf("%-24s %8" JSON_INTEGER_FORMAT " %8" JSON_INTEGER_FORMAT
           " %9" JSON_INTEGER_FORMAT " %8" JSON_INTEGER_FORMAT
           " %8" JSON_INTEGER_FORMAT " %14" JSON_INTEGER_FORMAT
           " %10" JSON_INTEGER_FORMAT "\n",
           name ? name : "", count_of(q, "ready"), count_of(q, "delayed"),
           count_of(q, "in_flight"), count_of(q, "dropped"),
           count_of(q, "dead_lettered"), count_of(q, "oldest_age_ms"),
           count_of(q, "lag_ms"));
  }
}

void cli_print_queue(const cli_args *a, const json_t *r) {
  (void)a;
  static const char *const keys[] = {
      "ready",         "delayed",       "in_flight", "dropped",
      "dead_lettered", "oldest_age_ms", "lag_ms"};
  fputs("queue:         ", stdout);
  cli_put(r, "name");
  fputc('\n', stdout);
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    printf("%-14s %" JSON_INTEGER_FORMAT "\n", keys[i], count_of(r, keys[i]));
  /* a consumer with concurrency by key: ready ones waiting their turn */
  if (json_object_get(r, "held"))
    printf("%-14s %" JSON_INTEGER_FORMAT "\n", "held", count_of(r, "held"));
}

/* One message per line, oldest first: its id, attempts, when it was sent
 * and is (or becomes) visible, whether a pull holds it, and its body; a
 * last error on the line after. */
void cli_print_queue_peek(const cli_args *a, const json_t *r) {
  (void)a;
  const json_t *msgs = json_object_get(r, "messages");
  size_t i;
  const json_t *m;
  printf("%-10s %8s %-24s %-24s %-6s %s\n", "ID", "ATTEMPTS", "SENT", "VISIBLE",
         "LEASED", "BODY");
  json_array_foreach(msgs, i, m) {
    char sent[32], visible[32];
    printf("%-10" JSON_INTEGER_FORMAT " %8" JSON_INTEGER_FORMAT
           " %-24s %-24s %-6s ",
           count_of(m, "id"), count_of(m, "attempts"),
           describe_time(sent, count_of(m, "sent_ms")),
           describe_time(visible, count_of(m, "visible_ms")),
           json_is_true(json_object_get(m, "leased")) ? "yes" : "no");
    json_t *b = json_object_get(m, "body");
    char *body = b ? cli_dump(b) : NULL;
    describe_text(stdout, body, 200, 0);
    free(body);
    fputc('\n', stdout);
    const char *err = json_string_value(json_object_get(m, "last_error"));
    if (err) {
      fputs("  last_error: ", stdout);
      describe_text(stdout, err, 200, 0);
      fputc('\n', stdout);
    }
  }
  if (!json_array_size(msgs))
    puts("(no messages)");
}
