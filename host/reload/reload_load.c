/* reload_load.c — opening a build: probed in a child first, then loaded
 * into this process (its classes checked, its slot in the crash ledger
 * held meanwhile), or, for a plugin whose code runs in worker processes,
 * known by the descriptor the probe reported and never loaded here; the
 * plugin's builds kept oldest first, its last good build remembered in the
 * store, and the first load at start (reload_load_initial): every configured
 * file copied, probed and loaded, or refused as file:line:column; after a
 * crash, a refused file falls back to the last good build. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "clock.h"
#include "ledger.h"
#include "loader.h"
#include "log.h"
#include "reload_internal.h"
#include "store.h"
#include "util.h"

build *reload_find_build(plugin_state *p, const char *hash) {
  for (size_t k = 0; k < p->n; k++)
    if (!strcmp(p->builds[k].hash, hash))
      return &p->builds[k];
  return NULL;
}

/* Loads `path` (a copy) in this process, its classes checked: touches
 * no state of the reloader, so it runs without the lock.  Returns the
 * plugin, or NULL with why in err. */
static loader_plugin *open_here(reloader *r, const plugin_state *p,
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

/* The probe first, always; then, for a plugin in workers, the descriptor
 * it reported is all this process keeps of the build (no constructor or
 * init of it runs here). */
int reload_open_build(reloader *r, const plugin_state *p, const char *path,
                      build *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  int in_workers = reload_in_workers(r, p);
  if (reload_probe(r, p, path, in_workers ? &out->desc : NULL, err, errlen))
    return -1;
  if (in_workers)
    return 0;
  out->lp = open_here(r, p, path, err, errlen);
  return out->lp ? 0 : -1;
}

void reload_add_build(plugin_state *p, const build *opened, const char *hash,
                      int newest) {
  p->builds = xrealloc(p->builds, (p->n + 1) * sizeof *p->builds);
  build b = {
      .lp = opened->lp, .desc = opened->desc, .loaded_ms = clock_wall_ms()};
  snprintf(b.hash, sizeof b.hash, "%s", hash);
  if (newest || p->n == 0) {
    p->builds[p->n] = b;
  } else {
    p->builds[p->n] = p->builds[p->n - 1];
    p->builds[p->n - 1] = b;
  }
  p->n++;
}

int reload_load_build(reloader *r, plugin_state *p, const char *path,
                      const char *hash, int newest, char *err, size_t errlen) {
  build b;
  if (reload_open_build(r, p, path, &b, err, errlen))
    return -1;
  reload_add_build(p, &b, hash, newest);
  return 0;
}

int reload_build_exports(const build *b, const char *class_name) {
  return b->lp ? loader_find_workflow(b->lp, class_name) != NULL
               : build_desc_has_class(b->desc, class_name);
}

void reload_unload_build(build *b) {
  loader_close(b->lp);
  build_desc_free(b->desc);
  b->lp = NULL;
  b->desc = NULL;
}

/* The plugin's last good build, as remembered in the store. */
static char *newest_marker(const reloader *r, const plugin_state *p) {
  return xasprintf("%s/%s.newest", r->store_dir, p->cfg->name);
}

void reload_remember_newest(reloader *r, plugin_state *p) {
  char *path = newest_marker(r, p);
  FILE *f = fopen(path, "we");
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
  FILE *f = fopen(marker, "re");
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
  int rc = reload_load_build(r, p, path, hash, 1, err, sizeof err);
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
  reload_name_source(msg, sizeof msg, err, copy, c->path);
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
    build b;
    int rc = build_store_import(dir, c->path, hash, &copy, err, sizeof err);
    if (rc == 0 && (rc = reload_open_build(r, p, copy, &b, err, sizeof err)) &&
        r->restarted && load_fallback(r, p, err) == 0) {
      unlink(copy);
      free(copy);
      continue;
    }
    if (rc == 0)
      reload_add_build(p, &b, hash, 1);
    if (rc) {
      problems += report_refusal(cfg, c, copy, err);
      if (copy)
        unlink(copy);
      free(copy);
      continue;
    }
    /* Loaded (or probed) now: the file can go; the open file keeps its
     * bytes for the store (reload_attach). */
    p->initial_fd = open(copy, O_RDONLY | O_CLOEXEC);
    unlink(copy);
    free(copy);
  }
  rmdir(dir);
  free(dir);
  return problems;
}
