/* lifecycle.c — an instance's lifecycle published to a queue: a workflow
 * declared with `lifecycle_queue: Q` gets a message on Q when one of its
 * instances starts, completes, errors or is terminated.  The queue
 * driver's instance_changed hook (driver.h).
 *
 * The message is inserted in the same transaction as the status change
 * it reports, wherever the engine writes that change (an activation's
 * final commit, a terminate of an idle instance, a crash or hang
 * recorded): a consumer sees each change exactly once, never one that
 * was rolled back, and never misses one that was committed — which a
 * broker beside the database could not promise.  A restart (--from) runs
 * the instance again, so it starts again. */
#include "queue_driver.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "queue.h"
#include "util.h"

static void add_message(journal_batch *b, const char *queue, char *body,
                        int64_t now) {
  journal_op *op = journal_batch_add(b, JOP_MESSAGE_INSERT);
  op->queue = queue;
  op->body = journal_batch_own(b, body);
  op->ts_ms = now;
  op->visible_ms = now;
}

/* {"type", "workflow", "instance_id", "ts_ms", "output"? | "error"?}: the
 * output of a complete instance or the error of an errored one goes along
 * when it fits in a message; `ended` says whether it is an end's message
 * (its type the status), or the start's. */
static char *body_of(const char *type, int ended, const journal_instance *row,
                     int64_t now) {
  json_t *o =
      json_pack("{ss,ss,ss,sI}", "type", type, "workflow", row->workflow,
                "instance_id", row->id, "ts_ms", (json_int_t)now);
  const char *key = NULL, *text = NULL;
  if (ended && row->status == DURO_STATUS_COMPLETE)
    key = "output", text = row->output;
  else if (ended && row->status == DURO_STATUS_ERRORED)
    key = "error", text = row->error;
  char *body = NULL;
  if (text) {
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    if (v)
      json_object_set_new(o, key, v);
    body = json_dumps(o, JSON_COMPACT);
    if (body && strlen(body) > DURO_QUEUE_MAX_BODY) {
      free(body);
      json_object_del(o, key);
      json_object_set_new(o, "truncated", json_true());
      body = NULL;
    }
  }
  if (!body)
    body = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return body;
}

void queue_lifecycle_changed(duro_engine *e, void *state, journal_batch *b,
                             const journal_instance *row,
                             const duro_workflow_limits *limits,
                             duro_status from_status, int64_t from_started_ms,
                             int64_t now) {
  (void)e;
  (void)state;
  const char *queue = limits ? limits->lifecycle_queue : NULL;
  if (!queue)
    return;
  if (from_started_ms == JOURNAL_NONE && row->started_ms != JOURNAL_NONE)
    add_message(b, queue, body_of("started", 0, row, now), now);
  if (duro_status_ended(row->status) && from_status != row->status)
    add_message(b, queue, body_of(duro_status_name(row->status), 1, row, now),
                now);
}
