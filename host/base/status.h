/* status.h — what an instance, a step and an attempt can be, as enums,
 * each with its one table of names: the words the journal stores, the
 * HTTP API answers and the client prints ("queued", "waitForEvent", ...).
 * In base/ so that the journal's rows (store/) and the engine share them
 * without depending on each other; the text exists only at the edges (a
 * backend's row readers and writers, the JSON of a reply).
 *
 * Each *_name returns "unknown" for a value out of range; each *_parse
 * returns -1 for a name that is none of them (or NULL). */
#ifndef DURO_STATUS_H
#define DURO_STATUS_H

/* An instance's status.  "running" and "waitingForPause" are never
 * stored: a reader sees them while an activation holds the instance. */
typedef enum duro_status {
  DURO_STATUS_QUEUED = 0,
  DURO_STATUS_RUNNING,
  DURO_STATUS_WAITING,
  DURO_STATUS_WAITING_FOR_PAUSE,
  DURO_STATUS_PAUSED,
  DURO_STATUS_ERRORED,
  DURO_STATUS_TERMINATED,
  DURO_STATUS_COMPLETE
} duro_status;

/* "queued", "running", "waiting", "waitingForPause", "paused", "errored",
 * "terminated", "complete". */
const char *duro_status_name(duro_status s);
int duro_status_parse(const char *name);
/* 1 for the statuses an instance ends in: complete, errored, terminated. */
int duro_status_ended(duro_status s);

/* What a step is: a duro_do callback, a sleep, a wait for an event, a
 * wait for the first event of several types (duro_wait_any). */
typedef enum duro_step_kind {
  DURO_STEP_DO = 0,
  DURO_STEP_SLEEP,
  DURO_STEP_WAIT_FOR_EVENT,
  DURO_STEP_WAIT_ANY,
  DURO_STEP_CHILD_START,
  DURO_STEP_ROLLBACK /* what undoes a completed do step */
} duro_step_kind;

/* "do", "sleep", "waitForEvent", "waitAny", "childStart", "rollback". */
const char *duro_step_kind_name(duro_step_kind k);
int duro_step_kind_parse(const char *name);

/* A journaled step's status: waiting (a sleep or wait not over, a do
 * step's retry pending), complete, errored, or cancelled (still waiting
 * when its instance errored or was terminated). */
typedef enum duro_step_status {
  DURO_STEP_WAITING = 0,
  DURO_STEP_COMPLETE,
  DURO_STEP_ERRORED,
  DURO_STEP_CANCELLED
} duro_step_status;

/* "waiting", "complete", "errored", "cancelled". */
const char *duro_step_status_name(duro_step_status s);
int duro_step_status_parse(const char *name);

/* How an attempt of a do step ended, as the journal keeps it: by its
 * error, NULL for a success (journal.h: the successful attempt lives in
 * its step row, each failed one has a row with its error). */
typedef enum duro_attempt_outcome {
  DURO_ATTEMPT_SUCCEEDED = 0,
  DURO_ATTEMPT_FAILED
} duro_attempt_outcome;

/* "succeeded", "failed". */
const char *duro_attempt_outcome_name(duro_attempt_outcome o);
/* The outcome of an attempt whose journaled error is `error`. */
duro_attempt_outcome duro_attempt_outcome_of(const char *error);

#endif
