/* chaos_par.c — the parallel steps and rollbacks of `make chaos`: what an
 * instance of class Par is asked to do, and what its end, its journal and
 * its side log records must show (chaos_par.h). */
#include "chaos_par.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos_fan.h" /* chaos_problem, chaos_token_ns */
#include "http_client.h"

#define PAR_MAX 6     /* branches: 3 to PAR_MAX */
#define SAGA_MAX 3    /* saga steps: 1 to SAGA_MAX */
#define SAGA_INDEX 10 /* saga#j's side log index: SAGA_INDEX + j */
#define DOOM_INDEX 20
/* slots: 1..PAR_MAX the branches, then the saga steps, then doom */
#define DOOM_SLOT (PAR_MAX + SAGA_MAX + 1)
#define SLOTS (DOOM_SLOT + 1)
#define TOKEN 32

/* One branch or step: what the journal says, what its records said, and
 * the same of its rollback. */
typedef struct pstep {
  char key[24];
  uint8_t final;       /* its row was read */
  char journal[TOKEN]; /* its result's token */
  /* when the engine had its end (its wall clock, ms: read after the
   * callback returned, before the commit) */
  long long ended_ms;
  char seen[TOKEN];                     /* the first "seen" */
  uint8_t ran, started, open;           /* as chaos_fan.c's */
  uint8_t has_rb;                       /* it carries a rollback */
  uint8_t rb_final;                     /* its rollback's row was read */
  char rb_journal[TOKEN];               /* the rollback's result's token */
  long long rb_started_ms, rb_ended_ms; /* the rollback step's */
  uint8_t rb_ran, rb_open;
} pstep;

struct chaos_par {
  uint8_t n, in_flight, saga, branch_undo, explicit_rb, undo_final;
  uint16_t hold[PAR_MAX], saga_hold, undo_ms;
  uint32_t flaky, undo_flaky; /* bit <index> */
  /* the slots whose rollbacks run, in the order they must: newest first */
  uint8_t order[SLOTS], n_order;
  pstep st[SLOTS];
};

static int rnd(unsigned *r, int n) { return (int)(rand_r(r) % n); }

static int index_of(int slot) {
  return slot <= PAR_MAX    ? slot
         : slot < DOOM_SLOT ? SAGA_INDEX + slot - PAR_MAX
                            : DOOM_INDEX;
}

/* The slot of side log index `idx` in p, or -1 when p has no such step. */
static int slot_of(const chaos_par *p, int idx) {
  if (idx >= 1 && idx <= p->n)
    return idx;
  if (idx > SAGA_INDEX && idx <= SAGA_INDEX + p->saga)
    return PAR_MAX + idx - SAGA_INDEX;
  if (idx == DOOM_INDEX && p->saga)
    return DOOM_SLOT;
  return -1;
}

chaos_par *chaos_par_new(unsigned *r) {
  chaos_par *p = calloc(1, sizeof *p);
  if (!p) {
    fprintf(stderr, "chaos: out of memory\n");
    exit(2);
  }
  p->n = (uint8_t)(3 + rnd(r, PAR_MAX - 2));
  for (int k = 1; k <= p->n; k++) {
    /* Some hold long, so that kills land inside the fan-out. */
    int c = rnd(r, 4);
    p->hold[k - 1] = (uint16_t)(c == 0   ? 0
                                : c == 3 ? 100 + rnd(r, 200)
                                         : rnd(r, 40));
    if (rnd(r, 4) == 0)
      p->flaky |= 1u << k; /* a back-off beside the others */
  }
  p->in_flight = (uint8_t)(rnd(r, 4) == 0 ? 2 : 0);
  p->saga = (uint8_t)(rnd(r, 2) ? 1 + rnd(r, SAGA_MAX) : 0);
  p->saga_hold = (uint16_t)rnd(r, 60);
  if (!p->saga)
    return p;
  p->branch_undo = (uint8_t)rnd(r, 2);
  p->undo_ms = (uint16_t)(20 + rnd(r, 150));
  p->explicit_rb = (uint8_t)(rnd(r, 3) == 0);
  /* Newest first: the saga steps from the last, then the branches. */
  for (int j = p->saga; j >= 1; j--)
    p->order[p->n_order++] = (uint8_t)(PAR_MAX + j);
  for (int k = p->branch_undo ? p->n : 0; k >= 1; k--)
    p->order[p->n_order++] = (uint8_t)k;
  for (int i = 0; i < p->n_order; i++) {
    p->st[p->order[i]].has_rb = 1;
    if (rnd(r, 4) == 0)
      p->undo_flaky |= 1u << index_of(p->order[i]);
  }
  /* Not with duro_rollback: its error would be the rollback's alone. */
  if (!p->explicit_rb && rnd(r, 4) == 0)
    p->undo_final = (uint8_t)index_of(p->order[rnd(r, p->n_order)]);
  return p;
}

void chaos_par_params(const chaos_par *p, char *buf, size_t len) {
  size_t at = (size_t)snprintf(buf, len, "{\"hold\":[");
  for (int k = 0; k < p->n && at < len; k++)
    at +=
        (size_t)snprintf(buf + at, len - at, "%s%d", k ? "," : "", p->hold[k]);
  if (at < len)
    snprintf(buf + at, len - at,
             "],\"flaky\":%u,\"in_flight\":%d,\"saga\":%d,\"saga_hold\":%d,"
             "\"branch_undo\":%d,\"undo_ms\":%d,\"undo_flaky\":%u,"
             "\"undo_final\":%d,\"explicit\":%d}",
             p->flaky, p->in_flight, p->saga, p->saga_hold, p->branch_undo,
             p->undo_ms, p->undo_flaky, p->undo_final, p->explicit_rb);
}

int chaos_par_may_end(const chaos_par *p, const char *status) {
  return !strcmp(status, p->saga && !p->explicit_rb ? "errored" : "complete");
}

static int contains(const char *s, const char *part) {
  return s && strstr(s, part) != NULL;
}

/* The end run() was to reach: 1 when d shows it. */
static int end_right(const chaos_par *p, const char *id, json_t *d) {
  const char *s = jstr(d, "status");
  if (!chaos_par_may_end(p, s)) {
    chaos_problem("%s: ended \"%s\", want %s", id, d ? s : "no answer",
                  p->saga && !p->explicit_rb ? "errored" : "complete");
    return 0;
  }
  json_t *out = jget(d, "output"), *err = jget(d, "error");
  if (!p->saga) {
    json_t *got = jget(out, "branches");
    int ok = json_array_size(got) == p->n;
    for (int k = 1; ok && k <= p->n; k++) {
      char key[16];
      snprintf(key, sizeof key, "branch#%d", k);
      ok = json_equal(json_array_get(got, (size_t)k - 1),
                      jget(step_of(d, key), "result"));
    }
    if (!ok) {
      char *o = jdump(out);
      chaos_problem("%s: complete with output %s, not its %d branch results "
                    "in order",
                    id, o, p->n);
      free(o);
    }
    return ok;
  }
  if (p->explicit_rb) {
    if (json_is_true(jget(out, "rolled_back")))
      return 1;
    char *o = jdump(out);
    chaos_problem("%s: complete after duro_rollback with output %s", id, o);
    free(o);
    return 0;
  }
  int ok = !strcmp(jstr(err, "name"), "NonRetryableError") &&
           contains(jstr(err, "message"), "doomed on purpose");
  json_t *rb = jget(err, "rollback");
  if (p->undo_final) {
    const pstep *f = &p->st[slot_of(p, p->undo_final)];
    ok = ok && !strcmp(jstr(rb, "step"), f->key) &&
         contains(jstr(rb, "message"), "undo refused on purpose");
  } else {
    ok = ok && rb == NULL; /* no rollback failed for good */
  }
  if (!ok) {
    char *e = jdump(err);
    chaos_problem("%s: errored with %s, want doom's error%s", id, e,
                  p->undo_final ? " and its failing rollback's" : " alone");
    free(e);
  }
  return ok;
}

/* Reads slot i's step and its rollback's from d: 0 when one is missing or
 * not as it must end. */
static int read_step(chaos_par *p, int i, const char *id, json_t *d,
                     chaos_par_figures *pf) {
  pstep *ps = &p->st[i];
  json_t *st = step_of(d, ps->key);
  const char *want = i == DOOM_SLOT ? "errored" : "complete";
  const char *s = jstr(st, "status");
  int ok = 1;
  if (strcmp(s, want) != 0) {
    chaos_problem("%s: step %s is \"%s\", want %s", id, ps->key,
                  st ? s : "missing", want);
    ok = 0;
  }
  if (st) {
    ps->final = 1;
    snprintf(ps->journal, TOKEN, "%s", jstr(st, "result.t"));
    ps->ended_ms = (long long)json_integer_value(jget(st, "ended_ms"));
  }
  if (i <= p->n)
    pf->branches++;
  if (!ps->has_rb)
    return ok;
  char key[40];
  snprintf(key, sizeof key, "%s/rollback", ps->key);
  json_t *rb = step_of(d, key);
  int fails = index_of(i) == p->undo_final;
  want = fails ? "errored" : "complete";
  s = jstr(rb, "status");
  if (strcmp(s, want) != 0 || strcmp(jstr(rb, "type"), "rollback") != 0) {
    chaos_problem("%s: rollback step %s is \"%s\" (type %s), want %s", id, key,
                  rb ? s : "missing", jstr(rb, "type"), want);
    return 0;
  }
  pf->rollbacks++;
  ps->rb_final = 1;
  ps->rb_started_ms = (long long)json_integer_value(jget(rb, "started_ms"));
  ps->rb_ended_ms = (long long)json_integer_value(jget(rb, "ended_ms"));
  if (fails)
    return ok;
  snprintf(ps->rb_journal, TOKEN, "%s", jstr(rb, "result.t"));
  if (strcmp(jstr(rb, "result.of"), ps->journal) != 0) {
    chaos_problem("%s: rollback step %s was handed %s, its step's result is "
                  "%s",
                  id, key, jstr(rb, "result.of"), ps->journal);
    return 0;
  }
  return ok;
}

void chaos_par_final(chaos_par *p, const char *id, json_t *d,
                     chaos_par_figures *pf) {
  pf->instances++;
  pf->fanouts += !p->saga;
  pf->sagas += p->saga > 0;
  pf->explicit_rb += p->explicit_rb;
  pf->rollback_failed += p->undo_final > 0;
  for (int k = 1; k <= p->n; k++)
    snprintf(p->st[k].key, sizeof p->st[k].key, "branch#%d", k);
  for (int j = 1; j <= p->saga; j++)
    snprintf(p->st[PAR_MAX + j].key, sizeof p->st[0].key, "saga#%d", j);
  if (p->saga)
    snprintf(p->st[DOOM_SLOT].key, sizeof p->st[0].key, "doom#1");
  if (!end_right(p, id, d))
    pf->wrong_end++;
  if (!d)
    return;
  int lost = 0;
  for (int i = 1; i < SLOTS; i++)
    if (p->st[i].key[0])
      lost += !read_step(p, i, id, d, pf);
  pf->lost += lost;
  /* Rollback steps of none but the steps that carry one. */
  size_t j;
  json_t *st;
  long rollbacks = 0;
  json_array_foreach(jget(d, "steps"), j, st) {
    rollbacks += !strcmp(jstr(st, "type"), "rollback");
  }
  if (rollbacks != p->n_order) {
    pf->stray++;
    chaos_problem("%s: %ld rollback steps, want %d", id, rollbacks, p->n_order);
  }
  /* After the cause, newest first, by the journal's times. */
  long long after = p->st[DOOM_SLOT].ended_ms;
  for (int i = 0; i < p->n_order; i++) {
    const pstep *ps = &p->st[p->order[i]];
    if (!ps->rb_final)
      break;
    if (ps->rb_started_ms < after) {
      pf->disorder++;
      chaos_problem("%s: rollback of %s began at %lld ms, before %s ended (at "
                    "%lld ms)",
                    id, ps->key, ps->rb_started_ms,
                    i ? "the newer step's rollback" : "the cause", after);
    }
    after = ps->rb_ended_ms;
  }
}

/* The rollback that must end before slot i's begins (the newer step's),
 * or NULL for the first. */
static const pstep *newer_rollback(const chaos_par *p, int slot) {
  for (int i = 1; i < p->n_order; i++)
    if (p->order[i] == slot)
      return &p->st[p->order[i - 1]];
  return NULL;
}

static void record_undo(chaos_par *p, int slot, const char *id, long line,
                        const char *token, chaos_par_figures *pf) {
  pstep *ps = &p->st[slot];
  if (!ps->has_rb) {
    pf->stray++;
    chaos_problem("record %ld: %s: an undo of %s (%s), which has no rollback",
                  line, id, ps->key, token);
    return;
  }
  pf->undo_execs++;
  long long began = chaos_token_ns(token);
  /* The journal's times are ms read after the callback returned: an undo
   * begun before one of them (in ns) began before that end. */
  const pstep *doom = &p->st[DOOM_SLOT], *newer = newer_rollback(p, slot);
  if (doom->final && began < doom->ended_ms * 1000000LL) {
    pf->disorder++;
    chaos_problem("record %ld: %s: undo of %s began (%s) before doom#1 "
                  "failed (at %lld ms)",
                  line, id, ps->key, token, doom->ended_ms);
  } else if (newer && newer->rb_final &&
             began < newer->rb_ended_ms * 1000000LL) {
    pf->disorder++;
    chaos_problem("record %ld: %s: undo of %s began (%s) before the rollback "
                  "of the newer %s ended (at %lld ms)",
                  line, id, ps->key, token, newer->key, newer->rb_ended_ms);
  }
  if (ps->rb_final && ps->rb_ended_ms > 0 &&
      began >= (ps->rb_ended_ms + 1) * 1000000LL) {
    pf->rb_reruns++;
    chaos_problem("RERUN: record %ld: %s: rollback of %s ran (%s) after the "
                  "engine had its end %s (at %lld ms)",
                  line, id, ps->key, token,
                  ps->rb_journal[0] ? ps->rb_journal : "(failed for good)",
                  ps->rb_ended_ms);
  }
  pf->undo_cut += ps->rb_open;
  ps->rb_open = 1;
  ps->rb_ran |= ps->rb_final && !strcmp(token, ps->rb_journal);
}

void chaos_par_record(chaos_par *p, const char *id, long line, const char *kind,
                      int idx, const char *token, chaos_par_figures *pf) {
  /* The driver's marks of a pause and a resume: a Par's pauses are
   * exercised, not judged. */
  if (!strcmp(kind, "paus") || !strcmp(kind, "resq"))
    return;
  int slot = slot_of(p, idx);
  if (slot < 0) {
    chaos_problem("side log record %ld: %s has no step %d (%s %s)", line, id,
                  idx, kind, token);
    return;
  }
  pstep *ps = &p->st[slot];
  int branch = slot <= PAR_MAX;
  if (!strcmp(kind, "exec")) {
    *(branch ? &pf->branch_execs : &pf->step_execs) += 1;
    /* Never restarted: one generation, its whole life.  Run again after
     * run() saw its result, or begun after the engine had its end (its
     * result, or doom's failure for good): a run after it ended.  One
     * begun earlier, beside the attempt that was kept, is not. */
    long long began = chaos_token_ns(token);
    if (ps->seen[0]) {
      pf->reruns++;
      chaos_problem("RERUN: record %ld: %s step %s ran (%s) after it "
                    "completed with %s",
                    line, id, ps->key, token, ps->seen);
    } else if (ps->final && ps->ended_ms > 0 &&
               began >= (ps->ended_ms + 1) * 1000000LL) {
      pf->reruns++;
      chaos_problem("RERUN: record %ld: %s step %s ran (%s) after the engine "
                    "had its end %s (at %lld ms)",
                    line, id, ps->key, token,
                    ps->journal[0] ? ps->journal : "(failed)", ps->ended_ms);
    }
    *(branch ? &pf->branch_cut : &pf->step_cut) += ps->open;
    ps->open = ps->started = 1;
    ps->ran |= ps->final && !strcmp(token, ps->journal);
  } else if (!strcmp(kind, "fail")) {
    ps->open = 0;
  } else if (!strcmp(kind, "seen")) {
    ps->open = 0;
    if (!ps->started || slot == DOOM_SLOT) {
      pf->unrun++;
      chaos_problem("record %ld: %s step %s seen (%s), never run", line, id,
                    ps->key, token);
    }
    if (!ps->seen[0])
      snprintf(ps->seen, TOKEN, "%.31s", token);
    else if (strcmp(ps->seen, token) != 0) {
      pf->changed++;
      chaos_problem("record %ld: %s step %s result changed from %s to %s", line,
                    id, ps->key, ps->seen, token);
    }
  } else if (!strcmp(kind, "undo")) {
    record_undo(p, slot, id, line, token, pf);
  } else if (!strcmp(kind, "undf")) {
    ps->rb_open = 0;
    pf->undo_failed++;
  } else {
    chaos_problem("side log record %ld: %s %s of %s", line, kind, token, id);
  }
}

void chaos_par_log_end(chaos_par *p, const char *id, chaos_par_figures *pf) {
  for (int i = 1; i < SLOTS; i++) {
    const pstep *ps = &p->st[i];
    if (ps->final && i != DOOM_SLOT && ps->journal[0] && !ps->ran) {
      pf->unrun++;
      chaos_problem("%s step %s: the journal has %s, which no run of it "
                    "wrote",
                    id, ps->key, ps->journal);
    }
    if (ps->seen[0] && strcmp(ps->seen, ps->journal) != 0) {
      pf->changed++;
      chaos_problem("%s step %s: journal has %s, run() saw %s", id, ps->key,
                    ps->journal, ps->seen);
    }
    if (ps->rb_final && ps->rb_journal[0] && !ps->rb_ran) {
      pf->unrun++;
      chaos_problem("%s rollback of %s: the journal has %s, which no undo of "
                    "it wrote",
                    id, ps->key, ps->rb_journal);
    }
  }
}

void chaos_par_print(const chaos_par_figures *pf) {
  printf("chaos: parallel steps and rollbacks: %ld instances (%ld fan-outs, "
         "%ld sagas: %ld ended by duro_rollback, %ld with a rollback failing "
         "for good); %ld branches, %ld branch executions (%ld cut off and run "
         "again), %ld saga step executions (%ld cut off); %ld rollbacks, %ld "
         "undo executions (%ld cut off and run again, %ld failed on "
         "purpose); run again after completing: %ld steps, %ld rollbacks; "
         "lost %ld, wrong ends %ld, out of order %ld, results changed %ld, "
         "never run %ld, stray %ld\n",
         pf->instances, pf->fanouts, pf->sagas, pf->explicit_rb,
         pf->rollback_failed, pf->branches, pf->branch_execs, pf->branch_cut,
         pf->step_execs, pf->step_cut, pf->rollbacks, pf->undo_execs,
         pf->undo_cut, pf->undo_failed, pf->reruns, pf->rb_reruns, pf->lost,
         pf->wrong_end, pf->disorder, pf->changed, pf->unrun, pf->stray);
}
