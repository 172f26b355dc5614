/* http_keys.c — the API keys: which key a request's bearer token is, what
 * the route it asks for needs of a key (a scope, and a workflow or queue
 * on the key's lists), the 403 that names what is missing, and the audit
 * line of every request that changes state.
 *
 * A key's token is kept as its SHA-256 digest: a token presented is
 * hashed once and compared with every key's digest with CRYPTO_memcmp,
 * all of them, so neither the time taken nor its length tells a client
 * how near its guess was.  http.token_env is the key "default", with
 * every scope.  A listener without keys takes every request (its
 * browsers' guard is http_guard.c's).
 *
 * The scopes of the routes (doc/reference/http.md has the table): read,
 * every GET; events, the requests that feed data in or drain it (an
 * instance's event, a queue's messages sent, pulled and acked, a
 * pipeline's records); operate, what controls instances and queues
 * (creates, status changes, deletes, bulk jobs, a queue's redrive, a
 * cron's fire); admin, every route, the plugins' reloads and resumes
 * and any route not named here; GET /key, any key.  A key with a
 * workflows (queues) list reaches a route naming a workflow (queue) only
 * on its list, and a bulk job only of a workflow on it (the route asks,
 * keys_refuse_workflow: the job names it, not the path); the listings
 * across them show it only those (key_views.c).  What cannot be cut to
 * its part, the metrics (counters of every workflow and queue together)
 * and /__scheduled (it fires every trigger of an expression), is refused
 * it. */
#include "http_internal.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "util.h"

static const char *const scope_names[] = {"read", "events", "operate", "admin"};

static const char *scope_name(unsigned scope) {
  for (unsigned i = 0; i < sizeof scope_names / sizeof *scope_names; i++)
    if (scope == 1u << i)
      return scope_names[i];
  return "admin";
}

static void digest_of(const char *token, size_t len,
                      unsigned char out[KEY_DIGEST]) {
  unsigned n = KEY_DIGEST;
  if (!EVP_Digest(token, len, out, &n, EVP_sha256(), NULL))
    abort(); /* SHA-256 of bytes in memory does not fail */
}

static char **copy_names(char *const *names, size_t n) {
  if (!names)
    return NULL;
  char **out = xcalloc(n, sizeof *out);
  for (size_t i = 0; i < n; i++)
    out[i] = xstrdup(names[i]);
  return out;
}

void keys_add(http_server *s, const char *name, const char *token,
              unsigned scopes, const config_api_key *lists) {
  s->keys = xrealloc(s->keys, (s->n_keys + 1) * sizeof *s->keys);
  http_key *k = &s->keys[s->n_keys++];
  memset(k, 0, sizeof *k);
  k->name = xstrdup(name);
  digest_of(token, strlen(token), k->digest);
  k->scopes = scopes;
  if (lists) {
    k->workflows = copy_names(lists->workflows, lists->n_workflows);
    k->n_workflows = lists->n_workflows;
    k->queues = copy_names(lists->queues, lists->n_queues);
    k->n_queues = lists->n_queues;
  }
}

void keys_free(http_server *s) {
  for (size_t i = 0; i < s->n_keys; i++) {
    http_key *k = &s->keys[i];
    free(k->name);
    for (size_t j = 0; j < k->n_workflows; j++)
      free(k->workflows[j]);
    free(k->workflows);
    for (size_t j = 0; j < k->n_queues; j++)
      free(k->queues[j]);
    free(k->queues);
  }
  free(s->keys);
  s->keys = NULL;
  s->n_keys = 0;
}

/* The variable of each key must hold a token: `duro run` refuses to start
 * otherwise, naming it. */
static const char *token_of(const char *var, const config *cfg,
                            const config_pos *pos, const char *what, char *err,
                            size_t errlen) {
  const char *token = getenv(var);
  if (!token || !*token) {
    snprintf(err, errlen, "%s:%d:%d: %s names %s, which is not set or empty",
             cfg->file, pos->line, pos->column, what, var);
    return NULL;
  }
  return token;
}

int keys_from_config(http_server *s, const config *cfg, char *err,
                     size_t errlen) {
  if (cfg->http.token_env) {
    const char *t = token_of(cfg->http.token_env, cfg, &cfg->http.token_env_pos,
                             "http.token_env", err, errlen);
    if (!t)
      return -1;
    if (s)
      keys_add(s, "default", t, KEY_ALL_SCOPES, NULL);
  }
  for (size_t i = 0; i < cfg->http.n_keys; i++) {
    const config_api_key *k = &cfg->http.keys[i];
    char what[160];
    snprintf(what, sizeof what, "the token_env of key \"%s\"", k->name);
    const char *t =
        token_of(k->token_env, cfg, &k->token_env_pos, what, err, errlen);
    if (!t)
      return -1;
    if (s)
      keys_add(s, k->name, t, k->scopes, k);
  }
  return 0;
}

/* ---- which key -------------------------------------------------------- */

static int name_is(const http_header *h, const char *name) {
  return h->name_len == strlen(name) &&
         strncasecmp(h->name, name, h->name_len) == 0;
}

const http_key *keys_match(const http_server *s, const http_header *h,
                           size_t n) {
  static const char prefix[] = "Bearer ";
  size_t plen = sizeof prefix - 1;
  if (s->n_keys == 0)
    return NULL;
  const http_header *a = NULL;
  for (size_t i = 0; i < n && !a; i++)
    if (name_is(&h[i], "authorization"))
      a = &h[i];
  if (!a || a->value_len <= plen || strncasecmp(a->value, prefix, plen) != 0)
    return NULL;
  unsigned char d[KEY_DIGEST];
  digest_of(a->value + plen, a->value_len - plen, d);
  const http_key *found = NULL;
  for (size_t i = 0; i < s->n_keys; i++) /* every one: no early exit */
    if (CRYPTO_memcmp(d, s->keys[i].digest, KEY_DIGEST) == 0)
      found = &s->keys[i];
  return found;
}

/* ---- what a route needs ----------------------------------------------- */

/* What a request needs of its key: a scope, and the workflow or queue it
 * names (NULL: none), or `across` when it reads or acts across the
 * workflows (ACROSS_WORKFLOWS) or queues (ACROSS_QUEUES). */
enum { ACROSS_WORKFLOWS = 1, ACROSS_QUEUES = 2 };
typedef struct need {
  unsigned scope;
  const char *workflow, *queue;
  int across;
} need;

static need need_of(http_exchange *x, char **seg, int n) {
  int reads = method_is(x, "GET") || method_is(x, "HEAD");
  need nd = {reads ? CONFIG_SCOPE_READ : CONFIG_SCOPE_ADMIN, NULL, NULL, 0};
  if (n <= 0)
    return nd;
  const char *top = seg[0];
  if (!strcmp(top, "workflows") && n >= 2) {
    nd.workflow = seg[1];
    if (!reads)
      nd.scope = n == 6 && !strcmp(seg[4], "events") && method_is(x, "POST")
                     ? CONFIG_SCOPE_EVENTS
                     : CONFIG_SCOPE_OPERATE;
  } else if (!strcmp(top, "queues")) {
    if (n >= 2) /* GET /queues lists the key's own (keys_filter_queues) */
      nd.queue = seg[1];
    int feeds = method_is(x, "POST") &&
                (n == 3 || (n == 4 && (!strcmp(seg[3], "batch") ||
                                       !strcmp(seg[3], "pull") ||
                                       !strcmp(seg[3], "ack"))));
    if (!reads)
      nd.scope = feeds ? CONFIG_SCOPE_EVENTS : CONFIG_SCOPE_OPERATE;
  } else if (route_is_scheduled(seg, n)) {
    nd.scope = CONFIG_SCOPE_OPERATE; /* a GET that fires crons too */
    nd.across = ACROSS_WORKFLOWS;
  } else if (!strcmp(top, "bulk")) {
    /* a job by its id: the route checks the job's workflow */
    if (!reads)
      nd.scope = CONFIG_SCOPE_OPERATE;
  } else if (!strcmp(top, "pipelines")) {
    if (!reads)
      nd.scope = CONFIG_SCOPE_EVENTS;
  } else if (n == 1 && !strcmp(top, "key") && reads) {
    nd.scope = 0; /* a key may always ask what it is */
  } else if (!strcmp(top, "metrics")) {
    nd.across = ACROSS_WORKFLOWS | ACROSS_QUEUES;
  }
  return nd;
}

static int on_list(char *const *names, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(names[i], name))
      return 1;
  return 0;
}

/* A 403 naming what the key lacks: {"error":{"code","message", and the
 * "scope", "workflow" or "queue" refused}}. */
static int refuse(http_exchange *x, const char *code, const char *field,
                  const char *value, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int refuse(http_exchange *x, const char *code, const char *field,
                  const char *value, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = xvasprintf(fmt, ap);
  va_end(ap);
  json_t *body = json_pack("{s:{s:s,s:s,s:s}}", "error", "code", code,
                           "message", msg, field, value);
  free(msg);
  if (!body) /* a name that is not UTF-8: the message alone */
    return send_error(x, 403, code, "the key may not make this request");
  return send_json(x, 403, body);
}

int keys_authorize(http_server *s, http_exchange *x, char **seg, int n) {
  if (s->n_keys == 0)
    return 0;
  const http_key *k = x->key;
  if (!k) /* http_serve's callers and the gate let none through */
    return send_error(x, 401, "request.unauthorized",
                      "a valid \"Authorization: Bearer\" token is required"),
           1;
  if (k->scopes & CONFIG_SCOPE_ADMIN)
    return 0;
  need nd = need_of(x, seg, n);
  if (nd.scope && !(k->scopes & nd.scope))
    return refuse(x, "request.forbidden_scope", "scope", scope_name(nd.scope),
                  "key \"%s\" lacks the scope \"%s\", which %s %s needs",
                  k->name, scope_name(nd.scope), x->rq.method, x->rq.path),
           1;
  if (nd.workflow && keys_refuse_workflow(x, nd.workflow))
    return 1;
  if (nd.queue && k->queues && !on_list(k->queues, k->n_queues, nd.queue))
    return refuse(x, "request.forbidden_queue", "queue", nd.queue,
                  "key \"%s\" may not touch queue \"%s\" (not on its queues "
                  "list)",
                  k->name, nd.queue),
           1;
  int across = ((nd.across & ACROSS_WORKFLOWS) && k->workflows) ||
               ((nd.across & ACROSS_QUEUES) && k->queues);
  if (across)
    return refuse(x, "request.forbidden_listing", "scope", scope_name(nd.scope),
                  "key \"%s\" is limited to some %s: %s %s reaches across "
                  "them, and needs a key without that list",
                  k->name,
                  (nd.across & ACROSS_WORKFLOWS) && k->workflows ? "workflows"
                                                                 : "queues",
                  x->rq.method, x->rq.path),
           1;
  return 0;
}

/* admin is every route: its lists, if any, limit nothing */
int keys_see_workflow(const http_key *k, const char *wf) {
  return !k || (k->scopes & CONFIG_SCOPE_ADMIN) || !k->workflows ||
         (wf && on_list(k->workflows, k->n_workflows, wf));
}

int keys_see_queue(const http_key *k, const char *queue) {
  return !k || (k->scopes & CONFIG_SCOPE_ADMIN) || !k->queues ||
         (queue && on_list(k->queues, k->n_queues, queue));
}

int keys_refuse_workflow(http_exchange *x, const char *wf) {
  const http_key *k = x->key;
  if (keys_see_workflow(k, wf))
    return 0;
  return refuse(x, "request.forbidden_workflow", "workflow", wf ? wf : "",
                "key \"%s\" may not touch workflow \"%s\" (not on its "
                "workflows list)",
                k->name, wf ? wf : ""),
         1;
}

/* ---- the audit line --------------------------------------------------- */

void keys_audit(http_exchange *x, int status) {
  http_server *s = x->s;
  if (s->n_keys == 0 || !x->key)
    return;
  int reads =
      method_is(x, "GET") || method_is(x, "HEAD") || method_is(x, "OPTIONS");
  if (reads) { /* a GET of /__scheduled changes state too */
    char *seg[MAX_SEGMENTS];
    if (!strstr(x->rq.path, "scheduled") ||
        !route_is_scheduled(seg, split_path(x, seg)))
      return;
  }
  log_at(DURO_LOG_INFO, &(log_ctx){.source = "audit", .key = x->key->name},
         "key %s: %s %s -> %d", x->key->name, x->rq.method, x->rq.path, status);
}
