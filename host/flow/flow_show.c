/* flow_show.c — what flow control shows (flow.h): each rule's keys
 * counted and its busiest ones (GET /workflows/{wf}), why an instance
 * waits (describe's waiting_for), and its gauges in /metrics. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "flow.h"
#include "flow_internal.h"
#include "metrics.h"
#include "util.h"

typedef struct stats_ctx {
  flow_state *fs;
  const char *workflow;
  size_t max_keys;
  duro_flow_stats *out;
  int rc;
} stats_ctx;

typedef struct keys_ctx {
  duro_flow_rule_stat *rs;
  size_t max;
} keys_ctx;

/* Busier: more waiting, then more running. */
static int busier(const duro_flow_key_stat *a, const flow_key *k) {
  return a->waiting != k->waiting ? k->waiting > a->waiting
                                  : k->running > a->running;
}

static void count_key(void *ctx, int64_t hash, void *val) {
  (void)hash;
  keys_ctx *c = ctx;
  duro_flow_rule_stat *rs = c->rs;
  for (flow_key *k = val; k; k = k->next) {
    rs->keys++;
    rs->running += k->running;
    rs->waiting += k->waiting;
    if (!c->max || (!k->running && !k->waiting))
      continue;
    /* kept sorted, busiest first: an insertion into at most max */
    size_t at = rs->n_top;
    while (at > 0 && busier(&rs->top[at - 1], k))
      at--;
    if (at >= c->max)
      continue;
    if (rs->n_top == c->max)
      free(rs->top[--rs->n_top].value);
    memmove(&rs->top[at + 1], &rs->top[at], (rs->n_top - at) * sizeof *rs->top);
    rs->top[at] = (duro_flow_key_stat){.value = xstrdup(k->value),
                                       .running = k->running,
                                       .waiting = k->waiting};
    rs->n_top++;
  }
}

static void stats_under_lock(duro_engine *e, void *arg) {
  stats_ctx *c = arg;
  wf_reg *wf = engine_find_workflow(e, c->workflow);
  if (!wf) {
    c->rc = DURO_E_NOT_FOUND;
    return;
  }
  const duro_workflow_limits *lim = engine_workflow_limits(wf);
  if (!lim->n_flow_concurrency && !lim->n_flow_rate)
    return;
  flow_rules *fr = flow_rules_of(c->fs, c->workflow, lim);
  c->out->v = xcalloc(fr->n, sizeof *c->out->v);
  c->out->n = fr->n;
  for (size_t i = 0; i < fr->n; i++) {
    const flow_rule *r = &fr->v[i];
    duro_flow_rule_stat *rs = &c->out->v[i];
    rs->key = xstrdup_null(r->pointer);
    rs->rate = r->rate;
    rs->limit = r->limit;
    if (r->rate) {
      const duro_flow_rate *src = &lim->flow_rate[i - lim->n_flow_concurrency];
      rs->period_ms = src->period_ms;
      rs->burst = src->burst ? src->burst : 1;
    }
    rs->top = c->max_keys ? xcalloc(c->max_keys, sizeof *rs->top) : NULL;
    keys_ctx kc = {rs, c->max_keys};
    idmap_each(&r->keys, count_key, &kc);
  }
}

int duro_flow_stats_read(duro_engine *e, const char *workflow, size_t max_keys,
                         duro_flow_stats *out) {
  *out = (duro_flow_stats){0};
  flow_state *fs = duro_engine_driver_state(e, &flow_driver);
  if (!fs)
    return DURO_E_NOT_FOUND;
  stats_ctx c = {fs, workflow, max_keys, out, 0};
  engine_gate_run(e, stats_under_lock, &c);
  return c.rc;
}

void duro_flow_stats_free(duro_flow_stats *s) {
  for (size_t i = 0; i < s->n; i++) {
    for (size_t k = 0; k < s->v[i].n_top; k++)
      free(s->v[i].top[k].value);
    free(s->v[i].top);
    free(s->v[i].key);
  }
  free(s->v);
  *s = (duro_flow_stats){0};
}

typedef struct why_ctx {
  flow_state *fs;
  int64_t rowid;
  char *why;
} why_ctx;

static void why_under_lock(duro_engine *e, void *arg) {
  (void)e;
  why_ctx *c = arg;
  flow_parked *p = idmap_get(&c->fs->by_rowid, c->rowid);
  if (!p)
    return;
  const flow_rule *r = p->rule;
  const flow_key *k = p->key;
  const char *ptr = r->pointer ? r->pointer : "(the workflow)";
  const char *eq = r->pointer ? "=" : "";
  const char *val = r->pointer ? k->value : "";
  /* its place in the order, when the workflow has one */
  char place[200] = "";
  if (r->order->priority_key)
    snprintf(place, sizeof place, "; priority %" PRId64,
             backlog_waiter_priority(&p->link));
  if (r->order->fairness_key) {
    size_t used = strlen(place);
    snprintf(place + used, sizeof place - used, "; turns by %s=%s",
             r->order->fairness_key,
             *backlog_waiter_lane(&p->link) ? backlog_waiter_lane(&p->link)
                                            : "(none)");
  }
  if (r->rate)
    c->why =
        xasprintf("flow: rate %s%s%s (%u a %.0f ms; %u waiting%s)", ptr, eq,
                  val, r->limit, r->interval_ms * r->limit, k->waiting, place);
  else
    c->why = xasprintf("flow: concurrency %s%s%s (%u of %u running; %u "
                       "waiting%s)",
                       ptr, eq, val, k->running, r->limit, k->waiting, place);
}

char *duro_flow_why(duro_engine *e, const char *workflow, const char *id) {
  flow_state *fs = duro_engine_driver_state(e, &flow_driver);
  if (!fs)
    return NULL;
  journal_instance in = {0};
  if (journal_instance_get(engine_journal(e), workflow, id, &in) != 0)
    return NULL;
  why_ctx c = {fs, in.rowid, NULL};
  journal_instance_clear(&in);
  engine_gate_run(e, why_under_lock, &c);
  return c.why;
}

typedef struct metrics_ctx {
  flow_state *fs;
  FILE *out;
} metrics_ctx;

static void metrics_under_lock(duro_engine *e, void *arg) {
  (void)e;
  metrics_ctx *c = arg;
  flow_state *fs = c->fs;
  int any = 0;
  for (int series = 0; series < 2; series++) {
    for (size_t i = 0; i < fs->workflows.cap; i++) {
      flow_rules *fr = fs->workflows.vals[i];
      if (!fs->workflows.keys[i] || !fr)
        continue;
      for (size_t r = 0; r < fr->n; r++) {
        duro_flow_rule_stat rs = {0};
        keys_ctx kc = {&rs, 0};
        idmap_each(&fr->v[r].keys, count_key, &kc);
        if (!any++)
          fprintf(c->out,
                  "# HELP duro_flow_running Activations running under a "
                  "concurrency rule of flow control\n"
                  "# TYPE duro_flow_running gauge\n"
                  "# HELP duro_flow_waiting Activations queued for their "
                  "key's turn under a flow rule\n"
                  "# TYPE duro_flow_waiting gauge\n");
        if (series == 0 && fr->v[r].rate)
          continue;
        fprintf(c->out, "%s{workflow=\"",
                series ? "duro_flow_waiting" : "duro_flow_running");
        metrics_label_put(c->out, fr->workflow);
        fprintf(c->out, "\",rule=\"%s ",
                fr->v[r].rate ? "rate" : "concurrency");
        metrics_label_put(c->out, fr->v[r].pointer ? fr->v[r].pointer : "*");
        fprintf(c->out, "\"} %llu\n",
                (unsigned long long)(series ? rs.waiting : rs.running));
      }
    }
  }
}

void flow_metrics(duro_engine *e, void *state, FILE *out) {
  metrics_ctx c = {state, out};
  engine_gate_run(e, metrics_under_lock, &c);
}
