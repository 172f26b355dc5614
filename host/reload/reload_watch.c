/* reload_watch.c — each plugin's file watched (its directory: an editor
 * or a cp that replaces the file is seen too), a reload queued ~250 ms
 * after it last changed, and reloads run on libuv's pool, never on the
 * loop.  A config reload that moves a plugin's path to another directory
 * moves its watch there. */
#include <libgen.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "reload_internal.h"
#include "util.h"

#define DEBOUNCE_MS 250

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
