/* backlog.h — the activations waiting for one flow key's turn, in the
 * order they get it (backlog.c).
 *
 * Without a fairness key a backlog is one lane.  With one (flow.fairness)
 * it has a lane per value of that key, and the turns go round the lanes
 * that have waiters: a lane of weight w takes up to w turns before the
 * next lane's, so a tenant with 100,000 waiting delays a newcomer by one
 * round, not by its backlog.  Within a lane the highest priority
 * (flow.priority) goes first, first come first served among equals.
 *
 * A waiter is a link embedded in its owner's record: the backlog never
 * allocates or frees one.  Not thread-safe: the flow driver calls it under
 * the engine's lock. */
#ifndef DURO_FLOW_BACKLOG_H
#define DURO_FLOW_BACKLOG_H

#include <stddef.h>
#include <stdint.h>

#include "map.h"

struct backlog_level;

typedef struct backlog_waiter {
  struct backlog_waiter *prev, *next; /* in its level, oldest first */
  struct backlog_level *level;
} backlog_waiter;

typedef struct backlog {
  struct backlog_lane *current; /* whose turn it is; NULL: none waits */
  idmap lanes;                  /* hash of a lane's value -> lane chain */
  size_t n;                     /* waiters */
} backlog;

/* Adds w at the back of its priority in lane `lane` (the fairness key's
 * value as JSON text; "" without one), made when missing with `weight`
 * turns a round.  A new lane's first turn comes after the lanes waiting
 * already have had theirs in this round. */
void backlog_push(backlog *b, backlog_waiter *w, const char *lane,
                  uint32_t weight, int64_t priority);

/* The waiter whose turn is next, or NULL when none waits. */
backlog_waiter *backlog_next(const backlog *b);

/* Takes out backlog_next(b), its lane charged the turn. */
backlog_waiter *backlog_take(backlog *b);

/* Takes out w, wherever it waits, charging nothing (it gave up its
 * place: terminated, paused, forgotten). */
void backlog_remove(backlog *b, backlog_waiter *w);

/* A waiting w's priority and lane (borrowed while it waits). */
int64_t backlog_waiter_priority(const backlog_waiter *w);
const char *backlog_waiter_lane(const backlog_waiter *w);

/* Calls fn on every waiter, then frees the lanes; b is empty after. */
void backlog_clear(backlog *b, void (*fn)(backlog_waiter *w, void *ctx),
                   void *ctx);

#endif
