/* emit.c — the pipeline-sending plugin (tests/test_pipeline_host.c):
 * workflow class "Emit" sends params {"records": N, "batch": B} records
 * {"from":"<instance>","k":k} for k = 0 .. N-1 to the pipeline bound as
 * EVENTS, B a step.  Each step's first attempt sends its records and
 * then fails, so only a retry's send may reach the files; each record is
 * sent as loose JSON ("{ \"from\" : ...") so that the files show the
 * host made it compact.  The output says what a send outside a step
 * callback and a send of no JSON were answered:
 * {"records":N,"outside":"<error name>","bad":"<error name>"}. */
#include <stdio.h>
#include <stdlib.h>

#include "duro.h"
#include "params.h"

typedef struct emit_batch {
  duro_pipeline *p;
  const char *instance;
  int from, n;
} emit_batch;

static int send_batch(duro_attempt *a, void *arg) {
  const emit_batch *b = arg;
  char **text = calloc((size_t)b->n, sizeof *text);
  for (int i = 0; i < b->n; i++) {
    text[i] = malloc(96);
    snprintf(text[i], 96, "{ \"from\" : \"%s\", \"k\" : %d }", b->instance,
             b->from + i);
  }
  int rc = duro_pipeline_send(b->p, (const char *const *)text, (size_t)b->n);
  for (int i = 0; i < b->n; i++)
    free(text[i]);
  free(text);
  if (rc)
    return duro_attempt_fail(a, "send: %s", duro_api_ptr_->err_name(rc));
  if (duro_attempt_number(a) == 1)
    return duro_attempt_fail(a, "the first attempt fails after its send");
  return duro_attempt_result(a, "true");
}

static int send_no_json(duro_attempt *a, void *arg) {
  const char *bad[] = {"{not json"};
  int rc = duro_pipeline_send(arg, bad, 1);
  char out[64];
  snprintf(out, sizeof out, "\"%s\"", duro_api_ptr_->err_name(rc));
  return duro_attempt_result(a, out);
}

static duro_rc emit(duro_step *step, const duro_event *ev, duro_env *env) {
  int n = param_int(ev->params, "records", 10);
  int batch = param_int(ev->params, "batch", 5);
  duro_pipeline *p = duro_env_pipeline(env, "EVENTS");
  if (!p || duro_env_pipeline(env, "NOPE"))
    return duro_fail(step, "EVENTS is not bound, or NOPE is");
  const char *loose[] = {"\"outside\""};
  int outside = duro_pipeline_send(p, loose, 1); /* refused: replays */
  duro_step_config cfg = {
      .retries = &(duro_retries){
          .limit = 3, .delay = "1 second", .backoff = DURO_BACKOFF_CONSTANT}};
  for (int from = 0; from < n; from += batch) {
    emit_batch b = {p, ev->instance_id, from,
                    n - from < batch ? n - from : batch};
    DURO_TRY(duro_do(step, "send", &cfg, send_batch, &b, NULL));
  }
  const char *bad;
  DURO_TRY(duro_do(step, "send no JSON", NULL, send_no_json, p, &bad));
  char out[160];
  snprintf(out, sizeof out, "{\"records\":%d,\"outside\":\"%s\",\"bad\":%s}", n,
           duro_api_ptr_->err_name(outside), bad);
  return duro_set_output(step, out);
}

static const duro_workflow_def workflows[] = {{"Emit", emit}};

DURO_PLUGIN(.name = "emit", .version = "1", DURO_WORKFLOWS(workflows));
