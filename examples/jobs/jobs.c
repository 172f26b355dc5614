/* jobs.c — a queue consumer that starts workflow instances: a plugin to
 * copy when jobs arrive on a queue and each must run as a durable
 * workflow, exactly once per job.
 *
 * Messages on queue "jobs" look like {"jobId": "42", ...}.  The handler
 * creates one instance of the workflow bound to JOB_FLOW per message, with
 * the job id as the instance id: a message delivered twice (at-least-once
 * delivery) or sent twice finds instance.already_exists, which means the
 * job is already running, and is acked like a success.  Anything else
 * (storage trouble) retries the message; after max_retries it goes to the
 * dead-letter queue.  Declare it like this:
 *
 *   plugins:
 *     - name: jobs
 *       path: ../build/examples/libjobs.so  # from a config in config/
 *       workflows:
 *         - { name: job-flow, binding: JOB_FLOW, class_name: JobFlow }
 *       queues:
 *         producers: [{ binding: JOBS, queue: jobs }]
 *         consumers: [{ queue: jobs, max_batch_size: 100,
 *                       dead_letter_queue: jobs-dlq }]
 *         # the dead-letter queue is declared by naming it here
 *
 * (Without any code, `consumers: [{queue: jobs, workflow: job-flow,
 * id_from: "/jobId"}]` does the same, and acks in the same transaction as
 * the create.)  The workflow itself is a one-step placeholder. */
#include <stdio.h>
#include <string.h>

#include "duro.h"

static int do_job(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_result(a, "{\"done\":true}");
}

static duro_rc job_flow(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  const char *result;
  DURO_TRY(duro_do(step, "do the job", NULL, do_job, NULL, &result));
  return duro_set_output(step, result);
}

/* The job id: the string at "jobId" (a tiny scan; parse JSON properly with
 * a library in real code).  0 when there is none that fits. */
static int job_id(const char *body, char *id, size_t len) {
  const char *at = strstr(body, "\"jobId\"");
  if (!at || !(at = strchr(at + 7, '"')))
    return 0;
  const char *end = strchr(++at, '"');
  if (!end || (size_t)(end - at) >= len || end == at)
    return 0;
  snprintf(id, len, "%.*s", (int)(end - at), at);
  return 1;
}

static int on_jobs(duro_message_batch *batch, duro_env *env) {
  duro_workflow *flow = duro_env_workflow(env, "JOB_FLOW");
  for (size_t i = 0; i < duro_batch_size(batch); i++) {
    const duro_message *m = duro_batch_message(batch, i);
    char id[101];
    if (!flow || !job_id(m->body, id, sizeof id)) {
      duro_message_retry(batch, i, 0); /* dead-lettered after max_retries */
      continue;
    }
    int rc = duro_workflow_create(flow, id, m->body);
    if (rc == 0 || rc == DURO_E_ALREADY_EXISTS)
      duro_message_ack(batch, i); /* created now, or by an earlier delivery */
    else
      duro_message_retry(batch, i, 10 * 1000);
  }
  return 0;
}

static const duro_workflow_def workflows[] = {{"JobFlow", job_flow}};

DURO_PLUGIN(.name = "jobs", .version = "1.0", DURO_WORKFLOWS(workflows),
            .queue = on_jobs);
