/* reload_internal.h — what the phases of the reloader share: its state
 * (each config plugin's loaded builds, oldest first, the newest last) and
 * the functions one phase calls in another.  Private to reload/ (reload.h
 * is the public face).
 *
 * The phases, one file each:
 *   reload.c          the reloader made and freed
 *   reload_probe.c    a build loaded in a child process first
 *   build_desc.c      what the probe reports of a build the engine does
 *                     not load (a plugin in workers)
 *   reload_load.c     loading builds, and the first load at start
 *   reload_attach.c   the builds given to the engine once it is open
 *   reload_pinned.c   the older builds instances are pinned to, and the
 *                     builds shared by the hosts of one database
 *   reload_plugins.c  a new build of a plugin loaded and made the newest
 *   reload_config.c   the config file read again
 *   reload_gc.c       builds no instance needs unloaded
 *   reload_list.c     GET /plugins' list
 *   reload_watch.c    the plugins' files watched, reloads on the pool */
#ifndef DURO_RELOAD_INTERNAL_H
#define DURO_RELOAD_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "build_desc.h"
#include "config.h"
#include "engine.h"
#include "ledger.h"
#include "loader.h"
#include "reload.h"

/* A loaded build: exactly one of lp and desc.  A plugin with workers: 0
 * has its code in this process (lp, open); one whose code runs in its
 * worker processes never has it here, only the descriptor its probe
 * reported (desc). */
typedef struct build {
  char hash[17];
  loader_plugin *lp; /* owned */
  build_desc *desc;  /* owned */
  int64_t loaded_ms;
} build;

typedef struct plugin_state {
  reloader *r;
  const config_plugin *cfg;
  build *builds; /* oldest first; the last is the newest */
  size_t n;
  /* Before reload_attach: the private copy loaded, kept open (its file is
   * already deleted, so a start that never finishes leaves nothing). */
  int initial_fd;
  uv_fs_event_t watch;
  uv_timer_t debounce;
  int watching;
  char *watch_dir; /* the directory watched (the loop's thread only) */
  /* The build a crash storm rolled back (reload_rollback), which a reload
   * of the unchanged file must not make the newest again; "" for none. */
  char rolled_back[17];
} plugin_state;

struct reloader {
  const config *cfg;
  ledger *ledger;
  char *self;
  duro_engine *e;
  char *store_dir;
  struct worker_pool *workers; /* NULL: plugin code runs in this process */
  pthread_mutex_t mu;
  plugin_state *plugins;
  int queued;         /* reload jobs on the pool (the loop's thread only) */
  int restarted;      /* an engine died before this one (the ledger says so) */
  int64_t next_prune; /* clock_mono_ms: the shared builds' next prune (mu) */
  /* The configs a reload read and made the running one (r->cfg is the
   * newest): kept to the end, since what was handed out before (names,
   * paths) points into them. */
  config **owned;
  size_t n_owned;
  /* Tells the loop a plugin's path moved to another directory: its watch
   * follows (rewatch_on, under mu: the handle is open). */
  uv_async_t rewatch;
  int rewatch_on;
  /* Told (under mu) when a reload made another build the newest. */
  void (*on_newest)(void *ctx, const char *plugin, const char *hash);
  void *on_newest_ctx;
};
/* ---- reload_attach.c ---------------------------------------------------- */

/* Gives the engine build b of workflow w of plugin p: its run() in this
 * process, or the worker stand-in with the build's context when p runs
 * in workers.  newest as duro_engine_add_build's.  0 or its error. */
int reload_engine_build(reloader *r, const plugin_state *p, const build *b,
                        const config_workflow *w, int newest);
/* Whether plugin p's code runs in worker processes (then this process
 * never loads its builds). */
int reload_in_workers(const reloader *r, const plugin_state *p);

/* ---- reload.c ------------------------------------------------------------ */

/* The state of config plugin c (of the running config: a reload may
 * have put the plugins in another order). */
plugin_state *reload_state_of(reloader *r, const config_plugin *c);
/* Closes the initial copies still open (reload_load_initial's). */
void reload_close_initial(reloader *r);
/* err with the first mention of `copy` (a build's private copy) replaced
 * by `source`, the path the user wrote, into out. */
void reload_name_source(char *out, size_t len, const char *err,
                        const char *copy, const char *source);

/* ---- reload_probe.c ------------------------------------------------------ */

/* Loads `path` as plugin p in a child process first; with desc, the
 * child reports the build's descriptor, into *desc (owned by the caller).
 * Returns 0, or -1 with why in err. */
int reload_probe(reloader *r, const plugin_state *p, const char *path,
                 build_desc **desc, char *err, size_t errlen);

/* ---- reload_load.c ------------------------------------------------------- */

/* The loaded build `hash` of p, or NULL. */
build *reload_find_build(plugin_state *p, const char *hash);
/* Probes `path` (a copy) and makes the build of it into *out, without the
 * lock: for a plugin in workers, from the descriptor the probe reported
 * (nothing is loaded here); otherwise loaded in this process, its classes
 * checked.  Returns 0, or -1 with why in err. */
int reload_open_build(reloader *r, const plugin_state *p, const char *path,
                      build *out, char *err, size_t errlen);
/* Adds an opened build (its lp or desc taken) to p's builds as `hash`
 * (newest or, with newest = 0, before it). */
void reload_add_build(plugin_state *p, const build *b, const char *hash,
                      int newest);
/* reload_open_build, then reload_add_build. */
int reload_load_build(reloader *r, plugin_state *p, const char *path,
                      const char *hash, int newest, char *err, size_t errlen);
/* Whether build b exports class `class_name`. */
int reload_build_exports(const build *b, const char *class_name);
/* Unloads b's code from this process, or frees its descriptor. */
void reload_unload_build(build *b);
/* Remembers p's newest build in the store, its last good one. */
void reload_remember_newest(reloader *r, plugin_state *p);

/* ---- reload_attach.c ----------------------------------------------------- */

/* Feeds p's consumers without a workflow, and its cron ticks, to build
 * b's handlers. */
void reload_register_consumers(reloader *r, plugin_state *p, const build *b);
/* Gives the engine build b's run() for each workflow of the plugin. */
void reload_add_to_engine(reloader *r, plugin_state *p, const build *b,
                          int newest);

/* ---- reload_pinned.c ----------------------------------------------------- */

/* Offers every loaded build to the other hosts of a shared database (mu
 * held). */
void reload_share_builds(reloader *r);
/* Builds in-flight instances are pinned to, from the store (mu held). */
void reload_load_pinned_locked(reloader *r);

/* ---- reload_config.c ----------------------------------------------------- */

/* The config file read again: {"file", "status", "changes", "restart"?,
 * "error"?}.  Takes the lock. */
json_t *reload_config(reloader *r);

#endif
