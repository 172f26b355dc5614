/* health.c — the engine's health as /healthz reports it (engine.h):
 * journal writes failing, attempts the watchdog gave up on whose threads
 * still run (faults.c keeps them on their workers), and the drivers'
 * parts (driver.h), which the drivers add through duro_health_add_*. */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "util.h"

static duro_health_part *part_add(duro_health_parts *p, const char *key,
                                  duro_health_part_kind kind) {
  p->v = xrealloc(p->v, (p->n + 1) * sizeof *p->v);
  duro_health_part *part = &p->v[p->n++];
  *part = (duro_health_part){.key = xstrdup(key), .kind = kind};
  return part;
}

void duro_health_add_text(duro_health_parts *p, const char *key,
                          const char *text) {
  part_add(p, key, DURO_HEALTH_TEXT)->text = xstrdup(text);
}

void duro_health_add_hung_handlers(duro_health_parts *p, const char *key,
                                   duro_hung_handler *handlers, size_t n) {
  duro_health_part *part = part_add(p, key, DURO_HEALTH_HUNG_HANDLERS);
  part->handlers = handlers;
  part->n_handlers = n;
}

/* The abandoned workers whose thread is still in the callback (mu held):
 * appended to r->hung. */
static void hung_attempts_locked(duro_engine *e, int64_t now,
                                 duro_health_report *r) {
  for (uint32_t i = 0; i < e->n_workers; i++) {
    const worker *w = e->workers[i];
    if (!w->abandoned || w->exited || !w->hung_id)
      continue;
    r->hung = xrealloc(r->hung, (r->n_hung + 1) * sizeof *r->hung);
    r->hung[r->n_hung++] =
        (duro_hung_attempt){.workflow = xstrdup(w->hung_workflow),
                            .id = xstrdup(w->hung_id),
                            .step = xstrdup(w->hung_key),
                            .attempt = w->hung_attempt,
                            .running_ms = now - w->hung_since_ms};
  }
}

void duro_engine_health_report(duro_engine *e, duro_health_report *out) {
  *out = (duro_health_report){0};
  int64_t now = duro_clock_now(e->clock);
  pthread_mutex_lock(&e->mu);
  hung_attempts_locked(e, now, out);
  out->stuck_workers = e->stuck;
  out->stuck_cap = e->max_stuck;
  pthread_mutex_unlock(&e->mu);
  char storage[256];
  if (journal_failing(e->j, storage, sizeof storage, NULL))
    out->storage_error = xstrdup(storage);
  /* The drivers' parts: queue handlers past their deadline, as hung steps
   * are. */
  int degraded = engine_drivers_health(e, &out->parts);
  out->degraded = degraded || out->n_hung || out->storage_error;
  /* Which host this is among those sharing the store. */
  out->host_id = journal_host(e->j);
  if (out->host_id)
    out->host_lease_ms = engine_lease_ms(e);
}

int duro_engine_storage_error(duro_engine *e, char *msg, size_t len) {
  return journal_failing(e->j, msg, len, NULL);
}

void duro_health_report_clear(duro_health_report *r) {
  for (size_t i = 0; i < r->parts.n; i++) {
    duro_health_part *p = &r->parts.v[i];
    free(p->key);
    free(p->text);
    for (size_t k = 0; k < p->n_handlers; k++) {
      free(p->handlers[k].queue);
      free(p->handlers[k].plugin);
    }
    free(p->handlers);
  }
  free(r->parts.v);
  for (size_t i = 0; i < r->n_hung; i++) {
    free(r->hung[i].workflow);
    free(r->hung[i].id);
    free(r->hung[i].step);
  }
  free(r->hung);
  free(r->storage_error);
  *r = (duro_health_report){0};
}
