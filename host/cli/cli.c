/* cli.c — `duro workflows …`, `duro plugins …`, `duro queues …`, `duro
 * pipelines …`, `duro cron …`, `duro bulk …`: the command-line client of a
 * running host's HTTP API, so that triggering, listing, inspecting and steering
 * instances, sending to a queue or looking at its messages, or firing a cron
 * trigger, takes one command instead of a curl line.
 *
 * One invocation sends one request.  Its course: find the verb in
 * verbs[]; parse the arguments (options may come anywhere, "--" ends
 * them); build the request locally, which is where PARAMS and --payload
 * must prove to be JSON, so nothing malformed is ever sent; then find the
 * host and its token, flags before the environment (DURO_URL, DURO_CONFIG,
 * DURO_TOKEN) before ./duro.yaml or config/duro.yaml (cli_find_host);
 * send the request with libcurl; print the answer, as the server's JSON with
 * --json, else as text (describe.c renders the list table and the
 * describe report).  An error names the URL asked and where it came from,
 * and an unknown workflow's 404 is followed by a GET /plugins, for the
 * nearest workflow that host serves.
 *
 * Exit status: 0 done; 1 the server answered an error ("duro: CODE:
 * MESSAGE") or could not be reached; 2 a usage error, which includes
 * invalid JSON, a WF, ID, --id or --type the server would refuse, a broken
 * config and an unset token variable, all found before anything is sent.
 *
 * This file holds the verb table, the dispatch of one invocation and the
 * usage; each step of its course, and each family of verbs, is a file of
 * its own (cli_internal.h lists them). */
#include "cli.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"

static const cli_verb verbs[] = {
    {"workflows trigger",
     "WF [PARAMS] [--id ID] [--timeout DURATION] [--wait [DURATION]]", 1, 2,
     O_ID | O_TIMEOUT | O_WAIT, NULL, cli_build_trigger, cli_print_created},
    {"workflows instances list",
     "WF [--status S] [--prefix P] [--created-after T] [--created-before T] "
     "[--where NAME:VALUE]... [--limit N] [--cursor C]",
     1, 1,
     O_STATUS | O_LIMIT | O_CURSOR | O_PREFIX | O_CREATED_AFTER |
         O_CREATED_BEFORE | O_WHERE,
     NULL, cli_build_list, cli_print_list},
    {"workflows list", "", 0, 0, 0, NULL, cli_build_workflows_list, NULL},
    {"workflows describe", "WF", 1, 1, 0, NULL, cli_build_workflow,
     cli_print_workflow},
    {"workflows instances describe", "WF ID [--full] [--follow]", 2, 2,
     O_FULL | O_FOLLOW, NULL, cli_build_describe, cli_print_describe},
    {"workflows instances status", "WF ID", 2, 2, 0, NULL, cli_build_summary,
     cli_print_summary},
    {"workflows instances export", "WF ID", 2, 2, 0, NULL, cli_build_export,
     cli_print_export},
    {"workflows instances logs", "WF ID [--after N] [--follow]", 2, 2,
     O_AFTER | O_FOLLOW, NULL, cli_build_logs, NULL},
    {"workflows instances pause", "WF ID", 2, 2, 0, "pause", cli_build_control,
     cli_print_status},
    {"workflows instances resume", "WF ID", 2, 2, 0, "resume",
     cli_build_control, cli_print_status},
    {"workflows instances terminate", "WF ID [--rollback]", 2, 2, O_ROLLBACK,
     "terminate", cli_build_control, cli_print_status},
    {"workflows instances restart",
     "WF ID [--from STEP [--count N]] [--rollback]", 2, 2,
     O_FROM | O_COUNT | O_ROLLBACK, "restart", cli_build_control,
     cli_print_status},
    {"workflows instances delete", "WF ID [--terminate]", 2, 2, O_TERMINATE,
     NULL, cli_build_delete, cli_print_deleted},
    {"workflows instances bulk",
     "WF --action terminate|restart|resume|pause|delete [--status S] "
     "[--prefix P] [--created-after T] [--created-before T] "
     "[--where NAME:VALUE] [--id ID]... [--dry-run] [--terminate]",
     1, 1,
     O_ACTION | O_STATUS | O_PREFIX | O_CREATED_AFTER | O_CREATED_BEFORE |
         O_WHERE | O_ID | O_DRY_RUN | O_TERMINATE,
     NULL, cli_build_bulk, cli_print_bulk},
    {"bulk status", "ID", 1, 1, 0, NULL, cli_build_bulk_status, cli_print_bulk},
    {"bulk cancel", "ID", 1, 1, 0, NULL, cli_build_bulk_cancel, cli_print_bulk},
    {"workflows instances send-event", "WF ID --type T [--payload JSON]", 2, 2,
     O_TYPE | O_PAYLOAD, NULL, cli_build_event, cli_print_event},
    {"reload", "[PLUGIN]", 0, 1, 0, NULL, cli_build_reload, cli_print_reload},
    {"plugins list", "", 0, 0, 0, NULL, cli_build_plugins, cli_print_plugins},
    {"plugins resume", "PLUGIN", 1, 1, 0, NULL, cli_build_plugin_resume,
     cli_print_plugin_resume},
    {"hosts list", "", 0, 0, 0, NULL, cli_build_hosts, cli_print_hosts},
    {"keys list", "", 0, 0, 0, NULL, cli_build_keys, cli_print_keys},
    {"keys rotate", "", 0, 0, 0, NULL, cli_build_keys, cli_print_keys},
    {"keys count", "", 0, 0, 0, NULL, cli_build_keys, cli_print_keys},
    {"queues send", "QUEUE BODY [--delay SECONDS]", 2, 2, O_DELAY, NULL,
     cli_build_queue_send, cli_print_queue_sent},
    {"queues list", "", 0, 0, 0, NULL, cli_build_queues_list, cli_print_queues},
    {"queues describe", "QUEUE", 1, 1, 0, NULL, cli_build_queue_describe,
     cli_print_queue},
    {"queues peek", "QUEUE [--limit N]", 1, 1, O_LIMIT, NULL,
     cli_build_queue_peek, cli_print_queue_peek},
    {"pipelines send", "NAME RECORDS|-", 2, 2, 0, NULL, cli_build_pipeline_send,
     cli_print_pipeline_sent},
    {"pipelines list", "", 0, 0, 0, NULL, cli_build_pipelines_list,
     cli_print_pipelines},
    {"pipelines describe", "NAME", 1, 1, 0, NULL, cli_build_pipeline_describe,
     cli_print_pipeline},
    {"cron list", "", 0, 0, 0, NULL, cli_build_crons, cli_print_crons},
    {"cron trigger", "EXPR", 1, 1, 0, NULL, cli_build_cron_trigger,
     cli_print_cron_fired},
};
static const size_t n_verbs = sizeof verbs / sizeof verbs[0];

/* The verb named by the longest run of argv[1..] that names one ("reload",
 * "plugins list", "workflows instances list"); *next is the index of its
 * first argument. */
static const cli_verb *find_verb(int argc, char **argv, int *next) {
  for (int words = 3; words >= 1; words--) {
    if (1 + words > argc)
      continue;
    char name[256] = "";
    for (int w = 0; w < words; w++)
      snprintf(name + strlen(name), sizeof name - strlen(name), "%s%s",
               w ? " " : "", argv[1 + w]);
    for (size_t i = 0; i < n_verbs; i++)
      if (!strcmp(verbs[i].name, name)) {
        *next = 1 + words;
        return &verbs[i];
      }
  }
  *next = 2;
  return NULL;
}

/* ---- usage --------------------------------------------------------------- */

static void verb_usage(FILE *out, const char *prefix, const cli_verb *v) {
  fprintf(out, "%sduro %s %s\n", prefix, v->name, v->args);
}

static void options_usage(FILE *out) {
  fputs("  client options: --url http://HOST:PORT  the host (default: "
        "$DURO_URL, the config)\n"
        "                  --config FILE  read http.listen and "
        "http.token_env from FILE\n"
        "                  --json  print the server's JSON\n"
        "                  --cacert FILE  the CA of an https:// host\n"
        "                  --cert FILE, --key FILE  our certificate and "
        "key, for a\n"
        "                  host that requires one (http.tls.client_ca)\n",
        out);
}

/* The precedence cli_find_host() applies, for the full help. */
static void environment_usage(FILE *out) {
  fputs("  environment: DURO_URL (as --url), DURO_CONFIG (as --config), "
        "DURO_TOKEN,\n"
        "  DURO_CACERT, DURO_CERT, DURO_KEY (as --cacert, --cert, --key)\n"
        "  each is the first found (a flag wins over the environment):\n"
        "    host:   --url; http.listen of --config; $DURO_URL; http.listen "
        "of the\n"
        "            config; http://" CLI_DEFAULT_LISTEN "\n"
        "    config: --config; $DURO_CONFIG; " CLI_LOCAL_CONFIG
        ", else " CLI_DEFAULT_CONFIG ", if it exists\n"
        "    token:  the variable --config's http.token_env names; "
        "$DURO_TOKEN; the\n"
        "            variable the config's http.token_env names; none\n",
        out);
}

void cli_usage(FILE *out) {
  for (size_t i = 0; i < n_verbs; i++)
    verb_usage(out, "       ", &verbs[i]);
  options_usage(out);
  environment_usage(out);
}

static int usage(FILE *out) {
  for (size_t i = 0; i < n_verbs; i++)
    verb_usage(out, i ? "       " : "usage: ", &verbs[i]);
  options_usage(out);
  if (out == stdout)
    environment_usage(out);
  return out == stderr ? CLI_USAGE : CLI_OK;
}

int cli_usage_error(const cli_verb *v, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("duro: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  verb_usage(stderr, "usage: ", v);
  options_usage(stderr);
  return CLI_USAGE;
}

static int run_verb(const cli_verb *v, const cli_args *a) {
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    fprintf(stderr, "duro: cannot initialise libcurl\n");
    return CLI_FAILED;
  }
  cli_ctx c = {.curl = curl_easy_init()};
  if (!strncmp(v->name, "workflows ", 10) && a->n_pos)
    c.wf = a->pos[0];
  cli_req r = {0};
  json_t *answer = NULL;
  int rc = CLI_FAILED;
  if (c.curl)
    rc = v->build(&c, v, a, &r);
  else
    fprintf(stderr, "duro: cannot initialise libcurl\n");
  if (rc == CLI_OK)
    rc = cli_find_host(&c, a);
  if (rc == CLI_OK)
    rc = cli_send_request(&c, &r, &answer);
  if (rc == CLI_OK && a->wait)
    rc = cli_wait_result(&c, a, answer);
  else if (rc == CLI_OK && v->build == cli_build_logs)
    rc = cli_logs_run(&c, a, answer);
  else if (rc == CLI_OK && v->build == cli_build_describe && a->follow) {
    cli_print_answer(v, a, answer);
    fflush(stdout);
    rc = cli_follow_events(&c, a);
  } else if (rc == CLI_OK && v->build == cli_build_bulk && !a->dry_run)
    rc = cli_bulk_follow(&c, a, answer);
  else if (rc == CLI_OK && v->build == cli_build_keys &&
           strcmp(v->name, "keys list"))
    rc = cli_keys_follow(&c, a, answer);
  else if (rc == CLI_OK && v->build == cli_build_workflows_list)
    rc = cli_list_workflows(&c, a, answer);
  else if (rc == CLI_OK)
    cli_print_answer(v, a, answer);
  /* a deploy script must see a refusal in the exit status */
  if (rc == CLI_OK && v->build == cli_build_reload)
    rc = cli_reload_refused(answer);
  json_decref(answer);
  free(r.path);
  free(r.body);
  free(c.base);
  free(c.origin);
  curl_slist_free_all(c.headers);
  curl_easy_cleanup(c.curl);
  curl_global_cleanup();
  return rc;
}

int cli_main(int argc, char **argv) {
  int group_only = !strcmp(argv[1], "workflows") ||
                   !strcmp(argv[1], "plugins") || !strcmp(argv[1], "queues") ||
                   !strcmp(argv[1], "pipelines") || !strcmp(argv[1], "cron") ||
                   !strcmp(argv[1], "hosts") || !strcmp(argv[1], "keys") ||

                   !strcmp(argv[1], "bulk");
  if (argc < 3 && group_only)
    return usage(stderr);
  if (argc >= 3 && cli_is_help(argv[2]))
    return usage(stdout);
  int next;
  const cli_verb *v = find_verb(argc, argv, &next);
  if (!v) {
    fprintf(stderr, "duro: unknown command \"%s", argv[1]);
    for (int i = 2; i < argc && i < 4 && argv[i][0] != '-'; i++)
      fprintf(stderr, " %s", argv[i]);
    fprintf(stderr, "\"\n");
    return usage(stderr);
  }
  cli_args a = {0};
  int rc = cli_parse_args(v, argc, argv, next, &a);
  if (rc == CLI_HELP) {
    verb_usage(stdout, "usage: ", v);
    options_usage(stdout);
    environment_usage(stdout);
    return CLI_OK;
  }
  return rc ? rc : run_verb(v, &a);
}
