/* chain.c — the crash-test plugin: workflow class "Chain" runs N steps in
 * a row (params {"steps": N, "nap_every": K}), sleeping briefly every K
 * steps, and writes what it does to the file named by $DURO_CHAIN_LOG,
 * outside the journal:
 *
 *   exec <instance> <i> <token>   a step callback ran (token is unique)
 *   seen <instance> <i> <token>   run() got step i's result back from duro_do
 *
 * A "seen" line is written only after duro_do returned DURO_OK, which the
 * host allows only once the step's result is committed.  So the test can
 * tell a completed step that ran again: an "exec" after a "seen" of the
 * same step.  Each line is one O_APPEND write of a fixed-size record
 * (plugins/sidelog.h), so a SIGKILL never leaves half a line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "duro.h"
#include "params.h"
#include "sidelog.h"

#define LOG_ENV "DURO_CHAIN_LOG"

typedef struct chain_step {
  const char *instance;
  int index;
  int hold_ms; /* how long step 1 takes (params "hold_ms") */
} chain_step;

static int run_step(duro_attempt *a, void *arg) {
  const chain_step *cs = arg;
  char token[64];
  sidelog_token(token, sizeof token);
  sidelog_append(LOG_ENV, "exec", cs->instance, cs->index, token);
  /* A little work, so kills land inside callbacks too; step 1 can be made
   * long, to hold the instance running while a test sends requests. */
  long us = cs->index == 1 && cs->hold_ms > 0 ? cs->hold_ms * 1000L : 300;
  struct timespec nap = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&nap, NULL);
  char json[96];
  snprintf(json, sizeof json, "\"%s\"", token);
  return duro_attempt_result(a, json);
}

static duro_rc chain(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int n = param_int(ev->params, "steps", 10);
  int nap_every = param_int(ev->params, "nap_every", 0);
  int hold_ms = param_int(ev->params, "hold_ms", 0);
  for (int i = 1; i <= n; i++) {
    chain_step cs = {
        .instance = ev->instance_id, .index = i, .hold_ms = hold_ms};
    const char *result;
    DURO_TRY(duro_do(step, "step", NULL, run_step, &cs, &result));
    sidelog_seen(LOG_ENV, ev->instance_id, i, result);
    if (nap_every > 0 && i % nap_every == 0)
      DURO_TRY(duro_sleep(step, "nap", "5"));
  }
  char out[64];
  snprintf(out, sizeof out, "{\"steps\":%d}", n);
  return duro_set_output(step, out);
}

static const duro_workflow_def workflows[] = {{"Chain", chain}};

DURO_PLUGIN(.name = "chain", .version = "1", DURO_WORKFLOWS(workflows));
