/* breaker.h — the crash-storm breaker: a workflow whose code in a build
 * crashes its worker process too often is held on that build (its
 * sibling workflows of the same build run on).
 *
 * Each plugin's config says how often is too often (`crash_storm:
 * {crashes: 5, window: 60s, rate: 0.5}`: the 5th crash of one workflow's
 * build within 60 s trips it when the 4 after the first are at least
 * half of the attempts that ended since the first, so a busy build that
 * crashes now and then is never held; rate 0 counts crashes only) and
 * what then (`on_crash_storm`):
 *
 *   pause      the build is held (duro_engine_hold_build): its
 *              instances' activations run none of its code and wait,
 *              status waiting with wait_type "build.crashing", until an
 *              operator resumes the plugin (`duro plugins resume NAME`,
 *              POST /plugins/{name}/resume) or a new build becomes the
 *              newest, which they then run unless pinned to the held one
 *              and a step of theirs ran on it;
 *   rollback   the same, and the newest build before it that never
 *              crashed becomes the newest again (when one is loaded):
 *              new instances, those under versioning: latest and those
 *              that ran no step on the held build start on it at once.
 *
 * The breaker never touches other builds or plugins.  Its counts and
 * holds live in this process: a host that restarts wakes the instances
 * held (breaker_start), and a build that still crashes trips again.
 * Crashes are counted on the monotonic clock, in the thread that saw
 * them (an activation's); the attempts by the engine, one atomic add
 * per attempt on the build (duro_engine_build_attempts), read only at a
 * crash.  Every call takes the breaker's own lock and calls the engine
 * and the rollback hook without it. */
#ifndef DURO_BREAKER_H
#define DURO_BREAKER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "engine.h"

/* The wait_type of an instance whose build is held. */
#define BREAKER_REASON "build.crashing"

typedef struct breaker breaker;

/* `cfg` is borrowed and outlives the breaker. */
breaker *breaker_new(const config *cfg);
void breaker_free(breaker *b);

/* Makes build `to` (of plugin `plugin`) the newest again, the newest
 * before `bad` that `usable` accepts: 0 with its hash in `to`, or -1 when
 * none is loaded.  The reloader's (reload_rollback). */
typedef int (*breaker_rollback_fn)(void *ctx, const char *plugin,
                                   const char *bad,
                                   int (*usable)(void *uctx, const char *hash),
                                   void *uctx, char *to, size_t tolen);
void breaker_set_rollback(breaker *b, breaker_rollback_fn fn, void *ctx);

/* Once the engine is open and before it starts: instances a host that
 * ran before held wake to look again (no hold outlives the process). */
void breaker_start(breaker *b, duro_engine *e);

/* The engine's on_build_crash: a crash charged to build `build` of
 * `workflow`, whose attempts ended so far are `attempts`. */
void breaker_crashed(breaker *b, const char *workflow, const char *build,
                     uint64_t attempts);

/* Build `hash` became the newest of plugin `plugin` (a reload, a
 * rollback): the held instances look again. */
void breaker_newest(breaker *b, const char *plugin, const char *hash);

/* Releases every held build of plugin `name`: {"plugin","released":
 * [{"build","workflow","crashes","woken"}]} into *report; -1 for an
 * unknown plugin. */
int breaker_resume(breaker *b, const char *name, json_t **report);

/* Adds to GET /plugins' list ({"plugins":[{"name","builds":[{"build"}]}]})
 * each build's "crashes" in the window, its "attempts" ended in this
 * engine and, when one of its workflows is held,
 * "held": {"since_ms","crashes","attempts","reason","action","workflows"}
 * ("attempts": those ended since the first of its crashes); and
 * to the list itself
 * "held_instances": {workflow: n} of instances waiting on a hold. */
void breaker_annotate(breaker *b, json_t *list);

#endif
