/* sidelog_read.c — reading the test plugins' side-effect log
 * (sidelog_read.h). */
#include "sidelog_read.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc.h"

#define RECORD 64 /* SIDELOG_RECORD of plugins/sidelog.h */

sidelog_rec *sidelog_read(const char *path, size_t *n) {
  char *text = proc_slurp(path);
  size_t len = strlen(text);
  ck_assert_msg(len % RECORD == 0, "side log %s of %zu bytes", path, len);
  *n = len / RECORD;
  sidelog_rec *recs = calloc(*n + 1, sizeof *recs);
  ck_assert_ptr_nonnull(recs);
  for (size_t i = 0; i < *n; i++) {
    sidelog_rec *r = &recs[i];
    ck_assert_msg(sscanf(text + i * RECORD, "%7s %31s %d %39s", r->kind,
                         r->inst, &r->index, r->token) == 4,
                  "bad record %zu: %.64s", i, text + i * RECORD);
  }
  free(text);
  return recs;
}

static int same_step(const sidelog_rec *a, const sidelog_rec *b) {
  return !strcmp(a->inst, b->inst) && a->index == b->index;
}

size_t sidelog_steps(const char *path, const char *kind) {
  size_t n, c = 0;
  sidelog_rec *recs = sidelog_read(path, &n);
  for (size_t i = 0; i < n; i++) {
    if (strcmp(recs[i].kind, kind) != 0)
      continue;
    int before = 0;
    for (size_t j = 0; j < i && !before; j++)
      before = !strcmp(recs[j].kind, kind) && same_step(&recs[j], &recs[i]);
    c += !before;
  }
  free(recs);
  return c;
}

/* Whether exec record r began in a process of fz before it was frozen. */
static int under_way_at_freeze(const sidelog_rec *r, const sidelog_freeze *fz,
                               size_t n_fz) {
  int pid;
  long long ns;
  if (sscanf(r->token, "%d-%lld", &pid, &ns) != 2)
    return 0;
  for (size_t k = 0; k < n_fz; k++)
    if (fz[k].pid == pid && ns < fz[k].stopped_ns)
      return 1;
  return 0;
}

void sidelog_assert_no_rerun(const char *path) {
  sidelog_assert_no_rerun_but_frozen(path, NULL, 0);
}

void sidelog_assert_no_rerun_but_frozen(const char *path,
                                        const sidelog_freeze *fz, size_t n_fz) {
  size_t n;
  sidelog_rec *recs = sidelog_read(path, &n);
  for (size_t i = 0; i < n; i++) {
    const sidelog_rec *r = &recs[i];
    const char *first_seen = NULL;
    int ran = 0;
    for (size_t j = 0; j < i; j++) {
      const sidelog_rec *q = &recs[j];
      if (!same_step(q, r))
        continue;
      if (!strcmp(q->kind, "exec"))
        ran |= !strcmp(q->token, r->token);
      else if (!first_seen)
        first_seen = q->token;
    }
    if (!strcmp(r->kind, "exec")) {
      ck_assert_msg(first_seen == NULL || under_way_at_freeze(r, fz, n_fz),
                    "record %zu: %s step %d ran again after it completed "
                    "with %s",
                    i, r->inst, r->index, first_seen);
    } else {
      ck_assert_msg(ran, "record %zu: %s step %d seen with %s, never run", i,
                    r->inst, r->index, r->token);
      ck_assert_msg(!first_seen || !strcmp(first_seen, r->token),
                    "record %zu: %s step %d result changed from %s to %s", i,
                    r->inst, r->index, first_seen, r->token);
    }
  }
  free(recs);
}
