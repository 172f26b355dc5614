/* reload_load.c — loading a build into this process (its classes
 * checked, its slot in the crash ledger held meanwhile), the plugin's
 * builds kept oldest first, its last good build remembered in the store,
 * and the first load at start (reload_load_initial): every configured
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
loader_plugin *reload_open_build(reloader *r, const plugin_state *p,
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
void reload_add_build(plugin_state *p, loader_plugin *lp, const char *hash,
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

int reload_load_build(reloader *r, plugin_state *p, const char *path,
                      const char *hash, int newest, char *err, size_t errlen) {
  loader_plugin *lp = reload_open_build(r, p, path, err, errlen);
  if (!lp)
    return -1;
  reload_add_build(p, lp, hash, newest);
  return 0;
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
  int rc = reload_probe(r, p, path, err, sizeof err) == 0
               ? reload_load_build(r, p, path, hash, 1, err, sizeof err)
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
    int rc = build_store_import(dir, c->path, hash, &copy, err, sizeof err);
    if (rc == 0 && (rc = reload_probe(r, p, copy, err, sizeof err)) != 0 &&
        r->restarted && load_fallback(r, p, err) == 0) {
      unlink(copy);
      free(copy);
      continue;
    }
    if (rc == 0)
      rc = reload_load_build(r, p, copy, hash, 1, err, sizeof err);
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
