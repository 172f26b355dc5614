/* reload_gc.c — the periodic pass that unloads and deletes every build
 * that is not the newest, that no activation, queue batch, cron tick or
 * tail batch runs and no instance that has not ended is pinned to; and, on a
 * shared database, drops the builds no host has offered for a day. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "loader.h"
#include "log.h"
#include "queue.h"
#include "reload_internal.h"
#include "store.h"
#include "tail.h"
#include "trigger.h"
#include "util.h"

/* A build no host has offered for a day is dropped from a shared
 * database, looked for every ten minutes. */
#define BUILDS_UNSEEN_MS (24LL * 3600 * 1000)
#define BUILDS_PRUNE_EVERY_MS (10LL * 60 * 1000)

void reload_gc(reloader *r) {
  pthread_mutex_lock(&r->mu);
  reload_share_builds(r);
  int64_t now = clock_mono_ms();
  if (r->e && now >= r->next_prune) {
    size_t n = 0;
    if (duro_engine_builds_prune(r->e, BUILDS_UNSEEN_MS, &n) == 0 && n)
      log_info("%zu build(s) no host has loaded for a day dropped from the "
               "database",
               n);
    r->next_prune = now + BUILDS_PRUNE_EVERY_MS;
  }
  for (size_t i = 0; r->e && i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    const char **names = xcalloc(p->cfg->n_workflows + 1, sizeof *names);
    for (size_t w = 0; w < p->cfg->n_workflows; w++)
      names[w] = p->cfg->workflows[w].name;
    /* A rollback needs the build before the newest. */
    size_t keep = p->cfg->crash_storm.rollback ? 2 : 1;
    for (size_t k = 0; k + keep < p->n;) {
      /* a batch of an older build's queue handler, or a tick of its
       * scheduled handler, may still run in this process (a build in
       * workers has no handler here: its batches and ticks run in its
       * workers, which keep their own copy loaded) */
      const loader_plugin *lp = p->builds[k].lp;
      int unused =
          !lp ||
          (!duro_queue_handler_running(r->e, loader_info(lp)->queue) &&
           !duro_cron_handler_running(r->e, loader_info(lp)->scheduled) &&
           !duro_tail_handler_running(r->e, loader_info(lp)->tail));
      /* The workflows share the code: it leaves all of them or none. */
      if (unused) {
        int rc = duro_engine_retire_build_all(r->e, names, p->cfg->n_workflows,
                                              p->builds[k].hash);
        unused = rc == 0 || rc == DURO_E_NOT_FOUND;
      }
      if (!unused) {
        k++;
        continue;
      }
      reload_unload_build(&p->builds[k]);
      build_store_remove(r->store_dir, p->builds[k].hash);
      log_info("plugin \"%s\": build %s unloaded: no instance needs it",
               p->cfg->name, p->builds[k].hash);
      memmove(&p->builds[k], &p->builds[k + 1],
              (p->n - k - 1) * sizeof *p->builds);
      p->n--;
    }
    free(names);
  }
  pthread_mutex_unlock(&r->mu);
}
