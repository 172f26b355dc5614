/* hosts.c — this engine as one of the hosts that share a store.
 *
 * On a shared store (PostgreSQL; journal.h, "several hosts on one store")
 * every instance is run by one host, its owner, under that host's lease.
 * This file is what the engine does about the others:
 *  - takeover: the scheduler renews this host's lease and takes over the
 *    instances of hosts whose lease ran out (and of none: a migrated
 *    journal's), then treats them as start-up recovery would (their queued
 *    ones run, their wakes are polled from the earliest);
 *  - notices from other hosts, on the journal's keeper thread: an event
 *    they stored for an instance this host runs ("e <rowid> <woke>"), a
 *    control request to carry out here and answer, the answer to one this
 *    host sent, and "resync" after notices may have been lost.  That
 *    thread also renews the lease, so it only notes what a notice says:
 *    the work that waits on the store (a control request carried out, a
 *    remote watch, which reads the row) goes to the notices thread, in
 *    order, so that a slow database or a burst of requests never holds
 *    up a renewal (or the answers to this host's own requests);
 *  - forwarding: a pause, resume, terminate or restart that reaches this
 *    host for an instance another host runs is sent to that host, which
 *    applies it as its own and answers; the caller gets that answer, or
 *    DURO_E_HOST_UNAVAILABLE when none came in time.  Nothing is
 *    acknowledged that the owner did not commit;
 *  - remote watches: a waiter on this host for an instance another host
 *    runs ("?wait") asks that host ("w <rowid> <host>") to say when the
 *    instance ends ("d <rowid> <status>").  Should the owner die first, the
 *    waiter's own time limit ends the wait.
 * On a store with one host none of this runs (journal_host is 0). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_internal.h"
#include "log.h"
#include "util.h"

#define LEASE_DEFAULT_MS 5000
#define TAKEOVER_BATCH 1000
#define FORWARD_WAIT_MS 10000
#define FORWARD_CHECK_MS 250

/* A control request this host forwarded, waiting for its answer. */
typedef struct forward_wait {
  uint64_t id;
  int done, rc;
  char *why;
  struct forward_wait *next;
} forward_wait;

/* Set while this thread carries out a request another host forwarded:
 * it is never forwarded again. */
static __thread int carrying_out;

int64_t engine_lease_ms(const duro_engine *e) {
  return e->opt.lease_ms > 0 ? e->opt.lease_ms : LEASE_DEFAULT_MS;
}

/* ---- takeover -------------------------------------------------------------
 */

static void note_wake(void *ctx, int64_t rowid, int64_t wake_ms) {
  (void)rowid;
  int64_t *earliest = ctx;
  if (wake_ms != JOURNAL_NONE && wake_ms < *earliest)
    *earliest = wake_ms;
}

/* Looks again at every wake from `from` on (the poll skips those held). */
static void repoll_from(duro_engine *e, int64_t from) {
  pthread_mutex_lock(&e->mu);
  if (from < e->polled_through)
    e->polled_through = from;
  e->sched_kick = 1;
  pthread_cond_signal(&e->sched);
  pthread_mutex_unlock(&e->mu);
}

void engine_takeover(duro_engine *e) {
  if (!journal_host(e->j))
    return;
  size_t total = 0, moved;
  int64_t earliest = INT64_MAX;
  do {
    if (journal_takeover(e->j, TAKEOVER_BATCH, note_wake, &earliest, &moved) !=
        0) {
      log_error("taking over the instances of stopped hosts: %s",
                journal_errmsg(e->j));
      break;
    }
    total += moved;
  } while (moved == TAKEOVER_BATCH);
  if (!total)
    return;
  log_info("took over %zu instance(s) of stopped hosts", total);
  if (e->opt.on_takeover)
    e->opt.on_takeover(e->opt.ctx);
  if (earliest != INT64_MAX)
    repoll_from(e, earliest - 1);
  if (engine_reconcile(e) != 0)
    log_error("recovering taken-over instances: %s", journal_errmsg(e->j));
}

int64_t engine_hosts_tick(duro_engine *e, int64_t mono) {
  if (!journal_host(e->j))
    return INT64_MAX;
  if (mono >= e->next_takeover) {
    engine_takeover(e);
    e->next_takeover = mono + engine_lease_ms(e) / 2;
  }
  int64_t rebalance = engine_rebalance_tick(e, mono);
  return rebalance < e->next_takeover ? rebalance : e->next_takeover;
}

/* ---- forwarding -----------------------------------------------------------
 */

static const char *const control_ops[] = {
    "pause",   "terminate",          "resume",
    "restart", "terminate-rollback", "restart-rollback",
    "delete",  "delete-terminate"};

int engine_control_elsewhere(duro_engine *e, int64_t rowid, int64_t *owner) {
  if (!journal_host(e->j))
    return 0;
  int rc = journal_adopt(e->j, rowid, owner);
  if (rc)
    return rc;
  if (*owner == journal_host(e->j))
    return 0;
  /* Carrying out another host's request for an instance that moved on
   * meanwhile: its caller retries. */
  return carrying_out ? DURO_E_HOST_UNAVAILABLE : 1;
}

/* Sends request `op` to host `owner` and waits up to `wait_ms` for its
 * answer, looking every FORWARD_CHECK_MS whether the instance moved: 0
 * with the answer in *rc (and *why), 1 with its new owner in *moved, or
 * -1 when no answer came in time. */
static int ask_owner(duro_engine *e, int64_t rowid, int64_t owner, int op,
                     const char *workflow, const char *id, const char *from,
                     uint32_t count, int64_t wait_ms, int *rc, char **why,
                     int64_t *moved) {
  forward_wait w = {0};
  pthread_mutex_lock(&e->fw_mu);
  w.id = ++e->fw_next;
  w.next = e->fw_list;
  e->fw_list = &w;
  pthread_mutex_unlock(&e->fw_mu);
  json_t *req =
      json_pack("{s:I,s:I,s:s,s:s,s:s,s:I}", "q", (json_int_t)w.id, "from",
                (json_int_t)journal_host(e->j), "op", control_ops[op],
                "workflow", workflow, "id", id, "count", (json_int_t)count);
  if (from)
    json_object_set_new(req, "step", json_string(from));
  char *text = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  int sent = journal_notify(e->j, owner, text) == 0;
  free(text);
  int outcome = -1;
  for (int64_t waited = 0; sent && waited < wait_ms;
       waited += FORWARD_CHECK_MS) {
    struct timespec until = engine_cond_deadline(FORWARD_CHECK_MS);
    pthread_mutex_lock(&e->fw_mu);
    while (!w.done &&
           pthread_cond_timedwait(&e->fw_cv, &e->fw_mu, &until) != ETIMEDOUT)
      ;
    int done = w.done;
    pthread_mutex_unlock(&e->fw_mu);
    if (done) {
      outcome = 0;
      break;
    }
    /* The owner died and another host (this one, maybe) took the instance
     * over: the request goes there instead of waiting out the dead one. */
    int64_t now = owner;
    if (journal_adopt(e->j, rowid, &now) == 0 && now != owner) {
      *moved = now;
      outcome = 1;
      break;
    }
  }
  pthread_mutex_lock(&e->fw_mu);
  for (forward_wait **p = &e->fw_list; *p; p = &(*p)->next)
    if (*p == &w) {
      *p = w.next;
      break;
    }
  pthread_mutex_unlock(&e->fw_mu);
  if (outcome == 0) {
    *rc = w.rc;
    if (why)
      *why = w.why;
    else
      free(w.why);
  } else {
    free(w.why);
  }
  return outcome;
}

int engine_forward_control(duro_engine *e, int64_t rowid, int64_t owner, int op,
                           const char *workflow, const char *id,
                           const char *from, uint32_t count, char **why) {
  int64_t left = FORWARD_WAIT_MS;
  for (;;) {
    int rc = 0;
    int64_t moved = 0, t0 = engine_mono_ms(e);
    int outcome = ask_owner(e, rowid, owner, op, workflow, id, from, count,
                            left, &rc, why, &moved);
    if (outcome == 0)
      return rc;
    if (outcome == 1 && moved == journal_host(e->j))
      return FORWARD_HERE;
    left -= engine_mono_ms(e) - t0;
    if (outcome < 0 || left <= 0) {
      log_warn("host %" PRId64 " did not answer a %s of %s/%s in %d s", owner,
               control_ops[op], workflow, id, FORWARD_WAIT_MS / 1000);
      return DURO_E_HOST_UNAVAILABLE;
    }
    owner = moved;
  }
}

/* Another host's request, carried out here as if it came to this host. */
static void carry_out(duro_engine *e, json_t *req) {
  json_int_t q = 0, from = 0, count = 0;
  const char *op = NULL, *workflow = NULL, *id = NULL, *step = NULL;
  if (json_unpack(req, "{s:I,s:I,s:s,s:s,s:s,s?I,s?s}", "q", &q, "from", &from,
                  "op", &op, "workflow", &workflow, "id", &id, "count", &count,
                  "step", &step) != 0) {
    log_warn("a malformed control request from another host: ignored");
    return;
  }
  char *why = NULL;
  int rc = DURO_E_INVALID_ARGUMENT;
  carrying_out = 1;
  if (!strcmp(op, "pause"))
    rc = duro_instance_pause(e, workflow, id);
  else if (!strcmp(op, "terminate"))
    rc = duro_instance_terminate(e, workflow, id);
  else if (!strcmp(op, "terminate-rollback"))
    rc = duro_instance_terminate_rollback(e, workflow, id);
  else if (!strcmp(op, "resume"))
    rc = duro_instance_resume(e, workflow, id);
  else if (!strcmp(op, "restart"))
    rc =
        duro_instance_restart_why(e, workflow, id, step, (uint32_t)count, &why);
  else if (!strcmp(op, "restart-rollback"))
    rc = duro_instance_restart_rollback_why(e, workflow, id, step,
                                            (uint32_t)count, &why);
  else if (!strcmp(op, "delete") || !strcmp(op, "delete-terminate"))
    rc = duro_instance_delete(e, workflow, id, !strcmp(op, "delete-terminate"),
                              NULL, &why);
  carrying_out = 0;
  json_t *ans = json_pack("{s:I,s:i}", "r", q, "rc", rc);
  if (why)
    json_object_set_new(ans, "why", json_string(why));
  free(why);
  char *text = json_dumps(ans, JSON_COMPACT);
  json_decref(ans);
  if (journal_notify(e->j, (int64_t)from, text) != 0)
    log_warn("answering host %" PRId64 ": %s", (int64_t)from,
             journal_errmsg(e->j));
  free(text);
}

static void answer_came(duro_engine *e, json_t *ans) {
  json_int_t r = 0;
  int rc = 0;
  const char *why = NULL;
  if (json_unpack(ans, "{s:I,s:i,s?s}", "r", &r, "rc", &rc, "why", &why) != 0)
    return;
  pthread_mutex_lock(&e->fw_mu);
  for (forward_wait *w = e->fw_list; w; w = w->next)
    if (w->id == (uint64_t)r) {
      w->rc = rc;
      w->why = why ? xstrdup(why) : NULL;
      w->done = 1;
      pthread_cond_broadcast(&e->fw_cv);
      break;
    }
  pthread_mutex_unlock(&e->fw_mu);
}

/* ---- remote watches -------------------------------------------------------
 */

/* The hosts waiting for one of this host's instances to end. */
typedef struct remote_watchers {
  size_t n;
  int64_t host[];
} remote_watchers;

void engine_watch_elsewhere(duro_engine *e, int64_t owner, int64_t rowid) {
  char text[64];
  snprintf(text, sizeof text, "w %" PRId64 " %" PRId64, rowid,
           journal_host(e->j));
  if (journal_notify(e->j, owner, text) != 0)
    log_warn("asking host %" PRId64 " to report an end: %s", owner,
             journal_errmsg(e->j));
}

void engine_remote_watches_fire(duro_engine *e, int64_t rowid,
                                const char *status) {
  if (!__atomic_load_n(&e->remote_watched, __ATOMIC_ACQUIRE))
    return;
  pthread_mutex_lock(&e->fw_mu);
  remote_watchers *rw = idmap_del(&e->remote_watches, rowid);
  if (rw)
    __atomic_sub_fetch(&e->remote_watched, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&e->fw_mu);
  if (!rw)
    return;
  char text[96];
  snprintf(text, sizeof text, "d %" PRId64 " %.20s", rowid, status);
  for (size_t i = 0; i < rw->n; i++)
    journal_notify(e->j, rw->host[i], text);
  free(rw);
}

/* Host `host` waits for instance `rowid` to end: remembered, then the row
 * read again, since the end may have come before the request. */
static void watch_for(duro_engine *e, int64_t rowid, int64_t host) {
  pthread_mutex_lock(&e->fw_mu);
  remote_watchers *rw = idmap_get(&e->remote_watches, rowid);
  size_t n = rw ? rw->n : 0;
  remote_watchers *more = xrealloc(rw, sizeof *rw + (n + 1) * sizeof(int64_t));
  more->n = n + 1;
  more->host[n] = host;
  idmap_put(&e->remote_watches, rowid, more);
  if (!rw)
    __atomic_add_fetch(&e->remote_watched, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&e->fw_mu);
  journal_instance in = {0};
  int rc = journal_instance_get_rowid(e->j, rowid, &in);
  if (rc == DURO_E_NOT_FOUND || (rc == 0 && duro_status_ended(in.status)))
    engine_remote_watches_fire(e, rowid,
                               rc ? "gone" : duro_status_name(in.status));
  journal_instance_clear(&in);
}

static void free_watchers(void *ctx, int64_t key, void *val) {
  (void)ctx, (void)key;
  free(val);
}

void engine_hosts_free(duro_engine *e) {
  idmap_each(&e->remote_watches, free_watchers, NULL);
  idmap_free(&e->remote_watches);
  pthread_mutex_destroy(&e->fw_mu);
  pthread_cond_destroy(&e->fw_cv);
}

/* ---- the notices thread ---------------------------------------------------
 */

/* A control request to carry out (req), or a remote watch to register
 * (req NULL: host `host` waits for instance `rowid`). */
typedef struct notice_job {
  json_t *req;
  int64_t rowid, host;
  struct notice_job *next;
} notice_job;

typedef struct notice_queue {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  notice_job *head, **tail;
  int stopping;
  pthread_t thread;
} notice_queue;

static void job_run(duro_engine *e, notice_job *job) {
  if (job->req)
    carry_out(e, job->req);
  else
    watch_for(e, job->rowid, job->host);
  json_decref(job->req);
  free(job);
}

static void *notices_main(void *arg) {
  duro_engine *e = arg;
  notice_queue *q = e->notices;
  pthread_mutex_lock(&q->mu);
  while (!q->stopping) {
    notice_job *job = q->head;
    if (!job) {
      pthread_cond_wait(&q->cv, &q->mu);
      continue;
    }
    if (!(q->head = job->next))
      q->tail = &q->head;
    pthread_mutex_unlock(&q->mu);
    job_run(e, job);
    pthread_mutex_lock(&q->mu);
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

/* Hands `job` to the notices thread (on the keeper's). */
static void job_queue(duro_engine *e, notice_job *job) {
  notice_queue *q = e->notices;
  pthread_mutex_lock(&q->mu);
  job->next = NULL;
  *q->tail = job;
  q->tail = &job->next;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

static int notices_start(duro_engine *e, char *err, size_t errlen) {
  notice_queue *q = xcalloc(1, sizeof *q);
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cv, NULL);
  q->tail = &q->head;
  e->notices = q;
  if (pthread_create(&q->thread, NULL, notices_main, e) != 0) {
    snprintf(err, errlen, "cannot start the notices thread");
    e->notices = NULL;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
    return DURO_E_STORAGE;
  }
  return 0;
}

/* Requests still queued are dropped: their senders time out (a host that
 * stops answers nothing more). */
static void notices_stop(duro_engine *e) {
  notice_queue *q = e->notices;
  if (!q)
    return;
  pthread_mutex_lock(&q->mu);
  q->stopping = 1;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&q->mu);
  pthread_join(q->thread, NULL);
  for (notice_job *job = q->head, *next; job; job = next) {
    next = job->next;
    json_decref(job->req);
    free(job);
  }
  pthread_mutex_destroy(&q->mu);
  pthread_cond_destroy(&q->cv);
  free(q);
  e->notices = NULL;
}

void engine_hosts_quiet(duro_engine *e) {
  journal_quiet(e->j); /* no notice comes from now on */
  notices_stop(e);
}

/* ---- notices ----------------------------------------------------------------
 */

static void on_notice(void *ctx, const char *text) {
  duro_engine *e = ctx;
  long long rowid, host;
  int woke;
  char status[24];
  if (sscanf(text, "e %lld %d", &rowid, &woke) == 2) {
    engine_instance_poke(e, (int64_t)rowid, woke);
    return;
  }
  if (sscanf(text, "w %lld %lld", &rowid, &host) == 2) {
    notice_job *job = xcalloc(1, sizeof *job);
    job->rowid = (int64_t)rowid;
    job->host = (int64_t)host;
    job_queue(e, job);
    return;
  }
  if (sscanf(text, "d %lld %23s", &rowid, status) == 2) {
    engine_watch_fire(e, (int64_t)rowid, status);
    return;
  }
  if (!strcmp(text, "resync")) {
    /* An event's notice may be lost with it: its wake is in the journal;
     * and so may a notice of instances handed to this host: its rows are
     * read again. */
    repoll_from(e, INT64_MIN);
    engine_rebalance_received(e, 0, 0);
    return;
  }
  json_t *msg = json_loads(text, 0, NULL);
  json_t *h = json_object_get(msg, "h");
  if (json_is_array(h) && json_array_size(h) == 2) /* rebalance.c */
    engine_rebalance_received(
        e, (int64_t)json_integer_value(json_array_get(h, 0)),
        (int64_t)json_integer_value(json_array_get(h, 1)));
  else if (json_is_object(msg) && json_object_get(msg, "q")) {
    notice_job *job = xcalloc(1, sizeof *job);
    job->req = json_incref(msg);
    job_queue(e, job);
  } else if (json_is_object(msg) && json_object_get(msg, "r"))
    answer_came(e, msg);
  else
    log_warn("an unknown notice from another host: ignored");
  json_decref(msg);
}

static void on_lost(void *ctx) {
  duro_engine *e = ctx;
  log_error("this host's lease on the store was lost: another host took over "
            "its instances (it did not renew the lease for %" PRId64 " ms)",
            engine_lease_ms(e));
  if (e->opt.on_lease_lost)
    e->opt.on_lease_lost(e->opt.ctx);
}

int engine_join(duro_engine *e, char *err, size_t errlen) {
  pthread_mutex_init(&e->fw_mu, NULL);
  engine_cond_init(&e->fw_cv);
  if (!e->opt.join_store || e->opt.read_only)
    return 0;
  store_host_hooks hooks = {.notice = on_notice,
                            .lost = on_lost,
                            .counts = engine_host_counts_text,
                            .ctx = e};
  /* Running before the first notice can come. */
  int rc = notices_start(e, err, errlen);
  if (rc)
    return rc;
  rc = journal_join(e->j, engine_lease_ms(e), &hooks, err, errlen);
  if (rc || !journal_host(e->j)) /* no other host can reach this one */
    notices_stop(e);
  if (rc == 0 && journal_host(e->j))
    log_info("joined the store as host %" PRId64 " (lease %" PRId64 " ms)",
             journal_host(e->j), engine_lease_ms(e));
  return rc;
}
