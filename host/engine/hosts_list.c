/* hosts_list.c — the hosts that share this engine's store as GET /hosts
 * and `duro hosts list` show them (engine.h's duro_hosts_read): on a
 * shared store the store's rows (journal_hosts_each), this host marked;
 * on a store one host has to itself, this host alone.  And each host's
 * counts: a host leaves its own on its row with each renewal of its
 * lease (engine_host_counts_text), so any host shows every host's. */
#include <inttypes.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_internal.h"
#include "metrics.h"
#include "status.h"
#include "util.h"

typedef struct hosts_ctx {
  duro_engine *e;
  duro_host_list *out;
  size_t cap;
  int64_t me;
} hosts_ctx;

/* This host's counts; the gauges only when `wait` or mu is free (0:
 * they were not read). */
static int host_counts(duro_engine *e, duro_host_counts *out, int wait) {
#define COUNTER(f) (int64_t) __atomic_load_n(&e->m.f, __ATOMIC_RELAXED)
  *out = (duro_host_counts){.activations = COUNTER(activations),
                            .steps_completed = COUNTER(steps_completed),
                            .attempts_failed = COUNTER(attempts_failed),
                            .retries = COUNTER(retries_scheduled),
                            .instances_created = COUNTER(instances_created),
                            .events_sent = COUNTER(events_sent)};
#undef COUNTER
  if (wait)
    pthread_mutex_lock(&e->mu);
  else if (pthread_mutex_trylock(&e->mu) != 0)
    return 0;
  out->backlog = (int64_t)(e->runnable.n + e->spilled);
  out->in_flight = (int64_t)(e->entries.len + e->spilled);
  pthread_mutex_unlock(&e->mu);
  return 1;
}

void engine_host_counts(duro_engine *e, duro_host_counts *out) {
  host_counts(e, out, 1);
}

/* The counts' names in their JSON, by field. */
#define COUNT_FIELDS(X)                                                        \
  X(activations)                                                               \
  X(steps_completed)                                                           \
  X(attempts_failed)                                                           \
  X(retries)                                                                   \
  X(instances_created)                                                         \
  X(events_sent)                                                               \
  X(backlog)                                                                   \
  X(in_flight)

/* On the lease keeper's thread, which must never wait for the engine (a
 * thread holding mu may wait for the lease): with mu taken, none this
 * time, and the row keeps the last ones. */
char *engine_host_counts_text(void *engine) {
  duro_host_counts c;
  if (!host_counts(engine, &c, 0))
    return NULL;
  json_t *o = json_object();
#define SET(f) json_object_set_new(o, #f, json_integer((json_int_t)c.f));
  COUNT_FIELDS(SET)
#undef SET
  char *text = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return text;
}

/* Counts another host left on its row: 1, or 0 when it left none that
 * read (an older duro's host, one that has not renewed yet). */
int engine_host_counts_parse(const char *text, duro_host_counts *out) {
  json_t *o = text ? json_loads(text, 0, NULL) : NULL;
  if (!json_is_object(o)) {
    json_decref(o);
    return 0;
  }
  *out = (duro_host_counts){0};
#define GET(f) out->f = (int64_t)json_integer_value(json_object_get(o, #f));
  COUNT_FIELDS(GET)
#undef GET
  json_decref(o);
  return 1;
}

static void add_totals(duro_host_list *l, const duro_host_info *h) {
  duro_host_counts *t = &l->totals;
  const duro_host_counts *c = &h->counts;
  t->activations += c->activations;
  t->steps_completed += c->steps_completed;
  t->attempts_failed += c->attempts_failed;
  t->retries += c->retries;
  t->instances_created += c->instances_created;
  t->events_sent += c->events_sent;
  if (h->alive) { /* the gauges of a host that is gone say nothing now */
    t->backlog += c->backlog;
    t->in_flight += c->in_flight;
    l->live_total += h->live;
  }
}

static void add_host(void *arg, const journal_host_row *row) {
  hosts_ctx *c = arg;
  duro_host_list *l = c->out;
  if (l->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 8;
    l->v = xrealloc(l->v, c->cap * sizeof *l->v);
  }
  l->v[l->n++] = (duro_host_info){
      .id = row->id,
      .name = xstrdup(row->name ? row->name : ""),
      .pid = row->pid,
      .started_ms = row->started_ms,
      .heartbeat_ms = row->heartbeat_ms,
      .heartbeat_age_ms = row->heartbeat_age_ms,
      .lease_ms = row->lease_ms,
      .dead = row->dead,
      .alive = !row->dead && row->heartbeat_age_ms <= row->lease_ms,
      .me = row->id == c->me,
      .live = row->live};
  duro_host_info *h = &l->v[l->n - 1];
  if (h->me) { /* this host's own, as they are now */
    engine_host_counts(c->e, &h->counts);
    h->counted = 1;
  } else
    h->counted = engine_host_counts_parse(row->counts, &h->counts);
  add_totals(l, h);
}

/* The store's instances that have not ended, for a host alone. */
static void count_live(void *arg, const char *workflow, duro_status status,
                       int64_t n) {
  (void)workflow;
  if (!duro_status_ended(status))
    *(int64_t *)arg += n;
}

int duro_hosts_read(duro_engine *e, duro_host_list *out) {
  *out = (duro_host_list){0};
  hosts_ctx c = {.e = e, .out = out, .me = journal_host(e->j)};
  if (c.me) {
    out->shared = 1;
    int rc = journal_hosts_each(e->j, add_host, &c);
    if (rc)
      duro_host_list_free(out);
    return rc;
  }
  int64_t live = 0;
  int rc = journal_count_by_status(e->j, count_live, &live);
  if (rc)
    return rc;
  char name[256] = "";
  gethostname(name, sizeof name - 1);
  int64_t now = duro_clock_now(e->clock);
  journal_host_row self = {.name = name,
                           .pid = getpid(),
                           .started_ms = e->history.since_ms,
                           .heartbeat_ms = now,
                           .live = live};
  add_host(&c, &self); /* id 0, this host's own (c.me 0) */
  return 0;
}

void duro_host_list_free(duro_host_list *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->v[i].name);
  free(l->v);
  *l = (duro_host_list){0};
}

/* The hosts of a shared store in GET /metrics: each host's counts, as
 * duro_host_*{host,name}, and the totals, as duro_cluster_* (the totals'
 * rule is duro_host_list's).  Nothing on a store one host has to itself:
 * its own figures are the engine's. */
void engine_hosts_metrics(duro_engine *e, FILE *out) {
  duro_host_list l;
  if (!journal_host(e->j) || duro_hosts_read(e, &l) != 0)
    return;
  static const struct {
    const char *name, *type, *help;
    size_t at; /* offset in duro_host_counts */
  } families[] = {
      {"backlog", "gauge", "Instances queued for a worker on the host.",
       offsetof(duro_host_counts, backlog)},
      {"in_flight", "gauge",
       "Instances runnable, running or under a control operation.",
       offsetof(duro_host_counts, in_flight)},
      {"activations_total", "counter", "Activations since the host started.",
       offsetof(duro_host_counts, activations)},
      {"steps_completed_total", "counter",
       "duro_do steps completed since the host started.",
       offsetof(duro_host_counts, steps_completed)},
      {"attempts_failed_total", "counter",
       "Failed duro_do attempts since the host started.",
       offsetof(duro_host_counts, attempts_failed)},
      {"instances_created_total", "counter",
       "Instances created on the host since it started.",
       offsetof(duro_host_counts, instances_created)},
      {"events_sent_total", "counter",
       "Events stored by the host since it started.",
       offsetof(duro_host_counts, events_sent)},
  };
  size_t alive = 0;
  fprintf(out, "# HELP duro_host_up Each host of the database: 1 while its "
               "lease holds.\n# TYPE duro_host_up gauge\n");
  for (size_t i = 0; i < l.n; i++) {
    fprintf(out, "duro_host_up{host=\"%" PRId64 "\",name=\"", l.v[i].id);
    metrics_label_put(out, l.v[i].name);
    fprintf(out, "\"} %d\n", l.v[i].alive);
    alive += (size_t)l.v[i].alive;
  }
  fprintf(out, "# HELP duro_host_instances Instances each host owns that "
               "have not ended.\n# TYPE duro_host_instances gauge\n");
  for (size_t i = 0; i < l.n; i++) {
    fprintf(out, "duro_host_instances{host=\"%" PRId64 "\",name=\"", l.v[i].id);
    metrics_label_put(out, l.v[i].name);
    fprintf(out, "\"} %" PRId64 "\n", l.v[i].live);
  }
  for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
    fprintf(out, "# HELP duro_host_%s %s\n# TYPE duro_host_%s %s\n",
            families[f].name, families[f].help, families[f].name,
            families[f].type);
    for (size_t i = 0; i < l.n; i++) {
      if (!l.v[i].counted)
        continue;
      const char *at = (const char *)&l.v[i].counts + families[f].at;
      fprintf(out, "duro_host_%s{host=\"%" PRId64 "\",name=\"",
              families[f].name, l.v[i].id);
      metrics_label_put(out, l.v[i].name);
      fprintf(out, "\"} %" PRId64 "\n", *(const int64_t *)at);
    }
  }
  fprintf(out,
          "# HELP duro_cluster_hosts_alive Hosts of the database whose "
          "lease holds.\n# TYPE duro_cluster_hosts_alive gauge\n"
          "duro_cluster_hosts_alive %zu\n"
          "# HELP duro_cluster_instances Instances the live hosts own that "
          "have not ended.\n# TYPE duro_cluster_instances gauge\n"
          "duro_cluster_instances %" PRId64 "\n",
          alive, l.live_total);
  for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
    const char *at = (const char *)&l.totals + families[f].at;
    fprintf(out,
            "# HELP duro_cluster_%s The hosts' duro_host_%s together.\n"
            "# TYPE duro_cluster_%s %s\nduro_cluster_%s %" PRId64 "\n",
            families[f].name, families[f].name, families[f].name,
            families[f].type, families[f].name, *(const int64_t *)at);
  }
  duro_host_list_free(&l);
}
