/* host.c — wires a config to a running engine.
 *
 * One libuv loop owns the signals and the wake timer; activations run on
 * the engine's worker threads and never on the loop.  The timer is armed
 * for the earliest wake time in the journal (capped at one second, a
 * safety net), and re-armed through a uv_async whenever an activation
 * stores an earlier one. */
#include "host.h"

#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <uv.h>

#include "config.h"
#include "engine.h"
#include "error.h"
#include "http.h"
#include "loader.h"
#include "log.h"
#include "util.h"

typedef struct host {
  config *cfg;
  duro_engine *engine;
  http_server *http;
  loader_plugin **plugins;
  size_t n_plugins;
  uv_loop_t loop;
  uv_timer_t timer;
  uv_timer_t sweeper;
  uv_async_t rearm;
  uv_signal_t sigint, sigterm;
} host;

/* Creates the directories above `path` (like mkdir -p of its dirname). */
static int make_parent_dirs(const char *path) {
  char *copy = xstrdup(path);
  char *dir = dirname(copy);
  int rc = 0;
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
      rc = -1;
    *p = '/';
  }
  if (strcmp(dir, ".") != 0 && mkdir(dir, 0755) != 0 && errno != EEXIST)
    rc = -1;
  free(copy);
  return rc;
}

/* Loads every plugin and checks that it exports each workflow's class.
 * Reports each problem as file:line:column and returns their number. */
static int load_plugins(host *h) {
  int problems = 0;
  const config *cfg = h->cfg;
  h->plugins = xcalloc(cfg->n_plugins ? cfg->n_plugins : 1, sizeof *h->plugins);
  for (size_t i = 0; i < cfg->n_plugins; i++) {
    const config_plugin *p = &cfg->plugins[i];
    char err[1024];
    loader_plugin *lp = NULL;
    if (loader_open(p->name, p->path, duro_host_api(), &lp, err, sizeof err)) {
      fprintf(stderr, "%s:%d:%d: %s\n", cfg->file, p->pos.line, p->pos.column,
              err);
      problems++;
      continue;
    }
    h->plugins[h->n_plugins++] = lp;
    for (size_t k = 0; k < p->n_workflows; k++) {
      const config_workflow *w = &p->workflows[k];
      duro_run_fn run = loader_find_workflow(lp, w->class_name);
      if (!run) {
        fprintf(stderr,
                "%s:%d:%d: workflow \"%s\": plugin \"%s\" (%s) exports no "
                "class \"%s\"\n",
                cfg->file, w->pos.line, w->pos.column, w->name, p->name,
                p->path, w->class_name);
        problems++;
        continue;
      }
    }
  }
  return problems;
}

/* Registers every workflow of the loaded plugins (all of them loaded:
 * load_plugins found no problem, so plugins[i] is config plugin i). */
static void register_workflows(host *h) {
  for (size_t i = 0; i < h->cfg->n_plugins; i++) {
    const config_plugin *p = &h->cfg->plugins[i];
    for (size_t k = 0; k < p->n_workflows; k++) {
      const config_workflow *w = &p->workflows[k];
      duro_workflow_limits lim = {.retention_ms = w->retention_ms,
                                  .max_steps = w->max_steps,
                                  .concurrency = w->concurrency};
      /* names are unique (config.c checked), so this cannot fail */
      duro_engine_register(h->engine, w->name, w->binding,
                           loader_find_workflow(h->plugins[i], w->class_name),
                           &lim, loader_build(h->plugins[i]));
    }
  }
}

static void unload_plugins(host *h) {
  for (size_t i = 0; i < h->n_plugins; i++)
    loader_close(h->plugins[i]);
  free(h->plugins);
  h->plugins = NULL;
  h->n_plugins = 0;
}

int host_check(const char *config_path) {
  char err[1024];
  host h = {0};
  h.cfg = config_load(config_path, err, sizeof err);
  if (!h.cfg) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  int problems = load_plugins(&h);
  unload_plugins(&h);
  if (http_check(h.cfg, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    problems++;
  }
  if (!problems)
    printf("%s: ok (%zu plugin%s)\n", config_path, h.cfg->n_plugins,
           h.cfg->n_plugins == 1 ? "" : "s");
  config_free(h.cfg);
  return problems ? 1 : 0;
}

static void on_timer(uv_timer_t *t);

static void arm_timer(host *h) {
  duro_engine_poll_due(h->engine);
  int64_t next = duro_engine_next_wake(h->engine);
  int64_t now = duro_clock_now(duro_clock_real());
  int64_t delay = next == INT64_MAX ? 1000 : next - now;
  if (delay < 0)
    delay = 0;
  if (delay > 1000)
    delay = 1000;
  uv_timer_start(&h->timer, on_timer, (uint64_t)delay, 0);
}

static void on_timer(uv_timer_t *t) { arm_timer(t->loop->data); }

static void on_rearm(uv_async_t *a) { arm_timer(a->loop->data); }

/* Retention: ended instances past their retention are deleted, in bounded
 * transactions, once a minute. */
static void on_sweep(uv_timer_t *t) {
  host *h = t->loop->data;
  size_t n = 0;
  if (duro_engine_sweep(h->engine, &n) != 0)
    log_error("retention sweep failed");
  else if (n)
    log_info("retention: deleted %zu ended instance(s)", n);
}

static void wake_changed(void *ctx) { uv_async_send(&((host *)ctx)->rearm); }

static void on_signal(uv_signal_t *s, int signum) {
  host *h = s->loop->data;
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

int host_run(const char *config_path) {
  char err[1024];
  host h = {0};
  int code = 1, rc;
  raise_fd_limit();
  /* HTTP requests run their engine calls on libuv's pool: enough threads
   * that concurrent writes share group commits (read once, at first use). */
  setenv("UV_THREADPOOL_SIZE", "16", 0);
  h.cfg = config_load(config_path, err, sizeof err);
  if (!h.cfg) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  /* Everything that can refuse the config runs before the store is
   * created or opened: plugins, the http policy, the bind itself. */
  if (load_plugins(&h) != 0)
    goto out;
  if (http_check(h.cfg, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    goto out;
  }
  uv_loop_init(&h.loop);
  h.loop.data = &h;
  if (http_start(&h.loop, NULL, h.cfg, &h.http, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    goto stop;
  }
  if (make_parent_dirs(h.cfg->storage.path) != 0) {
    fprintf(stderr,
            "%s: cannot create the directory for storage.path \"%s\": "
            "%s\n",
            config_path, h.cfg->storage.path, strerror(errno));
    goto stop;
  }
  duro_engine_options opt = {
      .db_path = h.cfg->storage.path,
      .synchronous_full = h.cfg->storage.synchronous_full,
      .workers = h.cfg->engine.workers ? h.cfg->engine.workers : 64,
      .max_step_result = h.cfg->engine.max_step_result,
      .max_instance_state = h.cfg->engine.max_instance_state,
      .on_wake_change = wake_changed,
      .ctx = &h,
  };
  if (duro_engine_open(&opt, &h.engine, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    goto stop;
  }
  register_workflows(&h);
  http_attach(h.http, h.engine);

  uv_timer_init(&h.loop, &h.timer);
  uv_timer_init(&h.loop, &h.sweeper);
  uv_async_init(&h.loop, &h.rearm, on_rearm);
  uv_signal_init(&h.loop, &h.sigint);
  uv_signal_init(&h.loop, &h.sigterm);
  uv_signal_start(&h.sigint, on_signal, SIGINT);
  uv_signal_start(&h.sigterm, on_signal, SIGTERM);

  if ((rc = duro_engine_start(h.engine)) != 0) {
    fprintf(stderr, "duro: cannot start the engine: %s\n", duro_err_str(rc));
    goto stop;
  }
  log_info("ready: %zu plugin(s), storage %s (synchronous=%s), http on port %d",
           h.n_plugins, h.cfg->storage.path,
           h.cfg->storage.synchronous_full ? "full" : "normal",
           http_port(h.http));
  arm_timer(&h);
  uv_timer_start(&h.sweeper, on_sweep, 5000, 60000);
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
  /* Workers finish their current step, then suspend at the boundary. */
  duro_engine_close(h.engine);
  h.engine = NULL;
  uv_walk(&h.loop, close_handle, NULL);
  uv_run(&h.loop, UV_RUN_DEFAULT);
  uv_loop_close(&h.loop);
out:
  unload_plugins(&h);
  config_free(h.cfg);
  return code;
}
