/* journal_seal.c — the journal's values sealed on their way to the
 * backend and opened on their way back (journal_seal.h).  Each value's
 * scope is what both its write and its reads know of its row: the
 * instance's rowid (and a step's key), or for params the workflow, since
 * an instance's insert (and a debounce's merge) writes them before the
 * store numbers it; a queue message's none, since dead-lettering moves it
 * to another queue. */
#include "journal_seal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "clock.h"
#include "duro.h"
#include "log.h"
#include "util.h"

static void *own(journal_sealed *s, void *p) {
  if (s->n_mem == s->cap_mem) {
    s->cap_mem = s->cap_mem ? 2 * s->cap_mem : 8;
    s->mem = xrealloc(s->mem, s->cap_mem * sizeof *s->mem);
  }
  s->mem[s->n_mem++] = p;
  return p;
}

static const char *seal(const journal_crypt *c, journal_sealed *s,
                        journal_field f, int64_t rowid, const char *name,
                        const char *plain) {
  return plain ? own(s, journal_crypt_seal(c, f, rowid, name, plain)) : NULL;
}

static void seal_op(const journal_crypt *c, journal_sealed *s, journal_op *op) {
  switch (op->kind) {
  case JOP_INSTANCE_INSERT:
  case JOP_INSTANCE_RESCHEDULE:
  case JOP_INSTANCE_SET: {
    journal_instance *in = own(s, xmalloc(sizeof *in));
    *in = *op->inst;
    if (op->kind == JOP_INSTANCE_SET) {
      in->output =
          (char *)seal(c, s, JOURNAL_FIELD_OUTPUT, in->rowid, NULL, in->output);
      in->error =
          (char *)seal(c, s, JOURNAL_FIELD_ERROR, in->rowid, NULL, in->error);
    } else {
      in->params =
          (char *)seal(c, s, JOURNAL_FIELD_PARAMS, 0, in->workflow, in->params);
    }
    op->inst = in;
    break;
  }
  case JOP_STEP_PUT: {
    journal_step *st = own(s, xmalloc(sizeof *st));
    *st = *op->step;
    st->result = (char *)seal(c, s, JOURNAL_FIELD_STEP_RESULT, op->rowid,
                              st->key, st->result);
    st->error = (char *)seal(c, s, JOURNAL_FIELD_STEP_ERROR, op->rowid, st->key,
                             st->error);
    op->step = st;
    break;
  }
  case JOP_ATTEMPT_PUT:
    op->attempt.error = seal(c, s, JOURNAL_FIELD_ATTEMPT_ERROR, op->rowid,
                             op->attempt.key, op->attempt.error);
    break;
  case JOP_EVENT_INSERT:
    op->event_payload =
        seal(c, s, JOURNAL_FIELD_EVENT, op->rowid, NULL, op->event_payload);
    break;
  case JOP_LOG_APPEND:
    op->body = seal(c, s, JOURNAL_FIELD_LOG, op->rowid, NULL, op->body);
    break;
  case JOP_MESSAGE_INSERT:
    op->body = seal(c, s, JOURNAL_FIELD_MESSAGE, 0, NULL, op->body);
    break;
  case JOP_MESSAGE_RETRY:
    op->error = seal(c, s, JOURNAL_FIELD_MESSAGE_ERROR, 0, NULL, op->error);
    break;
  default:
    break;
  }
  op->crypt = c; /* a keyed lease opens the bodies it reads keys from */
}

void journal_seal_batch(const journal_crypt *c, const journal_batch *b,
                        journal_sealed *out) {
  *out = (journal_sealed){0};
  out->ops = xmalloc(b->n * sizeof *out->ops);
  memcpy(out->ops, b->ops, b->n * sizeof *out->ops);
  for (size_t i = 0; i < b->n; i++)
    seal_op(c, out, &out->ops[i]);
}

void journal_sealed_free(journal_sealed *s) {
  for (size_t i = 0; i < s->n_mem; i++)
    free(s->mem[i]);
  free(s->mem);
  free(s->ops);
  *s = (journal_sealed){0};
}

int journal_open_value(const journal_crypt *c, journal_field f, int64_t rowid,
                       const char *name, char **v) {
  if (!journal_crypt_sealed(*v))
    return 0;
  char err[200], where[160], *plain;
  if (journal_crypt_open(c, f, rowid, name, *v, &plain, err, sizeof err)) {
    /* params are bound to their workflow, messages to nothing */
    if (f == JOURNAL_FIELD_PARAMS)
      snprintf(where, sizeof where, "the params of an instance of %s", name);
    else if (rowid)
      snprintf(where, sizeof where, "instance %lld", (long long)rowid);
    else
      snprintf(where, sizeof where, "a queue message");
    store_error("%s: %s", where, err);
    /* A read's caller may answer only "storage error": the host's log
     * names the key, at most once a second however many reads meet it. */
    static _Atomic int64_t logged_ms;
    int64_t now = clock_mono_ms(), then = logged_ms;
    if (now - then >= 1000 &&
        atomic_compare_exchange_strong(&logged_ms, &then, now))
      log_error("%s: %s (storage.encryption)", where, err);
    return DURO_E_STORAGE;
  }
  free(*v);
  *v = plain;
  return 0;
}

void journal_note_parked(const char *queue, int64_t seq, const char *stored) {
  static _Atomic int64_t logged_ms;
  int64_t now = clock_mono_ms(), then = logged_ms;
  if (then && now - then < 10000)
    return;
  if (!atomic_compare_exchange_strong(&logged_ms, &then, now))
    return;
  char id[JOURNAL_CRYPT_ID_MAX + 1] = "?";
  journal_crypt_key_of(stored, id);
  log_error("queue %s: message %lld is encrypted under key \"%s\", which "
            "storage.encryption.keys does not list: kept, not delivered, "
            "looked at again every %d s until the key is listed",
            queue, (long long)seq, id, JOURNAL_PARKED_MS / 1000);
}

void journal_seal_results(const journal_crypt *c, journal_op *op,
                          const journal_op *s) {
  op->rc = s->rc;
  op->out_rowid = s->out_rowid;
  op->out_owner = s->out_owner;
  op->messages = s->messages;
  op->n_messages = s->n_messages;
  size_t kept = 0;
  for (size_t i = 0; i < op->n_messages; i++) {
    journal_message *m = &op->messages[i];
    char err[200], *body = NULL, *last_error = NULL;
    if (journal_crypt_open(c, JOURNAL_FIELD_MESSAGE, 0, NULL, m->body, &body,
                           err, sizeof err) != 0 ||
        journal_crypt_open(c, JOURNAL_FIELD_MESSAGE_ERROR, 0, NULL,
                           m->last_error, &last_error, err, sizeof err) != 0) {
      log_error("queue %s: message %lld left leased, not delivered: %s",
                m->queue ? m->queue : "?", (long long)m->seq, err);
      free(body);
      free(m->queue);
      free(m->body);
      free(m->lease);
      free(m->last_error);
      free(m->traceparent);
      continue;
    }
    if (body) {
      free(m->body);
      m->body = body;
    }
    if (last_error) {
      free(m->last_error);
      m->last_error = last_error;
    }
    op->messages[kept++] = *m;
  }
  op->n_messages = kept;
}

int journal_open_instance(const journal_crypt *c, journal_instance *in) {
  int rc =
      journal_open_value(c, JOURNAL_FIELD_PARAMS, 0, in->workflow, &in->params);
  if (rc == 0)
    rc = journal_open_value(c, JOURNAL_FIELD_OUTPUT, in->rowid, NULL,
                            &in->output);
  if (rc == 0)
    rc =
        journal_open_value(c, JOURNAL_FIELD_ERROR, in->rowid, NULL, &in->error);
  return rc;
}

int journal_open_steps(const journal_crypt *c, int64_t rowid,
                       journal_step *steps, size_t n) {
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    rc = journal_open_value(c, JOURNAL_FIELD_STEP_RESULT, rowid, steps[i].key,
                            &steps[i].result);
    if (rc == 0)
      rc = journal_open_value(c, JOURNAL_FIELD_STEP_ERROR, rowid, steps[i].key,
                              &steps[i].error);
  }
  return rc;
}

int journal_open_events(const journal_crypt *c, int64_t rowid,
                        journal_event *ev, size_t n) {
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++)
    rc =
        journal_open_value(c, JOURNAL_FIELD_EVENT, rowid, NULL, &ev[i].payload);
  return rc;
}

int journal_open_logs(const journal_crypt *c, int64_t rowid, journal_log *v,
                      size_t n) {
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++)
    rc = journal_open_value(c, JOURNAL_FIELD_LOG, rowid, NULL, &v[i].message);
  return rc;
}

int journal_open_messages(const journal_crypt *c, journal_message *m,
                          size_t n) {
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    rc = journal_open_value(c, JOURNAL_FIELD_MESSAGE, 0, NULL, &m[i].body);
    if (rc == 0)
      rc = journal_open_value(c, JOURNAL_FIELD_MESSAGE_ERROR, 0, NULL,
                              &m[i].last_error);
  }
  return rc;
}
