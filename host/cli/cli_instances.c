/* cli_instances.c — the verbs of one workflow's instances: trigger (its
 * --wait in cli_wait.c), instances list, describe, status, export, pause,
 * resume, terminate, restart, delete and send-event, each its request and
 * the text of its answer. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_internal.h"
#include "clock.h"
#include "describe.h"
#include "duration.h"
#include "util.h"

int cli_build_trigger(cli_ctx *c, const cli_verb *v, const cli_args *a,
                      cli_req *r) {
  json_t *params = NULL;
  if (cli_check_instance(v, a, 0) ||
      (a->id && cli_check_name(v, "--id", a->id)))
    return CLI_USAGE;
  if (a->n_pos > 1 && cli_parse_json_arg(v, "PARAMS", a->pos[1], &params))
    return CLI_USAGE;
  int64_t ms;
  if (a->timeout && (duration_parse(a->timeout, &ms) != 0 || ms <= 0)) {
    json_decref(params);
    return cli_usage_error(v,
                           "--timeout: \"%s\" is not a duration such as "
                           "\"1h\" or \"30 minutes\"",
                           a->timeout);
  }
  json_t *body = json_object();
  if (a->id)
    json_object_set_new(body, "id", json_string(a->id));
  if (a->timeout)
    json_object_set_new(body, "timeout", json_string(a->timeout));
  if (params)
    json_object_set_new(body, "params", params);
  r->method = "POST";
  r->path = cli_instances_path(c, a->pos[0], NULL, NULL);
  if (a->wait) { /* the create answers once it ends: one round trip */
    c->sent_ms = clock_mono_ms();
    cli_query_wait(c, &r->path, a, c->sent_ms);
  }
  r->body = cli_dump(body);
  json_decref(body);
  return CLI_OK;
}

int cli_build_list(cli_ctx *c, const cli_verb *v, const cli_args *a,
                   cli_req *r) {
  unsigned long long limit;
  char after[24], before[24];
  if (cli_check_instance(v, a, 0))
    return CLI_USAGE;
  if (a->limit && cli_parse_count(v, "--limit", a->limit, &limit))
    return CLI_USAGE;
  const char *after_ms =
      cli_time_arg(v, "--created-after", a->created_after, after);
  const char *before_ms =
      cli_time_arg(v, "--created-before", a->created_before, before);
  if ((a->created_after && !after_ms) || (a->created_before && !before_ms))
    return CLI_USAGE;
  r->method = "GET";
  r->path = cli_instances_path(c, a->pos[0], NULL, NULL);
  cli_query_add(c, &r->path, "status", a->status);
  cli_query_add(c, &r->path, "prefix", a->prefix);
  cli_query_add(c, &r->path, "created_after", after_ms);
  cli_query_add(c, &r->path, "created_before", before_ms);
  for (size_t i = 0; i < a->n_where; i++)
    cli_query_add(c, &r->path, "where", a->where[i]);
  cli_query_add(c, &r->path, "limit", a->limit);
  cli_query_add(c, &r->path, "cursor", a->cursor);
  return CLI_OK;
}

int cli_build_describe(cli_ctx *c, const cli_verb *v, const cli_args *a,
                       cli_req *r) {
  if (cli_check_instance(v, a, 1))
    return CLI_USAGE;
  r->method = "GET";
  r->path = cli_instances_path(c, a->pos[0], a->pos[1], NULL);
  return CLI_OK;
}

int cli_build_export(cli_ctx *c, const cli_verb *v, const cli_args *a,
                     cli_req *r) {
  if (cli_check_instance(v, a, 1))
    return CLI_USAGE;
  r->method = "GET";
  r->path = cli_instances_path(c, a->pos[0], a->pos[1], "/export");
  return CLI_OK;
}

/* The document is what the user keeps (`> journal.json`): printed whole,
 * as the server sent it, never as a report. */
void cli_print_export(const cli_args *a, const json_t *r) {
  (void)a;
  char *s = json_dumps(r, JSON_INDENT(2));
  if (s)
    puts(s);
  free(s);
}

/* restart's {"name", "count"?} from --from and --count; NULL without. */
static int restart_from(const cli_verb *v, const cli_args *a, json_t **out) {
  unsigned long long count = 0;
  *out = NULL;
  if (a->count && !a->from)
    return cli_usage_error(v, "--count needs --from");
  if (!a->from)
    return CLI_OK;
  if (a->count && cli_parse_count(v, "--count", a->count, &count))
    return CLI_USAGE;
  json_t *name = json_string(a->from);
  if (!name)
    return cli_usage_error(v, "--from is not valid UTF-8");
  *out = json_pack("{s:o}", "name", name);
  if (count)
    json_object_set_new(*out, "count", json_integer((json_int_t)count));
  return CLI_OK;
}

/* pause, resume, terminate, restart: PATCH …/status. */
int cli_build_control(cli_ctx *c, const cli_verb *v, const cli_args *a,
                      cli_req *r) {
  json_t *from;
  if (cli_check_instance(v, a, 1) || restart_from(v, a, &from))
    return CLI_USAGE;
  json_t *body = json_pack("{s:s}", "status", v->action);
  if (from)
    json_object_set_new(body, "from", from);
  if (a->rollback)
    json_object_set_new(body, "rollback", json_true());
  r->method = "PATCH";
  r->path = cli_instances_path(c, a->pos[0], a->pos[1], "/status");
  r->body = cli_dump(body);
  json_decref(body);
  return CLI_OK;
}

/* delete: DELETE …/{id}, with ?terminate=true for --terminate. */
int cli_build_delete(cli_ctx *c, const cli_verb *v, const cli_args *a,
                     cli_req *r) {
  if (cli_check_instance(v, a, 1))
    return CLI_USAGE;
  r->method = "DELETE";
  r->path = cli_instances_path(c, a->pos[0], a->pos[1], NULL);
  if (a->terminate)
    cli_query_add(c, &r->path, "terminate", "true");
  return CLI_OK;
}

/* "deleted orders/o-1 (complete): 3 steps, 1 event, 0 log lines"; a live
 * one --terminate ended says "(terminated first)". */
void cli_print_deleted(const cli_args *a, const json_t *r) {
  (void)a;
  fputs("deleted ", stdout);
  cli_put(r, "workflow");
  fputc('/', stdout);
  cli_put(r, "id");
  const json_t *rows = json_object_get(r, "rows");
  if (!json_is_object(rows)) { /* the host that runs it deleted it */
    fputc('\n', stdout);
    return;
  }
  fputs(" (", stdout);
  if (json_is_true(json_object_get(r, "terminated")))
    fputs("terminated first", stdout);
  else
    cli_put(r, "status");
  json_int_t steps = json_integer_value(json_object_get(rows, "steps"));
  json_int_t events = json_integer_value(json_object_get(rows, "events"));
  json_int_t logs = json_integer_value(json_object_get(rows, "logs"));
  printf("): %lld step%s, %lld event%s, %lld log line%s\n", (long long)steps,
         steps == 1 ? "" : "s", (long long)events, events == 1 ? "" : "s",
         (long long)logs, logs == 1 ? "" : "s");
}

int cli_build_event(cli_ctx *c, const cli_verb *v, const cli_args *a,
                    cli_req *r) {
  const char *payload = a->payload ? a->payload : "null";
  json_t *parsed;
  if (!a->type)
    return cli_usage_error(v, "send-event needs --type T");
  if (cli_check_instance(v, a, 1) || cli_check_name(v, "--type", a->type))
    return CLI_USAGE;
  if (cli_parse_json_arg(v, "--payload", payload, &parsed))
    return CLI_USAGE;
  json_decref(parsed); /* valid: the text goes as the user wrote it */
  char *type = cli_escape(c, a->type);
  char *tail = xasprintf("/events/%s", type);
  r->method = "POST";
  r->path = cli_instances_path(c, a->pos[0], a->pos[1], tail);
  r->body = xstrdup(payload);
  free(tail);
  free(type);
  return CLI_OK;
}

void cli_print_created(const cli_args *a, const json_t *r) {
  (void)a;
  if (json_is_true(json_object_get(r, "skipped"))) {
    /* flow.singleton's skip: the live one answered */
    fputs("skipped: ", stdout);
    cli_put(r, "id");
    fputs(" is live with the same singleton key (nothing created)\n", stdout);
    return;
  }
  if (json_is_true(json_object_get(r, "debounced"))) {
    /* flow.debounce: the pending one took the params */
    fputs("debounced: ", stdout);
    cli_put(r, "id");
    fputs(" takes these params and starts once its key is quiet (nothing "
          "created)\n",
          stdout);
    return;
  }
  fputs("created ", stdout);
  cli_put(r, "id");
  fputs(" (", stdout);
  cli_put(r, "status");
  fputs(")\n", stdout);
}

void cli_print_status(const cli_args *a, const json_t *r) {
  (void)a;
  cli_put(r, "id");
  fputs(": ", stdout);
  cli_put(r, "status");
  fputc('\n', stdout);
}

void cli_print_event(const cli_args *a, const json_t *r) {
  (void)a;
  fputs("sent event ", stdout);
  cli_put(r, "type");
  fputs(" to ", stdout);
  cli_put(r, "id");
  fputc('\n', stdout);
}

void cli_print_list(const cli_args *a, const json_t *r) {
  (void)a;
  describe_list(stdout, r);
}

void cli_print_describe(const cli_args *a, const json_t *r) {
  describe_instance(stdout, r, clock_wall_ms(), a->full);
}

int cli_build_summary(cli_ctx *c, const cli_verb *v, const cli_args *a,
                      cli_req *r) {
  if (cli_check_instance(v, a, 1))
    return CLI_USAGE;
  r->method = "GET";
  r->path = cli_instances_path(c, a->pos[0], a->pos[1], "/status");
  return CLI_OK;
}

/* "ID: STATUS", then the output or the error when it has ended. */
void cli_print_summary(const cli_args *a, const json_t *r) {
  cli_print_status(a, r);
  const char *keys[] = {"output", "error"};
  for (size_t i = 0; i < 2; i++) {
    const json_t *v = json_object_get(r, keys[i]);
    if (!v || json_is_null(v))
      continue;
    char *text = cli_dump((json_t *)v);
    printf("%s: ", keys[i]);
    describe_text(stdout, text, 0, 0);
    fputc('\n', stdout);
    free(text);
  }
}
