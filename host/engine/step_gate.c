/* step_gate.c — the callbacks' gate.
 *
 * While attempts are charged with a kill (faults.c: inside their
 * callback when the engine died of a SIGKILL), callbacks pass a gate: a
 * suspect's runs alone (it waits until no other callback runs, and none
 * starts while it runs or waits), the others side by side.  With no
 * suspect, a callback passes with one atomic load.  A callback never
 * parks its fiber, so a thread waiting here holds no place in the gate. */
#include <pthread.h>
#include <time.h>

#include "log.h"
#include "step_internal.h"

enum { GATE_NONE = 0, GATE_SHARED, GATE_ALONE };

static int gate_blocked(const duro_engine *e, int alone) {
  return alone ? e->gate_shared || e->gate_alone
               : e->gate_alone || e->gate_waiting;
}

/* Returns the place taken (GATE_*), or -1 when the engine stops. */
int step_gate_enter(duro_step *a, const journal_step *s, uint32_t number) {
  duro_engine *e = a->e;
  /* Run inline (no worker threads), callbacks never overlap; a callback
   * in a worker process cannot take the engine down, so it is never a
   * suspect of the engine's death, and it parks its fiber (the gate
   * would have a thread wait on it). */
  if (!a->worker || step_is_remote(a) || !ledger_has_suspects(e->ledger))
    return GATE_NONE;
  int alone = ledger_suspect_kills(e->ledger, a->inst.rowid, s->key);
  pthread_mutex_lock(&e->gate_mu);
  int stopping;
  /* A suspect waits for the engine to settle first (others run then). */
  while (alone &&
         !(stopping = __atomic_load_n(&e->stopping, __ATOMIC_ACQUIRE)) &&
         engine_mono_ms(e) < e->gate_open_ms) {
    struct timespec until = engine_cond_deadline(100);
    pthread_cond_timedwait(&e->gate_cv, &e->gate_mu, &until);
  }
  e->gate_waiting += alone ? 1 : 0;
  while (!(stopping = __atomic_load_n(&e->stopping, __ATOMIC_ACQUIRE)) &&
         gate_blocked(e, alone)) {
    struct timespec until = engine_cond_deadline(100);
    pthread_cond_timedwait(&e->gate_cv, &e->gate_mu, &until);
  }
  e->gate_waiting -= alone ? 1 : 0;
  int place = stopping ? -1 : alone ? GATE_ALONE : GATE_SHARED;
  if (place == GATE_ALONE)
    e->gate_alone = 1;
  else if (place == GATE_SHARED)
    e->gate_shared++;
  else
    pthread_cond_broadcast(&e->gate_cv); /* one waiting suspect fewer */
  pthread_mutex_unlock(&e->gate_mu);
  if (place == GATE_ALONE)
    log_at(DURO_LOG_INFO, &a->log,
           "step \"%s\" attempt %u runs alone: it was inside its "
           "callback when the engine was killed",
           s->key, number);
  return place;
}

/* Gives the place back, once (the callback's end and the watchdog may
 * both call it); a suspect whose callback got here is no longer one. */
void attempt_gate_leave(duro_attempt *at) {
  if (!__atomic_load_n(&at->gate, __ATOMIC_ACQUIRE))
    return;
  duro_engine *e = at->act->e;
  pthread_mutex_lock(&e->gate_mu);
  int place = at->gate;
  __atomic_store_n(&at->gate, GATE_NONE, __ATOMIC_RELEASE);
  if (place == GATE_ALONE)
    e->gate_alone = 0;
  else if (place == GATE_SHARED)
    e->gate_shared--;
  pthread_cond_broadcast(&e->gate_cv);
  pthread_mutex_unlock(&e->gate_mu);
  if (place == GATE_ALONE)
    ledger_suspect_clear(e->ledger, at->act->inst.rowid, at->step->key);
}
