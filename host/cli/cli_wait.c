/* cli_wait.c — `trigger --wait [DURATION]`: the create asks for its end
 * already (POST ?wait=); while the instance has not ended and DURATION
 * has not run out, GET it with ?wait=, one bounded wait per request; then
 * print its output, or its error. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"
#include "clock.h"
#include "describe.h"
#include "duration.h"

/* The longest ?wait= one request of --wait asks for (the server clamps it
 * to http.max_wait too): well inside perform's 120 s timeout. */
#define CLI_WAIT_STEP_MS 50000

/* --wait's DURATION in ms, -1 without one (until it ends). */
static int64_t wait_limit(const cli_args *a) {
  int64_t limit = -1;
  if (*a->wait)
    duration_parse(a->wait, &limit); /* checked by parse_option */
  return limit;
}

/* Adds ?wait= for what is left of --wait from `from` on, at most
 * CLI_WAIT_STEP_MS. */
void cli_query_wait(cli_ctx *c, char **path, const cli_args *a, int64_t from) {
  int64_t limit = wait_limit(a);
  int64_t left = limit < 0 ? CLI_WAIT_STEP_MS : from + limit - clock_mono_ms();
  if (left > CLI_WAIT_STEP_MS)
    left = CLI_WAIT_STEP_MS;
  if (left < 0)
    left = 0;
  char ms[32];
  snprintf(ms, sizeof ms, "%lldms", (long long)left);
  cli_query_add(c, path, "wait", ms);
}

/* `trigger --wait [DURATION]`: the create waited for the end already
 * (POST ?wait=, its answer is `created`); while the instance has not
 * ended and DURATION has not run out (a create's wait is at most
 * CLI_WAIT_STEP_MS and http.max_wait), GETs it with ?wait=.  Then prints
 * its output (0), or its error (1).  With --json, the instance's light
 * status whatever it is. */
int cli_wait_result(cli_ctx *c, const cli_args *a, const json_t *created) {
  const char *id = json_string_value(json_object_get(created, "id"));
  int64_t limit = wait_limit(a);
  json_t *st = json_incref((json_t *)created);
  int rc = CLI_OK;
  for (;;) {
    const char *status = json_string_value(json_object_get(st, "status"));
    if (cli_status_ended(status) ||
        (limit >= 0 && clock_mono_ms() >= c->sent_ms + limit))
      break;
    json_decref(st);
    st = NULL;
    cli_req r = {.method = "GET"};
    r.path = cli_instances_path(c, a->pos[0], id, NULL);
    cli_query_wait(c, &r.path, a, c->sent_ms);
    rc = cli_send_request(c, &r, &st);
    free(r.path);
    if (rc != CLI_OK)
      return rc;
  }
  const char *status = json_string_value(json_object_get(st, "status"));
  if (a->json) {
    char *text = json_dumps(st, JSON_INDENT(2));
    if (text)
      puts(text);
    free(text);
  }
  if (status && !strcmp(status, "complete")) {
    if (!a->json) {
      char *text = json_dumps(json_object_get(st, "output"),
                              JSON_INDENT(2) | JSON_ENCODE_ANY);
      if (text)
        puts(text);
      free(text);
    }
  } else {
    rc = CLI_FAILED;
    fputs("duro: ", stderr);
    describe_text(stderr, id, 0, 0);
    fputc(' ', stderr);
    describe_text(stderr, status ? status : "?", 0, 0);
    if (!cli_status_ended(status)) {
      fputs(" after ", stderr);
      describe_text(stderr, a->wait, 0, 0);
    }
    const json_t *err = json_object_get(st, "error");
    if (err && !json_is_null(err)) {
      const char *name = json_string_value(json_object_get(err, "name"));
      const char *msg = json_string_value(json_object_get(err, "message"));
      fputs(": ", stderr);
      if (name || msg) {
        describe_text(stderr, name ? name : "Error", 0, 0);
        fputs(": ", stderr);
        describe_text(stderr, msg ? msg : "", 0, 0);
      } else {
        char *text = cli_dump((json_t *)err);
        describe_text(stderr, text, 200, 0);
        free(text);
      }
    }
    fputc('\n', stderr);
  }
  json_decref(st);
  return rc;
}
