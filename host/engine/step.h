/* step.h — the step runner's face to the rest of the host: its part of
 * the plugin API table, and where a plugin's side effects go.
 *
 * The step runner (step.c) owns duro_step and duro_attempt.  Other
 * subsystems that hand plugins a call with a side effect (a queue send,
 * an event to another instance) do not see inside them: they ask here
 * whether the call is made inside a step callback, in run() outside one,
 * or outside any activation, and inside a callback they append the
 * effect's writes to the attempt's batch, which commits with the step's
 * result (exactly once, with the step) or is dropped with a failed
 * attempt. */
#ifndef DURO_STEP_H
#define DURO_STEP_H

#include <stdint.h>

#include "duro.h"

struct journal_batch;

/* Puts the step calls in the plugin API table (api.c assembles it):
 * duro_do, the sleeps, the event wait, run()'s output and errors, the
 * attempt's calls and logging. */
void step_api_fill(duro_api *t);

/* The activation running on this thread (in run() or in one of its
 * callbacks), as "workflow/id" for a log line; NULL outside any (a
 * plugin's init, a queue or cron handler). */
const char *step_current_where(void);

/* The attempt whose callback runs on this thread, or NULL.  A side effect
 * made with no attempt but with an activation (in run() outside a
 * callback) is refused: it would repeat on every replay. */
duro_attempt *step_current_attempt(void);

/* The attempt's side effects: writes appended here commit with the step's
 * result, or are dropped with a failed attempt. */
struct journal_batch *attempt_effects(duro_attempt *at);

/* A copy of `s` that lives as long as the attempt's activation, so until
 * its effects commit (NULL for NULL). */
char *attempt_strdup(duro_attempt *at, const char *s);

/* Now on the engine clock, as the attempt's activation reads it. */
int64_t attempt_now_ms(const duro_attempt *at);

#endif
