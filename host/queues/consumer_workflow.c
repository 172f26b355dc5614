/* consumer_workflow.c — the no-code consumer's pass over its queue: a
 * batch leased, each message's id read at the consumer's pointer, the
 * instances created and their messages acked in one commit, and the
 * messages with no usable id retried with the reason. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "consumer_internal.h"
#include "core.h"
#include "json_pointer.h"
#include "log.h"
#include "trace_ids.h"

/* One leased message on its way to an instance. */
typedef struct job {
  const char *lease;
  char *id;          /* NULL: the body has no usable id */
  char *params;      /* the body as JSON text */
  char *error;       /* why not, as JSON text (a string) */
  char *traceparent; /* its sender's, normalized: the instance continues it */
  size_t op;         /* index of its insert in the batch */
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
  jb->traceparent = traceparent_norm(msg->traceparent);
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
    duro_create_req req = {.params = jobs[i].params,
                           .retention_ms = -1,
                           .traceparent = jobs[i].traceparent};
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

size_t consumer_dispatch_workflow(duro_engine *e, const wf_consumer *c,
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
    free(jobs[i].traceparent);
  }
  free(jobs);
  duro_queue_message_list_free(&msgs);
  return n;
}
