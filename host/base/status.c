/* status.c — the name tables of status.h: the one place each status and
 * kind is spelled, indexed by its enum. */
#include "status.h"

#include <stddef.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof *(a))

static const char *const status_names[] = {
    [DURO_STATUS_QUEUED] = "queued",
    [DURO_STATUS_RUNNING] = "running",
    [DURO_STATUS_WAITING] = "waiting",
    [DURO_STATUS_WAITING_FOR_PAUSE] = "waitingForPause",
    [DURO_STATUS_PAUSED] = "paused",
    [DURO_STATUS_ERRORED] = "errored",
    [DURO_STATUS_TERMINATED] = "terminated",
    [DURO_STATUS_COMPLETE] = "complete",
};

static const char *const step_kind_names[] = {
    [DURO_STEP_DO] = "do",
    [DURO_STEP_SLEEP] = "sleep",
    [DURO_STEP_WAIT_FOR_EVENT] = "waitForEvent",
    [DURO_STEP_WAIT_ANY] = "waitAny",
    [DURO_STEP_CHILD_START] = "childStart",
    [DURO_STEP_ROLLBACK] = "rollback",
};

static const char *const step_status_names[] = {
    [DURO_STEP_WAITING] = "waiting",
    [DURO_STEP_COMPLETE] = "complete",
    [DURO_STEP_ERRORED] = "errored",
    [DURO_STEP_CANCELLED] = "cancelled",
};

static const char *const outcome_names[] = {
    [DURO_ATTEMPT_SUCCEEDED] = "succeeded",
    [DURO_ATTEMPT_FAILED] = "failed",
};

static const char *name_of(const char *const *names, size_t n, unsigned v) {
  return v < n ? names[v] : "unknown";
}

static int parse_in(const char *const *names, size_t n, const char *name) {
  for (size_t i = 0; name && i < n; i++)
    if (strcmp(names[i], name) == 0)
      return (int)i;
  return -1;
}

const char *duro_status_name(duro_status s) {
  return name_of(status_names, COUNT(status_names), (unsigned)s);
}

int duro_status_parse(const char *name) {
  return parse_in(status_names, COUNT(status_names), name);
}

int duro_status_ended(duro_status s) {
  return s == DURO_STATUS_COMPLETE || s == DURO_STATUS_ERRORED ||
         s == DURO_STATUS_TERMINATED;
}

const char *duro_step_kind_name(duro_step_kind k) {
  return name_of(step_kind_names, COUNT(step_kind_names), (unsigned)k);
}

int duro_step_kind_parse(const char *name) {
  return parse_in(step_kind_names, COUNT(step_kind_names), name);
}

const char *duro_step_status_name(duro_step_status s) {
  return name_of(step_status_names, COUNT(step_status_names), (unsigned)s);
}

int duro_step_status_parse(const char *name) {
  return parse_in(step_status_names, COUNT(step_status_names), name);
}

const char *duro_attempt_outcome_name(duro_attempt_outcome o) {
  return name_of(outcome_names, COUNT(outcome_names), (unsigned)o);
}

duro_attempt_outcome duro_attempt_outcome_of(const char *error) {
  return error ? DURO_ATTEMPT_FAILED : DURO_ATTEMPT_SUCCEEDED;
}
