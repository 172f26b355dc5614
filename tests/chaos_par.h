/* chaos_par.h — the parallel steps and rollbacks of `make chaos`
 * (tests/chaos.c): instances of the plugin's class Par (workflow PAR_WF,
 * id "p<n>"), created and killed like the rest, paused and resumed,
 * never terminated or restarted.
 *
 * Each runs one duro_do_all of 3 to 6 branches ("branch#k", side log
 * index k), some holding up to 300 ms, some failing their first attempt.
 * A fan-out ends there, complete with its branch results in order.  A
 * saga goes on with 1 to 3 steps with rollbacks ("saga#j", index 10 + j;
 * in half of them the branches carry rollbacks too) and a step that fails
 * for good ("doom#1", index 20): its rollbacks ("<key>/rollback") then
 * run newest first, each napping, some failing their first attempt, one
 * in a few sagas' failing for good on purpose; the instance ends errored
 * with doom's error (and that rollback's beside it), or, one saga in
 * three, run() calls duro_rollback itself and completes.  The plugin's
 * class Par in plugins/chaos/chaos.c.  What is checked, once every
 * instance ended:
 *
 *   - the end: complete with {"branches": [the journaled results of
 *     branch#1..#B]} for a fan-out; errored with doom's error, with a
 *     "rollback" member exactly when a rollback was to fail for good, or
 *     complete with {"rolled_back": true} after duro_rollback, for a saga;
 *   - every branch and saga step complete, doom errored: nothing lost;
 *   - each branch and step ran exactly once as far as it completed: its
 *     journaled result is the token of an "exec" of it, no "exec" of it
 *     came after a "seen" of it nor began (its token's time) after the
 *     engine had its journaled end (the step's ended_ms), and every
 *     "seen" carries the journaled token;
 *   - each completed step with a rollback has its rollback step, complete
 *     (errored for the one failing on purpose), handed that step's output
 *     (its result's "of"), its result the token of an "undo" of it, no
 *     "undo" of it begun after the rollback step's ended_ms (a completed
 *     rollback never ran again), and no rollback step of any other step;
 *   - the rollbacks ran after the cause and newest first: each rollback
 *     step began (started_ms) after doom ended and after the rollback of
 *     the next newer step ended, and no "undo" began before either.
 *
 * Findings go through chaos_problem(), tests/chaos.c's. */
#ifndef DURO_TEST_CHAOS_PAR_H
#define DURO_TEST_CHAOS_PAR_H

#include <jansson.h>
#include <stddef.h>

#define PAR_WF "chaos-par"

typedef struct chaos_par chaos_par;

typedef struct chaos_par_figures {
  long instances, fanouts, sagas, explicit_rb, rollback_failed;
  long branches, branch_execs, branch_cut;
  long step_execs, step_cut; /* saga steps and doom */
  long rollbacks, undo_execs, undo_cut, undo_failed;
  long wrong_end; /* another status, output or error than expected */
  long lost;      /* a branch, step or rollback missing or not ended */
  long reruns;    /* a branch or step run after it completed */
  long rb_reruns; /* a rollback run after it completed */
  long changed;   /* a seen unlike an earlier seen or the journal */
  long unrun;     /* a journaled or seen result no exec or undo wrote */
  long disorder;  /* a rollback before its cause or an older one first */
  long stray;     /* a rollback step or undo of a step that has none */
} chaos_par_figures;

/* A new instance's shape, drawn with rand_r(rnd), and its params as JSON
 * text into buf. */
chaos_par *chaos_par_new(unsigned *rnd);
void chaos_par_params(const chaos_par *p, char *buf, size_t len);

/* The final state: the instance's describe `d` (any status; NULL: no
 * answer).  Keeps the journaled results for chaos_par_record. */
void chaos_par_final(chaos_par *p, const char *id, json_t *d,
                     chaos_par_figures *pf);

/* Whether `status` is an end the instance may have (a paused one may end
 * before its pause takes: complete, or errored for a saga). */
int chaos_par_may_end(const chaos_par *p, const char *status);

/* A side log record of instance `id`, in the log's order (line: its
 * number, for the findings). */
void chaos_par_record(chaos_par *p, const char *id, long line, const char *kind,
                      int idx, const char *token, chaos_par_figures *pf);

/* After the whole log: the journaled results against the records. */
void chaos_par_log_end(chaos_par *p, const char *id, chaos_par_figures *pf);

/* The figures' line. */
void chaos_par_print(const chaos_par_figures *pf);

#endif
