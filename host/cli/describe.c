/* describe.c — turns the control plane's JSON into text for people: the
 * table of `duro workflows instances list` and the report of `describe`.
 *
 * The report answers "what happened to this id" in one screen: a header
 * (workflow/id, status, times as ISO 8601 UTC, params, output or error),
 * then one line per step (key, type, status, attempts, how long it took or
 * waited, its result or error or wake time) and, under each step, its
 * failed attempts, so retries show at a glance; then the events it
 * received, each with the step that took it or "pending", so an event
 * sent under a misspelt type shows as one no step takes.  Long values are
 * cut to fit
 * a screen, never silently: a line that cut something says where and how
 * much at its end ("… (cut at 97 of 5,000 bytes; --full shows all)"), and
 * `--full` cuts nothing; the full record is also `--json`.
 *
 * The module reads only what it is handed (the server's JSON and the
 * caller's clock) and never fails: a field that is missing or of another
 * type prints as "-", because a newer server may add fields and an older
 * one may lack some.  Every string from the server goes out through
 * put_cut() (describe_text() outside the report), which replaces control
 * characters, so a step error cannot move the cursor or recolour the
 * terminal. */
#include "describe.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "util.h"

#define NO_TIME INT64_MIN
#define VALUE_WIDTH 100  /* params, output and error in the header */
#define DETAIL_WIDTH 60  /* a step's result, error or wake time */
#define ERROR_WIDTH 80   /* a failed attempt's error */
#define KEY_WIDTH_MAX 40 /* the step key column */
#define ATTEMPTS_HEAD 3  /* failed attempts shown before "... N more" */
#define ATTEMPTS_TAIL 5  /* and after it */
#define PAYLOAD_WIDTH 60 /* an event's payload */
/* A line's last value is cut only when it runs past half again its
 * width: cutting 61 bytes to 59 hides more than it saves.  (A padded
 * column is cut at its width, or the columns after it would not line
 * up.) */
#define CUT_SLACK(max) ((max) / 2)

/* ---- text ---------------------------------------------------------------- */

static int utf8_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

/* Code points in `s`; the server's JSON is valid UTF-8 (jansson checks). */
static size_t text_width(const char *s) {
  size_t n = 0;
  for (; *s; s++)
    n += !utf8_continuation((unsigned char)*s);
  return n;
}

/* Bytes taken by the first `n` code points of `s`. */
static size_t prefix_bytes(const char *s, size_t n) {
  size_t i = 0;
  for (; s[i] && n; n--)
    for (i++; utf8_continuation((unsigned char)s[i]); i++)
      ;
  return i;
}

/* C0 controls, DEL and the C1 controls (U+0080-U+009F, "\xC2\x80".."\xC2\x9F"
 * in UTF-8; some terminals take U+009B as CSI) become '?'. */
static void put_clean(FILE *out, const char *s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == 0xC2 && i + 1 < len && (unsigned char)s[i + 1] <= 0x9F) {
      fputc('?', out);
      i++;
    } else {
      fputc(c < 0x20 || c == 0x7F ? '?' : c, out);
    }
  }
}

/* "5,000": byte counts people read at a glance. */
static const char *grouped(char buf[32], size_t n) {
  char digits[24];
  int len = snprintf(digits, sizeof digits, "%zu", n);
  size_t o = 0;
  for (int i = 0; i < len; i++) {
    if (i && (len - i) % 3 == 0)
      buf[o++] = ',';
    buf[o++] = digits[i];
  }
  buf[o] = '\0';
  return buf;
}

/* The report being written: where, whether values may be cut, and what
 * its current line has cut so far, which end_line() says. */
typedef struct report {
  FILE *out;
  int full;       /* cut nothing */
  char cuts[256]; /* "cut at 97 of 5,000 bytes; key cut at ..." */
} report;

/* Prints `s` (NULL prints "-") cleaned, cut to `max` code points with "…"
 * when longer (than max + CUT_SLACK(max) when unpadded; max 0, or a full
 * line: never), then pads it to `pad`; a cut is noted in rep->cuts, named
 * `what` ("" for the line's one value). */
static void put_cut(report *rep, const char *what, const char *s, size_t max,
                    size_t pad) {
  if (!s)
    s = "-";
  size_t width = text_width(s);
  if (rep->full || max < 2 || width <= max + (pad ? 0 : CUT_SLACK(max))) {
    put_clean(rep->out, s, strlen(s));
  } else {
    size_t shown = prefix_bytes(s, max - 1);
    put_clean(rep->out, s, shown);
    fputs("…", rep->out);
    width = max;
    char a[32], b[32];
    size_t used = strlen(rep->cuts);
    snprintf(rep->cuts + used, sizeof rep->cuts - used,
             "%s%s%scut at %s of %s bytes", used ? "; " : "", what,
             *what ? " " : "", grouped(a, shown), grouped(b, strlen(s)));
  }
  for (; width < pad; width++)
    fputc(' ', rep->out);
}

/* Ends the line, saying what it cut and how to see it whole. */
static void end_line(report *rep) {
  if (rep->cuts[0])
    fprintf(rep->out, " (%s; --full shows all)", rep->cuts);
  fputc('\n', rep->out);
  rep->cuts[0] = '\0';
}

void describe_text(FILE *out, const char *s, size_t max, size_t pad) {
  report rep = {.out = out};
  put_cut(&rep, "", s, max, pad);
  if (rep.cuts[0])
    fprintf(out, " (%s)", rep.cuts);
}

/* ---- values -------------------------------------------------------------- */

static const char *str_field(const json_t *o, const char *key) {
  return json_string_value(json_object_get(o, key));
}

static int64_t ms_field(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : NO_TIME;
}

static int is_set(const json_t *v) { return v && !json_is_null(v); }

static int str_eq(const char *a, const char *b) { return a && !strcmp(a, b); }

/* Compact JSON, malloc'ed; "-" when the field is absent. */
static char *json_text(const json_t *v) {
  char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  return s ? s : xstrdup("-");
}

/* The message of the engine's {name, message}, after "name: " unless the
 * name is the generic "Error" (most are; the rare TimeoutError should
 * stand out); the JSON itself for any other shape. */
static char *error_text(const json_t *err) {
  const char *name = str_field(err, "name");
  const char *message = str_field(err, "message");
  if (!message)
    return json_text(err);
  if (!name || !strcmp(name, "Error"))
    return xstrdup(message);
  return xasprintf("%s: %s", name, message);
}

/* "2025-01-02T03:04:05Z"; "-" for NO_TIME. */
static const char *iso_time(char buf[32], int64_t ms) {
  return ms == NO_TIME ? "-" : clock_iso_utc(buf, ms);
}

const char *describe_time(char buf[32], int64_t ms) {
  return iso_time(buf, ms);
}

/* "250 ms", "3.2 s", "42 s", "4 m", "1.5 h", "3 d": one decimal below ten
 * units, none when it is ".0" or above ten. */
static const char *span(char buf[32], int64_t ms) {
  static const struct {
    int64_t ms;
    const char *unit;
  } units[] = {{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}};
  if (ms < 0)
    ms = 0;
  snprintf(buf, 32, "%" PRId64 " ms", ms);
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (ms < units[i].ms)
      continue;
    double v = (double)ms / (double)units[i].ms;
    int n = snprintf(buf, 32, v < 10 ? "%.1f" : "%.0f", v);
    if (n >= 2 && !strcmp(buf + n - 2, ".0"))
      buf[n - 2] = '\0';
    snprintf(buf + strlen(buf), 32 - strlen(buf), " %s", units[i].unit);
    break;
  }
  return buf;
}

/* ended - started as a span, "-" when either is unknown. */
static const char *took(char buf[32], int64_t started, int64_t ended) {
  return started == NO_TIME || ended == NO_TIME ? "-"
                                                : span(buf, ended - started);
}

/* ---- the list ------------------------------------------------------------ */

/* What a listed instance waits for, malloc'ed: the event types, else
 * its step's time (a sleep's end, a retry's); "-" for none. */
static char *list_waits_for(const json_t *it) {
  const json_t *step = json_object_get(it, "step");
  const char *wait = str_field(it, "wait_type"),
             *type = str_field(step, "type");
  int64_t wake = ms_field(step, "wake_ms");
  char t[32];
  if (ms_field(it, "ended_ms") != NO_TIME)
    return xstrdup("-");
  if (wait)
    return xstrdup(wait);
  if (wake != NO_TIME && str_eq(str_field(step, "status"), "waiting"))
    return xasprintf("%s %s", str_eq(type, "sleep") ? "until" : "retry at",
                     iso_time(t, wake));
  return xstrdup("-");
}

void describe_list(FILE *out, const json_t *list) {
  const json_t *items = json_object_get(list, "instances");
  size_t i, id_w = 2, step_w = 4;
  const json_t *it;
  char t[32];
  json_array_foreach(items, i, it) {
    size_t w = text_width(str_field(it, "id") ? str_field(it, "id") : "-");
    const char *key = str_field(json_object_get(it, "step"), "key");
    size_t k = text_width(key ? key : "-");
    id_w = w > id_w ? w : id_w;
    step_w = k > step_w ? k : step_w;
  }
  if (json_array_size(items) == 0)
    fputs("no instances\n", out);
  else
    fprintf(out, "%-*s  %-15s  %-24s  %-9s  %-*s  %-8s  %s\n", (int)id_w, "ID",
            "STATUS", "CREATED", "RAN FOR", (int)step_w, "STEP", "ATTEMPTS",
            "WAITING FOR");
  json_array_foreach(items, i, it) {
    char ran[32], attempts[24] = "-";
    int64_t started = ms_field(it, "started_ms"),
            ended = ms_field(it, "ended_ms");
    const json_t *step = json_object_get(it, "step");
    const char *key = str_field(step, "key");
    if (json_is_integer(json_object_get(step, "attempts")))
      snprintf(attempts, sizeof attempts, "%" JSON_INTEGER_FORMAT,
               json_integer_value(json_object_get(step, "attempts")));
    describe_text(out, str_field(it, "id"), 0, id_w + 2);
    describe_text(out, str_field(it, "status"), 0, 17);
    fprintf(out, "%-24s  %-9s  ", iso_time(t, ms_field(it, "created_ms")),
            took(ran, started, ended));
    describe_text(out, key ? key : "-", 0, step_w + 2);
    fprintf(out, "%-8s  ", attempts);
    char *wait = list_waits_for(it);
    describe_text(out, wait, 0, 0);
    free(wait);
    fputc('\n', out);
  }
  const char *cursor = str_field(list, "cursor");
  if (cursor) {
    fputs("next: --cursor ", out);
    describe_text(out, cursor, 0, 0);
    fputc('\n', out);
  }
}

#define CRON_COLUMNS 9

/* The cells of one trigger's row, malloc'ed. */
static void cron_cells(const json_t *t, char *cell[CRON_COLUMNS]) {
  char a[32], b[32];
  const json_t *last = json_object_get(t, "last");
  const json_t *next = json_array_get(json_object_get(t, "next"), 0);
  const char *tz = str_field(t, "timezone"), *wf = str_field(t, "workflow");
  const char *state = is_set(last) ? str_field(last, "state") : NULL;
  cell[0] = xstrdup(str_field(t, "plugin") ? str_field(t, "plugin") : "-");
  cell[1] = xstrdup(str_field(t, "schedule") ? str_field(t, "schedule") : "-");
  cell[2] = xstrdup(tz ? tz : "UTC");
  cell[3] = xstrdup(wf ? wf : "handler");
  cell[4] = xstrdup(iso_time(
      a, json_is_integer(next) ? (int64_t)json_integer_value(next) : NO_TIME));
  cell[5] = is_set(last)
                ? xasprintf("%s %s", iso_time(b, ms_field(last, "tick_ms")),
                            state ? state : "-")
                : xstrdup("-");
  static const char *const counts[] = {"missed", "skipped", "failed"};
  for (size_t k = 0; k < 3; k++) {
    const json_t *v = json_object_get(t, counts[k]);
    cell[6 + k] = json_is_integer(v) ? xasprintf("%" JSON_INTEGER_FORMAT,
                                                 json_integer_value(v))
                                     : xstrdup("-");
  }
}

void describe_crons(FILE *out, const json_t *list) {
  static const char *const head[CRON_COLUMNS] = {
      "PLUGIN", "SCHEDULE", "TZ",      "TARGET", "NEXT",
      "LAST",   "MISSED",   "SKIPPED", "FAILED"};
  size_t n = json_array_size(list), w[CRON_COLUMNS];
  if (n == 0) {
    fputs("no cron triggers\n", out);
    return;
  }
  char *(*cells)[CRON_COLUMNS] = xcalloc(n, sizeof *cells);
  for (size_t c = 0; c < CRON_COLUMNS; c++)
    w[c] = strlen(head[c]);
  for (size_t i = 0; i < n; i++) {
    cron_cells(json_array_get(list, i), cells[i]);
    for (size_t c = 0; c < CRON_COLUMNS; c++) {
      size_t cw = text_width(cells[i][c]);
      w[c] = cw > w[c] ? cw : w[c];
    }
  }
  for (size_t c = 0; c < CRON_COLUMNS; c++)
    describe_text(out, head[c], 0, c + 1 < CRON_COLUMNS ? w[c] + 2 : 0);
  fputc('\n', out);
  for (size_t i = 0; i < n; i++) {
    for (size_t c = 0; c < CRON_COLUMNS; c++) {
      describe_text(out, cells[i][c], 0, c + 1 < CRON_COLUMNS ? w[c] + 2 : 0);
      free(cells[i][c]);
    }
    fputc('\n', out);
  }
  free(cells);
}

/* ---- the header ---------------------------------------------------------- */

static void field(report *rep, const char *label, const char *value) {
  fprintf(rep->out, "  %-8s ", label);
  put_cut(rep, "", value, VALUE_WIDTH, 0);
  end_line(rep);
}

static void json_field(report *rep, const char *label, const json_t *v,
                       char *(*render)(const json_t *)) {
  char *s = render(v);
  field(rep, label, s);
  free(s);
}

static void times(report *rep, const json_t *in, int64_t now_ms) {
  char a[32], b[32], line[96];
  int64_t created = ms_field(in, "created_ms");
  int64_t started = ms_field(in, "started_ms");
  int64_t ended = ms_field(in, "ended_ms");
  int64_t wake = ms_field(in, "wake_ms");
  field(rep, "created", iso_time(a, created));
  field(rep, "started", iso_time(a, started));
  if (ended != NO_TIME) {
    snprintf(line, sizeof line, "%s (took %s)", iso_time(a, ended),
             took(b, started != NO_TIME ? started : created, ended));
    field(rep, "ended", line);
  } else {
    field(rep, "ended", "-");
  }
  if (wake != NO_TIME) {
    int later = wake > now_ms;
    snprintf(line, sizeof line, "%s (%s%s)", iso_time(a, wake),
             later ? "in " : "due", later ? span(b, wake - now_ms) : "");
    field(rep, "wakes", line);
  }
  int64_t deadline = ms_field(in, "deadline_ms");
  if (deadline != NO_TIME && ended == NO_TIME) {
    int later = deadline > now_ms;
    snprintf(line, sizeof line, "%s (%s%s)", iso_time(a, deadline),
             later ? "in " : "past", later ? span(b, deadline - now_ms) : "");
    field(rep, "deadline", line);
  }
}

/* The plugin builds its attempts ran on; several are flagged: its code
 * changed while it was in flight. */
static void builds(report *rep, const json_t *list) {
  size_t n = json_array_size(list), i;
  const json_t *b;
  if (n == 0)
    return;
  char line[256] = "";
  json_array_foreach(list, i, b) {
    size_t used = strlen(line);
    snprintf(line + used, sizeof line - used, "%s%s", i ? " -> " : "",
             json_string_value(b) ? json_string_value(b) : "?");
  }
  if (n > 1) {
    size_t used = strlen(line);
    snprintf(line + used, sizeof line - used,
             "  (ran on %zu builds: its code changed in flight)", n);
  }
  field(rep, n > 1 ? "builds" : "build", line);
}

/* The instance that started it, and those it started (how many, by
 * status). */
static void family(report *rep, const json_t *in) {
  const json_t *parent = json_object_get(in, "parent");
  char line[256];
  if (json_is_object(parent)) {
    snprintf(line, sizeof line, "%s/%s",
             str_field(parent, "workflow") ? str_field(parent, "workflow")
                                           : "?",
             str_field(parent, "id") ? str_field(parent, "id") : "?");
    field(rep, "parent", line);
  }
  const json_t *kids = json_object_get(in, "children");
  size_t n = json_array_size(kids), i, running = 0, complete = 0, other = 0;
  const json_t *k;
  if (n == 0)
    return;
  json_array_foreach(kids, i, k) {
    const char *st = str_field(k, "status");
    if (str_eq(st, "complete"))
      complete++;
    else if (str_eq(st, "errored") || str_eq(st, "terminated"))
      other++;
    else
      running++;
  }
  snprintf(line, sizeof line, "%zu (%zu running, %zu complete, %zu failed)", n,
           running, complete, other);
  field(rep, "children", line);
}

static void header(report *rep, const json_t *in, int64_t now_ms) {
  put_cut(rep, "", str_field(in, "workflow"), 0, 0);
  fputc('/', rep->out);
  put_cut(rep, "", str_field(in, "id"), 0, 0);
  fputs("  ", rep->out);
  put_cut(rep, "", str_field(in, "status"), 0, 0);
  /* Held by the crash-storm breaker: say so, and the way out. */
  if (str_eq(str_field(in, "status"), "waiting") &&
      str_eq(str_field(in, "wait_type"), "build.crashing"))
    fputs("  (build.crashing: its build crashed too often and is held; "
          "`duro plugins resume PLUGIN` or a new build lets it run)",
          rep->out);
  end_line(rep);
  times(rep, in, now_ms);
  /* queued for its key's turn under flow control (which rule holds it),
   * or waiting for a shared resource (which, and how it counts) */
  if (str_field(in, "waiting_for"))
    field(rep, "held by", str_field(in, "waiting_for"));
  json_field(rep, "params", json_object_get(in, "params"), json_text);
  if (is_set(json_object_get(in, "output")))
    json_field(rep, "output", json_object_get(in, "output"), json_text);
  if (is_set(json_object_get(in, "error")))
    json_field(rep, "error", json_object_get(in, "error"), error_text);
  builds(rep, json_object_get(in, "builds"));
  family(rep, in);
}

/* ---- steps --------------------------------------------------------------- */

/* An event wait (waitForEvent, waitAny) of a step. */
static int is_event_wait(const char *type) {
  return str_eq(type, "waitForEvent") || str_eq(type, "waitAny");
}

/* An event wait whose timeout came: an outcome the workflow may have
 * handled (it took its timeout branch), not shown as a failure. */
static int wait_timed_out(const json_t *s) {
  return is_event_wait(str_field(s, "type")) &&
         str_eq(str_field(s, "status"), "errored") &&
         str_eq(str_field(json_object_get(s, "error"), "name"), "TimeoutError");
}

/* The last column: what came out of the step, or what it waits for. */
static char *step_detail(const json_t *s) {
  const char *status = str_field(s, "status"), *type = str_field(s, "type");
  if (wait_timed_out(s)) {
    const char *message = str_field(json_object_get(s, "error"), "message");
    return xstrdup(message ? message : "no event in time");
  }
  int64_t wake = ms_field(s, "wake_ms");
  char t[32];
  if (str_eq(status, "complete") && !str_eq(type, "do") &&
      !is_set(json_object_get(s, "result")))
    return xstrdup("-"); /* a sleep has no result */
  if (str_eq(status, "complete"))
    return json_text(json_object_get(s, "result"));
  if (str_eq(status, "errored"))
    return error_text(json_object_get(s, "error"));
  if (!str_eq(status, "waiting") || wake == NO_TIME)
    return xstrdup("-");
  if (str_eq(type, "sleep"))
    return xasprintf("until %s", iso_time(t, wake));
  if (is_event_wait(type))
    return xasprintf("times out %s", iso_time(t, wake));
  return xasprintf("retry at %s", iso_time(t, wake)); /* a do's back-off */
}

static void attempt_line(report *rep, const json_t *a) {
  char t[32], d[32];
  int64_t started = ms_field(a, "started_ms");
  const json_t *number = json_object_get(a, "number");
  fprintf(rep->out, "      attempt %-3" JSON_INTEGER_FORMAT " %s  ",
          json_is_integer(number) ? json_integer_value(number) : 0,
          iso_time(t, started));
  put_cut(rep, "", took(d, started, ms_field(a, "ended_ms")), 0, 8);
  /* An attempt cut short did not fail: its message alone says by what
   * ("cut short by a stop at ..."), and the step's next attempt ran. */
  const json_t *error = json_object_get(a, "error");
  const char *message = str_field(error, "message");
  char *err = str_eq(str_field(error, "name"), "attempt.cut_short") && message
                  ? xstrdup(message)
                  : error_text(error);
  put_cut(rep, "", err, ERROR_WIDTH, 0);
  free(err);
  end_line(rep);
}

/* The failed attempts of one step; past ATTEMPTS_HEAD + ATTEMPTS_TAIL the
 * middle ones fold into "... N more failed attempts", unless full. */
static void failed_attempts(report *rep, const json_t *attempts) {
  size_t i, failed = 0, k = 0;
  const json_t *a;
  json_array_foreach(attempts, i, a) {
    failed += is_set(json_object_get(a, "error"));
  }
  size_t hidden = !rep->full && failed > ATTEMPTS_HEAD + ATTEMPTS_TAIL
                      ? failed - ATTEMPTS_HEAD - ATTEMPTS_TAIL
                      : 0;
  json_array_foreach(attempts, i, a) {
    if (!is_set(json_object_get(a, "error")))
      continue;
    k++;
    if (hidden && k > ATTEMPTS_HEAD && k <= ATTEMPTS_HEAD + hidden) {
      if (k == ATTEMPTS_HEAD + 1)
        fprintf(rep->out,
                "      ... %zu more failed attempts (--full shows all)\n",
                hidden);
      continue;
    }
    attempt_line(rep, a);
  }
}

static void step_line(report *rep, const json_t *s, size_t key_w) {
  char buf[32];
  const json_t *attempts = json_object_get(s, "attempts");
  fputs("  ", rep->out);
  put_cut(rep, "key", str_field(s, "key"), key_w, key_w + 2);
  put_cut(rep, "", str_field(s, "type"), 0, 14);
  put_cut(rep, "", wait_timed_out(s) ? "timed out" : str_field(s, "status"), 0,
          10);
  /* a rollback is attempted as a do step is */
  if (str_eq(str_field(s, "type"), "do") ||
      str_eq(str_field(s, "type"), "rollback"))
    snprintf(buf, sizeof buf, "%zu", json_array_size(attempts));
  else
    strcpy(buf, "-");
  put_cut(rep, "", buf, 0, 10);
  int64_t started = ms_field(s, "started_ms"), ended = ms_field(s, "ended_ms");
  put_cut(rep, "", took(buf, started, ended), 0, 9);
  char *detail = step_detail(s);
  put_cut(rep, "result", detail, DETAIL_WIDTH, 0);
  free(detail);
  end_line(rep);
  failed_attempts(rep, attempts);
}

static void steps(report *rep, const json_t *list) {
  size_t i, key_w = 4;
  const json_t *s;
  if (json_array_size(list) == 0) {
    fputs("\n  no steps yet\n", rep->out);
    return;
  }
  json_array_foreach(list, i, s) {
    const char *key = str_field(s, "key");
    size_t w = text_width(key ? key : "-");
    key_w = w > key_w ? w : key_w;
  }
  /* A full report widens the column to its longest key instead. */
  if (!rep->full && key_w > KEY_WIDTH_MAX)
    key_w = KEY_WIDTH_MAX;
  fprintf(rep->out, "\n  %-*s  %-12s  %-8s  %-8s  %-7s  %s\n", (int)key_w,
          "STEP", "TYPE", "STATUS", "ATTEMPTS", "TOOK", "RESULT");
  json_array_foreach(list, i, s) step_line(rep, s, key_w);
}

/* ---- events -------------------------------------------------------------- */

/* The widest of `key` over the events, at least `min`, at most
 * KEY_WIDTH_MAX unless the report is full. */
static size_t event_width(const report *rep, const json_t *list,
                          const char *key, size_t min) {
  size_t i, w = min;
  const json_t *ev;
  json_array_foreach(list, i, ev) {
    const char *s = str_field(ev, key);
    size_t n = text_width(s ? s : "pending");
    w = n > w ? n : w;
  }
  return !rep->full && w > KEY_WIDTH_MAX ? KEY_WIDTH_MAX : w;
}

/* One line per event the instance received, in arrival order: its type,
 * when it was sent, the step that consumed it or "pending" (none has yet),
 * and its payload. */
static void events(report *rep, const json_t *list) {
  size_t i;
  const json_t *ev;
  char t[32];
  if (!json_is_array(list))
    return; /* a server from before events were listed */
  if (json_array_size(list) == 0) {
    fputs("\n  no events received\n", rep->out);
    return;
  }
  size_t type_w = event_width(rep, list, "type", 5);
  size_t by_w = event_width(rep, list, "consumed_by", 11);
  fprintf(rep->out, "\n  %-*s  %-20s  %-*s  %s\n", (int)type_w, "EVENT", "SENT",
          (int)by_w, "CONSUMED BY", "PAYLOAD");
  json_array_foreach(list, i, ev) {
    const json_t *by = json_object_get(ev, "consumed_by");
    fputs("  ", rep->out);
    put_cut(rep, "type", str_field(ev, "type"), type_w, type_w + 2);
    put_cut(rep, "", iso_time(t, ms_field(ev, "sent_ms")), 0, 22);
    put_cut(rep, "step", json_is_null(by) ? "pending" : json_string_value(by),
            by_w, by_w + 2);
    char *payload = json_text(json_object_get(ev, "payload"));
    put_cut(rep, "payload", payload, PAYLOAD_WIDTH, 0);
    free(payload);
    end_line(rep);
  }
}

void describe_instance(FILE *out, const json_t *inst, int64_t now_ms,
                       int full) {
  report rep = {.out = out, .full = full};
  header(&rep, inst, now_ms);
  steps(&rep, json_object_get(inst, "steps"));
  events(&rep, json_object_get(inst, "events"));
}
