/* cli_bulk.c — `duro workflows instances bulk WF --action A [filter]
 * [--id ID]... [--dry-run] [--terminate]`: a bulk action posted (POST
 * /workflows/{wf}/bulk), then its progress followed (GET /bulk/{id},
 * twice a second) until it ends: a line redrawn on a terminal, a line
 * each time the counts move otherwise; and `duro bulk status ID`, `duro
 * bulk cancel ID`, one job's progress and its cancel.  A job that ends
 * done with no failure exits 0; cancelled, or with failures, 1. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_internal.h"
#include "util.h"

#define FOLLOW_EVERY_MS 500

static const char *const actions[] = {"terminate", "restart", "resume",
                                      "pause",     "delete",  NULL};

int cli_build_bulk(cli_ctx *c, const cli_verb *v, const cli_args *a,
                   cli_req *r) {
  if (cli_check_instance(v, a, 0))
    return CLI_USAGE;
  for (size_t i = 0; i < a->n_ids; i++)
    if (cli_check_name(v, "--id", a->ids[i]))
      return CLI_USAGE;
  if (!a->action)
    return cli_usage_error(v, "--action is required");
  size_t i = 0;
  while (actions[i] && strcmp(actions[i], a->action))
    i++;
  if (!actions[i])
    return cli_usage_error(v,
                           "--action takes terminate, restart, resume, pause "
                           "or delete, not \"%s\"",
                           a->action);
  if (a->terminate && strcmp(a->action, "delete"))
    return cli_usage_error(v, "--terminate goes with --action delete only");
  char after[24], before[24];
  const char *after_ms =
      cli_time_arg(v, "--created-after", a->created_after, after);
  const char *before_ms =
      cli_time_arg(v, "--created-before", a->created_before, before);
  if ((a->created_after && !after_ms) || (a->created_before && !before_ms))
    return CLI_USAGE;
  json_t *filter = json_object();
  if (a->status)
    json_object_set_new(filter, "status", json_string(a->status));
  if (a->prefix)
    json_object_set_new(filter, "prefix", json_string(a->prefix));
  if (after_ms)
    json_object_set_new(filter, "created_after",
                        json_integer(strtoll(after_ms, NULL, 10)));
  if (before_ms)
    json_object_set_new(filter, "created_before",
                        json_integer(strtoll(before_ms, NULL, 10)));
  if (a->n_where) {
    json_t *where = json_array();
    for (size_t i = 0; i < a->n_where; i++)
      json_array_append_new(where, json_string(a->where[i]));
    json_object_set_new(filter, "where", where);
  }
  if (a->n_ids) { /* checked by the host, as every field */
    json_t *ids = json_array();
    for (size_t i = 0; i < a->n_ids; i++)
      json_array_append_new(ids, json_string(a->ids[i]));
    json_object_set_new(filter, "ids", ids);
  }
  json_t *body = json_pack("{s:s, s:o}", "action", a->action, "filter", filter);
  if (a->dry_run)
    json_object_set_new(body, "dry_run", json_true());
  if (a->terminate)
    json_object_set_new(body, "terminate", json_true());
  char *wf = cli_escape(c, a->pos[0]);
  r->method = "POST";
  r->path = xasprintf("/workflows/%s/bulk", wf);
  free(wf);
  r->body = cli_dump(body);
  json_decref(body);
  return CLI_OK;
}

/* ID: a job's number, checked here so that nothing else is sent. */
static int job_path(const cli_verb *v, const char *id, const char *tail,
                    cli_req *r) {
  if (!*id || strspn(id, "0123456789") != strlen(id) || strlen(id) > 18)
    return cli_usage_error(v, "ID is a bulk job's number, not \"%s\"", id);
  r->path = xasprintf("/bulk/%s%s", id, tail);
  return CLI_OK;
}

int cli_build_bulk_status(cli_ctx *c, const cli_verb *v, const cli_args *a,
                          cli_req *r) {
  (void)c;
  r->method = "GET";
  return job_path(v, a->pos[0], "", r);
}

int cli_build_bulk_cancel(cli_ctx *c, const cli_verb *v, const cli_args *a,
                          cli_req *r) {
  (void)c;
  r->method = "POST";
  return job_path(v, a->pos[0], "/cancel", r);
}

static long long count_of(const json_t *r, const char *key) {
  return (long long)json_integer_value(json_object_get(r, key));
}

/* "bulk 3: restart of orders, running: 1200 of 100000 matched, 1180 done,
 * 0 failed, 20 skipped" (no newline). */
static void put_progress(const json_t *r) {
  fputs("bulk ", stdout);
  cli_put(r, "id");
  fputs(": ", stdout);
  cli_put(r, "action");
  fputs(" of ", stdout);
  cli_put(r, "workflow");
  fputs(", ", stdout);
  cli_put(r, "state");
  long long done = count_of(r, "done"), failed = count_of(r, "failed"),
            skipped = count_of(r, "skipped");
  printf(": %lld of %lld matched, %lld done, %lld failed, %lld skipped",
         done + failed + skipped, count_of(r, "matched"), done, failed,
         skipped);
}

static void put_errors(const json_t *r) {
  const json_t *errors = json_object_get(r, "errors");
  for (size_t i = 0; i < json_array_size(errors); i++) {
    const json_t *e = json_array_get(errors, i);
    fputs("  failed ", stdout);
    cli_put(e, "instance");
    fputs(": ", stdout);
    cli_put(e, "error");
    fputc('\n', stdout);
  }
}

void cli_print_bulk(const cli_args *a, const json_t *r) {
  (void)a;
  if (json_is_true(json_object_get(r, "dry_run"))) {
    printf("%lld instance(s) match (dry run: nothing changed)\n",
           count_of(r, "matched"));
    return;
  }
  put_progress(r);
  fputc('\n', stdout);
  put_errors(r);
}

int cli_bulk_follow(cli_ctx *c, const cli_args *a, const json_t *created) {
  const char *id = cli_str_or(created, "id");
  if (!a->json)
    printf("bulk %s: %lld instance(s) match\n", id,
           count_of(created, "matched"));
  else
    cli_print_answer(NULL, a, created);
  fflush(stdout);
  int tty = isatty(STDOUT_FILENO) && !a->json;
  long long shown = -1;
  int rc;
  for (;;) {
    cli_req r = {.method = "GET", .path = xasprintf("/bulk/%s", id)};
    json_t *job = NULL;
    rc = cli_send_request(c, &r, &job);
    free(r.path);
    if (rc != CLI_OK)
      return rc;
    const char *state = cli_str_or(job, "state");
    int ended = strcmp(state, "running") != 0;
    long long seen = count_of(job, "done") + count_of(job, "failed") +
                     count_of(job, "skipped");
    if (a->json) {
      if (ended)
        cli_print_answer(NULL, a, job);
    } else if (tty) {
      fputc('\r', stdout);
      put_progress(job);
      fputs("\033[K", stdout);
      if (ended)
        fputc('\n', stdout);
    } else if (seen != shown || ended) {
      put_progress(job);
      fputc('\n', stdout);
    }
    shown = seen;
    if (ended && !a->json)
      put_errors(job);
    fflush(stdout);
    int ok = !strcmp(state, "done") && count_of(job, "failed") == 0;
    json_decref(job);
    if (ended)
      return ok ? CLI_OK : CLI_FAILED;
    usleep(FOLLOW_EVERY_MS * 1000);
  }
}
