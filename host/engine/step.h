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
#include "log.h"

struct journal_batch;

/* Puts the step calls in the plugin API table (api.c assembles it):
 * duro_do, the sleeps, the event wait, run()'s output and errors, the
 * attempt's calls and logging. */
void step_api_fill(duro_api *t);

/* What a log line from this thread is about: the activation running on
 * it (in run() or in one of its callbacks: its workflow, id and build,
 * and the step and attempt of the callback); NULL outside any (a
 * plugin's init, a queue or cron handler).  It lasts until the thread's
 * next call. */
const log_ctx *step_current_log(void);

/* Moves malloc'ed `s` into the arena of the activation running on this
 * thread (step_current_log() is not NULL) and returns the copy; it
 * lives as long as the activation. */
char *step_keep(char *s);

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

/* run() returned rc: when it is an error run() did not handle, the
 * rollbacks of its completed steps run now, newest first
 * (step_rollback.c).  The rc the activation ends with: DURO_ERROR (the
 * error, with a rollback's that failed for good beside it), or
 * DURO_SUSPEND while a rollback waits out its back-off.  The step runner
 * calls it for code in the engine; a worker's stand-in calls it before
 * its worker goes. */
duro_rc step_after_run(duro_step *step, duro_rc rc);

/* ---- run() standing in for code in a worker process ---- */

/* The context of the build the activation runs (duro_engine_build_set_ctx),
 * or NULL. */
void *step_build_ctx(duro_step *step);

/* The process that ran the activation's plugin code died, `how`
 * ("SIGSEGV", "exit status 1"), while attempt `at` was in its callback
 * (or, at NULL, while run() was outside any).  `guilty`: the death was
 * that code's own (the process's crash handler named it).  `killed`:
 * a signal no handler saw (SIGKILL) ended it, so a callback not named
 * may still be the cause: it is blamed when it was the only callback in
 * that process (`alone`) or its kills reach engine.max_crashes, else
 * charged a kill and cut short.  The attempt
 * is journaled failed plugin.crashed and charged toward
 * engine.max_crashes when guilty, else cut short; run() crashing outside
 * a step errors the instance; otherwise the instance runs again at once,
 * on a new process.  Every later step call of the activation suspends,
 * and run()'s stand-in returns DURO_SUSPEND. */
void step_worker_died(duro_step *step, duro_attempt *at, const char *plugin,
                      const char *build, const char *how, int guilty,
                      int killed, int alone);

/* The process that ran the activation's plugin code was killed by a
 * signal no handler saw (SIGKILL) while the activation's run() code ran
 * there outside any step, the only run() code running: the kill is laid
 * on it, not on the callbacks beside it (their deaths are then cut short
 * and charged nothing).  It is charged a kill; at engine.max_crashes of
 * them the instance errors plugin.crashed, else it runs again at once.
 * step_run_returned drops the charge once that run() returns (the kill
 * was not its own). */
void step_worker_killed_in_run(duro_step *step, const char *plugin,
                               const char *build, const char *how);
void step_run_returned(duro_step *step);

/* Waiting for a worker's answer without holding the thread: the token
 * of the activation's fiber (NULL when it runs on none, inline: then
 * block instead); step_park_fd parks it until fd is ready for what
 * events(ctx) says before each poll (POLLIN, POLLOUT; what was ready in
 * *revents, 0 if nothing was) or step_unpark(token) is called on this
 * thread, and returns 1 when the activation was given up on meanwhile
 * (its thread abandoned by the watchdog: it may run elsewhere now;
 * unwind, touch nothing). */
void *step_park_token(duro_step *step);
int step_park_fd(duro_step *step, int fd, short (*events)(void *ctx), void *ctx,
                 int64_t until_mono, short *revents);
void step_unpark(void *token);

/* The attempt's callback in a worker came back (a result, a failure, a
 * timeout or a limit: anything but the worker's death), counted for the
 * crash-storm breaker's rate: one atomic add, no lock. */
void step_attempt_ended(duro_attempt *at);

/* Whether the attempt's step was charged a kill of its worker (it must
 * run with no other callback beside it in its worker process, so that a
 * kill then is its own), and that charge dropped once its callback
 * returned. */
int step_attempt_suspect(const duro_attempt *at);
void step_attempt_unsuspect(const duro_attempt *at);

/* Right before a callback in a worker begins (its place there may have
 * been waited for since the step boundary looked): 1 when a pause, a
 * terminate or a stop came meanwhile, or the host's lease on the journal
 * may have lapsed, and the callback must not begin;
 * the attempt is then withdrawn (nothing recorded) and the activation
 * yields at the boundary. */
int step_attempt_withdraw(duro_attempt *at);
/* Until when (CLOCK_BOOTTIME ms, clock_boot_ms) a callback handed to a
 * worker now may begin: the host's lease surely holds until then
 * (journal_lease_until; INT64_MAX with one host).  A worker frozen with
 * its host (a paused VM) finds it passed when it reads the CALL. */
int64_t step_begin_by(duro_step *step);
/* The worker did not begin the callback: a pause or terminate revoked
 * its CALL (step_dispatch_set), or it came past step_begin_by.  The
 * attempt is withdrawn, as by step_attempt_withdraw, and the activation
 * ends paused or terminated, or as when the lease lapsed (it runs again
 * if the lease still holds). */
void step_attempt_not_begun(duro_attempt *at);
/* The callback about to be handed to a worker may be revoked by setting
 * `revoke` in *word (a word of memory the worker shares, clear when this
 * is set): a pause or terminate does so before it answers, and the
 * worker then never begins it unless it had.  Cleared when it is over
 * (the callback returned, or its worker died); set it before
 * step_attempt_withdraw, clear it before the word's memory goes.  An
 * activation may have several at once (a duro_do_all's branches). */
void step_dispatch_set(duro_step *step, uint64_t *word, uint64_t revoke);
void step_dispatch_clear(duro_step *step, uint64_t *word);
/* The attempt's callback is handed over now (it may have waited for a
 * place in its worker since the step began it): its timeout counts from
 * here. */
void step_attempt_begins(duro_attempt *at);

/* Whether a terminate is asked of the activation now (its callback in a
 * worker is then given up on), and the attempt failed with error `name`
 * and `message` (copied) rather than by the plugin. */
int step_terminate_requested(duro_step *step);
void step_attempt_given_up(duro_attempt *at, const char *name,
                           const char *message);
/* The attempt failed with error `name` and `message` (copied), for
 * good, as the engine judges a result it refuses (no retry would
 * change it). */
void step_attempt_refused(duro_attempt *at, const char *name,
                          const char *message);

/* The engine's monotonic clock (ms), and the attempt's deadline on it:
 * past it the attempt is given up on as hung (TimeoutError). */
int64_t step_mono_ms(duro_step *step);
int64_t step_attempt_deadline_mono(const duro_attempt *at);

/* No process could be had for the activation: it ends as after a failed
 * write (nothing more is written) and runs again after a back-off. */
void step_worker_unavailable(duro_step *step);

/* run()'s own code, outside any step, passed a limit of its plugin's
 * (error `name`, `message` copied), and its worker was killed for it: the
 * instance errors, as its code would do it again on every activation.
 * The worker's death that follows is not charged to anyone. */
void step_run_over_limit(duro_step *step, const char *name,
                         const char *message);

#endif
