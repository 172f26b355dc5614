/* reload_plugins.c — a plugin reloaded: its file copied into the store,
 * probed and opened without the lock (a slow constructor must not hold up
 * other reloads), then installed under it and made the newest of each of
 * its workflows, unless a reload running beside it installed the same
 * build meanwhile; reload_plugins reloads one plugin, or every plugin
 * after the config file read again (reload_config.c). */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "log.h"
#include "reload_internal.h"
#include "store.h"
#include "util.h"

/* Build `hash`, loaded already, made the newest (a rollback to a build
 * kept for pinned instances, or one a concurrent reload just loaded);
 * "unchanged" when it is.  Under the lock. */
static const char *make_newest(reloader *r, plugin_state *p, build *known) {
  if (known == &p->builds[p->n - 1])
    return "unchanged";
  build b = *known;
  size_t at = (size_t)(known - p->builds);
  memmove(&p->builds[at], &p->builds[at + 1],
          (p->n - at - 1) * sizeof *p->builds);
  p->builds[p->n - 1] = b;
  reload_add_to_engine(r, p, &p->builds[p->n - 1], 1);
  return "loaded";
}

/* The end of a reload, under the lock: the build probed and opened
 * meanwhile (opened, taken; empty when it was refused, rc != 0) is
 * installed unless another reload installed the same hash first, and the
 * outcome goes to the report and the log. */
static void reload_finish(reloader *r, plugin_state *p, json_t *rep, int rc,
                          build *opened, const char *hash, const char *stored,
                          const char *err) {
  const config_plugin *c = p->cfg;
  char previous[17]; /* the newest now: another reload may have moved it */
  snprintf(previous, sizeof previous, "%s", p->builds[p->n - 1].hash);
  json_object_set_new(rep, "previous", json_string(previous));
  build *known = rc == 0 ? reload_find_build(p, hash) : NULL;
  if (known && !strcmp(p->rolled_back, hash) && known != &p->builds[p->n - 1]) {
    /* The file still holds the build a crash storm rolled back: reading
     * it again (a watch event, SIGHUP) must not undo the rollback. */
    reload_unload_build(opened);
    char *why = xasprintf("build %s was rolled back after a crash storm: "
                          "deploy another build, or `duro plugins resume "
                          "%s` and reload to serve it again",
                          hash, c->name);
    log_warn("plugin \"%s\": %s; build %s keeps serving", c->name, why,
             previous);
    json_object_set_new(rep, "status", json_string("refused"));
    json_object_set_new(rep, "error", json_string(why));
    free(why);
    return;
  }
  if (known) {
    reload_unload_build(opened); /* a second handle of the same file */
    json_object_set_new(rep, "status", json_string(make_newest(r, p, known)));
  } else if (rc == 0) {
    reload_add_build(p, opened, hash, 1);
    reload_add_to_engine(r, p, &p->builds[p->n - 1], 1);
    json_object_set_new(rep, "status", json_string("loaded"));
  }
  if (rc) {
    if (stored && !reload_find_build(p, hash))
      build_store_remove(r->store_dir, hash);
    char shown[1200];
    reload_name_source(shown, sizeof shown, err, stored, c->path);
    log_error("plugin \"%s\": new build of %s refused: %s; build %s keeps "
              "serving",
              c->name, c->path, shown, previous);
    json_object_set_new(rep, "status", json_string("refused"));
    json_object_set_new(rep, "error", json_string(err));
    return;
  }
  json_object_set_new(rep, "build", json_string(hash));
  if (strcmp(hash, previous) != 0) {
    reload_remember_newest(r, p);
    log_info("plugin \"%s\": build %s is the newest (was %s)", c->name, hash,
             previous);
    if (r->on_newest)
      r->on_newest(r->on_newest_ctx, c->name, hash);
  }
}

/* A new build is probed and opened without the lock (a slow constructor
 * must not hold up other reloads, the unload pass or GET /plugins), then
 * installed under it. */
static json_t *reload_one(reloader *r, plugin_state *p) {
  const config_plugin *c = p->cfg;
  char previous[17], current[17], err[1024] = "", hash[17];
  pthread_mutex_lock(&r->mu);
  snprintf(previous, sizeof previous, "%s", p->builds[p->n - 1].hash);
  json_t *rep = json_pack("{s:s,s:s}", "name", c->name, "previous", previous);
  if (loader_hash_file(c->path, current) == 0 && !strcmp(current, previous)) {
    pthread_mutex_unlock(&r->mu);
    json_object_set_new(rep, "status", json_string("unchanged"));
    json_object_set_new(rep, "build", json_string(previous));
    return rep;
  }
  char *stored = NULL;
  int rc =
      build_store_import(r->store_dir, c->path, hash, &stored, err, sizeof err);
  build opened = {0};
  /* Known, or not in the store: nothing to probe. */
  if (rc == 0 && !reload_find_build(p, hash)) {
    pthread_mutex_unlock(&r->mu);
    rc = reload_open_build(r, p, stored, &opened, err, sizeof err);
    pthread_mutex_lock(&r->mu);
  }
  reload_finish(r, p, rep, rc, &opened, hash, stored, err);
  pthread_mutex_unlock(&r->mu);
  free(stored);
  return rep;
}

int reload_rollback(void *ctx, const char *plugin, const char *bad,
                    int (*usable)(void *uctx, const char *hash), void *uctx,
                    char *to, size_t tolen) {
  reloader *r = ctx;
  int rc = -1;
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < r->cfg->n_plugins && r->e; i++) {
    plugin_state *p = &r->plugins[i];
    if (strcmp(plugin, p->cfg->name) != 0 || p->n < 2 ||
        strcmp(p->builds[p->n - 1].hash, bad) != 0)
      continue; /* the bad build is no longer the newest: nothing to undo */
    for (size_t k = p->n - 1; k-- > 0;)
      if (usable(uctx, p->builds[k].hash)) {
        snprintf(to, tolen, "%s", p->builds[k].hash);
        snprintf(p->rolled_back, sizeof p->rolled_back, "%s", bad);
        make_newest(r, p, &p->builds[k]);
        reload_remember_newest(r, p);
        rc = 0;
        break;
      }
  }
  pthread_mutex_unlock(&r->mu);
  return rc;
}

void reload_forget_rollback(reloader *r, const char *plugin) {
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < r->cfg->n_plugins; i++)
    if (!strcmp(plugin, r->plugins[i].cfg->name))
      r->plugins[i].rolled_back[0] = '\0';
  pthread_mutex_unlock(&r->mu);
}

void reload_on_newest(reloader *r,
                      void (*fn)(void *ctx, const char *plugin,
                                 const char *hash),
                      void *ctx) {
  r->on_newest = fn;
  r->on_newest_ctx = ctx;
}

int reload_plugins(reloader *r, const char *name, json_t **report) {
  json_t *list = json_array();
  int refused = 0, found = 0;
  /* Every plugin: the config file is read again first (its paths). */
  json_t *conf = !name && r->e ? reload_config(r) : NULL;
  if (conf &&
      !strcmp(json_string_value(json_object_get(conf, "status")), "refused"))
    refused++;
  for (size_t i = 0; i < r->cfg->n_plugins && r->e; i++) {
    plugin_state *p = &r->plugins[i];
    if (name && strcmp(name, p->cfg->name) != 0)
      continue;
    found++;
    json_t *rep = reload_one(r, p);
    refused +=
        !strcmp(json_string_value(json_object_get(rep, "status")), "refused");
    json_array_append_new(list, rep);
  }
  pthread_mutex_lock(&r->mu);
  reload_share_builds(r);
  pthread_mutex_unlock(&r->mu);
  if (report) {
    *report = json_pack("{s:o}", "plugins", list);
    if (conf)
      json_object_set(*report, "config", conf);
  } else {
    json_decref(list);
  }
  json_decref(conf);
  return name && !found ? -1 : refused;
}
