/* dashboard.h — the web dashboard's static files (host/dashboard/),
 * compiled into the binary by host/dashboard/embed.py and served by the
 * HTTP listener at "/" (index.html) and "/ui/NAME".  The page itself reads
 * everything through the public JSON routes, with the listener's token. */
#ifndef DURO_DASHBOARD_H
#define DURO_DASHBOARD_H

#include <stddef.h>

typedef struct dashboard_file {
  const char *name; /* "app.js" */
  const char *type; /* its Content-Type */
  const unsigned char *data;
  size_t len;
} dashboard_file;

/* The generated table (dashboard_files.c). */
extern const dashboard_file dashboard_files[];
extern const size_t dashboard_n_files;

/* 1 when `path` (len bytes, without the query) is the dashboard's: "/"
 * or under "/ui/".  No API route starts there. */
int dashboard_path(const char *path, size_t len);

/* The file a dashboard path names, or NULL. */
const dashboard_file *dashboard_find(const char *path);

#endif
