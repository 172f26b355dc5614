/* replay.c — `duro check CONFIG --replay NEW.so`: would this build diverge
 * from the journals of the instances in flight?
 *
 * Before a deploy: every instance of the plugin's workflows that has not
 * ended is replayed on NEW.so, read-only (beside a running host, too):
 * journaled steps return their results, and the replay stops at the first
 * step that would run, wait or write.  Nothing runs, nothing is written.
 * Instances whose replay asks for a step the journal does not have at that
 * position are listed with both steps.  Exit code 0 when none diverges, 1
 * when some would, 2 when the check itself failed. */
#include "replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"
#include "backend.h"
#include "config.h"
#include "engine.h"
#include "error.h"
#include "journal_crypt.h"
#include "loader.h"
#include "queue.h"
#include "storage_keys.h"
#include "util.h"
#include "view_dry_run.h"

/* Loads `so` in a child first: a build that crashes while loading ends the
 * child, not the check. */
static int survives_loading(const char *name, const char *so) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    char err[1024];
    loader_plugin *lp = NULL;
    if (loader_open(name, so, duro_host_api(), &lp, err, sizeof err)) {
      fprintf(stderr, "duro: %s\n", err);
      _exit(1);
    }
    loader_close(lp);
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid)
    return 0;
  if (WIFSIGNALED(status))
    fprintf(stderr, "duro: %s crashed while loading (signal %d, SIG%s)\n", so,
            WTERMSIG(status), sigabbrev_np(WTERMSIG(status)));
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static const config_plugin *pick_plugin(const config *cfg, const char *name) {
  if (!name && cfg->n_plugins == 1)
    return &cfg->plugins[0];
  for (size_t i = 0; name && i < cfg->n_plugins; i++)
    if (!strcmp(cfg->plugins[i].name, name))
      return &cfg->plugins[i];
  if (name)
    fprintf(stderr, "duro: %s has no plugin \"%s\"\n", cfg->file, name);
  else
    fprintf(stderr, "duro: %s has %zu plugins: name one with --plugin NAME\n",
            cfg->file, cfg->n_plugins);
  return NULL;
}

static void print_report(const json_t *rep) {
  const json_t *list = json_object_get(rep, "instances");
  printf("%s: %zu in flight, %" JSON_INTEGER_FORMAT " would diverge\n",
         json_string_value(json_object_get(rep, "workflow")),
         json_array_size(list),
         json_integer_value(json_object_get(rep, "diverged")));
  size_t i;
  const json_t *one;
  json_array_foreach(list, i, one) {
    const char *status = json_string_value(json_object_get(one, "status"));
    const char *id = json_string_value(json_object_get(one, "id"));
    printf("  %-36s  %-9s  ", id ? id : "?", status);
    if (!strcmp(status, "diverged"))
      printf("%s\n", json_string_value(json_object_get(
                         json_object_get(one, "error"), "message")));
    else if (json_object_get(one, "next"))
      printf("%" JSON_INTEGER_FORMAT " journaled steps replay; next \"%s\"\n",
             json_integer_value(json_object_get(one, "journaled")),
             json_string_value(json_object_get(one, "next")));
    else
      printf("%" JSON_INTEGER_FORMAT " journaled steps replay\n",
             json_integer_value(json_object_get(one, "journaled")));
  }
}

/* Replays the plugin's workflows on lp, printing each report. */
static int replay_all(const config *cfg, const config_plugin *p,
                      loader_plugin *lp, int as_json) {
  duro_engine_options opt = {.db_path = cfg->storage.path, .read_only = 1};
  char err[1024] = "";
  journal_crypt *keys = NULL; /* the journal's values read as the host does */
  if (storage_keys_load(cfg, &keys, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 2;
  }
  opt.crypt = keys;
  if (cfg->storage.postgresql) {
    opt.backend = store_backend_postgresql();
    opt.db_path = cfg->storage.postgresql;
  }
  duro_engine *e = NULL;
  if ((!cfg->storage.postgresql && access(cfg->storage.path, R_OK) != 0) ||
      duro_engine_open(&opt, &e, err, sizeof err) != 0) {
    /* Not the connection string: it may hold a password. */
    fprintf(stderr, "duro: cannot read the journal %s%s%s\n",
            cfg->storage.postgresql ? "in PostgreSQL" : cfg->storage.path,
            cfg->storage.postgresql ? ": " : "",
            cfg->storage.postgresql ? err : "");
    journal_crypt_free(keys);
    return 2;
  }
  int code = 0;
  json_t *all = json_array();
  for (size_t k = 0; k < p->n_workflows && code < 2; k++) {
    const config_workflow *w = &p->workflows[k];
    duro_run_fn run = loader_find_workflow(lp, w->class_name);
    if (!run) {
      fprintf(stderr,
              "duro: the new build exports no class \"%s\" (workflow "
              "\"%s\"); it exports %s\n",
              w->class_name, w->name, loader_class_list(lp, err, sizeof err));
      code = 2;
      break;
    }
    duro_engine_register(e, w->name, w->binding, run, NULL, "replay");
    json_t *rep = NULL;
    int rc = duro_engine_dry_run(e, w->name, run, &rep);
    if (rc) {
      fprintf(stderr, "duro: replaying %s: %s\n", w->name, duro_err_str(rc));
      code = 2;
      break;
    }
    if (json_integer_value(json_object_get(rep, "diverged")) > 0)
      code = 1;
    json_object_set_new(
        rep, "versioning",
        json_string(w->versioning_latest ? "latest" : "pinned"));
    if (!as_json) {
      print_report(rep);
      if (!w->versioning_latest &&
          json_integer_value(json_object_get(rep, "diverged")) > 0)
        printf("  (versioning: pinned: these finish on the build they "
               "started on; they would diverge on a restart from a step or "
               "a move to this build)\n");
    }
    json_array_append_new(all, rep);
  }
  if (as_json && code < 2) {
    json_t *doc = json_pack("{s:O}", "workflows", all);
    json_dumpf(doc, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(doc);
  }
  json_decref(all);
  duro_engine_close(e);
  journal_crypt_free(keys); /* after the engine that used them */
  return code;
}

int replay_check_main(const char *config_path, const char *so,
                      const char *plugin, int as_json) {
  char err[1024];
  config *cfg = config_load(config_path, err, sizeof err);
  if (!cfg) {
    fprintf(stderr, "%s\n", err);
    return 2;
  }
  int code = 2;
  const config_plugin *p = pick_plugin(cfg, plugin);
  loader_plugin *lp = NULL;
  if (p && survives_loading(p->name, so) &&
      loader_open(p->name, so, duro_host_api(), &lp, err, sizeof err) == 0)
    code = replay_all(cfg, p, lp, as_json);
  else if (p && !lp)
    fprintf(stderr, "duro: %s is not a build duro can load\n", so);
  loader_close(lp);
  config_free(cfg);
  return code;
}
