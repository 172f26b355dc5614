/* cfgdiff.h — what a config file read again changes, and applying the
 * part of it the engine can take while it runs.
 *
 * A reload (SIGHUP, `duro reload`) reads the config file again and
 * compares it with the running one, field by field.  Cron triggers,
 * queue consumer settings, workflow retention and limits.steps, and
 * plugin paths change live; every other difference (storage.*, http.*,
 * engine.*, a plugin, workflow, producer or consumer added or removed, a
 * workflow's binding, class, versioning, on_divergence, lifecycle queue
 * or limits.concurrency, a consumer's queue, workflow or id_from) needs a
 * restart, and refuses the whole change: nothing of it is applied. */
#ifndef DURO_RELOAD_CFGDIFF_H
#define DURO_RELOAD_CFGDIFF_H

#include <jansson.h>

#include "config.h"
#include "engine.h"
#include "trigger.h"

/* Appends to `live` a sentence for each change the engine can take
 * ("cron 0 3 * * * added (plugin orders)", "queue jobs: max_batch_size
 * 100 -> 10") and to `restart` one for each that needs a restart
 * ("storage.path: /a -> /b"). */
void cfgdiff_compare(const config *old, const config *cur, json_t *live,
                     json_t *restart);

/* The plugin of `cur` named `name` (plugins are matched by name), or
 * NULL. */
const config_plugin *cfgdiff_plugin(const config *cur, const char *name);

/* Gives the engine what `cur` says of the live fields: every queue's
 * options, the no-code consumers, the cron triggers, the workflows'
 * retention and limits.steps.  The consumers fed to a plugin's queue
 * handler are the reloader's (it knows the handler).  Returns 0, or -1
 * with why in err (an engine that refused a trigger). */
int cfgdiff_apply(const config *cur, duro_engine *e, char *err, size_t errlen);

/* The engine's spec of plugin p's cron trigger c (its strings borrowed
 * from the config): what a start registers and a reload swaps in. */
duro_cron_spec cfgdiff_cron_spec(const config_plugin *p, const config_cron *c);

#endif
