/* hosts_list.c — the hosts that share this engine's store as GET /hosts
 * and `duro hosts list` show them (engine.h's duro_hosts_read): on a
 * shared store the store's rows (journal_hosts_each), this host marked;
 * on a store one host has to itself, this host alone. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_internal.h"
#include "status.h"
#include "util.h"

typedef struct hosts_ctx {
  duro_host_list *out;
  size_t cap;
  int64_t me;
} hosts_ctx;

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
  hosts_ctx c = {.out = out, .me = journal_host(e->j)};
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
