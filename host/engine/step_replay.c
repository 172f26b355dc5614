/* step_replay.c — the activation's journal and each step call's place in
 * it: the journal loaded into the arena (by key and by call position),
 * the key of the next call of a name, the journaled step looked up at
 * the call's position (a step inserted, renamed, removed or reordered
 * since stops the activation: replay.diverged), and a step the journal
 * does not have yet added, within the workflow's limits.steps. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "step_internal.h"

int activation_load_journal(duro_step *a) {
  journal_step *loaded = NULL;
  size_t n = 0;
  int rc = journal_steps_load(a->e->j, a->inst.rowid, &loaded, &n);
  if (rc)
    return rc;
  /* Copy into the arena so step fields can be replaced freely. */
  for (size_t i = 0; i < n; i++) {
    journal_step *s = arena_alloc(a, sizeof *s);
    *s = loaded[i];
    s->key = arena_strdup(a, loaded[i].key);
    s->name = arena_strdup(a, loaded[i].name);
    s->result = arena_strdup(a, loaded[i].result);
    s->error = arena_strdup(a, loaded[i].error);
    s->build = arena_strdup(a, loaded[i].build);
    a->state_bytes += (int64_t)(s->result ? strlen(s->result) : 0) +
                      (int64_t)(s->error ? strlen(s->error) : 0);
    strmap_put(&a->steps, s->key, s);
    idmap_put(&a->by_seq, s->seq, s);
    a->n_steps++;
    a->n_outcomes += !(s->type == DURO_STEP_DO &&
                       s->status == DURO_STEP_WAITING && !s->result);
  }
  a->state_bytes += (int64_t)strlen(a->inst.params);
  journal_steps_free(loaded, n);
  /* Replay lasts until a step call misses the journal; with an empty
   * journal nothing is replayed, so run()'s first lines log (they would
   * otherwise be suppressed on the first activation and never appear). */
  a->replaying = n > 0;
  return 0;
}

/* The key of the next call of `name`: "name#count". */
static const char *next_key(duro_step *a, const char *name, uint32_t *count) {
  uintptr_t c = (uintptr_t)strmap_get(&a->name_counts, name) + 1;
  const char *stored = c == 1 ? arena_strdup(a, name) : NULL;
  if (stored)
    strmap_put(&a->name_counts, stored, (void *)c);
  else
    strmap_put(&a->name_counts, name, (void *)c); /* key already present */
  *count = (uint32_t)c;
  a->seq++;
  /* Every step call, replayed or not, makes a key: format it on the stack
   * and copy it into the arena, no heap round trip. */
  char key[256];
  int n = snprintf(key, sizeof key, "%s#%u", name, (unsigned)c);
  if (n >= 0 && (size_t)n < sizeof key)
    return arena_strdup(a, key);
  return arena_printf(a, "%s#%u", name, (unsigned)c);
}

/* The code asked, at call position a->seq, for step `key` of `type`, and
 * the journal disagrees: stop the activation (sticky, like any
 * suspension) with replay.diverged naming both; the workflow's
 * on_divergence makes the instance errored or paused. */
static duro_rc diverge(duro_step *a, const journal_step *journaled,
                       const char *key, duro_step_kind type) {
  char *msg;
  if (journaled && journaled->seq == a->seq)
    msg =
        xasprintf("at step call %" PRId64 " the journal has \"%s\" (%s) "
                  "but the code asked for \"%s\" (%s): the workflow's "
                  "code changed under this instance",
                  a->seq, journaled->key, duro_step_kind_name(journaled->type),
                  key, duro_step_kind_name(type));
  else
    msg = xasprintf("the code asked for \"%s\" (%s) at step call %" PRId64
                    ", but the journal has it at call %" PRId64
                    ": the workflow's code changed under this instance",
                    key, duro_step_kind_name(type), a->seq, journaled->seq);
  if (a->dry) {
    a->dry_code_key = key;
    a->dry_journal_key =
        journaled && journaled->seq == a->seq ? journaled->key : NULL;
  } else {
    log_write(DURO_LOG_WARN, a->where, "replay diverged: %s", msg);
  }
  fail_with(a, "replay.diverged", msg);
  free(msg);
  a->suspended = 1;
  a->reason = SUSPEND_DIVERGED;
  return DURO_SUSPEND;
}

/* Common entry of every step call: validates the name, honours requests,
 * finds the journaled step and checks that it sits at this call's
 * position (a step inserted, renamed, removed or reordered since the
 * journal was written is caught here, before it runs).  Returns 0 to
 * proceed, or the rc to return. */
int step_begin(duro_step *a, const char *name, duro_step_kind type,
               const char **key, uint32_t *count, journal_step **s,
               duro_rc *rc) {
  *s = NULL;
  if (a->suspended || at_boundary(a)) {
    *rc = DURO_SUSPEND;
    return 1;
  }
  if (!name || !*name) {
    fail_with(a, "Error", "a step needs a non-empty name");
    *rc = DURO_ERROR;
    return 1;
  }
  *key = next_key(a, name, count);
  *s = strmap_get(&a->steps, *key);
  const journal_step *there = idmap_get(&a->by_seq, a->seq);
  if (there != *s || (*s && (*s)->type != type)) {
    *rc = diverge(a, there ? there : *s, *key, type);
    *s = NULL;
    return 1;
  }
  return 0;
}

/* Whether a new step would cross the workflow's limits.steps (every kind
 * counts: do, sleep, waitForEvent, waitAny).  Sets the error when it would. */
int step_limit_reached(duro_step *a, const char *key) {
  /* a config reload may change the limit (duro_engine_set_limits) */
  uint32_t max = __atomic_load_n(&a->wf->limits.max_steps, __ATOMIC_RELAXED);
  if (a->n_steps < max)
    return 0;
  char *msg = xasprintf("step \"%s\" would exceed the workflow's limit "
                        "of %u steps",
                        key, max);
  fail_with(a, duro_err_name(DURO_E_STEP_LIMIT), msg);
  free(msg);
  return 1;
}

journal_step *step_new(duro_step *a, const char *key, const char *name,
                       uint32_t count, duro_step_kind type) {
  journal_step *s = arena_alloc(a, sizeof *s);
  memset(s, 0, sizeof *s);
  s->key = (char *)key;
  s->name = arena_strdup(a, name);
  s->count = count;
  s->seq = a->seq;
  s->type = type;
  s->status = DURO_STEP_WAITING;
  s->started_ms = now_ms(a);
  s->ended_ms = s->wake_ms = JOURNAL_NONE;
  strmap_put(&a->steps, s->key, s);
  a->n_steps++;
  return s;
}
