/* workflow_api.c — the engine's part of the plugin API table: a plugin's
 * workflow bindings (duro_env_workflow), and creating an instance of a
 * bound workflow or sending one of its instances an event.
 *
 * A creation is stored at once wherever it is made (its id makes it
 * idempotent).  An event is a side effect like a queue send: inside a
 * step callback its writes join the attempt's commit (step.h), in run()
 * outside one it is refused (it would repeat on every replay), elsewhere
 * it is stored at once. */
#include <string.h>

#include "engine_internal.h"
#include "log.h"
#include "step.h"

static duro_workflow *api_env_workflow(duro_env *env, const char *binding) {
  return (duro_workflow *)engine_find_binding(env->engine, binding);
}

static int api_workflow_create(duro_workflow *wf, const char *id,
                               const char *params) {
  if (!wf)
    return DURO_E_BINDING_NOT_FOUND;
  const wf_reg *w = (const wf_reg *)wf;
  return duro_instance_create(w->engine, w->name, id, params, -1, NULL);
}

/* Inside a callback the event's ops join the step's commit
 * (engine_event_stored wakes the receiver after it). */
static int api_workflow_send_event(duro_workflow *wf, const char *id,
                                   const char *type, const char *payload) {
  if (!wf)
    return DURO_E_BINDING_NOT_FOUND;
  const wf_reg *w = (const wf_reg *)wf;
  duro_engine *e = w->engine;
  duro_attempt *at = step_current_attempt();
  const log_ctx *where = step_current_log();
  if (where && !at) {
    log_at(DURO_LOG_WARN, where,
           "event to %s/%s outside a step callback refused: it would "
           "repeat on every replay",
           w->name, id ? id : "");
    return DURO_E_INVALID_ARGUMENT;
  }
  if (!at)
    return duro_instance_send_event(e, w->name, id, type, payload);
  if (!type || !*type || strlen(type) > 100 ||
      !strncmp(type, DURO_RESERVED_EVENT_PREFIX,
               DURO_RESERVED_EVENT_PREFIX_LEN))
    return DURO_E_INVALID_ARGUMENT;
  if (payload && json_text_check(payload, e->max_step_result) != 0)
    return DURO_E_INVALID_PARAMS;
  journal_instance in = {0};
  int rc = engine_instance_get(e, w->name, id, &in);
  int64_t rowid = in.rowid;
  journal_instance_clear(&in);
  if (rc)
    return rc;
  journal_batch *sends = attempt_effects(at);
  journal_op *op = journal_batch_add(sends, JOP_EVENT_INSERT);
  op->rowid = rowid;
  op->event_type = attempt_strdup(at, type);
  op->event_payload = attempt_strdup(at, payload ? payload : "null");
  op->ts_ms = attempt_now_ms(at);
  /* Due at once, in the same commit, if the receiver waits for it. */
  journal_op *wake = journal_batch_add(sends, JOP_WAKE_IF_WAITING);
  wake->rowid = rowid;
  wake->event_type = op->event_type;
  wake->ts_ms = op->ts_ms;
  return 0;
}

void workflow_api_fill(duro_api *t) {
  t->env_workflow = api_env_workflow;
  t->workflow_create = api_workflow_create;
  t->workflow_send_event = api_workflow_send_event;
}
