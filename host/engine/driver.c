/* driver.c — the engine's table of drivers (driver.h): registration, and
 * the loops through which the scheduler pass, the retention sweep, the
 * crash replay, /healthz, stop and close reach every feature without
 * naming one; GET /metrics too.
 *
 * The table is filled at open (duro_engine_open registers the built-in
 * drivers) and before start; it never shrinks while the engine lives, so
 * readers on any thread only load its count (acquire) and read the slots
 * below it.  The sweep's position among the drivers is the scheduler
 * pass's own state (e->sweep), as the rest of the sweep is. */
#include "driver.h"

#include <string.h>

#include "core.h"
#include "engine_internal.h"
#include "error.h"
#include "util.h"

int duro_engine_register_driver(duro_engine *e, const duro_driver *d,
                                void *state) {
  size_t n = __atomic_load_n(&e->n_drivers, __ATOMIC_ACQUIRE);
  if (!d || n >= DURO_ENGINE_MAX_DRIVERS)
    return DURO_E_INVALID_ARGUMENT;
  e->drivers[n].d = d;
  e->drivers[n].state = state;
  __atomic_store_n(&e->n_drivers, n + 1, __ATOMIC_RELEASE);
  return 0;
}

void *duro_engine_driver_state(duro_engine *e, const duro_driver *d) {
  size_t n = __atomic_load_n(&e->n_drivers, __ATOMIC_ACQUIRE);
  for (size_t i = 0; i < n; i++)
    if (e->drivers[i].d == d)
      return e->drivers[i].state;
  return NULL;
}

int engine_drivers_open(duro_engine *e) {
  int rc = 0;
  for (size_t i = 0; duro_builtin_drivers[i] && rc == 0; i++) {
    const duro_driver *d = duro_builtin_drivers[i];
    rc = duro_engine_register_driver(e, d, d->create ? d->create(e) : NULL);
  }
  return rc;
}

int engine_drivers_dispatch(duro_engine *e, int64_t *next_ms) {
  int busy = 0;
  int64_t next = INT64_MAX;
  for (size_t i = 0; i < e->n_drivers; i++) {
    int64_t due = INT64_MAX;
    if (!e->drivers[i].d->dispatch)
      continue;
    busy |= e->drivers[i].d->dispatch(e, e->drivers[i].state, &due);
    if (due < next)
      next = due;
  }
  *next_ms = next;
  return busy;
}

int engine_drivers_sweep(duro_engine *e, size_t budget) {
  for (; e->sweep.driver < e->n_drivers; e->sweep.driver++) {
    const duro_driver *d = e->drivers[e->sweep.driver].d;
    if (d->sweep && d->sweep(e, e->drivers[e->sweep.driver].state, budget))
      return 1; /* more on the next pass, from this driver */
  }
  return 0;
}

/* The driver whose handler slot sl is, with a recover (-1: none). */
static int slot_owner(const duro_engine *e, const ledger_slot *sl) {
  if (ledger_get_state(sl) != LEDGER_HANDLER)
    return -1;
  for (size_t i = 0; i < e->n_drivers; i++)
    if (e->drivers[i].d->recover &&
        !strncmp(e->drivers[i].d->name, sl->driver, sizeof sl->driver))
      return (int)i;
  return -1;
}

int engine_drivers_owns(const duro_engine *e, const ledger_slot *sl) {
  return slot_owner(e, sl) >= 0;
}

int engine_drivers_recover(duro_engine *e, const ledger_slot *sl, int guilty,
                           const char *how) {
  int i = slot_owner(e, sl);
  return i < 0 ? 0
               : e->drivers[i].d->recover(e, e->drivers[i].state, sl, guilty,
                                          how);
}

void engine_drivers_instance_changed(duro_engine *e, const wf_reg *wf,
                                     journal_batch *b,
                                     const journal_instance *row,
                                     duro_status from_status,
                                     int64_t from_started_ms, int64_t now) {
  const duro_workflow_limits *limits = engine_workflow_limits(wf);
  for (size_t i = 0; i < e->n_drivers; i++)
    if (e->drivers[i].d->instance_changed)
      e->drivers[i].d->instance_changed(e, e->drivers[i].state, b, row, limits,
                                        from_status, from_started_ms, now);
}

/* The k-th driver with an admission gate, in registration order (NULL
 * past the last, or past ENGINE_MAX_GATES). */
static const struct registered_driver *gate_at(const duro_engine *e, size_t k) {
  for (size_t i = 0; i < e->n_drivers && k < ENGINE_MAX_GATES; i++)
    if (e->drivers[i].d->admit && k-- == 0)
      return &e->drivers[i];
  return NULL;
}

int engine_gate_admit_locked(duro_engine *e, const wf_reg *wf, entry *ent,
                             const char *params, int first) {
  void *holds[ENGINE_MAX_GATES] = {0};
  const struct registered_driver *g;
  for (size_t k = 0; (g = gate_at(e, k)) != NULL; k++) {
    if (g->d->admit(e, g->state, wf->name, &wf->limits, ent->rowid, params,
                    first, ent, &holds[k]))
      continue;
    /* parked by gate k: the gates before it hold nothing for it */
    for (size_t j = 0; j < k; j++) {
      const struct registered_driver *p = gate_at(e, j);
      if (p->d->release)
        p->d->release(e, p->state, holds[j]);
    }
    ent->gate_parked = 1 + (int)k;
    return 0;
  }
  ent->gate_held = 1;
  memcpy(ent->gate_holds, holds, sizeof holds);
  return 1;
}

int engine_gate_check_create_locked(duro_engine *e, const wf_reg *wf,
                                    const char *params,
                                    int64_t *retry_after_ms) {
  *retry_after_ms = 0;
  for (size_t i = 0; i < e->n_drivers; i++) {
    const struct registered_driver *g = &e->drivers[i];
    if (!g->d->check_create)
      continue;
    int rc = g->d->check_create(e, g->state, wf->name, &wf->limits, params,
                                retry_after_ms);
    if (rc)
      return rc;
  }
  return 0;
}

int engine_gate_claim_locked(duro_engine *e, const wf_reg *wf, const char *id,
                             const char *params, duro_claim *claim) {
  *claim = (duro_claim){0};
  for (size_t i = 0; i < e->n_drivers; i++) {
    const struct registered_driver *g = &e->drivers[i];
    if (!g->d->claim_create)
      continue;
    int rc = g->d->claim_create(e, g->state, wf->name, &wf->limits, id, params,
                                claim);
    if (rc != DURO_CLAIM_TAKE)
      return rc;
  }
  return DURO_CLAIM_TAKE;
}

void engine_gate_settle_locked(duro_engine *e, const wf_reg *wf, int claim,
                               const char *id, int64_t rowid) {
  for (size_t i = 0; i < e->n_drivers; i++)
    if (e->drivers[i].d->claim_settled)
      e->drivers[i].d->claim_settled(e, e->drivers[i].state, wf->name, claim,
                                     id, rowid);
}

void engine_gate_release_locked(duro_engine *e, entry *ent) {
  if (!ent->gate_held)
    return;
  ent->gate_held = 0;
  const struct registered_driver *g;
  for (size_t k = 0; (g = gate_at(e, k)) != NULL; k++) {
    if (g->d->release)
      g->d->release(e, g->state, ent->gate_holds[k]);
    ent->gate_holds[k] = NULL;
  }
}

void engine_gate_forget_locked(duro_engine *e, entry *ent) {
  if (!ent->gate_parked)
    return;
  const struct registered_driver *g = gate_at(e, (size_t)ent->gate_parked - 1);
  ent->gate_parked = 0;
  if (g && g->d->forget)
    g->d->forget(e, g->state, ent);
}

void engine_drivers_start(duro_engine *e) {
  for (size_t i = 0; i < e->n_drivers; i++)
    if (e->drivers[i].d->start)
      e->drivers[i].d->start(e, e->drivers[i].state);
}

void engine_gate_ready_locked(duro_engine *e, duro_gate_ticket *ent) {
  ent->gate_parked = 0;
  ent->gate_granted = 1;
  runnable_push(e, ent);
}

void engine_gate_kick_locked(duro_engine *e) {
  e->sched_kick = 1;
  pthread_cond_signal(&e->sched);
}

int64_t engine_gate_ticket_rowid(const duro_gate_ticket *ent) {
  return ent->rowid;
}

void engine_gate_run(duro_engine *e, void (*fn)(duro_engine *e, void *ctx),
                     void *ctx) {
  pthread_mutex_lock(&e->mu);
  fn(e, ctx);
  pthread_mutex_unlock(&e->mu);
}

void engine_drivers_activation_ended(duro_engine *e,
                                     const duro_activation_report *r) {
  size_t n = __atomic_load_n(&e->n_drivers, __ATOMIC_ACQUIRE);
  for (size_t i = 0; i < n; i++)
    if (e->drivers[i].d->activation_ended)
      e->drivers[i].d->activation_ended(e, e->drivers[i].state, r);
}

void engine_drivers_committed(duro_engine *e, const journal_batch *b) {
  size_t n = __atomic_load_n(&e->n_drivers, __ATOMIC_ACQUIRE);
  for (size_t i = 0; i < n; i++)
    if (e->drivers[i].d->committed)
      e->drivers[i].d->committed(e, e->drivers[i].state, b);
}

int engine_drivers_step_claim(duro_engine *e, const char *name, int64_t rowid,
                              const char *workflow, const char *key,
                              step_claim *claim, const char **wait_type,
                              int64_t *recheck_ms, const char **error_name,
                              char **message) {
  claim->driver = -1;
  claim->hold = NULL;
  size_t n = __atomic_load_n(&e->n_drivers, __ATOMIC_ACQUIRE);
  for (size_t i = 0; i < n; i++) {
    const duro_driver *d = e->drivers[i].d;
    if (!d->step_claim)
      continue;
    void *hold = NULL;
    int rc = d->step_claim(e, e->drivers[i].state, name, rowid, workflow, key,
                           &hold, wait_type, recheck_ms, error_name, message);
    if (rc == DURO_STEP_CLAIM_PASS)
      continue;
    if (rc == DURO_STEP_CLAIM_GO) {
      claim->driver = (int)i;
      claim->hold = hold;
    }
    return rc;
  }
  *error_name = DURO_ERR_NON_RETRYABLE;
  *message = xasprintf("step \"%s\" names \"%s\", which nothing on this "
                       "host serves",
                       key, name);
  return DURO_STEP_CLAIM_FAIL;
}

void engine_drivers_step_unclaim(duro_engine *e, step_claim *claim) {
  if (claim->driver < 0)
    return;
  const duro_driver *d = e->drivers[claim->driver].d;
  if (d->step_unclaim)
    d->step_unclaim(e, e->drivers[claim->driver].state, claim->hold);
  claim->driver = -1;
  claim->hold = NULL;
}

int engine_drivers_health(duro_engine *e, duro_health_parts *parts) {
  int degraded = 0;
  size_t n = __atomic_load_n(&e->n_drivers, __ATOMIC_ACQUIRE);
  for (size_t i = 0; i < n; i++)
    if (e->drivers[i].d->health)
      degraded |= e->drivers[i].d->health(e, e->drivers[i].state, parts);
  return degraded;
}

void engine_drivers_metrics(duro_engine *e, FILE *out) {
  size_t n = __atomic_load_n(&e->n_drivers, __ATOMIC_ACQUIRE);
  for (size_t i = 0; i < n; i++)
    if (e->drivers[i].d->metrics)
      e->drivers[i].d->metrics(e, e->drivers[i].state, out);
}

uint32_t engine_drivers_drain(duro_engine *e, const struct timespec *until) {
  uint32_t left = 0;
  for (size_t i = 0; i < e->n_drivers; i++)
    if (e->drivers[i].d->drain)
      left += e->drivers[i].d->drain(e->drivers[i].state, until);
  return left;
}

void engine_drivers_free(duro_engine *e) {
  for (size_t i = e->n_drivers; i-- > 0;)
    if (e->drivers[i].d->free)
      e->drivers[i].d->free(e->drivers[i].state);
  e->n_drivers = 0;
}
