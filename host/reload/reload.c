/* reload.c — plugin builds in the engine process (reload.h).
 *
 * Each config plugin has its loaded builds, oldest first, the newest last.
 * The engine keeps the run() pointers of each workflow's builds
 * (engine/builds.c); this module owns the code they point into, and only
 * unloads a build after the engine agreed to retire it from every
 * workflow of the plugin. */
#include "reload.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "cfgdiff.h"
#include "clock.h"
#include "error.h"
#include "ledger.h"
#include "loader.h"
#include "log.h"
#include "probe.h"
#include "queue.h"
#include "store.h"
#include "trigger.h"
#include "util.h"

extern char **environ;

#define DEBOUNCE_MS 250

typedef struct build {
  char hash[17];
  loader_plugin *lp;
  int64_t loaded_ms;
} build;

typedef struct plugin_state {
  reloader *r;
  const config_plugin *cfg;
  build *builds; /* oldest first; the last is the newest */
  size_t n;
  /* Before reload_attach: the private copy loaded, kept open (its file is
   * already deleted, so a start that never finishes leaves nothing). */
  int initial_fd;
  uv_fs_event_t watch;
  uv_timer_t debounce;
  int watching;
  char *watch_dir; /* the directory watched (the loop's thread only) */
} plugin_state;

struct reloader {
  const config *cfg;
  ledger *ledger;
  char *self;
  duro_engine *e;
  char *store_dir;
  pthread_mutex_t mu;
  plugin_state *plugins;
  int queued;         /* reload jobs on the pool (the loop's thread only) */
  int restarted;      /* an engine died before this one (the ledger says so) */
  int64_t next_prune; /* clock_mono_ms: the shared builds' next prune (mu) */
  /* The configs a reload read and made the running one (r->cfg is the
   * newest): kept to the end, since what was handed out before (names,
   * paths) points into them. */
  config **owned;
  size_t n_owned;
  /* Tells the loop a plugin's path moved to another directory: its watch
   * follows (rewatch_on, under mu: the handle is open). */
  uv_async_t rewatch;
  int rewatch_on;
};

reloader *reload_new(const config *cfg, ledger *l, const char *self) {
  reloader *r = xcalloc(1, sizeof *r);
  r->cfg = cfg;
  r->ledger = l;
  r->restarted = l && ledger_last_death(l, NULL) != LEDGER_DEATH_NONE;
  r->self = xstrdup(self);
  r->store_dir = build_store_dir(cfg->storage.path);
  pthread_mutex_init(&r->mu, NULL);
  r->plugins = xcalloc(cfg->n_plugins ? cfg->n_plugins : 1, sizeof *r->plugins);
  for (size_t i = 0; i < cfg->n_plugins; i++) {
    r->plugins[i].r = r;
    r->plugins[i].cfg = &cfg->plugins[i];
    r->plugins[i].initial_fd = -1;
  }
  return r;
}

/* The state of config plugin c (of the running config: a reload may
 * have put the plugins in another order). */
static plugin_state *state_of(reloader *r, const config_plugin *c) {
  for (size_t i = 0; i < r->cfg->n_plugins; i++)
    if (r->plugins[i].cfg == c)
      return &r->plugins[i];
  return &r->plugins[0]; /* not reached: c is of r->cfg */
}

static void close_initial(reloader *r) {
  for (size_t i = 0; i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    if (p->initial_fd >= 0)
      close(p->initial_fd);
    p->initial_fd = -1;
  }
}

void reload_free(reloader *r) {
  if (!r)
    return;
  close_initial(r);
  for (size_t i = 0; i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    for (size_t k = 0; k < p->n; k++)
      loader_close(p->builds[k].lp);
    free(p->builds);
    free(p->watch_dir);
  }
  free(r->plugins);
  for (size_t i = 0; i < r->n_owned; i++)
    config_free(r->owned[i]);
  free(r->owned);
  free(r->store_dir);
  free(r->self);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

/* err with the first mention of `copy` (a build's private copy) replaced
 * by `source`, the path the user wrote: the copy may be gone by the time
 * anyone reads the message. */
static void name_source(char *out, size_t len, const char *err,
                        const char *copy, const char *source) {
  const char *at = copy ? strstr(err, copy) : NULL;
  if (at)
    snprintf(out, len, "%.*s%s%s", (int)(at - err), err, source,
             at + strlen(copy));
  else
    snprintf(out, len, "%s", err);
}

/* ---- the probe ------------------------------------------------------------
 */

int reload_probe_main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: duro __load NAME PATH [CLASS...]\n");
    return 2;
  }
  loader_probe_child(0);
  char err[1024];
  loader_plugin *lp = NULL;
  if (loader_open(argv[2], argv[3], duro_host_api(), &lp, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  int bad = 0;
  for (int i = 4; i < argc; i++)
    if (!loader_find_workflow(lp, argv[i])) {
      loader_missing_class(lp, argv[2], argv[3], argv[i], err, sizeof err);
      fprintf(stderr, "%s\n", err);
      bad = 1;
    }
  loader_close(lp);
  return bad;
}

/* Loads `path` as plugin p in a child process first: a build that fails or
 * crashes while loading (constructors, init) is refused there, not here.
 * Returns 0, or -1 with why in err. */
static int probe(reloader *r, const plugin_state *p, const char *path,
                 char *err, size_t errlen) {
  const config_plugin *c = p->cfg;
  char **argv = xcalloc(c->n_workflows + 5, sizeof *argv);
  size_t n = 0;
  argv[n++] = "duro";
  argv[n++] = "__load";
  argv[n++] = c->name;
  argv[n++] = (char *)path;
  for (size_t k = 0; k < c->n_workflows; k++)
    argv[n++] = c->workflows[k].class_name;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    free(argv);
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY,
                                   0);
  /* A group of its own: what its constructors fork is found and ended. */
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&at, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, r->self, &fa, &at, argv, environ);
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  free(argv);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    snprintf(err, errlen, "cannot start the load probe %s: %s", r->self,
             strerror(rc));
    return -1;
  }
  /* A constructor that never returns must not hold the reload (and the
   * host's stop) forever. */
  loader_probe lp;
  loader_probe_wait(pid, fds[0], LOADER_PROBE_TIMEOUT_MS, &lp);
  if (loader_probe_why(&lp, err, errlen))
    return -1;
  int status = lp.status;
  char *out = lp.out;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return 0;
  /* A refusal keeps every line (one a missing class); a crash its first. */
  if (WIFSIGNALED(status))
    out[strcspn(out, "\n")] = '\0';
  else
    for (size_t n = strlen(out); n && out[n - 1] == '\n'; n--)
      out[n - 1] = '\0';
  if (WIFSIGNALED(status))
    snprintf(err, errlen, "crashed while loading (signal %d, SIG%s)%s%.600s",
             WTERMSIG(status), sigabbrev_np(WTERMSIG(status)), *out ? ": " : "",
             out);
  else if (*out)
    snprintf(err, errlen, "%s", out);
  else
    snprintf(err, errlen, "exited with status %d while loading",
             WEXITSTATUS(status));
  return -1;
}

/* ---- loading ---------------------------------------------------------------
 */

static build *find_build(plugin_state *p, const char *hash) {
  for (size_t k = 0; k < p->n; k++)
    if (!strcmp(p->builds[k].hash, hash))
      return &p->builds[k];
  return NULL;
}

/* Loads `path` (a copy) in this process, its classes checked: touches
 * no state of the reloader, so it runs without the lock.  Returns the
 * plugin, or NULL with why in err. */
static loader_plugin *open_build(reloader *r, const plugin_state *p,
                                 const char *path, char *err, size_t errlen) {
  ledger_slot *slot =
      r->ledger ? ledger_claim(r->ledger, LEDGER_LOADING) : NULL;
  if (slot) {
    ledger_copy(slot->plugin, sizeof slot->plugin, p->cfg->name);
    ledger_thread_bind(r->ledger, slot);
  }
  loader_plugin *lp = NULL;
  int rc = loader_open(p->cfg->name, path, duro_host_api(), &lp, err, errlen);
  if (slot)
    ledger_release(r->ledger, slot);
  if (rc)
    return NULL;
  for (size_t k = 0; k < p->cfg->n_workflows; k++)
    if (!loader_find_workflow(lp, p->cfg->workflows[k].class_name)) {
      loader_missing_class(lp, p->cfg->name, path,
                           p->cfg->workflows[k].class_name, err, errlen);
      loader_close(lp);
      return NULL;
    }
  return lp;
}

/* Adds a loaded build to the plugin's builds (newest or, with newest = 0,
 * before it). */
static void add_build(plugin_state *p, loader_plugin *lp, const char *hash,
                      int newest) {
  p->builds = xrealloc(p->builds, (p->n + 1) * sizeof *p->builds);
  build b = {.lp = lp, .loaded_ms = clock_wall_ms()};
  snprintf(b.hash, sizeof b.hash, "%s", hash);
  if (newest || p->n == 0) {
    p->builds[p->n] = b;
  } else {
    p->builds[p->n] = p->builds[p->n - 1];
    p->builds[p->n - 1] = b;
  }
  p->n++;
}

static int load_build(reloader *r, plugin_state *p, const char *path,
                      const char *hash, int newest, char *err, size_t errlen) {
  loader_plugin *lp = open_build(r, p, path, err, errlen);
  if (!lp)
    return -1;
  add_build(p, lp, hash, newest);
  return 0;
}

/* The plugin's last good build, as remembered in the store. */
static char *newest_marker(const reloader *r, const plugin_state *p) {
  return xasprintf("%s/%s.newest", r->store_dir, p->cfg->name);
}

static void remember_newest(reloader *r, plugin_state *p) {
  char *path = newest_marker(r, p);
  FILE *f = fopen(path, "w");
  if (f) {
    fprintf(f, "%s\n", p->builds[p->n - 1].hash);
    fclose(f);
  }
  free(path);
}

/* A probe refused the configured file at start: serve the last good build
 * from the store instead, if there is one. */
static int load_fallback(reloader *r, plugin_state *p, const char *why) {
  char *marker = newest_marker(r, p);
  char hash[32] = "";
  FILE *f = fopen(marker, "r");
  free(marker);
  if (!f)
    return -1;
  if (!fgets(hash, sizeof hash, f))
    hash[0] = '\0';
  fclose(f);
  hash[strcspn(hash, "\n")] = '\0';
  if (strlen(hash) != 16)
    return -1;
  char *path = build_store_path(r->store_dir, hash);
  char err[1024];
  int rc = probe(r, p, path, err, sizeof err) == 0
               ? load_build(r, p, path, hash, 1, err, sizeof err)
               : -1;
  if (rc == 0)
    log_warn("plugin \"%s\": %s (%s); serving its last good build %s from "
             "the build store",
             p->cfg->name, p->cfg->path, why, hash);
  free(path);
  return rc;
}

/* Prints one line of why plugin c was refused as file:line:column,
 * naming the path the user configured rather than the copy that was
 * loaded. */
static void report_line(const config *cfg, const config_plugin *c,
                        const char *copy, const char *err) {
  char msg[1200];
  name_source(msg, sizeof msg, err, copy, c->path);
  const char *cls = strstr(msg, "exports no class \"");
  for (size_t k = 0; cls && k < c->n_workflows; k++) {
    const config_workflow *w = &c->workflows[k];
    size_t n = strlen(w->class_name);
    const char *name = cls + strlen("exports no class \"");
    if (!strncmp(name, w->class_name, n) && name[n] == '"') {
      /* msg names the configured path and lists the classes there are */
      fprintf(stderr, "%s:%d:%d: workflow \"%s\": %s\n", cfg->file, w->pos.line,
              w->pos.column, w->name, msg);
      return;
    }
  }
  if (strstr(msg, c->name))
    fprintf(stderr, "%s:%d:%d: %s\n", cfg->file, c->pos.line, c->pos.column,
            msg);
  else
    fprintf(stderr, "%s:%d:%d: plugin \"%s\" (%s): %s\n", cfg->file,
            c->pos.line, c->pos.column, c->name, c->path, msg);
}

/* Prints every line of why plugin c was refused (the probe says each
 * class the build does not export on a line of its own); returns how
 * many. */
static int report_refusal(const config *cfg, const config_plugin *c,
                          const char *copy, char *err) {
  int n = 0;
  for (char *line = err, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next)
      *next++ = '\0';
    report_line(cfg, c, copy, line);
    n++;
  }
  return n ? n : (report_line(cfg, c, copy, err), 1);
}

int reload_load_initial(reloader *r) {
  const config *cfg = r->cfg;
  int problems = 0;
  char tmpl[] = "/tmp/duro-builds-XXXXXX";
  const char *tmpdir = getenv("TMPDIR");
  char *dir = tmpdir && *tmpdir ? xasprintf("%s/duro-builds-XXXXXX", tmpdir)
                                : xstrdup(tmpl);
  if (!mkdtemp(dir)) {
    fprintf(stderr, "duro: cannot create a temporary directory (%s): %s\n", dir,
            strerror(errno));
    free(dir);
    return 1;
  }
  for (size_t i = 0; i < cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    const config_plugin *c = p->cfg;
    char err[1024], hash[17];
    char *copy = NULL;
    int rc = build_store_import(dir, c->path, hash, &copy, err, sizeof err);
    if (rc == 0 && (rc = probe(r, p, copy, err, sizeof err)) != 0 &&
        r->restarted && load_fallback(r, p, err) == 0) {
      unlink(copy);
      free(copy);
      continue;
    }
    if (rc == 0)
      rc = load_build(r, p, copy, hash, 1, err, sizeof err);
    if (rc) {
      problems += report_refusal(cfg, c, copy, err);
      if (copy)
        unlink(copy);
      free(copy);
      continue;
    }
    /* Mapped now: the file can go; the descriptor keeps its bytes for
     * the store (reload_attach). */
    p->initial_fd = open(copy, O_RDONLY | O_CLOEXEC);
    unlink(copy);
    free(copy);
  }
  rmdir(dir);
  free(dir);
  return problems;
}

static json_t *reload_config(reloader *r);

/* ---- attaching to the engine ----------------------------------------------
 */

typedef struct pin {
  char *workflow, *build;
} pin;
typedef struct pins {
  pin *v;
  size_t n;
} pins;

static void collect_pin(void *ctx, const char *workflow, const char *build,
                        int64_t n) {
  (void)n;
  pins *ps = ctx;
  ps->v = xrealloc(ps->v, (ps->n + 1) * sizeof *ps->v);
  ps->v[ps->n++] = (pin){xstrdup(workflow), xstrdup(build)};
}

/* The plugin's consumers that name no workflow are fed to the newest
 * build's queue handler; without one they are pull consumers (HTTP), and
 * an older build's handler, which may be unloaded, is no longer called.
 * The same build's scheduled handler fires the plugin's cron ticks. */
static void register_consumers(reloader *r, plugin_state *p, const build *b) {
  duro_queue_fn fn = loader_info(b->lp)->queue;
  size_t fed = 0;
  for (size_t k = 0; k < p->cfg->n_consumers; k++) {
    const config_consumer *c = &p->cfg->consumers[k];
    if (c->workflow)
      continue;
    fed++;
    if (!fn) {
      duro_queue_unconsume(r->e, c->queue);
      continue;
    }
    duro_queue_consumer_opts o = {c->max_batch_size, c->max_batch_timeout_ms,
                                  c->max_concurrency, c->visibility_timeout_ms,
                                  p->cfg->name};
    if (duro_queue_consume(r->e, c->queue, fn, &o) != 0)
      log_error("plugin \"%s\": cannot consume queue \"%s\"", p->cfg->name,
                c->queue);
  }
  /* The newest build's scheduled handler fires the plugin's next ticks. */
  duro_cron_set_handler(r->e, p->cfg->name, loader_info(b->lp)->scheduled);
  if (fn && !fed)
    log_warn("plugin \"%s\" has a queue handler but its config declares no "
             "consumer for it (queues.consumers without a workflow): it is "
             "never called",
             p->cfg->name);
}

/* Gives the engine build b's run() for each workflow of the plugin. */
static void add_to_engine(reloader *r, plugin_state *p, const build *b,
                          int newest) {
  if (newest)
    register_consumers(r, p, b);
  for (size_t k = 0; k < p->cfg->n_workflows; k++) {
    const config_workflow *w = &p->cfg->workflows[k];
    duro_run_fn run = loader_find_workflow(b->lp, w->class_name);
    if (run)
      duro_engine_add_build(r->e, w->name, b->hash, run, newest);
  }
}

static void register_workflows(reloader *r) {
  for (size_t i = 0; i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    const build *newest = &p->builds[p->n - 1];
    register_consumers(r, p, newest);
    for (size_t k = 0; k < p->cfg->n_workflows; k++) {
      const config_workflow *w = &p->cfg->workflows[k];
      duro_workflow_limits lim = {
          .retention_ms = w->retention_ms,
          .max_steps = w->max_steps,
          .concurrency = w->concurrency,
          .pause_on_divergence = w->pause_on_divergence,
          .versioning_latest = w->versioning_latest,
          .lifecycle_queue = w->lifecycle_queue,
      };
      /* names are unique (config_refs.c checked), so this cannot fail */
      duro_engine_register(r->e, w->name, w->binding,
                           loader_find_workflow(newest->lp, w->class_name),
                           &lim, newest->hash);
    }
  }
}

/* ---- builds shared by the hosts of one database ------------------------
 * On a store several hosts share, every build a host has loaded is offered
 * to the others (duro_engine_build_share, again at each gc pass, which
 * marks it still in use), and a pinned build missing from the local store
 * is fetched from there: a host that takes over an instance pinned to a
 * build it never loaded runs it on that build.  Builds no host has
 * offered for a day and no instance needs are pruned.  On SQLite these
 * do nothing. */
#define BUILDS_UNSEEN_MS (24LL * 3600 * 1000)
#define BUILDS_PRUNE_EVERY_MS (10LL * 60 * 1000)

static void share_builds(reloader *r) {
  for (size_t i = 0; r->e && i < r->cfg->n_plugins; i++) {
    const plugin_state *p = &r->plugins[i];
    for (size_t k = 0; k < p->n; k++) {
      char *path = build_store_path(r->store_dir, p->builds[k].hash);
      if (duro_engine_build_share(r->e, p->builds[k].hash, p->cfg->name,
                                  path) != 0)
        log_warn("plugin \"%s\": cannot offer build %s to the other hosts",
                 p->cfg->name, p->builds[k].hash);
      free(path);
    }
  }
}

/* The build file at `path` is there, or is fetched from the other hosts'
 * offers. */
static void fetch_if_missing(reloader *r, const char *name, const char *hash,
                             const char *path) {
  if (access(path, R_OK) == 0)
    return;
  if (duro_engine_build_fetch(r->e, hash, path) == 0)
    log_info("plugin \"%s\": build %s fetched from the database", name, hash);
}

/* Build `hash` of plugin p given to `workflow`: loaded first (from the
 * store, fetched from the other hosts if missing there, probed) when it
 * is not.  A build that is loaded is given again: the workflow may lack
 * it (builds of hosts before retirement was decided per plugin).  Returns
 * 0, or -1 with why in err. */
static int give_build(reloader *r, plugin_state *p, const char *workflow,
                      const char *hash, char *err, size_t errlen) {
  build *b = find_build(p, hash);
  if (b) {
    for (size_t k = 0; k < p->cfg->n_workflows; k++) {
      const config_workflow *w = &p->cfg->workflows[k];
      duro_run_fn run = loader_find_workflow(b->lp, w->class_name);
      if (!strcmp(w->name, workflow) && run)
        return duro_engine_add_build(r->e, workflow, hash, run, 0) ? -1 : 0;
    }
    snprintf(err, errlen, "build %s serves no workflow \"%s\"", hash, workflow);
    return -1;
  }
  char *path = build_store_path(r->store_dir, hash);
  fetch_if_missing(r, p->cfg->name, hash, path);
  int rc = -1;
  if (access(path, R_OK) != 0)
    snprintf(err, errlen,
             "it is not in the build store (%s), and no host shares it "
             "through the database",
             path);
  else if (probe(r, p, path, err, errlen) == 0 &&
           load_build(r, p, path, hash, 0, err, errlen) == 0) {
    add_to_engine(r, p, &p->builds[p->n - 2], 0);
    log_info("plugin \"%s\": build %s loaded for the instances pinned to it",
             p->cfg->name, hash);
    rc = 0;
  }
  free(path);
  return rc;
}

/* Builds in-flight instances are pinned to, from the store. */
static void load_pinned(reloader *r) {
  pins ps = {0};
  if (duro_engine_pinned_builds(r->e, collect_pin, &ps) != 0)
    log_error("cannot list the builds instances are pinned to");
  for (size_t i = 0; i < ps.n; i++) {
    const config_plugin *c = NULL;
    char err[1024];
    if (config_find_workflow(r->cfg, ps.v[i].workflow, &c) &&
        give_build(r, state_of(r, c), ps.v[i].workflow, ps.v[i].build, err,
                   sizeof err) != 0)
      log_error("plugin \"%s\": build %s, which instances of %s are "
                "pinned to, cannot be loaded: %s",
                c->name, ps.v[i].build, ps.v[i].workflow, err);
    free(ps.v[i].workflow);
    free(ps.v[i].build);
  }
  free(ps.v);
}

int reload_attach(reloader *r, duro_engine *e) {
  pthread_mutex_lock(&r->mu);
  r->e = e;
  for (size_t i = 0; i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    if (p->initial_fd < 0)
      continue; /* served from the store already */
    char err[1024], hash[17], src[64];
    char *stored = NULL;
    snprintf(src, sizeof src, "/proc/self/fd/%d", p->initial_fd);
    if (build_store_import(r->store_dir, src, hash, &stored, err, sizeof err) !=
        0)
      log_error("plugin \"%s\": %s", p->cfg->name, err);
    free(stored);
    remember_newest(r, p);
  }
  close_initial(r);
  register_workflows(r);
  load_pinned(r);
  share_builds(r);
  pthread_mutex_unlock(&r->mu);
  /* An engine the supervisor restarted (after a crash) starts from the
   * config the supervisor read: what reloads applied since is applied
   * again from the file. */
  json_decref(reload_config(r));
  return 0;
}

int reload_give_build(reloader *r, const char *workflow, const char *hash,
                      char *err, size_t errlen) {
  const config_plugin *c = NULL;
  int rc = -1;
  pthread_mutex_lock(&r->mu);
  if (!r->e || !config_find_workflow(r->cfg, workflow, &c))
    snprintf(err, errlen, "no plugin serves workflow \"%s\"", workflow);
  else
    rc = give_build(r, state_of(r, c), workflow, hash, err, errlen);
  pthread_mutex_unlock(&r->mu);
  return rc;
}

void reload_load_pinned(reloader *r) {
  pthread_mutex_lock(&r->mu);
  if (r->e)
    load_pinned(r);
  pthread_mutex_unlock(&r->mu);
}

/* ---- reloading
 * ---------------------------------------------------------------
 */

/* Build `hash`, loaded already, made the newest (a rollback to a build
 * kept for pinned instances, or one a concurrent reload just loaded);
 * "unchanged" when it is.  Under the lock. */
static const char *make_newest(reloader *r, plugin_state *p, build *known) {
  if (known == &p->builds[p->n - 1])
    return "unchanged";
  build b = *known;
  size_t at = (size_t)(known - p->builds);
  memmove(&p->builds[at], &p->builds[at + 1],
          (p->n - at - 1) * sizeof *p->builds);
  p->builds[p->n - 1] = b;
  add_to_engine(r, p, &p->builds[p->n - 1], 1);
  return "loaded";
}

/* The end of a reload, under the lock: the build probed and opened
 * meanwhile (lp; NULL when it was refused, rc != 0) is installed unless
 * another reload installed the same hash first, and the outcome goes to
 * the report and the log. */
static void reload_finish(reloader *r, plugin_state *p, json_t *rep, int rc,
                          loader_plugin *lp, const char *hash,
                          const char *stored, const char *err) {
  const config_plugin *c = p->cfg;
  char previous[17]; /* the newest now: another reload may have moved it */
  snprintf(previous, sizeof previous, "%s", p->builds[p->n - 1].hash);
  json_object_set_new(rep, "previous", json_string(previous));
  build *known = rc == 0 ? find_build(p, hash) : NULL;
  if (known) {
    if (lp)
      loader_close(lp); /* a second handle of the same file */
    json_object_set_new(rep, "status", json_string(make_newest(r, p, known)));
  } else if (rc == 0) {
    add_build(p, lp, hash, 1);
    add_to_engine(r, p, &p->builds[p->n - 1], 1);
    json_object_set_new(rep, "status", json_string("loaded"));
  }
  if (rc) {
    if (stored && !find_build(p, hash))
      build_store_remove(r->store_dir, hash);
    char shown[1200];
    name_source(shown, sizeof shown, err, stored, c->path);
    log_error("plugin \"%s\": new build of %s refused: %s; build %s keeps "
              "serving",
              c->name, c->path, shown, previous);
    json_object_set_new(rep, "status", json_string("refused"));
    json_object_set_new(rep, "error", json_string(err));
    return;
  }
  json_object_set_new(rep, "build", json_string(hash));
  if (strcmp(hash, previous) != 0) {
    remember_newest(r, p);
    log_info("plugin \"%s\": build %s is the newest (was %s)", c->name, hash,
             previous);
  }
}

/* A new build is probed and opened without the lock (a slow constructor
 * must not hold up other reloads, the unload pass or GET /plugins), then
 * installed under it. */
static json_t *reload_one(reloader *r, plugin_state *p) {
  const config_plugin *c = p->cfg;
  char previous[17], current[17], err[1024] = "", hash[17];
  pthread_mutex_lock(&r->mu);
  snprintf(previous, sizeof previous, "%s", p->builds[p->n - 1].hash);
  json_t *rep = json_pack("{s:s,s:s}", "name", c->name, "previous", previous);
  if (loader_hash_file(c->path, current) == 0 && !strcmp(current, previous)) {
    pthread_mutex_unlock(&r->mu);
    json_object_set_new(rep, "status", json_string("unchanged"));
    json_object_set_new(rep, "build", json_string(previous));
    return rep;
  }
  char *stored = NULL;
  int rc =
      build_store_import(r->store_dir, c->path, hash, &stored, err, sizeof err);
  loader_plugin *lp = NULL;
  /* Known, or not in the store: nothing to probe. */
  if (rc == 0 && !find_build(p, hash)) {
    pthread_mutex_unlock(&r->mu);
    if ((rc = probe(r, p, stored, err, sizeof err)) == 0 &&
        !(lp = open_build(r, p, stored, err, sizeof err)))
      rc = -1;
    pthread_mutex_lock(&r->mu);
  }
  reload_finish(r, p, rep, rc, lp, hash, stored, err);
  pthread_mutex_unlock(&r->mu);
  free(stored);
  return rep;
}

/* ---- the config file read again ------------------------------------------
 * The file the host started with is read again and compared with the
 * running config (cfgdiff.h).  A file that does not parse, or any change
 * that needs a restart, refuses the whole change: the running config
 * stays.  Otherwise the live changes go to the engine and the new config
 * becomes the running one (plugin paths included: the build reload that
 * follows loads from the new path).
 */

/* Makes `cur` the running config: each plugin's state points into it,
 * and the consumers fed to a queue handler take its settings (mu held;
 * the plugins are those of the running config, by name). */
static void adopt_config(reloader *r, config *cur) {
  r->owned = xrealloc(r->owned, (r->n_owned + 1) * sizeof *r->owned);
  r->owned[r->n_owned++] = cur;
  int moved = 0;
  for (size_t i = 0; i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    const config_plugin *c = cfgdiff_plugin(cur, p->cfg->name);
    moved |= strcmp(c->path, p->cfg->path) != 0;
    p->cfg = c;
    if (p->n)
      register_consumers(r, p, &p->builds[p->n - 1]);
  }
  r->cfg = cur;
  if (moved && r->rewatch_on)
    uv_async_send(&r->rewatch);
}

/* The list as one log line: "a; b; c". */
static void log_list(int warn, const char *head, const json_t *list) {
  size_t len = 0, i;
  const json_t *v;
  json_array_foreach(list, i, v) len += strlen(json_string_value(v)) + 2;
  char *text = xcalloc(1, len + 1);
  json_array_foreach(list, i, v) {
    if (i)
      strcat(text, "; ");
    strcat(text, json_string_value(v));
  }
  if (warn)
    log_warn("%s%s", head, text);
  else
    log_info("%s%s", head, text);
  free(text);
}

/* {"file", "status": "applied|unchanged|refused", "changes": [...],
 * "restart"?: [...], "error"?}: what the reload did, also logged. */
static json_t *reload_config(reloader *r) {
  char err[2048];
  json_t *live = json_array(), *restart = json_array();
  json_t *rep = json_pack("{s:s,s:o}", "file", r->cfg->file, "changes", live);
  config *cur = config_load(r->cfg->file, err, sizeof err);
  if (!cur) {
    log_warn("config not reloaded, the running one stays: %s", err);
    json_object_set_new(rep, "status", json_string("refused"));
    json_object_set_new(rep, "error", json_string(err));
    json_decref(restart);
    return rep;
  }
  pthread_mutex_lock(&r->mu);
  cfgdiff_compare(r->cfg, cur, live, restart);
  const char *status = "applied";
  if (json_array_size(restart)) {
    status = "refused";
    snprintf(err, sizeof err,
             "%zu change(s) need a restart: nothing of the config was "
             "applied (restart the host, or undo them)",
             json_array_size(restart));
    log_list(1, "config not reloaded, these changes need a restart: ", restart);
    json_object_set(rep, "restart", restart);
  } else if (!json_array_size(live)) {
    status = "unchanged";
  } else if (!r->e || cfgdiff_apply(cur, r->e, err, sizeof err) != 0) {
    status = "refused";
    log_warn("config not reloaded: %s", r->e ? err : "the engine is not open");
  } else {
    adopt_config(r, cur);
    cur = NULL;
    log_list(0, "config reloaded: ", live);
  }
  pthread_mutex_unlock(&r->mu);
  config_free(cur);
  json_object_set_new(rep, "status", json_string(status));
  if (!strcmp(status, "refused"))
    json_object_set_new(rep, "error", json_string(err));
  json_decref(restart);
  return rep;
}

int reload_plugins(reloader *r, const char *name, json_t **report) {
  json_t *list = json_array();
  int refused = 0, found = 0;
  /* Every plugin: the config file is read again first (its paths). */
  json_t *conf = !name && r->e ? reload_config(r) : NULL;
  if (conf &&
      !strcmp(json_string_value(json_object_get(conf, "status")), "refused"))
    refused++;
  for (size_t i = 0; i < r->cfg->n_plugins && r->e; i++) {
    plugin_state *p = &r->plugins[i];
    if (name && strcmp(name, p->cfg->name) != 0)
      continue;
    found++;
    json_t *rep = reload_one(r, p);
    refused +=
        !strcmp(json_string_value(json_object_get(rep, "status")), "refused");
    json_array_append_new(list, rep);
  }
  pthread_mutex_lock(&r->mu);
  share_builds(r);
  pthread_mutex_unlock(&r->mu);
  if (report) {
    *report = json_pack("{s:o}", "plugins", list);
    if (conf)
      json_object_set(*report, "config", conf);
  } else {
    json_decref(list);
  }
  json_decref(conf);
  return name && !found ? -1 : refused;
}

void reload_gc(reloader *r) {
  pthread_mutex_lock(&r->mu);
  share_builds(r);
  int64_t now = clock_mono_ms();
  if (r->e && now >= r->next_prune) {
    size_t n = 0;
    if (duro_engine_builds_prune(r->e, BUILDS_UNSEEN_MS, &n) == 0 && n)
      log_info("%zu build(s) no host has loaded for a day dropped from the "
               "database",
               n);
    r->next_prune = now + BUILDS_PRUNE_EVERY_MS;
  }
  for (size_t i = 0; r->e && i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    const char **names = xcalloc(p->cfg->n_workflows + 1, sizeof *names);
    for (size_t w = 0; w < p->cfg->n_workflows; w++)
      names[w] = p->cfg->workflows[w].name;
    for (size_t k = 0; k + 1 < p->n;) {
      /* a batch of an older build's queue handler, or a tick of its
       * scheduled handler, may still run */
      int unused = !duro_queue_handler_running(
                       r->e, loader_info(p->builds[k].lp)->queue) &&
                   !duro_cron_handler_running(
                       r->e, loader_info(p->builds[k].lp)->scheduled);
      /* The workflows share the code: it leaves all of them or none. */
      if (unused) {
        int rc = duro_engine_retire_build_all(r->e, names, p->cfg->n_workflows,
                                              p->builds[k].hash);
        unused = rc == 0 || rc == DURO_E_NOT_FOUND;
      }
      if (!unused) {
        k++;
        continue;
      }
      loader_close(p->builds[k].lp);
      build_store_remove(r->store_dir, p->builds[k].hash);
      log_info("plugin \"%s\": build %s unloaded: no instance needs it",
               p->cfg->name, p->builds[k].hash);
      memmove(&p->builds[k], &p->builds[k + 1],
              (p->n - k - 1) * sizeof *p->builds);
      p->n--;
    }
    free(names);
  }
  pthread_mutex_unlock(&r->mu);
}

typedef struct pin_count {
  const plugin_state *p;
  const char *build;
  int64_t n;
} pin_count;

static void count_pins(void *ctx, const char *workflow, const char *build,
                       int64_t n) {
  pin_count *c = ctx;
  if (strcmp(build, c->build) != 0)
    return;
  for (size_t k = 0; k < c->p->cfg->n_workflows; k++)
    if (!strcmp(c->p->cfg->workflows[k].name, workflow))
      c->n += n;
}

/* What a plugin's config gives it to serve: its workflows, the queues
 * it consumes and its cron schedules. */
static json_t *plugin_serves(const config_plugin *c) {
  json_t *wfs = json_array(), *queues = json_array(), *crons = json_array();
  for (size_t i = 0; i < c->n_workflows; i++)
    json_array_append_new(wfs, json_string(c->workflows[i].name));
  for (size_t i = 0; i < c->n_consumers; i++)
    json_array_append_new(queues, json_string(c->consumers[i].queue));
  for (size_t i = 0; i < c->n_crons; i++)
    json_array_append_new(crons, json_string(c->crons[i].schedule));
  return json_pack("{s:o,s:o,s:o}", "workflows", wfs, "queues", queues, "crons",
                   crons);
}

json_t *reload_list(reloader *r) {
  json_t *list = json_array();
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    json_t *builds = json_array();
    for (size_t k = 0; k < p->n; k++) {
      /* how many instances that have not ended are pinned to it */
      pin_count c = {.p = p, .build = p->builds[k].hash};
      if (r->e)
        duro_engine_pinned_builds(r->e, count_pins, &c);
      json_array_append_new(
          builds, json_pack("{s:s,s:b,s:I,s:I}", "build", p->builds[k].hash,
                            "newest", k + 1 == p->n, "loaded_ms",
                            (json_int_t)p->builds[k].loaded_ms, "instances",
                            (json_int_t)c.n));
    }
    json_array_append_new(list,
                          json_pack("{s:s,s:s,s:o,s:o}", "name", p->cfg->name,
                                    "path", p->cfg->path, "builds", builds,
                                    "serves", plugin_serves(p->cfg)));
  }
  pthread_mutex_unlock(&r->mu);
  return json_pack("{s:o}", "plugins", list);
}

/* ---- watching the files
 * ------------------------------------------------------
 */

/* A reload probes and loads code: on libuv's pool, never on the loop. */
typedef struct reload_job {
  uv_work_t work;
  reloader *r;
  char *name; /* NULL: every plugin */
} reload_job;

static void job_run(uv_work_t *w) {
  reload_job *j = (reload_job *)w;
  reload_plugins(j->r, j->name, NULL);
}

static void job_done(uv_work_t *w, int status) {
  (void)status;
  reload_job *j = (reload_job *)w;
  j->r->queued--;
  free(j->name);
  free(j);
}

void reload_queue(reloader *r, uv_loop_t *loop, const char *name) {
  reload_job *j = xcalloc(1, sizeof *j);
  j->r = r;
  j->name = name ? xstrdup(name) : NULL;
  if (uv_queue_work(loop, &j->work, job_run, job_done) != 0) {
    log_error("cannot queue a reload of %s", name ? name : "every plugin");
    free(j->name);
    free(j);
    return;
  }
  r->queued++;
}

int reload_queued(const reloader *r) { return r->queued; }

static void on_debounced(uv_timer_t *t) {
  plugin_state *p = t->data;
  reload_queue(p->r, t->loop, p->cfg->name);
}

static void on_fs_event(uv_fs_event_t *h, const char *filename, int events,
                        int status) {
  (void)events;
  plugin_state *p = h->data;
  char *copy = xstrdup(p->cfg->path);
  int ours = status == 0 && filename && !strcmp(filename, basename(copy));
  free(copy);
  if (ours) /* a cp writes in several pieces: wait for the last */
    uv_timer_start(&p->debounce, on_debounced, DEBOUNCE_MS, 0);
}

/* Starts p's watch on the directory of its path, unless it watches that
 * one already. */
static void watch_dir_of(plugin_state *p) {
  pthread_mutex_lock(&p->r->mu);
  char *copy = xstrdup(p->cfg->path);
  pthread_mutex_unlock(&p->r->mu);
  const char *dir = dirname(copy);
  if (p->watch_dir && !strcmp(p->watch_dir, dir)) {
    free(copy);
    return;
  }
  if (p->watch_dir)
    uv_fs_event_stop(&p->watch);
  free(p->watch_dir);
  p->watch_dir = xstrdup(dir);
  int rc = uv_fs_event_start(&p->watch, on_fs_event, dir, 0);
  if (rc != 0)
    log_warn("plugin \"%s\": cannot watch %s (%s): reload it with SIGHUP "
             "or duro reload",
             p->cfg->name, dir, uv_strerror(rc));
  free(copy);
}

/* A config reload moved a plugin's path (the loop's thread). */
static void on_rewatch(uv_async_t *a) {
  reloader *r = a->data;
  for (size_t i = 0; i < r->cfg->n_plugins; i++)
    if (r->plugins[i].watching)
      watch_dir_of(&r->plugins[i]);
}

int reload_watch(reloader *r, uv_loop_t *loop) {
  for (size_t i = 0; i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    uv_fs_event_init(loop, &p->watch);
    uv_timer_init(loop, &p->debounce);
    p->watch.data = p->debounce.data = p;
    watch_dir_of(p);
    p->watching = 1;
  }
  uv_async_init(loop, &r->rewatch, on_rewatch);
  r->rewatch.data = r;
  pthread_mutex_lock(&r->mu);
  r->rewatch_on = 1;
  pthread_mutex_unlock(&r->mu);
  return 0;
}

void reload_unwatch(reloader *r) {
  pthread_mutex_lock(&r->mu);
  int async = r->rewatch_on;
  r->rewatch_on = 0; /* a reload still running sends no more */
  pthread_mutex_unlock(&r->mu);
  if (async)
    uv_close((uv_handle_t *)&r->rewatch, NULL);
  for (size_t i = 0; i < r->cfg->n_plugins; i++) {
    plugin_state *p = &r->plugins[i];
    if (!p->watching)
      continue;
    uv_fs_event_stop(&p->watch);
    uv_timer_stop(&p->debounce);
    uv_close((uv_handle_t *)&p->watch, NULL);
    uv_close((uv_handle_t *)&p->debounce, NULL);
    p->watching = 0;
  }
}
