/* chaos_fan.c — the fan-outs of `make chaos`: what a parent asks of its
 * children, and what their ends and side log records must show
 * (chaos_fan.h). */
#include "chaos_fan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_client.h"

#define MAX_KIDS 5  /* a parent's children: 2 to MAX_KIDS */
#define KID_STEPS 4 /* a child's steps: 1 to KID_STEPS */
#define TOKEN 32

/* One child: its params, its journaled results, and what its records
 * said, step by step (index 1..steps). */
typedef struct kid {
  uint8_t steps, nap_every, flaky;
  uint16_t nap_ms, hold_ms;
  uint8_t final; /* complete, its results read */
  char journal[KID_STEPS + 1][TOKEN];
  /* when the engine had the journaled result (its wall clock, ms: read
   * after the callback returned, before the commit) */
  long long ended_ms[KID_STEPS + 1];
  char seen[KID_STEPS + 1][TOKEN]; /* the first "seen" */
  uint8_t ran[KID_STEPS + 1];      /* an "exec" wrote the journaled token */
  uint8_t started[KID_STEPS + 1];  /* an "exec" of it so far */
  uint8_t open[KID_STEPS + 1];     /* an "exec" without its end yet */
} kid;

struct chaos_fan {
  int n;
  kid kid[MAX_KIDS];
};

static int rnd(unsigned *r, int n) { return (int)(rand_r(r) % n); }

chaos_fan *chaos_fan_new(unsigned *r) {
  chaos_fan *f = calloc(1, sizeof *f);
  if (!f) {
    fprintf(stderr, "chaos: out of memory\n");
    exit(2);
  }
  f->n = 2 + rnd(r, MAX_KIDS - 1);
  for (int i = 0; i < f->n; i++) {
    kid *k = &f->kid[i];
    k->steps = (uint8_t)(1 + rnd(r, KID_STEPS));
    /* naps and a failed first attempt: a child suspended in a sleep or
     * a back-off while the host is killed */
    k->nap_every = (uint8_t)(rnd(r, 3) == 0 ? 0 : 1 + rnd(r, 2));
    k->nap_ms = (uint16_t)(5 + rnd(r, 150));
    k->hold_ms = (uint16_t)rnd(r, 25);
    k->flaky = (uint8_t)(rnd(r, 10) < 3 ? 1 + rnd(r, k->steps) : 0);
  }
  return f;
}

void chaos_fan_params(const chaos_fan *f, char *buf, size_t len) {
  size_t at = (size_t)snprintf(buf, len, "{\"kids\":[");
  for (int i = 0; i < f->n && at < len; i++) {
    const kid *k = &f->kid[i];
    at += (size_t)snprintf(buf + at, len - at,
                           "%s{\"steps\":%d,\"nap_every\":%d,\"nap_ms\":%d,"
                           "\"hold_ms\":%d,\"flaky\":%d}",
                           i ? "," : "", k->steps, k->nap_every, k->nap_ms,
                           k->hold_ms, k->flaky);
  }
  if (at < len)
    snprintf(buf + at, len - at, "]}");
}

int chaos_fan_kids(const chaos_fan *f) { return f->n; }

void chaos_fan_kid_id(const char *id, int i, char *buf, size_t len) {
  snprintf(buf, len, "%s.%d", id, i);
}

void chaos_fan_final(chaos_fan *f, const char *id, json_t *d,
                     chaos_fan_figures *ff) {
  long sum = 0;
  for (int i = 0; i < f->n; i++)
    sum += f->kid[i].steps;
  json_t *out = jget(d, "output");
  if (json_integer_value(jget(out, "kids")) != f->n ||
      json_integer_value(jget(out, "sum")) != sum) {
    ff->wrong_output++;
    char *o = jdump(out);
    chaos_problem("%s: complete with output %s, want %d kids, sum %ld", id, o,
                  f->n, sum);
    free(o);
  }
  /* Exactly its children, each once: a second start under another id,
   * or a start that had to be made again, shows here. */
  int listed[MAX_KIDS] = {0};
  size_t j;
  json_t *c;
  json_array_foreach(jget(d, "children"), j, c) {
    const char *cid = jstr(c, "id");
    size_t plen = strlen(id);
    int i = -1;
    if (!strncmp(cid, id, plen) && cid[plen] == '.')
      i = atoi(cid + plen + 1);
    char want[64];
    chaos_fan_kid_id(id, i, want, sizeof want);
    if (i < 0 || i >= f->n || strcmp(cid, want) != 0 || listed[i]++) {
      ff->kids_twice++;
      chaos_problem("%s: child %s listed (again, or not one it starts)", id,
                    cid);
    }
  }
  for (int i = 0; i < f->n; i++) {
    char key[32], want[64];
    snprintf(key, sizeof key, "kid %d#1", i);
    chaos_fan_kid_id(id, i, want, sizeof want);
    const char *got = jstr(step_of(d, key), "result");
    if (strcmp(got, want) != 0) {
      ff->kids_twice++;
      chaos_problem("%s: step \"%s\" gave child \"%s\", not %s", id, key, got,
                    want);
    }
    if (!listed[i]) {
      ff->kids_lost++;
      chaos_problem("%s: child %s not among its children", id, want);
    }
  }
}

void chaos_fan_final_kid(chaos_fan *f, const char *id, int i, json_t *d,
                         chaos_fan_figures *ff) {
  kid *k = &f->kid[i];
  char kid_id[64];
  chaos_fan_kid_id(id, i, kid_id, sizeof kid_id);
  ff->kids++;
  const char *s = jstr(d, "status");
  if (strcmp(s, "complete") != 0) {
    ff->kids_lost++;
    chaos_problem("%s: child of a complete parent, but \"%s\"", kid_id,
                  d ? s : "no answer");
    return;
  }
  ff->kids_complete++;
  json_t *out = jget(d, "output");
  if (json_integer_value(jget(out, "steps")) != k->steps) {
    ff->wrong_output++;
    char *o = jdump(out);
    chaos_problem("%s: complete with output %s, want %d steps", kid_id, o,
                  k->steps);
    free(o);
  }
  k->final = 1;
  for (int s_i = 1; s_i <= k->steps; s_i++) {
    char key[16];
    snprintf(key, sizeof key, "step#%d", s_i);
    json_t *st = step_of(d, key);
    snprintf(k->journal[s_i], TOKEN, "%s", jstr(st, "result"));
    k->ended_ms[s_i] = (long long)json_integer_value(jget(st, "ended_ms"));
  }
}

void chaos_fan_record(chaos_fan *f, const char *kid_id, int i, long line,
                      const char *kind, int idx, const char *token,
                      chaos_fan_figures *ff) {
  if (i < 0 || i >= f->n || idx < 1 || idx > f->kid[i].steps) {
    chaos_problem("side log record %ld: %s has no step %d (%s %s)", line,
                  kid_id, idx, kind, token);
    return;
  }
  kid *k = &f->kid[i];
  if (!strcmp(kind, "exec")) {
    ff->execs++;
    /* A child is never restarted: one generation, its whole life.  Run
     * again after run() saw its result, or begun (its token's time) after
     * the engine had the result it journaled, wherever its record landed:
     * a run after it completed.  One begun earlier, beside the attempt
     * whose result was kept, is not. */
    long long began = chaos_token_ns(token);
    if (k->seen[idx][0]) {
      ff->reruns++;
      chaos_problem("RERUN: record %ld: child %s step %d ran (%s) after it "
                    "completed with %s",
                    line, kid_id, idx, token, k->seen[idx]);
    } else if (k->final && k->ended_ms[idx] > 0 &&
               began >= (k->ended_ms[idx] + 1) * 1000000LL) {
      ff->reruns++;
      chaos_problem("RERUN: record %ld: child %s step %d ran (%s) after the "
                    "engine had its journaled result %s (at %lld ms)",
                    line, kid_id, idx, token, k->journal[idx],
                    k->ended_ms[idx]);
    }
    ff->cut_off += k->open[idx];
    k->open[idx] = k->started[idx] = 1;
    k->ran[idx] |= k->final && !strcmp(token, k->journal[idx]);
  } else if (!strcmp(kind, "fail")) {
    k->open[idx] = 0;
  } else if (!strcmp(kind, "seen")) {
    k->open[idx] = 0;
    if (!k->started[idx]) {
      ff->unrun++;
      chaos_problem("record %ld: child %s step %d seen (%s), never run", line,
                    kid_id, idx, token);
    }
    if (!k->seen[idx][0])
      snprintf(k->seen[idx], TOKEN, "%.31s", token);
    else if (strcmp(k->seen[idx], token) != 0) {
      ff->changed++;
      chaos_problem("record %ld: child %s step %d result changed from %s to %s",
                    line, kid_id, idx, k->seen[idx], token);
    }
  } else {
    chaos_problem("side log record %ld: %s %s of child %s", line, kind, token,
                  kid_id);
  }
}

void chaos_fan_log_end(chaos_fan *f, const char *id, chaos_fan_figures *ff) {
  for (int i = 0; i < f->n; i++) {
    kid *k = &f->kid[i];
    if (!k->final)
      continue;
    char kid_id[64];
    chaos_fan_kid_id(id, i, kid_id, sizeof kid_id);
    for (int s = 1; s <= k->steps; s++) {
      const char *j = k->journal[s];
      if (!k->ran[s]) {
        ff->unrun++;
        chaos_problem("child %s step %d: the journal has %s, which no run "
                      "of it wrote",
                      kid_id, s, j);
      }
      if (k->seen[s][0] && strcmp(k->seen[s], j) != 0) {
        ff->changed++;
        chaos_problem("child %s step %d: journal has %s, run() saw %s", kid_id,
                      s, j, k->seen[s]);
      }
    }
  }
}
