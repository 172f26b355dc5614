/* loader.h — opens plugin shared objects and checks they fit this host.
 *
 * loader_open() dlopens with RTLD_NOW | RTLD_LOCAL (a path without a '/'
 * as "./PATH": never through the system's library search), finds the
 * `duro_plugin` function, and checks the descriptor it returns: magic,
 * size, ABI major and minor, then the layout fingerprint field by field.
 * Only then does it bind the API table and call the plugin's init.  Every
 * refusal names the plugin, its path, and the field with both values.  A
 * plugin built against an older minor loads (duro.h, "Which plugins a host
 * loads"). */
#ifndef DURO_LOADER_H
#define DURO_LOADER_H

#include <stddef.h>

#include "duro.h"

typedef struct loader_plugin loader_plugin;

/* Loads `path` as plugin `name` and binds `api`, which must outlive the
 * plugin; the plugin is checked against that table's size and abi_minor.
 * On error returns a DURO_E_PLUGIN and writes a message into err. */
int loader_open(const char *name, const char *path, const duro_api *api,
                loader_plugin **out, char *err, size_t errlen);

/* Checks a descriptor without loading anything (used by loader_open and
 * the tests) against `api`'s size and abi_minor, or this host's own table
 * when api is NULL.  Returns 0 or DURO_E_PLUGIN with a message. */
int loader_check_info(const duro_plugin_info *info, const duro_api *api,
                      const char *name, const char *path, char *err,
                      size_t errlen);

/* The descriptor as this host reads it: the plugin's bytes up to the size
 * it declared, zero beyond, and its workflow table read with the plugin's
 * entry size into entries of this host's.  Its layout is the plugin's: a
 * member a later minor appends to duro_step_config or duro_retries must be
 * read only when layout.step_config_size or layout.retries_size reaches it
 * (duro.h promises zero otherwise). */
const duro_plugin_info *loader_info(const loader_plugin *p);

/* A file's build identity (FNV-1a 64 of its bytes, 16 lowercase hex
 * digits and a NUL) into out.  Returns 0 or a negative errno. */
int loader_hash_file(const char *path, char out[17]);

/* The build identity: a 16-hex-digit hash (FNV-1a 64) of the file's
 * content, computed at load. */
const char *loader_build(const loader_plugin *p);

/* The entrypoint exported under `class_name`, or NULL. */
duro_run_fn loader_find_workflow(const loader_plugin *p,
                                 const char *class_name);

/* The class of the plugin's workflow i (in its order), or NULL past the
 * last. */
const char *loader_class_at(const loader_plugin *p, size_t i);

/* The classes the plugin exports, in its order, as `"A", "B"` (or `no
 * classes`), into buf (cut at len); returns buf. */
const char *loader_class_list(const loader_plugin *p, char *buf, size_t len);

/* Writes `plugin "NAME" (PATH) exports no class "CLASS"; it exports "A",
 * "B"` into err and returns DURO_E_PLUGIN: the refusal of a class_name
 * that loader_find_workflow did not find, with what the plugin offers
 * instead. */
int loader_missing_class(const loader_plugin *p, const char *name,
                         const char *path, const char *class_name, char *err,
                         size_t errlen);

/* Calls fini and dlcloses. NULL is fine. */
void loader_close(loader_plugin *p);

#endif
