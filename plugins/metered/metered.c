/* metered.c — the shared-resource plugin (tests/test_resources_host.c).
 *
 * Workflow classes "Charge" and "Refund" each run one step whose config
 * names the resource "payments"; its callback counts itself in, naps
 * 30 ms, and counts itself out, its result the most callbacks it saw
 * inside at once in this process so far.  "Lost" names "nosuch", which
 * the host does not declare: its step must fail without its callback.
 * "Hold" names "payments" too, and its callback stays inside while the
 * file $METERED_HOLD exists (the test kills the engine meanwhile).
 * Callbacks run on the worker's pool threads side by side (the plugin's
 * `concurrency`), so only the host's resource keeps them at its bound. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "duro.h"

static int inside, most;

static int pay(duro_attempt *a, void *arg) {
  (void)arg;
  int now = __atomic_add_fetch(&inside, 1, __ATOMIC_SEQ_CST);
  int seen = __atomic_load_n(&most, __ATOMIC_SEQ_CST);
  while (now > seen &&
         !__atomic_compare_exchange_n(&most, &seen, now, 0, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST))
    ;
  struct timespec nap = {0, 30 * 1000 * 1000};
  nanosleep(&nap, NULL);
  __atomic_sub_fetch(&inside, 1, __ATOMIC_SEQ_CST);
  char out[16];
  snprintf(out, sizeof out, "%d", __atomic_load_n(&most, __ATOMIC_SEQ_CST));
  return duro_attempt_result(a, out);
}

/* Inside while $METERED_HOLD names a file that exists. */
static int hold(duro_attempt *a, void *arg) {
  (void)arg;
  const char *path = getenv("METERED_HOLD");
  struct timespec nap = {0, 10 * 1000 * 1000};
  while (path && access(path, F_OK) == 0)
    nanosleep(&nap, NULL);
  return duro_attempt_result(a, "1");
}

static const duro_step_config payments = {.resource = "payments"};
static const duro_step_config nosuch = {.resource = "nosuch"};

static duro_rc charge(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  const char *most_seen;
  DURO_TRY(duro_do(step, "charge", &payments, pay, NULL, &most_seen));
  return duro_set_output(step, most_seen);
}

static duro_rc refund(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  const char *most_seen;
  DURO_TRY(duro_do(step, "refund", &payments, pay, NULL, &most_seen));
  return duro_set_output(step, most_seen);
}

static duro_rc lost(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "lookup", &nosuch, pay, NULL, NULL));
  return duro_set_output(step, "1");
}

static duro_rc held(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev, (void)env;
  DURO_TRY(duro_do(step, "hold", &payments, hold, NULL, NULL));
  return duro_set_output(step, "1");
}

static const duro_workflow_def workflows[] = {
    {"Charge", charge}, {"Refund", refund}, {"Lost", lost}, {"Hold", held}};
DURO_PLUGIN(.name = "metered", .version = "1.0", DURO_WORKFLOWS(workflows));
