/* bench_plugin.c — the workflows of the HTTP benchmark (bench/http/run.sh),
 * each step trivial so that the figures are the host's and not the
 * plugin's:
 *
 *   One   one step (H1, H2: creations through HTTP; H5: create-and-wait)
 *   Ten   ten steps in a row (H3: W1 through HTTP; H6: overload)
 *   Nap   one step, then duro_sleep for an hour (H4: W3 through HTTP)
 *   Steps params.steps steps in a row, 10 by default (duro-bench's W1
 *         and W2 in a worker process: --plugin-workers)
 *   Io    params.steps steps (2) that each block params.ms (200) as a
 *         call to another service would (duro-bench's W6 in a worker)
 *   Par   params.steps such steps (1000) of params.ms (1) each: one
 *         duro_do_all of them with params.parallel set (at most
 *         params.max at once, 0: the workflow's), else one after another
 *         (duro-bench's W8)
 *   Pipe  params.steps steps (10), each sending 100 records of 100 bytes
 *         to the pipeline bound to EVENTS (duro-bench's P1 in a worker)
 *
 * Each ends with a small output, so a client learning the result sees
 * {"steps": N}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../p1_records.h"
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

/* params.KEY as a number, or `fallback` (the params are the bench's own
 * small JSON). */
static int int_param(const char *params, const char *key, int fallback) {
  char pat[32];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = params ? strstr(params, pat) : NULL;
  int n = 0;
  if (!p)
    return fallback;
  for (p += strlen(pat); *p >= '0' && *p <= '9'; p++)
    n = n * 10 + (*p - '0');
  return n;
}

static int steps_param(const char *params) {
  return int_param(params, "steps", 10);
}

static int io_call(duro_attempt *a, void *arg) {
  int ms = *(int *)arg;
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0)
    ;
  return duro_attempt_result(a, "1");
}

static duro_rc io(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int n = int_param(ev->params, "steps", 2);
  int ms = int_param(ev->params, "ms", 200);
  const char *r;
  for (int i = 0; i < n; i++)
    DURO_TRY(duro_do(step, "call", NULL, io_call, &ms, &r));
  return DURO_OK;
}

static duro_rc par(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int n = int_param(ev->params, "steps", 1000);
  int ms = int_param(ev->params, "ms", 1);
  const char *r;
  n = n > DURO_PARALLEL_MAX ? DURO_PARALLEL_MAX : n;
  if (!int_param(ev->params, "parallel", 0)) {
    for (int i = 0; i < n; i++)
      DURO_TRY(duro_do(step, "call", NULL, io_call, &ms, &r));
    return DURO_OK;
  }
  duro_branch *b = calloc((size_t)n, sizeof *b);
  if (!b)
    return duro_fail(step, "no memory for %d branches", n);
  for (int i = 0; i < n; i++)
    b[i] = (duro_branch){.fn = io_call, .arg = &ms};
  duro_rc rc = duro_do_all(step, "call", b, (size_t)n,
                           (uint32_t)int_param(ev->params, "max", 0), 0);
  free(b);
  return rc;
}

static duro_rc steps_n(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  const char *r;
  int n = steps_param(ev->params);
  for (int i = 0; i < n; i++)
    DURO_TRY(duro_do(step, "s", NULL, trivial, NULL, &r));
  return DURO_OK;
}

static unsigned pipe_sent; /* atomic: what makes each record differ */

static int pipe_send(duro_attempt *a, void *arg) {
  return p1_send(a, arg, &pipe_sent);
}

static duro_rc pipe_steps(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  duro_pipeline *p = duro_env_pipeline(env, "EVENTS");
  int n = steps_param(ev->params);
  const char *r;
  for (int i = 0; i < n; i++)
    DURO_TRY(duro_do(step, "send", NULL, pipe_send, p, &r));
  return DURO_OK;
}

static const duro_workflow_def workflows[] = {
    {.class_name = "One", .run = one},
    {.class_name = "Ten", .run = ten},
    {.class_name = "Nap", .run = nap},
    {.class_name = "Steps", .run = steps_n},
    {.class_name = "Io", .run = io},
    {.class_name = "Par", .run = par},
    {.class_name = "Pipe", .run = pipe_steps},
};

DURO_PLUGIN(.name = "bench", .version = "1", DURO_WORKFLOWS(workflows));
