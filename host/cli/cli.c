/* cli.c — `duro workflows …`, `duro plugins …`, `duro queues …`, `duro
 * cron …`: the command-line client of a running host's HTTP API, so that
 * triggering, listing, inspecting and steering instances, sending to a
 * queue or looking at its messages, or firing a cron trigger, takes one
 * command instead of a curl
 * line.
 *
 * One invocation sends one request.  Its course: find the verb in
 * verbs[]; parse the arguments (options may come anywhere, "--" ends
 * them); build the request locally, which is where PARAMS and --payload
 * must prove to be JSON, so nothing malformed is ever sent; then find the
 * host and its token, flags before the environment (DURO_URL, DURO_CONFIG,
 * DURO_TOKEN) before ./duro.yaml or config/duro.yaml (find_host); send the
 * request with libcurl; print the answer, as the server's JSON with
 * --json, else as text (describe.c renders the list table and the
 * describe report).  An error names the URL asked and where it came from,
 * and an unknown workflow's 404 is followed by a GET /plugins, for the
 * nearest workflow that host serves.
 *
 * Exit status: 0 done; 1 the server answered an error ("duro: CODE:
 * MESSAGE") or could not be reached; 2 a usage error, which includes
 * invalid JSON, a WF, ID, --id or --type the server would refuse, a broken
 * config and an unset token variable, all found before anything is sent. */
#include "cli.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "describe.h"
#include "duration.h"
#include "ids.h"
#include "suggest.h"
#include "util.h"

#define CLI_LOCAL_CONFIG "duro.yaml"
#define CLI_DEFAULT_CONFIG "config/duro.yaml"
#define CLI_DEFAULT_LISTEN "127.0.0.1:8787"
#define CLI_MAX_POS 4

enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2, CLI_HELP = 3 };

/* ---- arguments ----------------------------------------------------------- */

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
  O_COMMON = O_JSON | O_CONFIG | O_URL /* every verb takes these */
};

typedef struct cli_args {
  const char *pos[CLI_MAX_POS];
  size_t n_pos;   /* counts past CLI_MAX_POS, to say "too many" */
  unsigned given; /* the O_* bits seen */
  int json;
  int full; /* --full: describe cuts no value short */
  const char *config, *url, *id, *status, *limit, *cursor, *from, *count, *type,
      *payload, *delay;
  const char *wait; /* --wait: "" without a DURATION */
} cli_args;

static const struct cli_option {
  const char *name;
  unsigned bit;
  size_t offset; /* of its value in cli_args; unused for the flags */
} options[] = {
    {"--json", O_JSON, 0},
    {"--full", O_FULL, 0},
    {"--config", O_CONFIG, offsetof(cli_args, config)},
    {"--url", O_URL, offsetof(cli_args, url)},
    {"--id", O_ID, offsetof(cli_args, id)},
    {"--status", O_STATUS, offsetof(cli_args, status)},
    {"--limit", O_LIMIT, offsetof(cli_args, limit)},
    {"--cursor", O_CURSOR, offsetof(cli_args, cursor)},
    {"--from", O_FROM, offsetof(cli_args, from)},
    {"--count", O_COUNT, offsetof(cli_args, count)},
    {"--type", O_TYPE, offsetof(cli_args, type)},
    {"--payload", O_PAYLOAD, offsetof(cli_args, payload)},
    {"--delay", O_DELAY, offsetof(cli_args, delay)},
    {"--wait", O_WAIT, offsetof(cli_args, wait)},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

/* ---- the request and its context ---------------------------------------- */

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

/* "duro: <message>" and the verb's usage line; returns CLI_USAGE. */
__attribute__((format(printf, 2, 3))) static int
usage_error(const cli_verb *v, const char *fmt, ...);

/* ---- parsing ------------------------------------------------------------- */

static int is_help(const char *s) {
  return !strcmp(s, "help") || !strcmp(s, "--help") || !strcmp(s, "-h");
}

static const struct cli_option *find_option(const char *arg, size_t len) {
  for (size_t i = 0; i < N_OPTIONS; i++)
    if (strlen(options[i].name) == len && !strncmp(options[i].name, arg, len))
      return &options[i];
  return NULL;
}

/* One "--name VALUE", "--name=VALUE" or "--json" at argv[*i]. */
static int parse_option(const cli_verb *v, cli_args *a, int argc, char **argv,
                        int *i) {
  const char *arg = argv[*i], *eq = strchr(arg, '=');
  size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
  const struct cli_option *o = find_option(arg, len);
  if (!o)
    return usage_error(v, "unknown option \"%s\"", arg);
  if (a->given & o->bit)
    return usage_error(v, "%s given twice", o->name);
  a->given |= o->bit;
  if (o->bit == O_JSON || o->bit == O_FULL) {
    *(o->bit == O_JSON ? &a->json : &a->full) = 1;
    return eq ? usage_error(v, "%s takes no value", o->name) : CLI_OK;
  }
  if (o->bit == O_WAIT) {
    /* Its DURATION is optional: the next argument is it only when it
     * reads as one ("30s", "2 minutes", "500"). */
    int64_t ms;
    const char *next = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (eq)
      a->wait = eq + 1;
    else if (next && next[0] != '-' && duration_parse(next, &ms) == 0)
      a->wait = argv[++*i];
    else
      a->wait = "";
    if (eq && duration_parse(a->wait, &ms) != 0)
      return usage_error(v, "--wait takes a duration such as 30s, not \"%s\"",
                         a->wait);
    return CLI_OK;
  }
  const char *value = eq ? eq + 1 : *i + 1 < argc ? argv[++*i] : NULL;
  if (!value)
    return usage_error(v, "%s needs a value", o->name);
  *(const char **)(void *)((char *)a + o->offset) = value;
  return CLI_OK;
}

/* Checks what parse_args collected against what the verb takes. */
static int check_args(const cli_verb *v, const cli_args *a) {
  if (a->n_pos < v->min_pos)
    return usage_error(v, "missing arguments");
  if (a->n_pos > v->max_pos)
    return usage_error(v, "too many arguments");
  for (size_t i = 0; i < a->n_pos; i++)
    if (!a->pos[i][0])
      return usage_error(v, "argument %zu is empty", i + 1);
  unsigned extra = a->given & ~(v->opts | O_COMMON);
  for (size_t i = 0; i < N_OPTIONS; i++)
    if (extra & options[i].bit)
      return usage_error(v, "%s does not apply to \"%s\"", options[i].name,
                         /* "instances list", as users name it */
                         strncmp(v->name, "workflows ", 10) ? v->name
                                                            : v->name + 10);
  return CLI_OK;
}

static int parse_args(const cli_verb *v, int argc, char **argv, int first,
                      cli_args *a) {
  int options_done = 0;
  for (int i = first; i < argc; i++) {
    const char *s = argv[i];
    if (!options_done && !strcmp(s, "--")) {
      options_done = 1;
    } else if (!options_done && s[0] == '-' && s[1]) {
      if (!strcmp(s, "-h") || !strcmp(s, "--help"))
        return CLI_HELP;
      int rc = parse_option(v, a, argc, argv, &i);
      if (rc)
        return rc;
    } else {
      if (a->n_pos < CLI_MAX_POS)
        a->pos[a->n_pos] = s;
      a->n_pos++;
    }
  }
  return check_args(v, a);
}

/* A whole number in 1..UINT32_MAX, for --limit and --count. */
static int parse_count(const cli_verb *v, const char *what, const char *s,
                       unsigned long long *out) {
  char *end;
  errno = 0;
  *out = strtoull(s, &end, 10);
  if (s[0] < '0' || s[0] > '9' || *end || errno || *out == 0 ||
      *out > UINT32_MAX)
    return usage_error(v, "%s must be a whole number from 1 to %u, not \"%s\"",
                       what, UINT32_MAX, s);
  return CLI_OK;
}

/* Parses the JSON argument `what`; refuses it, naming it, when invalid. */
static int parse_json_arg(const cli_verb *v, const char *what, const char *text,
                          json_t **out) {
  json_error_t e;
  *out = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
  if (*out)
    return CLI_OK;
  return usage_error(v, "%s is not valid JSON: %s (at character %d)", what,
                     e.text, e.position);
}

/* ---- building requests --------------------------------------------------- */

static char *dump(json_t *v) {
  char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  if (!s) {
    fprintf(stderr, "duro: out of memory\n");
    abort();
  }
  return s;
}

/* `s` percent-encoded for a path segment or a query value, malloc'ed. */
static char *escape(cli_ctx *c, const char *s) {
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
static char *instances_path(cli_ctx *c, const char *wf, const char *id,
                            const char *tail) {
  char *w = escape(c, wf), *i = id ? escape(c, id) : NULL;
  char *p = xasprintf("/workflows/%s/instances%s%s%s", w, i ? "/" : "",
                      i ? i : "", tail ? tail : "");
  free(w);
  free(i);
  return p;
}

static void query_add(cli_ctx *c, char **path, const char *key,
                      const char *value) {
  if (!value)
    return;
  char *e = escape(c, value);
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
static int check_name(const cli_verb *v, const char *what, const char *s) {
  if (duro_instance_id_valid(s))
    return CLI_OK;
  return usage_error(v,
                     "%s must be 1-100 characters of A-Z a-z 0-9 _ . : -, "
                     "not \"%s\"",
                     what, s);
}

/* WF, and ID for the verbs that take one (pos[1]). */
static int check_instance(const cli_verb *v, const cli_args *a, int has_id) {
  if (check_name(v, "WF", a->pos[0]))
    return CLI_USAGE;
  return has_id ? check_name(v, "ID", a->pos[1]) : CLI_OK;
}

static void query_wait(cli_ctx *c, char **path, const cli_args *a,
                       int64_t from);

static int build_trigger(cli_ctx *c, const cli_verb *v, const cli_args *a,
                         cli_req *r) {
  json_t *params = NULL;
  if (check_instance(v, a, 0) || (a->id && check_name(v, "--id", a->id)))
    return CLI_USAGE;
  if (a->n_pos > 1 && parse_json_arg(v, "PARAMS", a->pos[1], &params))
    return CLI_USAGE;
  json_t *body = json_object();
  if (a->id)
    json_object_set_new(body, "id", json_string(a->id));
  if (params)
    json_object_set_new(body, "params", params);
  r->method = "POST";
  r->path = instances_path(c, a->pos[0], NULL, NULL);
  if (a->wait) { /* the create answers once it ends: one round trip */
    c->sent_ms = clock_mono_ms();
    query_wait(c, &r->path, a, c->sent_ms);
  }
  r->body = dump(body);
  json_decref(body);
  return CLI_OK;
}

static int build_list(cli_ctx *c, const cli_verb *v, const cli_args *a,
                      cli_req *r) {
  unsigned long long limit;
  if (check_instance(v, a, 0))
    return CLI_USAGE;
  if (a->limit && parse_count(v, "--limit", a->limit, &limit))
    return CLI_USAGE;
  r->method = "GET";
  r->path = instances_path(c, a->pos[0], NULL, NULL);
  query_add(c, &r->path, "status", a->status);
  query_add(c, &r->path, "limit", a->limit);
  query_add(c, &r->path, "cursor", a->cursor);
  return CLI_OK;
}

static int build_workflow(cli_ctx *c, const cli_verb *v, const cli_args *a,
                          cli_req *r) {
  if (check_instance(v, a, 0))
    return CLI_USAGE;
  char *w = escape(c, a->pos[0]);
  r->method = "GET";
  r->path = xasprintf("/workflows/%s", w);
  free(w);
  return CLI_OK;
}

static int build_describe(cli_ctx *c, const cli_verb *v, const cli_args *a,
                          cli_req *r) {
  if (check_instance(v, a, 1))
    return CLI_USAGE;
  r->method = "GET";
  r->path = instances_path(c, a->pos[0], a->pos[1], NULL);
  return CLI_OK;
}

/* restart's {"name", "count"?} from --from and --count; NULL without. */
static int restart_from(const cli_verb *v, const cli_args *a, json_t **out) {
  unsigned long long count = 0;
  *out = NULL;
  if (a->count && !a->from)
    return usage_error(v, "--count needs --from");
  if (!a->from)
    return CLI_OK;
  if (a->count && parse_count(v, "--count", a->count, &count))
    return CLI_USAGE;
  json_t *name = json_string(a->from);
  if (!name)
    return usage_error(v, "--from is not valid UTF-8");
  *out = json_pack("{s:o}", "name", name);
  if (count)
    json_object_set_new(*out, "count", json_integer((json_int_t)count));
  return CLI_OK;
}

/* pause, resume, terminate, restart: PATCH …/status. */
static int build_control(cli_ctx *c, const cli_verb *v, const cli_args *a,
                         cli_req *r) {
  json_t *from;
  if (check_instance(v, a, 1) || restart_from(v, a, &from))
    return CLI_USAGE;
  json_t *body = json_pack("{s:s}", "status", v->action);
  if (from)
    json_object_set_new(body, "from", from);
  r->method = "PATCH";
  r->path = instances_path(c, a->pos[0], a->pos[1], "/status");
  r->body = dump(body);
  json_decref(body);
  return CLI_OK;
}

static int build_event(cli_ctx *c, const cli_verb *v, const cli_args *a,
                       cli_req *r) {
  const char *payload = a->payload ? a->payload : "null";
  json_t *parsed;
  if (!a->type)
    return usage_error(v, "send-event needs --type T");
  if (check_instance(v, a, 1) || check_name(v, "--type", a->type))
    return CLI_USAGE;
  if (parse_json_arg(v, "--payload", payload, &parsed))
    return CLI_USAGE;
  json_decref(parsed); /* valid: the text goes as the user wrote it */
  char *type = escape(c, a->type);
  char *tail = xasprintf("/events/%s", type);
  r->method = "POST";
  r->path = instances_path(c, a->pos[0], a->pos[1], tail);
  r->body = xstrdup(payload);
  free(tail);
  free(type);
  return CLI_OK;
}

/* ---- finding the host ---------------------------------------------------- */

static void add_header(cli_ctx *c, const char *h) {
  struct curl_slist *l = curl_slist_append(c->headers, h);
  if (!l) {
    fprintf(stderr, "duro: out of memory\n");
    abort();
  }
  c->headers = l;
}

/* `url` (from `what`: "--url" or "DURO_URL") as the base, without
 * trailing slashes. */
static int base_from_url(cli_ctx *c, const char *what, const char *url) {
  if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
    fprintf(stderr,
            "duro: %s must start with http:// or https://, not \"%s\"\n", what,
            url);
    return CLI_USAGE;
  }
  size_t len = strlen(url);
  while (len && url[len - 1] == '/')
    len--;
  c->base = xstrndup(url, len);
  return CLI_OK;
}

/* http.listen is "HOST:PORT" or "PORT"; a wildcard host is reached on the
 * loopback address of its family. */
static void base_from_listen(cli_ctx *c, const char *listen) {
  const char *colon = strrchr(listen, ':');
  const char *port = colon ? colon + 1 : listen;
  char *host = colon ? xstrndup(listen, (size_t)(colon - listen)) : NULL;
  const char *h = host;
  if (!h || !*h || !strcmp(h, "0.0.0.0") || !strcmp(h, "*"))
    h = "127.0.0.1";
  else if (!strcmp(h, "[::]"))
    h = "[::1]";
  c->base = xasprintf("http://%s:%s", h, port);
  free(host);
}

/* An environment variable, NULL when unset or empty (an empty one is
 * what `DURO_URL= duro ...` writes to switch it off). */
static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

static void add_bearer(cli_ctx *c, const char *token) {
  char *h = xasprintf("Authorization: Bearer %s", token);
  add_header(c, h);
  free(h);
}

/* The bearer token, the first set of: the variable --config's
 * http.token_env names, $DURO_TOKEN, the variable the config's (found
 * otherwise) names.  None while the config names one is a usage error:
 * the host would answer 401. */
static int add_token(cli_ctx *c, const cli_args *a, const config *cfg) {
  const char *var = cfg ? cfg->http.token_env : NULL;
  const char *token = NULL;
  if (a->config && var)
    token = env(var);
  if (!token)
    token = env("DURO_TOKEN");
  if (!token && var)
    token = env(var);
  if (token) {
    add_bearer(c, token);
    return CLI_OK;
  }
  if (!var)
    return CLI_OK;
  fprintf(stderr,
          "duro: %s sets http.token_env to %s, but %s is not set (nor is "
          "DURO_TOKEN)\n",
          cfg->file, var, var);
  return CLI_USAGE;
}

/* The config read when neither --config nor $DURO_CONFIG names one: the
 * first that exists of ./duro.yaml (a plugin's own folder, as the
 * template lays it out) and config/duro.yaml (this repository's); NULL
 * for none. */
static const char *default_config(void) {
  static const char *const paths[] = {CLI_LOCAL_CONFIG, CLI_DEFAULT_CONFIG};
  for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
    if (access(paths[i], F_OK) == 0)
      return paths[i];
  return NULL;
}

/* Where the host is and its token; a command-line flag wins over the
 * environment, which wins over a config found in the current directory
 * (usage() lists it):
 *   the config:  --config; $DURO_CONFIG; duro.yaml, else config/duro.yaml,
 *                if it exists
 *   the URL:     --url; --config's http.listen; $DURO_URL; the config's
 *                http.listen; 127.0.0.1:8787
 *   the token:   --config's http.token_env variable; $DURO_TOKEN; the
 *                config's http.token_env variable; none
 * c->origin says which gave the URL, for the errors that name it. */
static int find_host(cli_ctx *c, const cli_args *a) {
  const char *path = a->config ? a->config : env("DURO_CONFIG");
  if (!path)
    path = default_config();
  config *cfg = NULL;
  char err[1024];
  if (path && !(cfg = config_load(path, err, sizeof err))) {
    fprintf(stderr, "duro: %s%s\n", err,
            !a->config && env("DURO_CONFIG") ? " (from DURO_CONFIG)" : "");
    return CLI_USAGE;
  }
  int rc = CLI_OK;
  if (a->url) {
    rc = base_from_url(c, "--url", a->url);
    c->origin = xstrdup("from --url");
  } else if (env("DURO_URL") && !a->config) {
    rc = base_from_url(c, "DURO_URL", env("DURO_URL"));
    c->origin = xstrdup("from DURO_URL");
  } else if (cfg) {
    base_from_listen(c, cfg->http.listen);
    c->origin = xasprintf("from http.listen in %s", path);
  } else {
    base_from_listen(c, CLI_DEFAULT_LISTEN);
    c->origin = xstrdup("the default: no --url, DURO_URL, " CLI_LOCAL_CONFIG
                        " or " CLI_DEFAULT_CONFIG " here");
  }
  if (rc == CLI_OK)
    rc = add_token(c, a, cfg);
  config_free(cfg);
  return rc;
}

/* ---- sending ------------------------------------------------------------- */

typedef struct cli_buf {
  char *data; /* NUL-terminated */
  size_t len;
} cli_buf;

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
  cli_buf *b = ud;
  size_t len = size * n;
  b->data = xrealloc(b->data, b->len + len + 1);
  memcpy(b->data + b->len, p, len);
  b->len += len;
  b->data[b->len] = '\0';
  return len;
}

/* Whether the host of the base URL is a loopback name or address. */
static int is_loopback(const char *base) {
  const char *h = strstr(base, "://");
  h = h ? h + 3 : base;
  size_t authority = strcspn(h, "/?#");
  const char *at = memchr(h, '@', authority);
  while (at) { /* past any user:password@ */
    authority -= (size_t)(at + 1 - h);
    h = at + 1;
    at = memchr(h, '@', authority);
  }
  size_t n = h[0] == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":/?#");
  return (n == 9 && !strncasecmp(h, "localhost", 9)) ||
         (n >= 4 && !strncmp(h, "127.", 4) && strspn(h, "0123456789.") == n) ||
         (n == 5 && !strncmp(h, "[::1]", 5));
}

static CURLcode perform(cli_ctx *c, const cli_req *r, cli_buf *b,
                        long *status) {
  CURL *h = c->curl;
  char *url = xasprintf("%s%s", c->base, r->path);
  if (!c->headers_added) { /* --wait sends more than one request */
    add_header(c, "Accept: application/json");
    add_header(c, "Content-Type: application/json");
    add_header(c, "Expect:"); /* no 100-continue round trip for big bodies */
    c->headers_added = 1;
  }
  curl_easy_setopt(h, CURLOPT_URL, url);
  /* libcurl sends requests through the proxy of http_proxy/all_proxy
   * unless no_proxy exempts the host, and it does not exempt loopback: a
   * user with a proxy set could not reach the default 127.0.0.1:8787 (the
   * proxy's own loopback is another machine's), and the proxy would see the
   * bearer token.  A loopback host is always asked directly. */
  if (is_loopback(c->base))
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
  if (r->body) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(r->body));
  } else {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L); /* after a POST */
  }
  /* NULL undoes an earlier request's method on this handle. */
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST,
                   strcmp(r->method, r->body ? "POST" : "GET") ? r->method
                                                               : NULL);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "duro-cli");
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
  CURLcode rc = curl_easy_perform(h);
  if (rc == CURLE_OK)
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
  free(url);
  return rc;
}

/* What follows an unknown workflow's 404, malloc'ed: the workflow the host
 * serves nearest to c->wf ("did you mean \"order-flow\"?"), else the ones
 * it serves, from GET /plugins' "serves"; NULL when that cannot be read.
 * A typo and a client talking to another host than the user thinks look
 * alike from the 404 alone. */
static char *workflow_hint(cli_ctx *c) {
  char path[] = "/plugins";
  cli_req r = {.method = "GET", .path = path};
  cli_buf b = {0};
  long status = 0;
  json_t *v = NULL;
  char *hint = NULL;
  if (!c->wf || perform(c, &r, &b, &status) != CURLE_OK || status != 200 ||
      !(v = json_loadb(b.data, b.len, 0, NULL)))
    goto done;
  const char *names[64];
  size_t n = 0, i, k;
  const json_t *p, *w;
  json_array_foreach(json_object_get(v, "plugins"), i, p) {
    json_array_foreach(
        json_object_get(json_object_get(p, "serves"), "workflows"), k, w) {
      if (json_string_value(w) && n < sizeof names / sizeof *names)
        names[n++] = json_string_value(w);
    }
  }
  const char *near = suggest_nearest(c->wf, strlen(c->wf), names, n);
  if (near) {
    hint = xasprintf("did you mean \"%s\"?", near);
  } else if (n == 0) {
    hint = xstrdup("it serves no workflow");
  } else {
    hint = xstrdup("it serves");
    for (i = 0; i < n && i < 8; i++) {
      char *more = xasprintf("%s%s \"%s\"", hint, i ? "," : "", names[i]);
      free(hint);
      hint = more;
    }
  }
done:
  json_decref(v);
  free(b.data);
  return hint;
}

/* A 2xx JSON answer into *out; anything else printed as an error.  An
 * unknown workflow's says which host was asked and what it serves. */
static int read_answer(cli_ctx *c, long status, const cli_buf *b,
                       json_t **out) {
  json_t *v =
      b->len ? json_loadb(b->data, b->len, JSON_DECODE_ANY, NULL) : NULL;
  if (status >= 200 && status < 300 && v) {
    *out = v;
    return CLI_OK;
  }
  const json_t *err = json_object_get(v, "error");
  const char *code = json_string_value(json_object_get(err, "code"));
  const char *message = json_string_value(json_object_get(err, "message"));
  char *hint = NULL;
  if (code && !strcmp(code, "workflow.not_found"))
    hint = workflow_hint(c);
  fputs("duro: ", stderr);
  if (code && message) {
    describe_text(stderr, code, 0, 0);
    fputs(": ", stderr);
    describe_text(stderr, message, 0, 0);
    /* The id was taken before (by a client, a cron tick, a queue
     * handler): say that this request made nothing. */
    if (!strcmp(code, "instance.already_exists"))
      fputs(": nothing was created", stderr);
    if (!strcmp(code, "workflow.not_found")) {
      fprintf(stderr, " (at %s, %s", c->base, c->origin);
      if (hint) {
        fputs("; ", stderr);
        describe_text(stderr, hint, 0, 0);
      }
      fputc(')', stderr);
    }
  } else {
    fprintf(stderr, "%s answered HTTP %ld%s", c->base, status,
            status >= 200 && status < 300 ? " without JSON" : "");
    if (b->len) {
      fputs(": ", stderr);
      describe_text(stderr, b->data, 200, 0);
    }
  }
  fputc('\n', stderr);
  free(hint);
  json_decref(v);
  return CLI_FAILED;
}

static int send_request(cli_ctx *c, const cli_req *r, json_t **out) {
  cli_buf b = {0};
  long status = 0;
  c->errbuf[0] = '\0';
  CURLcode cc = perform(c, r, &b, &status);
  int rc;
  if (cc != CURLE_OK) {
    fprintf(stderr,
            "duro: cannot reach %s (%s): %s (is \"duro run\" running "
            "there?)\n",
            c->base, c->origin,
            c->errbuf[0] ? c->errbuf : curl_easy_strerror(cc));
    rc = CLI_FAILED;
  } else {
    rc = read_answer(c, status, &b, out);
  }
  free(b.data);
  return rc;
}

/* ---- printing answers ---------------------------------------------------- */

static void put(const json_t *o, const char *key) {
  describe_text(stdout, json_string_value(json_object_get(o, key)), 0, 0);
}

/* The string at `key`, "" when there is none. */
static const char *str_or(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

/* The workflow's instances by status, its backlog and how long its
 * oldest queued instance has waited. */
static void print_workflow(const cli_args *a, const json_t *r) {
  (void)a;
  fputs("workflow:      ", stdout);
  put(r, "name");
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

static void print_created(const cli_args *a, const json_t *r) {
  (void)a;
  fputs("created ", stdout);
  put(r, "id");
  fputs(" (", stdout);
  put(r, "status");
  fputs(")\n", stdout);
}

static void print_status(const cli_args *a, const json_t *r) {
  (void)a;
  put(r, "id");
  fputs(": ", stdout);
  put(r, "status");
  fputc('\n', stdout);
}

static void print_event(const cli_args *a, const json_t *r) {
  (void)a;
  fputs("sent event ", stdout);
  put(r, "type");
  fputs(" to ", stdout);
  put(r, "id");
  fputc('\n', stdout);
}

static void print_list(const cli_args *a, const json_t *r) {
  (void)a;
  describe_list(stdout, r);
}

static void print_describe(const cli_args *a, const json_t *r) {
  describe_instance(stdout, r, clock_wall_ms(), a->full);
}

static void print_answer(const cli_verb *v, const cli_args *a,
                         const json_t *r) {
  if (!a->json) {
    v->print(a, r);
    return;
  }
  char *s = json_dumps(r, JSON_INDENT(2) | JSON_ENCODE_ANY);
  if (s)
    puts(s);
  free(s);
}

/* ---- the verbs ----------------------------------------------------------- */

/* The longest ?wait= one request of --wait asks for (the server clamps it
 * to http.max_wait too): well inside perform's 120 s timeout. */
#define CLI_WAIT_STEP_MS 50000

static int ended(const char *status) {
  return status && (!strcmp(status, "complete") || !strcmp(status, "errored") ||
                    !strcmp(status, "terminated"));
}

/* --wait's DURATION in ms, -1 without one (until it ends). */
static int64_t wait_limit(const cli_args *a) {
  int64_t limit = -1;
  if (*a->wait)
    duration_parse(a->wait, &limit); /* checked by parse_option */
  return limit;
}

/* Adds ?wait= for what is left of --wait from `from` on, at most
 * CLI_WAIT_STEP_MS. */
static void query_wait(cli_ctx *c, char **path, const cli_args *a,
                       int64_t from) {
  int64_t limit = wait_limit(a);
  int64_t left = limit < 0 ? CLI_WAIT_STEP_MS : from + limit - clock_mono_ms();
  if (left > CLI_WAIT_STEP_MS)
    left = CLI_WAIT_STEP_MS;
  if (left < 0)
    left = 0;
  char ms[32];
  snprintf(ms, sizeof ms, "%lldms", (long long)left);
  query_add(c, path, "wait", ms);
}

/* `trigger --wait [DURATION]`: the create waited for the end already
 * (POST ?wait=, its answer is `created`); while the instance has not
 * ended and DURATION has not run out (a create's wait is at most
 * CLI_WAIT_STEP_MS and http.max_wait), GETs it with ?wait=.  Then prints
 * its output (0), or its error (1).  With --json, the instance's light
 * status whatever it is. */
static int wait_result(cli_ctx *c, const cli_args *a, const json_t *created) {
  const char *id = json_string_value(json_object_get(created, "id"));
  int64_t limit = wait_limit(a);
  json_t *st = json_incref((json_t *)created);
  int rc = CLI_OK;
  for (;;) {
    const char *status = json_string_value(json_object_get(st, "status"));
    if (ended(status) || (limit >= 0 && clock_mono_ms() >= c->sent_ms + limit))
      break;
    json_decref(st);
    st = NULL;
    cli_req r = {.method = "GET"};
    r.path = instances_path(c, a->pos[0], id, NULL);
    query_wait(c, &r.path, a, c->sent_ms);
    rc = send_request(c, &r, &st);
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
    if (!ended(status)) {
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
        char *text = dump((json_t *)err);
        describe_text(stderr, text, 200, 0);
        free(text);
      }
    }
    fputc('\n', stderr);
  }
  json_decref(st);
  return rc;
}

static int build_summary(cli_ctx *c, const cli_verb *v, const cli_args *a,
                         cli_req *r) {
  if (check_instance(v, a, 1))
    return CLI_USAGE;
  r->method = "GET";
  r->path = instances_path(c, a->pos[0], a->pos[1], "/status");
  return CLI_OK;
}

/* "ID: STATUS", then the output or the error when it has ended. */
static void print_summary(const cli_args *a, const json_t *r) {
  print_status(a, r);
  const char *keys[] = {"output", "error"};
  for (size_t i = 0; i < 2; i++) {
    const json_t *v = json_object_get(r, keys[i]);
    if (!v || json_is_null(v))
      continue;
    char *text = dump((json_t *)v);
    printf("%s: ", keys[i]);
    describe_text(stdout, text, 0, 0);
    fputc('\n', stdout);
    free(text);
  }
}

/* ---- plugins ----------------------------------------------------------- */

static int build_reload(cli_ctx *c, const cli_verb *v, const cli_args *a,
                        cli_req *r) {
  (void)v;
  r->method = "POST";
  r->body = xstrdup("{}");
  if (a->n_pos) {
    char *n = escape(c, a->pos[0]);
    r->path = xasprintf("/plugins/%s/reload", n);
    free(n);
  } else {
    r->path = xstrdup("/plugins/reload");
  }
  return CLI_OK;
}

static int build_plugins(cli_ctx *c, const cli_verb *v, const cli_args *a,
                         cli_req *r) {
  (void)c, (void)v, (void)a;
  r->method = "GET";
  r->path = xstrdup("/plugins");
  return CLI_OK;
}

/* The config read again: applied (each change), unchanged or refused
 * (why, and each change that needs a restart). */
static void print_reload_config(const json_t *c) {
  if (!c)
    return;
  printf("config %s: ", json_string_value(json_object_get(c, "file")));
  put(c, "status");
  const char *err = json_string_value(json_object_get(c, "error"));
  if (err)
    printf(": %s", err);
  fputc('\n', stdout);
  size_t i;
  const json_t *v;
  const json_t *restart = json_object_get(c, "restart");
  json_array_foreach(restart, i, v)
      printf("  needs a restart: %s\n", json_string_value(v));
  if (!restart)
    json_array_foreach(json_object_get(c, "changes"), i, v)
        printf("  %s\n", json_string_value(v));
}

/* One line per plugin reloaded: loaded, unchanged or refused (and why),
 * after what became of the config file. */
static void print_reload(const cli_args *a, const json_t *r) {
  (void)a;
  print_reload_config(json_object_get(r, "config"));
  size_t i;
  const json_t *p;
  json_array_foreach(json_object_get(r, "plugins"), i, p) {
    put(p, "name");
    fputs(": ", stdout);
    put(p, "status");
    const char *build = json_string_value(json_object_get(p, "build"));
    const char *prev = json_string_value(json_object_get(p, "previous"));
    const char *err = json_string_value(json_object_get(p, "error"));
    if (build && prev && strcmp(build, prev) != 0)
      printf(" build %s (was %s)", build, prev);
    else if (build)
      printf(" build %s", build);
    if (err) {
      fputs(": ", stdout);
      describe_text(stdout, err, 0, 0);
    }
    fputc('\n', stdout);
  }
}

/* Each plugin and its loaded builds, the newest marked. */
static void print_plugins(const cli_args *a, const json_t *r) {
  (void)a;
  size_t i, k;
  const json_t *p, *b;
  json_array_foreach(json_object_get(r, "plugins"), i, p) {
    put(p, "name");
    fputs("  ", stdout);
    put(p, "path");
    fputc('\n', stdout);
    json_array_foreach(json_object_get(p, "builds"), k, b) {
      char t[32];
      fputs("  ", stdout);
      put(b, "build");
      printf(
          "  loaded %s  %" JSON_INTEGER_FORMAT " pinned instance(s)%s\n",
          describe_time(t, json_integer_value(json_object_get(b, "loaded_ms"))),
          json_integer_value(json_object_get(b, "instances")),
          json_is_true(json_object_get(b, "newest")) ? "  newest" : "");
    }
  }
}

/* ---- workflows list ---------------------------------------------------- */

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
 * answer to list_workflows instead of printing it. */
static int build_workflows_list(cli_ctx *c, const cli_verb *v,
                                const cli_args *a, cli_req *r) {
  return build_plugins(c, v, a, r);
}

/* `workflows list`: GET /plugins names the workflows each plugin serves
 * (its "serves"), then GET /workflows/{wf} counts each one's instances;
 * prints them, or with --json their answers, each with its "plugin". */
static int list_workflows(cli_ctx *c, const cli_args *a,
                          const json_t *plugins) {
  json_t *all = json_array();
  int rc = CLI_OK;
  size_t i, k;
  const json_t *p, *w;
  json_array_foreach(json_object_get(plugins, "plugins"), i, p) {
    const json_t *serves = json_object_get(p, "serves");
    json_array_foreach(json_object_get(serves, "workflows"), k, w) {
      if (!json_string_value(w))
        continue;
      char *e = escape(c, json_string_value(w));
      cli_req r = {.method = "GET", .path = xasprintf("/workflows/%s", e)};
      json_t *stats = NULL;
      rc = send_request(c, &r, &stats);
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

/* ---- queues ------------------------------------------------------------ */

/* "/queues/Q" and `tail`, after checking Q as the server would. */
static int queue_path(cli_ctx *c, const cli_verb *v, const char *q,
                      const char *tail, char **out) {
  if (check_name(v, "QUEUE", q))
    return CLI_USAGE;
  char *e = escape(c, q);
  *out = xasprintf("/queues/%s%s", e, tail);
  free(e);
  return CLI_OK;
}

static int build_queue_send(cli_ctx *c, const cli_verb *v, const cli_args *a,
                            cli_req *r) {
  json_t *body;
  unsigned long long delay = 0;
  /* 0 is a valid delay, which parse_count refuses */
  if (a->delay && strcmp(a->delay, "0") &&
      parse_count(v, "--delay", a->delay, &delay))
    return CLI_USAGE;
  if (parse_json_arg(v, "BODY", a->pos[1], &body))
    return CLI_USAGE;
  if (queue_path(c, v, a->pos[0], "/messages", &r->path)) {
    json_decref(body);
    return CLI_USAGE;
  }
  json_t *msg = json_pack("{s:o}", "body", body);
  if (delay)
    json_object_set_new(msg, "delay_seconds", json_integer((json_int_t)delay));
  r->method = "POST";
  r->body = dump(msg);
  json_decref(msg);
  return CLI_OK;
}

static int build_queues_list(cli_ctx *c, const cli_verb *v, const cli_args *a,
                             cli_req *r) {
  (void)c, (void)v, (void)a;
  r->method = "GET";
  r->path = xstrdup("/queues");
  return CLI_OK;
}

static int build_queue_describe(cli_ctx *c, const cli_verb *v,
                                const cli_args *a, cli_req *r) {
  r->method = "GET";
  return queue_path(c, v, a->pos[0], "", &r->path);
}

static int build_queue_peek(cli_ctx *c, const cli_verb *v, const cli_args *a,
                            cli_req *r) {
  unsigned long long limit;
  if (a->limit && parse_count(v, "--limit", a->limit, &limit))
    return CLI_USAGE;
  r->method = "GET";
  if (queue_path(c, v, a->pos[0], "/messages", &r->path))
    return CLI_USAGE;
  query_add(c, &r->path, "limit", a->limit);
  return CLI_OK;
}

static void print_queue_sent(const cli_args *a, const json_t *r) {
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
static void print_queues(const cli_args *a, const json_t *r) {
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

static void print_queue(const cli_args *a, const json_t *r) {
  (void)a;
  static const char *const keys[] = {
      "ready",         "delayed",       "in_flight", "dropped",
      "dead_lettered", "oldest_age_ms", "lag_ms"};
  fputs("queue:         ", stdout);
  put(r, "name");
  fputc('\n', stdout);
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    printf("%-14s %" JSON_INTEGER_FORMAT "\n", keys[i], count_of(r, keys[i]));
}

/* One message per line, oldest first: its id, attempts, when it was sent
 * and is (or becomes) visible, whether a pull holds it, and its body; a
 * last error on the line after. */
static void print_queue_peek(const cli_args *a, const json_t *r) {
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
    char *body = b ? dump(b) : NULL;
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

/* ---- cron ---------------------------------------------------------------- */

static int build_crons(cli_ctx *c, const cli_verb *v, const cli_args *a,
                       cli_req *r) {
  (void)c, (void)v, (void)a;
  r->method = "GET";
  r->path = xstrdup("/crons");
  return CLI_OK;
}

/* POST /__scheduled?cron=EXPR: EXPR is one argument ("0 3 * * *", quoted
 * against the shell's globbing), escaped whole. */
static int build_cron_trigger(cli_ctx *c, const cli_verb *v, const cli_args *a,
                              cli_req *r) {
  (void)v;
  r->method = "POST";
  r->path = xstrdup("/__scheduled");
  query_add(c, &r->path, "cron", a->pos[0]);
  r->body = xstrdup("{}");
  return CLI_OK;
}

static void print_crons(const cli_args *a, const json_t *r) {
  (void)a;
  describe_crons(stdout, r);
}

/* One line per trigger fired: "PLUGIN: STATE", the instance it created,
 * and the handler's error; "PLUGIN: instance X already exists: nothing
 * was created" when the minute's instance was there before. */
static void print_cron_fired(const cli_args *a, const json_t *r) {
  (void)a;
  size_t i;
  const json_t *t;
  json_array_foreach(r, i, t) {
    put(t, "plugin");
    fputs(": ", stdout);
    if (!strcmp(str_or(t, "state"), "exists")) {
      fputs("instance ", stdout);
      put(t, "instance");
      puts(" already exists: nothing was created");
      continue;
    }
    put(t, "state");
    if (json_string_value(json_object_get(t, "instance"))) {
      fputs(" instance ", stdout);
      put(t, "instance");
    }
    const json_t *err = json_object_get(t, "error");
    if (json_is_string(err)) {
      fputs(": ", stdout);
      describe_text(stdout, json_string_value(err), 200, 0);
    } else if (err && !json_is_null(err)) {
      char *text = dump((json_t *)err);
      fputs(": ", stdout);
      describe_text(stdout, text, 200, 0);
      free(text);
    }
    fputc('\n', stdout);
  }
}

static const cli_verb verbs[] = {
    {"workflows trigger", "WF [PARAMS] [--id ID] [--wait [DURATION]]", 1, 2,
     O_ID | O_WAIT, NULL, build_trigger, print_created},
    {"workflows instances list", "WF [--status S] [--limit N] [--cursor C]", 1,
     1, O_STATUS | O_LIMIT | O_CURSOR, NULL, build_list, print_list},
    {"workflows list", "", 0, 0, 0, NULL, build_workflows_list, NULL},
    {"workflows describe", "WF", 1, 1, 0, NULL, build_workflow, print_workflow},
    {"workflows instances describe", "WF ID [--full]", 2, 2, O_FULL, NULL,
     build_describe, print_describe},
    {"workflows instances status", "WF ID", 2, 2, 0, NULL, build_summary,
     print_summary},
    {"workflows instances pause", "WF ID", 2, 2, 0, "pause", build_control,
     print_status},
    {"workflows instances resume", "WF ID", 2, 2, 0, "resume", build_control,
     print_status},
    {"workflows instances terminate", "WF ID", 2, 2, 0, "terminate",
     build_control, print_status},
    {"workflows instances restart", "WF ID [--from STEP [--count N]]", 2, 2,
     O_FROM | O_COUNT, "restart", build_control, print_status},
    {"workflows instances send-event", "WF ID --type T [--payload JSON]", 2, 2,
     O_TYPE | O_PAYLOAD, NULL, build_event, print_event},
    {"reload", "[PLUGIN]", 0, 1, 0, NULL, build_reload, print_reload},
    {"plugins list", "", 0, 0, 0, NULL, build_plugins, print_plugins},
    {"queues send", "QUEUE BODY [--delay SECONDS]", 2, 2, O_DELAY, NULL,
     build_queue_send, print_queue_sent},
    {"queues list", "", 0, 0, 0, NULL, build_queues_list, print_queues},
    {"queues describe", "QUEUE", 1, 1, 0, NULL, build_queue_describe,
     print_queue},
    {"queues peek", "QUEUE [--limit N]", 1, 1, O_LIMIT, NULL, build_queue_peek,
     print_queue_peek},
    {"cron list", "", 0, 0, 0, NULL, build_crons, print_crons},
    {"cron trigger", "EXPR", 1, 1, 0, NULL, build_cron_trigger,
     print_cron_fired},
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
        "                  --json  print the server's JSON\n",
        out);
}

/* The precedence find_host() applies, for the full help. */
static void environment_usage(FILE *out) {
  fputs("  environment: DURO_URL (as --url), DURO_CONFIG (as --config), "
        "DURO_TOKEN\n"
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

static int usage_error(const cli_verb *v, const char *fmt, ...) {
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
    rc = find_host(&c, a);
  if (rc == CLI_OK)
    rc = send_request(&c, &r, &answer);
  if (rc == CLI_OK && a->wait)
    rc = wait_result(&c, a, answer);
  else if (rc == CLI_OK && v->build == build_workflows_list)
    rc = list_workflows(&c, a, answer);
  else if (rc == CLI_OK)
    print_answer(v, a, answer);
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
                   !strcmp(argv[1], "cron");
  if (argc < 3 && group_only)
    return usage(stderr);
  if (argc >= 3 && is_help(argv[2]))
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
  int rc = parse_args(v, argc, argv, next, &a);
  if (rc == CLI_HELP) {
    verb_usage(stdout, "usage: ", v);
    options_usage(stdout);
    environment_usage(stdout);
    return CLI_OK;
  }
  return rc ? rc : run_verb(v, &a);
}
