/* duration.c — turns the human durations of steps and the config into
 * milliseconds.
 *
 * The grammar is deliberately small, so that a typo is refused rather than
 * guessed at:
 *
 *   duration = number [ " " ] unit | digits
 *   number   = digits [ "." digits ]
 *   unit     = ms | millisecond(s) | s | sec(s) | second(s) | m | min(s)
 *            | minute(s) | h | hr(s) | hour(s) | d | day(s) | w | week(s)
 *
 * A bare integer is milliseconds.  Units are lower case; singular and
 * plural are accepted whatever the number ("1 seconds", "2 hour").  At most
 * one space separates number and unit, and nothing else may precede or
 * follow: no sign, no tabs, no surrounding blanks, no exponent.  Months and
 * years are refused because their length depends on the calendar.
 *
 * Fractions are exact: "1.5 hours" is 5400000 ms and "0.25s" is 250 ms, but
 * the result must be a whole number of milliseconds, so "1.5ms" and
 * "0.0001s" are refused rather than rounded.  Trailing zeros of a fraction
 * do not count; at most nine significant fractional digits are accepted,
 * which keeps the arithmetic in 64 bits.
 *
 * Values longer than DURATION_MAX_MS (36500 days) are refused here, for
 * every caller: the values become deadlines and back-offs, sums and
 * products in int64_t milliseconds, and "9223372036854775807" (INT64_MAX
 * ms) would overflow the first addition to a clock reading.  The arithmetic
 * up to that check is itself overflow-checked, so no text, however many its
 * digits, overflows here.  Callers with a smaller limit check their own
 * (for instance DURATION_MAX_SLEEP_MS).  The output is written only on
 * success. */
#include "duration.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "duro.h"

typedef struct unit {
  const char *name;
  int64_t ms;
} unit;

static const unit units[] = {
    {"ms", 1},
    {"millisecond", 1},
    {"milliseconds", 1},
    {"s", 1000},
    {"sec", 1000},
    {"secs", 1000},
    {"second", 1000},
    {"seconds", 1000},
    {"m", 60 * 1000},
    {"min", 60 * 1000},
    {"mins", 60 * 1000},
    {"minute", 60 * 1000},
    {"minutes", 60 * 1000},
    {"h", 3600 * 1000},
    {"hr", 3600 * 1000},
    {"hrs", 3600 * 1000},
    {"hour", 3600 * 1000},
    {"hours", 3600 * 1000},
    {"d", 24LL * 3600 * 1000},
    {"day", 24LL * 3600 * 1000},
    {"days", 24LL * 3600 * 1000},
    {"w", 7LL * 24 * 3600 * 1000},
    {"week", 7LL * 24 * 3600 * 1000},
    {"weeks", 7LL * 24 * 3600 * 1000},
};

/* Nine digits keep frac * unit below 10^9 * 6.048e8 < 2^63. */
#define MAX_FRAC_DIGITS 9

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* The length of the run of digits at s. */
static size_t digits_len(const char *s) {
  size_t n = 0;
  while (is_digit(s[n]))
    n++;
  return n;
}

static int find_unit(const char *s, int64_t *ms_out) {
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcmp(s, units[i].name) == 0) {
      *ms_out = units[i].ms;
      return 0;
    }
  }
  return DURO_E_INVALID_DURATION;
}

int duration_parse(const char *text, int64_t *ms_out) {
  return duration_parse_detail(text, ms_out, NULL);
}

int duration_parse_detail(const char *text, int64_t *ms_out, int *too_long) {
  if (too_long)
    *too_long = 0;
  if (!text || !ms_out)
    return DURO_E_INVALID_DURATION;

  const char *p = text;
  size_t int_len = digits_len(p);
  if (int_len == 0)
    return DURO_E_INVALID_DURATION; /* empty, sign, blank or letter first */
  /* An overflow is noted, not returned at once: the rest of the text
   * decides whether it is a duration at all, or only too long. */
  bool overflow = false;
  int64_t whole = 0;
  for (size_t i = 0; i < int_len; i++) {
    if (__builtin_mul_overflow(whole, 10, &whole) ||
        __builtin_add_overflow(whole, p[i] - '0', &whole))
      overflow = true;
  }
  p += int_len;

  /* The fraction as an integer numerator over 10^frac_digits, with its
   * trailing zeros dropped so that "1.50000000000" is as good as "1.5". */
  int64_t frac = 0;
  int64_t frac_den = 1;
  if (*p == '.') {
    p++;
    size_t frac_len = digits_len(p);
    if (frac_len == 0)
      return DURO_E_INVALID_DURATION; /* "1." or "1.s" */
    size_t significant = frac_len;
    while (significant > 0 && p[significant - 1] == '0')
      significant--;
    if (significant > MAX_FRAC_DIGITS)
      return DURO_E_INVALID_DURATION;
    for (size_t i = 0; i < significant; i++) {
      frac = frac * 10 + (p[i] - '0');
      frac_den *= 10;
    }
    p += frac_len;
  }

  int64_t unit_ms = 1;
  if (*p != '\0') {
    if (*p == ' ')
      p++;
    /* A lone trailing space, a second space or a tab all fail here. */
    if (find_unit(p, &unit_ms) < 0)
      return DURO_E_INVALID_DURATION;
  }

  int64_t ms = 0;
  if (!overflow && __builtin_mul_overflow(whole, unit_ms, &ms))
    overflow = true;
  if (!overflow && frac != 0) {
    int64_t part = frac * unit_ms; /* cannot overflow, see MAX_FRAC_DIGITS */
    if (part % frac_den != 0)
      return DURO_E_INVALID_DURATION; /* not a whole millisecond */
    if (__builtin_add_overflow(ms, part / frac_den, &ms))
      overflow = true;
  }
  if (overflow || ms > DURATION_MAX_MS) {
    if (too_long)
      *too_long = 1;
    return DURO_E_INVALID_DURATION;
  }
  *ms_out = ms;
  return 0;
}
