/* fanout.c — child workflows: a plugin to copy when one piece of work
 * splits into many that run at once and are then put together.
 *
 * A "fan-out" instance starts n "square" instances as its children (one
 * duro_child_start each: journaled, so a crash or a replay never starts a
 * second), then waits for each child's end (duro_child_wait: no thread is
 * held while the children run) and sums their outputs.  The children are
 * instances of their own: they run side by side on the engine's threads,
 * retry on their own, and show in describe under their parent.  Should
 * the parent end first (terminated, say), its children still running are
 * terminated with it.  Declare it like this:
 *
 *   plugins:
 *     - name: fanout
 *       path: ../build/examples/libfanout.so  # from a config in config/
 *       workflows:
 *         - { name: fan-out, binding: FAN_OUT, class_name: FanOut }
 *         - { name: square, binding: SQUARE, class_name: Square }
 *
 * and start one with
 *   duro workflows trigger fan-out '{"n":100}' --wait
 * whose output is {"n":100,"sum":328350}: 0² + 1² + ... + 99². */
#include <stdio.h>
#include <stdlib.h>

#include "duro.h"

#define MAX_PARTS 1000

/* A child's one step: x², as a result journaled like any step's. */
static int square_step(duro_attempt *a, void *arg) {
  const int64_t *x = arg;
  char out[32];
  snprintf(out, sizeof out, "%lld", (long long)(*x * *x));
  return duro_attempt_result(a, out);
}

static duro_rc square(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int64_t x = 0;
  duro_json_integer(ev->params, "/x", &x);
  const char *result;
  DURO_TRY(duro_do(step, "square", NULL, square_step, &x, &result));
  return duro_set_output(step, result);
}

static duro_rc fan_out(duro_step *step, const duro_event *ev, duro_env *env) {
  int64_t n = 10;
  duro_json_integer(ev->params, "/n", &n);
  if (n < 1 || n > MAX_PARTS)
    return duro_fail(step, "n must be 1 to %d, not %lld", MAX_PARTS,
                     (long long)n);
  duro_workflow *sq = duro_env_workflow(env, "SQUARE");
  if (!sq)
    return duro_fail(step, "no SQUARE binding in the config");
  /* Strings a step call returns live as long as the activation: the ids
   * may be kept in an array until the waits. */
  const char **ids = calloc((size_t)n, sizeof *ids);
  if (!ids)
    return duro_fail(step, "out of memory");
  duro_rc rc = DURO_OK;
  for (int64_t i = 0; i < n && rc == DURO_OK; i++) {
    char name[32];
    snprintf(name, sizeof name, "part %lld", (long long)i);
    rc = duro_child_start(step, name, sq, NULL, duro_json_pack("{s:I}", "x", i),
                          DURO_PARENT_CLOSE_TERMINATE, &ids[i]);
  }
  int64_t sum = 0;
  for (int64_t i = 0; i < n && rc == DURO_OK; i++) {
    const char *out;
    int64_t v = 0;
    rc = duro_child_wait(step, "part done", sq, ids[i], &out);
    if (rc == DURO_OK && duro_json_integer(out, "", &v))
      sum += v;
  }
  free(ids);
  if (rc != DURO_OK)
    return rc;
  return duro_set_output(step,
                         duro_json_pack("{s:I, s:I}", "n", n, "sum", sum));
}

static const duro_workflow_def workflows[] = {{"FanOut", fan_out},
                                              {"Square", square}};

DURO_PLUGIN(.name = "fanout", .version = "1.0", DURO_WORKFLOWS(workflows));
