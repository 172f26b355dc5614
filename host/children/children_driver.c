/* children_driver.c — the children driver (children.h): a child's end
 * told its parent, and a parent's end carried to its children. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "children.h"
#include "core.h"
#include "error.h"
#include "log.h"
#include "util.h"

/* Children asked to terminate a pass at most: a full batch makes the
 * pass go again. */
#define ORPHANS_PER_PASS 64
/* How often the children of ended parents are looked for. */
#define ORPHANS_EVERY_MS 1000

/* {"status":...,"output":...} or {...,"error":...}: the texts stored are
 * JSON already, and go in as they are. */
static char *end_payload(const journal_instance *row) {
  const char *status = duro_status_name(row->status);
  if (row->status == DURO_STATUS_COMPLETE)
    return xasprintf("{\"status\":\"%s\",\"output\":%s}", status,
                     row->output ? row->output : "null");
  return xasprintf("{\"status\":\"%s\",\"error\":%s}", status,
                   row->error ? row->error : "null");
}

/* In the commit that ends a child: the event its parent's
 * duro_child_wait takes, and the parent's wake if it waits for it (the
 * engine pokes it once the commit lands). */
static void child_changed(duro_engine *e, void *state, journal_batch *b,
                          const journal_instance *row,
                          const duro_workflow_limits *limits,
                          duro_status from_status, int64_t from_started_ms,
                          int64_t now) {
  (void)e, (void)state, (void)limits, (void)from_started_ms;
  if (row->parent <= 0 || !duro_status_ended(row->status) ||
      duro_status_ended(from_status))
    return;
  char *type =
      journal_batch_own(b, engine_child_event_type(row->workflow, row->id));
  journal_op *op = journal_batch_add(b, JOP_EVENT_INSERT);
  op->rowid = row->parent;
  op->event_type = type;
  op->event_payload = journal_batch_own(b, end_payload(row));
  op->ts_ms = now;
  journal_op *wake = journal_batch_add(b, JOP_WAKE_IF_WAITING);
  wake->rowid = row->parent;
  wake->event_type = type;
  wake->ts_ms = now;
}

typedef struct orphan {
  char *workflow, *id;
  int rollback; /* parent_close: rollback */
} orphan;

typedef struct orphans {
  orphan v[ORPHANS_PER_PASS];
  size_t n;
} orphans;

static void collect(void *ctx, int64_t rowid, const char *workflow,
                    const char *id, int parent_close) {
  orphans *o = ctx;
  (void)rowid;
  if (o->n < ORPHANS_PER_PASS)
    o->v[o->n++] = (orphan){xstrdup(workflow), xstrdup(id),
                            parent_close == JOURNAL_PARENT_CLOSE_ROLLBACK};
}

size_t duro_children_dispatch(duro_engine *e) {
  orphans o = {.n = 0};
  if (journal_orphans_each(engine_journal(e), ORPHANS_PER_PASS, collect, &o) !=
      0) {
    log_error("children: reading the children of ended parents: %s",
              journal_errmsg(engine_journal(e)));
    return 0;
  }
  size_t asked = 0;
  for (size_t i = 0; i < o.n; i++) {
    int rc =
        o.v[i].rollback
            ? duro_instance_terminate_rollback(e, o.v[i].workflow, o.v[i].id)
            : engine_terminate_nowait(e, o.v[i].workflow, o.v[i].id);
    asked += rc == 0;
    if (rc == 0)
      log_write(DURO_LOG_INFO, NULL,
                "%s/%s terminated: its parent ended (parent_close: %s)",
                o.v[i].workflow, o.v[i].id,
                o.v[i].rollback ? "rollback, its rollbacks first"
                                : "terminate");
    else if (rc != DURO_E_CANNOT_TERMINATE && rc != DURO_E_NOT_FOUND)
      log_error("children: terminating %s/%s: %s", o.v[i].workflow, o.v[i].id,
                duro_err_str(rc));
    free(o.v[i].workflow);
    free(o.v[i].id);
  }
  return asked;
}

/* When the driver looks next (engine_mono_ms): the scheduler passes far
 * more often than once a second (each kick), and the look is a query. */
typedef struct children_state {
  int64_t due;
} children_state;

static void *driver_create(duro_engine *e) {
  (void)e;
  return xcalloc(1, sizeof(children_state));
}

static int orphans_dispatch(duro_engine *e, void *state, int64_t *next_ms) {
  children_state *s = state;
  int64_t mono = engine_mono_ms(e);
  int more = 0;
  if (mono >= s->due) {
    more = duro_children_dispatch(e) == ORPHANS_PER_PASS;
    s->due = more ? mono : mono + ORPHANS_EVERY_MS;
  }
  *next_ms = engine_now(e) + (s->due - mono);
  return more;
}

const duro_driver children_driver = {
    .name = "children",
    .create = driver_create,
    .dispatch = orphans_dispatch,
    .instance_changed = child_changed,
    .free = free,
};
