/* host.c — the engine process of `duro run`, and `duro check`.
 *
 * One libuv loop owns the signals and HTTP; it never touches SQLite: the
 * engine's own threads run activations, poll the wake index, retry failed
 * writes and sweep retention (engine/scheduler.c), and HTTP requests run
 * on libuv's thread pool.
 *
 * The process is forked by the supervisor (supervisor.h), which keeps the
 * listening socket, the crash ledger and the storage lock across engine
 * restarts.  A stop (SIGTERM, SIGINT) gives running attempts
 * engine.shutdown_grace, then exits anyway; a second SIGINT exits at
 * once.  SIGHUP reloads the config, the plugins and http.tls's
 * certificate; it is never fatal. */
#include "host.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "api.h"
#include "backend.h"
#include "breaker.h"
#include "cfgdiff.h"
#include "clock.h"
#include "config.h"
#include "engine.h"
#include "errlist.h"
#include "error.h"
#include "http.h"
#include "journal_crypt.h"
#include "ledger.h"
#include "loader.h"
#include "log.h"
#include "pipeline.h"
#include "probe.h"
#include "queue.h"
#include "reload.h"
#include "resources.h"
#include "storage_keys.h"
#include "supervisor.h"
#include "tail.h"
#include "telemetry.h"
#include "trigger.h"
#include "util.h"
#include "worker.h"

typedef struct host {
  const config *cfg;
  duro_engine *engine;
  http_server *http;
  reloader *plugins;
  worker_pool *workers; /* the plugins' worker processes */
  breaker *breaker;     /* holds builds that crash too often */
  journal_crypt *keys;  /* storage.encryption's, or NULL */
  ledger *ledger;
  uv_timer_t gc;
  uv_work_t gc_work;
  int gc_running;
  uv_loop_t loop;
  uv_signal_t sigint, sigterm, sighup;
  int sigints;
} host;

/* Loads plugin i of the config and checks that it exports each
 * workflow's class.  Reports each problem as file:line:column and
 * returns their number; *out is the plugin, or NULL. */
static int load_plugin(const config *cfg, size_t i, ledger_slot *slot,
                       loader_plugin **out) {
  const config_plugin *p = &cfg->plugins[i];
  char err[1024];
  int problems = 0;
  *out = NULL;
  /* Should a constructor or init crash, the ledger names the plugin. */
  if (slot) {
    ledger_copy(slot->plugin, sizeof slot->plugin, p->name);
    ledger_set_state(slot, LEDGER_LOADING);
  }
  int rc = loader_open(p->name, p->path, duro_host_api(), out, err, sizeof err);
  if (slot)
    ledger_set_state(slot, LEDGER_IDLE);
  if (rc) {
    fprintf(stderr, "%s:%d:%d: %s\n", cfg->file, p->pos.line, p->pos.column,
            err);
    return 1;
  }
  for (size_t k = 0; k < p->n_workflows; k++) {
    const config_workflow *w = &p->workflows[k];
    if (!w->class_name || loader_find_workflow(*out, w->class_name))
      continue; /* a refused entry's error is said already */
    loader_missing_class(*out, p->name, p->path, w->class_name, err,
                         sizeof err);
    fprintf(stderr, "%s:%d:%d: workflow \"%s\": %s\n", cfg->file, w->pos.line,
            w->pos.column, w->name, err);
    problems++;
  }
  return problems;
}

/* ---- duro check ---------------------------------------------------------- */

/* Loads plugin i in a child process: its problems are printed there; a
 * crash or exit() while loading is reported here, and so is a load that
 * does not return within the time `duro run` gives it, or that forks
 * (probe.h).  Returns the number of problems. */
static int check_plugin(const config *cfg, size_t i) {
  const config_plugin *p = &cfg->plugins[i];
  int pipefd[2];
  if (pipe(pipefd) != 0)
    return 1;
  fflush(NULL);
  pid_t self = getpid(), pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    loader_probe_child(self);
    close(pipefd[0]);
    loader_plugin *lp;
    unsigned char problems = (unsigned char)load_plugin(cfg, i, NULL, &lp);
    loader_close(lp);
    /* Reaching here is what proves the load did not end the process. */
    if (write(pipefd[1], &problems, 1) != 1)
      _exit(1);
    _exit(0);
  }
  close(pipefd[1]);
  char how[256];
  loader_probe lp = {0};
  if (pid > 0) {
    setpgid(pid, pid); /* also here: the child may not have run yet */
    loader_probe_wait(pid, pipefd[0], LOADER_PROBE_TIMEOUT_MS, &lp);
  } else {
    close(pipefd[0]);
  }
  if (pid < 0)
    snprintf(how, sizeof how, "could not be checked (fork: %s)",
             strerror(errno));
  else if (loader_probe_why(&lp, how, sizeof how))
    ;
  else if (lp.got == 1)
    return (unsigned char)lp.out[0];
  else if (WIFSIGNALED(lp.status))
    snprintf(how, sizeof how, "crashed while loading (signal %d, SIG%s)",
             WTERMSIG(lp.status), sigabbrev_np(WTERMSIG(lp.status)));
  else
    snprintf(how, sizeof how, "exited with status %d while loading",
             WEXITSTATUS(lp.status));
  fprintf(stderr, "%s:%d:%d: plugin \"%s\" (%s): %s\n", cfg->file, p->pos.line,
          p->pos.column, p->name, p->path, how);
  return 1;
}

int host_check(const char *config_path) {
  char err[1024];
  errlist errs = {0};
  /* A broken file's plugins are loaded all the same, so that one run
   * says everything: every error of the file, one per line in file
   * order, then each plugin's, then how many in all. */
  config *cfg = config_load_partial(config_path, &errs);
  size_t config_errors = errlist_total(&errs);
  errlist_print(&errs, stderr);
  errlist_clear(&errs);
  if (!cfg) {
    errlist_print_count(stderr, config_errors, config_path);
    return 1;
  }
  /* A numbered weekday field is valid but easy to misread (1 = Sunday
   * here, Monday in a crontab): say what it means, without failing. */
  for (size_t i = 0; i < cfg->n_plugins; i++)
    for (size_t k = 0; k < cfg->plugins[i].n_crons; k++) {
      const config_cron *c = &cfg->plugins[i].crons[k];
      if (c->weekday_note)
        fprintf(stderr, "note: %s:%d:%d: %s\n", cfg->file, c->schedule_pos.line,
                c->schedule_pos.column, c->weekday_note);
    }
  int problems = (int)config_errors;
  for (size_t i = 0; i < cfg->n_plugins; i++)
    if (cfg->plugins[i].name && cfg->plugins[i].path)
      problems += check_plugin(cfg, i);
  if (!config_errors && http_check(cfg, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    problems++;
  }
  journal_crypt *keys = NULL;
  if (!config_errors && storage_keys_load(cfg, &keys, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    problems++;
  }
  journal_crypt_free(keys);
  if (!problems)
    printf("%s: ok (%zu plugin%s)\n", config_path, cfg->n_plugins,
           cfg->n_plugins == 1 ? "" : "s");
  else
    errlist_print_count(stderr, (size_t)problems, config_path);
  config_free(cfg);
  return problems ? 1 : 0;
}

/* ---- the loop -------------------------------------------------------------
 */

/* Builds no instance needs are unloaded every few seconds, off the loop
 * (the check reads the journal). */
static void gc_work(uv_work_t *w) { reload_gc(((host *)w->data)->plugins); }

static void gc_done(uv_work_t *w, int status) {
  (void)status;
  ((host *)w->data)->gc_running = 0;
}

static void on_gc(uv_timer_t *t) {
  host *h = t->loop->data;
  if (h->gc_running)
    return;
  h->gc_work.data = h;
  if (uv_queue_work(t->loop, &h->gc_work, gc_work, gc_done) == 0)
    h->gc_running = 1;
}

static void on_signal(uv_signal_t *s, int signum) {
  host *h = s->loop->data;
  if (signum == SIGHUP) {
    log_info("SIGHUP: reloading the config file and every plugin");
    reload_queue(h->plugins, s->loop, NULL);
    http_reload_tls(h->http);
    return;
  }
  if (signum == SIGINT && ++h->sigints > 1) {
    log_warn("second SIGINT: exiting now; running attempts run again after "
             "restart");
    _exit(1);
  }
  log_info("signal %d: stopping", signum);
  http_stop(h->http); /* no new connections; answered ones drain below */
  uv_stop(s->loop);
}

static void close_handle(uv_handle_t *hd, void *arg) {
  (void)arg;
  if (!uv_is_closing(hd))
    uv_close(hd, NULL);
}

/* Each HTTP connection is a descriptor: take all the kernel allows. */
static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

/* Tells the supervisor the plugins are loaded and waits for the storage
 * lock it hands over; -1 when it refused (it says why) or is gone. */
static int wait_for_lock(int ctl_fd, int *lock_fd) {
  char msg;
  if (supervisor_send(ctl_fd, 'L', -1) != 0 ||
      supervisor_recv(ctl_fd, &msg, lock_fd) != 0 || msg != 'G')
    return -1;
  return 0;
}

/* ---- opening the journal -------------------------------------------------
 * A host may start before its database server (boot order, a server
 * restarting): while the server cannot be reached (STORE_UNREACHABLE),
 * the open is tried again with a back-off (0.1 s doubling to 5 s), each
 * failure logged, for storage.connect_timeout.  A refusal (a wrong
 * password, an unknown database) will not mend itself: it fails at once.
 * Meanwhile HTTP connections wait in the listening socket's backlog, and
 * a SIGTERM ends the process (its handler is not installed yet). */

#define CONNECT_RETRY_FIRST_MS 100
#define CONNECT_RETRY_MAX_MS 5000

static int open_engine(host *h, const duro_engine_options *opt, char *err,
                       size_t errlen) {
  int64_t timeout = h->cfg->storage.connect_timeout_ms;
  int64_t give_up = clock_mono_ms() + timeout, delay = CONNECT_RETRY_FIRST_MS;
  for (;;) {
    int rc = duro_engine_open(opt, &h->engine, err, errlen);
    if (rc != STORE_UNREACHABLE)
      return rc;
    int64_t left = give_up - clock_mono_ms();
    if (left <= 0) {
      size_t n = strlen(err);
      snprintf(err + n, errlen - n,
               " (gave up after %lld %s: storage.connect_timeout)",
               (long long)(timeout % 1000 ? timeout : timeout / 1000),
               timeout % 1000 ? "ms" : "s");
      return rc;
    }
    int64_t wait = delay < left ? delay : left;
    log_warn("%s (trying again in %lld ms)", err, (long long)wait);
    struct timespec ts = {wait / 1000, (long)(wait % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
      ;
    delay = delay * 2 < CONNECT_RETRY_MAX_MS ? delay * 2 : CONNECT_RETRY_MAX_MS;
  }
}

static void start_handles(host *h) {
  uv_signal_init(&h->loop, &h->sigint);
  uv_signal_init(&h->loop, &h->sigterm);
  uv_signal_init(&h->loop, &h->sighup);
  uv_signal_start(&h->sigint, on_signal, SIGINT);
  uv_signal_start(&h->sigterm, on_signal, SIGTERM);
  uv_signal_start(&h->sighup, on_signal, SIGHUP);
  uv_timer_init(&h->loop, &h->gc);
  uv_timer_start(&h->gc, on_gc, 10000, 10000);
  reload_watch(h->plugins, &h->loop);
}

/* Lets the engine's running attempts finish within shutdown_grace; past
 * it, exits without waiting (they run again after a restart). */
static void stop_engine(host *h) {
  int64_t grace = h->cfg->engine.shutdown_grace_ms;
  uint32_t left = duro_engine_stop(h->engine, grace);
  if (left) {
    log_warn("engine.shutdown_grace (%lld ms) passed with %u attempt(s) or "
             "queue batch(es) still running: exiting anyway; they run again "
             "after restart",
             (long long)grace, left);
    _exit(0);
  }
  duro_engine_close(h->engine);
  h->engine = NULL;
}

/* Every queue the config names: producers' and dead-letter queues with
 * no retry limit (their messages, out of attempts already, must survive a
 * pull over HTTP), then each consumer's queue with its consumer's
 * options. */
static int register_queues(const config *cfg, duro_engine *e) {
  int rc = 0;
  const duro_queue_options unconsumed = {.max_retries =
                                             DURO_QUEUE_NO_RETRY_LIMIT};
  for (size_t i = 0; i < cfg->n_plugins && !rc; i++) {
    const config_plugin *pl = &cfg->plugins[i];
    for (size_t k = 0; k < pl->n_producers && !rc; k++)
      if (!duro_queue_exists(e, pl->producers[k].queue))
        rc = duro_queue_register(e, pl->producers[k].queue, &unconsumed);
    for (size_t k = 0; k < pl->n_consumers && !rc; k++)
      if (pl->consumers[k].dead_letter_queue &&
          !duro_queue_exists(e, pl->consumers[k].dead_letter_queue))
        rc = duro_queue_register(e, pl->consumers[k].dead_letter_queue,
                                 &unconsumed);
  }
  for (size_t i = 0; i < cfg->n_plugins && !rc; i++)
    for (size_t k = 0; k < cfg->plugins[i].n_consumers && !rc; k++) {
      const config_consumer *c = &cfg->plugins[i].consumers[k];
      duro_queue_options o = {.max_retries = (int32_t)c->max_retries,
                              .retry_delay_ms = c->retry_delay_ms,
                              .dead_letter = c->dead_letter_queue,
                              .retention_ms = c->message_retention_ms};
      rc = duro_queue_register(e, c->queue, &o);
      if (!rc && c->workflow) /* the no-code consumer: the engine runs it */
        rc = duro_queue_consume_workflow(e, c->queue, c->workflow, c->id_from,
                                         c->max_batch_size);
    }
  /* duro_env_queue(env, BINDING) in the plugins' code */
  for (size_t i = 0; i < cfg->n_plugins && !rc; i++)
    for (size_t k = 0; k < cfg->plugins[i].n_producers && !rc; k++)
      rc = duro_queue_bind(e, cfg->plugins[i].producers[k].binding,
                           cfg->plugins[i].producers[k].queue);
  return rc;
}

/* The value of environment variable `name`, which an s3 sink's key
 * names; NULL (said on stderr) when it is not set or empty. */
static const char *s3_key(const config_pipeline *c, const char *key,
                          const char *name) {
  const char *v = getenv(name);
  if (v && *v)
    return v;
  fprintf(stderr,
          "duro: pipeline %s: environment variable %s (sink.s3.%s) is not "
          "set\n",
          c->name, name, key);
  return NULL;
}

/* Every shared resource the config declares (resources:), which the
 * steps naming one claim (resources.h). */
static int register_resources(const config *cfg, duro_engine *e) {
  int rc = 0;
  for (size_t i = 0; i < cfg->n_resources && !rc; i++) {
    const config_resource *c = &cfg->resources[i];
    duro_resource_options o = {.concurrency = c->concurrency,
                               .rate_limit = c->rate.limit,
                               .rate_period_ms = c->rate.period_ms,
                               .rate_burst = c->rate.burst};
    rc = duro_resource_register(e, c->name, &o);
  }
  return rc;
}

/* Every pipeline the config names, with its sink's options: what
 * POST /pipelines/{name} sends to and the flusher writes out.  An s3
 * sink's keys are read here, from the variables the config names. */
static int register_pipelines(const config *cfg, duro_engine *e) {
  int rc = 0;
  for (size_t i = 0; i < cfg->n_pipelines && !rc; i++) {
    const config_pipeline *c = &cfg->pipelines[i];
    const char *access = NULL, *secret = NULL;
    if (c->s3.bucket) {
      access = s3_key(c, "access_key_env", c->s3.access_key_env);
      secret = s3_key(c, "secret_key_env", c->s3.secret_key_env);
      if (!access || !secret)
        return DURO_E_CONFIG;
    }
    duro_pipeline_options o = {
        .dir = c->path,
        .s3 = {.endpoint = c->s3.endpoint,
               .bucket = c->s3.bucket,
               .prefix = c->s3.prefix,
               .region = c->s3.region,
               .access_key = access,
               .secret_key = secret},
        .partition = c->partition,
        .format = c->format == CONFIG_FORMAT_CSV ? DURO_PIPELINE_CSV
                                                 : DURO_PIPELINE_JSONL,
        .columns = (const char *const *)c->columns,
        .n_columns = c->n_columns,
        .compression =
            c->compression == CONFIG_COMPRESSION_GZIP   ? DURO_PIPELINE_GZIP
            : c->compression == CONFIG_COMPRESSION_ZSTD ? DURO_PIPELINE_ZSTD
                                                        : DURO_PIPELINE_NONE,
        .roll_size = c->roll_size,
        .roll_interval_ms = c->roll_interval_ms,
        .max_backlog = c->max_backlog,
        .max_retry_delay_ms = c->max_retry_delay_ms,
    };
    rc = duro_pipeline_register(e, c->name, &o);
    if (!rc) /* duro_env_pipeline(env, BINDING) in the plugins' code */
      rc = duro_pipeline_bind(e, c->binding, c->name);
  }
  return rc;
}

/* Every cron trigger of every plugin; a numbered weekday field is noted
 * in the log (1 = Sunday here, unlike a crontab). */
static int register_crons(const config *cfg, duro_engine *e) {
  char err[512];
  for (size_t i = 0; i < cfg->n_plugins; i++)
    for (size_t k = 0; k < cfg->plugins[i].n_crons; k++) {
      const config_cron *c = &cfg->plugins[i].crons[k];
      duro_cron_spec spec = cfgdiff_cron_spec(&cfg->plugins[i], c);
      if (duro_cron_register(e, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "%s:%d:%d: %s\n", cfg->file, c->pos.line, c->pos.column,
                err);
        return DURO_E_INVALID_ARGUMENT;
      }
      if (c->weekday_note)
        log_info("note: %s:%d:%d: %s", cfg->file, c->schedule_pos.line,
                 c->schedule_pos.column, c->weekday_note);
    }
  return 0;
}

/* Another host took over this one's instances (its lease ran out: it was
 * cut off from the database, or stalled): nothing it still runs can be
 * written.  Its supervisor starts a new engine, which joins afresh. */
/* This host took over instances of a stopped host: the builds they are
 * pinned to are loaded (fetched from the database if need be) before they
 * run. */
static void took_over(void *ctx) { reload_load_pinned(((host *)ctx)->plugins); }

/* An instance restarted from a step (or resumed) needs a build its
 * workflow let go of. */
static int load_build(void *ctx, const char *workflow, const char *hash,
                      char *err, size_t errlen) {
  return reload_give_build(((host *)ctx)->plugins, workflow, hash, err, errlen);
}

static void build_crashed(void *ctx, const char *workflow, const char *build,
                          uint64_t attempts) {
  breaker_crashed(((host *)ctx)->breaker, workflow, build, attempts);
}

static void build_newest(void *ctx, const char *plugin, const char *hash) {
  breaker_newest(((host *)ctx)->breaker, plugin, hash);
}

static void lease_lost(void *ctx) {
  (void)ctx;
  log_error("exiting: the engine restarts as a new host");
  _exit(75);
}

int host_engine_main(const config *cfg, int listen_fd, ledger *ledger,
                     int ctl_fd) {
  char err[1024];
  host h = {.cfg = cfg, .ledger = ledger};
  int code = 1, rc, lock_fd = -1;
  raise_fd_limit();
  ledger_install_crash_handlers(ledger);
  /* HTTP requests run their engine calls on libuv's pool: enough threads
   * that concurrent writes share group commits (read once, at first use). */
  setenv("UV_THREADPOOL_SIZE", "16", 0);
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  self[n > 0 ? n : 0] = '\0';
  h.plugins = reload_new(cfg, ledger, self);
  /* Plugin code runs in worker processes of this binary (worker.h). */
  /* The running binary itself, even once a package upgrade replaced or
   * removed its file (its path then reads "... (deleted)"). */
  h.workers = worker_pool_create("/proc/self/exe", cfg->http.token_env);
  worker_pool_set_max_result(h.workers, cfg->engine.max_step_result);
  reload_set_workers(h.plugins, h.workers);
  h.breaker = breaker_new(cfg);
  breaker_set_rollback(h.breaker, reload_rollback, h.plugins);
  reload_on_newest(h.plugins, build_newest, &h);
  int problems = reload_load_initial(h.plugins);
  if (problems != 0) {
    errlist_print_count(stderr, (size_t)problems, cfg->file);
    goto out;
  }
  if (wait_for_lock(ctl_fd, &lock_fd) != 0)
    goto out;
  uv_loop_init(&h.loop);
  h.loop.data = &h;
  if (http_start(&h.loop, NULL, cfg, listen_fd, &h.http, err, sizeof err) !=
      0) {
    fprintf(stderr, "%s\n", err);
    goto stop;
  }
  if (storage_keys_load(cfg, &h.keys, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    goto stop;
  }
  duro_engine_options opt = {
      .crypt = h.keys,
      .db_path = cfg->storage.path,
      .synchronous_full = cfg->storage.synchronous_full,
      .join_store = 1,
      .lease_ms = cfg->storage.lease_ms,
      .on_lease_lost = lease_lost,
      .on_takeover = took_over,
      .load_build = load_build,
      .on_build_crash = build_crashed,
      .ctx = &h,
      .workers = cfg->engine.workers ? cfg->engine.workers : 64,
      .max_step_result = cfg->engine.max_step_result,
      .max_instance_state = cfg->engine.max_instance_state,
      .ledger = ledger,
      .max_crashes = cfg->engine.max_crashes,
      .max_queued = (size_t)cfg->engine.max_queued,
  };
  if (cfg->storage.postgresql) {
    opt.backend = store_backend_postgresql();
    opt.db_path = cfg->storage.postgresql;
  }
  if (open_engine(&h, &opt, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    goto stop;
  }
  if ((rc = register_queues(cfg, h.engine)) != 0) {
    fprintf(stderr, "duro: cannot register the queues: %s\n", duro_err_str(rc));
    goto stop;
  }
  if ((rc = register_pipelines(cfg, h.engine)) != 0) {
    fprintf(stderr, "duro: cannot register the pipelines: %s\n",
            duro_err_str(rc));
    goto stop;
  }
  if ((rc = register_resources(cfg, h.engine)) != 0) {
    fprintf(stderr, "duro: cannot register the resources: %s\n",
            duro_err_str(rc));
    goto stop;
  }
  if (register_crons(cfg, h.engine) != 0)
    goto stop;
  if (cfg->telemetry.otlp_endpoint) {
    duro_telemetry_options t = {.otlp_endpoint = cfg->telemetry.otlp_endpoint,
                                .service_name = cfg->telemetry.service_name,
                                .sample = cfg->telemetry.sample / 1e6,
                                .max_spans = cfg->telemetry.max_spans,
                                .interval_ms = cfg->telemetry.interval_ms};
    if ((rc = duro_telemetry_enable(h.engine, &t)) != 0) {
      fprintf(stderr, "duro: cannot export traces: %s\n", duro_err_str(rc));
      goto stop;
    }
  }
  duro_tail_options tail = {.buffer = cfg->tail.buffer,
                            .buffer_bytes = cfg->tail.buffer_bytes,
                            .max_batch = cfg->tail.max_batch_size,
                            .batch_timeout_ms = cfg->tail.max_batch_timeout_ms,
                            .timeout_ms = cfg->tail.timeout_ms};
  duro_tail_configure(h.engine, &tail); /* before the consumers, below */
  reload_attach(h.plugins, h.engine);
  http_attach(h.http, h.engine);
  http_attach_plugins(h.http, h.plugins);
  http_attach_breaker(h.http, h.breaker);
  start_handles(&h);
  if ((rc = duro_engine_start(h.engine)) != 0) {
    fprintf(stderr, "duro: cannot start the engine: %s\n", duro_err_str(rc));
    goto stop;
  }
  breaker_start(h.breaker, h.engine);
  /* Not the connection string: it may hold a password. */
  log_info("ready: %zu plugin(s), storage %s (synchronous=%s), http on port %d",
           cfg->n_plugins,
           cfg->storage.postgresql ? "PostgreSQL" : cfg->storage.path,
           cfg->storage.synchronous_full ? "full" : "normal",
           http_port(h.http));
  supervisor_send(ctl_fd, 'R', -1);
  uv_run(&h.loop, UV_RUN_DEFAULT);
  code = 0;

stop:
  /* Answers already being written go out; H2O then closes its own handles
   * (it must do so before the walk below closes the rest). */
  http_stop(h.http);
  uv_run(&h.loop, UV_RUN_NOWAIT);
  while (http_in_flight(h.http) > 0) /* answers still on the pool */
    uv_run(&h.loop, UV_RUN_ONCE);
  http_free(h.http);
  h.http = NULL;
  /* A build collection or a reload on the pool uses the engine: let it
   * finish.  The watch stops first, so no new reload is queued. */
  reload_unwatch(h.plugins);
  if (h.gc.loop)
    uv_timer_stop(&h.gc);
  while (h.gc_running || reload_queued(h.plugins))
    uv_run(&h.loop, UV_RUN_ONCE);
  /* Workers finish their current step, then suspend at the boundary. */
  if (h.engine)
    stop_engine(&h);
  uv_walk(&h.loop, close_handle, NULL);
  uv_run(&h.loop, UV_RUN_DEFAULT);
  uv_loop_close(&h.loop);
out:
  reload_free(h.plugins);
  worker_pool_free(h.workers); /* no activation runs any more */
  breaker_free(h.breaker);
  journal_crypt_free(h.keys); /* the engine that used them is closed */
  if (lock_fd >= 0)
    close(lock_fd);
  close(ctl_fd);
  return code;
}
