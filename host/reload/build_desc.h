/* build_desc.h — what the engine knows of a build whose code it never
 * loads: the classes it exports and whether it has a queue handler, a
 * scheduled handler and a tail handler.
 *
 * A plugin that runs in worker processes (`workers` > 0) has its builds
 * loaded by the load probe (`duro __load`) and by its workers, never by
 * the engine, which runs no constructor or init of theirs.  The probe,
 * which has the build open, writes its descriptor to a descriptor the
 * engine handed it (build_desc_write), and the engine reads it back
 * (build_desc_read) and keeps it with the build instead of a handle.
 * The text is one JSON object:
 *
 *   {"classes": ["A", "B"], "queue": true, "scheduled": false, "tail": false}
 */
#ifndef DURO_BUILD_DESC_H
#define DURO_BUILD_DESC_H

#include <stddef.h>

#include "loader.h"

typedef struct build_desc {
  char **classes; /* the classes it exports, in its order (owned) */
  size_t n_classes;
  int queue;     /* it has a queue handler */
  int scheduled; /* it has a scheduled handler */
  int tail;      /* it has a tail handler */
} build_desc;

/* Writes the descriptor of the open plugin lp to `fd` (the probe's side).
 * Returns 0, or -1 with errno set. */
int build_desc_write(const loader_plugin *lp, int fd);

/* Reads a descriptor build_desc_write wrote to `fd`, from its start (the
 * engine's side).  Returns it (malloc'ed, build_desc_free), or NULL with
 * why in err. */
build_desc *build_desc_read(int fd, char *err, size_t errlen);

/* Whether the build exports class `class_name`. */
int build_desc_has_class(const build_desc *d, const char *class_name);

/* Frees d; NULL is fine. */
void build_desc_free(build_desc *d);

#endif
