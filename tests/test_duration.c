/* test_duration.c — duration_parse() against tables of accepted texts,
 * refused ones, and well-formed ones refused for being longer than
 * DURATION_MAX_MS (values whose deadlines would overflow int64_t).  Each
 * row is its own Check loop iteration, so a failure names the row's index
 * and text. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "duration.h"
#include "duro.h"
#include "suite_run.h"

#define SEC 1000LL
#define MIN (60 * SEC)
#define HOUR (60 * MIN)
#define DAY (24 * HOUR)
#define WEEK (7 * DAY)

typedef struct good_case {
  const char *text;
  int64_t ms;
} good_case;

static const good_case good[] = {
    /* The forms named in the design and the header. */
    {"10 seconds", 10 * SEC},
    {"1 second", 1 * SEC},
    {"1 hour", 1 * HOUR},
    {"3 days", 3 * DAY},
    {"30d", 30 * DAY},
    {"5s", 5 * SEC},
    {"2 minutes", 2 * MIN},
    {"2m", 2 * MIN},
    {"2min", 2 * MIN},
    {"1 week", 1 * WEEK},
    {"1w", 1 * WEEK},
    {"250 milliseconds", 250},
    {"250ms", 250},
    {"1h", 1 * HOUR},
    {"500", 500},
    /* Every unit spelling, with and without the space. */
    {"1 ms", 1},
    {"1millisecond", 1},
    {"1 millisecond", 1},
    {"7 s", 7 * SEC},
    {"7sec", 7 * SEC},
    {"7 secs", 7 * SEC},
    {"7second", 7 * SEC},
    {"7 m", 7 * MIN},
    {"7 min", 7 * MIN},
    {"7mins", 7 * MIN},
    {"7 minute", 7 * MIN},
    {"7minutes", 7 * MIN},
    {"7 h", 7 * HOUR},
    {"7hr", 7 * HOUR},
    {"7 hrs", 7 * HOUR},
    {"7hours", 7 * HOUR},
    {"7 d", 7 * DAY},
    {"7day", 7 * DAY},
    {"7 w", 7 * WEEK},
    {"7weeks", 7 * WEEK},
    /* Singular and plural whatever the count. */
    {"1 seconds", 1 * SEC},
    {"2 hour", 2 * HOUR},
    {"1 days", 1 * DAY},
    /* Zero and leading zeros. */
    {"0", 0},
    {"0s", 0},
    {"0 weeks", 0},
    {"007s", 7 * SEC},
    {"0000000000000000000000000001", 1},
    /* Fractions that come to whole milliseconds. */
    {"1.5 hours", 5400000},
    {"1.5h", 90 * MIN},
    {"0.5s", 500},
    {"0.25 seconds", 250},
    {"0.001s", 1},
    {"2.0", 2},
    {"0.5 days", 12 * HOUR},
    {"1.0000000000000 s", 1 * SEC}, /* trailing zeros do not count */
    {"0.123456875 w", 74666718},    /* nine significant digits */
    {"0.000000625 w", 378},
    /* The limits: the longest sleep, and the longest duration. */
    {"365 days", DURATION_MAX_SLEEP_MS},
    {"36500 days", DURATION_MAX_MS},
    {"3153600000000", DURATION_MAX_MS},
    {"3153600000 s", DURATION_MAX_MS},
    {"36499.5 days", DURATION_MAX_MS - 12 * HOUR},
    {"5214 weeks", 5214 * WEEK},
    {"876000 hours", DURATION_MAX_MS},
};

typedef struct bad_case {
  const char *text;
  const char *why;
} bad_case;

static const bad_case bad[] = {
    {"", "empty"},
    {" ", "blank"},
    {"s", "no number"},
    {"-1", "negative"},
    {"-5s", "negative with unit"},
    {"+5s", "explicit sign"},
    {" 5s", "leading blank"},
    {"5s ", "trailing blank"},
    {"5 ", "space but no unit"},
    {"5  s", "two spaces"},
    {"5\ts", "tab"},
    {"5x", "unknown unit"},
    {"5 fortnights", "unknown unit word"},
    {"1 month", "months vary in length"},
    {"1 year", "years vary in length"},
    {"10 Seconds", "units are lower case"},
    {"5S", "units are lower case"},
    {"5sx", "trailing garbage after unit"},
    {"5 s x", "trailing word"},
    {"5s5", "digits after unit"},
    {"5 seconds.", "trailing dot"},
    {"1e3", "exponent"},
    {"0x10", "hex"},
    {"1,000", "thousands separator"},
    {"1_000", "underscore separator"},
    {"1.", "dot without fraction"},
    {"1.s", "dot without fraction, with unit"},
    {".5s", "fraction without integer"},
    {"1.5.2s", "two dots"},
    {"1.5ms", "half a millisecond"},
    {"1.5", "half a millisecond, bare"},
    {"0.0001s", "a tenth of a millisecond"},
    {"0.000000001 w", "0.6048 ms"},
    {"1.0000000001 s", "fraction below a millisecond"},
    {"0.1234567891 w", "ten significant fractional digits"},
    {"9223372036854775807.5", "fraction past INT64_MAX (not whole anyway)"},
    {"99999999999999999999 fortnights", "too long, but no unit either"},
};

/* Well-formed, but longer than DURATION_MAX_MS: refused, and
 * duration_parse_detail() says that was the only reason. */
static const bad_case too_long[] = {
    /* int64_t could hold these, but as deadlines and back-offs they would
     * overflow their callers' arithmetic. */
    {"3153600000001", "a millisecond past the longest duration"},
    {"36501 days", "a day past the longest duration"},
    {"36500.5 days", "a fraction past the longest duration"},
    {"5215 weeks", "weeks past the longest duration"},
    {"9223372036854775807", "INT64_MAX milliseconds"},
    {"106751991167 days", "the most days int64_t holds"},
    {"15250284452 weeks", "the most weeks int64_t holds"},
    /* Past int64_t itself: the arithmetic is checked, not wrapped. */
    {"9223372036854775807 hours", "INT64_MAX hours"},
    {"9999999999999999999 days", "digits past INT64_MAX, with a unit"},
    {"9223372036854775808", "one past INT64_MAX"},
    {"99999999999999999999999", "far past INT64_MAX"},
    {"106751991168 days", "days overflow"},
    {"15250284453 w", "weeks overflow"},
    {"106751991167.9 days", "the fraction overflows"},
};

START_TEST(test_good) {
  const good_case *c = &good[_i];
  int64_t ms = -12345;
  int rc = duration_parse(c->text, &ms);
  ck_assert_msg(rc == 0, "row %d \"%s\": rc %d", _i, c->text, rc);
  ck_assert_msg(ms == c->ms, "row %d \"%s\": %lld ms, expected %lld", _i,
                c->text, (long long)ms, (long long)c->ms);
}
END_TEST

/* Row `row` of a table of refusals: refused, the output left alone, and
 * called too long by duration_parse_detail() exactly when `want_too_long`. */
static void assert_refused(const bad_case *c, int row, int want_too_long) {
  int64_t ms = -12345;
  int rc = duration_parse(c->text, &ms);
  ck_assert_msg(rc == DURO_E_INVALID_DURATION,
                "row %d \"%s\" (%s): rc %d, ms %lld", row, c->text, c->why, rc,
                (long long)ms);
  /* A refusal leaves the output alone. */
  ck_assert_msg(ms == -12345, "row %d \"%s\": output written", row, c->text);
  int too = want_too_long ? 0 : -1; /* not the answer wanted: must be set */
  ck_assert_int_eq(duration_parse_detail(c->text, &ms, &too),
                   DURO_E_INVALID_DURATION);
  if (want_too_long) {
    ck_assert_msg(too == 1, "row %d \"%s\": not called too long", row, c->text);
    ck_assert_int_eq(ms, -12345);
  } else {
    ck_assert_msg(too == 0, "row %d \"%s\": called too long", row, c->text);
  }
}

START_TEST(test_bad) { assert_refused(&bad[_i], _i, 0); }
END_TEST

START_TEST(test_too_long) { assert_refused(&too_long[_i], _i, 1); }
END_TEST

START_TEST(test_null) {
  int64_t ms = 0;
  ck_assert_int_eq(duration_parse(NULL, &ms), DURO_E_INVALID_DURATION);
  ck_assert_int_eq(duration_parse("5s", NULL), DURO_E_INVALID_DURATION);
}
END_TEST

static Suite *duration_suite(void) {
  Suite *s = suite_create("duration");
  TCase *tc = tcase_create("parse");
  tcase_add_loop_test(tc, test_good, 0, (int)(sizeof good / sizeof good[0]));
  tcase_add_loop_test(tc, test_bad, 0, (int)(sizeof bad / sizeof bad[0]));
  tcase_add_loop_test(tc, test_too_long, 0,
                      (int)(sizeof too_long / sizeof too_long[0]));
  tcase_add_test(tc, test_null);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(duration_suite()); }
