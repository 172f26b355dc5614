/* config.c — reads the YAML configuration into the plain structs of
 * config.h, or refuses it with every "file:line:column: message" it finds
 * (errlist.h), as a compiler lists its errors.
 *
 * libyaml composes the whole document into a node tree first; the parser
 * then walks that tree with one schema per mapping (schema.h: a table of
 * fields, each typed, ranged, required or not, walked the same way for
 * every mapping), one file of config/ per part of the document
 * (config_internal.h lists them; this file reads the text and hands the
 * root to config_root.c).  A null value (`storage:` with nothing after it)
 * for a section or list means the same as leaving it out; for a scalar
 * field it is refused.
 *
 * Before any of that, one pass over libyaml's events refuses a document
 * nested deeper than MAX_DEPTH levels, at the first collection past it:
 * composing 100,000 nested flow collections ("[[[...") takes libyaml
 * tens of seconds.
 *
 * Errors do not stop the walk: a refused value leaves its field at its
 * default, as if absent, a refused entry is skipped, and the walk goes on
 * with the next key or entry, so one pass reports all it can.  What an
 * error would make wrong is not reported on top of it: a misspelt key
 * that suggests a required one is not reported as missing too, a name
 * refused is not checked for uniqueness, and when a consumer's queue or
 * a workflow's name was refused (or a list or key that could hold one),
 * references to queues or workflows are not checked, since the one not
 * found may be that one.  Only a YAML syntax error or a document nested
 * too deep ends the parse, where libyaml ends it.
 *
 * Lifecycle: config_parse_all() builds a config with every default filled
 * in, overwrites what the file sets, and when it recorded any error frees
 * it all and returns NULL.  Every string and array in a returned config
 * belongs to it and is released by config_free().  Positions in messages
 * are 1-based; libyaml's marks are 0-based. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_internal.h"
#include "errlist.h"
#include "paths.h"
#include "schema.h"
#include "util.h"

/* How deep collections may nest.  The schema needs 6 levels (the top
 * level, plugins, a plugin, workflows, a workflow, limits); the cap is
 * there because libyaml takes time quadratic in the depth of flow
 * collections (its scanner rechecks every open flow level at each token),
 * so a hostile 100,000 levels would keep `duro check` busy for tens of
 * seconds before any message. */
#define MAX_DEPTH 64

/* Streams the text's events once before it is composed, and refuses it at
 * the first collection nested deeper than MAX_DEPTH, having scanned only
 * that far.  Returns 0 also when libyaml refuses the text: the load that
 * follows meets the same error and reports it in its usual order. */
static int check_depth(config_parser *p) {
  yaml_parser_t yp;
  yaml_event_t ev;
  int depth = 0, rc = 0;

  if (!yaml_parser_initialize(&yp)) {
    fprintf(stderr, "duro: out of memory creating a YAML parser\n");
    abort();
  }
  yaml_parser_set_input_string(&yp, (const unsigned char *)p->w.text, p->w.len);
  while (rc == 0 && yaml_parser_parse(&yp, &ev)) {
    yaml_event_type_t type = ev.type;
    if (type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) {
      if (++depth > MAX_DEPTH)
        rc = schema_fail_at(&p->w,
                            (config_pos){(int)ev.start_mark.line + 1,
                                         (int)ev.start_mark.column + 1},
                            "mappings and lists nested deeper than %d levels",
                            MAX_DEPTH);
    } else if (type == YAML_SEQUENCE_END_EVENT ||
               type == YAML_MAPPING_END_EVENT) {
      depth--;
    }
    yaml_event_delete(&ev);
    if (type == YAML_STREAM_END_EVENT)
      break;
  }
  yaml_parser_delete(&yp);
  return rc;
}

/* libyaml's own refusal, at its mark.  Reader errors (bad UTF-8, control
 * characters) carry a byte offset instead, turned here into a line and a
 * column counted in characters as libyaml counts them. */
static int yaml_failure(config_parser *p, const yaml_parser_t *yp) {
  const char *problem = yp->problem ? yp->problem : "unknown error";
  config_pos pos;

  switch (yp->error) {
  case YAML_MEMORY_ERROR:
    fprintf(stderr, "duro: out of memory parsing %s\n", p->w.file);
    abort();
  case YAML_READER_ERROR: {
    pos = (config_pos){1, 1};
    size_t end = yp->problem_offset < p->w.len ? yp->problem_offset : p->w.len;
    for (size_t i = 0; i < end; i++) {
      unsigned char c = (unsigned char)p->w.text[i];
      if (c == '\n') {
        pos.line++;
        pos.column = 1;
      } else if ((c & 0xC0) != 0x80) {
        pos.column++;
      }
    }
    return schema_fail_at(&p->w, pos, "YAML syntax error: %s", problem);
  }
  default:
    pos = (config_pos){(int)yp->problem_mark.line + 1,
                       (int)yp->problem_mark.column + 1};
    if (yp->context)
      return schema_fail_at(
          &p->w, pos, "YAML syntax error: %s (%s started at %d:%d)", problem,
          yp->context, (int)yp->context_mark.line + 1,
          (int)yp->context_mark.column + 1);
    return schema_fail_at(&p->w, pos, "YAML syntax error: %s", problem);
  }
}

/* A config with every default filled in, before the file overrides. */
static config *config_defaults(const char *file) {
  config *cfg = xcalloc(1, sizeof *cfg);
  cfg->file = xstrdup(file);
  cfg->storage.path = xstrdup("var/duro.db");
  cfg->storage.synchronous_full = 1;
  cfg->storage.connect_timeout_ms = 30 * SECOND_MS;
  cfg->storage.lease_ms = 5 * SECOND_MS;
  cfg->http.listen = xstrdup("127.0.0.1:8787");
  cfg->http.token_env = NULL;
  cfg->http.allow_insecure = 0;
  cfg->http.max_body_bytes = 1 * MiB;
  cfg->http.max_wait_ms = 60 * 1000;
  cfg->engine.workers = 0; /* unset: config_default_workers decides */
  cfg->engine.max_step_result = 1 * MiB;
  cfg->engine.max_instance_state = 1 * GiB;
  cfg->engine.max_crashes = 3;
  cfg->engine.shutdown_grace_ms = 30 * SECOND_MS;
  cfg->telemetry.service_name = xstrdup("duro");
  cfg->telemetry.sample = 1000000;
  cfg->telemetry.max_spans = 10000;
  cfg->telemetry.interval_ms = SECOND_MS;
  cfg->tail.buffer = 10000;
  cfg->tail.buffer_bytes = 16 * MiB;
  cfg->tail.max_batch_size = 100;
  cfg->tail.max_batch_timeout_ms = SECOND_MS;
  cfg->tail.timeout_ms = 30 * SECOND_MS;
  return cfg;
}

/* engine.threads when the file does not say: 64 threads while plugin
 * code runs on them (a plugin with workers: 0, whose blocking callbacks
 * each hold one), 8 when it all runs in worker processes (an engine
 * thread then only waits for answers, its activations parked, and fewer
 * threads share the workers' channels better). */
static uint32_t config_default_workers(const config *cfg) {
  if (cfg->n_plugins == 0)
    return 64;
  for (size_t i = 0; i < cfg->n_plugins; i++)
    if (cfg->plugins[i].workers == 0)
      return 64;
  return 8;
}

/* libyaml stops at a syntax error, so does the parse: what the document
 * held past it is unknown.  Every other error is recorded and the walk
 * goes on. */
/* The body of config_parse_all: with `keep`, the config is returned even
 * when errors were added. */
static config *parse_text(const char *name, const char *text, size_t len,
                          errlist *errs, int keep) {
  config_parser p = {.w = {.file = name ? name : "<config>",
                           .text = text ? text : "",
                           .len = text ? len : 0,
                           .errs = errs}};
  yaml_parser_t yp;
  yaml_document_t doc, next;
  size_t before = errlist_total(errs);

  config *cfg = config_defaults(p.w.file);
  p.cfg = cfg;
  if (check_depth(&p) < 0)
    goto out;
  if (!yaml_parser_initialize(&yp)) {
    fprintf(stderr, "duro: out of memory creating a YAML parser\n");
    abort();
  }
  yaml_parser_set_input_string(&yp, (const unsigned char *)p.w.text, p.w.len);

  /* On failure yaml_parser_load() has already released the document. */
  if (!yaml_parser_load(&yp, &doc)) {
    yaml_failure(&p, &yp);
    goto out_parser;
  }
  p.w.doc = &doc;
  config_parse_root(&p, yaml_document_get_root_node(&doc));

  /* A second document would be ignored silently; refuse it instead. */
  if (!yaml_parser_load(&yp, &next)) {
    yaml_failure(&p, &yp);
    goto out_doc;
  }
  yaml_node_t *extra = yaml_document_get_root_node(&next);
  if (extra)
    schema_fail(&p.w, extra, "only one YAML document is allowed");
  yaml_document_delete(&next);

out_doc:
  yaml_document_delete(&doc);
out_parser:
  yaml_parser_delete(&yp);
out:
  free(p.seen);
  if (cfg->engine.workers == 0)
    cfg->engine.workers = config_default_workers(cfg);
  if (errlist_total(errs) > before && !keep) {
    config_free(cfg);
    return NULL;
  }
  return cfg;
}

config *config_parse_all(const char *name, const char *text, size_t len,
                         errlist *errs) {
  return parse_text(name, text, len, errs, 0);
}

config *config_parse(const char *name, const char *text, size_t len, char *err,
                     size_t errlen) {
  errlist errs = {0};
  config *cfg = config_parse_all(name, text, len, &errs);
  if (!cfg)
    errlist_join(&errs, err, errlen);
  else if (err && errlen > 0)
    err[0] = '\0';
  errlist_clear(&errs);
  return cfg;
}

/* *slot resolved against dir (paths.h), replacing it. */
static void resolve_into(char **slot, const char *dir) {
  if (!*slot)
    return; /* refused: config_load_partial's caller skips it */
  char *resolved = config_resolve_path(dir, *slot);
  free(*slot);
  *slot = resolved;
}

/* Every file path of a config read from `file`, the default database's
 * too, anchored to the file's directory: a config then names the same
 * files from any current directory, and a plugin path always holds a
 * '/', so dlopen never searches the library path for it. */
static void resolve_paths(config *cfg, const char *file) {
  char *dir = config_dir_of(file);
  resolve_into(&cfg->storage.path, dir);
  for (size_t i = 0; i < cfg->n_plugins; i++)
    resolve_into(&cfg->plugins[i].path, dir);
  for (size_t i = 0; i < cfg->n_pipelines; i++)
    resolve_into(&cfg->pipelines[i].path, dir);
  resolve_into(&cfg->http.tls.cert, dir);
  resolve_into(&cfg->http.tls.key, dir);
  resolve_into(&cfg->http.tls.client_ca, dir);
  free(dir);
}

/* config_load_all, keeping what parsed despite errors with `keep`. */
static config *load_file(const char *path, errlist *errs, int keep) {
  FILE *f = NULL;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  config *cfg = NULL;

  if (!path) {
    errlist_add(errs, 0, 0, xstrdup("config: no file given"));
    return NULL;
  }
  if (!(f = fopen(path, "rbe")))
    goto fail_io;
  for (;;) {
    if (cap - len < 4096) {
      cap = cap ? 2 * cap : 16384;
      buf = xrealloc(buf, cap);
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f))
        goto fail_io; /* errno is fread's, e.g. EISDIR for a directory */
      break;
    }
  }
  cfg = parse_text(path, buf, len, errs, keep);
  if (cfg)
    resolve_paths(cfg, path);
  goto out;

fail_io:
  errlist_add(errs, 0, 0,
              xasprintf("%s: cannot read: %s", path, strerror(errno)));
out:
  if (f)
    fclose(f);
  free(buf);
  return cfg;
}

config *config_load_all(const char *path, errlist *errs) {
  return load_file(path, errs, 0);
}

config *config_load_partial(const char *path, errlist *errs) {
  return load_file(path, errs, 1);
}

config *config_load(const char *path, char *err, size_t errlen) {
  errlist errs = {0};
  config *cfg = config_load_all(path, &errs);
  if (!cfg)
    errlist_join(&errs, err, errlen);
  else if (err && errlen > 0)
    err[0] = '\0';
  errlist_clear(&errs);
  return cfg;
}
