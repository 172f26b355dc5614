/* cli_host.c — where the host is, its token and its TLS files: flags
 * before the environment (DURO_URL, DURO_CONFIG, DURO_TOKEN, DURO_CACERT,
 * DURO_CERT, DURO_KEY) before ./duro.yaml or
 * config/duro.yaml (cli_find_host), and what the URL came from, for the
 * errors that name it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_internal.h"
#include "config.h"
#include "util.h"

void cli_add_header(cli_ctx *c, const char *h) {
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
 * loopback address of its family; https:// with http.tls. */
static void base_from_listen(cli_ctx *c, const char *listen, int tls) {
  const char *colon = strrchr(listen, ':');
  const char *port = colon ? colon + 1 : listen;
  char *host = colon ? xstrndup(listen, (size_t)(colon - listen)) : NULL;
  const char *h = host;
  if (!h || !*h || !strcmp(h, "0.0.0.0") || !strcmp(h, "*"))
    h = "127.0.0.1";
  else if (!strcmp(h, "[::]"))
    h = "[::1]";
  c->base = xasprintf("%s://%s:%s", tls ? "https" : "http", h, port);
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
  cli_add_header(c, h);
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

/* An https:// host's CA (instead of the system's), and the client's
 * certificate and key for a host that requires one: each from its flag,
 * else its variable; libcurl reads the files. */
static void set_tls(cli_ctx *c, const cli_args *a) {
  const char *ca = a->cacert ? a->cacert : env("DURO_CACERT");
  const char *cert = a->cert ? a->cert : env("DURO_CERT");
  const char *key = a->key ? a->key : env("DURO_KEY");
  if (ca)
    curl_easy_setopt(c->curl, CURLOPT_CAINFO, ca);
  if (cert)
    curl_easy_setopt(c->curl, CURLOPT_SSLCERT, cert);
  if (key)
    curl_easy_setopt(c->curl, CURLOPT_SSLKEY, key);
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
int cli_find_host(cli_ctx *c, const cli_args *a) {
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
    base_from_listen(c, cfg->http.listen, cfg->http.tls.cert != NULL);
    c->origin = xasprintf("from http.listen in %s", path);
  } else {
    base_from_listen(c, CLI_DEFAULT_LISTEN, 0);
    c->origin = xstrdup("the default: no --url, DURO_URL, " CLI_LOCAL_CONFIG
                        " or " CLI_DEFAULT_CONFIG " here");
  }
  if (rc == CLI_OK)
    rc = add_token(c, a, cfg);
  if (rc == CLI_OK)
    set_tls(c, a);
  config_free(cfg);
  return rc;
}
