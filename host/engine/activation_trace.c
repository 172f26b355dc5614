/* activation_trace.c — what an activation did, for the drivers that
 * observe activations (a tail handler's trace items): the lines its
 * plugin code logged and the failures of its attempts, copied as they
 * happen (bounded: the lines and errors past the caps are counted), and
 * handed to the drivers' activation_ended hook once its final commit is
 * on disk.  Nothing is kept while no driver observes (the flag read
 * when the activation begins), so the step path pays one load. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "step_internal.h"
#include "util.h"

struct act_trace {
  /* a step's log line may come from a callback's thread while run()'s
   * fiber waits, so the lists take a lock */
  pthread_mutex_t mu;
  duro_activation_log logs[DURO_ACTIVATION_LOGS];
  size_t n_logs;
  uint32_t logs_dropped;
  duro_activation_error errors[DURO_ACTIVATION_ERRORS];
  size_t n_errors;
  uint32_t errors_dropped;
};

void activation_trace_begin(duro_step *a) {
  if (!__atomic_load_n(&a->e->observe_activations, __ATOMIC_ACQUIRE))
    return;
  a->trace = xcalloc(1, sizeof *a->trace);
  pthread_mutex_init(&a->trace->mu, NULL);
}

/* text cut at DURO_ACTIVATION_LOG_MAX bytes, marked as cut */
static char *cut_copy(const char *text) {
  static const char cut[] = " [cut]";
  size_t n = strlen(text);
  if (n <= DURO_ACTIVATION_LOG_MAX)
    return xstrdup(text);
  char *s = xmalloc(DURO_ACTIVATION_LOG_MAX + sizeof cut);
  memcpy(s, text, DURO_ACTIVATION_LOG_MAX);
  memcpy(s + DURO_ACTIVATION_LOG_MAX, cut, sizeof cut);
  return s;
}

void activation_trace_log(duro_step *a, int64_t time_ms, int level,
                          const char *step, uint32_t attempt,
                          const char *text) {
  struct act_trace *t = a ? a->trace : NULL;
  if (!t)
    return;
  pthread_mutex_lock(&t->mu);
  if (t->n_logs < DURO_ACTIVATION_LOGS)
    t->logs[t->n_logs++] = (duro_activation_log){.time_ms = time_ms,
                                                 .level = level,
                                                 .step = xstrdup_null(step),
                                                 .attempt = attempt,
                                                 .text = cut_copy(text)};
  else
    t->logs_dropped++;
  pthread_mutex_unlock(&t->mu);
}

void activation_trace_error(duro_step *a, int64_t time_ms, const char *step,
                            uint32_t attempt, const char *error) {
  struct act_trace *t = a ? a->trace : NULL;
  if (!t || !error)
    return;
  pthread_mutex_lock(&t->mu);
  if (t->n_errors < DURO_ACTIVATION_ERRORS)
    t->errors[t->n_errors++] =
        (duro_activation_error){.time_ms = time_ms,
                                .step = xstrdup_null(step),
                                .attempt = attempt,
                                .error = xstrdup(error)};
  else
    t->errors_dropped++;
  pthread_mutex_unlock(&t->mu);
}

/* How the activation went, in the words of a tail handler's item. */
static const char *outcome_of(const duro_step *a) {
  switch (a->final_row.status) {
  case DURO_STATUS_ERRORED:
    return a->reason == SUSPEND_CRASHED     ? "crashed"
           : a->reason == SUSPEND_TIMED_OUT ? "timedOut"
                                            : "exception";
  case DURO_STATUS_TERMINATED:
    return "canceled";
  default:
    return "ok";
  }
}

void activation_trace_report(duro_step *a) {
  struct act_trace *t = a->trace;
  if (!t)
    return;
  const journal_instance *row = &a->final_row;
  int ended = duro_status_ended(row->status);
  /* the instance's own error closes the list: why it ended */
  if (ended && row->error)
    activation_trace_error(a, now_ms(a), NULL, 0, row->error);
  pthread_mutex_lock(&t->mu);
  duro_activation_report r = {.workflow = a->inst.workflow,
                              .id = a->inst.id,
                              .rowid = a->inst.rowid,
                              .created_ms = a->inst.created_ms,
                              .traceparent = a->inst.traceparent,
                              .build = a->build_hash,
                              .outcome = outcome_of(a),
                              .status = row->status,
                              .started_ms = a->begun_ms,
                              .ended_ms = ended ? row->ended_ms : now_ms(a),
                              .logs = t->logs,
                              .n_logs = t->n_logs,
                              .logs_dropped = t->logs_dropped,
                              .errors = t->errors,
                              .n_errors = t->n_errors,
                              .errors_dropped = t->errors_dropped};
  engine_drivers_activation_ended(a->e, &r);
  pthread_mutex_unlock(&t->mu);
}

void activation_trace_free(duro_step *a) {
  struct act_trace *t = a->trace;
  if (!t)
    return;
  for (size_t i = 0; i < t->n_logs; i++) {
    free((char *)t->logs[i].step);
    free((char *)t->logs[i].text);
  }
  for (size_t i = 0; i < t->n_errors; i++) {
    free((char *)t->errors[i].step);
    free((char *)t->errors[i].error);
  }
  pthread_mutex_destroy(&t->mu);
  free(t);
  a->trace = NULL;
}
