/* debounce.c — flow.debounce (issue 26): the creates whose params hold
 * one value at a key (`/docId`; no key: the whole workflow is one) that
 * come within `period` of the last are one instance.  The first creates
 * it, queued, its start put off by `period`; each later one creates
 * nothing: its params replace the instance's and the start moves to
 * `period` from it, but never past `max_wait` after the first create.
 * Once the key has been quiet that long the instance starts with the
 * last params, and the next create of the key makes a new one.  An
 * instance whose params lack the key is not debounced.
 *
 * The journal holds it all, so a kill -9 loses nothing: the instance is
 * a queued row whose wake_ms is its start, and a create merged into it is
 * a JOP_INSTANCE_RESCHEDULE (params and wake_ms, only while it has not
 * started) in the create's own commit, acknowledged once on disk.  On
 * start the pending instances are read back (journal_live_each).  The
 * engine commits a workflow's creates in the order they were claimed
 * (engine_create.c's claim_mu), so a merge into an instance whose own
 * create is still on its way lands after the insert.
 *
 * Each key keeps the instance creates merge into (`open`).  A pending
 * instance's first activation is parked (admit) until its start is due,
 * no merge is on its way into it and the params it read are the last
 * merged; the scheduler's pass hands the parked starts whose time came
 * to the runnable FIFO (a heap by due time).  Lock order: the engine's
 * lock, then `mu`; the committed hook takes only `mu`.
 *
 * Across the hosts of a shared store (PostgreSQL) the pending instance's
 * row holds its key as its claim key (the create's insert carries it),
 * one live row of the workflow a key.  A create on another host meets it
 * there and merges into that row instead (engine_create.c,
 * journal_claim_merge: its params, its start moved on).  So before a
 * pending instance starts, its host lets go of the key in the store
 * (journal_claim_release, on the scheduler's pass outside the engine's
 * lock), which says whether another host's merge moved its start on
 * (it waits again) and with which params it starts: a merge lands
 * either before that, in those params, or after, finding no pending
 * instance. */
#include "debounce.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "log.h"
#include "map.h"
#include "metrics.h"
#include "params_key.h"
#include "util.h"

#define RELEASE_RETRY_MS 100

/* An instance waiting for its key's quiet spell. */
typedef struct dbc_member {
  struct dbc_key *key; /* NULL once it no longer takes creates */
  struct dbc_workflow *wf;
  int64_t rowid; /* 0 while its create's commit is on its way */
  char *id;
  /* the last merged params (what it must start with), as a hash and a
   * length: params may be a megabyte, and many instances may wait */
  int64_t params_hash;
  size_t params_len;
  int64_t first_ms;         /* its first create */
  int64_t due_ms;           /* it starts no sooner */
  uint32_t creates;         /* creates it took, its own included */
  uint32_t merging;         /* merges claimed, their commits on the way */
  duro_gate_ticket *ticket; /* its start, parked until due */
  /* shared store: its row let go of its key there (or never held one);
   * the pass is letting go of it */
  int released, releasing;
  struct dbc_member *id_next; /* the next of the same hash of its id */
} dbc_member;

/* A value of a debounce's key with an instance that takes its creates. */
typedef struct dbc_key {
  params_key_node node; /* first: its value ("" for a debounce without a
                           key), in its workflow's keys */
  struct dbc_workflow *wf;
  dbc_member *open;
} dbc_key;

typedef struct dbc_workflow {
  char *name;
  char *pointer; /* NULL: the whole workflow is one key */
  int64_t period_ms, max_wait_ms;
  idmap keys; /* its values (params_keys_*) -> dbc_key */
  uint64_t pending, merged;
} dbc_workflow;

typedef struct dbc_due {
  int64_t due_ms, rowid;
} dbc_due;

typedef struct dbc_state {
  duro_engine *e;
  pthread_mutex_t mu; /* all below; taken last, under the engine's lock */
  int active;         /* a debounced workflow is registered (atomic) */
  strmap workflows;   /* name -> dbc_workflow */
  idmap by_rowid;     /* rowid -> dbc_member */
  idmap by_id;        /* hash of "workflow\nid" -> dbc_member chain */
  dbc_due *heap;      /* parked starts by due time (stale ones skipped) */
  size_t n_heap, cap_heap;
  int64_t next_told; /* the earliest due the scheduler knows of */
  int shared;        /* a store several hosts share: it holds the keys */
  /* shared: the rowids of members whose key the next pass lets go of */
  int64_t *release;
  size_t n_release, cap_release;
} dbc_state;

/* The key's value in params as compact JSON text (malloc'ed): "" for a
 * debounce without a key, NULL when the params lack it. */
static char *value_of(const dbc_workflow *w, const char *params) {
  return w->pointer ? params_key_value(w->pointer, params) : xstrdup("");
}

static dbc_key *key_find(dbc_workflow *w, const char *value) {
  return (dbc_key *)params_keys_find(&w->keys, value);
}

static dbc_key *key_of(dbc_workflow *w, const char *value) {
  dbc_key *k = key_find(w, value);
  if (k)
    return k;
  k = xcalloc(1, sizeof *k);
  k->wf = w;
  k->node.value = xstrdup(value);
  params_keys_add(&w->keys, &k->node);
  return k;
}

static void key_drop(dbc_key *k) {
  params_keys_remove(&k->wf->keys, &k->node);
  free(k->node.value);
  free(k);
}

/* m takes no more creates: its key's next create makes a new instance. */
static void close_member(dbc_member *m) {
  dbc_key *k = m->key;
  if (!k)
    return;
  m->key = NULL;
  if (k->open == m) {
    k->open = NULL;
    key_drop(k);
  }
}

static void heap_push(dbc_state *st, int64_t due_ms, int64_t rowid) {
  if (st->n_heap == st->cap_heap) {
    st->cap_heap = st->cap_heap ? 2 * st->cap_heap : 64;
    st->heap = xrealloc(st->heap, st->cap_heap * sizeof *st->heap);
  }
  size_t i = st->n_heap++;
  while (i > 0 && st->heap[(i - 1) / 2].due_ms > due_ms) {
    st->heap[i] = st->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  st->heap[i] = (dbc_due){due_ms, rowid};
}

static dbc_due heap_pop(dbc_state *st) {
  dbc_due top = st->heap[0], last = st->heap[--st->n_heap];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= st->n_heap)
      break;
    if (c + 1 < st->n_heap && st->heap[c + 1].due_ms < st->heap[c].due_ms)
      c++;
    if (st->heap[c].due_ms >= last.due_ms)
      break;
    st->heap[i] = st->heap[c];
    i = c;
  }
  if (st->n_heap)
    st->heap[i] = last;
  return top;
}

/* m's params are these from now on. */
static void params_note(dbc_member *m, const char *params) {
  const char *p = params ? params : "null";
  m->params_hash = params_key_hash(p, NULL);
  m->params_len = strlen(p);
}

/* Whether params are the last m was given. */
static int params_are(const dbc_member *m, const char *params) {
  const char *p = params ? params : "null";
  return strlen(p) == m->params_len &&
         params_key_hash(p, NULL) == m->params_hash;
}

static dbc_member *member_new(dbc_state *st, dbc_workflow *w, dbc_key *k,
                              int64_t rowid, const char *id, const char *params,
                              int64_t first_ms, int64_t due_ms) {
  dbc_member *m = xcalloc(1, sizeof *m);
  *m = (dbc_member){.key = k,
                    .wf = w,
                    .rowid = rowid,
                    .id = xstrdup(id),

                    .first_ms = first_ms,
                    .due_ms = due_ms,
                    .creates = 1};
  params_note(m, params);
  int64_t h = params_key_hash(w->name, id);
  m->id_next = idmap_get(&st->by_id, h);
  idmap_put(&st->by_id, h, m);
  if (rowid)
    idmap_put(&st->by_rowid, rowid, m);
  if (k)
    k->open = m;
  w->pending++;
  return m;
}

static dbc_member *member_by_id(dbc_state *st, const char *workflow,
                                const char *id) {
  for (dbc_member *m = idmap_get(&st->by_id, params_key_hash(workflow, id)); m;
       m = m->id_next)
    if (!strcmp(m->id, id) && !strcmp(m->wf->name, workflow))
      return m;
  return NULL;
}

/* m started, ended or was never created: it is forgotten. */
static void member_drop(dbc_state *st, dbc_member *m) {
  close_member(m);
  int64_t h = params_key_hash(m->wf->name, m->id);
  dbc_member *head = idmap_get(&st->by_id, h);
  if (head == m) {
    if (m->id_next)
      idmap_put(&st->by_id, h, m->id_next);
    else
      idmap_del(&st->by_id, h);
  } else {
    for (dbc_member *p = head; p; p = p->id_next)
      if (p->id_next == m) {
        p->id_next = m->id_next;
        break;
      }
  }
  if (m->rowid && idmap_get(&st->by_rowid, m->rowid) == m)
    idmap_del(&st->by_rowid, m->rowid);
  m->wf->pending--;
  free(m->id);
  free(m);
}

/* Whether m may start at `now`. */
static int may_start(const dbc_member *m, int64_t now) {
  return m->merging == 0 && now >= m->due_ms;
}

/* m's parked start goes to the heap for its due time; the scheduler is
 * told when that is sooner than it knows (under the engine's lock). */
static void schedule(dbc_state *st, dbc_member *m) {
  heap_push(st, m->due_ms, m->rowid);
  if (m->due_ms < st->next_told) {
    st->next_told = m->due_ms;
    engine_gate_kick_locked(st->e);
  }
}

static dbc_workflow *workflow_of(dbc_state *st, const char *name) {
  return name ? strmap_get(&st->workflows, name) : NULL;
}

static void *debounce_create(duro_engine *e) {
  dbc_state *st = xcalloc(1, sizeof *st);
  st->e = e;
  st->next_told = INT64_MAX;
  pthread_mutex_init(&st->mu, NULL);
  return st;
}

/* ---- start: the pending instances read from the journal ---- */

static void load_pending(void *ctx, const journal_live_row *row) {
  void **c = ctx;
  dbc_state *st = c[0];
  dbc_workflow *w = c[1];
  if (row->started_ms != JOURNAL_NONE ||
      (row->status != DURO_STATUS_QUEUED && row->status != DURO_STATUS_PAUSED))
    return;
  char *value = value_of(w, row->params);
  if (!value)
    return;
  dbc_key *k = key_of(w, value);
  if (k->open) /* an older one of the key: it takes no more creates */
    k->open->key = NULL;
  int64_t due = row->wake_ms != JOURNAL_NONE ? row->wake_ms
                                             : row->created_ms + w->period_ms;
  member_new(st, w, k, row->rowid, row->id, row->params, row->created_ms, due);
  free(value);
}

static void debounce_start(duro_engine *e, void *state) {
  dbc_state *st = state;
  st->shared = journal_slots_shared(engine_journal(e));
  const char *name;
  for (size_t i = 0; (name = engine_workflow_name_at(e, i)) != NULL; i++) {
    const duro_workflow_limits *lim =
        engine_workflow_limits(engine_find_workflow(e, name));
    if (lim->flow_debounce_ms <= 0)
      continue;
    dbc_workflow *w = xcalloc(1, sizeof *w);
    w->name = xstrdup(name);
    w->pointer =
        lim->flow_debounce_key ? xstrdup(lim->flow_debounce_key) : NULL;
    w->period_ms = lim->flow_debounce_ms;
    w->max_wait_ms = lim->flow_debounce_max_wait_ms;
    strmap_put(&st->workflows, w->name, w);
    /* before any activation: the state is this thread's alone */
    void *ctx[2] = {st, w};
    if (journal_live_each(engine_journal(e), name, load_pending, ctx) != 0)
      log_error("flow.debounce of %s: reading its pending instances: %s", name,
                journal_errmsg(engine_journal(e)));
  }
  __atomic_store_n(&st->active, st->workflows.len > 0, __ATOMIC_RELEASE);
}

/* ---- the journal's changes: an instance that ended is forgotten ---- */

static void debounce_committed(duro_engine *e, void *state,
                               const journal_batch *b) {
  (void)e;
  dbc_state *st = state;
  if (!__atomic_load_n(&st->active, __ATOMIC_ACQUIRE))
    return;
  pthread_mutex_lock(&st->mu);
  for (size_t i = 0; i < b->n; i++) {
    const journal_op *op = &b->ops[i];
    if (op->kind != JOP_INSTANCE_SET || !op->inst ||
        !duro_status_ended(op->inst->status))
      continue;
    int64_t rowid = op->inst->rowid ? op->inst->rowid : op->rowid;
    dbc_member *m = idmap_get(&st->by_rowid, rowid);
    /* (a start it had parked is the engine's to forget: a terminate) */
    if (m)
      member_drop(st, m);
  }
  pthread_mutex_unlock(&st->mu);
}

/* ---- creates ---- */

/* When a pending instance first created at first_ms starts if its key
 * stays quiet from now on. */
static int64_t due_from(const dbc_workflow *w, int64_t first_ms, int64_t now) {
  int64_t due = now + w->period_ms;
  if (w->max_wait_ms > 0 && due > first_ms + w->max_wait_ms)
    due = first_ms + w->max_wait_ms;
  return due;
}

static int debounce_claim(duro_engine *e, void *state, const char *workflow,
                          const duro_workflow_limits *limits, const char *id,
                          const char *params, duro_claim *claim) {
  (void)limits;
  dbc_state *st = state;
  int rc = DURO_CLAIM_TAKE;
  int64_t now = engine_now(e);
  pthread_mutex_lock(&st->mu);
  dbc_workflow *w = workflow_of(st, workflow);
  char *value = w ? value_of(w, params) : NULL;
  dbc_key *k = value ? key_find(w, value) : NULL;
  dbc_member *m = k ? k->open : NULL;
  /* due, or past its bound: it starts with what it has */
  if (m && (now >= m->due_ms ||
            (w->max_wait_ms > 0 && now >= m->first_ms + w->max_wait_ms))) {
    close_member(m);
    m = NULL;
  }
  if (m) {
    m->merging++;
    m->creates++;
    m->due_ms = due_from(w, m->first_ms, now);
    params_note(m, params);
    w->merged++;
    claim->live = xstrdup(m->id);
    claim->wake_ms = m->due_ms;
    rc = DURO_CLAIM_MERGE;
    /* m's insert may yet meet another host's: the store's holder then */
    if (st->shared)
      claim->key = xstrdup(value);
  } else if (value) {
    int64_t due = due_from(w, now, now);
    member_new(st, w, key_of(w, value), 0, id, params, now, due);
    claim->wake_ms = due;
    rc = DURO_CLAIM_HELD;
    /* the store keeps the key too: another host's creates merge there */
    if (st->shared)
      claim->key = xstrdup(value);
  }
  free(value);
  pthread_mutex_unlock(&st->mu);
  return rc;
}

static void debounce_settled(duro_engine *e, void *state, const char *workflow,
                             int claim, const char *id, int64_t rowid) {
  (void)e;
  dbc_state *st = state;
  pthread_mutex_lock(&st->mu);
  dbc_member *m = member_by_id(st, workflow, id);
  if (m && claim == DURO_CLAIM_HELD && !m->rowid) {
    if (rowid) {
      m->rowid = rowid;
      idmap_put(&st->by_rowid, rowid, m);
    } else {
      member_drop(st, m); /* not created (its id was taken) */
    }
  } else if (m && claim == DURO_CLAIM_MERGE && m->merging) {
    m->merging--;
    if (!rowid) /* it ended first */
      close_member(m);
    else if (m->ticket && m->merging == 0)
      schedule(st, m);
  }
  pthread_mutex_unlock(&st->mu);
}

/* ---- the gate ---- */

static int debounce_admit(duro_engine *e, void *state, const char *workflow,
                          const duro_workflow_limits *limits, int64_t rowid,
                          const char *params, int first,
                          duro_gate_ticket *ticket, void **hold) {
  (void)workflow, (void)limits;
  dbc_state *st = state;
  *hold = NULL;
  if (!first)
    return 1;
  pthread_mutex_lock(&st->mu);
  dbc_member *m = idmap_get(&st->by_rowid, rowid);
  dbc_workflow *w;
  char *value;
  if (!m && st->shared && (w = workflow_of(st, workflow)) != NULL &&
      (value = value_of(w, params)) != NULL) {
    /* a first start this host knew nothing of: an instance it took over
     * from a host that stopped (or a restarted one).  Its row says when
     * it starts and with what, and holds its key while it is pending:
     * its start waits for the key let go of, as one of its own does (its
     * id is read with the row: member_new's "" stands for it) */
    int64_t now = engine_now(e);
    m = member_new(st, w, NULL, rowid, "", params, now, now);
    free(value);
  }
  int runs = 1;
  if (m && may_start(m, engine_now(e)) && params_are(m, params) &&
      (!st->shared || m->released)) {
    member_drop(st, m); /* it starts: its key's next create makes another */
  } else if (m) {
    /* not due, a merge on its way, or it read params a merge replaced
     * since (it is handed again, and reads them again) */
    m->ticket = ticket;
    if (m->merging == 0) {
      if (may_start(m, engine_now(e)))
        m->due_ms = engine_now(e); /* stale params: again at once */
      schedule(st, m);
    }
    runs = 0;
  }
  pthread_mutex_unlock(&st->mu);
  return runs;
}

static void debounce_forget(duro_engine *e, void *state,
                            duro_gate_ticket *ticket) {
  (void)e;
  dbc_state *st = state;
  pthread_mutex_lock(&st->mu);
  dbc_member *m = idmap_get(&st->by_rowid, engine_gate_ticket_rowid(ticket));
  if (m && m->ticket == ticket)
    m->ticket = NULL;
  pthread_mutex_unlock(&st->mu);
}

/* ---- the scheduler's pass: the parked starts whose time came ---- */

typedef struct pass_ctx {
  dbc_state *st;
  size_t handed;
  int64_t next;
} pass_ctx;

/* m is due: the next pass lets go of its key in the store (mu held). */
static void release_ask(dbc_state *st, dbc_member *m) {
  if (m->releasing)
    return;
  m->releasing = 1;
  if (st->n_release == st->cap_release) {
    st->cap_release = st->cap_release ? 2 * st->cap_release : 16;
    st->release = xrealloc(st->release, st->cap_release * sizeof *st->release);
  }
  st->release[st->n_release++] = m->rowid;
}

typedef struct release_job {
  int64_t rowid;
  char *workflow, *id; /* copies: the member may go meanwhile */
  int rc;
  char *params;
  int64_t wake_ms;
} release_job;

typedef struct release_ctx {
  dbc_state *st;
  release_job *jobs;
  size_t n;
  int64_t now;
} release_ctx;

static void release_collect(duro_engine *e, void *arg) {
  release_ctx *c = arg;
  dbc_state *st = c->st;
  c->now = engine_now(e);
  pthread_mutex_lock(&st->mu);
  c->jobs = xcalloc(st->n_release ? st->n_release : 1, sizeof *c->jobs);
  for (size_t i = 0; i < st->n_release; i++) {
    dbc_member *m = idmap_get(&st->by_rowid, st->release[i]);
    if (m && m->releasing)
      c->jobs[c->n++] = (release_job){.rowid = m->rowid,
                                      .workflow = xstrdup(m->wf->name),
                                      .id = xstrdup(m->id)};
  }
  st->n_release = 0;
  pthread_mutex_unlock(&st->mu);
}

/* The store's answers: a member let go of its key starts with the params
 * the store had (handed again, it reads them); one whose start another
 * host's merge moved on waits for that; after a failure, again soon. */
static void release_apply(duro_engine *e, void *arg) {
  (void)e;
  release_ctx *c = arg;
  dbc_state *st = c->st;
  pthread_mutex_lock(&st->mu);
  for (size_t i = 0; i < c->n; i++) {
    release_job *j = &c->jobs[i];
    dbc_member *m = idmap_get(&st->by_rowid, j->rowid);
    if (!m || !m->releasing)
      continue;
    m->releasing = 0;
    if (j->params)
      params_note(m, j->params);
    if (j->rc == 0 || j->rc == DURO_E_NOT_FOUND) {
      m->released = 1;
      m->due_ms = c->now;
    } else if (j->rc == DURO_E_BUSY) {
      m->due_ms = j->wake_ms;
    } else {
      m->due_ms = c->now + RELEASE_RETRY_MS;
    }
    if (m->ticket)
      schedule(st, m);
  }
  pthread_mutex_unlock(&st->mu);
}

/* Lets go of the due members' keys in the store, outside the engine's
 * lock. */
static void release_pass(duro_engine *e, dbc_state *st) {
  pthread_mutex_lock(&st->mu);
  size_t asked = st->n_release;
  pthread_mutex_unlock(&st->mu);
  if (!asked)
    return;
  release_ctx c = {.st = st};
  engine_gate_run(e, release_collect, &c);
  journal *j = engine_journal(e);
  for (size_t i = 0; i < c.n; i++) {
    release_job *job = &c.jobs[i];
    journal_instance inst = {0};
    if (!*job->id) { /* one it took over: its id is its row's */
      job->rc = journal_instance_get_rowid(j, job->rowid, &inst);
      if (job->rc == 0) {
        free(job->id);
        job->id = xstrdup(inst.id);
      }
      journal_instance_clear(&inst);
      if (job->rc != 0)
        continue;
    }
    job->rc = journal_claim_release(j, job->workflow, job->id, c.now,
                                    &job->params, &job->wake_ms);
  }
  engine_gate_run(e, release_apply, &c);
  for (size_t i = 0; i < c.n; i++) {
    free(c.jobs[i].workflow);
    free(c.jobs[i].id);
    free(c.jobs[i].params);
  }
  free(c.jobs);
}

static void hand_due(duro_engine *e, void *arg) {
  pass_ctx *c = arg;
  dbc_state *st = c->st;
  int64_t now = engine_now(e);
  pthread_mutex_lock(&st->mu);
  while (st->n_heap && st->heap[0].due_ms <= now) {
    dbc_due d = heap_pop(st);
    dbc_member *m = idmap_get(&st->by_rowid, d.rowid);
    if (!m || !m->ticket || !may_start(m, now))
      continue; /* stale: started, forgotten, moved on or a merge on its way */
    if (st->shared && !m->released) { /* the store's key first */
      close_member(m);
      release_ask(st, m);
      continue;
    }
    duro_gate_ticket *t = m->ticket;
    m->ticket = NULL;
    close_member(m); /* its start is due: it takes no more creates */
    engine_gate_ready_locked(e, t);
    c->handed++;
  }
  c->next = st->n_heap ? st->heap[0].due_ms : INT64_MAX;
  st->next_told = c->next;
  pthread_mutex_unlock(&st->mu);
}

static int debounce_dispatch(duro_engine *e, void *state, int64_t *next_ms) {
  dbc_state *st = state;
  *next_ms = INT64_MAX;
  if (!__atomic_load_n(&st->active, __ATOMIC_ACQUIRE))
    return 0;
  pass_ctx c = {st, 0, INT64_MAX};
  engine_gate_run(e, hand_due, &c);
  if (st->shared) { /* and those whose keys it let go of */
    release_pass(e, st);
    engine_gate_run(e, hand_due, &c);
  }
  *next_ms = c.next;
  return 0;
}

size_t duro_debounce_dispatch(duro_engine *e) {
  dbc_state *st = duro_engine_driver_state(e, &debounce_driver);
  if (!st || !__atomic_load_n(&st->active, __ATOMIC_ACQUIRE))
    return 0;
  pass_ctx c = {st, 0, INT64_MAX};
  engine_gate_run(e, hand_due, &c);
  if (st->shared) {
    release_pass(e, st);
    engine_gate_run(e, hand_due, &c);
  }
  return c.handed;
}

/* ---- what it shows ---- */

typedef struct why_ctx {
  dbc_state *st;
  const char *workflow, *id;
  char *why;
} why_ctx;

static void why_under_lock(duro_engine *e, void *arg) {
  why_ctx *c = arg;
  pthread_mutex_lock(&c->st->mu);
  dbc_member *m = member_by_id(c->st, c->workflow, c->id);
  if (m && m->rowid) {
    int64_t in = m->due_ms - engine_now(e);
    const char *ptr = m->wf->pointer ? m->wf->pointer : "";
    char *value = m->key ? m->key->node.value : NULL;
    c->why = xasprintf("flow: debounce%s%s%s%s (%" PRIu32
                       " create%s; starts in %" PRId64 " ms%s)",
                       *ptr ? " " : "", ptr, *ptr && value ? "=" : "",
                       *ptr && value ? value : "", m->creates,
                       m->creates == 1 ? "" : "s", in > 0 ? in : 0,
                       m->key ? " unless another comes" : "");
  }
  pthread_mutex_unlock(&c->st->mu);
}

char *duro_debounce_why(duro_engine *e, const char *workflow, const char *id) {
  dbc_state *st = duro_engine_driver_state(e, &debounce_driver);
  if (!st || !__atomic_load_n(&st->active, __ATOMIC_ACQUIRE))
    return NULL;
  why_ctx c = {st, workflow, id, NULL};
  engine_gate_run(e, why_under_lock, &c);
  return c.why;
}

typedef struct stats_ctx {
  dbc_state *st;
  const char *workflow;
  duro_debounce_stats *out;
} stats_ctx;

static void stats_under_lock(duro_engine *e, void *arg) {
  (void)e;
  stats_ctx *c = arg;
  pthread_mutex_lock(&c->st->mu);
  dbc_workflow *w = workflow_of(c->st, c->workflow);
  if (w)
    *c->out =
        (duro_debounce_stats){.key = xstrdup(w->pointer ? w->pointer : ""),
                              .period_ms = w->period_ms,
                              .max_wait_ms = w->max_wait_ms,
                              .pending = w->pending,
                              .merged = w->merged};
  pthread_mutex_unlock(&c->st->mu);
}

void duro_debounce_stats_read(duro_engine *e, const char *workflow,
                              duro_debounce_stats *out) {
  *out = (duro_debounce_stats){0};
  dbc_state *st = duro_engine_driver_state(e, &debounce_driver);
  if (!st)
    return;
  stats_ctx c = {st, workflow, out};
  engine_gate_run(e, stats_under_lock, &c);
}

static void debounce_metrics(duro_engine *e, void *state, FILE *out) {
  (void)e;
  dbc_state *st = state;
  pthread_mutex_lock(&st->mu);
  if (st->workflows.len)
    fprintf(out, "# HELP duro_debounce_pending Instances waiting for their "
                 "flow.debounce key's quiet spell\n"
                 "# TYPE duro_debounce_pending gauge\n"
                 "# HELP duro_debounce_merged_total Creates merged into a "
                 "pending instance by flow.debounce\n"
                 "# TYPE duro_debounce_merged_total counter\n");
  for (size_t i = 0; i < st->workflows.cap; i++) {
    dbc_workflow *w = st->workflows.vals[i];
    if (!st->workflows.keys[i] || !w)
      continue;
    fputs("duro_debounce_pending{workflow=\"", out);
    metrics_label_put(out, w->name);
    fprintf(out, "\"} %" PRIu64 "\nduro_debounce_merged_total{workflow=\"",
            w->pending);
    metrics_label_put(out, w->name);
    fprintf(out, "\"} %" PRIu64 "\n", w->merged);
  }
  pthread_mutex_unlock(&st->mu);
}

/* ---- free ---- */

static void free_key(void *ctx, int64_t hash, void *val) {
  (void)ctx, (void)hash;
  for (dbc_key *k = val, *next; k; k = next) {
    next = (dbc_key *)k->node.next;
    free(k->node.value);
    free(k);
  }
}

static void free_member(void *ctx, int64_t hash, void *val) {
  (void)ctx, (void)hash;
  for (dbc_member *m = val, *next; m; m = next) {
    next = m->id_next;
    free(m->id);
    free(m);
  }
}

static void debounce_free(void *state) {
  dbc_state *st = state;
  idmap_each(&st->by_id, free_member, NULL);
  idmap_free(&st->by_id);
  idmap_free(&st->by_rowid);
  for (size_t i = 0; i < st->workflows.cap; i++) {
    dbc_workflow *w = st->workflows.vals[i];
    if (!st->workflows.keys[i] || !w)
      continue;
    idmap_each(&w->keys, free_key, NULL);
    idmap_free(&w->keys);
    free(w->pointer);
    free(w->name);
    free(w);
  }
  strmap_free(&st->workflows);
  free(st->heap);
  free(st->release);
  pthread_mutex_destroy(&st->mu);
  free(st);
}

const duro_driver debounce_driver = {
    .name = "debounce",
    .create = debounce_create,
    .start = debounce_start,
    .dispatch = debounce_dispatch,
    .committed = debounce_committed,
    .claim_create = debounce_claim,
    .claim_settled = debounce_settled,
    .admit = debounce_admit,
    .forget = debounce_forget,
    .metrics = debounce_metrics,
    .free = debounce_free,
};
