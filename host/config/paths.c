/* paths.c — resolving a config's file paths against the config's own
 * directory (see paths.h).
 *
 * Relative paths in a config used to mean "from wherever duro was started",
 * so the same file named other files depending on the shell's directory,
 * and a bare plugin path ("liborders.so") was looked up by dlopen in the
 * system's library path instead of beside the config.  Anchoring them to
 * the config file, as Docker Compose does, gives a config one meaning. */
#include "paths.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

char *config_resolve_path(const char *dir, const char *path) {
  if (path[0] == '/')
    return xstrdup(path);
  size_t dlen = strlen(dir);
  while (dlen > 1 && dir[dlen - 1] == '/')
    dlen--;
  /* Fold the leading "." and ".." into dir; stop at the first name, after
   * which a ".." may climb out of a symbolic link and must stay. */
  const char *p = path;
  while (*p) {
    size_t n = strcspn(p, "/");
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      while (dlen > 1 && dir[dlen - 1] != '/')
        dlen--;
      if (dlen > 1)
        dlen--; /* the slash, unless it is the root's */
    } else if (!(n == 0 || (n == 1 && p[0] == '.'))) {
      break;
    }
    p += n;
    while (*p == '/')
      p++;
  }
  if (!*p)
    return xstrndup(dir, dlen);
  int root = dlen == 1 && dir[0] == '/';
  return xasprintf("%.*s%s%s", (int)dlen, dir, root ? "" : "/", p);
}

char *config_dir_of(const char *config_file) {
  const char *slash = strrchr(config_file, '/');
  char *dir = !slash ? xstrdup(".")
              : slash == config_file
                  ? xstrdup("/")
                  : xstrndup(config_file, (size_t)(slash - config_file));
  char *canonical = realpath(dir, NULL);
  if (canonical) {
    free(dir);
    return canonical;
  }
  if (dir[0] == '/')
    return dir;
  /* Not canonical (the directory went away, or cannot be searched), but
   * still absolute: the current directory's meaning now is fixed. */
  char *cwd = getcwd(NULL, 0);
  if (!cwd)
    return dir;
  char *abs = config_resolve_path(cwd, dir);
  free(cwd);
  free(dir);
  return abs;
}
