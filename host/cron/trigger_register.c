/* trigger_register.c — the triggers registered: one at start, or the
 * whole list at a reload (a trigger whose defining fields stay keeps its
 * object, and takes the new policies), and each plugin's scheduled
 * handler, counted while it runs. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "trigger_internal.h"

/* The trigger `spec` describes (strings copied, one reference), or NULL
 * with the reason in err. */
/* Whether text is a JSON object, as a trigger's params must be. */
static int params_object(const char *text) {
  json_t *j = json_loads(text, 0, NULL);
  int ok = json_is_object(j);
  json_decref(j);
  return ok;
}

static cron_trigger *trigger_new(const duro_cron_spec *spec, char *err,
                                 size_t errlen) {
  cron_expr expr;
  cron_error ce;
  char id[128];
  if (!spec || !spec->plugin || !spec->schedule) {
    snprintf(err, errlen, "a cron trigger needs a plugin and a schedule");
    return NULL;
  }
  if (cron_parse(spec->schedule, &expr, &ce) != 0) {
    snprintf(err, errlen, "invalid cron expression \"%s\": %s", spec->schedule,
             ce.msg);
    return NULL;
  }
  if (!cron_ever_fires(&expr)) {
    snprintf(err, errlen, "cron \"%s\" never fires: no date matches it",
             spec->schedule);
    return NULL;
  }
  if (!cron_tz_valid(spec->timezone, err, errlen))
    return NULL;
  const char *tmpl = spec->id ? spec->id : DEFAULT_ID;
  if (spec->workflow && cron_expand_id(tmpl, 0, NULL, id, sizeof id) != 0) {
    snprintf(err, errlen,
             "cron id \"%s\" does not make a valid instance id (placeholders "
             "{date} {time} {datetime} {ts}; 1-100 characters of A-Z a-z "
             "0-9 _ . : -)",
             tmpl);
    return NULL;
  }
  if (spec->params && !params_object(spec->params)) {
    snprintf(err, errlen, "cron \"%s\": params must be a JSON object",
             spec->schedule);
    return NULL;
  }
  cron_trigger *t = xcalloc(1, sizeof *t);
  *t = (cron_trigger){
      .plugin = xstrdup(spec->plugin),
      .schedule = xstrdup(spec->schedule),
      .timezone = spec->timezone ? xstrdup(spec->timezone) : NULL,
      .workflow = spec->workflow ? xstrdup(spec->workflow) : NULL,
      .id = spec->workflow ? xstrdup(tmpl) : NULL,
      .expr = expr,
      .catch_up = spec->catch_up,
      .max_catch_up =
          spec->max_catch_up ? spec->max_catch_up : DEFAULT_MAX_CATCH_UP,
      .overlap_allow = spec->overlap_allow,
      .params = spec->params ? xstrdup(spec->params) : NULL,
      .refs = 1,
      .next_ms = CRON_NEVER};
  /* What makes it this trigger: change any of it and it is a new one. */
  t->key = xasprintf("%s|%s|%s|%s|%s", t->plugin, t->schedule,
                     t->timezone ? t->timezone : "UTC",
                     t->workflow ? t->workflow : "", t->id ? t->id : "");
  return t;
}

int duro_cron_register(duro_engine *e, const duro_cron_spec *spec, char *err,
                       size_t errlen) {
  cron_trigger *t = trigger_new(spec, err, errlen);
  if (!t)
    return DURO_E_INVALID_ARGUMENT;
  struct cron_registry *r = cron_registry_of(e);
  pthread_mutex_lock(&r->mu);
  size_t n = r->set ? r->set->n : 0;
  cron_trigger **v = xcalloc(n + 1, sizeof *v);
  for (size_t i = 0; i < n; i++) {
    v[i] = r->set->v[i];
    v[i]->refs++;
  }
  v[n] = t;
  pthread_mutex_unlock(&r->mu);
  cron_set_publish(r, v, n + 1);
  return 0;
}

/* The trigger of the set with `key`, or NULL (r->mu held). */
static cron_trigger *find_key_locked(struct cron_registry *r, const char *key) {
  for (size_t i = 0; r->set && i < r->set->n; i++)
    if (!strcmp(r->set->v[i]->key, key))
      return r->set->v[i];
  return NULL;
}

int duro_cron_replace(duro_engine *e, const duro_cron_spec *specs, size_t n,
                      char *err, size_t errlen) {
  cron_trigger **v = xcalloc(n ? n : 1, sizeof *v);
  for (size_t i = 0; i < n; i++)
    if (!(v[i] = trigger_new(&specs[i], err, errlen))) {
      while (i-- > 0) {
        cron_trigger_clear(v[i]);
        free(v[i]);
      }
      free(v);
      return DURO_E_INVALID_ARGUMENT;
    }
  struct cron_registry *r = cron_registry_of(e);
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < n; i++) {
    cron_trigger *old = find_key_locked(r, v[i]->key);
    if (!old)
      continue;
    /* The same trigger: it keeps its ticks; only its policies change. */
    __atomic_store_n(&old->catch_up, v[i]->catch_up, __ATOMIC_RELAXED);
    __atomic_store_n(&old->max_catch_up, v[i]->max_catch_up, __ATOMIC_RELAXED);
    __atomic_store_n(&old->overlap_allow, v[i]->overlap_allow,
                     __ATOMIC_RELAXED);
    char *params = old->params; /* read under mu by its fires */
    old->params = v[i]->params;
    v[i]->params = params;
    cron_trigger_clear(v[i]);
    free(v[i]);
    v[i] = old;
    old->refs++;
  }
  pthread_mutex_unlock(&r->mu);
  cron_set_publish(r, v, n);
  engine_kick_scheduler(e); /* a new trigger's first tick may come sooner */
  return 0;
}

void duro_cron_set_handler(duro_engine *e, const char *plugin,
                           duro_scheduled_fn fn, void *ctx) {
  struct cron_registry *r = cron_registry_of(e);
  pthread_mutex_lock(&r->mu);
  struct handler *h = NULL;
  for (size_t i = 0; i < r->n_handlers && !h; i++)
    if (!strcmp(r->handlers[i].plugin, plugin))
      h = &r->handlers[i];
  if (!h) {
    r->handlers =
        xrealloc(r->handlers, (r->n_handlers + 1) * sizeof *r->handlers);
    h = &r->handlers[r->n_handlers++];
    *h = (struct handler){xstrdup(plugin), NULL, NULL};
  }
  h->fn = fn;
  h->ctx = ctx;
  pthread_mutex_unlock(&r->mu);
}

/* The plugin's handler, counted as running (r->mu held). */
duro_scheduled_fn cron_handler_take_locked(struct cron_registry *r,
                                           const char *plugin, void **ctx) {
  const struct handler *h = NULL;
  for (size_t i = 0; i < r->n_handlers && !h; i++)
    if (!strcmp(r->handlers[i].plugin, plugin) && r->handlers[i].fn)
      h = &r->handlers[i];
  if (!h)
    return NULL;
  *ctx = h->ctx;
  for (size_t i = 0; i < r->n_running; i++)
    if (r->running[i].fn == h->fn) {
      r->running[i].n++;
      return h->fn;
    }
  r->running = xrealloc(r->running, (r->n_running + 1) * sizeof *r->running);
  r->running[r->n_running++] = (struct handler_running){h->fn, 1};
  return h->fn;
}

void cron_handler_put(struct cron_registry *r, duro_scheduled_fn fn) {
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < r->n_running; i++)
    if (r->running[i].fn == fn && r->running[i].n) {
      r->running[i].n--;
      break;
    }
  pthread_mutex_unlock(&r->mu);
}

int duro_cron_handler_running(duro_engine *e, duro_scheduled_fn fn) {
  struct cron_registry *r = cron_registry_if_any(e);
  int busy = 0;
  if (!r || !fn)
    return 0;
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < r->n_running; i++)
    busy |= r->running[i].fn == fn && r->running[i].n > 0;
  pthread_mutex_unlock(&r->mu);
  return busy;
}
