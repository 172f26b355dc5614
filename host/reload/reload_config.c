/* reload_config.c — the config file read again and compared with the
 * running config (cfgdiff.h).  A file that does not parse, or any change
 * that needs a restart, refuses the whole change: the running config
 * stays.  Otherwise the live changes go to the engine and the new config
 * becomes the running one (plugin paths included: the build reload that
 * follows loads from the new path). */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfgdiff.h"
#include "log.h"
#include "reload_internal.h"
#include "util.h"

/* Makes `cur` the running config: each plugin's state points into it,
 * and the consumers fed to a queue handler take its settings (mu held;
 * the plugins are those of the running config, by name). */
static void adopt_config(reloader *r, config *cur) {
  r->owned = xrealloc(r->owned, (r->n_owned + 1) * sizeof *r->owned);
  r->owned[r->n_owned++] = cur;
  int moved = 0;
  for (size_t i = 0; i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    const config_plugin *c = cfgdiff_plugin(cur, p->cfg->name);
    moved |= strcmp(c->path, p->cfg->path) != 0;
    p->cfg = c;
    if (p->n)
      reload_register_consumers(r, p, &p->builds[p->n - 1]);
  }
  r->cfg = cur;
  if (moved && r->rewatch_on)
    uv_async_send(&r->rewatch);
}

/* The list as one log line: "a; b; c". */
static void log_list(int warn, const char *head, const json_t *list) {
  size_t len = 0, i;
  const json_t *v;
  json_array_foreach(list, i, v) len += strlen(json_string_value(v)) + 2;
  char *text = xcalloc(1, len + 1);
  json_array_foreach(list, i, v) {
    if (i)
      strcat(text, "; ");
    strcat(text, json_string_value(v));
  }
  if (warn)
    log_warn("%s%s", head, text);
  else
    log_info("%s%s", head, text);
  free(text);
}

/* {"file", "status": "applied|unchanged|refused", "changes": [...],
 * "restart"?: [...], "error"?}: what the reload did, also logged. */
json_t *reload_config(reloader *r) {
  char err[2048];
  json_t *live = json_array(), *restart = json_array();
  json_t *rep = json_pack("{s:s,s:o}", "file", r->cfg->file, "changes", live);
  config *cur = config_load(r->cfg->file, err, sizeof err);
  if (!cur) {
    log_warn("config not reloaded, the running one stays: %s", err);
    json_object_set_new(rep, "status", json_string("refused"));
    json_object_set_new(rep, "error", json_string(err));
    json_decref(restart);
    return rep;
  }
  pthread_mutex_lock(&r->mu);
  cfgdiff_compare(r->cfg, cur, live, restart);
  const char *status = "applied";
  if (json_array_size(restart)) {
    status = "refused";
    snprintf(err, sizeof err,
             "%zu change(s) need a restart: nothing of the config was "
             "applied (restart the host, or undo them)",
             json_array_size(restart));
    log_list(1, "config not reloaded, these changes need a restart: ", restart);
    json_object_set(rep, "restart", restart);
  } else if (!json_array_size(live)) {
    status = "unchanged";
  } else if (!r->e || cfgdiff_apply(cur, r->e, err, sizeof err) != 0) {
    status = "refused";
    log_warn("config not reloaded: %s", r->e ? err : "the engine is not open");
  } else {
    adopt_config(r, cur);
    cur = NULL;
    log_list(0, "config reloaded: ", live);
  }
  pthread_mutex_unlock(&r->mu);
  config_free(cur);
  json_object_set_new(rep, "status", json_string(status));
  if (!strcmp(status, "refused"))
    json_object_set_new(rep, "error", json_string(err));
  json_decref(restart);
  return rep;
}
