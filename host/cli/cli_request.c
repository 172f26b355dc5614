/* cli_request.c — the pieces of a request: JSON bodies, escaped path
 * segments and query values, the instances' paths, and the names (WF, ID,
 * --id, --type, QUEUE) checked as the server would before they go into a
 * path. */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"
#include "clock.h"
#include "duration.h"
#include "ids.h"
#include "instant.h"
#include "util.h"

char *cli_dump(json_t *v) {
  char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  if (!s) {
    fprintf(stderr, "duro: out of memory\n");
    abort();
  }
  return s;
}

/* `s` percent-encoded for a path segment or a query value, malloc'ed. */
char *cli_escape(cli_ctx *c, const char *s) {
  char *e = curl_easy_escape(c->curl, s, 0);
  if (!e) {
    fprintf(stderr, "duro: out of memory\n");
    abort();
  }
  char *copy = xstrdup(e);
  curl_free(e);
  return copy;
}

/* "/workflows/WF/instances", then "/ID" and `tail` when given. */
char *cli_instances_path(cli_ctx *c, const char *wf, const char *id,
                         const char *tail) {
  char *w = cli_escape(c, wf), *i = id ? cli_escape(c, id) : NULL;
  char *p = xasprintf("/workflows/%s/instances%s%s%s", w, i ? "/" : "",
                      i ? i : "", tail ? tail : "");
  free(w);
  free(i);
  return p;
}

void cli_query_add(cli_ctx *c, char **path, const char *key,
                   const char *value) {
  if (!value)
    return;
  char *e = cli_escape(c, value);
  char *p =
      xasprintf("%s%c%s=%s", *path, strchr(*path, '?') ? '&' : '?', key, e);
  free(e);
  free(*path);
  *path = p;
}

/* Refuses `s` (WF, ID, --id or --type, named `what`) unless it is a name
 * the server takes in a path segment: the rule of instance ids, which the
 * server applies to workflow names and event types too.  Checked here, not
 * left to the server, because the server matches routes on the decoded,
 * normalized path: an ID of "../x" (sent as "..%2Fx") would reach
 * /workflows/WF/x, and one with more "../" another workflow's instance,
 * instead of being refused. */
int cli_check_name(const cli_verb *v, const char *what, const char *s) {
  if (duro_instance_id_valid(s))
    return CLI_OK;
  return cli_usage_error(v,
                         "%s must be 1-100 characters of A-Z a-z 0-9 _ . : -, "
                         "not \"%s\"",
                         what, s);
}

/* WF, and ID for the verbs that take one (pos[1]). */
int cli_check_instance(const cli_verb *v, const cli_args *a, int has_id) {
  if (cli_check_name(v, "WF", a->pos[0]))
    return CLI_USAGE;
  return has_id ? cli_check_name(v, "ID", a->pos[1]) : CLI_OK;
}

/* --created-after and --created-before: a time as the API takes it (ms,
 * ISO 8601), or a duration before now ("1h", "2 days"), as ms into buf;
 * NULL after a usage error. */
const char *cli_time_arg(const cli_verb *v, const char *option,
                         const char *text, char buf[24]) {
  int64_t ms;
  if (!text)
    return NULL;
  if (instant_parse(text, &ms) != 0) {
    int64_t ago;
    if (duration_parse(text, &ago) != 0) {
      cli_usage_error(v,
                      "%s takes a time (2026-12-07T10:00:00Z, ms since the "
                      "epoch) or a duration before now (1h), not \"%s\"",
                      option, text);
      return NULL;
    }
    ms = clock_wall_ms() - ago;
  }
  snprintf(buf, 24, "%lld", (long long)ms);
  return buf;
}
