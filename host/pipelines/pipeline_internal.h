/* pipeline_internal.h — what the files of pipelines/ share: the driver's
 * state (the registered pipelines) and the calls one file makes in
 * another.  Not for other modules.
 *
 *   pipeline.c         the registry, sends, stats
 *   pipeline_flush.c   the flusher: a batch planned, written, done
 *   pipeline_file.c    one batch's file: temporary, gzip'ed, synced,
 *                      renamed
 *   pipeline_driver.c  the hooks into the engine (driver.h) */
#ifndef DURO_PIPELINE_INTERNAL_H
#define DURO_PIPELINE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "driver.h"
#include "journal.h"
#include "pipeline.h"
#include "pipeline_driver.h"

/* How long a host holds a plan it claimed (the engine clock): on a shared
 * store another host carries a plan out only once the holder let it run
 * out (a crash, a stall); each pass that works on it claims it again. */
#define PIPELINE_PLAN_LEASE_MS 60000

/* How many records a read of a batch holds at once. */
#define PIPELINE_PAGE 1000

typedef struct pipeline {
  char *name;
  duro_pipeline_options o; /* its strings owned */
  pthread_mutex_t mu;      /* guards last_error and errors */
  char *last_error;        /* the last failed write; NULL once one works */
  int64_t errors;          /* failed writes since start */
} pipeline;

typedef struct pipeline_state {
  pipeline *v; /* registered before the start, fixed from then on */
  size_t n;
} pipeline_state;



pipeline_state *pipeline_state_of(duro_engine *e);
pipeline *pipeline_find(duro_engine *e, const char *name);
void pipeline_set_error(pipeline *p, const char *msg);

/* pipeline_flush.c: the due batches of p, at most one new one (a plan
 * left over first); returns files written (0 or 1), or -1 on a failure
 * (recorded in p).  *next_ms: when p is due next (INT64_MAX: unknown). */
int pipeline_flush(duro_engine *e, pipeline *p, int64_t now, int64_t *next_ms);

/* pipeline_file.c: writes records first..last of p as the file of that
 * batch planned at plan_ms, replacing any file of that name (the same
 * bytes); 0, or -1 with why in err. */
int pipeline_write_batch(journal *j, const pipeline *p, int64_t first,
                         int64_t last, int64_t plan_ms, char *err,
                         size_t errlen);

#endif
