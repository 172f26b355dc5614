/* consumer_register.c — the engine-run consumers registered: a queue's
 * no-code consumer (a workflow, the id at a JSON pointer of the body) or
 * push consumer (a plugin's handler and its batch options), replaced by a
 * reload or removed, and a queue's consumer settings as GET /queues shows
 * them. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "consumer_internal.h"
#include "core.h"
#include "json_pointer.h"
#include "queue_internal.h"

static struct queue_consumers *consumers(duro_engine *e) {
  queue_state *s = queue_state_of(e);
  pthread_mutex_lock(&s->mu);
  if (!s->consumers) {
    struct queue_consumers *c = xcalloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    engine_cond_init(&c->idle); /* stop's monotonic grace */
    __atomic_store_n(&s->consumers, c, __ATOMIC_RELEASE);
  }
  struct queue_consumers *c = s->consumers;
  pthread_mutex_unlock(&s->mu);
  return c;
}

/* Adds or replaces the queue's consumer with `c` (taken). */
static void consumer_put(duro_engine *e, wf_consumer c) {
  struct queue_consumers *cs = consumers(e);
  pthread_mutex_lock(&cs->mu);
  wf_consumer *old = NULL;
  for (size_t i = 0; i < cs->n && !old; i++)
    if (!strcmp(cs->v[i].queue, c.queue))
      old = &cs->v[i];
  if (old) {
    c.in_flight = old->in_flight;
    consumer_clear(old);
  } else {
    cs->v = xrealloc(cs->v, (cs->n + 1) * sizeof *cs->v);
    old = &cs->v[cs->n++];
  }
  *old = c;
  pthread_mutex_unlock(&cs->mu);
}

int duro_queue_consume_workflow(duro_engine *e, const char *queue,
                                const char *workflow, const char *id_from,
                                uint32_t max_batch_size) {
  if (!workflow || !*workflow || !duro_json_pointer_valid(id_from) ||
      max_batch_size > DURO_QUEUE_MAX_BATCH)
    return DURO_E_INVALID_ARGUMENT;
  if (!duro_queue_exists(e, queue))
    return DURO_E_QUEUE_NOT_FOUND;
  consumer_put(e, (wf_consumer){.queue = xstrdup(queue),
                                .workflow = xstrdup(workflow),
                                .id_from = xstrdup(id_from),
                                .batch = max_batch_size ? max_batch_size
                                                        : DEFAULT_BATCH});
  return 0;
}

int duro_queue_consume(duro_engine *e, const char *queue, duro_queue_fn handler,
                       const duro_queue_consumer_opts *opt) {
  duro_queue_consumer_opts o = opt ? *opt : (duro_queue_consumer_opts){0};
  if (!handler || o.max_batch_size > DURO_QUEUE_MAX_BATCH ||
      o.max_batch_timeout_ms < 0 || o.visibility_ms < 0 ||
      o.visibility_ms > DURO_QUEUE_MAX_DELAY_MS ||
      (o.concurrency_key && (!duro_json_pointer_valid(o.concurrency_key) ||
                             o.concurrency_limit == 0)))
    return DURO_E_INVALID_ARGUMENT;
  if (!duro_queue_exists(e, queue))
    return DURO_E_QUEUE_NOT_FOUND;
  o.max_batch_size = o.max_batch_size ? o.max_batch_size : DEFAULT_BATCH;
  o.max_concurrency = o.max_concurrency ? o.max_concurrency : 250;
  char *key = o.concurrency_key ? xstrdup(o.concurrency_key) : NULL;
  o.concurrency_key = key;
  o.concurrency_limit = key ? o.concurrency_limit : 0;
  consumer_put(e, (wf_consumer){.queue = xstrdup(queue),
                                .plugin = o.plugin ? xstrdup(o.plugin) : NULL,
                                .key = key,
                                .batch = o.max_batch_size,
                                .handler = handler,
                                .handler_ctx = o.handler_ctx,
                                .opt = o});
  return 0;
}

int duro_queue_unconsume(duro_engine *e, const char *queue) {
  struct queue_consumers *cs = consumers(e);
  int rc = DURO_E_QUEUE_NOT_FOUND;
  pthread_mutex_lock(&cs->mu);
  for (size_t i = 0; i < cs->n && rc; i++)
    if (!strcmp(cs->v[i].queue, queue)) {
      /* batches in its handler still count in `running` */
      consumer_clear(&cs->v[i]);
      cs->v[i] = cs->v[--cs->n];
      rc = 0;
    }
  pthread_mutex_unlock(&cs->mu);
  return rc;
}

const char *duro_queue_consumer_kind_name(duro_queue_consumer_kind k) {
  static const char *const names[] = {
      [DURO_QUEUE_CONSUMER_WORKFLOW] = "workflow",
      [DURO_QUEUE_CONSUMER_HANDLER] = "handler",
  };
  return (unsigned)k < sizeof names / sizeof *names ? names[k] : NULL;
}

void duro_queue_consumer_settings_free(duro_queue_consumer_settings *s) {
  if (!s)
    return;
  free(s->workflow);
  free(s->id_from);
  free(s->concurrency_key);
  *s = (duro_queue_consumer_settings){0};
}

int queue_consumer_settings(duro_engine *e, const char *queue,
                            duro_queue_consumer_settings *out) {
  struct queue_consumers *cs = consumers(e);
  *out = (duro_queue_consumer_settings){0};
  pthread_mutex_lock(&cs->mu);
  for (size_t i = 0; i < cs->n && !out->kind; i++) {
    const wf_consumer *c = &cs->v[i];
    if (strcmp(c->queue, queue) != 0)
      continue;
    out->max_batch_size = c->batch;
    if (c->workflow) {
      out->kind = DURO_QUEUE_CONSUMER_WORKFLOW;
      out->workflow = xstrdup(c->workflow);
      out->id_from = xstrdup(c->id_from);
    } else {
      out->kind = DURO_QUEUE_CONSUMER_HANDLER;
      out->max_batch_timeout_ms = c->opt.max_batch_timeout_ms;
      out->max_concurrency = c->opt.max_concurrency;
      out->visibility_timeout_ms = c->opt.visibility_ms
                                       ? c->opt.visibility_ms
                                       : DURO_QUEUE_DEFAULT_VISIBILITY_MS;
      out->concurrency_key = c->key ? xstrdup(c->key) : NULL;
      out->concurrency_limit = c->opt.concurrency_limit;
    }
  }
  pthread_mutex_unlock(&cs->mu);
  return out->kind != DURO_QUEUE_CONSUMER_NONE;
}
