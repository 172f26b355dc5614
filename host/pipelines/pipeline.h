/* pipeline.h — pipelines: records (JSON texts) kept durably in the
 * journal as they are sent, then written in batches of JSON lines to
 * files or to objects of an S3-compatible bucket, each record in exactly
 * one batch exactly once across crashes.
 *
 * A pipeline is registered with its options before the engine starts (as
 * the host does from the config's pipelines).  A send appends records
 * with the pipeline's next sequence numbers in one group commit: when it
 * returns 0 they are on disk.  Each pass of the engine's scheduler wakes
 * the flusher's thread (pipeline_driver.c, pipeline_thread.c), which
 * writes a batch once roll_size bytes wait or the oldest record waited
 * roll_interval_ms (pipeline_flush.c). */
#ifndef DURO_PIPELINE_H
#define DURO_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

/* What one send may hold (POST /pipelines/{name} refuses more, storing
 * nothing): a record's compact JSON text, a request's body, its records. */
#define DURO_PIPELINE_MAX_RECORD 1000000
#define DURO_PIPELINE_MAX_BODY 5000000
#define DURO_PIPELINE_MAX_RECORDS 10000

enum { DURO_PIPELINE_NONE = 0, DURO_PIPELINE_GZIP = 1, DURO_PIPELINE_ZSTD = 2 };
/* What a batch's bytes are: JSON lines (.jsonl), or CSV (.csv) of the
 * columns the options name, every record a JSON object. */
enum { DURO_PIPELINE_JSONL = 0, DURO_PIPELINE_CSV = 1 };

typedef struct duro_pipeline_options {
  /* The sink: files under dir, or objects of s3.bucket (one of the two
   * set). */
  const char *dir;       /* the files sink's root directory (absolute) */
  const char *partition; /* "{yyyy}/{mm}/{dd}/{hh}" (config.h) */
  struct {
    const char *endpoint; /* "http(s)://host[:port]" */
    const char *bucket;
    const char *prefix;     /* may be NULL: none */
    const char *region;     /* of the signature */
    const char *access_key; /* the keys themselves, never shown */
    const char *secret_key;
  } s3;
  int format; /* DURO_PIPELINE_JSONL (0) or _CSV */
  /* A csv pipeline's columns (at least one; none for jsonl), each a
   * record's top-level key, or a JSON pointer into it when it starts
   * with '/' ("/user/id"); the header line holds them as given. */
  const char *const *columns;
  size_t n_columns;
  int compression;   /* DURO_PIPELINE_GZIP: .jsonl.gz (.csv.gz), _ZSTD:
                        .jsonl.zst, _NONE: .jsonl */
  int64_t roll_size; /* bytes of records a file holds at most */
  int64_t roll_interval_ms;
  int64_t max_backlog; /* bytes waiting past which sends are refused */
  /* A failed write is tried again after 1 s, then twice as long each
   * time up to this; 0: a minute. */
  int64_t max_retry_delay_ms;
} duro_pipeline_options;

/* Registers pipeline `name` (copied, as are the options' strings and
 * columns); before duro_engine_start.  DURO_E_ALREADY_EXISTS for a name
 * taken, DURO_E_INVALID_ARGUMENT for options that name no sink or both,
 * a csv pipeline without columns (or with one that is no JSON pointer),
 * or columns for jsonl. */
int duro_pipeline_register(duro_engine *e, const char *name,
                           const duro_pipeline_options *o);
/* Binds `binding` to pipeline `name`, for plugins' duro_env_pipeline;
 * before duro_engine_start.  DURO_E_NOT_FOUND: no such pipeline;
 * DURO_E_ALREADY_EXISTS: the binding is taken. */
int duro_pipeline_bind(duro_engine *e, const char *binding, const char *name);
/* Puts the pipelines' calls in the plugin API table (api.c assembles
 * it): duro_env_pipeline and duro_pipeline_send.  pipeline_api.c. */
void pipeline_api_fill(duro_api *t);
/* Whether `name` is registered. */
int duro_pipeline_exists(duro_engine *e, const char *name);
/* Whether pipeline `name` takes only JSON objects (format csv: a column
 * is a key of each record); 0 for one not registered. */
int duro_pipeline_objects_only(duro_engine *e, const char *name);

/* Appends records[0..n) (each a JSON text, compact) to the pipeline in
 * one commit; *first_seq (may be NULL) gets the first one's seq.
 * DURO_E_NOT_FOUND: no such pipeline; DURO_E_OVERLOADED: its backlog is
 * past max_backlog (nothing stored); DURO_E_INVALID_MESSAGE: a record
 * holds a newline, so is not compact, or is not a JSON object and the
 * pipeline is csv (nothing stored); DURO_E_STORAGE. */
int duro_pipeline_append(duro_engine *e, const char *name,
                         const char *const *records, size_t n,
                         int64_t *first_seq);

/* Calls fn with each record not yet written (compact JSON), in the order
 * accepted, at most `limit`, until fn returns nonzero.  For the test kit,
 * whose pipelines write no files.  DURO_E_NOT_FOUND: no such pipeline. */
int duro_pipeline_peek(duro_engine *e, const char *name, size_t limit,
                       int (*fn)(void *ctx, const char *record), void *ctx);

/* What GET /pipelines shows of one pipeline. */
typedef struct duro_pipeline_stat {
  char *name;
  const duro_pipeline_options *options; /* the registered ones */
  int64_t accepted, accepted_bytes, written, written_bytes, files;
  int64_t backlog, backlog_bytes;
  int64_t oldest_ms;     /* JOURNAL_NONE-like INT64_MIN: nothing waits */
  int64_t last_flush_ms; /* INT64_MIN: never */
  int64_t plan_first, plan_last; /* the batch being written (0: none) */
  char *last_error;              /* the last failed write, or NULL */
  int64_t write_errors;          /* failed writes (uploads) since start */
} duro_pipeline_stat;
typedef struct duro_pipeline_stat_list {
  duro_pipeline_stat *v;
  size_t n;
} duro_pipeline_stat_list;
/* Every registered pipeline (name NULL) or one (DURO_E_NOT_FOUND when it
 * is not registered), in name order. */
int duro_pipeline_stats_read(duro_engine *e, const char *name,
                             duro_pipeline_stat_list *out);
void duro_pipeline_stat_list_free(duro_pipeline_stat_list *l);

/* One round of the flusher, as its thread's, on the calling thread:
 * writes every batch that is due (a plan left by a crash first); returns
 * how many files it wrote.  For the tests, which drive the engine's passes
 * themselves. */
size_t duro_pipelines_dispatch(duro_engine *e);

/* The file a batch is written to, relative to the sink's directory (or
 * its object's key after the prefix):
 * "<partition>/<name>-<first>-<last>.jsonl[.gz|.zst]" (".csv[...]" for
 * csv), the partition from
 * plan_ms (UTC).  malloc'ed. */
char *duro_pipeline_file_name(const char *name, const duro_pipeline_options *o,
                              int64_t first, int64_t last, int64_t plan_ms);

#endif
