/* step_hung.c — an attempt as the watchdog sees it: whether it ran past
 * its deadline, whose it is, and its description (the step, the error
 * its abandonment records) for the watchdog to act on. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "step_internal.h"

int attempt_is_hung(const duro_attempt *at, int64_t mono, const entry *ent) {
  return mono > at->deadline_mono && (!ent || at->act->ent == ent);
}

int attempt_runs_for(const duro_attempt *at, const entry *ent) {
  return at->act->ent == ent;
}

void attempt_describe(const duro_attempt *at, int terminated,
                      hung_attempt *out) {
  const duro_step *a = at->act;
  const journal_step *s = at->step;
  char buf[48];
  out->ent = a->ent;
  out->rowid = a->inst.rowid;
  out->workflow = xstrdup(a->inst.workflow);
  out->id = xstrdup(a->inst.id);
  out->build = a->build_hash ? xstrdup(a->build_hash) : NULL;
  out->number = at->number;
  out->started_ms = at->started_ms;
  out->step = *s;
  out->step.key = xstrdup(s->key);
  out->step.name = xstrdup(s->name);
  out->step.status = DURO_STEP_WAITING;
  out->step.result = NULL;
  out->step.error = NULL;
  out->step.build = s->build ? xstrdup(s->build) : NULL;
  out->error_name = terminated ? DURO_ERR_TERMINATED : DURO_ERR_TIMEOUT;
  if (terminated)
    out->message = xasprintf("step \"%s\" attempt %u was running when the "
                             "instance was terminated: abandoned, its late "
                             "result will be discarded",
                             s->key, at->number);
  else
    out->message = xasprintf("step \"%s\" attempt %u did not return within "
                             "its timeout of %s: abandoned, its late result "
                             "will be discarded",
                             s->key, at->number,
                             format_ms(buf, sizeof buf, at->timeout_ms));
}

void hung_attempt_clear(hung_attempt *h) {
  free(h->workflow);
  free(h->id);
  free(h->build);
  free(h->message);
  free(h->step.key);
  free(h->step.name);
  free(h->step.error);
  free(h->step.build);
  free(h->cut_short_by);
  memset(h, 0, sizeof *h);
}
