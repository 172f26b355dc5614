/* cli_internal.h — what the pieces of the client share: its exit codes and
 * options, one invocation's arguments, request and context, the verb
 * table's entry, and the functions one file calls in another.  Private to
 * cli/ (cli.h is the public face).
 *
 * The pieces, one concept each:
 *   cli.c            the verb table, dispatch and usage
 *   cli_args.c       the options and the parsing of argv
 *   cli_request.c    the pieces of a request: paths, queries, JSON bodies,
 *                    the names checked before anything is sent
 *   cli_host.c       finding the host and its token
 *   cli_http.c       sending a request with libcurl and reading the answer
 *   cli_print.c      what every printer shares, and --json
 *   cli_instances.c  the verbs of one instance: trigger, list, describe,
 *                    status, pause ... send-event
 *   cli_wait.c       trigger --wait
 *   cli_logs.c       instances logs [--follow]
 *   cli_follow.c     instances describe --follow: the event stream
 *   cli_workflows.c  workflows describe and workflows list
 *   cli_plugins.c    reload and plugins list
 *   cli_queues.c     queues send, list, describe, peek
 *   cli_pipelines.c  pipelines send, list, describe
 *   cli_cron.c       cron list and cron trigger
 *   cli_bulk.c       instances bulk (its progress followed), bulk status
 *                    and bulk cancel
 *   cli_keys.c       keys list, and keys rotate and keys count (followed) */
#ifndef DURO_CLI_INTERNAL_H
#define DURO_CLI_INTERNAL_H

#include <curl/curl.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define CLI_LOCAL_CONFIG "duro.yaml"
#define CLI_DEFAULT_CONFIG "config/duro.yaml"
#define CLI_DEFAULT_LISTEN "127.0.0.1:8787"
#define CLI_MAX_POS 4

enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2, CLI_HELP = 3 };

/* ---- arguments ----------------------------------------------------------- */

/* --where terms a list takes (a workflow has at most 16 attributes) */
#define CLI_MAX_WHERE 16
/* --id given again and again: a bulk action's chosen instances, at most
 * as many as the API takes (filter.ids) */
#define CLI_MAX_IDS 1000

enum {
  O_JSON = 1u << 0,
  O_CONFIG = 1u << 1,
  O_URL = 1u << 2,
  O_ID = 1u << 3,
  O_STATUS = 1u << 4,
  O_LIMIT = 1u << 5,
  O_CURSOR = 1u << 6,
  O_FROM = 1u << 7,
  O_COUNT = 1u << 8,
  O_TYPE = 1u << 9,
  O_PAYLOAD = 1u << 10,
  O_DELAY = 1u << 11,
  O_WAIT = 1u << 12,
  O_FULL = 1u << 13,
  O_TIMEOUT = 1u << 14,
  O_ROLLBACK = 1u << 15,
  O_FOLLOW = 1u << 16,
  O_AFTER = 1u << 17,
  O_PREFIX = 1u << 18,
  O_CREATED_AFTER = 1u << 19,
  O_CREATED_BEFORE = 1u << 20,
  O_TERMINATE = 1u << 21,
  O_WHERE = 1u << 22, /* the one option that may be given more than once */
  O_ACTION = 1u << 23,
  O_DRY_RUN = 1u << 24,
  O_CACERT = 1u << 25,
  O_CERT = 1u << 26,
  O_KEY = 1u << 27,
  /* every verb takes these */
  O_COMMON = O_JSON | O_CONFIG | O_URL | O_CACERT | O_CERT | O_KEY
};

typedef struct cli_args {
  const char *pos[CLI_MAX_POS];
  size_t n_pos;   /* counts past CLI_MAX_POS, to say "too many" */
  unsigned given; /* the O_* bits seen */
  int json;
  int full;      /* --full: describe cuts no value short */
  int rollback;  /* --rollback: a terminate's rollbacks run first */
  int follow;    /* --follow: logs, describe go on until the instance ends */
  int terminate; /* --terminate: a delete ends a live instance first */
  int dry_run;   /* --dry-run: a bulk action only counts its matches */
  const char *config, *url, *id, *status, *limit, *cursor, *from, *count, *type,
      *payload, *delay, *timeout, *after, *prefix, *created_after,
      *created_before, *action;
  /* --cacert, --cert, --key: an https:// host's CA, and our certificate
   * and key for a host that asks for one (http.tls.client_ca) */
  const char *cacert, *cert, *key;
  const char *wait; /* --wait: "" without a DURATION */
  /* --where: each a search attribute's term (customer:c42), ANDed */
  const char *where[CLI_MAX_WHERE];
  size_t n_where;
  /* --id on a bulk action: each a chosen instance (id holds the first) */
  const char *ids[CLI_MAX_IDS];
  size_t n_ids;
} cli_args;

typedef struct cli_req {
  const char *method;
  char *path; /* from the host's root: escaped segments and the query */
  char *body; /* JSON text; NULL for none */
} cli_req;

typedef struct cli_ctx {
  CURL *curl;
  char *base;     /* "http://127.0.0.1:8787", no trailing slash */
  char *origin;   /* where base came from: "from --url", ... */
  const char *wf; /* the WF of a workflows verb, for did-you-mean */
  struct curl_slist *headers;
  int headers_added; /* perform's own, once per invocation */
  int64_t sent_ms;   /* trigger --wait: when its create was sent */
  char errbuf[CURL_ERROR_SIZE];
} cli_ctx;

typedef struct cli_verb cli_verb;
struct cli_verb {
  const char *name; /* "workflows trigger", "reload", "plugins list" */
  const char *args; /* its usage after the name */
  size_t min_pos, max_pos;
  unsigned opts;      /* O_* bits it takes beyond O_COMMON */
  const char *action; /* the status a control verb asks for */
  int (*build)(cli_ctx *c, const cli_verb *v, const cli_args *a, cli_req *r);
  void (*print)(const cli_args *a, const json_t *answer);
};

/* ---- cli.c --------------------------------------------------------------- */

/* "duro: <message>" and the verb's usage line; returns CLI_USAGE. */
__attribute__((format(printf, 2, 3))) int cli_usage_error(const cli_verb *v,
                                                          const char *fmt, ...);

/* ---- cli_args.c ---------------------------------------------------------- */

/* "help", "--help" or "-h". */
int cli_is_help(const char *s);
/* argv[first..] into *a, checked against what the verb takes: CLI_OK,
 * CLI_HELP for -h/--help, or CLI_USAGE (said on stderr). */
int cli_parse_args(const cli_verb *v, int argc, char **argv, int first,
                   cli_args *a);
/* A whole number in 1..UINT32_MAX, for --limit and --count. */
int cli_parse_count(const cli_verb *v, const char *what, const char *s,
                    unsigned long long *out);
/* Parses the JSON argument `what`; refuses it, naming it, when invalid. */
int cli_parse_json_arg(const cli_verb *v, const char *what, const char *text,
                       json_t **out);

/* ---- cli_request.c ------------------------------------------------------- */

/* `v` as compact JSON text, malloc'ed. */
char *cli_dump(json_t *v);
/* `s` percent-encoded for a path segment or a query value, malloc'ed. */
char *cli_escape(cli_ctx *c, const char *s);
/* "/workflows/WF/instances", then "/ID" and `tail` when given. */
char *cli_instances_path(cli_ctx *c, const char *wf, const char *id,
                         const char *tail);
/* Appends "?key=value" (or "&key=value") to *path; nothing for no value. */
void cli_query_add(cli_ctx *c, char **path, const char *key, const char *value);
/* Refuses `s` (named `what`) unless it is a name the server takes in a
 * path segment. */
int cli_check_name(const cli_verb *v, const char *what, const char *s);
/* WF, and ID for the verbs that take one (pos[1]). */
int cli_check_instance(const cli_verb *v, const cli_args *a, int has_id);
/* --created-after and --created-before: a time as the API takes it (ms,
 * ISO 8601), or a duration before now ("1h"), as ms into buf; NULL after
 * a usage error (said), or for no text. */
const char *cli_time_arg(const cli_verb *v, const char *option,
                         const char *text, char buf[24]);

/* ---- cli_host.c ---------------------------------------------------------- */

/* Sets c->base, c->origin and the bearer token's header. */
int cli_find_host(cli_ctx *c, const cli_args *a);

/* ---- cli_http.c ---------------------------------------------------------- */

/* Appends header line `h` to c->headers. */
void cli_add_header(cli_ctx *c, const char *h);
/* Sends r; a 2xx JSON answer into *out (CLI_OK), anything else printed as
 * an error (CLI_FAILED). */
int cli_send_request(cli_ctx *c, const cli_req *r, json_t **out);
/* GET path (Accept: accept, Last-Event-ID: last_id unless NULL), its body
 * handed to fn as it comes, however long it lasts; the answer's status
 * into *status (0: none).  Returns curl_easy_perform's CURLcode. */
int cli_stream(cli_ctx *c, const char *path, const char *accept,
               const char *last_id,
               size_t (*fn)(char *p, size_t size, size_t n, void *ud), void *ud,
               long *status);

/* ---- cli_print.c --------------------------------------------------------- */

/* Prints the string at `key` (describe_text: "-" for none). */
void cli_put(const json_t *o, const char *key);
/* The string at `key`, "" when there is none. */
const char *cli_str_or(const json_t *o, const char *key);
/* Whether a status's name is an end: complete, errored, terminated. */
int cli_status_ended(const char *status);
/* Unix ms as "2026-12-07T03:40:01.123Z" on stdout. */
void cli_put_time(int64_t ms);
/* The verb's text, or the server's JSON with --json. */
void cli_print_answer(const cli_verb *v, const cli_args *a, const json_t *r);

/* ---- cli_wait.c ---------------------------------------------------------- */

/* Adds ?wait= for what is left of --wait from `from` on. */
void cli_query_wait(cli_ctx *c, char **path, const cli_args *a, int64_t from);
/* trigger --wait, once the create answered `created`. */
int cli_wait_result(cli_ctx *c, const cli_args *a, const json_t *created);

/* ---- the verbs: each builds its request and prints its answer ------------ */

/* cli_instances.c */
int cli_build_trigger(cli_ctx *c, const cli_verb *v, const cli_args *a,
                      cli_req *r);
void cli_print_created(const cli_args *a, const json_t *r);
int cli_build_list(cli_ctx *c, const cli_verb *v, const cli_args *a,
                   cli_req *r);
void cli_print_list(const cli_args *a, const json_t *r);
int cli_build_describe(cli_ctx *c, const cli_verb *v, const cli_args *a,
                       cli_req *r);
void cli_print_describe(const cli_args *a, const json_t *r);
/* logs: GET …/logs?after=N, its lines printed; with --follow, read again
 * each second from the last line until the instance has ended
 * (cli_logs.c). */
int cli_build_logs(cli_ctx *c, const cli_verb *v, const cli_args *a,
                   cli_req *r);
int cli_logs_run(cli_ctx *c, const cli_args *a, const json_t *first);
/* describe --follow, once the report is printed: the instance's event
 * stream, each item a line as it comes, until the instance ends; a lost
 * connection is taken up again from the last item (cli_follow.c). */
int cli_follow_events(cli_ctx *c, const cli_args *a);

/* export: GET …/export, its document printed as JSON (a file to keep,
 * with or without --json). */
int cli_build_export(cli_ctx *c, const cli_verb *v, const cli_args *a,
                     cli_req *r);
void cli_print_export(const cli_args *a, const json_t *r);
int cli_build_summary(cli_ctx *c, const cli_verb *v, const cli_args *a,
                      cli_req *r);
void cli_print_summary(const cli_args *a, const json_t *r);
int cli_build_control(cli_ctx *c, const cli_verb *v, const cli_args *a,
                      cli_req *r);
void cli_print_status(const cli_args *a, const json_t *r);
int cli_build_event(cli_ctx *c, const cli_verb *v, const cli_args *a,
                    cli_req *r);
void cli_print_event(const cli_args *a, const json_t *r);
int cli_build_delete(cli_ctx *c, const cli_verb *v, const cli_args *a,
                     cli_req *r);
void cli_print_deleted(const cli_args *a, const json_t *r);

/* cli_workflows.c; `workflows list` prints through cli_list_workflows,
 * which asks for each workflow's counts. */
int cli_build_workflow(cli_ctx *c, const cli_verb *v, const cli_args *a,
                       cli_req *r);
void cli_print_workflow(const cli_args *a, const json_t *r);
int cli_build_workflows_list(cli_ctx *c, const cli_verb *v, const cli_args *a,
                             cli_req *r);
int cli_list_workflows(cli_ctx *c, const cli_args *a, const json_t *plugins);

/* cli_plugins.c */
int cli_build_reload(cli_ctx *c, const cli_verb *v, const cli_args *a,
                     cli_req *r);
void cli_print_reload(const cli_args *a, const json_t *r);
/* CLI_FAILED (each refusal said on stderr) when the reload's answer r
 * refused the config or any plugin's build, else CLI_OK. */
int cli_reload_refused(const json_t *r);
int cli_build_plugins(cli_ctx *c, const cli_verb *v, const cli_args *a,
                      cli_req *r);
void cli_print_plugins(const cli_args *a, const json_t *r);
int cli_build_hosts(cli_ctx *c, const cli_verb *v, const cli_args *a,
                    cli_req *r);
void cli_print_hosts(const cli_args *a, const json_t *r);
int cli_build_plugin_resume(cli_ctx *c, const cli_verb *v, const cli_args *a,
                            cli_req *r);
void cli_print_plugin_resume(const cli_args *a, const json_t *r);

/* cli_queues.c */
int cli_build_queue_send(cli_ctx *c, const cli_verb *v, const cli_args *a,
                         cli_req *r);
void cli_print_queue_sent(const cli_args *a, const json_t *r);
int cli_build_queues_list(cli_ctx *c, const cli_verb *v, const cli_args *a,
                          cli_req *r);
void cli_print_queues(const cli_args *a, const json_t *r);
int cli_build_queue_describe(cli_ctx *c, const cli_verb *v, const cli_args *a,
                             cli_req *r);
void cli_print_queue(const cli_args *a, const json_t *r);
int cli_build_queue_peek(cli_ctx *c, const cli_verb *v, const cli_args *a,
                         cli_req *r);
void cli_print_queue_peek(const cli_args *a, const json_t *r);

/* cli_pipelines.c */
int cli_build_pipeline_send(cli_ctx *c, const cli_verb *v, const cli_args *a,
                            cli_req *r);
void cli_print_pipeline_sent(const cli_args *a, const json_t *r);
int cli_build_pipelines_list(cli_ctx *c, const cli_verb *v, const cli_args *a,
                             cli_req *r);
void cli_print_pipelines(const cli_args *a, const json_t *r);
int cli_build_pipeline_describe(cli_ctx *c, const cli_verb *v,
                                const cli_args *a, cli_req *r);
void cli_print_pipeline(const cli_args *a, const json_t *r);

/* cli_bulk.c: instances bulk posts the job, then follows its progress
 * (cli_bulk_follow) until it ends. */
int cli_build_bulk(cli_ctx *c, const cli_verb *v, const cli_args *a,
                   cli_req *r);
int cli_bulk_follow(cli_ctx *c, const cli_args *a, const json_t *created);
int cli_build_bulk_status(cli_ctx *c, const cli_verb *v, const cli_args *a,
                          cli_req *r);
int cli_build_bulk_cancel(cli_ctx *c, const cli_verb *v, const cli_args *a,
                          cli_req *r);
void cli_print_bulk(const cli_args *a, const json_t *r);

/* cli_keys.c: keys rotate and keys count start a run, then follow it
 * (cli_keys_follow) until it is through. */
int cli_build_keys(cli_ctx *c, const cli_verb *v, const cli_args *a,
                   cli_req *r);
void cli_print_keys(const cli_args *a, const json_t *r);
int cli_keys_follow(cli_ctx *c, const cli_args *a, const json_t *started);

/* cli_cron.c */
int cli_build_crons(cli_ctx *c, const cli_verb *v, const cli_args *a,
                    cli_req *r);
void cli_print_crons(const cli_args *a, const json_t *r);
int cli_build_cron_trigger(cli_ctx *c, const cli_verb *v, const cli_args *a,
                           cli_req *r);
void cli_print_cron_fired(const cli_args *a, const json_t *r);

#endif
