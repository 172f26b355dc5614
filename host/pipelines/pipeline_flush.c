/* pipeline_flush.c — the flusher, exactly once across crashes:
 *
 *   (a) the next batch [first, last] is chosen (whole sends up to roll_size
 *       bytes, once that many wait or the oldest waited roll_interval)
 *       and its plan committed in the journal before anything is written;
 *   (b) its file is written (pipeline_file.c: temporary, synced, renamed
 *       to the name the plan's seqs make, its directory synced), or its
 *       object uploaded (pipeline_s3.c: a PUT to the key the plan's seqs
 *       make, answered 2xx);
 *   (c) "done" is committed: the plan's records deleted, counted written,
 *       the plan cleared.
 *
 * A crash after (a) leaves the plan: the next pass (after a restart, or
 * another host once the plan's lease ran out) carries it out again with
 * the same records, the same name and the same bytes, replacing a file
 * that (b) may have renamed already; no record is in a second file, since
 * a record belongs to one plan and is deleted only by its "done".  On a
 * shared store a plan is claimed in the journal (JOP_PIPELINE_CLAIM)
 * before it is worked on, so one host at a time writes a pipeline.
 *
 * A write that failed (a full disk, an endpoint down) leaves its plan and
 * is tried again after a back-off, 1 s doubling up to max_retry_delay
 * (60 s unless the config says), so that a sink that is down is neither
 * hammered nor spun on; the records sent meanwhile wait in the journal,
 * up to max_backlog. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "core.h"
#include "log.h"
#include "pipeline_internal.h"

/* Commits one pipeline op of `kind`; its out_rowid, or -1 on failure. */
static int64_t commit_op(journal *j, journal_op_kind kind, const pipeline *p,
                         int64_t first, int64_t last, int64_t at,
                         int64_t until) {
  journal_batch b = {0};
  journal_op *op = journal_batch_add(&b, kind);
  op->queue = p->name;
  op->from_seq = first;
  op->event_seq = last;
  op->rowid = journal_host(j);
  op->ts_ms = at;
  op->visible_ms = until;
  int rc = journal_commit(j, &b);
  int64_t r = rc ? -1 : b.ops[0].out_rowid;
  journal_batch_free(&b);
  return r;
}

/* The batch from the first send waiting: whole sends while their bytes
 * fit in roll_size, at least one (a file passes roll_size by less than a
 * send), so that a batch's records are whole rows of the journal. */
typedef struct span {
  int64_t first, last, bytes, max;
  size_t n; /* sends taken */
} span;

static int take(void *ctx, const journal_pipeline_send *send) {
  span *s = ctx;
  if (s->first && s->bytes + send->bytes > s->max)
    return 1;
  if (!s->first)
    s->first = send->first;
  s->last = send->last;
  s->bytes += send->bytes;
  s->n++;
  return 0;
}

static int choose(journal *j, const pipeline *p, span *s) {
  *s = (span){.max = p->o.roll_size};
  int64_t from = 0;
  for (;;) {
    size_t before = s->n;
    if (journal_pipeline_sends(j, p->name, from, INT64_MAX, PIPELINE_PAGE, 0,
                               take, s) != 0)
      return -1;
    /* a page not taken whole: full, or the last sends */
    if (s->n - before < PIPELINE_PAGE)
      return 0;
    from = s->last + 1;
  }
}

/* (b) and (c) of a plan this host holds. */
static int carry_out(duro_engine *e, pipeline *p, int64_t first, int64_t last,
                     int64_t plan_ms) {
  journal *j = engine_journal(e);
  char err[1024];
  int rc =
      p->o.s3.endpoint
          ? pipeline_s3_put_batch(j, p, first, last, plan_ms,
                                  &pipeline_state_of(e)->stop, err, sizeof err)
          : pipeline_write_batch(j, p, first, last, plan_ms, err, sizeof err);
  if (rc != 0) {
    log_error("pipeline %s: batch %" PRId64 "-%" PRId64 ": %s", p->name, first,
              last, err);
    pipeline_set_error(p, err);
    return -1;
  }
  int64_t done =
      commit_op(j, JOP_PIPELINE_DONE, p, first, last, engine_now(e), 0);
  if (done < 0) {
    snprintf(err, sizeof err,
             "cannot record batch %" PRId64 "-%" PRId64 " written: %s", first,
             last, journal_errmsg(j));
    pipeline_set_error(p, err);
    return -1;
  }
  /* 0: another host took the plan over and did it (the same file). */
  pipeline_set_error(p, NULL);
  return done > 0;
}

int pipeline_flush(duro_engine *e, pipeline *p, int64_t now, int64_t *next_ms) {
  journal *j = engine_journal(e);
  journal_pipeline st;
  *next_ms = INT64_MAX;
  if (journal_pipeline_get(j, p->name, &st) != 0)
    return -1;
  if (st.plan_first) {
    int64_t claimed = commit_op(j, JOP_PIPELINE_CLAIM, p, 0, 0, now,
                                now + PIPELINE_PLAN_LEASE_MS);
    if (claimed <= 0) { /* another host's, for now */
      *next_ms = st.plan_until;
      return claimed < 0 ? -1 : 0;
    }
    return carry_out(e, p, st.plan_first, st.plan_last, st.plan_ms);
  }
  if (st.backlog == 0)
    return 0;
  int64_t due_at = st.oldest_ms + p->o.roll_interval_ms;
  if (st.backlog_bytes < p->o.roll_size && now < due_at) {
    *next_ms = due_at;
    return 0;
  }
  span s;
  if (choose(j, p, &s) != 0)
    return -1;
  if (!s.first)
    return 0;
  int64_t planned = commit_op(j, JOP_PIPELINE_PLAN, p, s.first, s.last, now,
                              now + PIPELINE_PLAN_LEASE_MS);
  if (planned <= 0) /* another host planned first: the next pass sees it */
    return planned < 0 ? -1 : 0;
  return carry_out(e, p, s.first, s.last, now);
}

int64_t pipeline_flush_all(duro_engine *e, pipeline_state *s, int rounds,
                           size_t *files) {
  int64_t due = INT64_MAX;
  for (size_t i = 0; s && i < s->n; i++) {
    if (__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE))
      break; /* the host is stopping: no new write */
    pipeline *p = &s->v[i];
    int64_t next = INT64_MAX;
    pthread_mutex_lock(&p->flush_mu);
    for (int k = 0; k < rounds; k++) {
      if (engine_now(e) < p->retry_at) { /* backing off */
        next = p->retry_at;
        break;
      }
      int rc = pipeline_flush(e, p, engine_now(e), &next);
      if (rc < 0) {
        p->retry_ms = p->retry_ms ? p->retry_ms * 2 : PIPELINE_RETRY_MIN_MS;
        if (p->retry_ms > p->o.max_retry_delay_ms)
          p->retry_ms = p->o.max_retry_delay_ms;
        p->retry_at = engine_now(e) + p->retry_ms;
        next = p->retry_at;
        break;
      }
      p->retry_ms = p->retry_at = 0;
      if (rc == 0)
        break;
      *files += (size_t)rc;
      next = engine_now(e); /* more may be due at once */
    }
    pthread_mutex_unlock(&p->flush_mu);
    if (next < due)
      due = next;
  }
  return due;
}

size_t duro_pipelines_dispatch(duro_engine *e) {
  size_t files = 0;
  pipeline_flush_all(e, pipeline_state_of(e), 100, &files);
  return files;
}
