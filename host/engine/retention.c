/* retention.c — how long an ended instance is kept: its create's own
 * retention, for whatever end, or else its workflow's for the way it
 * ended (complete, errored, terminated), chosen when it ends.
 *
 * The journal has one column for it (retention_ms), which the sweep
 * reads once the instance has ended (ended_ms + retention_ms, on an
 * index).  Whether the create gave its own is kept in that column's
 * lowest bit, so that no end or restart loses it: set, the create's own;
 * clear, its workflow's, written again at each end for the way it ended.
 * A value of the other parity is kept a millisecond longer (never
 * shorter): an even own retention, an odd workflow's. */
#include "engine_internal.h"

#define OWN_BIT 1

/* ms as a workflow's retention: even, at least ms. */
static int64_t workflow_parity(int64_t ms) {
  return (ms + 1) & ~(int64_t)OWN_BIT;
}

int64_t engine_retention_at_create(const wf_reg *wf, int64_t own_ms) {
  if (own_ms >= 0)
    return own_ms | OWN_BIT;
  /* until it ends: what an older host would keep it for, should one end
   * it */
  return workflow_parity(
      __atomic_load_n(&wf->limits.retention_ms, __ATOMIC_RELAXED));
}

/* The workflow's retention for an instance that ended `status`. */
static int64_t workflow_retention(const wf_reg *wf, duro_status status) {
  const duro_workflow_limits *l = &wf->limits;
  int64_t ms = 0;
  if (status == DURO_STATUS_ERRORED)
    ms = __atomic_load_n(&l->retention_errored_ms, __ATOMIC_RELAXED);
  else if (status == DURO_STATUS_TERMINATED)
    ms = __atomic_load_n(&l->retention_terminated_ms, __ATOMIC_RELAXED);
  if (ms <= 0)
    ms = __atomic_load_n(&l->retention_ms, __ATOMIC_RELAXED);
  return ms;
}

void engine_retention_ops(const wf_reg *wf, journal_batch *b,
                          const journal_instance *row,
                          duro_status from_status) {
  if (!wf || !duro_status_ended(row->status) ||
      duro_status_ended(from_status) || (row->retention_ms & OWN_BIT))
    return;
  journal_op *op = journal_batch_add(b, JOP_INSTANCE_RETAIN);
  op->rowid = row->rowid;
  op->ts_ms = workflow_parity(workflow_retention(wf, row->status));
}
