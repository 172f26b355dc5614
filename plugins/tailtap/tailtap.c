/* tailtap.c — the tail-handler plugin (tests/test_tail_host.c).
 *
 * Workflow class "Logged" logs a line from run(), runs step "work",
 * whose first attempt logs and fails when params has "flaky" (retried
 * after 100 ms), and ends; with "boom" in params its step fails for good
 * and the instance errors.
 *
 * Its tail handler appends each batch it gets to the file named by
 * $DURO_TAIL_OUT, one line a batch: "<n> <dropped> <items JSON>".  What
 * the items are about says what it does first: an item of an instance
 * whose id starts with "crash" makes it abort() (its worker dies), "hang"
 * makes it sleep an hour (past tail.timeout), "fail" makes it return 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "duro.h"

static int work(duro_attempt *a, void *arg) {
  const char *params = arg;
  duro_log(DURO_LOG_INFO, "working, attempt %u", duro_attempt_number(a));
  if (duro_json_value(params, "/boom"))
    return duro_attempt_fail_final(a, "boom: the card was refused");
  if (duro_json_value(params, "/flaky") && duro_attempt_number(a) == 1)
    return duro_attempt_fail(a, "upstream timed out");
  return duro_attempt_result(a, "1");
}

static duro_rc run(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  duro_log(DURO_LOG_WARN, "run of %s", ev->instance_id);
  duro_step_config cfg = {
      .retries = &(duro_retries){
          .limit = 2, .delay = "100", .backoff = DURO_BACKOFF_CONSTANT}};
  DURO_TRY(duro_do(step, "work", &cfg, work, (void *)ev->params, NULL));
  return duro_set_output(step, "\"done\"");
}

/* Whether an item of the batch is about an instance whose id starts with
 * `prefix`. */
static int about(const duro_tail_batch *b, const char *prefix) {
  char ptr[32];
  for (size_t i = 0; i < b->n; i++) {
    snprintf(ptr, sizeof ptr, "/%zu/instance", i);
    const char *id = duro_json_string(b->items, ptr);
    if (id && !strncmp(id, prefix, strlen(prefix)))
      return 1;
  }
  return 0;
}

static int tail(const duro_tail_batch *b, duro_env *env) {
  (void)env;
  if (about(b, "crash"))
    abort();
  if (about(b, "hang"))
    sleep(3600);
  const char *path = getenv("DURO_TAIL_OUT");
  if (path) {
    FILE *f = fopen(path, "a");
    if (f) {
      fprintf(f, "%zu %llu %s\n", b->n, (unsigned long long)b->dropped,
              b->items);
      fclose(f);
    }
  }
  return about(b, "fail");
}

static const duro_workflow_def workflows[] = {{"Logged", run}};
DURO_PLUGIN(.name = "tailtap", .version = "1.0", DURO_WORKFLOWS(workflows),
            .tail = tail);
