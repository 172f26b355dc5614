/* step_wait.c — the step calls that wait: a sleep (for a duration, or
 * until a time), a wait for an event of a type (with its timeout) and
 * one for the first event of several types (with an absolute deadline);
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

/* "2026-01-01T00:05:00.000Z" */
static const char *iso_ms(char *buf, size_t len, int64_t ms) {
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
           (int)(ms % 1000));
  return buf;
}

static char *event_json(const journal_event *ev) {
  char ts[64];
  json_t *payload = json_loads(ev->payload, JSON_DECODE_ANY, NULL);
  json_t *o = json_pack("{s:s,s:o,s:s}", "type", ev->type, "payload",
                        payload ? payload : json_null(), "timestamp",
                        iso_ms(ts, sizeof ts, ev->ts_ms));
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return s;
}

/* The instance's unconsumed events, loaded at the first wait that looks
 * (most activations never wait for an event).  1 when they could not be
 * read: the activation stops, as after a failed write. */
static int events_load(duro_step *a) {
  if (a->events_loaded)
    return 0;
  if (journal_events_pending(a->e->j, a->inst.rowid, &a->events,
                             &a->n_events) != 0) {
    a->storage_failed = 1;
    a->suspended = 1;
    a->reason = SUSPEND_SHUTDOWN;
    return 1;
  }
  a->consumed = xcalloc(a->n_events ? a->n_events : 1, 1);
  a->events_loaded = 1;
  return 0;
}

/* Step s completes with event i, consumed in the same commit. */
static duro_rc take_event(duro_step *a, journal_step *s, size_t i, int64_t now,
                          const char **event) {
  journal_event *ev = &a->events[i];
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

/* Step s errors with a TimeoutError saying `msg` (freed here). */
static duro_rc time_out(duro_step *a, journal_step *s, int64_t now, char *msg) {
  fail_with(a, DURO_ERR_TIMEOUT, msg);
  free(msg);
  s->status = DURO_STEP_ERRORED;
  s->error = (char *)a->last_error;
  s->ended_ms = now;
  s->wake_ms = JOURNAL_NONE;
  put_step(a, s);
  return step_error_durable(a);
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
  if (events_load(a))
    return DURO_SUSPEND;
  for (size_t i = 0; type && i < a->n_events; i++)
    if (!a->consumed[i] && strcmp(a->events[i].type, type) == 0)
      return take_event(a, s, i, now, event);
  if (now >= s->wake_ms) {
    char buf[48];
    return time_out(
        a, s, now,
        xasprintf("waitForEvent \"%s\" timed out after %s waiting "
                  "for an event of type \"%s\"",
                  key, format_ms(buf, sizeof buf, s->wake_ms - s->started_ms),
                  type ? type : ""));
  }
  return suspend_until(a, s->wake_ms, arena_strdup(a, type));
}

/* ---- duro_wait_any ---- */

/* An event type a wait_any takes: what a send takes (1-100 bytes), and no
 * WAIT_ANY_SEP, which joins them in the instance's wait_type. */
#define WAIT_ANY_SEP (JOURNAL_WAIT_SEP[0])
#define EVENT_TYPE_MAX 100

/* The list of types in *list (arena, repeats dropped, in the caller's
 * order), or 0 with the error set when it is no list a wait takes. */
static int wait_any_types(duro_step *a, const char *key,
                          const char *const *types, size_t n,
                          const char ***list, size_t *n_list) {
  char *why = NULL;
  if (n == 0)
    why = xasprintf("needs at least one event type");
  else if (n > DURO_WAIT_ANY_MAX)
    why = xasprintf("%zu event types, at most %d", n, DURO_WAIT_ANY_MAX);
  else if (!types)
    why = xasprintf("types is NULL");
  for (size_t i = 0; !why && i < n; i++) {
    const char *t = types[i];
    if (!t || !*t)
      why = xasprintf("event type %zu is %s", i, t ? "empty" : "NULL");
    else if (strlen(t) > EVENT_TYPE_MAX)
      why = xasprintf("event type %zu is over %d bytes", i, EVENT_TYPE_MAX);
    else if (strchr(t, WAIT_ANY_SEP))
      why = xasprintf("event type \"%s\" has a '%c'", t, WAIT_ANY_SEP);
  }
  if (why) {
    char *msg = xasprintf("waitAny \"%s\": %s", key, why);
    fail_with(a, DURO_ERR_ERROR, msg);
    free(msg);
    free(why);
    return 0;
  }
  const char **l = arena_alloc(a, n * sizeof *l);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    size_t j = 0;
    while (j < k && strcmp(l[j], types[i]) != 0)
      j++;
    if (j == k)
      l[k++] = types[i];
  }
  *list = l;
  *n_list = k;
  return 1;
}

/* The instance's wait_type while it waits: the types joined with
 * WAIT_ANY_SEP ("approve|reject"), readable as it is, and matched whole,
 * type by type, by the journal's wakes (sqlite_write.c, pg_write.c). */
static const char *wait_any_joined(duro_step *a, const char **list, size_t n) {
  size_t len = 0;
  for (size_t i = 0; i < n; i++)
    len += strlen(list[i]) + 1;
  char *w = arena_alloc(a, len), *p = w;
  for (size_t i = 0; i < n; i++) {
    size_t l = strlen(list[i]);
    memcpy(p, list[i], l);
    p += l;
    *p++ = i + 1 < n ? WAIT_ANY_SEP : '\0';
  }
  return w;
}

/* "\"a\"", "\"a\" or \"b\"", "\"a\", \"b\" or \"c\"" (malloc'ed). */
static char *types_text(const char **list, size_t n) {
  char *text = xasprintf("\"%s\"", list[0]);
  for (size_t i = 1; i < n; i++) {
    char *more =
        xasprintf("%s%s\"%s\"", text, i + 1 < n ? ", " : " or ", list[i]);
    free(text);
    text = more;
  }
  return text;
}

duro_rc step_api_wait_any(duro_step *a, const char *name,
                          const char *const *types, size_t n,
                          int64_t deadline_ms, const char **event) {
  const char *key;
  uint32_t count;
  journal_step *s;
  duro_rc rc;
  if (event)
    *event = NULL;
  if (step_begin(a, name, DURO_STEP_WAIT_ANY, &key, &count, &s, &rc) ||
      from_journal(a, s, key, event, &rc))
    return rc;
  const char **list;
  size_t n_list;
  if (!wait_any_types(a, key, types, n, &list, &n_list))
    return DURO_ERROR;
  int64_t now = now_ms(a);
  if (!s) {
    /* Compared so that no deadline overflows. */
    if (deadline_ms > now && deadline_ms - now > DURATION_MAX_SLEEP_MS) {
      char *msg = xasprintf("waitAny \"%s\": its deadline is more than 365 "
                            "days ahead",
                            key);
      fail_with(a, duro_err_name(DURO_E_INVALID_DURATION), msg);
      free(msg);
      return DURO_ERROR;
    }
    if (step_limit_reached(a, key))
      return DURO_ERROR;
    s = step_new(a, key, name, count, DURO_STEP_WAIT_ANY);
    /* journaled now: a replay waits for this deadline, whatever the code
     * passes then */
    s->wake_ms = deadline_ms > 0 ? deadline_ms : now + DEFAULT_EVENT_TIMEOUT_MS;
    put_step(a, s);
  }
  if (events_load(a))
    return DURO_SUSPEND;
  /* the earliest event of any listed type, even past the deadline */
  for (size_t i = 0; i < a->n_events; i++) {
    if (a->consumed[i])
      continue;
    for (size_t t = 0; t < n_list; t++)
      if (strcmp(a->events[i].type, list[t]) == 0)
        return take_event(a, s, i, now, event);
  }
  if (now >= s->wake_ms) {
    char at[64];
    char *which = types_text(list, n_list);
    char *msg = xasprintf("waitAny \"%s\" timed out at its deadline %s "
                          "waiting for an event of type %s",
                          key, iso_ms(at, sizeof at, s->wake_ms), which);
    free(which);
    return time_out(a, s, now, msg);
  }
  return suspend_until(a, s->wake_ms, wait_any_joined(a, list, n_list));
}
