/* bench.c — the speed and memory of durable execution, measured against
 * the real engine (host/engine/engine.h) with durable settings.
 *
 * The engine runs in this process with its worker threads and its
 * scheduler thread (which sleeps until the next wake and polls what is
 * due), as under `duro run`, so every figure includes journaling, group
 * commit, scheduling and replay; only HTTP is left out.  Each workload prints
 * one line naming the setting it ran under and, for scale, the figure of the
 * best open engines measured on the same kind of machine.  --csv prints
 * figure,value,unit,setting instead.
 *
 * --postgresql CONNINFO puts the journal in PostgreSQL instead (the
 * backend of store/pg.c): each workload in a new database on that server,
 * dropped after it; --postgresql auto starts a throwaway cluster
 * (tests/pg_cluster.h) and stops it at the end.  The setting then reads
 * "postgresql" instead of the SQLite one, and W2 sets its steps beside a
 * bare PostgreSQL commit of one row (pg_bare.h) instead of a SQLite one.
 * On PostgreSQL every engine joins the journal as a host, as `duro run`
 * does; --hosts N runs W1, W2 and W3 on N engines of this process that
 * share it (as N `duro run`s on one database would): instances are
 * created on them in turn, each runs its own; --create-on-one creates
 * them all on the first, which hands its backlog to the idle others.
 * --encrypt has the journal's values encrypted at rest under one key
 * (storage.encryption); the setting then ends "encrypted".
 *
 *   W1 throughput   1000 instances x 10 trivial steps
 *   W1T traced      W1 with telemetry on (sample 1.0), its spans posted to
 *                   a local OTLP/HTTP sink (otlp_sink.h) that answers at
 *                   once: W1's figures with tracing on, and the spans the
 *                   sink took once the engine stopped
 *   R1 rate         60,000 instances of a workflow whose flow.rate is 1,000
 *                   starts a second (burst 1), created at once: the rate
 *                   the starts came at over the minute, and the most in
 *                   any one second
 *   F1 fairness     tenant A queues 100,000 instances of a workflow capped
 *                   at 20 running whose tenants take turns (flow.fairness),
 *                   then tenant B creates 100, 10 ms apart: B's wait to
 *                   start, p50 and p99; F1F the same without fairness
 *                   (first come first served), for contrast
 *   K1 keys         10,000 instances x 10 trivial steps, each its own value
 *                   of a concurrency rule's key, against none: instances/s
 *                   of both (medians of three interleaved rounds); with
 *                   --postgresql and --hosts N, on N joined hosts, where
 *                   each key's slots are the database's (flow_slots.c)
 *   S1 resource     W1's shape (1000 instances x 10 trivial steps) with
 *                   each step naming a shared resource that never binds
 *                   (concurrency 1,000,000), against steps naming none:
 *                   steps/s of both (medians of three interleaved rounds),
 *                   the cost of a step's claim and its giving back
 *   L1 listing      a page of 20 of a workflow's instances among
 *                   1,000,000 (100,000 with --quick) ended ones, filtered
 *                   as an operator would (none, status, id prefix, a
 *                   creation hour, an end hour, search attributes: a
 *                   customer's, with a status, with an amount, an
 *                   amount range): ms a page, median of 5
 *                   (SQLite; the rows written straight to its file)
 *   B1 bulk         a bulk delete (bulk/bulk.h) of 100,000 (2,000 with
 *                   --quick) ended instances of one workflow, alone: the
 *                   job's time and instances deleted/s; then W1's work
 *                   (1000 instances x 10 trivial steps, median of 5
 *                   rounds) alone, and beside a second such job on
 *                   another workflow: W1's instances/s both ways, and
 *                   the job's deletes/s meanwhile (SQLite; the ended rows
 *                   written straight to its file, as L1's)
 *   KR key rotation 20,000 (500 with --quick) instances of W1's work
 *                   written under key k1, then the host reopened with k2
 *                   active: W1's work (median of 5 rounds) alone, then
 *                   beside a rotation (duro keys rotate) of every value
 *                   to k2: W1's instances/s both ways, the values the
 *                   rotation rewrote a second and how long it took; a
 *                   count after it must find none under k1 (both stores)
 *   W1L tailed      W1 with a tail consumer: every activation's trace item
 *                   handed to a tail handler that decodes each batch (as
 *                   one forwarding them would): W1's figures with it, and
 *                   the items it took once the engine stopped
 *   W2 latency      one instance, 100 sequential steps (median of 5), beside
 *                   a raw fdatasync and a bare one-row SQLite commit
 *   W3 sleepers     N instances run one step then sleep an hour: creation
 *                   rate, RSS before/after, database size
 *   W4 lateness     1000 instances sleeping 1 s: wake lateness p50/p99/max
 *   W5 events       1000 instances waiting for an event: send all, time to
 *                   all complete
 *   W6 I/O steps    1000 instances x 2 steps that each block 200 ms (as a
 *                   call to a payment API does), created in batches of
 *                   100: time to all complete, with the code in the
 *                   engine (workers: 0, --workers threads) and in a worker
 *                   process as `duro run` has it by default (8 threads;
 *                   the bench plugin beside this binary, or
 *                   --plugin-workers)
 *   H1 spread       W6's I/O steps (600 instances x 2 of 100 ms) on
 *                   PostgreSQL, all created on one host of 8 threads:
 *                   that host alone, then with two idle hosts it hands
 *                   its backlog to (engine/rebalance.c): seconds to all
 *                   complete (--postgresql)
 *   W7 children     100 parents that each start 10 child workflows (one
 *                   trivial step each) and wait for them: instances/s
 *   W8 parallel     one instance, 1000 steps that each block 1 ms, in a
 *                   worker process: one duro_do_all of them (100 and
 *                   1000 in flight) against one after another: wall
 *                   time
 *   R  recovery     N queued instances: engine reopened, time to re-arm
 *   Q1 queue        200,000 messages sent in batches of 100 by one thread
 *                   while a push consumer (a queue handler, batches of
 *                   100) takes them: end-to-end messages/s and the p50/p99
 *                   send-to-handler latency; then the pull path: sent,
 *                   then pulled and acked in batches of 100 from one
 *                   thread
 *   QK queue keys   a push consumer's concurrency by key (limit 1): one key
 *                   with 10,000 messages held behind its first (in a
 *                   handler), then another key's 200 messages leased and
 *                   acked one by one: ms per lease (mean and p99), what
 *                   the held backlog costs each lease of the other key;
 *                   first the same without the held key, for scale
 *   P1 pipelines    1000 instances x 10 steps, each step's callback
 *                   sending 100 records of 100 bytes to a pipeline
 *                   (duro_pipeline_send: committed with the step's
 *                   result): records/s accepted (durable), then records/s
 *                   and MB/s written to gzip'ed files by the flusher
 *                   (until its backlog is empty); in the engine, then in
 *                   a worker process (the bench plugin's Pipe) */
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "bulk.h"
#include "duro.h"
#include "engine.h"
#include "journal_crypt.h"
#include "keys.h"
#include "otlp_sink.h"
#include "p1_records.h"
#include "pipeline.h"
#include "queue.h"
#include "resources.h"
#include "tail.h"
#include "telemetry.h"
#include "view_queue.h"
#include "worker.h"

#if DURO_HAVE_PG
#include <libpq-fe.h>

#include "pg_bare.h"
#include "pg_cluster.h"
#endif

const duro_api *duro_api_ptr_;

typedef struct bench_opts {
  int csv;
  int sync_full;
  uint32_t workers;
  size_t sleepers;
  int quick;
  const char *only;
  char dir[256];
  /* The server's libpq connection string; NULL = the journal in SQLite
   * files under dir. */
  const char *postgresql;
  /* Engines sharing the journal, each joined as a host (PostgreSQL). */
  uint32_t hosts;
  /* --create-on-one: with --hosts N, W1-W3 create every instance on the
   * first host, and the others get theirs only as that host hands its
   * backlog out (engine/rebalance.c). */
  int create_on_one;
  /* --plugin-workers SO: the "steps" workflow (W1, W2) runs class Steps
   * of the bench plugin SO in a worker process (worker.h), as under
   * `duro run`; duro is the binary the worker runs (--duro, else
   * ../host/duro beside this one). */
  const char *worker_so;
  char duro[4096];
  /* --max-spans N: W1T's span buffer (telemetry.max_spans); by default
   * more than it fills, so that none is dropped and the exporter posts a
   * batch an interval, the rest at the drain after the figure; the
   * config's 10000 has it post all the while, as a busy host does. */
  uint32_t max_spans;
  /* --encrypt: the journal's values encrypted at rest
   * (storage.encryption; store/journal_crypt.h) under one key. */
  journal_crypt *keys;
} bench_opts;

static bench_opts opts = {.sync_full = 1,
                          .workers = 64,
                          .sleepers = 100000,
                          .hosts = 1,
                          .max_spans = 1000000};

/* ---- time and reporting ------------------------------------------------- */

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *setting_store(void);

/* The setting, and " encrypted" with --encrypt. */
static const char *setting(void) {
  static char buf[128];
  snprintf(buf, sizeof buf, "%s%s", setting_store(),
           opts.keys ? " encrypted" : "");
  return buf;
}

static const char *setting_store(void) {
  static char buf[96];
  if (opts.postgresql && opts.hosts > 1)
    snprintf(buf, sizeof buf, "postgresql%s hosts=%u%s workers=%u each",
             opts.sync_full ? "" : " synchronous_commit=off", opts.hosts,
             opts.create_on_one ? " (creates on one)" : "", opts.workers);
  else if (opts.postgresql)
    snprintf(buf, sizeof buf, "postgresql%s workers=%u",
             opts.sync_full ? "" : " synchronous_commit=off", opts.workers);
  else
    snprintf(buf, sizeof buf, "synchronous=%s workers=%u",
             opts.sync_full ? "full" : "normal", opts.workers);
  return buf;
}

static void report(const char *figure, double value, const char *unit,
                   const char *peer) {
  if (opts.csv)
    printf("%s,%.3f,%s,\"%s\"\n", figure, value, unit, setting());
  else
    printf("%-28s %12.3f %-10s [%s]%s%s\n", figure, value, unit, setting(),
           peer ? "  peer: " : "", peer ? peer : "");
  fflush(stdout);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* A line of /proc/self/status in KiB: "VmRSS" now, "VmHWM" the peak. */
static long status_kib(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256], fmt[32];
  snprintf(fmt, sizeof fmt, "%s: %%ld kB", field);
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, fmt, &kib) == 1)
      break;
  if (f)
    fclose(f);
  return kib;
}

static long rss_kib(void) { return status_kib("VmRSS"); }

static long long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

static int wants(const char *w) {
  if (!opts.only)
    return 1;
  char list[128];
  snprintf(list, sizeof list, ",%s,", opts.only);
  char key[16];
  snprintf(key, sizeof key, ",%s,", w);
  return strstr(list, key) != NULL;
}

/* ---- an engine, counting the instances that end ---------------------------
 */

#define MAX_HOSTS 8

/* The engine of a workload; with --hosts N, N engines on one journal,
 * each joined as a host (`e` is the first): the workload's instances are
 * created on them in turn, and each runs its own. */
typedef struct bench_engine {
  duro_engine *e;
  duro_engine *hosts[MAX_HOSTS];
  uint32_t n_hosts;
  char name[32]; /* the workload's: its file's or its database's name */
  char db[1024]; /* the SQLite file, or the database's connection string */
  pthread_mutex_t mu;
  pthread_cond_t cond;
  size_t ended;
  size_t failed; /* ended otherwise than "complete" */
} bench_engine;

static void on_end(void *ctx, duro_status status) {
  bench_engine *b = ctx;
  pthread_mutex_lock(&b->mu);
  b->ended++;
  b->failed += status != DURO_STATUS_COMPLETE;
  pthread_cond_broadcast(&b->cond);
  pthread_mutex_unlock(&b->mu);
}

static void bench_remove_files(const char *db) {
  char p[1100];
  const char *sfx[] = {"", "-wal", "-shm"};
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s%s", db, sfx[i]);
    unlink(p);
  }
}

/* ---- a database per workload on PostgreSQL ------------------------------ */

#if DURO_HAVE_PG
static void quiet(void *arg, const char *message) { (void)arg, (void)message; }

/* Runs `sql` on the server (its own database) in a connection of its
 * own; 0, or -1 with the reason on stderr. */
static int pg_admin(const char *sql) {
  PGconn *c = PQconnectdb(opts.postgresql);
  int ok = PQstatus(c) == CONNECTION_OK;
  if (!ok)
    fprintf(stderr, "bench: %s", PQerrorMessage(c));
  if (ok) {
    PQsetNoticeProcessor(c, quiet, NULL); /* "does not exist, skipping" */
    PGresult *r = PQexec(c, sql);
    ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
      fprintf(stderr, "bench: %s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
  }
  PQfinish(c);
  return ok ? 0 : -1;
}

/* The database of workload `name`: this process's, so that runs sharing
 * a server do not meet. */
static void pg_database(const char *name, char *out, size_t n) {
  snprintf(out, n, "duro_bench_%d_%s", (int)getpid(), name);
}

/* Workload `name`'s connection string into `conninfo`: the server's,
 * its dbname replaced (the last one counts). */
static void pg_database_conninfo(const char *name, char *conninfo, size_t n) {
  char db[64];
  pg_database(name, db, sizeof db);
  if (snprintf(conninfo, n, "%s dbname=%s", opts.postgresql, db) >= (int)n) {
    fprintf(stderr, "bench: the connection string is too long\n");
    exit(1);
  }
}

/* A new, empty database for workload `name`. */
static void pg_database_create(const char *name) {
  char db[64], sql[128];
  pg_database(name, db, sizeof db);
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", db);
  if (pg_admin(sql) != 0)
    exit(1);
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", db);
  if (pg_admin(sql) != 0)
    exit(1);
}

static void pg_database_drop(const char *name) {
  char db[64], sql[128];
  pg_database(name, db, sizeof db);
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", db);
  pg_admin(sql); /* a database left behind is reported, not fatal */
}

/* The size of workload `name`'s database in bytes, or 0. */
static long long pg_database_bytes(const char *name) {
  char db[64], sql[128];
  pg_database(name, db, sizeof db);
  snprintf(sql, sizeof sql, "SELECT pg_database_size('%s')", db);
  PGconn *c = PQconnectdb(opts.postgresql);
  PGresult *r = PQexec(c, sql);
  long long bytes = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
                        ? atoll(PQgetvalue(r, 0, 0))
                        : 0;
  PQclear(r);
  PQfinish(c);
  return bytes;
}
#endif

/* Removes workload `name`'s journal: its files, or its database. */
static void bench_remove_journal(const char *name, const char *db) {
#if DURO_HAVE_PG
  if (opts.postgresql) {
    pg_database_drop(name);
    return;
  }
#endif
  (void)name;
  bench_remove_files(db);
}

/* The worker processes of --plugin-workers (for the life of the run). */
static worker_pool *bench_workers(void) {
  static worker_pool *pool;
  if (!pool)
    pool = worker_pool_create(opts.duro, NULL);
  return pool;
}

typedef struct wf_def {
  const char *name;
  duro_run_fn run;
  const char *worker_class; /* its class in the bench plugin, or NULL */
  const char *binding;      /* what duro_env_workflow finds it by, or NULL */
  const duro_workflow_limits *limits; /* NULL: none */
} wf_def;

/* The bench plugin the workflows with a worker class run from, in a
 * worker process (NULL: in the engine, as their `run`). */
static const char *worker_so_now;

/* hosts: engines on the journal (PostgreSQL only; 1 on SQLite). */
static void bench_open(bench_engine *b, const char *name, const wf_def *wfs,
                       size_t n_wfs, uint32_t workers, int fresh,
                       uint32_t hosts) {
  memset(b, 0, sizeof *b);
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cond, NULL);
  snprintf(b->name, sizeof b->name, "%s", name);
  const store_backend *backend = NULL;
#if DURO_HAVE_PG
  if (opts.postgresql) {
    backend = &store_pg;
    if (fresh)
      pg_database_create(name);
    pg_database_conninfo(name, b->db, sizeof b->db);
  }
#endif
  if (!backend) {
    snprintf(b->db, sizeof b->db, "%s/%s.db", opts.dir, name);
    if (fresh)
      bench_remove_files(b->db);
  }
  b->n_hosts = backend ? hosts : 1;
  duro_engine_options o = {.db_path = b->db,
                           .backend = backend,
                           .synchronous_full = opts.sync_full,
                           .join_store = backend != NULL,
                           .workers = workers,
                           .on_instance_end = on_end,
                           .crypt = opts.keys,
                           .ctx = b};
  char err[512];
  for (uint32_t h = 0; h < b->n_hosts; h++) {
    if (duro_engine_open(&o, &b->hosts[h], err, sizeof err) != 0) {
      fprintf(stderr, "bench: %s\n", err);
      exit(1);
    }
    for (size_t i = 0; i < n_wfs; i++) {
      void *ctx = NULL;
      if (worker_so_now && wfs[i].worker_class)
        ctx = worker_pool_build(bench_workers(), "bench", 1, NULL,
                                worker_so_now, "bench", wfs[i].worker_class);
      duro_engine_register(b->hosts[h], wfs[i].name, wfs[i].binding,
                           ctx ? worker_proxy_run : wfs[i].run, wfs[i].limits,
                           "bench");
      if (ctx)
        duro_engine_build_set_ctx(b->hosts[h], wfs[i].name, "bench", ctx);
    }
  }
  b->e = b->hosts[0];
}

static void bench_start(bench_engine *b) {
  for (uint32_t h = 0; h < b->n_hosts; h++)
    if (duro_engine_start(b->hosts[h]) != 0) {
      fprintf(stderr, "bench: engine start failed\n");
      exit(1);
    }
}

/* Some workload's instances did not all complete: the exit status says
 * so (the smoke tests rely on it). */
static int any_failed;

/* A figure of instances that failed would mislead: said, never hidden. */
static void bench_close(bench_engine *b, int remove) {
  if (b->failed) {
    fprintf(stderr, "bench: %s: %zu instances did not complete\n", b->name,
            b->failed);
    any_failed = 1;
  }
  for (uint32_t h = 0; h < b->n_hosts; h++)
    duro_engine_close(b->hosts[h]);
  if (remove)
    bench_remove_journal(b->name, b->db);
}

static void wait_ended(bench_engine *b, size_t n) {
  pthread_mutex_lock(&b->mu);
  while (b->ended < n)
    pthread_cond_wait(&b->cond, &b->mu);
  pthread_mutex_unlock(&b->mu);
}

static void wait_settled(bench_engine *b) {
  for (uint32_t h = 0; h < b->n_hosts; h++)
    while (duro_engine_in_flight(b->hosts[h]) > 0)
      usleep(1000);
}

/* Creates n instances of `wf` in batches, on the hosts in turn; params
 * may be NULL. */
static void create_many(bench_engine *b, const char *wf, size_t n,
                        const char *params, size_t batch) {
  duro_create_req *reqs = calloc(batch, sizeof *reqs);
  for (size_t i = 0; i < batch; i++)
    reqs[i] = (duro_create_req){.params = params, .retention_ms = -1};
  for (size_t done = 0, turn = 0; done < n; done += batch, turn++) {
    size_t k = n - done < batch ? n - done : batch;
    duro_create_result res;
    duro_engine *host = b->hosts[opts.create_on_one ? 0 : turn % b->n_hosts];
    if (duro_instance_create_many(host, wf, reqs, k, &res) != 0) {
      fprintf(stderr, "bench: create_batch failed\n");
      exit(1);
    }
    duro_create_result_free(&res);
  }
  free(reqs);
}

/* ---- workflows
 * ---------------------------------------------------------------- */

static int trivial(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_result(a, "1");
}

static int param(const char *params, const char *key, int fallback) {
  char pat[32];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(params, pat);
  return p ? atoi(p + strlen(pat)) : fallback;
}

static duro_rc wf_steps(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int n = param(ev->params, "steps", 10);
  const char *r;
  for (int i = 0; i < n; i++)
    DURO_TRY(duro_do(step, "s", NULL, trivial, NULL, &r));
  return DURO_OK;
}

/* S1: params.steps steps, each naming the resource "bench". */
static const duro_step_config s1_cfg = {.resource = "bench"};

static duro_rc wf_claims(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int n = param(ev->params, "steps", 10);
  const char *r;
  for (int i = 0; i < n; i++)
    DURO_TRY(duro_do(step, "s", &s1_cfg, trivial, NULL, &r));
  return DURO_OK;
}

/* A step that waits on I/O: params.ms of sleep, as a call to another
 * service would. */
static int io_call(duro_attempt *a, void *arg) {
  int ms = *(int *)arg;
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0)
    ;
  return duro_attempt_result(a, "1");
}

static duro_rc wf_io(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int n = param(ev->params, "steps", 2), ms = param(ev->params, "ms", 200);
  const char *r;
  for (int i = 0; i < n; i++)
    DURO_TRY(duro_do(step, "call", NULL, io_call, &ms, &r));
  return DURO_OK;
}

static size_t slept_steps; /* atomic */

static int counted(duro_attempt *a, void *arg) {
  (void)arg;
  __atomic_add_fetch(&slept_steps, 1, __ATOMIC_RELAXED);
  return duro_attempt_result(a, "1");
}

static duro_rc wf_sleeper(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  (void)ev, (void)env;
  const char *r;
  DURO_TRY(duro_do(step, "work", NULL, counted, NULL, &r));
  DURO_TRY(duro_sleep(step, "nap", "1 hour"));
  return DURO_OK;
}

static int64_t *lateness_ms;
static size_t lateness_n; /* atomic */

static int record_lateness(duro_attempt *a, void *arg) {
  int64_t late = wall_ms() - *(int64_t *)arg;
  size_t i = __atomic_fetch_add(&lateness_n, 1, __ATOMIC_RELAXED);
  lateness_ms[i] = late;
  return duro_attempt_result(a, "1");
}

static duro_rc wf_napper(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  const char *p = strstr(ev->params, "\"at\":");
  int64_t at = p ? strtoll(p + 5, NULL, 10) : 0;
  const char *r;
  DURO_TRY(duro_sleep_until(step, "nap", at));
  DURO_TRY(duro_do(step, "late", NULL, record_lateness, &at, &r));
  return DURO_OK;
}

static duro_rc wf_waiter(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  const char *e;
  DURO_TRY(duro_wait_for_event(step, "go", "go", "1 hour", &e));
  return DURO_OK;
}

static int kid_work(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_result(a, "1");
}

/* A child: one trivial step. */
static duro_rc wf_kid(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  const char *r;
  DURO_TRY(duro_do(step, "work", NULL, kid_work, NULL, &r));
  return duro_set_output(step, r);
}

/* Starts params.children (at most 64) children of KID, then waits for
 * each. */
static duro_rc wf_parent(duro_step *step, const duro_event *ev, duro_env *env) {
  duro_workflow *kid = duro_env_workflow(env, "KID");
  int n = param(ev->params, "children", 10);
  n = n > 64 ? 64 : n;
  const char *ids[64];
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "kid %d", i);
    DURO_TRY(duro_child_start(step, name, kid, NULL, NULL,
                              DURO_PARENT_CLOSE_TERMINATE, &ids[i]));
  }
  for (int i = 0; i < n; i++) {
    const char *out;
    DURO_TRY(duro_child_wait(step, "kid done", kid, ids[i], &out));
  }
  return DURO_OK;
}

static unsigned p1_sent; /* atomic: what makes each record differ */

static int p1_step(duro_attempt *a, void *arg) {
  return p1_send(a, arg, &p1_sent);
}

/* params.steps steps, each sending P1_RECORDS records to EVENTS. */
static duro_rc wf_pipe(duro_step *step, const duro_event *ev, duro_env *env) {
  duro_pipeline *p = duro_env_pipeline(env, "EVENTS");
  int n = param(ev->params, "steps", 10);
  const char *r;
  for (int i = 0; i < n; i++)
    DURO_TRY(duro_do(step, "send", NULL, p1_step, p, &r));
  return DURO_OK;
}

/* R1: each start's time (us, CLOCK_MONOTONIC), by arrival. */
#define R1_MAX 60000
static int64_t r1_at[R1_MAX];
static size_t r1_n; /* atomic */

static int r1_step(duro_attempt *a, void *arg) {
  (void)arg;
  size_t i = __atomic_fetch_add(&r1_n, 1, __ATOMIC_RELAXED);
  if (i < R1_MAX)
    r1_at[i] = now_us();
  return duro_attempt_result(a, "1");
}

static duro_rc wf_rated(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "start", NULL, r1_step, NULL, NULL));
  return DURO_OK;
}

static const duro_flow_rate r1_rate[] = {{.limit = 1000, .period_ms = 1000}};
static const duro_workflow_limits r1_limits = {.flow_rate = r1_rate,
                                               .n_flow_rate = 1};

/* F1: each of tenant B's instances, when it was created and when its
 * run() began (us, CLOCK_MONOTONIC). */
#define F1_B 100
static int64_t f1_created[F1_B], f1_began[F1_B];

static duro_rc wf_fair(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int i = param(ev->params, "i", -1);
  if (strstr(ev->params, "\"t\":\"B\"") && i >= 0 && i < F1_B && !f1_began[i])
    f1_began[i] = now_us();
  DURO_TRY(duro_do(step, "s", NULL, trivial, NULL, NULL));
  return DURO_OK;
}

/* F1: the workflow at 20 running at once, its tenants taking turns. */
static const duro_flow_concurrency f1_cap[] = {{.key = NULL, .limit = 20}};
static const duro_workflow_limits f1_limits = {
    .flow_concurrency = f1_cap,
    .n_flow_concurrency = 1,
    .flow_order = {.fairness_key = "/t"}};
/* F1F: the same cap, first come first served. */
static const duro_workflow_limits f1f_limits = {.flow_concurrency = f1_cap,
                                                .n_flow_concurrency = 1};

/* K1: at most 2 running per value of /k. */
static const duro_flow_concurrency k1_cap[] = {{.key = "/k", .limit = 2}};
static const duro_workflow_limits k1_limits = {.flow_concurrency = k1_cap,
                                               .n_flow_concurrency = 1};

static const wf_def workflows[] = {{"steps", wf_steps, "Steps", NULL, NULL},
                                   {"io", wf_io, "Io", NULL, NULL},
                                   {"sleeper", wf_sleeper, NULL, NULL, NULL},
                                   {"napper", wf_napper, NULL, NULL, NULL},
                                   {"waiter", wf_waiter, NULL, NULL, NULL},
                                   {"parent", wf_parent, NULL, NULL, NULL},
                                   {"kid", wf_kid, NULL, "KID", NULL},
                                   {"par", wf_steps, "Par", NULL, NULL},
                                   {"pipe", wf_pipe, "Pipe", NULL, NULL},
                                   {"rated", wf_rated, NULL, NULL, &r1_limits},
                                   {"fair", wf_fair, NULL, NULL, &f1_limits},
                                   {"fifo", wf_fair, NULL, NULL, &f1f_limits},
                                   {"keyed", wf_steps, NULL, NULL, &k1_limits},
                                   {"claims", wf_claims, NULL, NULL, NULL}};
#define N_WFS (sizeof workflows / sizeof *workflows)

/* ---- W1
 * ------------------------------------------------------------------------ */

/* W1L's tail handler: each batch decoded whole, its items counted. */
static uint64_t w1l_items; /* atomic */

static int w1l_tail(const duro_tail_batch *b, duro_env *env) {
  (void)env;
  json_t *items = json_loads(b->items, 0, NULL);
  __atomic_add_fetch(&w1l_items, json_array_size(items), __ATOMIC_RELAXED);
  json_decref(items);
  return 0;
}

/* W1, or with `sink` W1T: every instance traced, its spans posted to the
 * sink (all of them by bench_close, which drains the exporter); or with
 * `tailed` W1L: every activation's item to a tail handler. */
static void w1_run(const char *name, otlp_sink *sink, int tailed) {
  const char *label = sink ? "W1T" : tailed ? "W1L" : "W1";
  size_t n = opts.quick ? 50 : 1000, steps = 10;
  bench_engine b;
  bench_open(&b, name, workflows, N_WFS, opts.workers, 1, opts.hosts);
  char endpoint[64];
  if (sink) {
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", sink->port);
    duro_telemetry_options t = {.otlp_endpoint = endpoint,
                                .service_name = "bench",
                                .sample = 1.0,
                                /* none dropped: every span costs */
                                .max_spans = opts.max_spans,
                                .interval_ms = 1000};
    for (uint32_t h = 0; h < b.n_hosts; h++)
      if (duro_telemetry_enable(b.hosts[h], &t) != 0) {
        fprintf(stderr, "bench: telemetry refused\n");
        exit(1);
      }
  }
  const char *consumer[] = {"bench"};
  for (uint32_t h = 0; tailed && h < b.n_hosts; h++) {
    duro_tail_observe(b.hosts[h], "steps", consumer, 1);
    duro_tail_set_handler(b.hosts[h], "bench", w1l_tail, NULL);
  }
  bench_start(&b);
  int64_t t0 = now_us();
  create_many(&b, "steps", n, "{\"steps\":10}", 100);
  wait_ended(&b, n);
  double s = (double)(now_us() - t0) / 1e6;
  bench_close(&b, 1);
  char figure[64];
  snprintf(figure, sizeof figure, "%s instances/s", label);
  report(figure, (double)n / s, "inst/s", NULL);
  snprintf(figure, sizeof figure, "%s durable steps/s", label);
  report(figure, (double)(n * steps) / s, "steps/s",
         sink || tailed ? NULL : "1,900 steps/s");
  if (sink)
    report("W1T spans exported", (double)sink->spans, "spans", NULL);
  if (tailed)
    report("W1L items delivered",
           (double)__atomic_load_n(&w1l_items, __ATOMIC_RELAXED), "items",
           NULL);
}

static void w1_throughput(void) { w1_run("w1", NULL, 0); }

/* ---- R1
 * ------------------------------------------------------------------------ */

static void r1_rate_held(void) {
  size_t n = opts.quick ? 2000 : R1_MAX;
  bench_engine b;
  bench_open(&b, "r1", workflows, N_WFS, opts.workers, 1, opts.hosts);
  bench_start(&b);
  __atomic_store_n(&r1_n, 0, __ATOMIC_RELAXED);
  create_many(&b, "rated", n, "{}", 1000);
  wait_ended(&b, n);
  bench_close(&b, 1);
  size_t got = r1_n < n ? r1_n : n;
  qsort(r1_at, got, sizeof *r1_at, cmp_i64);
  double span_s = got > 1 ? (double)(r1_at[got - 1] - r1_at[0]) / 1e6 : 0;
  size_t most = 0;
  for (size_t i = 0, j = 0; i < got; i++) {
    while (r1_at[i] - r1_at[j] >= 1000000)
      j++;
    if (i - j + 1 > most)
      most = i - j + 1;
  }
  report("R1 starts/s (flow.rate 1000/s)",
         span_s > 0 ? (double)(got - 1) / span_s : 0, "starts/s", NULL);
  report("R1 most starts in one second", (double)most, "starts", NULL);
}

/* ---- F1 and K1: flow control's order and its cost
 * ------------------------------------------------------------------------ */

/* Creates n instances of `wf` in batches of 1000, on the hosts in turn,
 * the i-th with the params `fmt` makes of i (one %zu). */
static void create_each(bench_engine *b, const char *wf, size_t n,
                        const char *fmt) {
  enum { BATCH = 1000 };
  duro_create_req reqs[BATCH];
  static char params[BATCH][64];
  for (size_t done = 0; done < n; done += BATCH) {
    size_t k = n - done < BATCH ? n - done : BATCH;
    for (size_t i = 0; i < k; i++) {
      snprintf(params[i], sizeof params[i], fmt, done + i);
      reqs[i] = (duro_create_req){.params = params[i], .retention_ms = -1};
    }
    duro_create_result res;
    duro_engine *host = b->hosts[(done / BATCH) % b->n_hosts];
    if (duro_instance_create_many(host, wf, reqs, k, &res) != 0) {
      fprintf(stderr, "bench: create_many failed\n");
      exit(1);
    }
    duro_create_result_free(&res);
  }
}

/* F1: tenant A queues 100,000 instances of a workflow capped at 20
 * running, its tenants taking turns (flow.fairness); then tenant B
 * creates 100, one every 10 ms: how long each of B's waited to start.
 * F1F: the same workflow without fairness (label "F1F", workflow
 * "fifo"), first come first served. */
static void f1_run(const char *label, const char *wf) {
  size_t n_a = opts.quick ? 10000 : 100000;
  bench_engine b;
  bench_open(&b, "f1", workflows, N_WFS, opts.workers, 1, 1);
  bench_start(&b);
  memset(f1_began, 0, sizeof f1_began);
  create_each(&b, wf, n_a, "{\"t\":\"A\",\"i\":%zu}");
  pthread_mutex_lock(&b.mu);
  size_t behind = n_a - b.ended;
  pthread_mutex_unlock(&b.mu);
  for (size_t i = 0; i < F1_B; i++) {
    char params[64], id[32];
    snprintf(params, sizeof params, "{\"t\":\"B\",\"i\":%zu}", i);
    snprintf(id, sizeof id, "b-%zu", i);
    f1_created[i] = now_us();
    if (duro_instance_create(b.hosts[0], wf, id, params, -1, NULL) != 0) {
      fprintf(stderr, "bench: create %s failed\n", id);
      exit(1);
    }
    usleep(10000);
  }
  wait_ended(&b, n_a + F1_B);
  bench_close(&b, 1);
  int64_t waited_ms[F1_B];
  for (size_t i = 0; i < F1_B; i++)
    waited_ms[i] = (f1_began[i] - f1_created[i]) / 1000;
  qsort(waited_ms, F1_B, sizeof *waited_ms, cmp_i64);
  char figure[80];
  snprintf(figure, sizeof figure, "%s tenant A's instances queued when B began",
           label);
  report(figure, (double)behind, "instances", NULL);
  snprintf(figure, sizeof figure, "%s tenant B's wait to start p50", label);
  report(figure, (double)waited_ms[F1_B / 2], "ms", NULL);
  snprintf(figure, sizeof figure, "%s tenant B's wait to start p99", label);
  report(figure, (double)waited_ms[F1_B * 99 / 100], "ms",
         "1000 ms p99 (the issue's bound)");
}

/* K1: 10,000 instances x 10 trivial steps, each of its own value of a
 * concurrency rule's key (limit 2), against the same without flow
 * rules; three rounds interleaved, medians. */
static double k1_round(const char *wf, size_t n) {
  bench_engine b;
  bench_open(&b, "k1", workflows, N_WFS, opts.workers, 1, opts.hosts);
  bench_start(&b);
  int64_t t0 = now_us();
  create_each(&b, wf, n, "{\"steps\":10,\"k\":%zu}");
  wait_ended(&b, n);
  double s = (double)(now_us() - t0) / 1e6;
  bench_close(&b, 1);
  return (double)n / s;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void k1_keys(void) {
  size_t n = opts.quick ? 1000 : 10000;
  double plain[3], keyed[3];
  for (int r = 0; r < 3; r++) {
    plain[r] = k1_round("steps", n);
    keyed[r] = k1_round("keyed", n);
  }
  qsort(plain, 3, sizeof *plain, cmp_double);
  qsort(keyed, 3, sizeof *keyed, cmp_double);
  report("K1 instances/s without flow rules", plain[1], "inst/s", NULL);
  report("K1 instances/s with a rule of 10,000 keys", keyed[1], "inst/s", NULL);
  report("K1 overhead of the keyed rule",
         100.0 * (plain[1] - keyed[1]) / plain[1], "%",
         "10 % (the issue's bound)");
}

/* S1: W1's workload on `wf` (its steps naming a resource, or not); the
 * resource's bound is never reached, so what differs is the claim. */
static double s1_round(const char *wf, size_t n) {
  bench_engine b;
  bench_open(&b, "s1", workflows, N_WFS, opts.workers, 1, opts.hosts);
  duro_resource_options o = {.concurrency = 1000000};
  for (uint32_t h = 0; h < b.n_hosts; h++)
    if (duro_resource_register(b.hosts[h], "bench", &o) != 0) {
      fprintf(stderr, "bench: resource refused\n");
      exit(1);
    }
  bench_start(&b);
  int64_t t0 = now_us();
  create_many(&b, wf, n, "{\"steps\":10}", 100);
  wait_ended(&b, n);
  double s = (double)(now_us() - t0) / 1e6;
  bench_close(&b, 1);
  return (double)(n * 10) / s;
}

static void s1_resource(void) {
  size_t n = opts.quick ? 50 : 1000;
  double plain[3], claims[3];
  for (int r = 0; r < 3; r++) {
    plain[r] = s1_round("steps", n);
    claims[r] = s1_round("claims", n);
  }
  qsort(plain, 3, sizeof *plain, cmp_double);
  qsort(claims, 3, sizeof *claims, cmp_double);
  report("S1 steps/s naming no resource", plain[1], "steps/s", NULL);
  report("S1 steps/s naming a resource", claims[1], "steps/s", NULL);
  report("S1 overhead of the resource",
         100.0 * (plain[1] - claims[1]) / plain[1], "%", NULL);
}

static void w1_tailed(void) { w1_run("w1l", NULL, 1); }

static void w1_traced(void) {
  otlp_sink sink;
  if (otlp_sink_start(&sink) != 0) {
    fprintf(stderr, "bench: no OTLP sink\n");
    exit(1);
  }
  w1_run("w1t", &sink, 0);
  otlp_sink_stop(&sink);
}

/* ---- W2
 * ------------------------------------------------------------------------ */

static double median_us(int64_t *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_i64);
  return n % 2 ? (double)v[n / 2] : (double)(v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The median of 200 rewrites + fdatasync of a 4 KiB block in `dir`. */
static double raw_fdatasync_us(const char *dir) {
  char path[300];
  snprintf(path, sizeof path, "%s/fsync.bin", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char block[4096];
  memset(block, 'x', sizeof block);
  int64_t v[200];
  for (size_t i = 0; i < 200; i++) {
    int64_t t = now_us();
    if (pwrite(fd, block, sizeof block, 0) != (ssize_t)sizeof block)
      break;
    fdatasync(fd);
    v[i] = now_us() - t;
  }
  close(fd);
  unlink(path);
  return median_us(v, 200);
}

static double bare_sqlite_commit_us(void) {
  char path[300];
  snprintf(path, sizeof path, "%s/bare.db", opts.dir);
  bench_remove_files(path);
  sqlite3 *db;
  sqlite3_open(path, &db);
  sqlite3_exec(db,
               opts.sync_full
                   ? "PRAGMA journal_mode=WAL;PRAGMA synchronous=FULL"
                   : "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL",
               NULL, NULL, NULL);
  sqlite3_exec(db, "CREATE TABLE t(x)", NULL, NULL, NULL);
  sqlite3_stmt *st;
  sqlite3_prepare_v2(db, "INSERT INTO t VALUES(?1)", -1, &st, NULL);
  int64_t v[200];
  for (size_t i = 0; i < 200; i++) {
    int64_t t = now_us();
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    sqlite3_bind_int64(st, 1, (sqlite3_int64)i);
    sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    v[i] = now_us() - t;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  bench_remove_files(path);
  return median_us(v, 200);
}

#if DURO_HAVE_PG
/* The cluster --postgresql auto started; its dir is "" otherwise. */
static pg_cluster cluster = {.postmaster = -1};

static void stop_cluster(void) {
  char err[1024];
  if (pg_cluster_stop(&cluster, err, sizeof err) != 0)
    fprintf(stderr, "duro-bench: %s\n", err);
}

/* A bare commit of one row on the same server, in a database of its own,
 * timed as the bare SQLite commit is (the median of 200), and the step's
 * latency over it. */
static void w2_postgresql_reference(double step_us) {
  char conninfo[1024], err[1024];
  pg_database_create("w2bare");
  pg_database_conninfo("w2bare", conninfo, sizeof conninfo);
  PGconn *conn = pg_bare_open(conninfo, err, sizeof err);
  int64_t v[200];
  long id = 1;
  int ok = conn && pg_bare_time(conn, pg_bare_commit, 50, 200, &id, v) == 0;
  if (!conn)
    fprintf(stderr, "bench: bare commit: %s", err);
  PQfinish(conn);
  pg_database_drop("w2bare");
  if (!ok)
    exit(1);
  /* Only where the server's files are known to be: its WAL's filesystem. */
  if (cluster.dir[0])
    report("W2 raw fdatasync", raw_fdatasync_us(cluster.dir) / 1000.0, "ms",
           NULL);
  double bare_us = median_us(v, 200);
  report("W2 bare PostgreSQL commit", bare_us / 1000.0, "ms", NULL);
  report("W2 step / bare commit", step_us / bare_us, "x", "target <= 1.2");
}
#endif

static void w2_latency(void) {
  int64_t runs[5];
  bench_engine b;
  bench_open(&b, "w2", workflows, N_WFS, opts.workers, 1, opts.hosts);
  bench_start(&b);
  duro_journal_stats j0, j1;
  duro_engine_journal_stats(b.e, &j0);
  for (size_t r = 0; r < 5; r++) {
    int64_t t0 = now_us();
    duro_instance_create(b.e, "steps", NULL, "{\"steps\":100}", -1, NULL);
    wait_ended(&b, r + 1);
    runs[r] = (now_us() - t0) / 100;
  }
  duro_engine_journal_stats(b.e, &j1);
  bench_close(&b, 1);
  double step_us = median_us(runs, 5);
  double commit_us =
      (double)(j1.commit_us - j0.commit_us) / (double)(j1.commits - j0.commits);
  report("W2 per-step latency", step_us / 1000.0, "ms/step", "3 ms/step");
  report("W2 of which its commit", commit_us / 1000.0, "ms", NULL);
  if (opts.postgresql) {
#if DURO_HAVE_PG
    w2_postgresql_reference(step_us);
#endif
    return;
  }
  report("W2 raw fdatasync", raw_fdatasync_us(opts.dir) / 1000.0, "ms", NULL);
  report("W2 bare SQLite commit", bare_sqlite_commit_us() / 1000.0, "ms", NULL);
}

/* ---- W3 and R
 * ------------------------------------------------------------------- */

static void w3_sleepers(void) {
  size_t n = opts.quick ? 200 : opts.sleepers;
  bench_engine b;
  bench_open(&b, "w3", workflows, N_WFS, opts.workers, 1, opts.hosts);
  bench_start(&b);
  long rss0 = rss_kib();
  __atomic_store_n(&slept_steps, 0, __ATOMIC_RELAXED);
  int64_t t0 = now_us();
  create_many(&b, "sleeper", n, NULL, 1000);
  double create_s = (double)(now_us() - t0) / 1e6;
  while (__atomic_load_n(&slept_steps, __ATOMIC_RELAXED) < n)
    usleep(2000);
  wait_settled(&b);
  double all_s = (double)(now_us() - t0) / 1e6;
  long rss1 = rss_kib();
  report("W3 creations/s", (double)n / create_s, "inst/s",
         "380 instance starts/s");
  report("W3 to all sleeping", all_s, "s", NULL);
  report("W3 RSS before", (double)rss0 / 1024, "MiB", NULL);
  report("W3 RSS after", (double)rss1 / 1024, "MiB", NULL);
  report("W3 RSS peak (process)", (double)status_kib("VmHWM") / 1024, "MiB",
         NULL);
  report("W3 RSS per sleeper", (double)(rss1 - rss0) * 1024 / (double)n,
         "bytes", "~90 KiB per sleeper");
  long long bytes;
#if DURO_HAVE_PG
  if (opts.postgresql)
    bytes = pg_database_bytes(b.name);
  else
#endif
  {
    char wal[sizeof b.db + 8];
    snprintf(wal, sizeof wal, "%s-wal", b.db);
    bytes = file_size(b.db) + file_size(wal);
  }
  report("W3 database size", (double)bytes / (1024 * 1024), "MiB", NULL);
  report("W3 database per sleeper", (double)bytes / (double)n, "bytes", NULL);
  bench_close(&b, 1);
}

static void r_recovery(void) {
  size_t n = opts.quick ? 200 : 100000;
  bench_engine b;
  /* workers = 0 and no start: instances are created and stay queued, as a
   * host killed before it ran them leaves them. */
  bench_open(&b, "r", workflows, N_WFS, 0, 1, 1);
  create_many(&b, "steps", n, "{\"steps\":1}", 1000);
  duro_engine_close(b.e);
  int64_t t0 = now_us();
  bench_open(&b, "r", workflows, N_WFS, 0, 0, 1);
  if (duro_engine_start(b.e) != 0)
    exit(1);
  double s = (double)(now_us() - t0) / 1e6;
  size_t armed = duro_engine_in_flight(b.e);
  duro_engine_close(b.e);
  bench_remove_journal(b.name, b.db);
  if (armed != n)
    fprintf(stderr, "bench: R re-armed %zu of %zu\n", armed, n);
  char fig[48];
  snprintf(fig, sizeof fig, "R re-arm %zu", n);
  report(fig, s, "s", NULL);
}

/* ---- W4
 * ---------------------------------------------------------------------------
 */

/* spread_ms = 0: every instance wakes at the same millisecond (a burst of
 * n activations); otherwise wake times are spread evenly over spread_ms,
 * which measures the timer rather than the burst. */
static void w4_run(const char *label, int64_t spread_ms) {
  size_t n = opts.quick ? 50 : 1000;
  lateness_ms = calloc(n, sizeof *lateness_ms);
  lateness_n = 0;
  bench_engine b;
  bench_open(&b, "w4", workflows, N_WFS, opts.workers, 1, 1);
  bench_start(&b);
  int64_t at = wall_ms() + 1000;
  duro_create_req *reqs = calloc(n, sizeof *reqs);
  char(*params)[64] = calloc(n, sizeof *params);
  for (size_t i = 0; i < n; i++) {
    snprintf(params[i], sizeof params[i], "{\"at\":%lld}",
             (long long)(at + spread_ms * (int64_t)i / (int64_t)n));
    reqs[i] = (duro_create_req){.params = params[i], .retention_ms = -1};
  }
  duro_create_result res;
  duro_instance_create_many(b.e, "napper", reqs, n, &res);
  duro_create_result_free(&res);
  wait_settled(&b); /* all asleep, well before the first wake */
  duro_journal_stats j0, j1;
  duro_engine_journal_stats(b.e, &j0);
  wait_ended(&b, n);
  duro_engine_journal_stats(b.e, &j1);
  bench_close(&b, 1);
  free(reqs);
  free(params);
  if (spread_ms == 0) {
    /* what the wakes cost the one writer */
    report("W4 burst group commits", (double)(j1.commits - j0.commits), "",
           NULL);
    report("W4 burst write batches", (double)(j1.batches - j0.batches), "",
           NULL);
    report("W4 burst commit time", (double)(j1.commit_us - j0.commit_us) / 1000,
           "ms", NULL);
  }
  qsort(lateness_ms, n, sizeof *lateness_ms, cmp_i64);
  char fig[64];
  snprintf(fig, sizeof fig, "W4 %s lateness p50", label);
  report(fig, (double)lateness_ms[n / 2], "ms", NULL);
  snprintf(fig, sizeof fig, "W4 %s lateness p99", label);
  report(fig, (double)lateness_ms[n * 99 / 100], "ms", "260 ms p99");
  snprintf(fig, sizeof fig, "W4 %s lateness max", label);
  report(fig, (double)lateness_ms[n - 1], "ms", NULL);
  free(lateness_ms);
}

static void w4_lateness(void) {
  w4_run("burst", 0);
  w4_run("spread", 1000);
}

/* ---- W5
 * ---------------------------------------------------------------------------
 */

typedef struct sender {
  duro_engine *e;
  char (*ids)[40];
  size_t from, to;
} sender;

static void *send_events(void *arg) {
  sender *s = arg;
  for (size_t i = s->from; i < s->to; i++)
    duro_instance_send_event(s->e, "waiter", s->ids[i], "go", "{}");
  return NULL;
}

static void w5_events(void) {
  size_t n = opts.quick ? 50 : 1000;
  char(*ids)[40] = calloc(n, sizeof *ids);
  bench_engine b;
  bench_open(&b, "w5", workflows, N_WFS, opts.workers, 1, 1);
  bench_start(&b);
  for (size_t i = 0; i < n; i++) {
    snprintf(ids[i], sizeof ids[i], "w-%zu", i);
    duro_instance_create(b.e, "waiter", ids[i], NULL, -1, NULL);
  }
  wait_settled(&b);
  /* As many concurrent senders as HTTP clients would be. */
  enum { SENDERS = 16 };
  pthread_t th[SENDERS];
  sender s[SENDERS];
  int64_t t0 = now_us();
  for (size_t k = 0; k < SENDERS; k++) {
    s[k] = (sender){b.e, ids, n * k / SENDERS, n * (k + 1) / SENDERS};
    pthread_create(&th[k], NULL, send_events, &s[k]);
  }
  for (size_t k = 0; k < SENDERS; k++)
    pthread_join(th[k], NULL);
  wait_ended(&b, n);
  double ms = (double)(now_us() - t0) / 1000;
  bench_close(&b, 1);
  free(ids);
  char fig[48];
  snprintf(fig, sizeof fig, "W5 %zu events to complete", n);
  report(fig, ms, "ms", "1.8 s for 500 events");
}

/* ---- W6
 * ------------------------------------------------------------------------ */

/* The folder this binary is in (build/bench). */
static const char *self_dir(void) {
  static char self[4000];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  self[k > 0 ? k : 0] = '\0';
  char *slash = strrchr(self, '/');
  if (slash)
    *slash = '\0';
  return self;
}

/* W6 once: `so` NULL runs the steps in the engine on `threads` threads,
 * else in a worker process of that plugin; the seconds to all complete. */
static double w6_run(const char *name, const char *so, uint32_t threads,
                     size_t n) {
  const char *was = worker_so_now;
  worker_so_now = so;
  bench_engine b;
  bench_open(&b, name, workflows, N_WFS, threads, 1, 1);
  worker_so_now = was;
  bench_start(&b);
  int64_t t0 = now_us();
  create_many(&b, "io", n, "{\"steps\":2,\"ms\":200}", 100);
  wait_ended(&b, n);
  double s = (double)(now_us() - t0) / 1e6;
  bench_close(&b, 1);
  return s;
}

/* The bench plugin's path into so (--plugin-workers SO, else libbench.so
 * beside this binary); 0, said, when it is missing: `what` in a worker
 * is left out. */
static int bench_plugin(char *so, size_t len, const char *what) {
  if (opts.worker_so)
    snprintf(so, len, "%s", opts.worker_so);
  else /* build/bench/duro-bench -> build/bench/libbench.so */
    snprintf(so, len, "%s/libbench.so", self_dir());
  if (access(so, R_OK) == 0)
    return 1;
  fprintf(stderr,
          "bench: %s in a worker needs the bench plugin: %s is missing "
          "(--plugin-workers SO)\n",
          what, so);
  return 0;
}
static void w6_io(void) {
  size_t n = opts.quick ? 100 : 1000;
  char fig[64];
  snprintf(fig, sizeof fig, "W6 %zu x 2 I/O steps, in engine", n);
  report(fig, w6_run("w6e", NULL, opts.workers, n), "s",
         "ideal 0.4 s; Restate 2.96 s");
  char so[4200];
  if (!bench_plugin(so, sizeof so, "W6"))
    return;
  snprintf(fig, sizeof fig, "W6 %zu x 2 I/O steps, in a worker", n);
  uint32_t was = opts.workers;
  opts.workers = 8; /* the setting line names the threads it ran on */
  report(fig, w6_run("w6w", so, 8, n), "s", "target <= 1.0 s");
  opts.workers = was;
}

/* ---- H1
 * ------------------------------------------------------------------------ */

/* H1: W6's I/O steps (2 of 100 ms an instance) on PostgreSQL, every
 * instance created on one host of 8 threads: that host alone, then with
 * two idle hosts beside it, which it hands its backlog to
 * (engine/rebalance.c).  Seconds to all complete. */
#define H1_THREADS 8

static double h1_run(const char *name, uint32_t hosts, size_t n) {
  int was = opts.create_on_one;
  opts.create_on_one = 1;
  bench_engine b;
  bench_open(&b, name, workflows, N_WFS, H1_THREADS, 1, hosts);
  bench_start(&b);
  int64_t t0 = now_us();
  create_many(&b, "io", n, "{\"steps\":2,\"ms\":100}", 100);
  wait_ended(&b, n);
  double s = (double)(now_us() - t0) / 1e6;
  bench_close(&b, 1);
  opts.create_on_one = was;
  return s;
}

static void h1_spread(void) {
  if (!opts.postgresql)
    return; /* several hosts share only a PostgreSQL journal */
  size_t n = opts.quick ? 120 : 600;
  uint32_t was_workers = opts.workers, was_hosts = opts.hosts;
  opts.workers = H1_THREADS; /* the setting line names them */
  char fig[80];
  for (uint32_t hosts = 1; hosts <= 3; hosts += 2) {
    opts.hosts = hosts;
    snprintf(fig, sizeof fig, "H1 %zu x 2 I/O steps created on one of %u", n,
             hosts);
    report(fig, h1_run(hosts == 1 ? "h1a" : "h1c", hosts, n), "s",
           hosts == 1 ? "alone" : "the others handed work");
  }
  opts.workers = was_workers;
  opts.hosts = was_hosts;
}

/* ---- W8
 * ------------------------------------------------------------------------ */

/* One Par instance of the bench plugin in a worker process, with
 * `params`: the seconds to its end. */
static double w8_run(const char *so, const char *params) {
  const char *was = worker_so_now;
  worker_so_now = so;
  bench_engine b;
  bench_open(&b, "w8", workflows, N_WFS, 8, 1, 1);
  worker_so_now = was;
  bench_start(&b);
  int64_t t0 = now_us();
  create_many(&b, "par", 1, params, 1);
  wait_ended(&b, 1);
  double s = (double)(now_us() - t0) / 1e6;
  bench_close(&b, 1);
  return s;
}

static void w8_parallel(void) {
  int n = opts.quick ? 100 : 1000;
  char so[4200], fig[80], params[96];
  if (opts.worker_so)
    snprintf(so, sizeof so, "%s", opts.worker_so);
  else /* build/bench/duro-bench -> build/bench/libbench.so */
    snprintf(so, sizeof so, "%s/libbench.so", self_dir());
  if (access(so, R_OK) != 0) {
    fprintf(stderr, "bench: W8 needs the bench plugin: %s is missing\n", so);
    return;
  }
  uint32_t was = opts.workers;
  opts.workers = 8; /* the setting line names the threads it ran on */
  snprintf(params, sizeof params, "{\"steps\":%d,\"ms\":1}", n);
  snprintf(fig, sizeof fig, "W8 %d x 1 ms steps, one after another", n);
  report(fig, w8_run(so, params), "s", "ideal 1.0 s");
  static const int in_flight[] = {100, 1000};
  for (size_t i = 0; i < 2; i++) {
    snprintf(params, sizeof params,
             "{\"steps\":%d,\"ms\":1,\"parallel\":1,\"max\":%d}", n,
             in_flight[i]);
    snprintf(fig, sizeof fig, "W8 %d x 1 ms steps, duro_do_all, %d at once", n,
             in_flight[i]);
    report(fig, w8_run(so, params), "s", "ideal: the commits alone");
  }
  opts.workers = was;
}

/* ---- W7
 * ------------------------------------------------------------------------ */

/* 100 parents that each start 10 children (one trivial step each) and
 * wait for them: every instance, parents and children, per second. */
static void w7_children(void) {
  size_t parents = opts.quick ? 10 : 100, per = 10;
  bench_engine b;
  bench_open(&b, "w7", workflows, N_WFS, opts.workers, 1, 1);
  bench_start(&b);
  int64_t t0 = now_us();
  create_many(&b, "parent", parents, "{\"children\":10}", 100);
  wait_ended(&b, parents * (1 + per));
  double s = (double)(now_us() - t0) / 1e6;
  bench_close(&b, 1);
  char fig[64];
  snprintf(fig, sizeof fig, "W7 %zu parents x %zu children", parents, per);
  report(fig, (double)(parents * (1 + per)) / s, "instances/s",
         "no published peer figure");
}

/* ---- Q1
 * ------------------------------------------------------------------------ */

/* The push consumer's side: each message's send-to-handler latency. */
static struct q1_seen {
  pthread_mutex_t mu;
  pthread_cond_t cond;
  int64_t *latency_ms;
  size_t n, want;
} q1_seen = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0};

static int q1_handler(duro_message_batch *b, duro_env *env) {
  (void)env;
  int64_t now = wall_ms();
  pthread_mutex_lock(&q1_seen.mu);
  for (size_t i = 0; i < duro_batch_size(b); i++)
    if (q1_seen.n < q1_seen.want)
      q1_seen.latency_ms[q1_seen.n++] = now - duro_batch_message(b, i)->sent_ms;
  if (q1_seen.n >= q1_seen.want)
    pthread_cond_broadcast(&q1_seen.cond);
  pthread_mutex_unlock(&q1_seen.mu);
  return 0; /* all acked */
}

typedef struct q1_producer {
  duro_engine *e;
  size_t n, batch;
} q1_producer;

static void *q1_send(void *arg) {
  q1_producer *p = arg;
  duro_queue_send_req reqs[100];
  char err[256];
  for (size_t i = 0; i < p->batch; i++)
    reqs[i] = (duro_queue_send_req){.body = "{\"order\":42,\"sku\":\"A-1\"}"};
  for (size_t sent = 0; sent < p->n; sent += p->batch)
    if (duro_queue_enqueue_batch(p->e, "bench", reqs, p->batch, NULL, err,
                                 sizeof err) != 0) {
      fprintf(stderr, "bench: send: %s\n", err);
      exit(1);
    }
  return NULL;
}

static int64_t q1_left(duro_engine *e) {
  json_t *st = NULL;
  duro_queue_stats(e, "bench", &st);
  int64_t n = json_integer_value(json_object_get(st, "ready")) +
              json_integer_value(json_object_get(st, "delayed")) +
              json_integer_value(json_object_get(st, "in_flight"));
  json_decref(st);
  return n;
}

/* Producer and push consumer at once, as in service: the clock stops
 * when the last message's ack is on disk (the queue is empty). */
static void q1_push(void) {
  size_t n = opts.quick ? 1000 : 200000;
  bench_engine b;
  bench_open(&b, "q1push", NULL, 0, opts.workers, 1, 1);
  duro_queue_register(b.e, "bench", NULL);
  duro_queue_consumer_opts co = {.max_batch_size = 100,
                                 .max_batch_timeout_ms = 0};
  duro_queue_consume(b.e, "bench", q1_handler, &co);
  q1_seen.latency_ms = calloc(n, sizeof *q1_seen.latency_ms);
  q1_seen.n = 0;
  q1_seen.want = n;
  bench_start(&b);
  q1_producer p = {b.e, n, 100};
  pthread_t t;
  int64_t t0 = now_us();
  pthread_create(&t, NULL, q1_send, &p);
  pthread_mutex_lock(&q1_seen.mu);
  while (q1_seen.n < n)
    pthread_cond_wait(&q1_seen.cond, &q1_seen.mu);
  pthread_mutex_unlock(&q1_seen.mu);
  pthread_join(t, NULL);
  while (q1_left(b.e) > 0)
    usleep(500);
  int64_t t1 = now_us();
  bench_close(&b, 1);
  qsort(q1_seen.latency_ms, n, sizeof *q1_seen.latency_ms, cmp_i64);
  report("Q1 end to end (push)", (double)n / ((double)(t1 - t0) / 1e6), "msg/s",
         "target 100,000");
  report("Q1 send to handler p50", (double)q1_seen.latency_ms[n / 2], "ms",
         NULL);
  report("Q1 send to handler p99", (double)q1_seen.latency_ms[n * 99 / 100],
         "ms", NULL);
  free(q1_seen.latency_ms);
}

/* Each batch is one commit (one fsync under synchronous=full): the figure
 * is about what one producer and one consumer get, not the group commit of
 * many. */
static void q1_queue(void) {
  size_t n = opts.quick ? 1000 : 200000, batch = 100;
  bench_engine b;
  bench_open(&b, "q1", NULL, 0, 1, 1, 1);
  bench_start(&b);
  duro_queue_register(b.e, "bench", NULL);
  char err[256];
  duro_queue_send_req reqs[100];
  for (size_t i = 0; i < batch; i++)
    reqs[i] = (duro_queue_send_req){.body = "{\"order\":42,\"sku\":\"A-1\"}"};
  int64_t t0 = now_us();
  for (size_t sent = 0; sent < n; sent += batch)
    if (duro_queue_enqueue_batch(b.e, "bench", reqs, batch, NULL, err,
                                 sizeof err) != 0) {
      fprintf(stderr, "bench: send: %s\n", err);
      exit(1);
    }
  int64_t t1 = now_us();
  size_t done = 0;
  while (done < n) {
    json_t *msgs = NULL, *res = NULL;
    if (duro_queue_pull(b.e, "bench", (uint32_t)batch, 60000, &msgs, err,
                        sizeof err) != 0 ||
        json_array_size(msgs) == 0) {
      fprintf(stderr, "bench: pull: %s\n", err);
      exit(1);
    }
    const char *leases[100];
    size_t k = json_array_size(msgs);
    for (size_t i = 0; i < k; i++)
      leases[i] = json_string_value(
          json_object_get(json_array_get(msgs, i), "lease_id"));
    duro_queue_ack(b.e, "bench", leases, k, NULL, 0, &res, err, sizeof err);
    done += (size_t)json_integer_value(json_object_get(res, "acked"));
    json_decref(res);
    json_decref(msgs);
  }
  int64_t t2 = now_us();
  bench_close(&b, 1);
  report("Q1 pull: sent (of 100)", (double)n / ((double)(t1 - t0) / 1e6),
         "msg/s", NULL);
  report("Q1 pull: pulled+acked", (double)n / ((double)(t2 - t1) / 1e6),
         "msg/s", NULL);
  report("Q1 pull: one after other", (double)n / ((double)(t2 - t0) / 1e6),
         "msg/s", NULL);
}

/* ---- QK
 * ------------------------------------------------------------------------ */

/* Sends n bodies {"account":"<acct>","n":i} in batches of 100. */
static void qk_send(duro_engine *e, const char *acct, size_t n) {
  duro_queue_send_req reqs[100];
  char bodies[100][64], err[256];
  for (size_t sent = 0; sent < n;) {
    size_t k = n - sent < 100 ? n - sent : 100;
    for (size_t i = 0; i < k; i++) {
      snprintf(bodies[i], sizeof bodies[i], "{\"account\":\"%s\",\"n\":%zu}",
               acct, sent + i);
      reqs[i] = (duro_queue_send_req){.body = bodies[i]};
    }
    if (duro_queue_enqueue_batch(e, "qk", reqs, k, NULL, err, sizeof err)) {
      fprintf(stderr, "bench: send: %s\n", err);
      exit(1);
    }
    sent += k;
  }
}

/* One keyed lease of at most one message (the consumer's, /account with
 * limit 1): the time it took, in us; its lease id into lease (empty when
 * it took none). */
static int64_t qk_lease(duro_engine *e, char *lease, size_t len) {
  journal_message *m = NULL;
  size_t n = 0;
  char err[256];
  int64_t t0 = now_us();
  if (queue_lease_by_key(e, "qk", 1, 600000, NULL, "/account", 1, &m, &n, err,
                         sizeof err)) {
    fprintf(stderr, "bench: lease: %s\n", err);
    exit(1);
  }
  int64_t us = now_us() - t0;
  snprintf(lease, len, "%s", n ? m[0].lease : "");
  journal_messages_free(m, n);
  return us;
}

/* `held` messages of one key held behind its first, in a handler; then
 * n of another key leased and acked one by one. */
static void qk_keys(size_t held) {
  size_t n = opts.quick ? 50 : 200;
  bench_engine b;
  bench_open(&b, "qk", NULL, 0, 1, 1, 1);
  bench_start(&b);
  duro_queue_register(b.e, "qk", NULL);
  char lease[128], err[256];
  if (held) {
    qk_send(b.e, "hot", held + 1);
    qk_lease(b.e, lease, sizeof lease); /* hot's first: in a handler */
  }
  qk_send(b.e, "cold", n);
  int64_t *us = calloc(n, sizeof *us);
  for (size_t i = 0; i < n; i++) {
    us[i] = qk_lease(b.e, lease, sizeof lease);
    json_t *res = NULL;
    const char *leases[1] = {lease};
    if (!lease[0] || duro_queue_ack(b.e, "qk", leases, 1, NULL, 0, &res, err,
                                    sizeof err) != 0) {
      fprintf(stderr, "bench: QK lease %zu of the other key: %s\n", i,
              lease[0] ? err : "none leased");
      exit(1);
    }
    json_decref(res);
  }
  bench_close(&b, 1);
  int64_t total = 0;
  for (size_t i = 0; i < n; i++)
    total += us[i];
  qsort(us, n, sizeof *us, cmp_i64);
  char mean[64], p99[64];
  snprintf(mean, sizeof mean, "QK lease (%zu held)", held);
  snprintf(p99, sizeof p99, "QK lease p99 (%zu held)", held);
  report(mean, (double)total / (double)n / 1e3, "ms", NULL);
  report(p99, (double)us[n * 99 / 100] / 1e3, "ms", NULL);
  free(us);
}

/* ---- L1
 * ------------------------------------------------------------------------ */

/* n ended instances of `wf`, one a second from base_ms: ids ord-%07d,
 * one in twenty errored, one in twenty terminated, the rest complete,
 * each ended a minute after it was created, kept retention_ms.  Written in one
 * transaction straight to the journal's file (the engine closed): a million
 * creates through the engine would time the creates, not the listing. */
static void l1_fill(const char *db, const char *wf, size_t n, int64_t base_ms,
                    int64_t retention_ms) {
  sqlite3 *c;
  sqlite3_stmt *st, *attr;
  if (sqlite3_open(db, &c) != SQLITE_OK ||
      sqlite3_exec(c, "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(c,
                         "INSERT INTO instances(workflow,id,status,params,"
                         "created_ms,started_ms,ended_ms,retention_ms) "
                         "VALUES(?5,?1,?2,'{}',?3,?3,?4,?6)",
                         -1, &st, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(c,
                         "INSERT INTO attributes(instance,name,workflow,str,"
                         "num) VALUES(?1,?2,?5,?3,?4)",
                         -1, &attr, NULL) != SQLITE_OK) {
    fprintf(stderr, "bench: L1: %s\n", sqlite3_errmsg(c));
    exit(1);
  }
  for (size_t i = 0; i < n; i++) {
    char id[32];
    snprintf(id, sizeof id, "ord-%07zu", i);
    int64_t at = base_ms + (int64_t)i * 1000;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2,
                      i % 20 == 7    ? "errored"
                      : i % 20 == 13 ? "terminated"
                                     : "complete",
                      -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, at);
    sqlite3_bind_int64(st, 4, at + 60000);
    sqlite3_bind_text(st, 5, wf, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, retention_ms);
    if (sqlite3_step(st) != SQLITE_DONE) {
      fprintf(stderr, "bench: L1: %s\n", sqlite3_errmsg(c));
      exit(1);
    }
    sqlite3_reset(st);
    /* its search attributes: one of 997 customers, an amount 0-499 */
    int64_t rowid = sqlite3_last_insert_rowid(c);
    char customer[16];
    snprintf(customer, sizeof customer, "c%zu", i % 997);
    for (int k = 0; k < 2; k++) {
      sqlite3_bind_int64(attr, 1, rowid);
      sqlite3_bind_text(attr, 2, k ? "amount" : "customer", -1, SQLITE_STATIC);
      sqlite3_bind_text(attr, 5, wf, -1, SQLITE_STATIC);
      if (k) {
        sqlite3_bind_null(attr, 3);
        sqlite3_bind_double(attr, 4, (double)(i % 500));
      } else {
        sqlite3_bind_text(attr, 3, customer, -1, SQLITE_TRANSIENT);
        sqlite3_bind_null(attr, 4);
      }
      if (sqlite3_step(attr) != SQLITE_DONE) {
        fprintf(stderr, "bench: L1: %s\n", sqlite3_errmsg(c));
        exit(1);
      }
      sqlite3_reset(attr);
    }
  }
  sqlite3_finalize(st);
  sqlite3_finalize(attr);
  sqlite3_exec(c, "COMMIT", NULL, NULL, NULL);
  sqlite3_close(c);
}

#if DURO_HAVE_PG
/* l1_fill's rows in the PostgreSQL database `conninfo`, in one statement
 * (the server makes them: generate_series), then ANALYZE, as the
 * autovacuum would after so many. */
static void l1_fill_pg(const char *conninfo, size_t n, int64_t base_ms) {
  char sql[2048];
  snprintf(sql, sizeof sql,
           "INSERT INTO instances(workflow,id,status,params,created_ms,"
           "started_ms,ended_ms,retention_ms) SELECT 'listed',"
           "'ord-'||lpad(i::text,7,'0'),CASE i%%20 WHEN 7 THEN 'errored' "
           "WHEN 13 THEN 'terminated' ELSE 'complete' END,'{}',"
           "%lld+i*1000,%lld+i*1000,%lld+i*1000+60000,0 FROM "
           "generate_series(0,%zu) i; ANALYZE instances;"
           /* and l1_fill's search attributes, by the number in the id */
           "INSERT INTO attributes(instance,name,workflow,str,num) SELECT "
           "rowid,'customer','listed','c'||(substr(id,5)::bigint%%997),NULL "
           "FROM instances WHERE workflow='listed';"
           "INSERT INTO attributes(instance,name,workflow,str,num) SELECT "
           "rowid,'amount','listed',NULL,substr(id,5)::bigint%%500 FROM "
           "instances WHERE workflow='listed'; ANALYZE attributes",
           (long long)base_ms, (long long)base_ms, (long long)base_ms, n - 1);
  PGconn *c = PQconnectdb(conninfo);
  PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
  if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) {
    fprintf(stderr, "bench: L1: %s",
            r ? PQresultErrorMessage(r) : PQerrorMessage(c));
    exit(1);
  }
  PQclear(r);
  PQfinish(c);
}
#endif

/* The median over 5 of a page of 20 that passes f, in ms. */
static double l1_page(duro_engine *e, const duro_list_filter *f) {
  int64_t us[5];
  for (int r = 0; r < 5; r++) {
    duro_instance_page p;
    int64_t t0 = now_us();
    if (duro_instance_list_page(e, "listed", f, 20, NULL, &p) != 0 ||
        p.n == 0) {
      fprintf(stderr, "bench: L1: a page came back empty\n");
      exit(1);
    }
    us[r] = now_us() - t0;
    duro_instance_page_free(&p);
  }
  qsort(us, 5, sizeof *us, cmp_i64);
  return (double)us[2] / 1e3;
}

static void l1_listing(void) {
  size_t n = opts.quick ? 100000 : 1000000;
  int64_t base = 1700000000000; /* 2023-11-14 */
  const wf_def wf[] = {{"listed", wf_steps, NULL, NULL, NULL}};
  bench_engine b;
  bench_open(&b, "listed", wf, 1, 1, 1, 1); /* the schema */
  bench_close(&b, 0);
#if DURO_HAVE_PG
  if (opts.postgresql)
    l1_fill_pg(b.db, n, base);
  else
#endif
    l1_fill(b.db, "listed", n, base, 0);
  bench_open(&b, "listed", wf, 1, 1, 0, 1);
  bench_start(&b);
  int64_t mid = base + (int64_t)n / 2 * 1000;
  char prefix[32]; /* the 100 ids about the middle one's */
  snprintf(prefix, sizeof prefix, "ord-%05zu", n / 2 / 100);
  /* search attributes (l1_fill's): a customer's ~1000 of 1,000,000, one
   * in twenty of them errored; an amount range of 2% */
  const duro_attr_filter c42[] = {{.name = "customer", .str = "c42"}};
  const duro_attr_filter c42_big[] = {
      {.name = "customer", .str = "c42"},
      {.name = "amount", .op = DURO_ATTR_GE, .num = 250}};
  const duro_attr_filter big[] = {
      {.name = "amount", .op = DURO_ATTR_GT, .num = 489}};
  struct {
    const char *what;
    duro_list_filter f;
  } pages[] = {
      {"L1 page, no filter", {.status = -1}},
      {"L1 page, errored", {.status = DURO_STATUS_ERRORED}},
      {"L1 page, id prefix", {.status = -1, .prefix = prefix}},
      {"L1 page, created hour",
       {.status = -1, .created_after = mid, .created_before = mid + 3600000}},
      {"L1 page, ended hour",
       {.status = -1, .ended_after = mid, .ended_before = mid + 3600000}},
      {"L1 page, errored old hour",
       {.status = DURO_STATUS_ERRORED,
        .created_after = base,
        .created_before = base + 3600000}},
      {"L1 page, where customer", {.status = -1, .where = c42, .n_where = 1}},
      {"L1 page, where customer, errored",
       {.status = DURO_STATUS_ERRORED, .where = c42, .n_where = 1}},
      {"L1 page, where customer and amount",
       {.status = -1, .where = c42_big, .n_where = 2}},
      {"L1 page, where amount range",
       {.status = -1, .where = big, .n_where = 1}},
  };
  for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++)
    report(pages[i].what, l1_page(b.e, &pages[i].f), "ms", NULL);
  bench_close(&b, 1);
}

/* ---- B1
 * ------------------------------------------------------------------------ */

/* One round of W1's work on b: instances/s. */
static double b1_round(bench_engine *b, size_t n) {
  pthread_mutex_lock(&b->mu);
  b->ended = 0;
  pthread_mutex_unlock(&b->mu);
  int64_t t0 = now_us();
  create_many(b, "steps", n, "{\"steps\":10}", 100);
  wait_ended(b, n);
  return (double)n / ((double)(now_us() - t0) / 1e6);
}

/* A bulk delete of every instance of `wf`: its id; its matches must be n. */
static int64_t b1_job(bench_engine *b, const char *wf, size_t n) {
  duro_bulk_spec spec = {
      .workflow = wf, .action = DURO_BULK_DELETE, .filter = {.status = -1}};
  int64_t id, matched;
  if (duro_bulk_create(b->e, &spec, 0, &id, &matched) != 0 ||
      matched != (int64_t)n) {
    fprintf(stderr, "bench: B1: the job was not made\n");
    exit(1);
  }
  return id;
}

/* The job's state ("running", ...) and how many it deleted. */
static int b1_state(bench_engine *b, int64_t id, int64_t *done) {
  duro_bulk_job j;
  if (duro_bulk_get(b->e, id, &j) != 0) {
    fprintf(stderr, "bench: B1: the job is gone\n");
    exit(1);
  }
  int running = !strcmp(j.state, "running");
  *done = j.done;
  duro_bulk_job_free(&j);
  return running;
}

/* The median of `rounds` rounds of W1's work, after one to warm up. */
static double b1_w1(bench_engine *b, size_t n, int rounds) {
  double v[9];
  b1_round(b, n);
  for (int r = 0; r < rounds; r++)
    v[r] = b1_round(b, n);
  qsort(v, (size_t)rounds, sizeof *v, cmp_double);
  return v[rounds / 2];
}

/* ---- KR
 * ------------------------------------------------------------------------ */

static double b1_w1(bench_engine *b, size_t n, int rounds);

/* Keys k1 (and k2, active, when both) of the bytes k[0], k[1]. */
static journal_crypt *kr_keys(unsigned char k[2][JOURNAL_CRYPT_KEY_BYTES],
                              int both) {
  journal_crypt *c = journal_crypt_new();
  if (journal_crypt_add(c, "k1", k[0]) ||
      (both && journal_crypt_add(c, "k2", k[1])) ||
      journal_crypt_activate(c, both ? "k2" : "k1"))
    abort();
  return c;
}

/* Starts a run of the keys driver and waits for its end. */
static duro_keys_run kr_run(bench_engine *b, int count_only) {
  char err[256];
  duro_keys_run r;
  if (duro_keys_start(b->e, count_only, NULL, err, sizeof err) != 0) {
    fprintf(stderr, "bench: KR: %s\n", err);
    exit(1);
  }
  for (duro_keys_status(b->e, &r); r.state == DURO_KEYS_RUNNING;
       duro_keys_status(b->e, &r))
    usleep(5000);
  return r;
}

static uint64_t kr_under(const duro_keys_run *r, const char *id) {
  for (size_t i = 0; i < r->progress.n_keys; i++)
    if (!strcmp(r->progress.keys[i].id, id))
      return r->progress.keys[i].n;
  return 0;
}

static void kr_rotation(void) {
  size_t n = opts.quick ? 500 : 20000, w1 = opts.quick ? 50 : 1000;
  unsigned char k[2][JOURNAL_CRYPT_KEY_BYTES];
  if (RAND_bytes(&k[0][0], sizeof k) != 1)
    abort();
  journal_crypt *saved = opts.keys, *old = kr_keys(k, 0), *both = kr_keys(k, 1);
  opts.keys = old;
  bench_engine b;
  bench_open(&b, "kr", workflows, N_WFS, opts.workers, 1, 1);
  bench_start(&b);
  create_many(&b, "steps", n, "{\"steps\":10}", 100);
  wait_ended(&b, n);
  bench_close(&b, 0);
  opts.keys = both;
  bench_open(&b, "kr", workflows, N_WFS, opts.workers, 0, 1);
  bench_start(&b);
  double alone = b1_w1(&b, w1, 5);
  char err[256];
  int64_t t0 = now_us();
  if (duro_keys_start(b.e, 0, NULL, err, sizeof err) != 0) {
    fprintf(stderr, "bench: KR: %s\n", err);
    exit(1);
  }
  double beside = b1_w1(&b, w1, 5);
  duro_keys_run r;
  for (duro_keys_status(b.e, &r); r.state == DURO_KEYS_RUNNING;
       duro_keys_status(b.e, &r))
    usleep(5000);
  double s = (double)(now_us() - t0) / 1e6;
  duro_keys_run c = kr_run(&b, 1);
  bench_close(&b, 1);
  opts.keys = saved;
  journal_crypt_free(old);
  journal_crypt_free(both);
  if (r.state != DURO_KEYS_DONE || kr_under(&c, "k1") != 0 ||
      c.progress.plaintext != 0) {
    fprintf(stderr,
            "bench: KR: the rotation ended %s, %llu values left under k1, "
            "%llu in the clear\n",
            duro_keys_state_name(r.state),
            (unsigned long long)kr_under(&c, "k1"),
            (unsigned long long)c.progress.plaintext);
    any_failed = 1;
  }
  char fig[64];
  snprintf(fig, sizeof fig, "KR rotation of %zu instances' values", n);
  report(fig, s, "s", NULL);
  report("KR values rewritten", (double)r.progress.rewritten, "values", NULL);
  report("KR values rewritten/s beside W1", (double)r.progress.rewritten / s,
         "values/s", NULL);
  report("KR W1 alone", alone, "inst/s", NULL);
  report("KR W1 beside the rotation", beside, "inst/s", NULL);
}

static void b1_bulk(void) {
  if (opts.postgresql) {
    fprintf(stderr, "bench: B1 runs on SQLite only\n");
    return;
  }
  size_t n = opts.quick ? 2000 : 100000, w1 = opts.quick ? 50 : 1000;
  const wf_def wf[] = {{"steps", wf_steps, NULL, NULL, NULL},
                       {"alone", wf_steps, NULL, NULL, NULL},
                       {"beside", wf_steps, NULL, NULL, NULL}};
  bench_engine b;
  bench_open(&b, "b1", wf, 3, opts.workers, 1, 1); /* the schema */
  bench_close(&b, 0);
  /* kept: the retention sweep must leave them to the jobs */
  int64_t keep = 100LL * 365 * 24 * 3600 * 1000;
  l1_fill(b.db, "alone", n, 1700000000000, keep);
  l1_fill(b.db, "beside", n, 1600000000000, keep);
  bench_open(&b, "b1", wf, 3, opts.workers, 0, 1);
  bench_start(&b);
  /* the job alone, made (its matches counted) to done */
  int64_t t0 = now_us(), done;
  int64_t id = b1_job(&b, "alone", n);
  int64_t made = now_us();
  while (b1_state(&b, id, &done))
    usleep(10000);
  int64_t t1 = now_us();
  if (done != (int64_t)n)
    fprintf(stderr, "bench: B1: %lld deleted of %zu\n", (long long)done, n);
  /* W1 alone, then W1 beside a second job, which is then cancelled */
  double alone = b1_w1(&b, w1, 5);
  id = b1_job(&b, "beside", n);
  int64_t t2 = now_us();
  double beside = b1_w1(&b, w1, 5);
  int64_t t3 = now_us(), beside_done;
  b1_state(&b, id, &beside_done);
  duro_bulk_cancel(b.e, id);
  bench_close(&b, 1);
  double s = (double)(t1 - t0) / 1e6;
  char fig[64];
  snprintf(fig, sizeof fig, "B1 bulk delete of %zu: job made", n);
  report(fig, (double)(made - t0) / 1e3, "ms", NULL);
  snprintf(fig, sizeof fig, "B1 bulk delete of %zu: job done", n);
  report(fig, s, "s", NULL);
  report("B1 bulk delete alone", (double)n / s, "inst/s", NULL);
  report("B1 bulk delete beside W1",
         (double)beside_done / ((double)(t3 - t2) / 1e6), "inst/s", NULL);
  report("B1 W1 alone", alone, "inst/s", NULL);
  report("B1 W1 beside the job", beside, "inst/s", NULL);
}

/* ---- P1
 * ------------------------------------------------------------------------ */

static long long p1_file_bytes;

static int p1_add_file(const char *path, const struct stat *st, int type,
                       struct FTW *f) {
  (void)path, (void)f;
  if (type == FTW_F)
    p1_file_bytes += (long long)st->st_size;
  return 0;
}

/* P1 once: `so` NULL sends from the engine's own code on `threads`
 * threads, else from the bench plugin's Pipe in a worker process. */
static void p1_run(const char *label, const char *so, uint32_t threads) {
  size_t n = opts.quick ? 20 : 1000, steps = opts.quick ? 2 : 10;
  size_t records = n * steps * P1_RECORDS;
  const char *was = worker_so_now;
  worker_so_now = so;
  bench_engine b;
  bench_open(&b, "p1", workflows, N_WFS, threads, 1, 1);
  worker_so_now = was;
  char dir[PATH_MAX], sink[PATH_MAX + 16];
  if (!realpath(opts.dir, dir)) {
    perror("bench: realpath");
    exit(1);
  }
  snprintf(sink, sizeof sink, "%s/p1-sink", dir);
  /* Files of 8 MB, and the last one's records written within 200 ms. */
  duro_pipeline_options o = {.dir = sink,
                             .partition = "{yyyy}/{mm}/{dd}/{hh}",
                             .compression = DURO_PIPELINE_GZIP,
                             .roll_size = 8 << 20,
                             .roll_interval_ms = 200,
                             .max_backlog = (int64_t)1 << 32};
  if (duro_pipeline_register(b.e, "events", &o) != 0 ||
      duro_pipeline_bind(b.e, "EVENTS", "events") != 0) {
    fprintf(stderr, "bench: P1: the pipeline cannot be registered\n");
    exit(1);
  }
  bench_start(&b);
  char params[32];
  snprintf(params, sizeof params, "{\"steps\":%zu}", steps);
  int64_t t0 = now_us();
  create_many(&b, "pipe", n, params, 100);
  wait_ended(&b, n);
  int64_t t1 = now_us();
  char fig[64];
  snprintf(fig, sizeof fig, "P1 %s: accepted", label);
  report(fig, (double)records / ((double)(t1 - t0) / 1e6), "records/s",
         "target >= 200,000");
  duro_pipeline_stat_list l = {0};
  for (;;) {
    int rc = duro_pipeline_stats_read(b.e, "events", &l);
    int empty = rc == 0 && l.n == 1 && l.v[0].backlog == 0;
    int64_t written = empty ? l.v[0].written : 0,
            bytes = empty ? l.v[0].written_bytes : 0;
    duro_pipeline_stat_list_free(&l);
    if (rc) {
      fprintf(stderr, "bench: P1: %s\n", duro_strerror(rc));
      exit(1);
    }
    if (!empty) {
      usleep(2000);
      continue;
    }
    int64_t t2 = now_us();
    if ((size_t)written != records) {
      fprintf(stderr, "bench: P1: %lld records written of %zu\n",
              (long long)written, records);
      any_failed = 1;
    }
    bench_close(&b, 1);
    p1_file_bytes = 0;
    nftw(sink, p1_add_file, 16, FTW_PHYS);
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", sink);
    if (system(cmd) != 0)
      fprintf(stderr, "bench: P1: %s failed\n", cmd);
    double s2 = (double)(t2 - t0) / 1e6;
    snprintf(fig, sizeof fig, "P1 %s: written", label);
    report(fig, (double)records / s2, "records/s", NULL);
    snprintf(fig, sizeof fig, "P1 %s: written", label);
    report(fig, (double)bytes / s2 / 1e6, "MB/s", "JSON lines, before gzip");
    snprintf(fig, sizeof fig, "P1 %s: files", label);
    report(fig, (double)p1_file_bytes / s2 / 1e6, "MB/s", "gzip'ed");
    return;
  }
}

static void p1_pipelines(void) {
  p1_run("in engine", NULL, opts.workers);
  char so[4200];
  if (!bench_plugin(so, sizeof so, "P1"))
    return;
  uint32_t was = opts.workers;
  opts.workers = 8; /* the setting line names the threads it ran on */
  p1_run("in a worker", so, 8);
  opts.workers = was;
}

/* ---- main
 * ---------------------------------------------------------------------------
 */

/* One key, random for the run, active. */
static journal_crypt *bench_keys(void) {
  unsigned char key[JOURNAL_CRYPT_KEY_BYTES];
  if (RAND_bytes(key, sizeof key) != 1)
    abort();
  journal_crypt *c = journal_crypt_new();
  if (journal_crypt_add(c, "bench", key) != 0 ||
      journal_crypt_activate(c, "bench") != 0)
    abort();
  return c;
}

static int usage(void) {
  fprintf(stderr,
          "usage: duro-bench [--csv] [--quick] [--synchronous full|normal]\n"
          "                  [--workers N] [--sleepers N] [--only "
          "W1,W1T,W1L,R1,F1,F1F,K1,S1,Q1,QK,L1,...]\n"
          "                  [--plugin-workers LIBBENCH.so [--duro PATH]]\n"
          "                  [--dir DIR] [--postgresql CONNINFO|auto]\n"
          "                  [--hosts N (with --postgresql, W1-W3)]\n"
          "                  [--create-on-one (with --hosts: every create "
          "on the first)]\n"
          "                  [--max-spans N (W1T's span buffer)]\n"
          "                  [--encrypt (values encrypted at rest)]\n");
  return 2;
}

int main(int argc, char **argv) {
  snprintf(opts.dir, sizeof opts.dir, "bench-data");
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--csv"))
      opts.csv = 1;
    else if (!strcmp(a, "--quick"))
      opts.quick = 1;
    else if (!strcmp(a, "--synchronous") && v)
      opts.sync_full = strcmp(argv[++i], "normal") != 0;
    else if (!strcmp(a, "--workers") && v)
      opts.workers = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(a, "--sleepers") && v)
      opts.sleepers = (size_t)atol(argv[++i]);
    else if (!strcmp(a, "--only") && v)
      opts.only = argv[++i];
    else if (!strcmp(a, "--dir") && v)
      snprintf(opts.dir, sizeof opts.dir, "%s", argv[++i]);
    else if (!strcmp(a, "--postgresql") && v)
      opts.postgresql = argv[++i];
    else if (!strcmp(a, "--hosts") && v)
      opts.hosts = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(a, "--create-on-one"))
      opts.create_on_one = 1;
    else if (!strcmp(a, "--encrypt"))
      opts.keys = bench_keys();
    else if (!strcmp(a, "--max-spans") && v)
      opts.max_spans = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(a, "--plugin-workers") && v)
      opts.worker_so = argv[++i];
    else if (!strcmp(a, "--duro") && v)
      snprintf(opts.duro, sizeof opts.duro, "%s", argv[++i]);
    else
      return usage();
  }
  if (opts.hosts < 1 || opts.hosts > MAX_HOSTS ||
      (opts.hosts > 1 && !opts.postgresql)) {
    fprintf(stderr,
            "duro-bench: --hosts takes 1 to %d, and more than one "
            "needs --postgresql\n",
            MAX_HOSTS);
    return 2;
  }
  if (opts.postgresql) {
#if DURO_HAVE_PG
    char err[1024];
    if (!strcmp(opts.postgresql, "auto")) {
      if (pg_cluster_start(&cluster, err, sizeof err) != 0) {
        fprintf(stderr, "duro-bench: %s\n", err);
        return 1;
      }
      opts.postgresql = cluster.conninfo;
      /* The server is no child of ours: stopped on every way out. */
      atexit(stop_cluster);
    }
#else
    fprintf(stderr, "duro-bench: --postgresql is not available: this "
                    "duro-bench was built without libpq\n");
    return 2;
#endif
  }
  worker_so_now = opts.worker_so;
  if ((opts.worker_so || wants("W6") || wants("W8") || wants("P1")) &&
      !opts.duro[0])
    /* build/bench/duro-bench -> build/host/duro */
    snprintf(opts.duro, sizeof opts.duro, "%s/../host/duro", self_dir());
  mkdir(opts.dir, 0755);
  duro_api_ptr_ = duro_host_api();
  setenv("DURO_LOG", "warn", 0);
  if (opts.csv)
    printf("figure,value,unit,setting\n");
  if (wants("W1"))
    w1_throughput();
  if (wants("W1T"))
    w1_traced();
  if (wants("W1L"))
    w1_tailed();
  if (wants("R1"))
    r1_rate_held();
  if (wants("F1"))
    f1_run("F1", "fair");
  if (wants("F1F"))
    f1_run("F1F", "fifo");
  if (wants("K1"))
    k1_keys();
  if (wants("S1"))
    s1_resource();
  if (wants("W2"))
    w2_latency();
  if (wants("W3"))
    w3_sleepers();
  if (wants("W4"))
    w4_lateness();
  if (wants("W5"))
    w5_events();
  if (wants("W6"))
    w6_io();
  if (wants("W7"))
    w7_children();
  if (wants("H1"))
    h1_spread();
  if (wants("W8"))
    w8_parallel();
  if (wants("R"))
    r_recovery();
  if (wants("Q1")) {
    q1_push();
    q1_queue();
  }
  if (wants("QK")) {
    qk_keys(0); /* the lease's own cost, for scale */
    qk_keys(opts.quick ? 1000 : 10000);
  }
  if (wants("P1"))
    p1_pipelines();
  if (wants("L1"))
    l1_listing();
  if (wants("KR"))
    kr_rotation();
  if (wants("B1"))
    b1_bulk();
  rmdir(opts.dir);
  return any_failed;
}
