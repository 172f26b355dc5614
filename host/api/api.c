/* api.c — the plugin API table (duro.h's duro_api), assembled from what
 * each subsystem hands plugins.
 *
 * The one place that knows every feature a plugin reaches: the step
 * runner fills the step calls (step_api_fill), the engine the workflow
 * bindings (workflow_api_fill), the queues the sends and a handler's
 * batch calls (queue_api_fill), the pipelines their bindings and sends
 * (pipeline_api_fill), api_json.c the JSON accessors
 * (json_api_fill), and the error names and descriptions come
 * from error.h.  Each fills members of its own; none knows the others'.
 * The layout is duro.h's and is the ABI: a plugin built against an older
 * minor reads a prefix of the same table, so nothing here reorders it.
 *
 * The table is filled once, on first use, and never changes after: the
 * pointer handed out stays valid for the life of the process. */
#include "api.h"

#include <pthread.h>
#include <stdlib.h>

#include "core.h"
#include "engine.h"
#include "error.h"
#include "pipeline.h"
#include "queue.h"
#include "step.h"
#include "util.h"

static duro_api host_api;
static pthread_once_t host_api_once = PTHREAD_ONCE_INIT;

static void host_api_fill(void) {
  host_api.size = sizeof(duro_api);
  host_api.abi_minor = DURO_ABI_MINOR;
  step_api_fill(&host_api);
  workflow_api_fill(&host_api);
  queue_api_fill(&host_api);
  pipeline_api_fill(&host_api);
  json_api_fill(&host_api);
  host_api.strerror = duro_err_str;
  host_api.err_name = duro_err_name;
}

const duro_api *duro_host_api(void) {
  pthread_once(&host_api_once, host_api_fill);
  return &host_api;
}

void *duro_env_handler_ctx(const duro_env *env) {
  return env ? env->ctx : NULL;
}

int64_t duro_env_deadline_ms(const duro_env *env) {
  return env ? env->deadline_ms : 0;
}

int64_t duro_env_timeout_ms(const duro_env *env) {
  return env ? env->timeout_ms : 0;
}

void duro_env_handler_failed(duro_env *env, const char *name,
                             const char *message) {
  if (!env)
    return;
  free(env->failure);
  env->failure_name = name;
  env->failure = xstrdup(message);
}
