/* deploy.c — one workflow, class "Flow", built several ways to stand for
 * successive deploys of a plugin (plugins/meson.build builds each):
 *
 *   v1           A, a sleep ("nap", params "nap", default 2 s), B;
 *                output {"build":"v1"}
 *   v2           the same steps; output {"build":"v2"}
 *   v2_renamed   A is renamed "A2": a journaled step renamed
 *   v2_inserted  a step "X" between A and the sleep
 *
 * The reload suite writes these over a plugin's configured path while
 * instances are in flight, and reads which build ran from the output. */
#include <stdio.h>
#include <string.h>

#include "duro.h"

#ifndef DEPLOY_VERSION
#define DEPLOY_VERSION "v1"
#endif

static int step(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_result(a, "\"" DEPLOY_VERSION "\"");
}

static duro_rc flow(duro_step *s, const duro_event *ev, duro_env *env) {
  (void)env;
  char nap[32] = "2 seconds";
  const char *p = strstr(ev->params, "\"nap\":\"");
  if (p)
    sscanf(p + 7, "%31[^\"]", nap);
#ifdef DEPLOY_RENAMED
  DURO_TRY(duro_do(s, "A2", NULL, step, NULL, NULL));
#else
  DURO_TRY(duro_do(s, "A", NULL, step, NULL, NULL));
#endif
#ifdef DEPLOY_INSERTED
  DURO_TRY(duro_do(s, "X", NULL, step, NULL, NULL));
#endif
  DURO_TRY(duro_sleep(s, "nap", nap));
  DURO_TRY(duro_do(s, "B", NULL, step, NULL, NULL));
  return duro_set_output(s, "{\"build\":\"" DEPLOY_VERSION "\"}");
}

static const duro_workflow_def workflows[] = {{"Flow", flow}};

DURO_PLUGIN(.name = "deploy", .version = DEPLOY_VERSION,
            DURO_WORKFLOWS(workflows));
