/* paths.h — file paths written in a config, resolved against the directory
 * of the config file itself, so that a config means the same files
 * whatever the current directory of the process that reads it.
 *
 * config_load() resolves every file path of the config with these
 * (storage.path, default included, and each plugin's path); the results
 * are absolute.  A relative path's leading "./" and "../" components are
 * folded into the directory, which is canonical (realpath), so folding
 * them is exact; a ".." after a name is kept as written, since that name
 * may be a symbolic link. */
#ifndef DURO_CONFIG_PATHS_H
#define DURO_CONFIG_PATHS_H

/* The absolute, canonical directory holding `config_file` (which must
 * exist for the canonical form; otherwise the directory as written, made
 * absolute with the current directory).  Malloc'ed. */
char *config_dir_of(const char *config_file);

/* `path` if it is absolute, else `path` under `dir` (absolute), its
 * leading "." and ".." components folded into dir.  Malloc'ed. */
char *config_resolve_path(const char *dir, const char *path);

#endif
