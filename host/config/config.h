/* config.h — the YAML configuration, parsed with libyaml into plain structs.
 *
 * config_load() reads the whole file, checks every key against the schema
 * (unknown key, wrong type, missing field, out-of-range value, duplicate
 * name or binding, a dead-letter queue equal to its own queue, nesting
 * deeper than 64 levels) and refuses it with "file:line:column: what is
 * wrong", as it refuses a queue producer bound to a queue that no consumer
 * consumes or names as its dead-letter queue.  Cron triggers are checked
 * the same way (the expression, its zone, the workflow of the no-code
 * form, the id template).  An unknown key is refused with the nearest
 * known key when one is close ("did you mean", suggest.h).  Every error
 * found is reported, not only the first, in file order, as a compiler
 * lists its errors (errlist.h).  Every string in the structs is owned by
 * the config and freed by config_free().
 *
 * File paths (storage.path, each plugin's path, each pipeline's
 * sink.files.path, http.tls's files) are written relative to
 * the config file: config_load() resolves them against its directory into
 * absolute paths (paths.h), so the same config names the same files from
 * any current directory.  config_parse(), which has no file, leaves them
 * as written. */
#ifndef DURO_CONFIG_H
#define DURO_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "errlist.h"

typedef struct config_pos {
  int line;   /* 1-based */
  int column; /* 1-based */
} config_pos;

/* A rule of a workflow's flow control, per value of `key` in the params
 * (a JSON pointer; NULL: the whole workflow): a concurrency rule
 * (flow.concurrency[]: at most `limit` of its activations run at once) or
 * a rate (flow.rate[]: at most `limit` instances start a `period`,
 * `burst` of them at once). */
#define CONFIG_FLOW_MAX_RULES 8
typedef struct config_flow_rule {
  char *key;
  uint32_t limit;
  int64_t period_ms; /* a rate's */
  uint32_t burst;    /* a rate's; default 1 */
  config_pos pos;
} config_flow_rule;

/* A weight of flow.fairness: the lane of the fairness key's `value`
 * takes `weight` turns a round (at most CONFIG_FLOW_MAX_WEIGHTS values);
 * a priority is within +-CONFIG_FLOW_PRIORITY_MAX (engine.h's bounds). */
#define CONFIG_FLOW_MAX_WEIGHTS 1000
#define CONFIG_FLOW_PRIORITY_MAX 1000000
typedef struct config_flow_weight {
  char *value;
  uint32_t weight;
} config_flow_weight;
/* One search attribute of a workflow's `index:` (base/attr.h's rules):
 * its name, the JSON pointer into the params it is taken from at create
 * (NULL: none, set from the workflow's code only), its type (DURO_ATTR_*:
 * string, the default, or number); at most CONFIG_MAX_ATTRS. */
#define CONFIG_MAX_ATTRS 16
typedef struct config_attr {
  char *name;
  char *from;
  int type;
  config_pos pos;
} config_attr;

/* flow.singleton's mode: a create whose key has a live instance is
 * skipped (answered with that one), or queued behind it. */
enum { CONFIG_SINGLETON_SKIP = 1, CONFIG_SINGLETON_QUEUE = 2 };

typedef struct config_workflow {
  char *name;       /* "order-flow" (required) */
  char *binding;    /* "ORDER_FLOW" (required) */
  char *class_name; /* "OrderFlow" (required) */
  /* retention: how long an instance that ended complete, errored or
   * terminated is kept; each default 30 days, at most 36500 (one
   * duration: the same for all three) */
  int64_t retention_ms, retention_errored_ms, retention_terminated_ms;
  int64_t timeout_ms;   /* from creation to instance.timed_out; 0 none */
  uint32_t max_steps;   /* limits.steps, default 10000, at most 25000 */
  uint32_t max_logs;    /* limits.logs: log lines an instance keeps, 1000 */
  uint32_t concurrency; /* limits.concurrency, 0 = unlimited */
  uint32_t parallel; /* limits.parallel: a duro_do_all's branches in flight */
  int versioning_latest;   /* versioning: pinned (0, default) | latest (1) */
  int pause_on_divergence; /* on_divergence: error (0, default) | pause */
  int rollback_on_timeout; /* on_timeout: error (0, default) | rollback */
  config_flow_rule *flow;  /* flow.concurrency, n_flow of them */
  size_t n_flow;
  config_flow_rule *rates; /* flow.rate, n_rates of them */
  size_t n_rates;
  int flow_reject; /* flow.on_excess: queue (0, default) | reject (1) */
  /* flow.priority: {key, default}; flow.fairness: {key, weights} (the
   * order of the rules' backlogs; NULL keys: first come first served) */
  char *priority_key;
  int64_t priority_default;
  char *fairness_key;
  config_flow_weight *weights;
  size_t n_weights;
  /* flow.singleton: at most one live instance per value of the params'
   * JSON pointer singleton_key (NULL: none), in singleton_mode
   * (CONFIG_SINGLETON_*) */
  char *singleton_key;
  int singleton_mode;
  /* flow.debounce: the creates of one value of debounce_key (NULL: of
   * the workflow) within debounce_ms (0: none) of the last are one
   * instance, started after that long a quiet spell or debounce_max_wait_ms
   * (0: no bound) after the first */
  char *debounce_key;
  int64_t debounce_ms;
  int64_t debounce_max_wait_ms;
  /* A queue (consumed or dead-lettered into by some consumer) that gets a
   * message as each instance starts and ends; NULL = none. */
  char *lifecycle_queue;
  /* index: its search attributes, n_index of them. */
  config_attr *index;
  size_t n_index;
  /* The plugins that receive its trace items (tail handlers), besides
   * its plugin's tail_consumers; each with where it was named. */
  char **tail_consumers;
  config_pos *tail_pos;
  size_t n_tail_consumers;
  config_pos pos;
  config_pos lifecycle_pos; /* of its "lifecycle_queue" value */
} config_workflow;

/* An API key's scopes (http.keys[].scopes): what its requests may do
 * (doc/reference/http.md has the table of routes). */
enum {
  CONFIG_SCOPE_READ = 1,    /* every GET */
  CONFIG_SCOPE_EVENTS = 2,  /* events to instances, messages to queues */
  CONFIG_SCOPE_OPERATE = 4, /* instances' and queues' control */
  CONFIG_SCOPE_ADMIN = 8    /* everything, the plugins' control too */
};

/* An entry of http.keys: a bearer token read from the environment
 * variable token_env at start, what it may do (CONFIG_SCOPE_* bits) and,
 * when the lists are given, the only workflows and queues it may reach. */
typedef struct config_api_key {
  char *name;
  char *token_env;
  unsigned scopes;
  char **workflows; /* NULL: any */
  size_t n_workflows;
  char **queues; /* NULL: any */
  size_t n_queues;
  config_pos pos;
  config_pos token_env_pos;
} config_api_key;

typedef struct config_producer {
  char *binding;
  char *queue;
  config_pos pos;
  config_pos queue_pos; /* of its "queue" value */
} config_producer;

typedef struct config_consumer {
  char *queue;
  uint32_t max_batch_size;      /* default 10, at most 100 */
  int64_t max_batch_timeout_ms; /* default 5 s */
  uint32_t max_retries;         /* default 3 */
  int64_t retry_delay_ms;       /* default 0 */
  char *dead_letter_queue;      /* NULL = none */
  uint32_t max_concurrency;     /* 0 (default) = as many as useful */
  int64_t message_retention_ms; /* of the queue's messages, default 4 days,
                                   1 minute to 14 days */
  /* How long a push batch stays leased to the queue handler (default
   * 30 s, 1 s to 12 h): a handler still running after it no longer holds
   * its messages, which are delivered again. */
  int64_t visibility_timeout_ms;
  /* The no-code consumer: each message creates one instance of workflow
   * (declared by some plugin), its id at JSON pointer id_from in the body.
   * NULL = the plugin's queue handler consumes the queue. */
  char *workflow;
  char *id_from; /* required with workflow, RFC 6901 */
  /* concurrency: {key, limit}: a handler's messages of one value at JSON
   * pointer concurrency_key (NULL = none), at most concurrency_limit
   * (default 1) in the handler at once, in the order sent. */
  char *concurrency_key;
  uint32_t concurrency_limit;
  config_pos pos;
  config_pos workflow_pos; /* of its "workflow" value */
} config_consumer;

/* A cron trigger (triggers.crons): a string is the handler form (the
 * plugin's scheduled handler fires on the schedule); a mapping may name a
 * workflow (the no-code form: one instance per tick) and the options. */
enum { CONFIG_CATCH_UP_LATEST = 0, CONFIG_CATCH_UP_NONE, CONFIG_CATCH_UP_ALL };
typedef struct config_cron {
  char *schedule;        /* the expression as written (checked by cron_parse) */
  char *timezone;        /* IANA name; NULL = UTC */
  char *workflow;        /* no-code form: declared by some plugin; NULL =
                            the plugin's scheduled handler */
  char *id;              /* no-code form: the instance id template
                            ({date} {time} {datetime} {ts}); default
                            "cron-{datetime}" */
  int catch_up;          /* CONFIG_CATCH_UP_*: latest (default) | none | all */
  uint32_t max_catch_up; /* catch_up all: at most this many late fires
                            (default 100, 1..10000) */
  int overlap_allow;     /* overlap: skip (0, default) | allow (1) */
  char *params;          /* no-code form: JSON object each instance's params
                            start from (a YAML mapping); NULL = none */
  char *weekday_note;    /* what a numbered weekday field means, or NULL */
  config_pos pos;
  config_pos schedule_pos; /* of the expression's first character */
  config_pos workflow_pos;
} config_cron;

/* A pipeline (pipelines[]): records sent to it (POST /pipelines/{name})
 * are kept in the journal and written in batches of JSON lines or CSV, each
 * batch once: as files under sink.files.path, one directory per partition, or
 * as objects of a bucket (sink.s3), one key prefix per partition. */
enum {
  CONFIG_COMPRESSION_GZIP = 0,
  CONFIG_COMPRESSION_NONE = 1,
  CONFIG_COMPRESSION_ZSTD = 2
};
enum { CONFIG_FORMAT_JSONL = 0, CONFIG_FORMAT_CSV = 1 };
typedef struct config_pipeline {
  char *name;    /* required, unique; the rule of queue names */
  char *binding; /* required, unique among bindings (plugins reach it by
                    this: duro_env_pipeline) */
  /* Exactly one sink: files (path set) or s3 (s3.bucket set). */
  char *path; /* sink.files.path (required there): the sink's root
                 directory, absolute after config_load */
  /* sink.files.partition or sink.s3.partition: the directory (the key's
   * part) of a batch under path (after the prefix), from the time it was
   * planned (UTC): {yyyy} {mm} {dd} {hh} {mi}; default
   * "{yyyy}/{mm}/{dd}/{hh}" */
  char *partition;
  /* sink.s3: an object storage bucket, reached path-style
   * (endpoint/bucket/key) and signed with the keys of two environment
   * variables, read when the host starts (never held in the config). */
  struct {
    char *endpoint;       /* required: http(s)://host[:port] */
    char *bucket;         /* required: 3-63 of a-z 0-9 . - */
    char *prefix;         /* every key's start, or NULL (none) */
    char *region;         /* of the signature, default "us-east-1" */
    char *access_key_env; /* required: the variables' names */
    char *secret_key_env;
  } s3;
  int format; /* CONFIG_FORMAT_* (default jsonl) */
  /* csv's columns (required there, refused for jsonl): each a top-level
   * key, or a JSON pointer (RFC 6901) when it starts with '/' */
  char **columns;
  size_t n_columns;
  int compression;            /* CONFIG_COMPRESSION_* (default gzip) */
  int64_t roll_size;          /* bytes of records in one file, default 100 MB */
  int64_t roll_interval_ms;   /* a file's oldest record waits at most this
                                 long, default 300 s */
  int64_t max_backlog;        /* bytes of records not yet written past which
                                 sends are refused (503), default 1 GB */
  int64_t max_retry_delay_ms; /* a failed write's back-off doubles up to
                                 this, default 60 s */
  config_pos pos;
} config_pipeline;

/* A shared resource (resources[]): at most `concurrency` attempts of the
 * steps naming it (duro_step_config.resource) run at once, across every
 * workflow, and at most rate.limit start a rate.period (rate.burst at
 * once).  At least one of the two; 0 means none. */
typedef struct config_resource {
  char *name;           /* required, unique; the rule of queue names */
  uint32_t concurrency; /* 1-1000000, 0: none */
  struct {
    uint32_t limit; /* 1-1000000, 0: no rate */
    int64_t period_ms;
    uint32_t burst; /* 0: one at a time */
  } rate;
  config_pos pos;
} config_resource;

#define CONFIG_DEFAULT_WORKERS 1
#define CONFIG_MAX_WORKERS 64
/* Callbacks of one plugin running at once in its workers: enough for
 * steps that block on I/O (a thread each in the worker, made as they are
 * needed and let go when idle). */
#define CONFIG_DEFAULT_CONCURRENCY 1024
/* A workflow's limits.parallel when it names none. */
#define CONFIG_DEFAULT_PARALLEL 100
#define CONFIG_MAX_CONCURRENCY 16384
/* crash_storm.rate: half the attempts of a build crash in a storm, in
 * millionths. */
#define CONFIG_DEFAULT_CRASH_RATE_PPM 500000
typedef struct config_plugin {
  char *name; /* required, unique */
  char *path; /* required: the .so (absolute after config_load) */
  /* Worker processes that run its code (run(), step callbacks); 0 = in
   * the engine's own process, as before workers existed. */
  uint32_t workers;
  /* Its step callbacks that run at once, spread over its workers (the
   * rest wait for a place before their CALL, and their timeout starts
   * when they begin); with workers 0, the engine threads they may hold
   * at once (the rest wait, parked, taking none), 0 = half of them, at
   * most all but one. */
  uint32_t concurrency;
  /* The crash-storm breaker (breaker/breaker.h): `crashes` crashes of
   * one workflow's build within `window_ms`, at least `rate` of its
   * attempts since the first of them, hold the build's new activations;
   * rollback also makes the newest build before it that did not crash
   * the newest again.  crashes 0 = no breaker. */
  struct {
    uint32_t crashes;  /* default 5 */
    int64_t window_ms; /* default 60 s */
    uint32_t rate_ppm; /* millionths; default half (500000) */
    int rollback;      /* on_crash_storm: pause (default, 0) or rollback */
  } crash_storm;
  /* limits, 0 = none: the memory of each of its worker processes (with
   * the processes it starts), their processes and threads, the CPUs
   * each may use, and the CPU time of one attempt's callback. */
  struct {
    int64_t memory; /* bytes */
    int64_t cpu_ms;
    uint32_t processes;
    uint32_t cpus_ppm; /* millionths of a CPU */
  } limits;
  config_workflow *workflows;
  size_t n_workflows;
  config_producer *producers;
  size_t n_producers;
  config_consumer *consumers;
  size_t n_consumers;
  config_cron *crons;
  size_t n_crons;
  /* The plugins that receive the trace items of all its workflows. */
  char **tail_consumers;
  config_pos *tail_pos;
  size_t n_tail_consumers;
  config_pos pos;
} config_plugin;

/* A key of storage.encryption: its id (stored with every value it
 * seals) and the environment variable that holds it, read at start. */
typedef struct config_encryption_key {
  char *id;
  char *key_env;
  config_pos pos, env_pos;
} config_encryption_key;

typedef struct config {
  char *file; /* the path it was read from, for messages */
  struct {
    char *path;           /* default "var/duro.db"; absolute after
                             config_load, beside the config file */
    int synchronous_full; /* "full" (default) = 1, "normal" = 0 */
    /* A libpq connection string: the journal is in that PostgreSQL
     * database rather than at path (which still places the lock file
     * and the stored builds); NULL = SQLite. */
    char *postgresql;
    /* How long `duro run` keeps trying a PostgreSQL server it cannot reach
     * at start (one still booting) before it gives up; default 30 s, 0 =
     * one try. */
    int64_t connect_timeout_ms;
    /* On PostgreSQL, each host's lease on the instances it runs: a host
     * that has not renewed it for this long (a crash, a partition) is
     * taken as gone and the others take its instances over; default 5 s,
     * at least 0.5 s. */
    int64_t lease_ms;
    /* Values encrypted at rest (store/journal_crypt.h): the keys that
     * open them, the active one sealing; n_keys 0: none. */
    struct {
      config_encryption_key *keys;
      size_t n_keys;
      char *active;
      config_pos active_pos;
    } encryption;
  } storage;
  struct {
    char *listen;    /* default "127.0.0.1:8787" */
    char *token_env; /* NULL = no auth */
    int allow_insecure;
    int64_t max_body_bytes; /* default 1 MiB */
    int64_t max_wait_ms;    /* the longest ?wait=, default 60 s */
    /* Names besides the listener's own that a request's Host (and a
     * browser's Origin) may give on a listener without a token:
     * "name" (any port) or "name:port". */
    char **allowed_hosts;
    size_t n_allowed_hosts;
    config_pos listen_pos;    /* where listen / token_env were given */
    config_pos token_env_pos; /* (0:0 when left to the default) */
    /* http.tls: the listener speaks HTTPS with this certificate chain
     * and key (PEM files, read again on SIGHUP); client_ca: only clients
     * with a certificate from it are served.  NULL cert: plain HTTP. */
    struct {
      char *cert, *key, *client_ca;
      config_pos cert_pos, key_pos, client_ca_pos;
    } tls;
    /* http.keys: the API keys besides token_env's (an admin key named
     * "default"), each with its scopes and what it may touch. */
    config_api_key *keys;
    size_t n_keys;
  } http;
  struct {
    uint32_t workers;           /* activation threads, default 64 */
    int64_t max_step_result;    /* bytes, default 1 MiB */
    int64_t max_instance_state; /* bytes of params and results, 1 GiB */
    uint32_t max_crashes;       /* crashes of a step that error its
                                   instance, default 3 */
    int64_t shutdown_grace_ms;  /* a stop waits this long for running
                                   attempts, default 30 s */
    int64_t max_queued;         /* creations answer 503 while this many
                                   instances are queued; 0 (default) =
                                   no limit */
  } engine;
  struct {
    int json; /* format: "text" (default) = 0, "json" = 1 */
  } log;
  /* telemetry: traces over OTLP/HTTP; off without otlp_endpoint. */
  struct {
    char *otlp_endpoint; /* "http://collector:4318" */
    char *service_name;  /* default "duro" */
    uint32_t sample;     /* the share of traces kept, millionths; default all */
    uint32_t max_spans;  /* spans buffered at most, default 10000 */
    int64_t interval_ms; /* a batch posted at least this often, default 1 s */
  } telemetry;
  /* tail: how trace items reach tail handlers (tail/tail.h's options). */
  struct {
    uint32_t buffer;              /* items per consumer, default 10000 */
    int64_t buffer_bytes;         /* their bytes per consumer, default 16 MiB */
    uint32_t max_batch_size;      /* items a batch, default 100 */
    int64_t max_batch_timeout_ms; /* the oldest waits at most, 1 s */
    int64_t timeout_ms;           /* a handler's call, default 30 s */
  } tail;
  config_plugin *plugins;
  size_t n_plugins;
  config_pipeline *pipelines;
  size_t n_pipelines;
  config_resource *resources;
  size_t n_resources;
} config;

/* Parses `path`, then resolves its file paths against its directory.  On
 * error returns NULL having added every error it found to errs (which the
 * caller initialises to {0} and clears), each "path:line:column: message",
 * in file order. */
config *config_load_all(const char *path, errlist *errs);

/* Same, from a string; `name` stands for the file in messages. */
config *config_parse_all(const char *name, const char *text, size_t len,
                         errlist *errs);

/* config_load_all() for `duro check`, which goes on to load the plugins
 * a broken file names: what parsed is returned even when errors were
 * added (NULL only when the file could not be read), so an entry may
 * lack what its errors were about (a NULL path, class_name...). */
config *config_load_partial(const char *path, errlist *errs);

/* config_load_all() and config_parse_all() with the errors joined into
 * err, one per line (errlist_join), for a caller that shows one message. */
config *config_load(const char *path, char *err, size_t errlen);
config *config_parse(const char *name, const char *text, size_t len, char *err,
                     size_t errlen);

void config_free(config *cfg);

/* The workflow named `name` across all plugins, or NULL. */
const config_workflow *config_find_workflow(const config *cfg, const char *name,
                                            const config_plugin **plugin_out);

#endif
