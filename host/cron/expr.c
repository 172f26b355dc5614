/* expr.c — parses cron expressions (syntax and semantics in expr.h) and
 * finds the next time one fires.
 *
 * Parsing fills bit masks, one per field, plus masks for the day-of-month
 * and day-of-week specials (L, L-n, nW, LW, nL, n#k).  Every refusal names
 * the field and the fault and points at the token.
 *
 * cron_next() walks wall-clock days of the zone from the one holding the
 * start, for at most CRON_SEARCH_YEARS years; in a day that matches it
 * tries the hours and minutes in order, maps each wall-clock time to an
 * instant (wall_to_utc) and returns the first strictly after the start.
 * The mapping is non-decreasing in wall-clock time (a skipped time maps to
 * the end of its gap, a repeated time to its first occurrence), so the
 * first candidate past the start is the earliest fire.  In UTC the mapping
 * is the identity. */
#include "expr.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tz.h"

/* ---- Fields ------------------------------------------------------------ */

enum { F_MINUTE, F_HOUR, F_DOM, F_MONTH, F_DOW, N_FIELDS };

static const char *const month_names[] = {"JAN", "FEB", "MAR", "APR",
                                          "MAY", "JUN", "JUL", "AUG",
                                          "SEP", "OCT", "NOV", "DEC"};
static const char *const dow_names[] = {"SUN", "MON", "TUE", "WED",
                                        "THU", "FRI", "SAT"};
static const char *const day_words[] = {"Sunday",    "Monday",   "Tuesday",
                                        "Wednesday", "Thursday", "Friday",
                                        "Saturday"};

typedef struct field_spec {
  const char *name;
  int min, max;
  const char *const *names; /* names[i] is min + i, or NULL */
  int n_names;
} field_spec;

static const field_spec specs[N_FIELDS] = {
    {"minute", 0, 59, NULL, 0},          {"hour", 0, 23, NULL, 0},
    {"day-of-month", 1, 31, NULL, 0},    {"month", 1, 12, month_names, 12},
    {"day-of-week", 1, 7, dow_names, 7},
};

/* ---- Parsing ----------------------------------------------------------- */

typedef struct parse {
  const char *text; /* the whole expression, for offsets */
  cron_error *err;
  const field_spec *f;
  int field;
  uint64_t bits; /* the field's plain values */
  cron_expr *e;
  uint8_t unix_days; /* the weekday field read with Unix numbers */
} parse;

static int fail(parse *ps, const char *at, const char *fmt, ...) {
  if (!ps->err)
    return -1;
  int n = 0;
  if (ps->f)
    n = snprintf(ps->err->msg, sizeof ps->err->msg, "%s field: ", ps->f->name);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ps->err->msg + n, sizeof ps->err->msg - n, fmt, ap);
  va_end(ap);
  ps->err->offset = (size_t)(at - ps->text);
  return -1;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alpha(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
static char upper(char c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }
static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* A value as written: its number, and whether it was digits (for the
 * weekday note). */
typedef struct value {
  int n;
  bool digits;
  const char *at;
  int len; /* of the token, to quote it */
} value;

/* Reads the number at *p (at most 4 digits kept: anything longer is out of
 * every range) or a name of the field, stopping before `end`. */
static int read_value(parse *ps, const char **p, const char *end, value *v) {
  const char *s = *p;
  v->at = s;
  if (s < end && is_digit(*s)) {
    long n = 0;
    while (s < end && is_digit(*s)) {
      if (n < 100000)
        n = n * 10 + (*s - '0');
      s++;
    }
    v->n = (int)n;
    v->digits = true;
    v->len = (int)(s - v->at);
    *p = s;
    return 0;
  }
  const char *a = s;
  while (s < end && is_alpha(*s))
    s++;
  if (s == a) {
    if (a == end)
      return fail(ps, a, "expected a number%s", ps->f->names ? " or name" : "");
    return fail(ps, a, "expected a number%s, got \"%c\"",
                ps->f->names ? " or name" : "", *a);
  }
  int len = (int)(s - a);
  for (int i = 0; i < ps->f->n_names; i++) {
    const char *nm = ps->f->names[i];
    if (len == 3 && upper(a[0]) == nm[0] && upper(a[1]) == nm[1] &&
        upper(a[2]) == nm[2]) {
      v->n = ps->f->min + i;
      v->digits = false;
      v->len = 3;
      *p = s;
      return 0;
    }
  }
  /* A name followed by L (FRIL) reads as one run of letters. */
  if (ps->field == F_DOW && len == 4 && upper(a[3]) == 'L') {
    for (int i = 0; i < 7; i++) {
      const char *nm = dow_names[i];
      if (upper(a[0]) == nm[0] && upper(a[1]) == nm[1] &&
          upper(a[2]) == nm[2]) {
        v->n = 1 + i;
        v->digits = false;
        v->len = 3;
        *p = s - 1;
        return 0;
      }
    }
  }
  if (!ps->f->names)
    return fail(ps, a, "expected a number %d-%d, got \"%.*s\"", ps->f->min,
                ps->f->max, len, a);
  return fail(ps, a, "unknown name \"%.*s\"", len, a);
}

static int check_range(parse *ps, const value *v) {
  if (ps->field == F_DOW && v->n == 0)
    return fail(ps, v->at,
                "0 is not a weekday: weekdays are 1-7 with 1 = Sunday "
                "(Cloudflare/Quartz numbering; Unix cron's 0 = Sunday is 1 "
                "here)");
  if (v->n < ps->f->min || v->n > ps->f->max)
    return fail(ps, v->at, "%.*s is out of range %d-%d", v->len, v->at,
                ps->f->min, ps->f->max);
  return 0;
}

/* A weekday as Unix cron would read what was written (0 and 7 Sunday),
 * mapped to our numbering. */
static int unix_day(const value *v) {
  int u = v->digits ? v->n : v->n - 1;
  return u % 7 + 1;
}

/* The specials of day-of-month at the start of an item: L, L-n, LW. */
static int parse_dom_last(parse *ps, const char *p, const char *end) {
  const char *s = p + 1;
  if (s == end) {
    ps->e->last_minus |= 1u;
    return 0;
  }
  if (upper(*s) == 'W' && s + 1 == end) {
    ps->e->last_weekday = true;
    return 0;
  }
  if (*s != '-')
    return fail(ps, s, "unexpected \"%c\" after L (L, L-n or LW)", *s);
  s++;
  value v;
  if (s == end || !is_digit(*s))
    return fail(ps, s, "L- needs a number of days 0-30");
  read_value(ps, &s, end, &v);
  if (v.n > 30)
    return fail(ps, v.at, "L-%.*s: a month has at most 31 days, so n is 0-30",
                v.len, v.at);
  if (s != end)
    return fail(ps, s, "unexpected \"%c\"", *s);
  ps->e->last_minus |= 1u << v.n;
  return 0;
}

/* One item of a list, [p, end). */
static int parse_item(parse *ps, const char *p, const char *end) {
  const field_spec *f = ps->f;
  bool dom = ps->field == F_DOM, dow = ps->field == F_DOW;
  if (p == end)
    return fail(ps, p, "empty list item");
  if (dom && upper(*p) == 'L')
    return parse_dom_last(ps, p, end);
  if (dow && upper(*p) == 'L' && p + 1 == end) {
    ps->bits |= 1u << 7; /* Quartz: L alone is Saturday */
    ps->unix_days |= 1u << 7;
    return 0;
  }

  value lo, hi;
  bool star = false, open_hi = false;
  const char *s = p;
  if (*s == '*' || *s == '?') {
    if (*s == '?' && !dom && !dow)
      return fail(ps, s,
                  "? is only allowed in day-of-month and "
                  "day-of-week");
    star = true;
    lo = (value){f->min, false, s, 1};
    hi = (value){f->max, false, s, 1};
    s++;
  } else {
    if (dom && upper(*s) == 'W')
      return fail(ps, s, "W needs a day of month 1-31 before it");
    if (read_value(ps, &s, end, &lo))
      return -1;
    if (dom && s < end && upper(*s) == 'W' && (lo.n < 1 || lo.n > 31))
      return fail(ps, lo.at, "W needs a day of month 1-31, got %.*s", lo.len,
                  lo.at);
    if (check_range(ps, &lo))
      return -1;
    hi = lo;
    if (dom && s < end && upper(*s) == 'W') {
      if (s + 1 != end)
        return fail(ps, s + 1, "unexpected \"%c\" after W", s[1]);
      ps->e->nearest |= 1u << lo.n;
      return 0;
    }
    if (dow && s < end && upper(*s) == 'L') {
      if (s + 1 != end)
        return fail(ps, s + 1, "unexpected \"%c\" after L", s[1]);
      ps->e->last_of |= 1u << lo.n;
      ps->unix_days |= lo.digits ? 1u << unix_day(&lo) : 0;
      ps->e->dow_numbers |= lo.digits;
      return 0;
    }
    if (dow && s < end && *s == '#') {
      s++;
      value k;
      if (s == end || !is_digit(*s))
        return fail(ps, s, "# needs a week 1-5");
      read_value(ps, &s, end, &k);
      if (k.n < 1 || k.n > 5)
        return fail(ps, k.at, "# needs a week 1-5, got %.*s", k.len, k.at);
      if (s != end)
        return fail(ps, s, "unexpected \"%c\"", *s);
      ps->e->nth_of[lo.n] |= 1u << k.n;
      ps->unix_days |= lo.digits ? 1u << unix_day(&lo) : 0;
      ps->e->dow_numbers |= lo.digits;
      return 0;
    }
    if (s < end && *s == '-') {
      s++;
      if (read_value(ps, &s, end, &hi) || check_range(ps, &hi))
        return -1;
      if (hi.n < lo.n)
        return fail(ps, lo.at,
                    "range %.*s runs backwards (ranges do not wrap: write "
                    "it as two)",
                    (int)(s - lo.at), lo.at);
    } else if (s < end && *s == '/') {
      hi = (value){f->max, false, s, 1}; /* a/n: from a to the maximum */
      open_hi = true;
    }
  }
  int step = 1;
  if (s < end && *s == '/') {
    s++;
    value st;
    if (s == end || !is_digit(*s))
      return fail(ps, s, "/ needs a step");
    read_value(ps, &s, end, &st);
    if (st.n < 1)
      return fail(ps, st.at, "step must be at least 1");
    if (st.n > f->max)
      return fail(ps, st.at, "step %.*s is larger than %d", st.len, st.at,
                  f->max);
    step = st.n;
  } else if (star && s < end) {
    return fail(ps, s, "unexpected \"%c\" after %c", *s, *p);
  }
  if (s != end)
    return fail(ps, s, "unexpected \"%c\"", *s);

  for (int i = lo.n; i <= hi.n; i += step)
    ps->bits |= 1ull << i;
  if (dow) {
    if (star) {
      for (int i = lo.n; i <= hi.n; i += step)
        ps->unix_days |= 1u << i;
    } else {
      /* Unix reading: the same text with Unix numbers (a/n ends at 6). */
      int ulo = lo.digits ? lo.n : lo.n - 1;
      int uhi = open_hi ? 6 : hi.digits ? hi.n : hi.n - 1;
      for (int i = ulo; i <= uhi; i += step)
        ps->unix_days |= 1u << (i % 7 + 1);
      ps->e->dow_numbers |= lo.digits || hi.digits;
    }
  }
  return 0;
}

static int parse_field(parse *ps, const char *p, const char *end) {
  ps->bits = 0;
  for (;;) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *item_end = comma ? comma : end;
    if (parse_item(ps, p, item_end))
      return -1;
    if (!comma)
      return 0;
    p = comma + 1;
  }
}

static uint32_t days_full(void) { return 0xfffffffeu; } /* bits 1-31 */

int cron_parse(const char *text, cron_expr *out, cron_error *err) {
  parse ps = {.text = text, .err = err};
  if (!text || !out)
    return fail(&ps, text, "no expression");
  const char *start[N_FIELDS + 1], *stop[N_FIELDS + 1];
  int n = 0;
  const char *p = text;
  for (;;) {
    while (is_blank(*p))
      p++;
    if (!*p)
      break;
    const char *a = p;
    while (*p && !is_blank(*p))
      p++;
    if (n == N_FIELDS) {
      int more = n + 1;
      for (const char *q = p; *q;) {
        while (is_blank(*q))
          q++;
        if (!*q)
          break;
        more++;
        while (*q && !is_blank(*q))
          q++;
      }
      return fail(&ps, a, "expected 5 fields, got %d", more);
    }
    start[n] = a;
    stop[n] = p;
    n++;
  }
  if (n != N_FIELDS)
    return fail(&ps, p, "expected 5 fields, got %d", n);

  cron_expr e;
  memset(&e, 0, sizeof e);
  ps.e = &e;
  for (int i = 0; i < N_FIELDS; i++) {
    ps.field = i;
    ps.f = &specs[i];
    if (parse_field(&ps, start[i], stop[i]))
      return -1;
    switch (i) {
    case F_MINUTE:
      e.minutes = ps.bits;
      break;
    case F_HOUR:
      e.hours = (uint32_t)ps.bits;
      break;
    case F_DOM:
      e.days = (uint32_t)ps.bits;
      break;
    case F_MONTH:
      e.months = (uint16_t)ps.bits;
      break;
    case F_DOW:
      e.weekdays = (uint8_t)ps.bits;
      break;
    }
  }
  e.dom_restricted = e.days != days_full();
  e.dow_restricted = e.weekdays != 0xfe;
  size_t len = (size_t)(stop[F_DOW] - start[F_DOW]);
  if (len < sizeof e.dow_text)
    snprintf(e.dow_text, sizeof e.dow_text, "%.*s", (int)len, start[F_DOW]);
  else
    snprintf(e.dow_text, sizeof e.dow_text, "%.*s...",
             (int)sizeof e.dow_text - 4, start[F_DOW]);
  e.unix_weekdays = ps.unix_days;
  *out = e;
  return 0;
}

/* ---- The weekday note -------------------------------------------------- */

/* The weekdays a field names, whatever the special: nL and n#k name n. */
static uint8_t named_days(const cron_expr *e) {
  uint8_t set = e->weekdays | e->last_of;
  for (int i = 1; i <= 7; i++)
    if (e->nth_of[i])
      set |= 1u << i;
  return set;
}

/* Appends to buf what `fmt` formats, keeping it terminated. */
static void append(char *buf, size_t len, const char *fmt, ...) {
  size_t used = strlen(buf);
  if (used + 1 >= len)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, len - used, fmt, ap);
  va_end(ap);
}

enum { AS_WORDS, AS_NUMBERS, AS_NAMES };

/* The days of `set` as runs: "Monday to Friday and Sunday", "2-6,1",
 * "MON-FRI,SUN". */
static void describe(uint8_t set, int how, char *buf, size_t len) {
  buf[0] = '\0';
  int runs[7][2], n = 0;
  for (int i = 1; i <= 7; i++) {
    if (!(set & (1u << i)))
      continue;
    int j = i;
    while (j < 7 && (set & (1u << (j + 1))))
      j++;
    if (how == AS_WORDS && j == i + 1)
      j = i; /* "Friday and Saturday", not "Friday to Saturday" */
    runs[n][0] = i;
    runs[n][1] = j;
    n++;
    i = j;
  }
  for (int r = 0; r < n; r++) {
    int a = runs[r][0], b = runs[r][1];
    if (how == AS_WORDS) {
      append(buf, len, "%s", r == 0 ? "" : r == n - 1 ? " and " : ", ");
      append(buf, len, a == b ? "%s" : "%s to %s", day_words[a - 1],
             day_words[b - 1]);
    } else if (how == AS_NUMBERS) {
      append(buf, len, r ? "," : "");
      append(buf, len, a == b ? "%d" : "%d-%d", a, b);
    } else {
      append(buf, len, r ? "," : "");
      append(buf, len, a == b ? "%s" : "%s-%s", dow_names[a - 1],
             dow_names[b - 1]);
    }
  }
}

bool cron_weekday_note(const cron_expr *e, char *buf, size_t len) {
  uint8_t ours = named_days(e), theirs = e->unix_weekdays;
  if (!e->dow_numbers || ours == theirs || !buf || !len)
    return false;
  char means[96], unix_words[96], numbers[32], names[48];
  describe(ours, AS_WORDS, means, sizeof means);
  describe(theirs, AS_WORDS, unix_words, sizeof unix_words);
  describe(theirs, AS_NUMBERS, numbers, sizeof numbers);
  describe(theirs, AS_NAMES, names, sizeof names);
  snprintf(buf, len,
           "weekday field \"%s\" means %s (1 = Sunday, as in Cloudflare and "
           "Quartz; %s is %s or %s)",
           e->dow_text, means, unix_words, numbers, names);
  return true;
}

/* ---- Calendar ---------------------------------------------------------- */

static int64_t floor_div(int64_t a, int64_t b) {
  return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* The proleptic Gregorian date of a day counted from 1970-01-01. */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
  z += 719468;
  int64_t era = floor_div(z, 146097);
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  *d = (int)(doy - (153 * mp + 2) / 5 + 1);
  *m = (int)(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2);
}

static int month_days(int64_t y, int m) {
  static const int len[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : len[m - 1];
}

/* 1 = Sunday ... 7 = Saturday; day 0 was a Thursday. */
static int weekday_of(int64_t days) { return (int)((days % 7 + 11) % 7) + 1; }

/* The weekday nearest day n of a month of `last` days whose day n falls
 * on weekday `wd`, without leaving the month; 0 when n is past the end. */
static int nearest_weekday(int n, int wd, int last) {
  if (n > last)
    return 0;
  if (wd == 7) /* Saturday: Friday, or Monday when that leaves the month */
    return n == 1 ? 3 : n - 1;
  if (wd == 1) /* Sunday: Monday, or Friday when that leaves the month */
    return n == last ? n - 2 : n + 1;
  return n;
}

static bool dom_matches(const cron_expr *e, int d, int wd, int last) {
  if (e->days & (1u << d))
    return true;
  if (e->last_minus & (1u << (last - d)))
    return true;
  if (e->last_weekday) {
    int lwd = (wd + (last - d)) % 7; /* weekday of the last day, 0..6 */
    int lw = lwd == 0 ? last - 1 : lwd == 1 ? last - 2 : last;
    if (d == lw)
      return true;
  }
  for (uint32_t n = e->nearest; n;) {
    int i = __builtin_ctz(n);
    n &= n - 1;
    int wd_i = (wd - 1 + ((i - d) % 7 + 7)) % 7 + 1;
    if (nearest_weekday(i, wd_i, last) == d)
      return true;
  }
  return false;
}

static bool dow_matches(const cron_expr *e, int d, int wd, int last) {
  if (e->weekdays & (1u << wd))
    return true;
  if ((e->last_of & (1u << wd)) && d + 7 > last)
    return true;
  return (e->nth_of[wd] & (1u << ((d - 1) / 7 + 1))) != 0;
}

static bool day_matches(const cron_expr *e, int64_t days, int d, int last) {
  int wd = weekday_of(days);
  if (e->dom_restricted && e->dow_restricted)
    return dom_matches(e, d, wd, last) || dow_matches(e, d, wd, last);
  if (e->dom_restricted)
    return dom_matches(e, d, wd, last);
  if (e->dow_restricted)
    return dow_matches(e, d, wd, last);
  return true;
}

/* 2000-01-01 to 2399-12-31: one whole Gregorian cycle of dates and
 * weekdays. */
#define CYCLE_FIRST_DAY 10957 /* days from 1970-01-01 to 2000-01-01 */
#define CYCLE_DAYS 146097

bool cron_ever_fires(const cron_expr *e) {
  if (!e || !e->minutes || !e->hours)
    return false;
  for (int64_t days = CYCLE_FIRST_DAY; days < CYCLE_FIRST_DAY + CYCLE_DAYS;
       days++) {
    int64_t y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    int last = month_days(y, m);
    if (!(e->months & (1u << m)))
      days += last - d; /* on to the next month */
    else if (day_matches(e, days, d, last))
      return true;
  }
  return false;
}

/* ---- Next fire --------------------------------------------------------- */

/* Seconds east of UTC at `t`: 0 in UTC (z NULL), else from zone z. */
static int64_t offset_at(const cron_zone *z, int64_t t) {
  return z ? cron_tz_offset(z, t) : 0;
}

/* The instant at which wall-clock time `wall` (seconds, as if UTC) first
 * shows, or, when a gap skips it, the instant the gap ends.  Assumes at
 * most one offset change within a day of it, as in every real zone. */
static int64_t wall_to_utc(const cron_zone *z, int64_t wall) {
  if (!z)
    return wall;
  int64_t before = offset_at(z, wall - 86400);
  int64_t after = offset_at(z, wall + 86400);
  int64_t best = INT64_MAX;
  int64_t offs[2] = {before, after};
  for (int i = 0; i < 2; i++) {
    int64_t t = wall - offs[i];
    if (t + offset_at(z, t) == wall && t < best)
      best = t;
  }
  if (best != INT64_MAX)
    return best;
  if (after <= before)
    return wall - before;
  /* In the gap: the first second showing the later offset. */
  int64_t lo = wall - after, hi = wall - before;
  int64_t off_lo = offset_at(z, lo);
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if (offset_at(z, mid) == off_lo)
      lo = mid;
    else
      hi = mid;
  }
  return hi;
}

/* Years 1 to 9999: beyond them the arithmetic is not worth checking. */
#define MIN_MS (-62135596800000LL)
#define MAX_MS 253402300799999LL

int64_t cron_next(const cron_expr *e, int64_t after_ms, const char *tz) {
  if (!e || after_ms < MIN_MS || after_ms > MAX_MS)
    return CRON_NEVER;
  bool utc = !tz || strcmp(tz, "UTC") == 0;
  cron_zone *z = utc ? NULL : cron_tz_open(tz);
  if (!utc && !z)
    return CRON_NEVER;
  int64_t after_s = floor_div(after_ms, 1000);
  int64_t wall = after_s + offset_at(z, after_s);
  int64_t day0 = floor_div(wall, 86400);
  int start_min = (int)((wall - day0 * 86400) / 60);
  int64_t result = CRON_NEVER;
  for (int64_t days = day0; days <= day0 + CRON_SEARCH_YEARS * 366; days++) {
    int64_t y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    int last = month_days(y, m);
    if (!(e->months & (1u << m))) {
      days += last - d; /* on to the next month */
      continue;
    }
    if (!day_matches(e, days, d, last))
      continue;
    int from = days == day0 ? start_min : 0;
    for (int h = from / 60; h < 24; h++) {
      if (!(e->hours & (1u << h)))
        continue;
      for (int mi = h == from / 60 ? from % 60 : 0; mi < 60; mi++) {
        if (!(e->minutes & (1ull << mi)))
          continue;
        int64_t t = wall_to_utc(z, days * 86400 + h * 3600 + mi * 60);
        if (t * 1000 > after_ms) {
          result = t * 1000;
          goto done;
        }
      }
    }
  }
done:
  cron_tz_close(z);
  return result;
}
