/* core.c — the accessors of core.h: what a feature beside the engine
 * reads of the engine's struct, without seeing it.  None is on a step's
 * path; each is a load. */
#include "core.h"

#include "engine_internal.h"

journal *engine_journal(const duro_engine *e) { return e->j; }

int64_t engine_now(const duro_engine *e) { return duro_clock_now(e->clock); }

uint32_t engine_workers(const duro_engine *e) { return e->opt.workers; }

uint32_t engine_max_hung(const duro_engine *e) { return e->max_stuck; }

int64_t engine_max_step_result(const duro_engine *e) {
  return e->max_step_result;
}

void engine_set_trace_sample(duro_engine *e, double ratio) {
  e->trace_sample = ratio;
}

void engine_observe_activations(duro_engine *e, const duro_driver *d, int on) {
  for (size_t i = 0; i < e->n_drivers; i++)
    if (e->drivers[i].d == d) {
      uint32_t bit = 1u << i;
      if (on)
        __atomic_or_fetch(&e->observe_activations, bit, __ATOMIC_ACQ_REL);
      else
        __atomic_and_fetch(&e->observe_activations, ~bit, __ATOMIC_ACQ_REL);
    }
}

int engine_stopping(const duro_engine *e) {
  return __atomic_load_n(&e->stopping, __ATOMIC_ACQUIRE);
}

ledger *engine_ledger(const duro_engine *e) { return e->ledger; }
