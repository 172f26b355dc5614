/* reload_pinned.c — the older builds instances are pinned to, loaded
 * beside the newest: at attach, after a takeover brought such instances,
 * and for an ended instance restarted from a step.
 *
 * On a store several hosts share, every build a host has loaded is offered
 * to the others (duro_engine_build_share, again at each gc pass, which
 * marks it still in use), and a pinned build missing from the local store
 * is fetched from there: a host that takes over an instance pinned to a
 * build it never loaded runs it on that build.  Builds no host has
 * offered for a day and no instance needs are pruned (reload_gc.c).  On
 * SQLite these do nothing. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "reload_internal.h"
#include "store.h"
#include "util.h"

typedef struct pin {
  char *workflow, *build;
} pin;
typedef struct pins {
  pin *v;
  size_t n;
} pins;

static void collect_pin(void *ctx, const char *workflow, const char *build,
                        int64_t n) {
  (void)n;
  pins *ps = ctx;
  ps->v = xrealloc(ps->v, (ps->n + 1) * sizeof *ps->v);
  ps->v[ps->n++] = (pin){xstrdup(workflow), xstrdup(build)};
}

void reload_share_builds(reloader *r) {
  for (size_t i = 0; r->e && i < r->cfg->n_plugins; i++) {
    const plugin_state *p = &r->plugins[i];
    for (size_t k = 0; k < p->n; k++) {
      char *path = build_store_path(r->store_dir, p->builds[k].hash);
      if (duro_engine_build_share(r->e, p->builds[k].hash, p->cfg->name,
                                  path) != 0)
        log_warn("plugin \"%s\": cannot offer build %s to the other hosts",
                 p->cfg->name, p->builds[k].hash);
      free(path);
    }
  }
}

/* The build file at `path` is there, or is fetched from the other hosts'
 * offers. */
static void fetch_if_missing(reloader *r, const char *name, const char *hash,
                             const char *path) {
  if (access(path, R_OK) == 0)
    return;
  if (duro_engine_build_fetch(r->e, hash, path) == 0)
    log_info("plugin \"%s\": build %s fetched from the database", name, hash);
}

/* Build `hash` of plugin p given to `workflow`: loaded first (from the
 * store, fetched from the other hosts if missing there, probed, opened)
 * when it is not.  A build that is loaded is given again: the workflow may lack
 * it (builds of hosts before retirement was decided per plugin).  Returns
 * 0, or -1 with why in err. */
static int give_build(reloader *r, plugin_state *p, const char *workflow,
                      const char *hash, char *err, size_t errlen) {
  build *b = reload_find_build(p, hash);
  if (b) {
    for (size_t k = 0; k < p->cfg->n_workflows; k++) {
      const config_workflow *w = &p->cfg->workflows[k];
      if (!strcmp(w->name, workflow) && reload_build_exports(b, w->class_name))
        return reload_engine_build(r, p, b, w, 0) ? -1 : 0;
    }
    snprintf(err, errlen, "build %s serves no workflow \"%s\"", hash, workflow);
    return -1;
  }
  char *path = build_store_path(r->store_dir, hash);
  fetch_if_missing(r, p->cfg->name, hash, path);
  int rc = -1;
  if (access(path, R_OK) != 0)
    snprintf(err, errlen,
             "it is not in the build store (%s), and no host shares it "
             "through the database",
             path);
  else if (reload_load_build(r, p, path, hash, 0, err, errlen) == 0) {
    reload_add_to_engine(r, p, &p->builds[p->n - 2], 0);
    log_info("plugin \"%s\": build %s loaded for the instances pinned to it",
             p->cfg->name, hash);
    rc = 0;
  }
  free(path);
  return rc;
}

/* Builds in-flight instances are pinned to, from the store. */
void reload_load_pinned_locked(reloader *r) {
  pins ps = {0};
  if (duro_engine_pinned_builds(r->e, collect_pin, &ps) != 0)
    log_error("cannot list the builds instances are pinned to");
  for (size_t i = 0; i < ps.n; i++) {
    const config_plugin *c = NULL;
    char err[1024];
    if (config_find_workflow(r->cfg, ps.v[i].workflow, &c) &&
        give_build(r, reload_state_of(r, c), ps.v[i].workflow, ps.v[i].build,
                   err, sizeof err) != 0)
      log_error("plugin \"%s\": build %s, which instances of %s are "
                "pinned to, cannot be loaded: %s",
                c->name, ps.v[i].build, ps.v[i].workflow, err);
    free(ps.v[i].workflow);
    free(ps.v[i].build);
  }
  free(ps.v);
}

int reload_give_build(reloader *r, const char *workflow, const char *hash,
                      char *err, size_t errlen) {
  const config_plugin *c = NULL;
  int rc = -1;
  pthread_mutex_lock(&r->mu);
  if (!r->e || !config_find_workflow(r->cfg, workflow, &c))
    snprintf(err, errlen, "no plugin serves workflow \"%s\"", workflow);
  else
    rc = give_build(r, reload_state_of(r, c), workflow, hash, err, errlen);
  pthread_mutex_unlock(&r->mu);
  return rc;
}

void reload_load_pinned(reloader *r) {
  pthread_mutex_lock(&r->mu);
  if (r->e)
    reload_load_pinned_locked(r);
  pthread_mutex_unlock(&r->mu);
}
