/* build_desc.c — a build's descriptor written by the load probe and read
 * by the engine (build_desc.h). */
#include "build_desc.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

int build_desc_write(const loader_plugin *lp, int fd) {
  json_t *classes = json_array();
  for (size_t i = 0; loader_class_at(lp, i); i++)
    json_array_append_new(classes, json_string(loader_class_at(lp, i)));
  json_t *doc = json_pack("{s:o,s:b,s:b,s:b}", "classes", classes, "queue",
                          loader_info(lp)->queue != NULL, "scheduled",
                          loader_info(lp)->scheduled != NULL, "tail",
                          loader_info(lp)->tail != NULL);
  int rc = doc ? json_dumpfd(doc, fd, JSON_COMPACT) : -1;
  if (!doc)
    errno = EINVAL; /* a class name that is not UTF-8 */
  json_decref(doc);
  return rc;
}

build_desc *build_desc_read(int fd, char *err, size_t errlen) {
  json_error_t je;
  json_t *doc = NULL, *classes = NULL;
  int queue = 0, scheduled = 0, tail = 0;
  if (lseek(fd, 0, SEEK_SET) != 0) {
    snprintf(err, errlen, "cannot read the build's descriptor: %s",
             strerror(errno));
    return NULL;
  }
  doc = json_loadfd(fd, 0, &je);
  if (!doc ||
      json_unpack_ex(doc, &je, 0, "{s:o,s:b,s:b,s:b}", "classes", &classes,
                     "queue", &queue, "scheduled", &scheduled, "tail",
                     &tail) != 0 ||
      !json_is_array(classes)) {
    snprintf(err, errlen,
             "the load probe reported no descriptor of the "
             "build: %s",
             doc ? je.text : "(nothing)");
    json_decref(doc);
    return NULL;
  }
  build_desc *d = xcalloc(1, sizeof *d);
  d->queue = queue;
  d->scheduled = scheduled;
  d->tail = tail;
  d->classes = xcalloc(json_array_size(classes) + 1, sizeof *d->classes);
  size_t i;
  json_t *c;
  json_array_foreach(classes, i, c) if (json_is_string(c))
      d->classes[d->n_classes++] = xstrdup(json_string_value(c));
  json_decref(doc);
  return d;
}

int build_desc_has_class(const build_desc *d, const char *class_name) {
  for (size_t i = 0; class_name && i < d->n_classes; i++)
    if (!strcmp(d->classes[i], class_name))
      return 1;
  return 0;
}

void build_desc_free(build_desc *d) {
  if (!d)
    return;
  for (size_t i = 0; i < d->n_classes; i++)
    free(d->classes[i]);
  free(d->classes);
  free(d);
}
