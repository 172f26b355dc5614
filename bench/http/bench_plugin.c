/* bench_plugin.c — the workflows of the HTTP benchmark (bench/http/run.sh),
 * each step trivial so that the figures are the host's and not the
 * plugin's:
 *
 *   One   one step (H1, H2: creations through HTTP; H5: create-and-wait)
 *   Ten   ten steps in a row (H3: W1 through HTTP; H6: overload)
 *   Nap   one step, then duro_sleep for an hour (H4: W3 through HTTP)
 *
 * Each ends with a small output, so a client learning the result sees
 * {"steps": N}. */
#include "duro.h"

static int trivial(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_result(a, "1");
}

static duro_rc steps(duro_step *step, int n) {
  const char *r;
  for (int i = 0; i < n; i++)
    DURO_TRY(duro_do(step, "s", NULL, trivial, NULL, &r));
  return duro_set_output(step, n == 1 ? "{\"steps\":1}" : "{\"steps\":10}");
}

static duro_rc one(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  return steps(step, 1);
}

static duro_rc ten(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  return steps(step, 10);
}

static duro_rc nap(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  const char *r;
  DURO_TRY(duro_do(step, "work", NULL, trivial, NULL, &r));
  DURO_TRY(duro_sleep(step, "nap", "1 hour"));
  return duro_set_output(step, "{\"slept\":true}");
}

static const duro_workflow_def workflows[] = {
    {.class_name = "One", .run = one},
    {.class_name = "Ten", .run = ten},
    {.class_name = "Nap", .run = nap},
};

DURO_PLUGIN(.name = "bench", .version = "1", DURO_WORKFLOWS(workflows));
