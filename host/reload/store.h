/* store.h — the build store: a private copy of every plugin build the
 * host loads, named by its content hash.
 *
 * The host never maps the file a user writes to: writing over a loaded
 * .so (cp) would change the code under running threads.  A build is first
 * copied (write to a temporary name, fsync, rename) into the store, by
 * default `builds/` beside the database, as `<hash>.so`, and only the
 * copy is dlopened.  Builds that in-flight instances are pinned to stay in
 * the store across restarts; unused ones are deleted. */
#ifndef DURO_BUILD_STORE_H
#define DURO_BUILD_STORE_H

#include <stddef.h>

/* The store's directory for a database at db_path: "<dir>/builds";
 * malloc'ed. */
char *build_store_dir(const char *db_path);

/* Copies `src` into `dir` (created if missing) as "<hash>.so", where hash
 * is the copy's content hash (so a file rewritten while it is copied gets
 * the hash of what was copied).  hash receives 16 hex digits; *stored
 * (malloc'ed) the copy's path.  An existing copy with that hash is kept.
 * Returns 0, or -1 with a message naming the paths in err. */
int build_store_import(const char *dir, const char *src, char hash[17],
                       char **stored, char *err, size_t errlen);

/* "<dir>/<hash>.so", malloc'ed. */
char *build_store_path(const char *dir, const char *hash);

/* Deletes a build that nothing needs any more. */
void build_store_remove(const char *dir, const char *hash);

#endif
