/* engine_create.c — the creation of instances: a batch of requests
 * checked (workflow, id, params, the backlog), each a row inserted with
 * its id (given, or a UUIDv7), committed in one batch; on the committing
 * thread the created instances become runnable and the caller hears a
 * duro_create_result.  The asynchronous form (for the HTTP loop), the
 * synchronous ones waiting for it, and the insert op for callers that
 * commit a creation with writes of their own (core.h). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "engine_internal.h"
#include "error.h"
#include "log.h"
#include "trace_ids.h"
#include "util.h"

/* A UUIDv7: 48 bits of Unix milliseconds, then random bits.  Ids made
 * close in time sort close together, so creating many instances appends
 * to the (workflow, id) index instead of writing all over it. */
char *engine_random_id(int64_t now_ms) {
  unsigned char b[16];
  if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
    fprintf(stderr, "duro: getrandom failed: %s\n", strerror(errno));
    abort();
  }
  for (int i = 0; i < 6; i++)
    b[i] = (unsigned char)((uint64_t)now_ms >> (40 - 8 * i));
  b[6] = (b[6] & 0x0f) | 0x70;
  b[8] = (b[8] & 0x3f) | 0x80;
  return xasprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                   "%02x%02x%02x%02x%02x%02x",
                   b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
                   b[10], b[11], b[12], b[13], b[14], b[15]);
}

static int check_create(duro_engine *e, const char *workflow, const char *id,
                        const char *params, const wf_reg **wf) {
  *wf = engine_find_workflow(e, workflow);
  if (!*wf)
    return DURO_E_WORKFLOW_NOT_FOUND;
  if (id && !duro_instance_id_valid(id))
    return DURO_E_INVALID_ID;
  if (params && json_text_check(params, e->max_step_result) != 0)
    return DURO_E_INVALID_PARAMS;
  return 0;
}

int duro_instance_create(duro_engine *e, const char *workflow, const char *id,
                         const char *params, int64_t retention_ms,
                         char **id_out) {
  duro_create_req req = {
      .id = id, .params = params, .retention_ms = retention_ms};
  duro_create_result res;
  if (id_out)
    *id_out = NULL;
  int rc = duro_instance_create_many(e, workflow, &req, 1, &res);
  if (rc)
    return rc;
  if (res.n_created == 1) {
    if (id_out) {
      *id_out = res.created[0];
      res.created[0] = NULL;
    }
  } else {
    rc = res.errors[0].code;
  }
  duro_create_result_free(&res);
  return rc;
}

void duro_create_result_free(duro_create_result *r) {
  for (size_t i = 0; i < r->n_created; i++)
    free(r->created[i]);
  free(r->created);
  for (size_t i = 0; i < r->n_errors; i++)
    free(r->errors[i].id);
  free(r->errors);
  free(r->skipped);
  *r = (duro_create_result){0};
}

void engine_instance_insert_op(const wf_reg *wf, const char *id,
                               const duro_create_req *req, int64_t now,
                               journal_instance *row, journal_batch *b) {
  *row = (journal_instance){0};
  row->workflow = (char *)wf->name;
  row->id = (char *)id;
  row->status = DURO_STATUS_QUEUED;
  row->params = (char *)(req->params ? req->params : "null");
  row->created_ms = now;
  row->retention_ms = engine_retention_at_create(wf, req->retention_ms);
  int64_t timeout =
      req->timeout_ms > 0
          ? req->timeout_ms
          : __atomic_load_n(&wf->limits.timeout_ms, __ATOMIC_RELAXED);
  row->deadline_ms = timeout > 0 ? now + timeout : JOURNAL_NONE;
  row->traceparent = (char *)req->traceparent;
  row->attrs = engine_attrs_of_params(wf, row->params, b, &row->n_attrs);
  journal_batch_add(b, JOP_INSTANCE_INSERT)->inst = row;
}

static void created_locked(duro_engine *e, int64_t rowid) {
  engine_queue_new_locked(e, rowid);
  metrics_add(&e->m.instances_created, 1);
}

void engine_instance_created(duro_engine *e, int64_t rowid) {
  pthread_mutex_lock(&e->mu);
  created_locked(e, rowid);
  pthread_mutex_unlock(&e->mu);
}

static int cmp_index(const void *a, const void *b) {
  size_t x = ((const duro_create_error *)a)->index,
         y = ((const duro_create_error *)b)->index;
  return (x > y) - (x < y);
}

/* A batch of creations on its way to disk: everything its ops point to
 * lives here until the commit is done. */
typedef struct create_job {
  duro_engine *e;
  char *workflow;
  size_t n;
  journal_instance *rows;
  char **ids;
  char **params;       /* copies: the caller's may be gone by the commit */
  char **traceparents; /* the valid ones, normalized; else NULL */
  size_t *op_of;       /* the op of request i; SIZE_MAX: refused before */
  /* flow.singleton and flow.debounce: request i answered by its key's
   * live instance, whose id (malloc'ed) is kept for the result; how
   * (DURO_CREATE_*) in answered[i]; claimed[i]: the DURO_CLAIM_* a
   * driver settles once its commit is done (HELD, MERGE), else 0 */
  char **skipped;
  unsigned char *answered;
  unsigned char *claimed;
  char **claim_keys; /* request i's insert's claim key, or NULL */
  /* flow.debounce's, for a merge into another host's pending instance */
  int64_t now, debounce_ms, debounce_max_wait_ms;
  journal_batch b;
  duro_create_error *errors; /* at most one a request */
  size_t n_errors;
  duro_create_done_fn done;
  void *ctx;
} create_job;

static void create_job_free(create_job *job) {
  journal_batch_free(&job->b);
  for (size_t i = 0; i < job->n; i++) {
    free(job->ids[i]);
    free(job->params[i]);
    free(job->traceparents[i]);
  }
  free(job->ids);
  free(job->params);
  free(job->traceparents);
  for (size_t i = 0; i < job->n; i++)
    free(job->skipped[i]);
  free(job->skipped);
  for (size_t i = 0; i < job->n; i++)
    free(job->claim_keys[i]);
  free(job->claim_keys);
  free(job->answered);
  free(job->claimed);
  free(job->rows);
  free(job->op_of);
  free(job->workflow);
  for (size_t i = 0; i < job->n_errors; i++)
    free(job->errors[i].id);
  free(job->errors);
  free(job);
}

static void batch_error(create_job *job, size_t index, const char *id, int rc) {
  job->errors[job->n_errors++] = (duro_create_error){
      .index = index, .id = id ? xstrdup(id) : NULL, .code = rc};
}

/* flow.on_excess: reject: whether the gate takes request i's params
 * (counted) or refuses it, said in job's errors. */
static int gate_refuses(duro_engine *e, const wf_reg *wf, create_job *job,
                        size_t i, const char *id, const char *params) {
  if (!wf->gated || !wf->limits.flow_reject)
    return 0;
  int64_t after = 0;
  pthread_mutex_lock(&e->mu);
  int rc = engine_gate_check_create_locked(e, wf, params, &after);
  pthread_mutex_unlock(&e->mu);
  if (!rc)
    return 0;
  batch_error(job, i, id, rc);
  job->errors[job->n_errors - 1].retry_after_ms = after;
  return 1;
}

/* Whether wf's creates are claimed by a driver first. */
static int has_claims(const wf_reg *wf) {
  return wf->limits.flow_singleton_mode || wf->limits.flow_debounce_ms > 0;
}

/* flow.singleton and flow.debounce: whether request i creates nothing:
 * skipped (its key's live instance's id kept for the result), merged
 * into that instance (an op of the commit puts its params there) or
 * refused (said in job's errors); else it goes on, claimed when a driver
 * holds its key for it until its commit is settled (create_finish), its
 * start put off until *wake_ms when not 0. */
static int claim_answers(duro_engine *e, const wf_reg *wf, create_job *job,
                         size_t i, const char *params, int64_t *wake_ms) {
  *wake_ms = 0;
  if (!has_claims(wf))
    return 0;
  duro_claim claim;
  pthread_mutex_lock(&e->mu);
  int rc = engine_gate_claim_locked(e, wf, job->ids[i], params, &claim);
  pthread_mutex_unlock(&e->mu);
  if (rc == DURO_CLAIM_TAKE || rc == DURO_CLAIM_HELD) {
    job->claimed[i] = rc == DURO_CLAIM_HELD ? DURO_CLAIM_HELD : 0;
    *wake_ms = claim.wake_ms;
    job->claim_keys[i] = claim.key;
    return 0;
  }
  if (rc == DURO_CLAIM_MERGE) /* should its instance's insert fail */
    job->claim_keys[i] = claim.key;
  else
    free(claim.key);
  if (rc == DURO_CLAIM_SKIP) {
    job->skipped[i] = claim.live;
    job->answered[i] = DURO_CREATE_SKIPPED;
    return 1;
  }
  if (rc == DURO_CLAIM_MERGE) {
    job->skipped[i] = claim.live;
    job->answered[i] = DURO_CREATE_DEBOUNCED;
    job->claimed[i] = DURO_CLAIM_MERGE;
    job->params[i] = params ? xstrdup(params) : NULL;
    journal_instance *row = &job->rows[i];
    *row = (journal_instance){.workflow = job->workflow,
                              .id = claim.live,
                              .params = job->params[i] ? job->params[i]
                                                       : (char *)"null"};
    /* its search attributes are those the merged params give, in the
     * same commit as the params */
    row->attrs =
        engine_attrs_of_params(wf, row->params, &job->b, &row->n_attrs);
    job->op_of[i] = job->b.n;
    journal_op *op = journal_batch_add(&job->b, JOP_INSTANCE_RESCHEDULE);
    op->inst = row;
    op->ts_ms = claim.wake_ms;
    return 1;
  }
  free(claim.live);
  batch_error(job, i, job->ids[i], rc);
  job->errors[job->n_errors - 1].retry_after_ms = claim.retry_after_ms;
  return 1;
}

/* A claimed request's commit is settled (e->mu held): a HELD one's
 * instance's rowid, 0 when it was not created; a MERGE's 1 when its live
 * instance took the params, else 0. */
static void settle_claim_locked(duro_engine *e, create_job *job, size_t i,
                                int64_t rowid) {
  int claim = job->claimed[i];
  if (!claim)
    return;
  job->claimed[i] = 0;
  const wf_reg *wf = engine_find_workflow(e, job->workflow);
  if (wf)
    engine_gate_settle_locked(
        e, wf, claim, claim == DURO_CLAIM_MERGE ? job->skipped[i] : job->ids[i],
        rowid);
}

/* An answered request's live id into result, in request order with the
 * created ones (the result takes it). */
static void add_answered(create_job *job, size_t i, duro_create_result *r) {
  if (!r->skipped)
    r->skipped = xcalloc(job->n ? job->n : 1, 1);
  r->skipped[r->n_created] = job->answered[i];
  r->created[r->n_created++] = job->skipped[i];
  r->n_skipped++;
  job->skipped[i] = NULL;
}

/* flow.debounce: request i's insert met another host's pending instance
 * of its key, which takes its params instead: 0 (its id in *id), or not
 * found when that one's start came meanwhile (the create is refused:
 * it is neither merged nor created). */
static int claim_merge(create_job *job, size_t i, char **id) {
  journal_claim_due due = {.now_ms = job->now,
                           .period_ms = job->debounce_ms,
                           .max_wait_ms = job->debounce_max_wait_ms};
  /* the attributes its insert would have written, from the same params */
  const journal_instance *row = &job->rows[i];
  int rc =
      journal_claim_merge(job->e->j, job->workflow, job->claim_keys[i],
                          job->params[i], row->attrs, row->n_attrs, &due, id);
  if (rc == 0) {
    job->answered[i] = DURO_CREATE_DEBOUNCED;
    return 0;
  }
  job->b.ops[job->op_of[i]].rc = DURO_E_INSTANCE_ENDED;
  return rc;
}

/* Whether request i met another host's claim of its key: its insert
 * found the key held, or (debounced) the instance it merged into was not
 * created, its own insert having met another host's. */
static int met_claim(const create_job *job, size_t i) {
  if (!job->claim_keys[i] || job->op_of[i] == SIZE_MAX)
    return 0;
  const journal_op *op = &job->b.ops[job->op_of[i]];
  if (job->claimed[i] == DURO_CLAIM_MERGE)
    return op->out_rowid <= 0;
  return op->rc == DURO_E_ALREADY_EXISTS;
}

/* The requests that met a claim key another live instance holds
 * (another host's: this one's claims never meet): that one's id for
 * each, looked up (or, debounced, merged into) before the engine's lock
 * is taken; NULL when there are none. */
static char **claim_holders(create_job *job) {
  char **holders = NULL;
  for (size_t i = 0; i < job->n; i++) {
    if (!met_claim(job, i))
      continue;
    char *id = NULL;
    if (job->debounce_ms > 0
            ? claim_merge(job, i, &id) == 0
            : journal_claim_holder(job->e->j, job->workflow, job->claim_keys[i],
                                   &id) == 0 &&
                  strcmp(id, job->ids[i])) {
      if (!holders)
        holders = xcalloc(job->n, sizeof *holders);
      holders[i] = id;
    } else {
      free(id);
    }
  }
  return holders;
}

/* On the thread that committed: the created instances become runnable,
 * and the caller hears the outcome. */
static void create_finish(void *ctx, int rc) {
  create_job *job = ctx;
  duro_engine *e = job->e;
  duro_create_result result = {0};
  if (rc == 0) {
    result.created = xcalloc(job->n ? job->n : 1, sizeof *result.created);
    char **holders = claim_holders(job);
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < job->n; i++) {
      if (job->claimed[i] == DURO_CLAIM_MERGE) {
        /* debounced: its key's instance took its params, unless it
         * ended first (terminated meanwhile) */
        int took = job->b.ops[job->op_of[i]].out_rowid > 0;
        settle_claim_locked(e, job, i, took);
        if (!took && holders && holders[i]) { /* another host's took it */
          free(job->skipped[i]);
          job->skipped[i] = holders[i];
          holders[i] = NULL;
          took = 1;
        }
        if (took)
          add_answered(job, i, &result);
        else
          batch_error(job, i, job->skipped[i], DURO_E_INSTANCE_ENDED);
        continue;
      }
      if (job->skipped[i])
        add_answered(job, i, &result);
      if (job->op_of[i] == SIZE_MAX)
        continue;
      journal_op *op = &job->b.ops[job->op_of[i]];
      settle_claim_locked(e, job, i, op->rc ? 0 : op->out_rowid);
      if (holders && holders[i]) { /* another host's live one answers */
        job->skipped[i] = holders[i];
        holders[i] = NULL;
        if (!job->answered[i])
          job->answered[i] = DURO_CREATE_SKIPPED;
        add_answered(job, i, &result);
        continue;
      }
      if (op->rc) {
        batch_error(job, i, job->ids[i], op->rc);
        continue;
      }
      created_locked(e, op->out_rowid);
      result.created[result.n_created++] = job->ids[i];
      job->ids[i] = NULL;
    }
    pthread_mutex_unlock(&e->mu);
    for (size_t i = 0; holders && i < job->n; i++)
      free(holders[i]);
    free(holders);
    /* Errors found before and after the commit, in request order. */
    qsort(job->errors, job->n_errors, sizeof *job->errors, cmp_index);
    result.errors = job->errors;
    result.n_errors = job->n_errors;
    job->errors = NULL;
    job->n_errors = 0;
  } else {
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < job->n; i++)
      settle_claim_locked(e, job, i, 0);
    pthread_mutex_unlock(&e->mu);
    log_error("creating %zu instance(s) of %s: %s", job->n, job->workflow,
              journal_errmsg(e->j));
  }
  duro_create_done_fn done = job->done;
  void *done_ctx = job->ctx;
  create_job_free(job);
  done(done_ctx, rc, rc ? NULL : &result);
}

/* background: the commit never runs on this thread (the asynchronous
 * API's promise); else this thread may lead it (the synchronous form
 * waits anyway, and saves the writer thread's wake-up). */
static int create_batch(duro_engine *e, const char *workflow,
                        const duro_create_req *reqs, size_t n,
                        duro_create_done_fn done, void *ctx, int background) {
  const wf_reg *wf = engine_find_workflow(e, workflow);
  if (!wf)
    return DURO_E_WORKFLOW_NOT_FOUND;
  if (e->opt.max_queued && engine_backlog(e) >= e->opt.max_queued)
    return DURO_E_OVERLOADED;
  create_job *job = xcalloc(1, sizeof *job);
  *job = (create_job){.e = e,
                      .workflow = xstrdup(workflow),
                      .n = n,
                      .rows = xcalloc(n ? n : 1, sizeof *job->rows),
                      .ids = xcalloc(n ? n : 1, sizeof *job->ids),
                      .params = xcalloc(n ? n : 1, sizeof *job->params),
                      .traceparents =
                          xcalloc(n ? n : 1, sizeof *job->traceparents),
                      .op_of = xcalloc(n ? n : 1, sizeof *job->op_of),
                      .skipped = xcalloc(n ? n : 1, sizeof *job->skipped),
                      .answered = xcalloc(n ? n : 1, 1),
                      .claim_keys = xcalloc(n ? n : 1, sizeof *job->claim_keys),
                      .claimed = xcalloc(n ? n : 1, 1),
                      .errors = xcalloc(n ? n : 1, sizeof *job->errors),
                      .done = done,
                      .ctx = ctx};
  job->debounce_ms = wf->limits.flow_debounce_ms;
  job->debounce_max_wait_ms = wf->limits.flow_debounce_max_wait_ms;
  strmap seen = {0};
  /* claims and the commit's place in the journal's queue in one order */
  int claims = has_claims(wf);
  if (claims)
    pthread_mutex_lock(&e->claim_mu);
  int64_t now = duro_clock_now(e->clock);
  job->now = now;
  for (size_t i = 0; i < n; i++) {
    const wf_reg *w;
    job->op_of[i] = SIZE_MAX;
    int bad = check_create(e, workflow, reqs[i].id, reqs[i].params, &w);
    if (bad) {
      batch_error(job, i, reqs[i].id, bad);
      continue;
    }
    job->ids[i] = reqs[i].id ? xstrdup(reqs[i].id) : engine_random_id(now);
    if (strmap_get(&seen, job->ids[i])) {
      batch_error(job, i, job->ids[i], DURO_E_DUPLICATE_IN_BATCH);
      continue;
    }
    int64_t wake_ms;
    if (claim_answers(e, wf, job, i, reqs[i].params, &wake_ms))
      continue;
    if (gate_refuses(e, wf, job, i, job->ids[i], reqs[i].params)) {
      pthread_mutex_lock(&e->mu);
      settle_claim_locked(e, job, i, 0);
      pthread_mutex_unlock(&e->mu);
      continue;
    }
    strmap_put(&seen, job->ids[i], job->ids[i]);
    job->params[i] = reqs[i].params ? xstrdup(reqs[i].params) : NULL;
    job->traceparents[i] = traceparent_norm(reqs[i].traceparent);
    duro_create_req req = reqs[i];
    req.params = job->params[i];
    req.traceparent = job->traceparents[i];
    job->op_of[i] = job->b.n;
    engine_instance_insert_op(wf, job->ids[i], &req, now, &job->rows[i],
                              &job->b);
    job->rows[i].wake_ms = wake_ms;
    job->rows[i].claim_key = job->claim_keys[i];
  }
  strmap_free(&seen);
  /* with claims held, never lead the commit here: the lock would be held
   * through it */
  if (background || claims)
    journal_commit_background(e->j, &job->b, create_finish, job);
  else
    journal_commit_async(e->j, &job->b, create_finish, job);
  if (claims)
    pthread_mutex_unlock(&e->claim_mu);
  return 0;
}

int duro_instance_create_batch_async(duro_engine *e, const char *workflow,
                                     const duro_create_req *reqs, size_t n,
                                     duro_create_done_fn done, void *ctx) {
  return create_batch(e, workflow, reqs, n, done, ctx, 1);
}

/* The waiter takes what the result holds: the commit's thread frees the
 * struct once done returns. */
static void create_waited(void *ctx, int rc, duro_create_result *result) {
  duro_create_result *kept = NULL;
  if (result) {
    kept = xmalloc(sizeof *kept);
    *kept = *result;
  }
  engine_wait_done(ctx, rc, kept);
}

int duro_instance_create_many(duro_engine *e, const char *workflow,
                              const duro_create_req *reqs, size_t n,
                              duro_create_result *out) {
  engine_wait w = ENGINE_WAIT_INIT;
  *out = (duro_create_result){0};
  int rc = create_batch(e, workflow, reqs, n, create_waited, &w, 0);
  if (rc)
    return rc;
  void *kept = NULL;
  rc = engine_wait_for(&w, &kept);
  if (kept) {
    *out = *(duro_create_result *)kept;
    free(kept);
  }
  return rc;
}
