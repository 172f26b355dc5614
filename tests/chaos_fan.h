/* chaos_fan.h — the fan-outs of `make chaos` (tests/chaos.c): parents of
 * the plugin's class Fan (workflow FAN_WF) that each start a few children
 * of class Chaos and sum their outputs, created and killed like the rest.
 *
 * A parent "f<n>" starts child i as step "kid <i>" with the id
 * "f<n>.<i>", which the driver knows: the plugin's Fan class in
 * plugins/chaos/chaos.c.  The children write the side log as any Chaos
 * instance does (exec, fail, seen), under their own ids.  What is checked,
 * once every instance ended:
 *
 *   - each parent is complete with {"kids": K, "sum": the children's
 *     steps}, its describe lists exactly its K children, in order, each
 *     once, and each "kid <i>#1" step's result is child i's id: no child
 *     was started twice for one (parent, name);
 *   - each child is complete with all its steps;
 *   - each child step ran exactly once as far as it completed: its
 *     journaled result is the token of an "exec" of that step (it ran); no
 *     "exec" of it came after a "seen" of it, nor began (its token's time)
 *     after the engine had the journaled result (the step's ended_ms):
 *     nothing ran it again once complete, even before run() saw the
 *     result; and every "seen" carries the journaled token.
 *
 * Findings go through chaos_problem(), tests/chaos.c's. */
#ifndef DURO_TEST_CHAOS_FAN_H
#define DURO_TEST_CHAOS_FAN_H

#include <jansson.h>
#include <stddef.h>

#define FAN_WF "chaos-fan"

typedef struct chaos_fan chaos_fan;

typedef struct chaos_fan_figures {
  long parents, complete, kids, kids_complete;
  long wrong_output; /* a parent complete with another sum, or a child
                        with another output */
  long kids_lost;    /* a child missing or not complete */
  long kids_twice;   /* a child listed twice or unexpected, a start step
                        with another id */
  long execs, cut_off;
  long reruns;  /* an exec after a seen, or begun after the step ended */
  long changed; /* a seen unlike an earlier seen or the journal */
  long unrun;   /* a journaled or seen result no exec wrote */
} chaos_fan_figures;

/* tests/chaos.c's: a finding, printed and kept in problems.txt. */
void chaos_problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* tests/chaos.c's: the wall clock time (ns) in a step's token
 * ("<pid>-<ns>", plugins/sidelog.h's sidelog_token), when its callback
 * began; -1 when the token is not one. */
long long chaos_token_ns(const char *token);

/* A new parent's children, drawn with rand_r(rnd), and its params as
 * JSON text into buf. */
chaos_fan *chaos_fan_new(unsigned *rnd);
void chaos_fan_params(const chaos_fan *f, char *buf, size_t len);

/* How many children parent f starts, and child i's id for parent `id`. */
int chaos_fan_kids(const chaos_fan *f);
void chaos_fan_kid_id(const char *id, int i, char *buf, size_t len);

/* The final state: the parent's describe `d` (status complete), then
 * each child's (NULL: no answer).  Keeps the children's journaled
 * results for chaos_fan_log_end. */
void chaos_fan_final(chaos_fan *f, const char *id, json_t *d,
                     chaos_fan_figures *ff);
void chaos_fan_final_kid(chaos_fan *f, const char *id, int i, json_t *d,
                         chaos_fan_figures *ff);

/* A side log record of child i of parent f, in the log's order (line:
 * its number, for the findings). */
void chaos_fan_record(chaos_fan *f, const char *kid_id, int i, long line,
                      const char *kind, int idx, const char *token,
                      chaos_fan_figures *ff);

/* After the whole log: each child's journaled results against its
 * records. */
void chaos_fan_log_end(chaos_fan *f, const char *id, chaos_fan_figures *ff);

#endif
