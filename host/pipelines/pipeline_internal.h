/* pipeline_internal.h — what the files of pipelines/ share: the driver's
 * state (the registered pipelines) and the calls one file makes in
 * another.  Not for other modules.
 *
 *   pipeline.c         the registry, sends, stats
 *   pipeline_api.c     the plugin API's bindings and sends
 *   pipeline_flush.c   the flusher: a batch planned, written, done,
 *                      a failed write tried again after a back-off
 *   pipeline_encode.c  a batch's bytes: its records as JSON lines or
 *                      CSV, gzip'ed or not, onto a file descriptor
 *   pipeline_csv.c     a csv pipeline's header and rows
 *   pipeline_file.c    the files sink: one batch's file, temporary,
 *                      synced, renamed
 *   pipeline_s3.c      the object storage sink: one batch's object,
 *                      uploaded by a signed PUT
 *   pipeline_thread.c  the flusher's own thread, woken by each scheduler
 *                      pass
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

/* How long a send trusts the backlog it last read (the engine clock):
 * sends of other hosts on a shared store are seen within this. */
#define PIPELINE_BACKLOG_READ_MS 1000

/* How many sends a read of what waits holds at once (no records read). */
#define PIPELINE_PAGE 1000
/* Sends read with their records a page, when a batch is encoded. */
#define PIPELINE_SEND_PAGE 64

/* A failed write is tried again after 1 s, then twice as long each time
 * up to max_retry_delay_ms (default a minute), until one works. */
#define PIPELINE_RETRY_MIN_MS 1000
#define PIPELINE_RETRY_MAX_MS 60000

typedef struct pipeline {
  duro_engine *engine; /* a plugin's handle (duro_env_pipeline) is this */
  char *name;
  char *binding; /* what plugins reach it by, or NULL (duro_pipeline_bind) */
  duro_pipeline_options o; /* its strings owned */
  /* Held while a batch of it is planned and written: the flusher's
   * thread and a test's duro_pipelines_dispatch never write one file
   * at once. */
  pthread_mutex_t flush_mu;
  int64_t retry_ms;   /* the back-off after failed writes, 0 after one
                         worked (flush_mu) */
  int64_t retry_at;   /* no write before this (engine clock; flush_mu) */
  pthread_mutex_t mu; /* guards what follows */
  char *last_error;   /* the last failed write; NULL once one works */
  int64_t errors;     /* failed writes since start */
  /* The backlog as a send checks it (pipeline.c): the bytes read from
   * the journal at backlog_read_ms (INT64_MIN: never), plus those of
   * every send accepted here since.  Only the flusher lowers the real
   * one, so on one host this is never below it: a send under the bound
   * is let through without a read, and one over it reads again. */
  int64_t backlog_bytes;
  int64_t backlog_read_ms;
} pipeline;

typedef struct pipeline_state {
  pipeline *v; /* registered before the start, fixed from then on */
  size_t n;
  /* The flusher's thread (pipeline_thread.c), started by the first
   * scheduler pass that finds a pipeline. */
  pthread_mutex_t mu; /* guards what follows */
  pthread_cond_t wake;
  pthread_t thread;
  int started;
  int stop;        /* written atomically (an upload reads it unlocked) */
  int wanted;      /* a pass asked for a round since the last began */
  int64_t next_ms; /* when a pipeline is due next (INT64_MAX: unknown) */
  int64_t told_ms; /* what the last pass was told (INT64_MAX: nothing) */
} pipeline_state;

pipeline_state *pipeline_state_of(duro_engine *e);
pipeline *pipeline_find(duro_engine *e, const char *name);
void pipeline_set_error(pipeline *p, const char *msg);
/* The pipeline bound to `binding`, or NULL. */
pipeline *pipeline_bound(duro_engine *e, const char *binding);
/* records[0..n) as the lines of a file, each a record and a newline, as
 * a send's op holds them (malloc'ed, *len bytes); NULL when a record
 * holds a newline: it is not compact JSON, and would be two lines. */
char *pipeline_lines(const char *const *records, size_t n, size_t *len);
/* Adds the append of n records, `lines` of `len` bytes (pipeline_lines;
 * they must live until b is committed), to b as one op, for a commit of
 * the caller's: a step's sends join its result's.  DURO_E_OVERLOADED:
 * p's backlog is past its bound (nothing added). */
int pipeline_append_op(duro_engine *e, pipeline *p, const char *lines, size_t n,
                       size_t len, journal_batch *b);

/* pipeline_flush.c: the due batches of p, at most one new one (a plan
 * left over first); returns files written (0 or 1), or -1 on a failure
 * (recorded in p).  *next_ms: when p is due next (INT64_MAX: unknown). */
int pipeline_flush(duro_engine *e, pipeline *p, int64_t now, int64_t *next_ms);

/* Every pipeline's due batches, each pipeline until none is due (at
 * most `rounds` files a pipeline); files written into *files, and
 * returns when one is due next (INT64_MAX: unknown). */
int64_t pipeline_flush_all(duro_engine *e, pipeline_state *s, int rounds,
                           size_t *files);

/* pipeline_thread.c: a scheduler pass asks the thread for a round (it
 * starts it the first time); *next_ms gets when a pipeline is due next,
 * as the last round saw it. */
void pipeline_thread_wake(duro_engine *e, pipeline_state *s, int64_t *next_ms);
/* Stops the thread once its current file is written. */
void pipeline_thread_stop(pipeline_state *s);

/* pipeline_encode.c: writes records first..last of p to fd as JSON
 * lines or CSV, gzip'ed when p's options say so, the same bytes each
 * time; 0, or -1 with what failed in err. */
int pipeline_encode_batch(journal *j, const pipeline *p, int64_t first,
                          int64_t last, int fd, char *err, size_t errlen);

/* Bytes being built; the caller frees p. */
typedef struct pipeline_buf {
  char *p;
  size_t n, cap;
} pipeline_buf;

/* pipeline_csv.c: the header line of o's columns, appended to out. */
void pipeline_csv_header(const duro_pipeline_options *o, pipeline_buf *out);
/* The rows of a send's `len` bytes of lines (each a compact JSON record
 * and '\n', as the journal keeps them), appended to out. */
void pipeline_csv_rows(const duro_pipeline_options *o, const char *lines,
                       size_t len, pipeline_buf *out);

/* pipeline_file.c: writes records first..last of p as the file of that
 * batch planned at plan_ms, replacing any file of that name (the same
 * bytes); 0, or -1 with why in err. */
int pipeline_write_batch(journal *j, const pipeline *p, int64_t first,
                         int64_t last, int64_t plan_ms, char *err,
                         size_t errlen);

/* pipeline_s3.c: libcurl's global set-up, once (on the thread that
 * registers, before the flusher's starts). */
void pipeline_s3_init(void);
/* Uploads records first..last of p as the object of that batch planned
 * at plan_ms, replacing any object of that key (the same bytes); 0 once
 * the PUT was answered 2xx, or -1 with why in err.  An upload under way
 * gives up once *stop (read atomically) is set. */
int pipeline_s3_put_batch(journal *j, const pipeline *p, int64_t first,
                          int64_t last, int64_t plan_ms, const int *stop,
                          char *err, size_t errlen);

#endif
