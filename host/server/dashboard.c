/* dashboard.c — finding the dashboard's embedded files by path. */
#include "dashboard.h"

#include <string.h>

#define UI_PREFIX "/ui/"

int dashboard_path(const char *path, size_t len) {
  size_t plen = strlen(UI_PREFIX);
  return (len == 1 && path[0] == '/') ||
         (len > plen && memcmp(path, UI_PREFIX, plen) == 0);
}

const dashboard_file *dashboard_find(const char *path) {
  const char *name;
  if (!strcmp(path, "/"))
    name = "index.html";
  else if (!strncmp(path, UI_PREFIX, strlen(UI_PREFIX)))
    name = path + strlen(UI_PREFIX);
  else
    return NULL;
  for (size_t i = 0; i < dashboard_n_files; i++)
    if (!strcmp(dashboard_files[i].name, name))
      return &dashboard_files[i];
  return NULL;
}
