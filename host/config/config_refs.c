/* config_refs.c — the names of the whole file.  Names that must be unique
 * across it (plugin names, workflow names, the one namespace of workflow
 * and producer bindings, and the queue of a consumer, since a queue has
 * one consumer) are recorded as they are parsed, so a duplicate is
 * reported at the second occurrence with the position of the first.  Once
 * every plugin is read, each queue producer (and each workflow's
 * lifecycle queue) must send to a queue some consumer consumes or
 * dead-letters into, and each no-code consumer or cron trigger must name
 * a workflow some plugin declares. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_internal.h"
#include "duro.h"
#include "schema.h"
#include "util.h"

/* Records `name` (the value of node `v`) in the namespace `kind`, or
 * reports it as a duplicate of an earlier one. */
int config_unique(config_parser *p, const char *kind, const char *name,
                  const yaml_node_t *v) {
  schema_shown b;
  if (!name) /* refused or missing: reported already */
    return 0;
  for (size_t i = 0; i < p->n_seen; i++) {
    const seen_name *s = &p->seen[i];
    if (strcmp(s->kind, kind) == 0 && strcmp(s->name, name) == 0)
      return schema_fail(&p->w, v, "duplicate %s \"%s\" (first at %d:%d)", kind,
                         schema_show(&b, name), s->pos.line, s->pos.column);
  }
  if (p->n_seen == p->cap_seen) {
    p->cap_seen = p->cap_seen ? 2 * p->cap_seen : 16;
    p->seen = xrealloc(p->seen, p->cap_seen * sizeof *p->seen);
  }
  p->seen[p->n_seen++] = (seen_name){kind, name, schema_pos(v)};
  return 0;
}

/* 1 when some consumer of any plugin consumes `queue` or dead-letters
 * into it. */
static int queue_declared(const config *cfg, const char *queue) {
  for (size_t i = 0; i < cfg->n_plugins; i++)
    for (size_t k = 0; k < cfg->plugins[i].n_consumers; k++) {
      const config_consumer *c = &cfg->plugins[i].consumers[k];
      if ((c->queue && strcmp(c->queue, queue) == 0) ||
          (c->dead_letter_queue && strcmp(c->dead_letter_queue, queue) == 0))
        return 1;
    }
  return 0;
}

/* What a reference names: a queue, which some consumer must consume or
 * dead-letter into, or a workflow, which some plugin must declare. */
typedef enum { REF_QUEUE, REF_WORKFLOW } ref_kind;

/* One reference, from the `owner_kind` named `owner` to `ref`, refused at
 * `pos` when nothing declares it: "producer "b" sends to queue "q", which
 * no consumer consumes ...".  DURO_E_CONFIG when refused, else 0. */
static int check_ref(config_parser *p, ref_kind kind, config_pos pos,
                     const char *owner_kind, const char *owner,
                     const char *verb, const char *ref) {
  if (kind == REF_QUEUE ? queue_declared(p->cfg, ref)
                        : config_find_workflow(p->cfg, ref, NULL) != NULL)
    return 0;
  schema_shown o, r;
  return schema_fail_at(
      &p->w, pos, "%s \"%s\" %s \"%s\", which %s", owner_kind,
      schema_show(&o, owner), verb, schema_show(&r, ref),
      kind == REF_QUEUE
          ? "no consumer consumes or names as its dead_letter_queue"
          : "no plugin declares");
}

/* A message sent to a queue nobody consumes would only wait for its
 * retention to run out: refuse the producer, at its queue. */
static int check_producers(config_parser *p) {
  const config *cfg = p->cfg;
  int rc = 0;
  for (size_t i = 0; i < cfg->n_plugins; i++)
    for (size_t k = 0; k < cfg->plugins[i].n_producers; k++) {
      const config_producer *pr = &cfg->plugins[i].producers[k];
      if (pr->queue && pr->binding &&
          check_ref(p, REF_QUEUE, pr->queue_pos, "producer", pr->binding,
                    "sends to queue", pr->queue) < 0)
        rc = DURO_E_CONFIG;
    }
  return rc;
}

/* The same for a workflow's lifecycle messages. */
static int check_lifecycle_queues(config_parser *p) {
  const config *cfg = p->cfg;
  int rc = 0;
  for (size_t i = 0; i < cfg->n_plugins; i++)
    for (size_t k = 0; k < cfg->plugins[i].n_workflows; k++) {
      const config_workflow *w = &cfg->plugins[i].workflows[k];
      if (w->lifecycle_queue && w->name &&
          check_ref(p, REF_QUEUE, w->lifecycle_pos, "workflow", w->name,
                    "publishes its lifecycle to queue", w->lifecycle_queue) < 0)
        rc = DURO_E_CONFIG;
    }
  return rc;
}

/* A no-code consumer's workflow must be declared, by any plugin. */
static int check_consumers(config_parser *p) {
  const config *cfg = p->cfg;
  int rc = 0;
  for (size_t i = 0; i < cfg->n_plugins; i++)
    for (size_t k = 0; k < cfg->plugins[i].n_consumers; k++) {
      const config_consumer *c = &cfg->plugins[i].consumers[k];
      if (c->workflow && c->queue &&
          check_ref(p, REF_WORKFLOW, c->workflow_pos, "consumer of queue",
                    c->queue, "creates instances of workflow", c->workflow) < 0)
        rc = DURO_E_CONFIG;
    }
  return rc;
}

/* The same for a no-code cron trigger. */
static int check_crons(config_parser *p) {
  const config *cfg = p->cfg;
  int rc = 0;
  for (size_t i = 0; i < cfg->n_plugins; i++)
    for (size_t k = 0; k < cfg->plugins[i].n_crons; k++) {
      const config_cron *c = &cfg->plugins[i].crons[k];
      if (c->workflow && c->schedule &&
          check_ref(p, REF_WORKFLOW, c->workflow_pos, "cron", c->schedule,
                    "creates instances of workflow", c->workflow) < 0)
        rc = DURO_E_CONFIG;
    }
  return rc;
}

/* A tail consumer is a plugin of the file, and a workflow does not name
 * again one its plugin names for all its workflows.  (A plugin refused
 * for its name leaves them unchecked: it may be the one named.) */
static int check_tail_consumers(config_parser *p) {
  const config *cfg = p->cfg;
  for (size_t i = 0; i < cfg->n_plugins; i++)
    if (!cfg->plugins[i].name)
      return 0;
  int rc = 0;
  for (size_t i = 0; i < cfg->n_plugins; i++) {
    const config_plugin *pl = &cfg->plugins[i];
    for (size_t w = 0; w <= pl->n_workflows; w++) {
      const config_workflow *wf =
          w < pl->n_workflows ? &pl->workflows[w] : NULL;
      char *const *names = wf ? wf->tail_consumers : pl->tail_consumers;
      const config_pos *pos = wf ? wf->tail_pos : pl->tail_pos;
      size_t n = wf ? wf->n_tail_consumers : pl->n_tail_consumers;
      for (size_t k = 0; k < n; k++) {
        schema_shown b;
        int known = 0;
        for (size_t j = 0; names[k] && j < cfg->n_plugins; j++)
          known |= !strcmp(cfg->plugins[j].name, names[k]);
        if (names[k] && !known)
          rc = schema_fail_at(&p->w, pos[k],
                              "tail consumer \"%s\" is not a plugin of this "
                              "file (a tail consumer is a plugin that exports "
                              "a tail handler)",
                              schema_show(&b, names[k]));
        for (size_t j = 0; wf && names[k] && j < pl->n_tail_consumers; j++)
          if (pl->tail_consumers[j] && !strcmp(pl->tail_consumers[j], names[k]))
            rc = schema_fail_at(
                &p->w, pos[k],
                "tail consumer \"%s\" of workflow \"%s\" is named by its "
                "plugin's tail_consumers already (at %d:%d)",
                schema_show(&b, names[k]), wf->name ? wf->name : "?",
                pl->tail_pos[j].line, pl->tail_pos[j].column);
      }
    }
  }
  return rc;
}

/* The references across the whole file, once every plugin is read; those
 * to a kind of name that a refused entry may have declared are left out
 * (unsure_queues, unsure_workflows). */
int config_check_references(config_parser *p) {
  int rc = 0;
  if (!p->unsure_workflows && (check_consumers(p) < 0 || check_crons(p) < 0))
    rc = DURO_E_CONFIG;
  if (!p->unsure_queues &&
      (check_lifecycle_queues(p) < 0 || check_producers(p) < 0))
    rc = DURO_E_CONFIG;
  if (check_tail_consumers(p) < 0)
    rc = DURO_E_CONFIG;
  return rc;
}

const config_workflow *config_find_workflow(const config *cfg, const char *name,
                                            const config_plugin **plugin_out) {
  if (plugin_out)
    *plugin_out = NULL;
  if (!cfg || !name)
    return NULL;
  for (size_t i = 0; i < cfg->n_plugins; i++) {
    const config_plugin *pl = &cfg->plugins[i];
    for (size_t j = 0; j < pl->n_workflows; j++) {
      if (pl->workflows[j].name && strcmp(pl->workflows[j].name, name) == 0) {
        if (plugin_out)
          *plugin_out = pl;
        return &pl->workflows[j];
      }
    }
  }
  return NULL;
}
