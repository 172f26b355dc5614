/* pipeline_thread.c — the flusher's own thread.  Writing a file of up to
 * roll_size bytes (100 MB by default) and syncing it takes long enough to
 * stall the engine's scheduler thread, which also runs timers, queue
 * consumers and cron; so each scheduler pass only wakes this thread, which
 * writes every pipeline's due batches (pipeline_flush_all) and tells the
 * scheduler when one is due next.  A round reads each pipeline's counts
 * as a pass did before; a wake during a round asks for one more. */
#include <stdint.h>

#include "core.h"
#include "log.h"
#include "pipeline_internal.h"

/* Files one pipeline writes in a round before the others get theirs. */
#define ROUND_FILES 16

static void *flusher(void *arg) {
  duro_engine *e = arg;
  pipeline_state *s = pipeline_state_of(e);
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->wanted && !s->stop)
      pthread_cond_wait(&s->wake, &s->mu);
    if (s->stop)
      break;
    s->wanted = 0;
    pthread_mutex_unlock(&s->mu);
    size_t files = 0;
    int64_t due = pipeline_flush_all(e, s, ROUND_FILES, &files);
    pthread_mutex_lock(&s->mu);
    s->next_ms = due;
    if (files)
      s->wanted = 1;        /* more may wait: another round at once */
    if (due < s->told_ms) { /* the scheduler must come back earlier */
      pthread_mutex_unlock(&s->mu);
      engine_kick_scheduler(e);
      pthread_mutex_lock(&s->mu);
    }
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

void pipeline_thread_wake(duro_engine *e, pipeline_state *s, int64_t *next_ms) {
  pthread_mutex_lock(&s->mu);
  if (!s->started && !s->stop) {
    if (pthread_create(&s->thread, NULL, flusher, e) == 0)
      s->started = 1;
    else
      log_error("pipelines: cannot start the flusher's thread");
  }
  s->wanted = 1;
  pthread_cond_signal(&s->wake);
  /* A time past is the round this wake asks for: the round tells the
   * scheduler (a kick) what it finds due next, so the pass that now
   * waits is not repeated until then. */
  *next_ms = s->next_ms > engine_now(e) ? s->next_ms : INT64_MAX;
  s->told_ms = *next_ms;
  pthread_mutex_unlock(&s->mu);
}

void pipeline_thread_stop(pipeline_state *s) {
  pthread_mutex_lock(&s->mu);
  /* atomic: an upload under way reads it without the lock, and gives up */
  __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
  int started = s->started;
  s->started = 0;
  pthread_cond_signal(&s->wake);
  pthread_mutex_unlock(&s->mu);
  if (started)
    pthread_join(s->thread, NULL);
}
