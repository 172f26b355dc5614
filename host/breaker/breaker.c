/* breaker.c — the crash-storm breaker (breaker.h): the crashes of each
 * workflow's build in a ring as long as the plugin's threshold, each with
 * the build's count of ended attempts then, and a hold of that workflow's
 * build when the ring is full of crashes younger than the window that
 * are at least `rate` of the attempts ended since the oldest of them. */
#include "breaker.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "util.h"

typedef struct build_count {
  const config_plugin *plugin;
  const char *workflow; /* the config's name: lives as long as the breaker */
  char hash[17];
  int64_t *at; /* the last `crashes` crash times (monotonic ms), a ring */
  uint64_t *attempts_at; /* the build's ended attempts at each of them */
  uint32_t n, next;
  uint64_t total;
  int held;
  int64_t held_since_ms;  /* wall clock, for GET /plugins */
  uint32_t held_crashes;  /* crashes in the window when it tripped */
  uint64_t held_attempts; /* attempts ended since the first of them */
} build_count;

struct breaker {
  const config *cfg;
  duro_engine *e;
  pthread_mutex_t mu;
  build_count *v;
  size_t n;
  breaker_rollback_fn rollback;
  void *rollback_ctx;
};

breaker *breaker_new(const config *cfg) {
  breaker *b = xcalloc(1, sizeof *b);
  b->cfg = cfg;
  pthread_mutex_init(&b->mu, NULL);
  return b;
}

void breaker_free(breaker *b) {
  if (!b)
    return;
  for (size_t i = 0; i < b->n; i++) {
    free(b->v[i].at);
    free(b->v[i].attempts_at);
  }
  free(b->v);
  pthread_mutex_destroy(&b->mu);
  free(b);
}

void breaker_set_rollback(breaker *b, breaker_rollback_fn fn, void *ctx) {
  b->rollback = fn;
  b->rollback_ctx = ctx;
}

void breaker_start(breaker *b, duro_engine *e) {
  b->e = e;
  size_t n = 0;
  if (duro_engine_wake_held(e, BREAKER_REASON, &n) == 0 && n)
    log_info("%zu instance(s) held by an earlier run of this host (%s) look "
             "again at their build",
             n, BREAKER_REASON);
}

/* The plugin of `workflow`, and the config's copy of its name in *name. */
static const config_plugin *
plugin_of_workflow(const breaker *b, const char *workflow, const char **name) {
  for (size_t i = 0; i < b->cfg->n_plugins; i++)
    for (size_t w = 0; w < b->cfg->plugins[i].n_workflows; w++)
      if (!strcmp(b->cfg->plugins[i].workflows[w].name, workflow)) {
        *name = b->cfg->plugins[i].workflows[w].name;
        return &b->cfg->plugins[i];
      }
  return NULL;
}

static const config_plugin *plugin_named(const breaker *b, const char *name) {
  for (size_t i = 0; i < b->cfg->n_plugins; i++)
    if (!strcmp(b->cfg->plugins[i].name, name))
      return &b->cfg->plugins[i];
  return NULL;
}

/* The same file may serve two plugins, and a build several workflows:
 * counts are per plugin, build and workflow, so that a workflow whose
 * code crashes is held without its healthy siblings of the same build. */
static build_count *find_locked(breaker *b, const char *plugin,
                                const char *hash, const char *workflow) {
  for (size_t i = 0; i < b->n; i++)
    if (!strcmp(b->v[i].hash, hash) && !strcmp(b->v[i].plugin->name, plugin) &&
        !strcmp(b->v[i].workflow, workflow))
      return &b->v[i];
  return NULL;
}

static build_count *take_locked(breaker *b, const config_plugin *p,
                                const char *hash, const char *workflow) {
  build_count *c = find_locked(b, p->name, hash, workflow);
  if (c)
    return c;
  b->v = xrealloc(b->v, (b->n + 1) * sizeof *b->v);
  c = &b->v[b->n++];
  *c = (build_count){.plugin = p, .workflow = workflow};
  snprintf(c->hash, sizeof c->hash, "%s", hash);
  c->at = xcalloc(p->crash_storm.crashes, sizeof *c->at);
  c->attempts_at = xcalloc(p->crash_storm.crashes, sizeof *c->attempts_at);
  return c;
}

/* The crashes of c younger than the window, at monotonic time now. */
static uint32_t in_window(const build_count *c, int64_t now) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < c->n; i++)
    if (now - c->at[i] < c->plugin->crash_storm.window_ms)
      k++;
  return k;
}

/* For the rollback of plugin `ctx->plugin`: a build that never crashed
 * here. */
typedef struct rollback_ctx {
  breaker *b;
  const char *plugin;
} rollback_ctx;

static int never_crashed(void *ctx, const char *hash) {
  rollback_ctx *r = ctx;
  breaker *b = r->b;
  int ok = 1;
  pthread_mutex_lock(&b->mu);
  for (size_t i = 0; i < b->n; i++)
    if (!strcmp(b->v[i].hash, hash) && !strcmp(b->v[i].plugin->name, r->plugin))
      ok &= !b->v[i].total && !b->v[i].held;
  pthread_mutex_unlock(&b->mu);
  return ok;
}

/* Whether the ring of c, just written at monotonic time now with the
 * build's `attempts` ended so far, is a storm: full of crashes younger
 * than the window, and the crashes after its oldest at least the rate of
 * the attempts that ended after it (those crashes among them), so that a
 * rare crash of a busy build is none.  *since gets those attempts. */
static int storm(const build_count *c, uint64_t attempts, int64_t now,
                 uint32_t *crashes, uint64_t *since) {
  const config_plugin *p = c->plugin;
  *crashes = in_window(c, now);
  *since = 0;
  if (*crashes < p->crash_storm.crashes)
    return 0;
  /* full: the oldest is the next to be written */
  uint64_t first = c->attempts_at[c->next % p->crash_storm.crashes];
  /* a count that went back: the build was given to the workflow anew */
  *since = attempts >= first ? attempts - first : attempts;
  return (uint64_t)(*crashes - 1) * 1000000u >=
         (uint64_t)p->crash_storm.rate_ppm * *since;
}

static void trip(breaker *b, const config_plugin *p, const char *workflow,
                 const char *hash, uint32_t crashes, uint64_t since) {
  char window[32];
  int64_t w = p->crash_storm.window_ms;
  if (w % 1000 == 0)
    snprintf(window, sizeof window, "%" PRId64 " s", w / 1000);
  else
    snprintf(window, sizeof window, "%" PRId64 " ms", w);
  /* The rollback before the hold: an activation that finds the build
   * held then finds the good one the newest too, and one that ran no
   * step on the held build moves to it (holds.c) rather than wait for a
   * wake that listed the held before it was. */
  char to[17] = "";
  rollback_ctx rctx = {b, p->name};
  int rolled = p->crash_storm.rollback && b->rollback &&
               b->rollback(b->rollback_ctx, p->name, hash, never_crashed, &rctx,
                           to, sizeof to) == 0;
  int rc = duro_engine_hold_build(b->e, &workflow, 1, hash, BREAKER_REASON);
  if (rc != 0)
    return;
  log_warn("plugin \"%s\": build %s crashed %u times within %s in "
           "workflow %s (%" PRIu64 " attempt(s) ended since the first of "
           "them): its instances on that build wait (%s) and run none of "
           "its code until a new build is deployed or `duro plugins resume "
           "%s` (the plugin's other workflows run on)",
           p->name, hash, crashes, window, workflow, since, BREAKER_REASON,
           p->name);
  if (!p->crash_storm.rollback)
    return;
  if (!rolled) {
    log_warn("plugin \"%s\": on_crash_storm is rollback, but no earlier "
             "build that never crashed is loaded: build %s stays held",
             p->name, hash);
    return;
  }
  size_t woken = 0;
  duro_engine_wake_held(b->e, BREAKER_REASON, &woken);
  log_warn("plugin \"%s\": rolled back from build %s to build %s; %zu held "
           "instance(s) look again (those pinned to %s that ran a step on "
           "it stay held, the others run on %s)",
           p->name, hash, to, woken, hash, to);
}

void breaker_crashed(breaker *b, const char *workflow, const char *build,
                     uint64_t attempts) {
  if (!b->e || !build || !*build)
    return;
  const char *wf = NULL;
  const config_plugin *p = plugin_of_workflow(b, workflow, &wf);
  if (!p || !p->crash_storm.crashes)
    return;
  int64_t now = clock_mono_ms();
  uint32_t crashes = 0;
  uint64_t since = 0;
  pthread_mutex_lock(&b->mu);
  build_count *c = take_locked(b, p, build, wf);
  c->at[c->next] = now;
  c->attempts_at[c->next] = attempts;
  c->next = (c->next + 1) % p->crash_storm.crashes;
  if (c->n < p->crash_storm.crashes)
    c->n++;
  c->total++;
  int tripped = 0;
  if (!c->held && storm(c, attempts, now, &crashes, &since)) {
    c->held = tripped = 1;
    c->held_since_ms = clock_wall_ms();
    c->held_crashes = crashes;
    c->held_attempts = since;
  }
  char hash[17];
  snprintf(hash, sizeof hash, "%s", c->hash);
  pthread_mutex_unlock(&b->mu);
  if (tripped)
    trip(b, p, wf, hash, crashes, since);
}

void breaker_newest(breaker *b, const char *plugin, const char *hash) {
  if (!b->e)
    return;
  int any = 0;
  pthread_mutex_lock(&b->mu);
  for (size_t i = 0; i < b->n; i++)
    any |= b->v[i].held && !strcmp(b->v[i].plugin->name, plugin);
  pthread_mutex_unlock(&b->mu);
  if (!any)
    return;
  size_t woken = 0;
  duro_engine_wake_held(b->e, BREAKER_REASON, &woken);
  log_info("plugin \"%s\": build %s is the newest: %zu held instance(s) look "
           "again (those pinned to a held build stay held)",
           plugin, hash, woken);
}

int breaker_resume(breaker *b, const char *name, json_t **report) {
  const config_plugin *p = plugin_named(b, name);
  if (!p)
    return -1;
  json_t *released = json_array();
  typedef struct held {
    char hash[17];
    const char *workflow;
    uint32_t crashes;
  } held;
  held *v = NULL;
  size_t n = 0;
  pthread_mutex_lock(&b->mu);
  for (size_t i = 0; i < b->n; i++) {
    build_count *c = &b->v[i];
    if (!c->held || c->plugin != p)
      continue;
    v = xrealloc(v, (n + 1) * sizeof *v);
    memcpy(v[n].hash, c->hash, sizeof c->hash);
    v[n].workflow = c->workflow;
    v[n++].crashes = c->held_crashes;
    /* A fresh count: it trips again only after as many new crashes. */
    c->held = 0;
    c->n = c->next = 0;
  }
  pthread_mutex_unlock(&b->mu);
  for (size_t i = 0; i < n; i++) {
    size_t woken = 0;
    if (b->e)
      duro_engine_release_build(b->e, &v[i].workflow, 1, v[i].hash, &woken);
    log_info("plugin \"%s\": build %s of workflow %s resumed by an "
             "operator: %zu held instance(s) run again",
             name, v[i].hash, v[i].workflow, woken);
    json_array_append_new(
        released, json_pack("{s:s,s:s,s:I,s:I}", "build", v[i].hash, "workflow",
                            v[i].workflow, "crashes", (json_int_t)v[i].crashes,
                            "woken", (json_int_t)woken));
  }
  free(v);
  if (report)
    *report = json_pack("{s:s,s:o}", "plugin", name, "released", released);
  else
    json_decref(released);
  return 0;
}

static void count_held(void *ctx, int64_t rowid, const char *workflow) {
  (void)rowid;
  json_t *by = ctx;
  json_t *n = json_object_get(by, workflow);
  json_object_set_new(by, workflow,
                      json_integer(n ? json_integer_value(n) + 1 : 1));
}

/* The attempts of build `hash` of plugin `name` that ended in this
 * engine, over its workflows (read before the breaker's lock: the
 * engine's builds lock is taken inside it). */
static json_int_t attempts_of(const breaker *b, const char *name,
                              const char *hash) {
  const config_plugin *p = name ? plugin_named(b, name) : NULL;
  uint64_t sum = 0, n;
  for (size_t w = 0; p && hash && b->e && w < p->n_workflows; w++)
    if (duro_engine_build_attempts(b->e, p->workflows[w].name, hash, &n) == 0)
      sum += n;
  return (json_int_t)sum;
}

void breaker_annotate(breaker *b, json_t *list) {
  int64_t now = clock_mono_ms();
  int any_held = 0;
  size_t i, k;
  json_t *p, *bj;
  json_array_foreach(json_object_get(list, "plugins"), i, p) {
    const char *name = json_string_value(json_object_get(p, "name"));
    json_array_foreach(json_object_get(p, "builds"), k, bj) {
      const char *hash = json_string_value(json_object_get(bj, "build"));
      json_object_set_new(bj, "attempts",
                          json_integer(attempts_of(b, name, hash)));
    }
  }
  pthread_mutex_lock(&b->mu);
  json_array_foreach(json_object_get(list, "plugins"), i, p) {
    const char *name = json_string_value(json_object_get(p, "name"));
    json_array_foreach(json_object_get(p, "builds"), k, bj) {
      const char *hash = json_string_value(json_object_get(bj, "build"));
      /* its crashes in the window over every workflow; held when one of
       * its workflows is (the first such says since when and why), with
       * the workflows held */
      json_int_t crashes = 0;
      const build_count *first = NULL;
      json_t *wfs = json_array();
      for (size_t c = 0; c < b->n && hash && name; c++) {
        const build_count *bc = &b->v[c];
        if (strcmp(bc->hash, hash) || strcmp(bc->plugin->name, name))
          continue;
        crashes += in_window(bc, now);
        if (!bc->held)
          continue;
        json_array_append_new(wfs, json_string(bc->workflow));
        if (!first)
          first = bc;
      }
      json_object_set_new(bj, "crashes", json_integer(crashes));
      if (!first) {
        json_decref(wfs);
        continue;
      }
      any_held = 1;
      json_object_set_new(
          bj, "held",
          json_pack("{s:I,s:I,s:I,s:s,s:s,s:o}", "since_ms",
                    (json_int_t)first->held_since_ms, "crashes",
                    (json_int_t)first->held_crashes, "attempts",
                    (json_int_t)first->held_attempts, "reason", BREAKER_REASON,
                    "action",
                    first->plugin->crash_storm.rollback ? "rollback" : "pause",
                    "workflows", wfs));
    }
  }
  pthread_mutex_unlock(&b->mu);
  json_t *by = json_object();
  if (any_held && b->e)
    duro_engine_waiting_on(b->e, BREAKER_REASON, count_held, by);
  json_object_set_new(list, "held_instances", by);
}
