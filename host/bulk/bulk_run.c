/* bulk_run.c — a bulk job's batches (bulk.h): the next matches below the
 * job's cursor, newest first, each acted on through the engine's own
 * control calls (so a running instance, one on another host, a refusal
 * are what a single request would meet), and the job's row moved on in
 * one commit after the batch.  The batch's instances are acted on by a
 * few threads at once (DURO_BULK_HELPERS), so that their commits share
 * the group commit's fsyncs; the cursor passes only the instances up to
 * the first one not yet acted on.
 *
 * A crash between an action and the commit that records it does the
 * batch again at the next start (here or on the host that takes the job
 * over).  A terminate, pause, resume or delete of an instance already so
 * is refused by the engine, harmless, and counted skipped then.  A
 * restart done twice is not harmless: so a restart's batch records its
 * plan before it acts, each instance's rowid with its restart count
 * (journal_instance.restarts) as it was, in the job's row; a batch cut
 * short resumes from that plan, and an instance whose count has moved
 * since was restarted by it already (counted done), not again. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bulk_internal.h"
#include "core.h"
#include "error.h"
#include "log.h"
#include "util.h"

typedef struct match {
  int64_t rowid;
  char *id;
  int64_t restarts; /* a restart's plan: the count before it */
  int rc;           /* the action's answer */
} match;

typedef struct batch {
  match v[DURO_BULK_BATCH];
  size_t n;
} batch;

static void collect(void *ctx, const journal_list_row *row) {
  batch *b = ctx;
  if (b->n < DURO_BULK_BATCH)
    b->v[b->n++] = (match){.rowid = row->rowid, .id = xstrdup(row->id)};
}

static void batch_clear(batch *b) {
  for (size_t i = 0; i < b->n; i++)
    free(b->v[i].id);
  b->n = 0;
}

/* What an action's answer counts as. */
enum { OUT_DONE, OUT_SKIPPED, OUT_FAILED, OUT_LATER };

static int outcome(int rc) {
  switch (rc) {
  case 0:
    return OUT_DONE;
  case DURO_E_NOT_FOUND: /* gone meanwhile (deleted, swept) */
  case DURO_E_CANNOT_TERMINATE:
  case DURO_E_CANNOT_PAUSE:
  case DURO_E_CANNOT_RESUME:
  case DURO_E_CANNOT_RESTART:
  case DURO_E_CANNOT_DELETE:
    return OUT_SKIPPED;
  case DURO_E_STORAGE:          /* writes fail: the batch waits */
  case DURO_E_SHUTDOWN:         /* the engine stops */
  case DURO_E_HOST_UNAVAILABLE: /* its host did not answer: later */
    return OUT_LATER;
  default:
    return OUT_FAILED;
  }
}

static int act(duro_engine *e, const journal_bulk *job, duro_bulk_action a,
               const char *id) {
  switch (a) {
  case DURO_BULK_TERMINATE:
    /* answered once persisted: a running one ends at its next step */
    return engine_terminate_nowait(e, job->workflow, id);
  case DURO_BULK_PAUSE:
    return duro_instance_pause(e, job->workflow, id);
  case DURO_BULK_RESUME:
    return duro_instance_resume(e, job->workflow, id);
  case DURO_BULK_RESTART:
    return duro_instance_restart(e, job->workflow, id, NULL, 0);
  case DURO_BULK_DELETE:
    return duro_instance_delete(e, job->workflow, id, job->terminate, NULL,
                                NULL);
  }
  return DURO_E_INVALID_ARGUMENT;
}

/* A batch being acted on: the helpers take its instances in turn. */
typedef struct acting {
  duro_engine *e;
  journal_bulk *job;
  int a, resumed;
  batch *b;
  size_t next; /* atomic: the next instance to take */
} acting;

/* One instance: its answer into m->rc.  A restart resumed from its plan
 * is not done again where the instance's count moved since. */
static void act_one(acting *ac, match *m) {
  if (bulk_stopping(ac->e)) {
    m->rc = DURO_E_SHUTDOWN; /* later: the batch stops here */
    return;
  }
  if (!m->id) {
    m->rc = DURO_E_NOT_FOUND;
    return;
  }
  if (ac->a == DURO_BULK_RESTART && ac->resumed) {
    journal_instance in = {0};
    int got = journal_instance_get_rowid(engine_journal(ac->e), m->rowid, &in);
    int restarted = got == 0 && in.restarts > m->restarts;
    journal_instance_clear(&in);
    if (got || restarted) {
      m->rc = got;
      return;
    }
  }
  m->rc = act(ac->e, ac->job, ac->a, m->id);
}

static void *helper(void *arg) {
  acting *ac = arg;
  size_t i;
  while ((i = __atomic_fetch_add(&ac->next, 1, __ATOMIC_RELAXED)) < ac->b->n)
    act_one(ac, &ac->b->v[i]);
  return NULL;
}

/* Acts on every instance of the batch: with engine threads, on
 * DURO_BULK_HELPERS threads at once, so that their commits share the
 * group commit's fsyncs instead of taking one each in turn; with none
 * (a test's engine), one after another on this thread. */
static void act_batch(acting *ac) {
  pthread_t t[DURO_BULK_HELPERS];
  size_t started = 0;
  if (engine_workers(ac->e) > 0)
    for (; started < DURO_BULK_HELPERS && started + 1 < ac->b->n; started++)
      if (pthread_create(&t[started], NULL, helper, ac) != 0)
        break;
  helper(ac);
  for (size_t i = 0; i < started; i++)
    pthread_join(t[i], NULL);
}

static size_t lines(const char *text) {
  size_t n = 0;
  for (const char *p = text; p && *p; p++)
    n += *p == '\n';
  return n;
}

/* Counts one instance's outcome into the job (a failure's error kept
 * while fewer than DURO_BULK_ERRORS are). */
static void count(journal_bulk *job, int out, const char *id, int rc) {
  if (out == OUT_DONE)
    job->done++;
  else if (out == OUT_SKIPPED)
    job->skipped++;
  else if (out == OUT_FAILED) {
    job->failed++;
    if (lines(job->errors) < DURO_BULK_ERRORS) {
      char *more = xasprintf("%s%s\t%s: %s\n", job->errors ? job->errors : "",
                             id, duro_err_name(rc), duro_err_str(rc));
      free(job->errors);
      job->errors = more;
    }
  }
}

/* Writes the job's row as it now stands (this host's). */
static int record(duro_engine *e, journal_bulk *job) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_BULK_PROGRESS);
  op->bulk = job;
  int rc = journal_commit(engine_journal(e), &b);
  if (rc == 0 && op->out_rowid != 1)
    rc = DURO_E_NOT_FOUND; /* another host runs it now */
  journal_batch_free(&b);
  if (rc && rc != DURO_E_NOT_FOUND)
    log_error("bulk: job %" PRId64 ": recording its progress: %s", job->id,
              journal_errmsg(engine_journal(e)));
  return rc;
}

/* The plan "<rowid>:<restarts>,..." into b (ids read back). */
static void plan_parse(duro_engine *e, const char *plan, batch *b) {
  for (const char *p = plan; p && *p && b->n < DURO_BULK_BATCH;) {
    char *end;
    int64_t rowid = strtoll(p, &end, 10);
    int64_t restarts = *end == ':' ? strtoll(end + 1, &end, 10) : 0;
    journal_instance in = {0};
    if (journal_instance_get_rowid(engine_journal(e), rowid, &in) == 0)
      b->v[b->n++] =
          (match){.rowid = rowid, .id = xstrdup(in.id), .restarts = restarts};
    else /* gone since: nothing to restart, and the cursor passes it */
      b->v[b->n++] = (match){.rowid = rowid, .restarts = restarts};
    journal_instance_clear(&in);
    p = *end == ',' ? end + 1 : end + strlen(end);
  }
}

/* Records the plan of a restart's batch, each instance's restart count
 * as it is before any is restarted. */
static int plan_record(duro_engine *e, journal_bulk *job, batch *b) {
  size_t cap = b->n * 44 + 1, len = 0;
  char *plan = xcalloc(1, cap);
  for (size_t i = 0; i < b->n; i++) {
    journal_instance in = {0};
    if (journal_instance_get_rowid(engine_journal(e), b->v[i].rowid, &in) == 0)
      b->v[i].restarts = in.restarts;
    journal_instance_clear(&in);
    len += (size_t)snprintf(plan + len, cap - len, "%s%" PRId64 ":%" PRId64,
                            i ? "," : "", b->v[i].rowid, b->v[i].restarts);
  }
  free(job->plan);
  job->plan = plan;
  return record(e, job);
}

/* A job whose filter no longer parses (its search attribute was taken
 * out of the workflow's index since): it cannot tell its matches, so it
 * ends, cancelled, saying why. */
static void end_unfilterable(duro_engine *e, journal_bulk *job,
                             const char *why) {
  log_error("bulk: job %" PRId64 " (%s of %s): its filter: %s; it ends",
            job->id, job->action, job->workflow, why);
  char *errors = xasprintf("%s%s(filter)\t%s", job->errors ? job->errors : "",
                           job->errors ? "\n" : "", why);
  free(job->errors);
  job->errors = errors;
  free(job->state);
  job->state = xstrdup("cancelled");
  job->ended_ms = engine_now(e);
  record(e, job);
}

/* The next batch of the job's matches below its cursor into b: 0, or -1
 * (said in the log; the job ended when its filter no longer parses). */
static int read_matches(duro_engine *e, journal_bulk *job, batch *b) {
  duro_attr_filter where[DURO_ATTR_MAX];
  size_t n_where = 0;
  char why[256];
  if (job->where_terms && bulk_where_parse(e, job->workflow, job->where_terms,
                                           where, &n_where, why, sizeof why)) {
    for (size_t i = 0; i < n_where; i++)
      duro_attr_filter_clear(&where[i]);
    end_unfilterable(e, job, why);
    return -1;
  }
  journal_list_filter f = job->filter;
  f.where = where;
  f.n_where = n_where;
  int rc = journal_list(engine_journal(e), job->workflow, &f, job->cursor,
                        DURO_BULK_BATCH, collect, b);
  for (size_t i = 0; i < n_where; i++)
    duro_attr_filter_clear(&where[i]);
  if (rc)
    log_error("bulk: job %" PRId64 ": reading its matches: %s", job->id,
              journal_errmsg(engine_journal(e)));
  return rc ? -1 : 0;
}

/* One batch of `job` (this host's); how many instances it looked at. */
static size_t run_batch(duro_engine *e, journal_bulk *job) {
  int a = duro_bulk_action_parse(job->action);
  batch b = {.n = 0};
  int resumed = job->plan != NULL;
  if (resumed) {
    plan_parse(e, job->plan, &b);
  } else {
    if (read_matches(e, job, &b))
      return 0;
    if (a == DURO_BULK_RESTART && b.n && plan_record(e, job, &b)) {
      batch_clear(&b);
      return 0;
    }
  }
  acting ac = {.e = e, .job = job, .a = a, .resumed = resumed, .b = &b};
  act_batch(&ac);
  size_t n = 0;
  int later = 0;
  for (; n < b.n; n++) {
    match *m = &b.v[n];
    int out = outcome(m->rc);
    if (out == OUT_LATER) {
      later = 1;
      break;
    }
    count(job, out, m->id ? m->id : "?", m->rc);
    job->cursor = m->rowid;
  }
  /* A restart's batch cut short is resumed from its plan: nothing of it
   * is recorded, its counts come again from the plan. */
  if (later && a == DURO_BULK_RESTART) {
    batch_clear(&b);
    return n;
  }
  free(job->plan);
  job->plan = NULL;
  if (!later && !resumed && b.n < DURO_BULK_BATCH) {
    free(job->state);
    job->state = xstrdup("done");
    job->ended_ms = engine_now(e);
  }
  if (record(e, job) == 0 && !strcmp(job->state, "done"))
    log_write(DURO_LOG_INFO, NULL,
              "bulk: job %" PRId64 " (%s of %s) done: %" PRId64
              " matched, %" PRId64 " done, %" PRId64 " failed, %" PRId64
              " skipped",
              job->id, job->action, job->workflow, job->matched, job->done,
              job->failed, job->skipped);
  batch_clear(&b);
  return n;
}

/* The job, taken over when it is no live host's (a shared store); 0 to
 * run a batch of it. */
static int take(duro_engine *e, journal_bulk *job) {
  int64_t me = journal_host(engine_journal(e));
  if (job->host == me)
    return 0;
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, JOP_BULK_CLAIM);
  op->rowid = job->id;
  op->from_seq = me;
  int rc = journal_commit(engine_journal(e), &b);
  int taken = rc == 0 && op->out_rowid == 1;
  journal_batch_free(&b);
  if (!taken)
    return -1;
  log_write(DURO_LOG_INFO, NULL,
            "bulk: job %" PRId64 " (%s of %s) taken over from host %" PRId64,
            job->id, job->action, job->workflow, job->host);
  job->host = me;
  return 0;
}

typedef struct running {
  int64_t ids[16];
  size_t n;
} running;

static void running_one(void *ctx, const journal_bulk *b) {
  running *r = ctx;
  if (r->n < sizeof r->ids / sizeof *r->ids)
    r->ids[r->n++] = b->id;
}

size_t duro_bulk_pass(duro_engine *e) {
  running r = {.n = 0};
  if (journal_bulk_list(engine_journal(e), NULL, 1, 16, running_one, &r)) {
    log_error("bulk: reading the running jobs: %s",
              journal_errmsg(engine_journal(e)));
    return 0;
  }
  size_t n = 0;
  for (size_t i = r.n; i-- > 0 && !bulk_stopping(e);) { /* oldest first */
    journal_bulk job;
    if (journal_bulk_get(engine_journal(e), r.ids[i], &job))
      continue;
    if (!strcmp(job.state, "running") && take(e, &job) == 0)
      n += run_batch(e, &job);
    journal_bulk_clear(&job);
  }
  return n;
}
