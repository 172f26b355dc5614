/* traced.c — the trace-context plugin (tests/test_telemetry.c): workflow
 * class "Traced" runs step "call", whose result is
 * {"traceparent":"<duro_attempt_traceparent>"} (what a step would put in
 * its outgoing HTTP call's header), and, when params has "next", step
 * "hop", which sends {"id": next} to the queue bound as HOPS with its own
 * attempt's traceparent (duro_queue_send_traced): the instance a no-code
 * consumer starts from it continues the trace; when params has "wait",
 * it then waits for event "go" (a host may be restarted meanwhile) and
 * runs step "call" again.  The output is the last call's result. */
#include "duro.h"

static int call(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_result(
      a, duro_json_pack("{s:s}", "traceparent", duro_attempt_traceparent(a)));
}

typedef struct hop_arg {
  duro_queue *q;
  const char *next;
} hop_arg;

static int hop(duro_attempt *a, void *arg) {
  const hop_arg *h = arg;
  const char *body = duro_json_pack("{s:s}", "id", h->next);
  int rc =
      duro_queue_send_traced(h->q, &body, 1, 0, duro_attempt_traceparent(a));
  return rc ? duro_attempt_fail(a, "send: %d", rc)
            : duro_attempt_result(a, "true");
}

static duro_rc run(duro_step *step, const duro_event *ev, duro_env *env) {
  const char *result;
  DURO_TRY(duro_do(step, "call", NULL, call, NULL, &result));
  const char *next = duro_json_string(ev->params, "/next");
  if (next) {
    const char *sent;
    hop_arg h = {duro_env_queue(env, "HOPS"), next};
    DURO_TRY(duro_do(step, "hop", NULL, hop, &h, &sent));
  }
  if (duro_json_value(ev->params, "/wait")) {
    const char *event;
    DURO_TRY(duro_wait_for_event(step, "go", "go", "1 hour", &event));
    DURO_TRY(duro_do(step, "call", NULL, call, NULL, &result));
  }
  return duro_set_output(step, result);
}

static const duro_workflow_def workflows[] = {{"Traced", run}};
DURO_PLUGIN(.name = "traced", .version = "1.0", DURO_WORKFLOWS(workflows));
