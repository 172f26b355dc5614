/* singleton.c — flow.singleton (issue 26): at most one live instance per
 * value of a key read from the create's params (`/userId`).  Live is
 * created and not ended: queued, running, waiting, sleeping and paused
 * instances hold their key; complete, errored and terminated ones do
 * not.  An instance whose params lack the key is not limited.
 *
 * Each key keeps its live instances (its members) oldest first.
 *   skip:  a create whose key has a member creates nothing and answers
 *          with that member's id (claim_create).  The key is claimed
 *          under the engine's lock before the create's commit, so two
 *          creates of one key that race cannot both create.
 *   queue: every create creates; an instance's start waits parked, as
 *          `queued`, until it is its key's oldest member and no other
 *          member has started (admit), one after another in creation
 *          order.  With flow.on_excess: reject a create whose key has a
 *          member is refused (DURO_E_FLOW_REJECTED) rather than queued.
 *
 * The members change with the journal: the `committed` hook sees every
 * instance inserted (a member of its key) and every status stored (an
 * ended one leaves its key, a restarted or adopted one joins it again),
 * so creations from any path count: those that never pass claim_create
 * (cron ticks, the no-code consumer, children) are not skipped, but
 * their starts wait for their key as in queue mode.  On start
 * the members are read again from the journal (journal_live_each), so
 * nothing is kept only in memory across a kill -9: what parks is a queued
 * row that recovery runs again, and admit parks it again.
 *
 * The committed hook may not take the engine's lock: when a member ends
 * and its key's next may start, that one's parked ticket goes on `due`,
 * handed to the runnable FIFO by the next gate hook (the ending
 * activation's release, mostly) or by this driver's own waker thread
 * (an idle instance terminated) or the scheduler's pass (dispatch).
 * Lock order: the engine's lock, then `mu`; under `mu` nothing takes
 * another lock.
 *
 * Across the hosts of a shared store (PostgreSQL) the store decides:
 * a member starts only once its row holds the key's claim key there
 * (journal_claim_take), which one live row of the workflow may hold at a
 * time and which storing an ended status clears.  A skip create's insert
 * carries the key (another host's live instance answers it); any other
 * member, oldest first on its host, asks for it on the scheduler's pass,
 * outside the engine's lock, and again every CLAIM_RETRY_MS while another
 * host's instance holds it.  A host's own members still go oldest first;
 * between hosts the one that asks first after the key frees goes. */
#include "singleton.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "error.h"
#include "log.h"
#include "map.h"
#include "metrics.h"
#include "params_key.h"
#include "util.h"

#define CLAIM_RETRY_MS 100

/* A live instance of a key. */
typedef struct sgl_member {
  struct sgl_member *prev, *next; /* its key's members, oldest first */
  struct sgl_key *key;
  int64_t rowid; /* 0 while the commit of its claimed create is on its way */
  char *id;
  int started; /* its start came (later activations need no turn) */
  /* shared store: its row holds the key there; asking for it on the
   * next pass; the other host's instance that held it at the last ask
   * (malloc'ed, for describe) */
  int store_held, asking;
  char *elsewhere;
  duro_gate_ticket *ticket;      /* its start, parked for its turn */
  struct sgl_member *claim_next; /* claims of the same hash */
} sgl_member;

/* One value of a singleton's key and its members. */
typedef struct sgl_key {
  params_key_node node; /* first: its value, in its workflow's keys */
  struct sgl_workflow *wf;
  sgl_member *head, *tail;
  uint32_t started; /* members that started */
} sgl_key;

/* A workflow with a singleton, from its limits. */
typedef struct sgl_workflow {
  char *name; /* the map's key */
  char *pointer;
  int mode;   /* DURO_SINGLETON_SKIP or _QUEUE */
  idmap keys; /* its values (params_keys_*) -> sgl_key */
} sgl_workflow;

typedef struct sgl_state {
  duro_engine *e;
  pthread_mutex_t mu; /* all below; taken last, under the engine's lock */
  int loaded;         /* the members were read at start */
  int shared;         /* a store several hosts share: it holds the keys */
  /* shared: the rowids of members asking for their key in the store, and
   * when a key another host held is asked for again (engine ms) */
  int64_t *ask;
  size_t n_ask, cap_ask;
  int ask_new;  /* an ask came since the last pass */
  int ask_kick; /* ... and the waker is to wake the scheduler for it */
  int64_t ask_retry_at;
  /* loaded, with a singleton workflow (atomic): the committed hook looks
   * at batches only then */
  int active;
  strmap workflows; /* name -> sgl_workflow (the singletons) */
  idmap by_rowid;   /* rowid -> sgl_member */
  idmap claims;     /* hash of "workflow\nid" -> sgl_member chain */
  /* tickets whose turn came, to the runnable FIFO under the engine's lock */
  duro_gate_ticket **due;
  size_t n_due, cap_due;
  pthread_cond_t wake; /* the waker: tickets are due, or stop */
  pthread_t waker;
  int waker_started, stopping;
} sgl_state;

/* The key's value in `params` as compact JSON text (malloc'ed), NULL
 * when the params lack it. */
static char *value_of(const sgl_workflow *w, const char *params) {
  return params_key_value(w->pointer, params);
}

static sgl_key *key_find(sgl_workflow *w, const char *value) {
  return (sgl_key *)params_keys_find(&w->keys, value);
}

static sgl_key *key_of(sgl_workflow *w, const char *value) {
  sgl_key *k = key_find(w, value);
  if (k)
    return k;
  k = xcalloc(1, sizeof *k);
  k->wf = w;
  k->node.value = xstrdup(value);
  params_keys_add(&w->keys, &k->node);
  return k;
}

static void key_drop_if_empty(sgl_key *k) {
  if (k->head)
    return;
  params_keys_remove(&k->wf->keys, &k->node);
  free(k->node.value);
  free(k);
}

/* A new member of key k, last (the youngest). */
static sgl_member *join(sgl_state *st, sgl_key *k, int64_t rowid,
                        const char *id, int started) {
  sgl_member *m = xcalloc(1, sizeof *m);
  m->key = k;
  m->rowid = rowid;
  m->id = xstrdup(id);
  m->started = started;
  m->prev = k->tail;
  if (k->tail)
    k->tail->next = m;
  else
    k->head = m;
  k->tail = m;
  k->started += started ? 1 : 0;
  if (rowid)
    idmap_put(&st->by_rowid, rowid, m);
  return m;
}

static void due_push(sgl_state *st, duro_gate_ticket *t) {
  if (st->n_due == st->cap_due) {
    st->cap_due = st->cap_due ? 2 * st->cap_due : 16;
    st->due = xrealloc(st->due, st->cap_due * sizeof *st->due);
  }
  st->due[st->n_due++] = t;
  pthread_cond_signal(&st->wake);
}

/* Whether m is next on this host: the oldest member, none started. */
static int turn_of(const sgl_member *m) {
  return m == m->key->head && m->key->started == 0;
}

/* Whether m, next on this host, still waits for the store's key. */
static int needs_store(const sgl_state *st, const sgl_member *m) {
  return st->shared && !m->store_held;
}

/* Whether m waits for its start: not next on this host, or the key is
 * another host's. */
static int waits(const sgl_state *st, const sgl_member *m) {
  return !m->started && (!turn_of(m) || needs_store(st, m));
}

/* m, next on this host, asks the store for its key: on the next pass
 * when `soon`, else when asks are retried. */
static void ask(sgl_state *st, sgl_member *m, int soon) {
  if (m->asking || !m->rowid)
    return;
  m->asking = 1;
  if (st->n_ask == st->cap_ask) {
    st->cap_ask = st->cap_ask ? 2 * st->cap_ask : 16;
    st->ask = xrealloc(st->ask, st->cap_ask * sizeof *st->ask);
  }
  st->ask[st->n_ask++] = m->rowid;
  if (soon) {
    st->ask_new = st->ask_kick = 1;
    pthread_cond_signal(&st->wake); /* the waker kicks the scheduler */
  }
}

/* Key k's head may start when nothing of k started (and, on a shared
 * store, its row holds the key there): its parked start is due. */
static void pass_turn(sgl_state *st, sgl_key *k) {
  sgl_member *h = k->head;
  if (!h || !h->ticket || !turn_of(h))
    return;
  if (needs_store(st, h)) {
    ask(st, h, 1);
    return;
  }
  due_push(st, h->ticket);
  h->ticket = NULL;
}

static void claim_unlink(sgl_state *st, sgl_member *m) {
  int64_t h = params_key_hash(m->key->wf->name, m->id);
  sgl_member *head = idmap_get(&st->claims, h);
  if (head == m) {
    if (m->claim_next)
      idmap_put(&st->claims, h, m->claim_next);
    else
      idmap_del(&st->claims, h);
    return;
  }
  for (sgl_member *p = head; p; p = p->claim_next)
    if (p->claim_next == m) {
      p->claim_next = m->claim_next;
      return;
    }
}

/* The claim of (workflow, id), of key `value` when not NULL (two creates
 * of one id racing may claim two keys: one of them is created). */
static sgl_member *claim_find(sgl_state *st, const char *workflow,
                              const char *id, const char *value) {
  for (sgl_member *m = idmap_get(&st->claims, params_key_hash(workflow, id)); m;
       m = m->claim_next)
    if (!strcmp(m->id, id) && !strcmp(m->key->wf->name, workflow) &&
        (!value || !strcmp(m->key->node.value, value)))
      return m;
  return NULL;
}

/* m ended (or its create did not commit): it leaves its key, whose next
 * may start. */
static void leave(sgl_state *st, sgl_member *m) {
  sgl_key *k = m->key;
  if (m->prev)
    m->prev->next = m->next;
  else
    k->head = m->next;
  if (m->next)
    m->next->prev = m->prev;
  else
    k->tail = m->prev;
  k->started -= m->started ? 1 : 0;
  if (m->rowid && idmap_get(&st->by_rowid, m->rowid) == m)
    idmap_del(&st->by_rowid, m->rowid);
  if (m->ticket) /* not forgotten by the engine: let it look for itself */
    due_push(st, m->ticket);
  free(m->elsewhere);
  free(m->id);
  free(m);
  pass_turn(st, k);
  key_drop_if_empty(k);
}

/* The tickets whose turn came go to the runnable FIFO (the engine's lock
 * and mu held). */
static void hand_due_locked(duro_engine *e, sgl_state *st) {
  for (size_t i = 0; i < st->n_due; i++)
    engine_gate_ready_locked(e, st->due[i]);
  st->n_due = 0;
}

static void *singleton_create(duro_engine *e) {
  sgl_state *st = xcalloc(1, sizeof *st);
  st->e = e;
  pthread_mutex_init(&st->mu, NULL);
  pthread_cond_init(&st->wake, NULL);
  return st;
}

/* ---- start: the members read from the journal ---- */

static void load_member(void *ctx, const journal_live_row *row) {
  void **c = ctx;
  sgl_state *st = c[0];
  sgl_workflow *w = c[1];
  char *value = value_of(w, row->params);
  if (value) {
    int started = row->started_ms != JOURNAL_NONE;
    sgl_member *m = join(st, key_of(w, value), row->rowid, row->id, started);
    m->store_held = started; /* it took the key before it started */
  }
  free(value);
}

typedef struct hand_ctx {
  sgl_state *st;
  size_t handed;
} hand_ctx;

static void hand_due_counted(duro_engine *e, void *ctx) {
  hand_ctx *c = ctx;
  pthread_mutex_lock(&c->st->mu);
  c->handed += c->st->n_due;
  hand_due_locked(e, c->st);
  pthread_mutex_unlock(&c->st->mu);
}

/* ---- the store's keys (a shared store) ---- */

typedef struct claim_job {
  int64_t rowid;
  char *workflow, *value, *id; /* copies: the member may leave meanwhile */
  int rc;
  char *holder;
} claim_job;

/* The asks to make now (mu held): into *out, their number. */
static size_t asks_take(sgl_state *st, int64_t now, claim_job **out) {
  *out = NULL;
  if (!st->n_ask || (!st->ask_new && now < st->ask_retry_at))
    return 0;
  st->ask_new = 0;
  claim_job *jobs = xcalloc(st->n_ask, sizeof *jobs);
  size_t n = 0;
  for (size_t i = 0; i < st->n_ask; i++) {
    sgl_member *m = idmap_get(&st->by_rowid, st->ask[i]);
    if (!m || !m->asking)
      continue;
    if (!m->ticket || !turn_of(m) || m->store_held) {
      m->asking = 0; /* forgotten, or no longer next: admit asks again */
      continue;
    }
    jobs[n++] = (claim_job){.rowid = m->rowid,
                            .workflow = xstrdup(m->key->wf->name),
                            .value = xstrdup(m->key->node.value),
                            .id = xstrdup(m->id)};
  }
  st->n_ask = 0;
  *out = jobs;
  return n;
}

/* The answers (mu held): a member whose row took its key may start; one
 * another host's instance holds asks again later.  1 when any does. */
static int asks_apply(sgl_state *st, claim_job *jobs, size_t n) {
  int again = 0;
  for (size_t i = 0; i < n; i++) {
    sgl_member *m = idmap_get(&st->by_rowid, jobs[i].rowid);
    if (!m || !m->asking)
      continue;
    m->asking = 0;
    if (jobs[i].rc == 0) {
      m->store_held = 1;
      free(m->elsewhere);
      m->elsewhere = NULL;
      pass_turn(st, m->key);
      continue;
    }
    if (jobs[i].holder) {
      free(m->elsewhere);
      m->elsewhere = jobs[i].holder;
      jobs[i].holder = NULL;
    }
    ask(st, m, 0);
    again = 1;
  }
  return again;
}

/* Asks the store for the keys of the members next on this host, outside
 * the engine's lock; *next_ms lowered to when to ask again. */
static void claims_pass(duro_engine *e, sgl_state *st, int64_t *next_ms) {
  int64_t now = engine_now(e);
  claim_job *jobs;
  pthread_mutex_lock(&st->mu);
  size_t n = asks_take(st, now, &jobs);
  if (!n && st->n_ask && st->ask_retry_at < *next_ms)
    *next_ms = st->ask_retry_at;
  pthread_mutex_unlock(&st->mu);
  for (size_t i = 0; i < n; i++)
    jobs[i].rc = journal_claim_take(engine_journal(e), jobs[i].workflow,
                                    jobs[i].value, jobs[i].id, &jobs[i].holder);
  if (n) {
    pthread_mutex_lock(&st->mu);
    if (asks_apply(st, jobs, n)) {
      st->ask_retry_at = now + CLAIM_RETRY_MS;
      if (st->ask_retry_at < *next_ms)
        *next_ms = st->ask_retry_at;
    }
    pthread_mutex_unlock(&st->mu);
  }
  for (size_t i = 0; i < n; i++) {
    free(jobs[i].workflow);
    free(jobs[i].value);
    free(jobs[i].id);
    free(jobs[i].holder);
  }
  free(jobs);
}

/* The scheduler's pass asks the store for keys, and hands over what is
 * due too (the waker may be late, or gone at stop). */
static int singleton_dispatch(duro_engine *e, void *state, int64_t *next_ms) {
  sgl_state *st = state;
  *next_ms = INT64_MAX;
  if (st->shared)
    claims_pass(e, st, next_ms);
  pthread_mutex_lock(&st->mu);
  size_t due = st->n_due;
  pthread_mutex_unlock(&st->mu);
  if (due) {
    hand_ctx c = {st, 0};
    engine_gate_run(e, hand_due_counted, &c);
  }
  return 0;
}

size_t duro_singleton_dispatch(duro_engine *e) {
  sgl_state *st = duro_engine_driver_state(e, &singleton_driver);
  if (!st)
    return 0;
  hand_ctx c = {st, 0};
  engine_gate_run(e, hand_due_counted, &c);
  return c.handed;
}

/* The waker: hands due tickets over when no gate hook comes to do it,
 * and wakes the scheduler for a new ask (the committed hook may not take
 * the engine's lock). */
static void *waker_main(void *arg) {
  sgl_state *st = arg;
  pthread_mutex_lock(&st->mu);
  for (;;) {
    while (!st->stopping && st->n_due == 0 && !st->ask_kick)
      pthread_cond_wait(&st->wake, &st->mu);
    if (st->stopping)
      break;
    if (st->ask_kick) {
      st->ask_kick = 0;
      pthread_mutex_unlock(&st->mu);
      engine_kick_scheduler(st->e);
      pthread_mutex_lock(&st->mu);
      continue;
    }
    pthread_mutex_unlock(&st->mu);
    hand_ctx c = {st, 0};
    engine_gate_run(st->e, hand_due_counted, &c);
    pthread_mutex_lock(&st->mu);
  }
  pthread_mutex_unlock(&st->mu);
  return NULL;
}

static void singleton_start(duro_engine *e, void *state) {
  sgl_state *st = state;
  st->shared = journal_slots_shared(engine_journal(e));
  const char *name;
  for (size_t i = 0; (name = engine_workflow_name_at(e, i)) != NULL; i++) {
    const duro_workflow_limits *lim =
        engine_workflow_limits(engine_find_workflow(e, name));
    if (!lim->flow_singleton_mode || !lim->flow_singleton_key)
      continue;
    sgl_workflow *w = xcalloc(1, sizeof *w);
    w->name = xstrdup(name);
    w->pointer = xstrdup(lim->flow_singleton_key);
    w->mode = lim->flow_singleton_mode;
    /* before any activation: the state is this thread's alone */
    void *ctx[2] = {st, w};
    if (journal_live_each(engine_journal(e), name, load_member, ctx) != 0)
      log_error("flow.singleton of %s: reading its live instances: %s", name,
                journal_errmsg(engine_journal(e)));
    strmap_put(&st->workflows, w->name, w);
  }
  pthread_mutex_lock(&st->mu);
  st->loaded = 1;
  pthread_mutex_unlock(&st->mu);
  __atomic_store_n(&st->active, st->workflows.len > 0, __ATOMIC_RELEASE);
  if (st->workflows.len &&
      pthread_create(&st->waker, NULL, waker_main, st) == 0)
    st->waker_started = 1;
}

/* ---- the journal's changes ---- */

static sgl_workflow *workflow_of(sgl_state *st, const char *name) {
  return name ? strmap_get(&st->workflows, name) : NULL;
}

/* Whether a claimed create's insert carried the key to the store (skip
 * mode on a shared store: singleton_claim's claim->key). */
static int inserted_holding(const sgl_state *st, const sgl_workflow *w) {
  return st->shared && w->mode == DURO_SINGLETON_SKIP;
}

static void inserted(sgl_state *st, const journal_op *op) {
  const journal_instance *in = op->inst;
  sgl_workflow *w = workflow_of(st, in->workflow);
  if (!w || op->rc != 0)
    return;
  char *value = value_of(w, in->params);
  sgl_member *claimed =
      value ? claim_find(st, in->workflow, in->id, value) : NULL;
  if (claimed) { /* its create claimed the key: now it has its row */
    claim_unlink(st, claimed);
    claimed->rowid = op->out_rowid;
    claimed->store_held = inserted_holding(st, w);
    idmap_put(&st->by_rowid, claimed->rowid, claimed);
  } else if (value) {
    join(st, key_of(w, value), op->out_rowid, in->id, 0);
  }
  free(value);
}

static void status_stored(sgl_state *st, const journal_op *op) {
  const journal_instance *in = op->inst;
  int64_t rowid = in->rowid ? in->rowid : op->rowid;
  sgl_member *m = idmap_get(&st->by_rowid, rowid);
  if (duro_status_ended(in->status)) {
    if (m)
      leave(st, m);
    return;
  }
  /* live again (a restart) or come from another host: a member again */
  sgl_workflow *w = m ? NULL : workflow_of(st, in->workflow);
  if (!w || !in->id)
    return;
  char *value = value_of(w, in->params);
  if (value) {
    int started = in->started_ms != JOURNAL_NONE;
    join(st, key_of(w, value), rowid, in->id, started)->store_held = started;
  }
  free(value);
}

static void singleton_committed(duro_engine *e, void *state,
                                const journal_batch *b) {
  (void)e;
  sgl_state *st = state;
  if (!__atomic_load_n(&st->active, __ATOMIC_ACQUIRE))
    return;
  pthread_mutex_lock(&st->mu);
  for (size_t i = 0; i < b->n; i++) {
    const journal_op *op = &b->ops[i];
    if (op->kind == JOP_INSTANCE_INSERT && op->inst)
      inserted(st, op);
    else if (op->kind == JOP_INSTANCE_SET && op->inst)
      status_stored(st, op);
  }
  pthread_mutex_unlock(&st->mu);
}

/* ---- creates ---- */

static int singleton_claim(duro_engine *e, void *state, const char *workflow,
                           const duro_workflow_limits *limits, const char *id,
                           const char *params, duro_claim *claim) {
  sgl_state *st = state;
  int rc = DURO_CLAIM_TAKE;
  pthread_mutex_lock(&st->mu);
  hand_due_locked(e, st);
  sgl_workflow *w = st->loaded ? workflow_of(st, workflow) : NULL;
  /* queue mode queues: only a skip, or a refusal, needs the key now */
  char *value = w && (w->mode == DURO_SINGLETON_SKIP || limits->flow_reject)
                    ? value_of(w, params)
                    : NULL;
  sgl_key *k = value ? key_find(w, value) : NULL;
  /* On a shared store a claim still on its way to the store may meet
   * another host's live instance and create nothing: this create then
   * tries too, and the store's claim key says which one lives. */
  int shared = w && w->mode == DURO_SINGLETON_SKIP &&
               journal_slots_shared(engine_journal(e));
  if (k && k->head && shared && !k->head->rowid) {
    k = NULL;
  }
  if (k && k->head && w->mode == DURO_SINGLETON_SKIP) {
    claim->live = xstrdup(k->head->id);
    rc = DURO_CLAIM_SKIP;
  } else if (k && k->head) {
    /* the key frees when its instance ends: a guess */
    claim->retry_after_ms = 1000;
    rc = DURO_E_FLOW_REJECTED;
  } else if (value) {
    /* the key is this create's until its commit settles */
    sgl_member *m = join(st, key_of(w, value), 0, id, 0);
    int64_t h = params_key_hash(workflow, id);
    m->claim_next = idmap_get(&st->claims, h);
    idmap_put(&st->claims, h, m);
    rc = DURO_CLAIM_HELD;
    /* the store keeps the key too: another host's live instance of it
     * answers there */
    if (shared)
      claim->key = xstrdup(value);
  }
  free(value);
  pthread_mutex_unlock(&st->mu);
  return rc;
}

static void singleton_settled(duro_engine *e, void *state, const char *workflow,
                              int claim, const char *id, int64_t rowid) {
  sgl_state *st = state;
  if (claim != DURO_CLAIM_HELD)
    return;
  pthread_mutex_lock(&st->mu);
  /* created: the committed hook made its claim a member already (another
   * claim of the id, of another key, is one that failed) */
  sgl_member *m = rowid && idmap_get(&st->by_rowid, rowid)
                      ? NULL
                      : claim_find(st, workflow, id, NULL);
  if (m) { /* the committed hook did not see it inserted */
    claim_unlink(st, m);
    if (rowid) {
      m->rowid = rowid;
      m->store_held = inserted_holding(st, m->key->wf);
      idmap_put(&st->by_rowid, rowid, m);
    } else {
      leave(st, m);
    }
  }
  hand_due_locked(e, st);
  pthread_mutex_unlock(&st->mu);
}

/* ---- the gate ---- */

static int singleton_admit(duro_engine *e, void *state, const char *workflow,
                           const duro_workflow_limits *limits, int64_t rowid,
                           const char *params, int first,
                           duro_gate_ticket *ticket, void **hold) {
  (void)workflow, (void)limits, (void)params, (void)first;
  sgl_state *st = state;
  *hold = NULL;
  pthread_mutex_lock(&st->mu);
  hand_due_locked(e, st);
  sgl_member *m = idmap_get(&st->by_rowid, rowid);
  int runs = 1;
  if (m && !m->started) {
    if (!waits(st, m)) {
      m->started = 1;
      m->key->started++;
    } else {
      m->ticket = ticket;
      runs = 0;
      if (turn_of(m)) { /* the key is another host's, or may be */
        ask(st, m, 1);
        engine_gate_kick_locked(e);
      }
    }
  }
  pthread_mutex_unlock(&st->mu);
  return runs;
}

static void singleton_release(duro_engine *e, void *state, void *hold) {
  (void)hold;
  sgl_state *st = state;
  pthread_mutex_lock(&st->mu);
  hand_due_locked(e, st);
  pthread_mutex_unlock(&st->mu);
}

static void singleton_forget(duro_engine *e, void *state,
                             duro_gate_ticket *ticket) {
  (void)e;
  sgl_state *st = state;
  pthread_mutex_lock(&st->mu);
  sgl_member *m = idmap_get(&st->by_rowid, engine_gate_ticket_rowid(ticket));
  if (m && m->ticket == ticket)
    m->ticket = NULL;
  for (size_t i = 0; i < st->n_due; i++)
    if (st->due[i] == ticket) {
      st->due[i] = st->due[--st->n_due];
      break;
    }
  pthread_mutex_unlock(&st->mu);
}

/* ---- why it waits ---- */

typedef struct why_ctx {
  sgl_state *st;
  int64_t rowid;
  char *why;
} why_ctx;

static void why_under_lock(duro_engine *e, void *arg) {
  (void)e;
  why_ctx *c = arg;
  pthread_mutex_lock(&c->st->mu);
  sgl_member *m = idmap_get(&c->st->by_rowid, c->rowid);
  if (m && waits(c->st, m) && turn_of(m)) {
    c->why = xasprintf("flow: singleton %s=%s (held by %s on another host)",
                       m->key->wf->pointer, m->key->node.value,
                       m->elsewhere ? m->elsewhere : "an instance");
  } else if (m && waits(c->st, m)) {
    const sgl_member *holder = m->key->head;
    for (const sgl_member *x = holder; x; x = x->next)
      if (x->started) {
        holder = x;
        break;
      }
    c->why = xasprintf("flow: singleton %s=%s (held by %s)",
                       m->key->wf->pointer, m->key->node.value, holder->id);
  }
  pthread_mutex_unlock(&c->st->mu);
}

char *duro_singleton_why(duro_engine *e, const char *workflow, const char *id) {
  sgl_state *st = duro_engine_driver_state(e, &singleton_driver);
  if (!st)
    return NULL;
  journal_instance in = {0};
  if (journal_instance_get(engine_journal(e), workflow, id, &in) != 0)
    return NULL;
  why_ctx c = {st, in.rowid, NULL};
  journal_instance_clear(&in);
  engine_gate_run(e, why_under_lock, &c);
  return c.why;
}

/* ---- /metrics ---- */

typedef struct count_ctx {
  const sgl_state *st;
  uint64_t keys, live, waiting;
} count_ctx;

static void count_key(void *ctx, int64_t hash, void *val) {
  (void)hash;
  count_ctx *c = ctx;
  for (sgl_key *k = val; k; k = (sgl_key *)k->node.next) {
    c->keys++;
    for (const sgl_member *m = k->head; m; m = m->next) {
      c->live++;
      c->waiting += waits(c->st, m) ? 1 : 0;
    }
  }
}

typedef struct stats_ctx {
  sgl_state *st;
  const char *workflow;
  duro_singleton_stats *out;
} stats_ctx;

static void stats_under_lock(duro_engine *e, void *arg) {
  (void)e;
  stats_ctx *c = arg;
  pthread_mutex_lock(&c->st->mu);
  sgl_workflow *w = workflow_of(c->st, c->workflow);
  if (w) {
    count_ctx n = {.st = c->st};
    idmap_each(&w->keys, count_key, &n);
    *c->out = (duro_singleton_stats){
        .key = xstrdup(w->pointer),
        .mode = w->mode == DURO_SINGLETON_SKIP ? "skip" : "queue",
        .keys = n.keys,
        .live = n.live,
        .waiting = n.waiting};
  }
  pthread_mutex_unlock(&c->st->mu);
}

void duro_singleton_stats_read(duro_engine *e, const char *workflow,
                               duro_singleton_stats *out) {
  *out = (duro_singleton_stats){0};
  sgl_state *st = duro_engine_driver_state(e, &singleton_driver);
  if (!st)
    return;
  stats_ctx c = {st, workflow, out};
  engine_gate_run(e, stats_under_lock, &c);
}

typedef struct metrics_ctx {
  sgl_state *st;
  FILE *out;
} metrics_ctx;

static void metrics_under_lock(duro_engine *e, void *arg) {
  (void)e;
  metrics_ctx *c = arg;
  sgl_state *st = c->st;
  pthread_mutex_lock(&st->mu);
  if (st->workflows.len)
    fprintf(c->out,
            "# HELP duro_singleton_keys Values of a flow.singleton key with a "
            "live instance\n"
            "# TYPE duro_singleton_keys gauge\n"
            "# HELP duro_singleton_waiting Instances whose start waits for "
            "their flow.singleton key\n"
            "# TYPE duro_singleton_waiting gauge\n");
  for (size_t i = 0; i < st->workflows.cap; i++) {
    sgl_workflow *w = st->workflows.vals[i];
    if (!st->workflows.keys[i] || !w)
      continue;
    count_ctx n = {.st = c->st};
    idmap_each(&w->keys, count_key, &n);
    fputs("duro_singleton_keys{workflow=\"", c->out);
    metrics_label_put(c->out, w->name);
    fprintf(c->out, "\"} %llu\nduro_singleton_waiting{workflow=\"",
            (unsigned long long)n.keys);
    metrics_label_put(c->out, w->name);
    fprintf(c->out, "\"} %llu\n", (unsigned long long)n.waiting);
  }
  pthread_mutex_unlock(&st->mu);
}

static void singleton_metrics(duro_engine *e, void *state, FILE *out) {
  metrics_ctx c = {state, out};
  engine_gate_run(e, metrics_under_lock, &c);
}

/* ---- stop and free ---- */

static uint32_t singleton_drain(void *state, const struct timespec *until) {
  (void)until; /* the waker never blocks on anything but its condition */
  sgl_state *st = state;
  pthread_mutex_lock(&st->mu);
  st->stopping = 1;
  pthread_cond_signal(&st->wake);
  pthread_mutex_unlock(&st->mu);
  if (st->waker_started) {
    pthread_join(st->waker, NULL);
    st->waker_started = 0;
  }
  return 0;
}

static void free_key(void *ctx, int64_t hash, void *val) {
  (void)ctx, (void)hash;
  for (sgl_key *k = val, *next; k; k = next) {
    next = (sgl_key *)k->node.next;
    for (sgl_member *m = k->head, *mn; m; m = mn) {
      mn = m->next;
      free(m->elsewhere);
      free(m->id);
      free(m);
    }
    free(k->node.value);
    free(k);
  }
}

static void singleton_free(void *state) {
  sgl_state *st = state;
  singleton_drain(st, NULL);
  for (size_t i = 0; i < st->workflows.cap; i++) {
    sgl_workflow *w = st->workflows.vals[i];
    if (!st->workflows.keys[i] || !w)
      continue;
    idmap_each(&w->keys, free_key, NULL);
    idmap_free(&w->keys);
    free(w->pointer);
    free(w->name);
    free(w);
  }
  strmap_free(&st->workflows);
  idmap_free(&st->by_rowid);
  idmap_free(&st->claims);
  free(st->due);
  free(st->ask);
  pthread_cond_destroy(&st->wake);
  pthread_mutex_destroy(&st->mu);
  free(st);
}

const duro_driver singleton_driver = {
    .name = "singleton",
    .create = singleton_create,
    .start = singleton_start,
    .dispatch = singleton_dispatch,
    .committed = singleton_committed,
    .claim_create = singleton_claim,
    .claim_settled = singleton_settled,
    .admit = singleton_admit,
    .release = singleton_release,
    .forget = singleton_forget,
    .metrics = singleton_metrics,
    .drain = singleton_drain,
    .free = singleton_free,
};
