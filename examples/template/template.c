/* template.c — a duro plugin to copy: one workflow, "Hello", of two steps
 * with a durable sleep between them.
 *
 *   start -> rest (a sleep of 10 seconds) -> finish
 *
 * Start your own plugin from this folder:
 *
 *   cp -r examples/template myflow && cd myflow   (or from the installed
 *                                     share/doc/duro/template)
 *   mv template.c myflow.c            then NAME = myflow in the Makefile,
 *                                     .name = "myflow" below, and in
 *                                     duro.yaml name: myflow and
 *                                     path: ./libmyflow.so
 *   make                              builds libmyflow.so
 *   duro run duro.yaml                serves it on 127.0.0.1:8787
 *   duro workflows trigger hello '{"name":"Ada"}' --wait
 *
 * How duro runs this code: the host calls hello() to start an instance and
 * again after every wait (the sleep, a retry's back-off, a restart of the
 * host).  Each call replays the function from the top: a step that already
 * completed returns its journaled result at once instead of running
 * again.  Hence the rules in duro.h; the ones that matter here are marked
 * "Rule N". */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "duro.h"

/* ---- step callbacks --------------------------------------------------------
 *
 * A step's work lives in a callback that duro_do() calls.  It reports a
 * JSON result with duro_attempt_result(), or a failure with
 * duro_attempt_fail() (retried) or duro_attempt_fail_final() (not).
 * Once a result is journaled, the callback never runs again for this
 * instance (Rule 1: side effects go inside steps). */

/* Step "start": reads the clock.  Rule 3: the clock, randomness and the
 * outside world are read inside a step, so the value is journaled and
 * every replay sees the same one. */
static int start(duro_attempt *a, void *arg) {
  (void)arg;
  /* duro_json_pack builds JSON text from a format (duro.h lists its
   * letters); what it returns is the host's until the callback returns. */
  return duro_attempt_result(
      a, duro_json_pack("{s:I}", "startedAt", (int64_t)time(NULL)));
}

/* What "finish" is handed: the name read from the params and the first
 * step's result, both the host's until this activation ends (Rule 6). */
typedef struct finish_input {
  const char *name;
  const char *started;
} finish_input;

/* Step "finish": builds the output from what it was handed.  Rule 4: a
 * step whose result was not yet on disk when the host died runs again,
 * so make real side effects idempotent (duro_attempt_idempotency_key(a) is
 * the same on every attempt). */
static int finish(duro_attempt *a, void *arg) {
  const finish_input *in = arg;
  char greeting[256];
  snprintf(greeting, sizeof greeting, "Hello, %s!", in->name);
  /* 's' escapes the text; 'j' puts JSON text in as it is. */
  return duro_attempt_result(
      a, duro_json_pack("{s:s, s:j, s:I}", "greeting", greeting, "start",
                        in->started, "finishedAt", (int64_t)time(NULL)));
}

/* ---- the workflow ---------------------------------------------------------
 *
 * Every step has a name, unique and the same on every replay (Rule 2:
 * never put a time or a random number in a name).  DURO_TRY returns at
 * once when a call says DURO_SUSPEND (the instance sleeps, or the host
 * stops) or DURO_ERROR (the step failed for good): Rule 5. */
static duro_rc hello(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env; /* the config's bindings; this plugin uses none */
  const char *started, *output;

  /* NULL: the default policy, 5 retries 10 s apart (doubling), and 10
   * minutes per attempt. */
  DURO_TRY(duro_do(step, "start", NULL, start, NULL, &started));

  /* A durable sleep: no thread waits; the instance is a row with a wake
   * time, and the host calls hello() again once it has passed, after a
   * restart too. */
  DURO_TRY(duro_sleep(step, "rest", "10 seconds"));

  /* A step with a policy of its own: 3 retries, 2 s apart, 30 s each. */
  duro_step_config cfg = {.retries =
                              &(duro_retries){.limit = 3,
                                              .delay = "2 seconds",
                                              .backoff = DURO_BACKOFF_CONSTANT},
                          .timeout = "30 seconds"};
  /* Reading params outside a step is fine: they never change for an
   * instance (Rule 3).  duro_json_string reads the string at a JSON
   * pointer, NULL when there is none; nothing to free. */
  const char *name = duro_json_string(ev->params, "/name");
  finish_input in = {.name = name ? name : "world", .started = started};
  DURO_TRY(duro_do(step, "finish", &cfg, finish, &in, &output));

  /* Logged once, with the instance attached: duro_log is quiet while
   * completed steps replay, printf would not be (Rule 1). */
  duro_log(DURO_LOG_INFO, "all steps done");
  return duro_set_output(step, output);
}

/* The classes this plugin exports; duro.yaml binds each to a workflow
 * name by its class_name. */
static const duro_workflow_def workflows[] = {{"Hello", hello}};

/* The plugin's one exported symbol. */
DURO_PLUGIN(.name = "template", .version = "1.0", DURO_WORKFLOWS(workflows));
