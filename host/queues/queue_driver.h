/* queue_driver.h — the queues as an engine driver (driver.h): the state
 * the engine keeps for them, shared by queue.c (the registry) and
 * consumer*.c (the engine-run consumers).  Not for other modules. */
#ifndef DURO_QUEUE_DRIVER_H
#define DURO_QUEUE_DRIVER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "driver.h"

typedef struct queue_state {
  /* Guards the creation of the two below, each stored once (release)
   * and read with acquire from then on. */
  pthread_mutex_t mu;
  /* Durable queues (queue.c), created on the first use; they live in the
   * engine's journal. */
  struct queue_registry *queues;
  /* Queues consumed by the engine itself (consumer*.c), created on the
   * first consumer's registration. */
  struct queue_consumers *consumers;
  size_t swept; /* messages deleted by the retention sweep under way */
} queue_state;

extern const duro_driver queue_driver;

/* The engine's queue state. */
queue_state *queue_state_of(duro_engine *e);
/* Its consumers (NULL until the first registration). */
struct queue_consumers *queue_consumers_of(duro_engine *e);

/* The driver's instance_changed hook: an instance's lifecycle messages
 * (lifecycle.c). */
struct journal_batch;
struct journal_instance;
void queue_lifecycle_changed(duro_engine *e, void *state,
                             struct journal_batch *b,
                             const struct journal_instance *row,
                             const duro_workflow_limits *limits,
                             duro_status from_status, int64_t from_started_ms,
                             int64_t now);

#endif
