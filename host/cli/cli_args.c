/* cli_args.c — the client's options and the parsing of its argv: options
 * may come anywhere, "--" ends them, each is checked against what the
 * verb takes, and the values that must be numbers or JSON are proved to
 * be here, before anything is sent. */
#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"
#include "duration.h"

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
    {"--timeout", O_TIMEOUT, offsetof(cli_args, timeout)},
    {"--rollback", O_ROLLBACK, 0},
    {"--follow", O_FOLLOW, 0},
    {"--after", O_AFTER, offsetof(cli_args, after)},
    {"--prefix", O_PREFIX, offsetof(cli_args, prefix)},
    {"--created-after", O_CREATED_AFTER, offsetof(cli_args, created_after)},
    {"--created-before", O_CREATED_BEFORE, offsetof(cli_args, created_before)},
    {"--terminate", O_TERMINATE, 0},
    {"--where", O_WHERE, 0},
    {"--action", O_ACTION, offsetof(cli_args, action)},
    {"--dry-run", O_DRY_RUN, 0},
    {"--cacert", O_CACERT, offsetof(cli_args, cacert)},
    {"--cert", O_CERT, offsetof(cli_args, cert)},
    {"--key", O_KEY, offsetof(cli_args, key)},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

int cli_is_help(const char *s) {
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
    return cli_usage_error(v, "unknown option \"%s\"", arg);
  /* a bulk action (the verb of --action) chooses its instances by --id,
   * as many as it is given */
  int ids = o->bit == O_ID && (v->opts & O_ACTION);
  if ((a->given & o->bit) && o->bit != O_WHERE && !ids)
    return cli_usage_error(v, "%s given twice", o->name);
  a->given |= o->bit;
  if (o->bit == O_JSON || o->bit == O_FULL || o->bit == O_ROLLBACK ||
      o->bit == O_FOLLOW || o->bit == O_TERMINATE || o->bit == O_DRY_RUN) {
    *(o->bit == O_JSON        ? &a->json
      : o->bit == O_FULL      ? &a->full
      : o->bit == O_ROLLBACK  ? &a->rollback
      : o->bit == O_TERMINATE ? &a->terminate
      : o->bit == O_DRY_RUN   ? &a->dry_run
                              : &a->follow) = 1;
    return eq ? cli_usage_error(v, "%s takes no value", o->name) : CLI_OK;
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
      return cli_usage_error(
          v, "--wait takes a duration such as 30s, not \"%s\"", a->wait);
    return CLI_OK;
  }
  const char *value = eq ? eq + 1 : *i + 1 < argc ? argv[++*i] : NULL;
  if (!value)
    return cli_usage_error(v, "%s needs a value", o->name);
  if (o->bit == O_WHERE) {
    if (a->n_where == CLI_MAX_WHERE)
      return cli_usage_error(v, "--where given more than %d times",
                             CLI_MAX_WHERE);
    a->where[a->n_where++] = value;
    return CLI_OK;
  }
  if (ids) {
    if (a->n_ids == CLI_MAX_IDS)
      return cli_usage_error(v, "--id given more than %d times", CLI_MAX_IDS);
    a->ids[a->n_ids++] = value;
  }
  *(const char **)(void *)((char *)a + o->offset) = value;
  return CLI_OK;
}

/* Checks what cli_parse_args collected against what the verb takes. */
static int check_args(const cli_verb *v, const cli_args *a) {
  if (a->n_pos < v->min_pos)
    return cli_usage_error(v, "missing arguments");
  if (a->n_pos > v->max_pos)
    return cli_usage_error(v, "too many arguments");
  for (size_t i = 0; i < a->n_pos; i++)
    if (!a->pos[i][0])
      return cli_usage_error(v, "argument %zu is empty", i + 1);
  unsigned extra = a->given & ~(v->opts | O_COMMON);
  for (size_t i = 0; i < N_OPTIONS; i++)
    if (extra & options[i].bit)
      return cli_usage_error(v, "%s does not apply to \"%s\"", options[i].name,
                             /* "instances list", as users name it */
                             strncmp(v->name, "workflows ", 10) ? v->name
                                                                : v->name + 10);
  return CLI_OK;
}

int cli_parse_args(const cli_verb *v, int argc, char **argv, int first,
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
int cli_parse_count(const cli_verb *v, const char *what, const char *s,
                    unsigned long long *out) {
  char *end;
  errno = 0;
  *out = strtoull(s, &end, 10);
  if (s[0] < '0' || s[0] > '9' || *end || errno || *out == 0 ||
      *out > UINT32_MAX)
    return cli_usage_error(v,
                           "%s must be a whole number from 1 to %u, not \"%s\"",
                           what, UINT32_MAX, s);
  return CLI_OK;
}

/* Parses the JSON argument `what`; refuses it, naming it, when invalid. */
int cli_parse_json_arg(const cli_verb *v, const char *what, const char *text,
                       json_t **out) {
  json_error_t e;
  *out = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
  if (*out)
    return CLI_OK;
  return cli_usage_error(v, "%s is not valid JSON: %s (at character %d)", what,
                         e.text, e.position);
}
