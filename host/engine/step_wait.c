/* step_wait.c — the step calls that wait: a sleep (for a duration, or
 * until a time) and a wait for an event of a type (with its timeout);
 * each suspends the activation until its wake time, and answers from the
 * journal once it is over. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "duration.h"
#include "error.h"
#include "step_internal.h"

#define DEFAULT_EVENT_TIMEOUT_MS (24LL * 3600 * 1000)

static duro_rc sleep_step(duro_step *a, const char *name, int64_t until,
                          int64_t duration, int relative) {
  const char *key;
  uint32_t count;
  journal_step *s;
  duro_rc rc;
  if (step_begin(a, name, DURO_STEP_SLEEP, &key, &count, &s, &rc) ||
      from_journal(a, s, key, NULL, &rc))
    return rc;
  int64_t now = now_ms(a);
  if (!s) {
    if (step_limit_reached(a, key))
      return DURO_ERROR;
    s = step_new(a, key, name, count, DURO_STEP_SLEEP);
    s->wake_ms = relative ? now + duration : until;
    put_step(a, s);
  }
  if (now >= s->wake_ms) {
    s->status = DURO_STEP_COMPLETE;
    s->ended_ms = now;
    put_step(a, s);
    return DURO_OK;
  }
  return suspend_until(a, s->wake_ms, NULL);
}

duro_rc step_api_sleep(duro_step *a, const char *name, const char *duration) {
  int64_t ms = 0;
  if (a->suspended)
    return DURO_SUSPEND;
  if (!duration || duration_parse(duration, &ms) != 0 ||
      ms > DURATION_MAX_SLEEP_MS) {
    char *msg = xasprintf("sleep \"%s\": invalid duration \"%s\" (at most "
                          "365 days)",
                          name ? name : "", duration ? duration : "(null)");
    fail_with(a, duro_err_name(DURO_E_INVALID_DURATION), msg);
    free(msg);
    return DURO_ERROR;
  }
  return sleep_step(a, name, 0, ms, 1);
}

duro_rc step_api_sleep_until(duro_step *a, const char *name, int64_t unix_ms) {
  if (a->suspended)
    return DURO_SUSPEND;
  int64_t now = now_ms(a);
  /* Compared so that no value of unix_ms overflows. */
  if (unix_ms > now && unix_ms - now > DURATION_MAX_SLEEP_MS) {
    fail_with(a, duro_err_name(DURO_E_INVALID_DURATION),
              "sleep_until: more than 365 days ahead");
    return DURO_ERROR;
  }
  return sleep_step(a, name, unix_ms, 0, 0);
}

static char *event_json(const journal_event *ev) {
  char ts[64];
  time_t secs = (time_t)(ev->ts_ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
           tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
           tm.tm_sec, (int)(ev->ts_ms % 1000));
  json_t *payload = json_loads(ev->payload, JSON_DECODE_ANY, NULL);
  json_t *o = json_pack("{s:s,s:o,s:s}", "type", ev->type, "payload",
                        payload ? payload : json_null(), "timestamp", ts);
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return s;
}

duro_rc step_api_wait_for_event(duro_step *a, const char *name,
                                const char *type, const char *timeout,
                                const char **event) {
  const char *key;
  uint32_t count;
  journal_step *s;
  duro_rc rc;
  if (event)
    *event = NULL;
  if (step_begin(a, name, DURO_STEP_WAIT_FOR_EVENT, &key, &count, &s, &rc) ||
      from_journal(a, s, key, event, &rc))
    return rc;
  int64_t now = now_ms(a);
  if (!s) {
    int64_t ms = DEFAULT_EVENT_TIMEOUT_MS;
    if (!type || !*type ||
        (timeout &&
         (duration_parse(timeout, &ms) != 0 || ms > DURATION_MAX_SLEEP_MS))) {
      char *msg = xasprintf("waitForEvent \"%s\": %s", key,
                            !type || !*type ? "needs an event type"
                                            : "invalid timeout");
      fail_with(a, "Error", msg);
      free(msg);
      return DURO_ERROR;
    }
    if (step_limit_reached(a, key))
      return DURO_ERROR;
    s = step_new(a, key, name, count, DURO_STEP_WAIT_FOR_EVENT);
    s->wake_ms = now + ms;
    put_step(a, s);
  }
  /* Most activations never wait for an event: load them on first need. */
  if (!a->events_loaded) {
    if (journal_events_pending(a->e->j, a->inst.rowid, &a->events,
                               &a->n_events) != 0) {
      a->storage_failed = 1;
      a->suspended = 1;
      a->reason = SUSPEND_SHUTDOWN;
      return DURO_SUSPEND;
    }
    a->consumed = xcalloc(a->n_events ? a->n_events : 1, 1);
    a->events_loaded = 1;
  }
  for (size_t i = 0; type && i < a->n_events; i++) {
    journal_event *ev = &a->events[i];
    if (a->consumed[i] || strcmp(ev->type, type) != 0)
      continue;
    a->consumed[i] = 1;
    s->status = DURO_STEP_COMPLETE;
    s->result = arena_take(a, event_json(ev));
    s->ended_ms = now;
    s->wake_ms = JOURNAL_NONE;
    put_step(a, s);
    journal_op *op = journal_batch_add(&a->batch, JOP_EVENT_CONSUME);
    op->event_seq = ev->seq;
    op->step_key = s->key;
    if (event)
      *event = s->result;
    return DURO_OK;
  }
  if (now >= s->wake_ms) {
    char buf[48];
    char *msg =
        xasprintf("waitForEvent \"%s\" timed out after %s waiting "
                  "for an event of type \"%s\"",
                  key, format_ms(buf, sizeof buf, s->wake_ms - s->started_ms),
                  type ? type : "");
    fail_with(a, DURO_ERR_TIMEOUT, msg);
    free(msg);
    s->status = DURO_STEP_ERRORED;
    s->error = (char *)a->last_error;
    s->ended_ms = now;
    s->wake_ms = JOURNAL_NONE;
    put_step(a, s);
    return DURO_ERROR;
  }
  return suspend_until(a, s->wake_ms, arena_strdup(a, type));
}
