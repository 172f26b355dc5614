/* consumer.c — the consumers the engine runs itself: the no-code consumer
 * that turns each message of a queue into one workflow instance, and push
 * consumers that feed a plugin's queue handler batches of messages.
 *
 * It owns the list of consumers (guarded by its mutex, with the count of
 * batches each has in a handler) and the dispatch pass, run by the
 * scheduler thread or inline by tests, that leases batches for them.
 * Exactly one instance per job id comes from the journal, not from memory:
 * the instance insert and the message ack are one commit, so either both
 * happened or neither did, and a second delivery of the same job (a
 * duplicate send, an expired lease, a crash after the commit but before
 * anything else) finds the instance already there and only acks.  A
 * message whose body yields no usable id is retried through the queue's
 * ordinary retry, so max_retries and the dead-letter queue apply to it.
 * A push batch is leased before its handler runs and settled after it
 * returns, so a handler that dies leaves the lease to run out: delivery
 * is at least once.  The batch timer (max_batch_timeout) runs from the
 * time the oldest visible message became visible, which the journal
 * keeps: a restart does not start it over.
 * A handler on a thread of its own has its consumer's visibility timeout
 * to return, on the monotonic clock from just before the lease, which is
 * held a margin longer: the deadline, not the lease's end, settles a hung
 * batch, before another batch can lease its messages.  Past it the dispatch
 * pass gives up on the batch as the step watchdog gives up on a hung
 * attempt: the thread is left running in the plugin's code (nothing can
 * stop it safely), its messages are settled now — those it acked stay
 * acked, the rest are retried as a failed delivery, so the poisoned one
 * reaches the dead-letter queue after max_retries — its concurrency slot
 * is free for the next batch, and /healthz lists it until the thread
 * returns.  The batch's mutex is the handshake: the handler's return and
 * the deadline never both settle it, and a late return, its marks and
 * return code, changes nothing. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "error.h"
#include "json_pointer.h"
#include "log.h"
#include "queue.h"
#include "queue_driver.h"
#include "util.h"

#define DEFAULT_BATCH 10
/* How much longer than its handler may run a batch on a thread is leased
 * (at most: half the lease for short ones), so that the deadline settles
 * a hung batch before the lease's end would hand it to another. */
#define SETTLE_MARGIN_MS 1000

typedef struct wf_consumer {
  char *queue, *workflow, *id_from; /* workflow NULL: a push consumer */
  char *plugin;                     /* a push consumer's, for the ledger */
  uint32_t batch;
  duro_queue_fn handler;
  duro_queue_consumer_opts opt;
  uint32_t in_flight; /* batches in the handler */
} wf_consumer;

struct queue_consumers {
  pthread_mutex_t mu;
  pthread_cond_t idle; /* a batch left its handler */
  wf_consumer *v;
  size_t n;
  uint32_t threads; /* batch threads not yet finished */
  /* Batches on threads of their own, in their handler (abandoned ones
   * until the thread returns): what the deadline and /healthz look at. */
  struct duro_message_batch **live;
  size_t n_live;
  /* Abandoned batches whose threads have not returned.  Past the cap
   * (the engine's max_hung, as for hung steps) an abandoned batch keeps
   * its max_concurrency slot until its thread returns, so a handler that
   * hangs on every message stalls its queue instead of leaving a thread
   * behind per delivery without end. */
  uint32_t hung;
  int hung_cap_logged;
  /* Handlers with batches inside, and how many: a reload must not unload
   * the code of one (duro_queue_handler_running). */
  struct running {
    duro_queue_fn fn;
    uint32_t n;
  } * running;
  size_t n_running;
};

static struct queue_consumers *consumers(duro_engine *e) {
  queue_state *s = queue_state_of(e);
  pthread_mutex_lock(&s->mu);
  if (!s->consumers) {
    struct queue_consumers *c = xcalloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    engine_cond_init(&c->idle); /* stop's monotonic grace */
    __atomic_store_n(&s->consumers, c, __ATOMIC_RELEASE);
  }
  struct queue_consumers *c = s->consumers;
  pthread_mutex_unlock(&s->mu);
  return c;
}

static void consumer_clear(wf_consumer *c) {
  free(c->queue);
  free(c->workflow);
  free(c->id_from);
  free(c->plugin);
}

uint32_t queue_consumers_wait(struct queue_consumers *c,
                              const struct timespec *until) {
  if (!c)
    return 0;
  pthread_mutex_lock(&c->mu);
  while (c->threads) {
    if (!until)
      pthread_cond_wait(&c->idle, &c->mu);
    else if (pthread_cond_timedwait(&c->idle, &c->mu, until) != 0)
      break;
  }
  uint32_t left = c->threads;
  pthread_mutex_unlock(&c->mu);
  return left;
}

void queue_consumers_free(struct queue_consumers *c) {
  if (!c)
    return;
  queue_consumers_wait(c, NULL); /* batches in a handler use the engine */
  pthread_cond_destroy(&c->idle);
  free(c->running);
  free(c->live);
  for (size_t i = 0; i < c->n; i++)
    consumer_clear(&c->v[i]);
  free(c->v);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* ---- registration --------------------------------------------------------
 */

/* Adds or replaces the queue's consumer with `c` (taken). */
static void consumer_put(duro_engine *e, wf_consumer c) {
  struct queue_consumers *cs = consumers(e);
  pthread_mutex_lock(&cs->mu);
  wf_consumer *old = NULL;
  for (size_t i = 0; i < cs->n && !old; i++)
    if (!strcmp(cs->v[i].queue, c.queue))
      old = &cs->v[i];
  if (old) {
    c.in_flight = old->in_flight;
    consumer_clear(old);
  } else {
    cs->v = xrealloc(cs->v, (cs->n + 1) * sizeof *cs->v);
    old = &cs->v[cs->n++];
  }
  *old = c;
  pthread_mutex_unlock(&cs->mu);
}

int duro_queue_consume_workflow(duro_engine *e, const char *queue,
                                const char *workflow, const char *id_from,
                                uint32_t max_batch_size) {
  if (!workflow || !*workflow || !duro_json_pointer_valid(id_from) ||
      max_batch_size > DURO_QUEUE_MAX_BATCH)
    return DURO_E_INVALID_ARGUMENT;
  if (!duro_queue_exists(e, queue))
    return DURO_E_QUEUE_NOT_FOUND;
  consumer_put(e, (wf_consumer){.queue = xstrdup(queue),
                                .workflow = xstrdup(workflow),
                                .id_from = xstrdup(id_from),
                                .batch = max_batch_size ? max_batch_size
                                                        : DEFAULT_BATCH});
  return 0;
}

int duro_queue_consume(duro_engine *e, const char *queue, duro_queue_fn handler,
                       const duro_queue_consumer_opts *opt) {
  duro_queue_consumer_opts o = opt ? *opt : (duro_queue_consumer_opts){0};
  if (!handler || o.max_batch_size > DURO_QUEUE_MAX_BATCH ||
      o.max_batch_timeout_ms < 0 || o.visibility_ms < 0 ||
      o.visibility_ms > DURO_QUEUE_MAX_DELAY_MS)
    return DURO_E_INVALID_ARGUMENT;
  if (!duro_queue_exists(e, queue))
    return DURO_E_QUEUE_NOT_FOUND;
  o.max_batch_size = o.max_batch_size ? o.max_batch_size : DEFAULT_BATCH;
  o.max_concurrency = o.max_concurrency ? o.max_concurrency : 250;
  consumer_put(e, (wf_consumer){.queue = xstrdup(queue),
                                .plugin = o.plugin ? xstrdup(o.plugin) : NULL,
                                .batch = o.max_batch_size,
                                .handler = handler,
                                .opt = o});
  return 0;
}

int duro_queue_unconsume(duro_engine *e, const char *queue) {
  struct queue_consumers *cs = consumers(e);
  int rc = DURO_E_QUEUE_NOT_FOUND;
  pthread_mutex_lock(&cs->mu);
  for (size_t i = 0; i < cs->n && rc; i++)
    if (!strcmp(cs->v[i].queue, queue)) {
      /* batches in its handler still count in `running` */
      consumer_clear(&cs->v[i]);
      cs->v[i] = cs->v[--cs->n];
      rc = 0;
    }
  pthread_mutex_unlock(&cs->mu);
  return rc;
}

const char *duro_queue_consumer_kind_name(duro_queue_consumer_kind k) {
  static const char *const names[] = {
      [DURO_QUEUE_CONSUMER_WORKFLOW] = "workflow",
      [DURO_QUEUE_CONSUMER_HANDLER] = "handler",
  };
  return (unsigned)k < sizeof names / sizeof *names ? names[k] : NULL;
}

void duro_queue_consumer_settings_free(duro_queue_consumer_settings *s) {
  if (!s)
    return;
  free(s->workflow);
  free(s->id_from);
  *s = (duro_queue_consumer_settings){0};
}

int queue_consumer_settings(duro_engine *e, const char *queue,
                            duro_queue_consumer_settings *out) {
  struct queue_consumers *cs = consumers(e);
  *out = (duro_queue_consumer_settings){0};
  pthread_mutex_lock(&cs->mu);
  for (size_t i = 0; i < cs->n && !out->kind; i++) {
    const wf_consumer *c = &cs->v[i];
    if (strcmp(c->queue, queue) != 0)
      continue;
    out->max_batch_size = c->batch;
    if (c->workflow) {
      out->kind = DURO_QUEUE_CONSUMER_WORKFLOW;
      out->workflow = xstrdup(c->workflow);
      out->id_from = xstrdup(c->id_from);
    } else {
      out->kind = DURO_QUEUE_CONSUMER_HANDLER;
      out->max_batch_timeout_ms = c->opt.max_batch_timeout_ms;
      out->max_concurrency = c->opt.max_concurrency;
      out->visibility_timeout_ms = c->opt.visibility_ms
                                       ? c->opt.visibility_ms
                                       : DURO_QUEUE_DEFAULT_VISIBILITY_MS;
    }
  }
  pthread_mutex_unlock(&cs->mu);
  return out->kind != DURO_QUEUE_CONSUMER_NONE;
}

/* A copy of consumer i (the caller clears it), or 0 past the end: the
 * list is not held while a batch is handled. */
static int consumer_copy(struct queue_consumers *cs, size_t i,
                         wf_consumer *out) {
  pthread_mutex_lock(&cs->mu);
  int more = i < cs->n;
  if (more) {
    *out = cs->v[i];
    out->queue = xstrdup(cs->v[i].queue);
    out->workflow = cs->v[i].workflow ? xstrdup(cs->v[i].workflow) : NULL;
    out->id_from = cs->v[i].id_from ? xstrdup(cs->v[i].id_from) : NULL;
    out->plugin = cs->v[i].plugin ? xstrdup(cs->v[i].plugin) : NULL;
  }
  pthread_mutex_unlock(&cs->mu);
  return more;
}

/* ---- dispatch -------------------------------------------------------------
 */

/* One leased message on its way to an instance. */
typedef struct job {
  const char *lease;
  char *id;     /* NULL: the body has no usable id */
  char *params; /* the body as JSON text */
  char *error;  /* why not, as JSON text (a string) */
  size_t op;    /* index of its insert in the batch */
} job;

static char *error_text(const char *fmt, const char *ptr, const char *what) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, ptr, what);
  json_t *s = json_string(msg);
  char *t = json_dumps(s, JSON_ENCODE_ANY);
  json_decref(s);
  return t;
}

/* The instance id at the consumer's pointer in the message's body (the
 * user's JSON, read here as data), or an error for the retry; the params
 * are the body made compact. */
static void job_prepare(duro_engine *e, const wf_consumer *c,
                        const duro_queue_message *msg, job *jb) {
  json_t *body = json_loads(msg->body, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
  jb->lease = msg->lease_id;
  jb->params = json_dumps(body, JSON_ENCODE_ANY | JSON_COMPACT);
  json_t *v = duro_json_pointer_get(body, c->id_from);
  char num[64];
  const char *id = NULL;
  if (json_is_string(v)) {
    id = json_string_value(v);
  } else if (json_is_integer(v)) {
    snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
    id = num;
  } else if (json_is_real(v)) {
    snprintf(num, sizeof num, "%.17g", json_real_value(v));
    id = num;
  }
  if (!v)
    jb->error = error_text("id_from \"%s\": %s", c->id_from,
                           "no such member in the message body");
  else if (!id)
    jb->error = error_text("id_from \"%s\": %s", c->id_from,
                           "the value is not a string or a number");
  else if (!duro_instance_id_valid(id))
    jb->error = error_text("id_from \"%s\": %s", c->id_from,
                           "the value is not a valid instance id");
  else if (!jb->params ||
           json_text_check(jb->params, engine_max_step_result(e)))
    jb->error = error_text("id_from \"%s\": %s", c->id_from,
                           "the body is too large for an instance's params");
  else
    jb->id = xstrdup(id);
  json_decref(body); /* after the id: it may be borrowed from the body */
}

/* Retries the jobs that have no id, with their reasons. */
static void retry_bad(duro_engine *e, const char *queue, job *jobs, size_t n) {
  duro_queue_retry *r = xcalloc(n ? n : 1, sizeof *r);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!jobs[i].id)
      r[k++] = (duro_queue_retry){jobs[i].lease, -1, jobs[i].error};
  duro_queue_ack_result res = {0};
  char err[256];
  if (k && duro_queue_settle(e, queue, NULL, 0, r, k, &res, err, sizeof err))
    log_error("queue %s: retrying %zu message(s): %s", queue, k, err);
  duro_queue_ack_result_free(&res);
  free(r);
}

/* Creates and acks the good jobs in one commit. */
static void create_and_ack(duro_engine *e, const wf_consumer *c,
                           const wf_reg *wf, job *jobs, size_t n) {
  journal_instance *rows = xcalloc(n ? n : 1, sizeof *rows);
  journal_batch b = {0};
  int64_t now = engine_now(e);
  for (size_t i = 0; i < n; i++) {
    if (!jobs[i].id)
      continue;
    duro_create_req req = {.params = jobs[i].params, .retention_ms = -1};
    jobs[i].op = b.n;
    engine_instance_insert_op(wf, jobs[i].id, &req, now, &rows[i], &b);
    journal_op *ack = journal_batch_add(&b, JOP_MESSAGE_ACK);
    ack->queue = c->queue;
    ack->lease = jobs[i].lease;
    ack->ts_ms = now;
  }
  if (b.n && journal_commit(engine_journal(e), &b) != 0) {
    /* Nothing was written: the leases run out and the messages return. */
    log_error("queue %s: creating instances of %s: %s", c->queue, c->workflow,
              journal_errmsg(engine_journal(e)));
  } else {
    for (size_t i = 0; i < n; i++)
      if (jobs[i].id && b.ops[jobs[i].op].rc == 0)
        engine_instance_created(e, b.ops[jobs[i].op].out_rowid);
    /* DURO_E_ALREADY_EXISTS: a job seen before; its ack went through. */
  }
  journal_batch_free(&b);
  free(rows);
}

static size_t dispatch_workflow(duro_engine *e, const wf_consumer *c,
                                int64_t *due) {
  const wf_reg *wf = engine_find_workflow(e, c->workflow);
  if (!wf)
    return 0; /* not loaded (yet): the messages wait in the queue */
  /* Nothing visible: no write transaction, and a wake when there is. */
  journal_queue_ready_info r = {0, JOURNAL_NONE, JOURNAL_NONE};
  int64_t now = engine_now(e);
  if (journal_queue_ready(engine_journal(e), c->queue, now, 1, &r) == 0 &&
      !r.ready) {
    *due = r.next_visible_ms;
    return 0;
  }
  duro_queue_message_list msgs;
  char err[256];
  if (duro_queue_pull_messages(e, c->queue, c->batch, 0, &msgs, err,
                               sizeof err)) {
    log_error("queue %s: leasing messages: %s", c->queue, err);
    return 0;
  }
  size_t n = msgs.n;
  job *jobs = xcalloc(n ? n : 1, sizeof *jobs);
  for (size_t i = 0; i < n; i++)
    job_prepare(e, c, &msgs.v[i], &jobs[i]);
  create_and_ack(e, c, wf, jobs, n);
  retry_bad(e, c->queue, jobs, n);
  for (size_t i = 0; i < n; i++) {
    free(jobs[i].id);
    free(jobs[i].params);
    free(jobs[i].error);
  }
  free(jobs);
  duro_queue_message_list_free(&msgs);
  return n;
}

/* ---- push consumers ------------------------------------------------------
 */

enum { MARK_NONE, MARK_ACK, MARK_RETRY };

struct duro_message_batch {
  duro_engine *e;
  char *queue, *plugin;
  char prefix[QUEUE_LEASE_PREFIX]; /* its leases' token */
  ledger_slot *slot;               /* its crash ledger slot, or NULL */
  duro_queue_fn handler;
  size_t n;
  duro_message *msgs; /* bodies owned */
  char **leases;
  /* mu guards the marks and the fate: once settled (the handler
   * returned) or abandoned (past its deadline), the other side keeps off,
   * and a mark after abandonment is refused. */
  pthread_mutex_t mu;
  int *mark;
  int64_t *delay; /* of a MARK_RETRY */
  int settled, abandoned;
  int slot_kept; /* abandoned past the cap of hung threads: slot held */
  int64_t started_ms, deadline_ms; /* engine_mono_ms */
  int64_t timeout_ms;              /* the consumer's visibility timeout */
};

/* Takes the messages' bodies and leases; frees the rest of `msgs`. */
static duro_message_batch *batch_new(duro_engine *e, const wf_consumer *c,
                                     duro_queue_fn fn, const char *prefix,
                                     journal_message *msgs, size_t n) {
  duro_message_batch *b = xcalloc(1, sizeof *b);
  *b = (duro_message_batch){.e = e,
                            .queue = xstrdup(c->queue),
                            .plugin = c->plugin ? xstrdup(c->plugin) : NULL,
                            .handler = fn,
                            .n = n,
                            .msgs = xcalloc(n, sizeof *b->msgs),
                            .leases = xcalloc(n, sizeof *b->leases),
                            .mark = xcalloc(n, sizeof *b->mark),
                            .delay = xcalloc(n, sizeof *b->delay)};
  snprintf(b->prefix, sizeof b->prefix, "%s", prefix);
  pthread_mutex_init(&b->mu, NULL);
  for (size_t i = 0; i < n; i++) {
    journal_message *m = &msgs[i];
    b->leases[i] = m->lease;
    b->msgs[i] = (duro_message){.size = sizeof(duro_message),
                                .id = m->seq,
                                .body = m->body,
                                .attempts = m->attempts,
                                .sent_ms = m->sent_ms};
    m->lease = m->body = NULL;
  }
  journal_messages_free(msgs, n);
  return b;
}

static void batch_free(duro_message_batch *b) {
  for (size_t i = 0; i < b->n; i++) {
    free((char *)b->msgs[i].body);
    free(b->leases[i]);
  }
  free(b->msgs);
  free(b->leases);
  free(b->mark);
  free(b->delay);
  free(b->queue);
  free(b->plugin);
  pthread_mutex_destroy(&b->mu);
  free(b);
}

/* What becomes of a batch's messages: acks and retries, for one commit. */
typedef struct verdict {
  duro_engine *e;
  char *queue;
  size_t n, na, nr;
  const char **acks;
  duro_queue_retry *retries;
  char *reason; /* the unmarked retries' error */
  char **owned; /* the leases, when copied out of the batch; else NULL */
} verdict;

/* The batch's messages by their marks, the unmarked ones acked or retried
 * with `why` (JSON text, copied) as `unmarked` says; with `copy` the
 * leases are copied, for a verdict that outlives the batch. */
static verdict verdict_of(const duro_message_batch *b, int unmarked,
                          const char *why, int copy) {
  verdict v = {.e = b->e,
               .queue = xstrdup(b->queue),
               .n = b->n,
               .acks = xcalloc(b->n, sizeof *v.acks),
               .retries = xcalloc(b->n, sizeof *v.retries),
               .reason = xstrdup(why),
               .owned = copy ? xcalloc(b->n, sizeof *v.owned) : NULL};
  for (size_t i = 0; i < b->n; i++) {
    const char *lease =
        copy ? (v.owned[i] = xstrdup(b->leases[i])) : b->leases[i];
    int mark = b->mark[i] ? b->mark[i] : unmarked;
    if (mark == MARK_ACK)
      v.acks[v.na++] = lease;
    else
      v.retries[v.nr++] = (duro_queue_retry){
          lease, b->mark[i] ? b->delay[i] : -1,
          b->mark[i] ? "\"retried by the queue handler\"" : v.reason};
  }
  return v;
}

/* Commits the verdict (one commit) and frees it. */
static void verdict_settle(verdict *v) {
  duro_queue_ack_result res;
  char err[256];
  if (duro_queue_settle(v->e, v->queue, v->acks, v->na, v->retries, v->nr, &res,
                        err, sizeof err))
    log_error("queue %s: settling a batch of %zu: %s", v->queue, v->n, err);
  else if (res.n_errors)
    /* Their leases ended first: they come back with the attempt counted. */
    log_warn("queue %s: settling a batch of %zu: %zu lease(s) had ended",
             v->queue, v->n, res.n_errors);
  duro_queue_ack_result_free(&res);
  for (size_t i = 0; v->owned && i < v->n; i++)
    free(v->owned[i]);
  free(v->owned);
  free(v->reason);
  free(v->retries);
  free(v->acks);
  free(v->queue);
}

/* Acks and retries the messages by their marks, the unmarked ones by the
 * handler's return code, in one commit. */
static void batch_settle(duro_message_batch *b, int rc) {
  char why[80];
  snprintf(why, sizeof why, "\"the queue handler returned %d\"", rc);
  verdict v = verdict_of(b, rc == 0 ? MARK_ACK : MARK_RETRY, why, 0);
  verdict_settle(&v);
}

/* Counts a batch in or out of handler fn (cs->mu held). */
static void running_add_locked(struct queue_consumers *cs, duro_queue_fn fn,
                               int delta) {
  for (size_t i = 0; i < cs->n_running; i++)
    if (cs->running[i].fn == fn) {
      cs->running[i].n += (uint32_t)delta;
      return;
    }
  cs->running =
      xrealloc(cs->running, (cs->n_running + 1) * sizeof *cs->running);
  cs->running[cs->n_running++] = (struct running){fn, (uint32_t)delta};
}

int duro_queue_handler_running(duro_engine *e, duro_queue_fn fn) {
  struct queue_consumers *cs = queue_consumers_of(e);
  int busy = 0;
  if (!cs || !fn)
    return 0;
  pthread_mutex_lock(&cs->mu);
  for (size_t i = 0; i < cs->n_running; i++)
    busy |= cs->running[i].fn == fn && cs->running[i].n > 0;
  pthread_mutex_unlock(&cs->mu);
  return busy;
}

/* One of the queue's max_concurrency slots is free (cs->mu held). */
static void slot_free_locked(struct queue_consumers *cs, const char *queue) {
  for (size_t i = 0; i < cs->n; i++)
    if (!strcmp(cs->v[i].queue, queue) && cs->v[i].in_flight)
      cs->v[i].in_flight--;
}

/* The batch left handler fn: its slot (unless the deadline freed it
 * already) is free for the next one. */
static void batch_done(duro_engine *e, const char *queue, duro_queue_fn fn,
                       int slot, int was_hung) {
  struct queue_consumers *cs = queue_consumers_of(e);
  pthread_mutex_lock(&cs->mu);
  if (slot)
    slot_free_locked(cs, queue);
  if (was_hung && cs->hung && --cs->hung <= engine_max_hung(e))
    cs->hung_cap_logged = 0;
  running_add_locked(cs, fn, -1);
  pthread_mutex_unlock(&cs->mu);
}

static void batch_run(duro_message_batch *b) {
  duro_env env = {b->e};
  int rc = b->handler(b, &env);
  pthread_mutex_lock(&b->mu);
  int abandoned = b->abandoned, slot_kept = b->slot_kept;
  b->settled = 1;
  pthread_mutex_unlock(&b->mu);
  if (abandoned) {
    /* Its messages were settled at the deadline: another batch may hold
     * them now. */
    log_write(DURO_LOG_WARN, NULL,
              "queue %s: an abandoned queue handler returned after %lld ms; "
              "its return code and marks are discarded",
              b->queue, (long long)(engine_mono_ms(b->e) - b->started_ms));
  } else {
    batch_settle(b, rc);
  }
  batch_done(b->e, b->queue, b->handler, !abandoned || slot_kept, abandoned);
}

/* ---- the handler's deadline ----------------------------------------------
 */

static void live_remove_locked(struct queue_consumers *cs,
                               duro_message_batch *b) {
  for (size_t i = 0; i < cs->n_live; i++)
    if (cs->live[i] == b) {
      cs->live[i] = cs->live[--cs->n_live];
      return;
    }
}

/* Gives up on batch b, past its deadline (cs->mu and b->mu held): from
 * now on its marks are refused and its return is discarded, its slot is
 * free, and a crash in its thread is not laid on it again.  Returns the
 * verdict to commit — the acked stay acked, the rest are retried as a
 * failed delivery — and in *msg the log line. */
static verdict batch_abandon_locked(struct queue_consumers *cs,
                                    duro_message_batch *b, int64_t now,
                                    char **msg) {
  char *why =
      xasprintf("the queue handler%s%s%s ran past the consumer's "
                "visibility_timeout of %lld ms: abandoned",
                b->plugin ? " of plugin \"" : "", b->plugin ? b->plugin : "",
                b->plugin ? "\"" : "", (long long)b->timeout_ms);
  char *err = error_json(DURO_ERR_TIMEOUT, why);
  b->abandoned = 1;
  verdict v = verdict_of(b, MARK_RETRY, err, 1);
  *msg = xasprintf("queue %s: %s after %lld ms, its thread left running; "
                   "%zu message(s) retried, %zu acked",
                   b->queue, why, (long long)(now - b->started_ms), v.nr, v.na);
  if (b->slot)
    ledger_set_state(b->slot, LEDGER_ABANDONED);
  if (++cs->hung <= engine_max_hung(b->e)) {
    slot_free_locked(cs, b->queue);
  } else {
    b->slot_kept = 1;
    if (!cs->hung_cap_logged)
      log_error("%u queue handler threads are hung, the cap: an abandoned "
                "handler now holds its queue's slot until it returns",
                engine_max_hung(b->e));
    cs->hung_cap_logged = 1;
  }
  free(err);
  free(why);
  return v;
}

/* Abandons every batch past its deadline; returns the earliest deadline
 * still ahead (engine_mono_ms), INT64_MAX when none. */
static int64_t handlers_watch(duro_engine *e, struct queue_consumers *cs) {
  int64_t now = engine_mono_ms(e), next = INT64_MAX;
  for (;;) {
    verdict v = {0};
    char *msg = NULL;
    pthread_mutex_lock(&cs->mu);
    for (size_t i = 0; i < cs->n_live && !msg; i++) {
      duro_message_batch *b = cs->live[i];
      pthread_mutex_lock(&b->mu);
      if (!b->settled && !b->abandoned && now >= b->deadline_ms)
        v = batch_abandon_locked(cs, b, now, &msg);
      else if (!b->settled && !b->abandoned && b->deadline_ms < next)
        next = b->deadline_ms;
      pthread_mutex_unlock(&b->mu);
    }
    pthread_mutex_unlock(&cs->mu);
    if (!msg)
      return next;
    log_write(DURO_LOG_WARN, NULL, "%s", msg);
    free(msg);
    verdict_settle(&v);
  }
}

void queue_hung_list_free(queue_hung_list *l) {
  for (size_t i = 0; l && i < l->n; i++) {
    free(l->v[i].queue);
    free(l->v[i].plugin);
  }
  if (l) {
    free(l->v);
    *l = (queue_hung_list){0};
  }
}

void queue_handlers_hung(duro_engine *e, queue_hung_list *out) {
  *out = (queue_hung_list){0};
  struct queue_consumers *cs = queue_consumers_of(e);
  if (!cs)
    return;
  int64_t now = engine_mono_ms(e);
  pthread_mutex_lock(&cs->mu);
  for (size_t i = 0; i < cs->n_live; i++) {
    duro_message_batch *b = cs->live[i];
    pthread_mutex_lock(&b->mu);
    if (b->abandoned && !b->settled) {
      if (!out->v)
        out->v = xcalloc(cs->n_live, sizeof *out->v);
      out->v[out->n++] =
          (queue_hung_handler){.queue = xstrdup(b->queue),
                               .plugin = b->plugin ? xstrdup(b->plugin) : NULL,
                               .messages = b->n,
                               .running_ms = now - b->started_ms,
                               .timeout_ms = b->timeout_ms};
    }
    pthread_mutex_unlock(&b->mu);
  }
  pthread_mutex_unlock(&cs->mu);
}

/* Says in the crash ledger which batch is about to be leased, before the
 * lease commits: if the engine dies from then on — the handler crashing
 * it, or anything else — the next engine retries the batch at once
 * instead of waiting out the lease (the thread that runs the handler
 * binds the slot, so a crash in it is laid on this batch).  NULL when
 * there is no ledger or every slot is taken: the lease covers it. */
static ledger_slot *batch_slot(duro_engine *e, const wf_consumer *c,
                               const char *prefix) {
  ledger *l = engine_ledger(e);
  ledger_slot *sl =
      l && engine_workers(e) ? ledger_claim(l, LEDGER_IDLE) : NULL;
  if (!sl)
    return NULL;
  ledger_copy(sl->workflow, sizeof sl->workflow, c->queue);
  ledger_copy(sl->plugin, sizeof sl->plugin, c->plugin);
  ledger_copy(sl->key, sizeof sl->key, prefix);
  sl->count = 0;
  sl->started_ms = engine_now(e);
  ledger_set_state(sl, LEDGER_BATCH);
  return sl;
}

static void *batch_thread(void *arg) {
  duro_message_batch *b = arg;
  duro_engine *e = b->e;
  ledger_thread_altstack();
  ledger_thread_bind(engine_ledger(e), b->slot);
  batch_run(b);
  struct queue_consumers *cs = queue_consumers_of(e);
  pthread_mutex_lock(&cs->mu);
  live_remove_locked(cs, b); /* the deadline keeps off it from now */
  pthread_mutex_unlock(&cs->mu);
  ledger_release(engine_ledger(e), b->slot);
  batch_free(b);
  engine_kick_scheduler(e); /* a slot is free: more may go now */
  pthread_mutex_lock(&cs->mu);
  cs->threads--;
  pthread_cond_broadcast(&cs->idle);
  pthread_mutex_unlock(&cs->mu);
  return NULL;
}

/* The earlier of two times, JOURNAL_NONE being "never". */
static int64_t earlier(int64_t a, int64_t b) {
  return a == JOURNAL_NONE ? b : b == JOURNAL_NONE || a < b ? a : b;
}

/* Whether a batch should go now: a full one is there, or the oldest
 * visible message has waited max_batch_timeout since it became visible
 * (a time the journal keeps, so the wait is exact and survives a
 * restart).  Then takes one of the consumer's max_concurrency slots.
 * Else *due gets when to look again (JOURNAL_NONE: when kicked). */
static duro_queue_fn batch_due(duro_engine *e, const wf_consumer *c,
                               int64_t *due) {
  int64_t now = engine_now(e);
  journal_queue_ready_info r = {0, JOURNAL_NONE, JOURNAL_NONE};
  *due = JOURNAL_NONE;
  if (journal_queue_ready(engine_journal(e), c->queue, now, c->batch, &r)) {
    *due = now + 1000; /* storage trouble: look again in a second */
    return NULL;
  }
  struct queue_consumers *cs = queue_consumers_of(e);
  duro_queue_fn fn = NULL;
  pthread_mutex_lock(&cs->mu);
  for (size_t i = 0; i < cs->n; i++) {
    wf_consumer *q = &cs->v[i];
    if (strcmp(q->queue, c->queue) != 0)
      continue;
    int64_t full_at = r.ready
                          ? r.oldest_visible_ms + q->opt.max_batch_timeout_ms
                          : JOURNAL_NONE;
    int go = r.ready >= q->batch || (r.ready > 0 && now >= full_at);
    if (q->in_flight >= q->opt.max_concurrency)
      go = 0; /* a batch's end kicks the scheduler */
    else if (!go)
      *due = earlier(full_at, r.next_visible_ms);
    if (go && q->handler) {
      q->in_flight++;
      fn = q->handler; /* the current build's, counted under the lock */
      running_add_locked(cs, fn, 1);
    }
  }
  pthread_mutex_unlock(&cs->mu);
  return fn;
}

/* Runs the batch on a thread of its own, watched by its deadline. */
static void batch_start(duro_engine *e, duro_message_batch *b) {
  struct queue_consumers *cs = queue_consumers_of(e);
  pthread_mutex_lock(&cs->mu);
  cs->threads++;
  cs->live = xrealloc(cs->live, (cs->n_live + 1) * sizeof *cs->live);
  cs->live[cs->n_live++] = b;
  pthread_mutex_unlock(&cs->mu);
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, batch_thread, b) != 0)
    batch_thread(b); /* no thread: this one runs it */
  pthread_attr_destroy(&attr);
}

static size_t dispatch_push(duro_engine *e, const wf_consumer *c,
                            int64_t *due) {
  duro_queue_fn fn = batch_due(e, c, due);
  if (!fn)
    return 0;
  journal_message *msgs = NULL;
  char err[256], prefix[QUEUE_LEASE_PREFIX];
  size_t n = 0;
  queue_lease_prefix(prefix);
  ledger_slot *slot = batch_slot(e, c, prefix);
  int threaded = engine_workers(e) > 0;
  int64_t timeout = c->opt.visibility_ms ? c->opt.visibility_ms
                                         : DURO_QUEUE_DEFAULT_VISIBILITY_MS;
  /* Read before the lease is taken, which is held a margin longer on a
   * thread: the deadline, not the lease's end, settles a hung batch. */
  int64_t started = engine_mono_ms(e);
  int64_t lease =
      threaded
          ? timeout + (timeout < SETTLE_MARGIN_MS ? timeout : SETTLE_MARGIN_MS)
          : timeout;
  if (queue_lease(e, c->queue, c->batch,
                  lease < DURO_QUEUE_MAX_DELAY_MS ? lease
                                                  : DURO_QUEUE_MAX_DELAY_MS,
                  prefix, &msgs, &n, err, sizeof err))
    log_error("queue %s: leasing a batch: %s", c->queue, err);
  if (n == 0) {
    journal_messages_free(msgs, n);
    ledger_release(engine_ledger(e), slot);
    batch_done(e, c->queue, fn, 1, 0);
    return 0;
  }
  if (slot)
    slot->count = (uint32_t)n;
  duro_message_batch *b = batch_new(e, c, fn, prefix, msgs, n);
  b->slot = slot;
  b->started_ms = started;
  b->timeout_ms = timeout;
  b->deadline_ms = started + timeout;
  if (threaded) {
    batch_start(e, b);
  } else {
    batch_run(b);
    batch_free(b);
  }
  return n;
}

/* ---- the plugin's side of a batch (duro.h, minor 2) ----------------------
 */

const char *queue_api_batch_queue(const duro_message_batch *b) {
  return b ? b->queue : NULL;
}

size_t queue_api_batch_size(const duro_message_batch *b) {
  return b ? b->n : 0;
}

const duro_message *queue_api_batch_message(const duro_message_batch *b,
                                            size_t i) {
  return b && i < b->n ? &b->msgs[i] : NULL;
}

/* Refused once the batch was abandoned: its leases are settled. */
static int mark(duro_message_batch *b, size_t i, int how, int64_t delay_ms) {
  if (!b || i >= b->n || delay_ms > DURO_QUEUE_MAX_DELAY_MS)
    return DURO_E_INVALID_ARGUMENT;
  pthread_mutex_lock(&b->mu);
  int rc = b->abandoned ? DURO_E_LEASE_NOT_HELD : 0;
  if (rc == 0) {
    b->mark[i] = how;
    b->delay[i] = delay_ms;
  }
  pthread_mutex_unlock(&b->mu);
  return rc;
}

int queue_api_message_ack(duro_message_batch *b, size_t i) {
  return mark(b, i, MARK_ACK, 0);
}

int queue_api_message_retry(duro_message_batch *b, size_t i, int64_t delay_ms) {
  return mark(b, i, MARK_RETRY, delay_ms);
}

int queue_api_ack_all(duro_message_batch *b) {
  int rc = b ? 0 : DURO_E_INVALID_ARGUMENT;
  for (size_t i = 0; b && i < b->n && !rc; i++)
    rc = mark(b, i, MARK_ACK, 0);
  return rc;
}

int queue_api_retry_all(duro_message_batch *b, int64_t delay_ms) {
  int rc = b ? 0 : DURO_E_INVALID_ARGUMENT;
  for (size_t i = 0; b && i < b->n && !rc; i++)
    rc = mark(b, i, MARK_RETRY, delay_ms);
  return rc;
}

size_t queue_consumers_dispatch(duro_engine *e, int64_t *next_ms) {
  struct queue_consumers *cs = queue_consumers_of(e);
  int64_t next = JOURNAL_NONE;
  /* First the deadlines: a slot a hung handler held is free for this
   * pass, and its messages are settled before their leases end. */
  int64_t deadline = cs ? handlers_watch(e, cs) : INT64_MAX;
  if (deadline != INT64_MAX)
    next = engine_now(e) + (deadline - engine_mono_ms(e));
  size_t handled = 0;
  wf_consumer c;
  for (size_t i = 0; cs && consumer_copy(cs, i, &c); i++) {
    int64_t due = JOURNAL_NONE;
    handled += c.workflow ? dispatch_workflow(e, &c, &due)
                          : dispatch_push(e, &c, &due);
    next = earlier(next, due);
    consumer_clear(&c);
  }
  if (next_ms)
    *next_ms = next;
  return handled;
}

size_t duro_queues_dispatch(duro_engine *e) {
  return queue_consumers_dispatch(e, NULL);
}

typedef struct held {
  char *lease[DURO_QUEUE_MAX_BATCH];
  size_t n;
} held;

static void collect_lease(void *ctx, const char *lease) {
  held *h = ctx;
  if (h->n < DURO_QUEUE_MAX_BATCH)
    h->lease[h->n++] = xstrdup(lease);
}

int queue_batch_release(duro_engine *e, const char *queue, const char *prefix,
                        int64_t delay_ms, const char *error) {
  if (!duro_queue_exists(e, queue))
    return 0; /* not a queue this config knows: its leases run out */
  held h = {.n = 0};
  int64_t now = engine_now(e);
  if (journal_queue_leases(engine_journal(e), queue, now, prefix, collect_lease,
                           &h)) {
    log_error("queue %s: finding a stopped batch: %s", queue,
              journal_errmsg(engine_journal(e)));
    return DURO_E_STORAGE;
  }
  /* Fewer than the batch: the handler acked or retried some before the
   * death (a settle is one commit: all or none). */
  duro_queue_retry r[DURO_QUEUE_MAX_BATCH];
  for (size_t i = 0; i < h.n; i++)
    r[i] = (duro_queue_retry){h.lease[i], delay_ms, error};
  duro_queue_ack_result res = {0};
  char err[256];
  int rc =
      h.n ? duro_queue_settle(e, queue, NULL, 0, r, h.n, &res, err, sizeof err)
          : 0;
  if (rc)
    log_error("queue %s: releasing a batch of %zu: %s", queue, h.n, err);
  duro_queue_ack_result_free(&res);
  for (size_t i = 0; i < h.n; i++)
    free(h.lease[i]);
  return rc;
}
