/* reload.c — plugin builds in the engine process (reload.h): the
 * reloader made and freed.
 *
 * Each config plugin has its loaded builds, oldest first, the newest last.
 * The engine keeps the run() pointers of each workflow's builds
 * (engine/builds.c); this module owns the code they point into (none
 * for a plugin in workers: its builds' descriptors), and only unloads a
 * build after the engine agreed to retire it from every workflow of the
 * plugin.  Each phase of a build's life is a file of its
 * own (reload_internal.h lists them). */
#include "reload.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger.h"
#include "reload_internal.h"
#include "store.h"
#include "util.h"

reloader *reload_new(const config *cfg, ledger *l, const char *self) {
  reloader *r = xcalloc(1, sizeof *r);
  r->cfg = cfg;
  r->ledger = l;
  r->restarted = l && ledger_last_death(l, NULL) != LEDGER_DEATH_NONE;
  r->self = xstrdup(self);
  r->store_dir = build_store_dir(cfg->storage.path);
  pthread_mutex_init(&r->mu, NULL);
  r->plugins = xcalloc(cfg->n_plugins ? cfg->n_plugins : 1, sizeof *r->plugins);
  for (size_t i = 0; i < cfg->n_plugins; i++) {
    r->plugins[i].r = r;
    r->plugins[i].cfg = &cfg->plugins[i];
    r->plugins[i].initial_fd = -1;
  }
  return r;
}

/* The state of config plugin c (of the running config: a reload may
 * have put the plugins in another order). */
plugin_state *reload_state_of(reloader *r, const config_plugin *c) {
  for (size_t i = 0; i < r->cfg->n_plugins; i++)
    if (r->plugins[i].cfg == c)
      return &r->plugins[i];
  return &r->plugins[0]; /* not reached: c is of r->cfg */
}

void reload_close_initial(reloader *r) {
  for (size_t i = 0; i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    if (p->initial_fd >= 0)
      close(p->initial_fd);
    p->initial_fd = -1;
  }
}

void reload_free(reloader *r) {
  if (!r)
    return;
  reload_close_initial(r);
  for (size_t i = 0; i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    for (size_t k = 0; k < p->n; k++)
      reload_unload_build(&p->builds[k]);
    free(p->builds);
    free(p->watch_dir);
  }
  free(r->plugins);
  for (size_t i = 0; i < r->n_owned; i++)
    config_free(r->owned[i]);
  free(r->owned);
  free(r->store_dir);
  free(r->self);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

/* err with the first mention of `copy` (a build's private copy) replaced
 * by `source`, the path the user wrote: the copy may be gone by the time
 * anyone reads the message. */
void reload_name_source(char *out, size_t len, const char *err,
                        const char *copy, const char *source) {
  const char *at = copy ? strstr(err, copy) : NULL;
  if (at)
    snprintf(out, len, "%.*s%s%s", (int)(at - err), err, source,
             at + strlen(copy));
  else
    snprintf(out, len, "%s", err);
}
