/* reload.h — the plugins of the engine process, and their hot reload.
 *
 * Every build a plugin has is loaded from its copy in the build store
 * (store.h), never from the path the user writes to.  A new build (a
 * changed file, seen by a directory watch, SIGHUP, `duro reload` or
 * POST /plugins/{name}/reload) is copied, then loaded in a probe process
 * first (`duro __load`: dlopen, constructors, ABI checks, init, every
 * configured class), so a build that fails or crashes while loading is
 * refused with the previous one still serving; only then is it loaded
 * beside the old builds and made the newest of each of its workflows.
 * A plugin whose code runs in worker processes is never loaded here: the
 * probe reports what the engine needs of the build (build_desc.h).
 * Instances pinned to older builds keep them loaded; a periodic pass
 * unloads and deletes builds no instance needs (reload_gc).
 *
 * All functions take the reloader's lock, but a reload does not hold it
 * while it probes and opens a new build (a slow constructor): it takes it
 * again to install the build, unless a reload running beside it
 * installed the same build meanwhile. */
#ifndef DURO_RELOAD_H
#define DURO_RELOAD_H

#include <jansson.h>
#include <stddef.h>
#include <uv.h>

#include "config.h"
#include "engine.h"

struct ledger;
typedef struct reloader reloader;

/* `cfg` and `ledger` (may be NULL) are borrowed; `self` is the path of the
 * duro binary, for probes. */
reloader *reload_new(const config *cfg, struct ledger *ledger,
                     const char *self);
void reload_free(reloader *r);

/* Loads every plugin's configured file, before the storage lock: the
 * copies go to a private temporary directory (nothing is created beside
 * the database yet).  When the supervisor restarts a dead engine, a file
 * that fails its probe falls back to the plugin's last good build in the
 * store (a bad deploy must not become a crash loop); on a first start it
 * is refused.  Prints each problem as file:line:column and returns their
 * number. */
int reload_load_initial(reloader *r);

/* Plugins whose config says `workers` > 0 run their code in the pool's
 * processes (worker.h): the engine gets worker_proxy_run for their
 * builds.  Set before reload_attach; the pool outlives the reloader's
 * engine.  Without a pool every plugin runs in the engine's process. */
struct worker_pool;
void reload_set_workers(reloader *r, struct worker_pool *pool);

/* Once the storage lock is held and the engine open: moves the initial
 * copies into the build store, registers every workflow with its newest
 * build, and loads the older builds in-flight instances are pinned to. */
int reload_attach(reloader *r, duro_engine *e);

/* Reloads plugin `name` (NULL: every plugin, after the config file read
 * again: cfgdiff.h).  *report (may be NULL) receives {"plugins":[{"name",
 * "status":"loaded|unchanged|refused","build","previous","error"}],
 * "config"?:{"file","status":"applied|unchanged|refused","changes",
 * "restart"?,"error"?}}; returns the number refused, the config counting
 * as one (or -1 for an unknown name). */
int reload_plugins(reloader *r, const char *name, json_t **report);

/* reload_plugins on libuv's pool (for the loop: a watch, SIGHUP). */
void reload_queue(reloader *r, uv_loop_t *loop, const char *name);
/* Reloads queued and not finished: the host waits for none before it
 * closes the engine. */
int reload_queued(const reloader *r);

/* fn (called under the reloader's lock: it must not call the reloader) is
 * told each time a reload makes a build the newest of its plugin. */
void reload_on_newest(reloader *r,
                      void (*fn)(void *ctx, const char *plugin,
                                 const char *hash),
                      void *ctx);

/* Makes the newest build before `bad` that usable() accepts the newest of
 * `plugin` again, when `bad` is still the newest (a rollback: its hash
 * into `to`): 0, or -1 when no such build is loaded.  Builds of a plugin
 * whose on_crash_storm is rollback keep the one before the newest loaded
 * for it (reload_gc).  `ctx` is the reloader (a breaker_rollback_fn). */
int reload_rollback(void *ctx, const char *plugin, const char *bad,
                    int (*usable)(void *uctx, const char *hash), void *uctx,
                    char *to, size_t tolen);

/* An operator resumed plugin `plugin`'s held builds: a reload may make
 * the build a rollback undid the newest again. */
void reload_forget_rollback(reloader *r, const char *plugin);

/* Loads the builds instances are pinned to that are not loaded yet,
 * fetching from the other hosts of a shared database those missing from
 * the store (after a takeover brought such instances). */
void reload_load_pinned(reloader *r);

/* Build `hash` of the plugin serving `workflow` given to that workflow,
 * loaded first if it is not (from the store, or fetched from the other
 * hosts of a shared database): for an ended instance restarted from a
 * step, whose build nothing pinned.  Returns 0, or -1 with why in err. */
int reload_give_build(reloader *r, const char *workflow, const char *hash,
                      char *err, size_t errlen);

/* Unloads and deletes every build that is not the newest and that no
 * activation runs and no instance that has not ended is pinned to.  Runs
 * journal reads: not on the event loop. */
void reload_gc(reloader *r);

/* {"plugins":[{"name","path","builds":[{"build","newest","loaded_ms",
 * "instances"}],"serves":{"workflows","queues","crons"}}]}: "serves" is
 * what the config gives the plugin (workflow names, consumed queues, cron
 * schedules). */
json_t *reload_list(reloader *r);

/* Watches each plugin's file (its directory: an editor or a cp that
 * replaces the file is seen too) and reloads it ~250 ms after it last
 * changed.  A config reload that moves a plugin's path to another
 * directory moves its watch there. */
int reload_watch(reloader *r, uv_loop_t *loop);
void reload_unwatch(reloader *r);

/* `duro __load [--desc FD] NAME PATH [CLASS...]`: the probe.  Loads the
 * plugin, checks its classes, with --desc writes its descriptor to FD
 * (build_desc.h), unloads it; exit code 0 when all is well. */
int reload_probe_main(int argc, char **argv);

#endif
