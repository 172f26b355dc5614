/* test_cron_expr.c — cron expressions (host/cron/expr.h): tables of
 * accepted texts (each compared with an equivalent plain spelling),
 * refused ones (message fragment and offset), weekday notes, time zone
 * names and next fires (month ends, leap years, L, W, #, the day-of-month
 * or day-of-week rule, DST in New York and Berlin), then a comparison of
 * next fires with croniter on thousands of random expressions. */
#include <check.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "expr.h"
#include "suite_run.h"

/* ---- Helpers ----------------------------------------------------------- */

/* "2026-03-08T07:00Z" or "...T07:00:30Z" or "...T07:00:30.250Z" as Unix
 * milliseconds. */
static int64_t iso_ms(const char *iso) {
  struct tm tm = {0};
  int sec = 0, ms = 0;
  int n = sscanf(iso, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon,
                 &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &sec, &ms);
  ck_assert_msg(n >= 5, "bad ISO time in the table: %s", iso);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_sec = sec;
  return (int64_t)timegm(&tm) * 1000 + ms;
}

static const char *iso_of(int64_t ms, char *buf, size_t len) {
  if (ms == CRON_NEVER) {
    snprintf(buf, len, "never");
    return buf;
  }
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/* The parsed sets, without the note's bookkeeping. */
static cron_expr sets_of(const char *text) {
  cron_expr e;
  cron_error err;
  ck_assert_msg(cron_parse(text, &e, &err) == 0, "\"%s\" refused: %s at %zu",
                text, err.msg, err.offset);
  memset(e.dow_text, 0, sizeof e.dow_text);
  e.dow_numbers = false;
  e.unix_weekdays = 0;
  return e;
}

/* ---- Accepted ---------------------------------------------------------- */

typedef struct same_case {
  const char *text, *plain;
} same_case;

static const same_case same[] = {
    {"0 0 * * *", "0 0 1-31 1-12 1-7"},
    {"  0\t0  *  *  *  ", "0 0 * * *"},
    {"*/15 * * * *", "0,15,30,45 * * * *"},
    {"10-30/10 * * * *", "10,20,30 * * * *"},
    {"50/4 * * * *", "50,54,58 * * * *"},
    {"*/59 * * * *", "0,59 * * * *"},
    {"* */5 * * *", "* 0,5,10,15,20 * * *"},
    {"* 9-17/4 * * *", "* 9,13,17 * * *"},
    {"0 0 1,15,L * *", "0 0 15,1,L * *"},
    {"0 0 ? * MON", "0 0 * * 2"},
    {"0 0 1 * ?", "0 0 1 * *"},
    {"0 0 * JAN-MAR *", "0 0 * 1-3 *"},
    {"0 0 * jan,Jun,DEC *", "0 0 * 1,6,12 *"},
    {"0 0 * JAN-DEC/3 *", "0 0 * 1,4,7,10 *"},
    {"0 0 * FEB/5 *", "0 0 * 2,7,12 *"},
    {"0 0 * * MON-FRI", "0 0 * * 2-6"},
    {"0 0 * * sun,SAT", "0 0 * * 1,7"},
    {"0 0 * * SUN-SAT", "0 0 * * *"},
    {"0 0 * * */2", "0 0 * * 1,3,5,7"},
    {"0 0 * * 2-FRI", "0 0 * * 2-6"},
    {"0 0 * * FRI#3", "0 0 * * 6#3"},
    {"0 0 * * fril", "0 0 * * 6L"},
    {"0 0 * * L", "0 0 * * 7"},
    {"0 0 lw * *", "0 0 LW * *"},
    {"0 0 15w * *", "0 0 15W * *"},
    {"0 0 l-3 * *", "0 0 L-3 * *"},
    {"0 0 L-0 * *", "0 0 L * *"},
    {"0 0 1W,15W * *", "0 0 15W,1W * *"},
    {"0 0 * * 2#1,2#3", "0 0 * * MON#3,MON#1"},
    {"00 007 * * *", "0 7 * * *"},
};

START_TEST(test_same) {
  const same_case *c = &same[_i];
  cron_expr a = sets_of(c->text), b = sets_of(c->plain);
  ck_assert_msg(memcmp(&a, &b, sizeof a) == 0,
                "row %d: \"%s\" differs from \"%s\"", _i, c->text, c->plain);
}
END_TEST

/* A few sets read directly, so that the table above is not only
 * self-consistent. */
START_TEST(test_sets) {
  cron_expr e = sets_of("5,10 3 L-2,4 2 6#3,FRIL");
  ck_assert_uint_eq(e.minutes, (1ull << 5) | (1ull << 10));
  ck_assert_uint_eq(e.hours, 1u << 3);
  ck_assert_uint_eq(e.days, 1u << 4);
  ck_assert_uint_eq(e.last_minus, 1u << 2);
  ck_assert_uint_eq(e.months, 1u << 2);
  ck_assert_uint_eq(e.weekdays, 0);
  ck_assert_uint_eq(e.nth_of[6], 1u << 3);
  ck_assert_uint_eq(e.last_of, 1u << 6);
  ck_assert(e.dom_restricted && e.dow_restricted);
  e = sets_of("* * * * *");
  ck_assert_uint_eq(e.minutes, (1ull << 60) - 1);
  ck_assert_uint_eq(e.hours, (1u << 24) - 1);
  ck_assert(!e.dom_restricted && !e.dow_restricted);
  e = sets_of("0 0 */1 * 1-7");
  ck_assert(!e.dom_restricted && !e.dow_restricted);
  e = sets_of("0 0 */2 * *");
  ck_assert(e.dom_restricted && !e.dow_restricted);
}
END_TEST

/* ---- Refused ----------------------------------------------------------- */

typedef struct bad_case {
  const char *text, *fragment;
  size_t offset;
} bad_case;

static const bad_case bad[] = {
    {"", "expected 5 fields, got 0", 0},
    {"   ", "expected 5 fields, got 0", 3},
    {"* * * *", "expected 5 fields, got 4", 7},
    {"* * * * * *", "expected 5 fields, got 6", 10},
    {"0 0 1 1 1 2027 x", "expected 5 fields, got 7", 10},
    {"60 * * * *", "minute field: 60 is out of range 0-59", 0},
    {"1,99999999999 * * * *", "minute field: 99999999999 is out of range 0-59",
     2},
    {"* 24 * * *", "hour field: 24 is out of range 0-23", 2},
    {"* * 0 * *", "day-of-month field: 0 is out of range 1-31", 4},
    {"* * 32 * *", "day-of-month field: 32 is out of range 1-31", 4},
    {"* * * 0 *", "month field: 0 is out of range 1-12", 6},
    {"* * * 13 *", "month field: 13 is out of range 1-12", 6},
    {"* * * * 0",
     "day-of-week field: 0 is not a weekday: weekdays are 1-7 with 1 = "
     "Sunday (Cloudflare/Quartz numbering; Unix cron's 0 = Sunday is 1 "
     "here)",
     8},
    {"* * * * 0-4", "day-of-week field: 0 is not a weekday", 8},
    {"* * * * 1,0", "day-of-week field: 0 is not a weekday", 10},
    {"* * * * 8", "day-of-week field: 8 is out of range 1-7", 8},
    {"*/0 * * * *", "minute field: step must be at least 1", 2},
    {"* 1-5/0 * * *", "hour field: step must be at least 1", 6},
    {"*/60 * * * *", "minute field: step 60 is larger than 59", 2},
    {"1/ * * * *", "minute field: / needs a step", 2},
    {"*/x * * * *", "minute field: / needs a step", 2},
    {"* * * FOO *", "month field: unknown name \"FOO\"", 6},
    {"* * * * MONDAY", "day-of-week field: unknown name \"MONDAY\"", 8},
    {"* * * * JAN", "day-of-week field: unknown name \"JAN\"", 8},
    {"x * * * *", "minute field: expected a number 0-59, got \"x\"", 0},
    {"* * * -1 *", "month field: expected a number or name, got \"-\"", 6},
    {"1,,2 * * * *", "minute field: empty list item", 2},
    {"1, * * * *", "minute field: empty list item", 2},
    {",1 * * * *", "minute field: empty list item", 0},
    {"5-3 * * * *", "minute field: range 5-3 runs backwards", 0},
    {"* 22-2 * * *", "hour field: range 22-2 runs backwards", 2},
    {"* * * * FRI-MON", "range FRI-MON runs backwards", 8},
    {"1-2-3 * * * *", "minute field: unexpected \"-\"", 3},
    {"*5 * * * *", "minute field: unexpected \"5\" after *", 1},
    {"? * * * *", "minute field: ? is only allowed in day-of-month", 0},
    {"* * * ? *", "month field: ? is only allowed", 6},
    {"L * * * *", "minute field: expected a number 0-59, got \"L\"", 0},
    {"* * * L *", "month field: unknown name \"L\"", 6},
    {"* * LX * *", "day-of-month field: unexpected \"X\" after L", 5},
    {"* * L-31 * *", "day-of-month field: L-31: a month has at most 31 days",
     6},
    {"* * L- * *", "L- needs a number of days 0-30", 6},
    {"* * W * *", "day-of-month field: W needs a day of month 1-31", 4},
    {"* * 32W * *", "W needs a day of month 1-31, got 32", 4},
    {"* * 0W * *", "W needs a day of month 1-31, got 0", 4},
    {"* * 15WX * *", "unexpected \"X\" after W", 7},
    {"* * 15L * *", "day-of-month field: unexpected \"L\"", 6},
    {"* * * * 6W", "day-of-week field: unexpected \"W\"", 9},
    {"* * * * 6#6", "day-of-week field: # needs a week 1-5, got 6", 10},
    {"* * * * 6#0", "# needs a week 1-5, got 0", 10},
    {"* * * * 6#", "# needs a week 1-5", 10},
    {"* * * * 0#2", "0 is not a weekday", 8},
    {"* * * * 6#3x", "unexpected \"x\"", 11},
    {"* * * * 6LL", "unexpected \"L\" after L", 10},
    {"* * * 1# *", "month field: unexpected \"#\"", 7},
};

START_TEST(test_bad) {
  const bad_case *c = &bad[_i];
  cron_expr e;
  memset(&e, 0x5a, sizeof e);
  cron_error err = {{0}, 999};
  ck_assert_msg(cron_parse(c->text, &e, &err) == -1, "row %d \"%s\" accepted",
                _i, c->text);
  ck_assert_msg(strstr(err.msg, c->fragment), "row %d \"%s\": \"%s\"", _i,
                c->text, err.msg);
  ck_assert_msg(err.offset == c->offset, "row %d \"%s\": offset %zu, not %zu",
                _i, c->text, err.offset, c->offset);
  /* A refusal leaves the output alone. */
  ck_assert_uint_eq(((unsigned char *)&e)[0], 0x5a);
}
END_TEST

START_TEST(test_null) {
  cron_expr e;
  ck_assert_int_eq(cron_parse(NULL, &e, NULL), -1);
  ck_assert_int_eq(cron_parse("* * * * *", NULL, NULL), -1);
  ck_assert_int_eq(cron_parse("61 * * * *", &e, NULL), -1);
}
END_TEST

/* ---- Weekday notes ----------------------------------------------------- */

typedef struct note_case {
  const char *text, *note; /* NULL: no note */
} note_case;

#define Q "(1 = Sunday, as in Cloudflare and Quartz; "

static const note_case notes[] = {
    {"0 9 * * 1-5", "weekday field \"1-5\" means Sunday to Thursday " Q
                    "Monday to Friday is 2-6 or MON-FRI)"},
    {"0 9 * * 1", "weekday field \"1\" means Sunday " Q "Monday is 2 or MON)"},
    {"0 9 * * 7",
     "weekday field \"7\" means Saturday " Q "Sunday is 1 or SUN)"},
    {"0 9 * * 2,4,6", "weekday field \"2,4,6\" means Monday, Wednesday and "
                      "Friday " Q "Tuesday, Thursday and Saturday is 3,5,7 or "
                      "TUE,THU,SAT)"},
    {"0 9 * * 5-7", "weekday field \"5-7\" means Thursday to Saturday " Q
                    "Sunday, Friday and Saturday is 1,6-7 or SUN,FRI-SAT)"},
    {"0 9 * * 6#3",
     "weekday field \"6#3\" means Friday " Q "Saturday is 7 or SAT)"},
    {"0 9 * * 2/2", "weekday field \"2/2\" means Monday, Wednesday and "
                    "Friday " Q "Tuesday, Thursday and Saturday is 3,5,7 or "
                    "TUE,THU,SAT)"},
    {"0 9 * * MON-FRI", NULL},
    {"0 9 * * FRI#3", NULL},
    {"0 9 * * *", NULL},
    {"0 9 * * ?", NULL},
    {"0 9 * * */2", NULL},
    {"0 9 * * 1-7", NULL},
    {"0 9 1-5 * *", NULL},
};

START_TEST(test_note) {
  const note_case *c = &notes[_i];
  cron_expr e;
  ck_assert_int_eq(cron_parse(c->text, &e, NULL), 0);
  char buf[256] = "untouched";
  bool got = cron_weekday_note(&e, buf, sizeof buf);
  if (!c->note) {
    ck_assert_msg(!got, "row %d \"%s\": unexpected note: %s", _i, c->text, buf);
    ck_assert_str_eq(buf, "untouched");
  } else {
    ck_assert_msg(got, "row %d \"%s\": no note", _i, c->text);
    ck_assert_str_eq(buf, c->note);
  }
}
END_TEST

/* ---- Time zone names --------------------------------------------------- */

typedef struct tz_case {
  const char *name;
  bool valid;
} tz_case;

static const tz_case zones[] = {
    {NULL, true},
    {"UTC", true},
    {"America/New_York", true},
    {"Europe/Berlin", true},
    {"Etc/GMT+5", true},
    {"", false},
    {"Mars/Olympus_Mons", false},
    {"America", false},                /* a directory */
    {"zone.tab", false},               /* a table, not a zone */
    {"/etc/localtime", false},         /* absolute */
    {"../zoneinfo/UTC", false},        /* climbs */
    {"America/../UTC", false},         /* climbs */
    {"Europe/Berlin ", false},         /* a blank */
    {"EST5EDT,M3.2.0,M11.1.0", false}, /* a POSIX rule, not a name */
};

START_TEST(test_tz) {
  const tz_case *c = &zones[_i];
  char err[160] = "";
  bool ok = cron_tz_valid(c->name, err, sizeof err);
  ck_assert_msg(ok == c->valid, "row %d \"%s\": %s", _i,
                c->name ? c->name : "(null)", ok ? "accepted" : err);
  if (!ok)
    ck_assert_msg(strstr(err, "time zone") != NULL, "row %d: %s", _i, err);
  if (!ok) {
    cron_expr e;
    ck_assert_int_eq(cron_parse("* * * * *", &e, NULL), 0);
    ck_assert(cron_next(&e, 0, c->name) == CRON_NEVER);
  }
}
END_TEST

/* ---- Next fires -------------------------------------------------------- */

typedef struct next_case {
  const char *expr, *tz, *after, *next; /* next NULL: never */
} next_case;

#define NY "America/New_York"
#define BER "Europe/Berlin"

static const next_case nexts[] = {
    /* Strictly after, whole minutes. */
    {"0 0 * * *", NULL, "2026-01-01T00:00Z", "2026-01-02T00:00Z"},
    {"* * * * *", NULL, "2026-01-01T00:00:59.999Z", "2026-01-01T00:01Z"},
    {"* * * * *", "UTC", "2026-01-01T00:00:00.001Z", "2026-01-01T00:01Z"},
    {"*/15 * * * *", NULL, "2026-01-01T00:07:30Z", "2026-01-01T00:15Z"},
    {"0 0 1 1 *", NULL, "2026-06-01T00:00Z", "2027-01-01T00:00Z"},
    {"59 23 31 12 *", NULL, "2026-12-31T23:58:59Z", "2026-12-31T23:59Z"},
    /* Month ends: the 31st is skipped in 30-day months. */
    {"0 0 31 * *", NULL, "2026-04-01T00:00Z", "2026-05-31T00:00Z"},
    {"0 0 31 * *", NULL, "2026-05-31T00:00Z", "2026-07-31T00:00Z"},
    {"0 0 30 * *", NULL, "2026-01-30T00:00Z", "2026-03-30T00:00Z"},
    /* Leap years. */
    {"0 0 29 2 *", NULL, "2026-01-01T00:00Z", "2028-02-29T00:00Z"},
    {"0 0 29 2 *", NULL, "2096-03-01T00:00Z", "2104-02-29T00:00Z"},
    {"0 0 30 2 *", NULL, "2026-01-01T00:00Z", NULL},
    {"0 0 31 4,6,9,11 *", NULL, "2026-01-01T00:00Z", NULL},
    /* L and L-n. */
    {"0 0 L * *", NULL, "2026-02-01T00:00Z", "2026-02-28T00:00Z"},
    {"0 0 L * *", NULL, "2028-02-01T00:00Z", "2028-02-29T00:00Z"},
    {"0 0 L * *", NULL, "2026-04-30T00:00Z", "2026-05-31T00:00Z"},
    {"0 0 L-2 * *", NULL, "2026-02-01T00:00Z", "2026-02-26T00:00Z"},
    {"0 0 L-2 * *", NULL, "2026-03-01T00:00Z", "2026-03-29T00:00Z"},
    {"0 0 L-30 * *", NULL, "2026-01-02T00:00Z", "2026-03-01T00:00Z"},
    /* nW: 15 Feb 2026 is a Sunday, 15 Aug 2026 a Saturday, 1 Aug 2026 a
     * Saturday, 31 May 2026 a Sunday. */
    {"0 12 15W * *", NULL, "2026-02-01T00:00Z", "2026-02-16T12:00Z"},
    {"0 12 15W * *", NULL, "2026-08-01T00:00Z", "2026-08-14T12:00Z"},
    {"0 12 15W * *", NULL, "2026-04-01T00:00Z", "2026-04-15T12:00Z"},
    {"0 0 1W * *", NULL, "2026-07-31T12:00Z", "2026-08-03T00:00Z"},
    {"0 0 31W * *", NULL, "2026-05-01T00:00Z", "2026-05-29T00:00Z"},
    {"0 0 31W * *", NULL, "2026-04-01T00:00Z", "2026-05-29T00:00Z"},
    /* LW: 31 January 2026 is a Saturday, 31 May 2026 a Sunday. */
    {"0 0 LW * *", NULL, "2026-01-01T00:00Z", "2026-01-30T00:00Z"},
    {"0 0 LW * *", NULL, "2026-05-01T00:00Z", "2026-05-29T00:00Z"},
    {"0 0 LW * *", NULL, "2026-06-01T00:00Z", "2026-06-30T00:00Z"},
    /* nL and n#k. */
    {"0 0 * * 6L", NULL, "2026-01-01T00:00Z", "2026-01-30T00:00Z"},
    {"0 0 * * FRIL", NULL, "2026-01-30T00:00Z", "2026-02-27T00:00Z"},
    {"0 0 * * 6#3", NULL, "2026-01-01T00:00Z", "2026-01-16T00:00Z"},
    {"0 0 * * 6#3", NULL, "2026-01-16T00:00Z", "2026-02-20T00:00Z"},
    {"0 0 * * 2#5", NULL, "2026-01-01T00:00Z", "2026-03-30T00:00Z"},
    {"0 0 * * 1#1", NULL, "2026-01-01T00:00Z", "2026-01-04T00:00Z"},
    /* Both day fields restricted: either matches. */
    {"0 0 13 * 6", NULL, "2026-01-01T00:00Z", "2026-01-02T00:00Z"},
    {"0 0 13 * 6", NULL, "2026-01-10T00:00Z", "2026-01-13T00:00Z"},
    {"0 0 L * 2", NULL, "2026-01-27T00:00Z", "2026-01-31T00:00Z"},
    {"0 0 30 2 2", NULL, "2026-01-01T00:00Z", "2026-02-02T00:00Z"},
    /* Only one restricted: that one alone. */
    {"0 0 ? * 6", NULL, "2026-01-03T00:00Z", "2026-01-09T00:00Z"},
    {"0 0 */10 * *", NULL, "2026-01-01T00:00Z", "2026-01-11T00:00Z"},
    {"30 9 * * MON-FRI", NULL, "2026-01-02T10:00Z", "2026-01-05T09:30Z"},
    {"30 9 * * MON-FRI", NULL, "2026-01-05T09:29:59Z", "2026-01-05T09:30Z"},
    /* Local days and times in a zone. */
    {"0 0 * * *", NY, "2026-01-01T00:00Z", "2026-01-01T05:00Z"},
    {"0 0 * * 2", NY, "2026-01-05T04:00Z", "2026-01-05T05:00Z"},
    {"0 9 * * *", BER, "2026-07-01T00:00Z", "2026-07-01T07:00Z"},
    /* New York, 8 March 2026: 02:00 EST jumps to 03:00 EDT (07:00Z). */
    {"30 2 * * *", NY, "2026-03-07T12:00Z", "2026-03-08T07:00Z"},
    {"30 2 * * *", NY, "2026-03-08T07:00Z", "2026-03-09T06:30Z"},
    {"0,30 2 * * *", NY, "2026-03-08T06:00Z", "2026-03-08T07:00Z"},
    {"0,30 2 * * *", NY, "2026-03-08T07:00Z", "2026-03-09T06:00Z"},
    {"0 3 * * *", NY, "2026-03-08T06:00Z", "2026-03-08T07:00Z"},
    {"*/15 * * * *", NY, "2026-03-08T06:45Z", "2026-03-08T07:00Z"},
    {"*/15 * * * *", NY, "2026-03-08T07:00Z", "2026-03-08T07:15Z"},
    /* New York, 1 November 2026: 02:00 EDT falls back to 01:00 EST
     * (06:00Z); 01:xx happens twice and fires the first time only. */
    {"30 1 * * *", NY, "2026-11-01T00:00Z", "2026-11-01T05:30Z"},
    {"30 1 * * *", NY, "2026-11-01T05:30Z", "2026-11-02T06:30Z"},
    {"*/15 * * * *", NY, "2026-11-01T05:30Z", "2026-11-01T05:45Z"},
    {"*/15 * * * *", NY, "2026-11-01T05:45Z", "2026-11-01T07:00Z"},
    {"*/15 * * * *", NY, "2026-11-01T06:10Z", "2026-11-01T07:00Z"},
    {"0 2 * * *", NY, "2026-11-01T05:00Z", "2026-11-01T07:00Z"},
    /* Berlin, 29 March 2026: 02:00 CET jumps to 03:00 CEST (01:00Z); 25
     * October 2026: 03:00 CEST falls back to 02:00 CET (01:00Z). */
    {"30 2 * * *", BER, "2026-03-28T12:00Z", "2026-03-29T01:00Z"},
    {"30 2 * * *", BER, "2026-10-24T12:00Z", "2026-10-25T00:30Z"},
    {"30 2 * * *", BER, "2026-10-25T00:30Z", "2026-10-26T01:30Z"},
    {"0 0 L 2 *", BER, "2027-01-01T00:00Z", "2027-02-27T23:00Z"},
};

START_TEST(test_next) {
  const next_case *c = &nexts[_i];
  cron_expr e;
  cron_error err;
  ck_assert_msg(cron_parse(c->expr, &e, &err) == 0, "row %d: %s", _i, err.msg);
  int64_t want = c->next ? iso_ms(c->next) : CRON_NEVER;
  int64_t got = cron_next(&e, iso_ms(c->after), c->tz);
  char a[32], b[32];
  ck_assert_msg(got == want, "row %d \"%s\" %s after %s: %s, expected %s", _i,
                c->expr, c->tz ? c->tz : "UTC", c->after,
                iso_of(got, a, sizeof a), iso_of(want, b, sizeof b));
}
END_TEST

/* The zone is restored: TZ is as it was before, set or not. */
START_TEST(test_tz_restored) {
  cron_expr e;
  ck_assert_int_eq(cron_parse("0 0 * * *", &e, NULL), 0);
  unsetenv("TZ");
  cron_next(&e, 0, NY);
  ck_assert_ptr_null(getenv("TZ"));
  setenv("TZ", "Asia/Tokyo", 1);
  cron_next(&e, 0, BER);
  ck_assert_str_eq(getenv("TZ"), "Asia/Tokyo");
}
END_TEST

/* Schedules no date ever matches, and rare ones that do match. */
START_TEST(test_ever_fires) {
  static const char *const never[] = {"0 0 30 2 *", "0 0 31 4 *",
                                      "0 0 31 4,6,9,11 *", "0 0 30,31 2 *",
                                      "0 0 31 2 ?"};
  static const char *const rare[] = {
      "0 0 29 2 *",    /* leap days */
      "0 0 ? 2 2#5",   /* a fifth Monday in February: 2016, 2044, ... */
      "0 0 30 2 2",    /* either rule: Mondays in February */
      "0 0 L 2 *",     /* 28 or 29 */
      "59 23 31 12 1", /* 31 December, or Sundays in December */
  };
  cron_expr e;
  for (size_t i = 0; i < sizeof never / sizeof *never; i++) {
    ck_assert_int_eq(cron_parse(never[i], &e, NULL), 0);
    ck_assert_msg(!cron_ever_fires(&e), "\"%s\" fires", never[i]);
    ck_assert(cron_next(&e, 0, NULL) == CRON_NEVER);
  }
  for (size_t i = 0; i < sizeof rare / sizeof *rare; i++) {
    ck_assert_int_eq(cron_parse(rare[i], &e, NULL), 0);
    ck_assert_msg(cron_ever_fires(&e), "\"%s\" never fires", rare[i]);
  }
  /* the fifth Monday of February: 29 February 2016 */
  ck_assert_int_eq(cron_parse("0 0 ? 2 2#5", &e, NULL), 0);
  ck_assert_int_eq(cron_next(&e, iso_ms("2015-01-01T00:00Z"), NULL),
                   iso_ms("2016-02-29T00:00Z"));
}
END_TEST

/* Every change of the environment or of the C library's zone made in
 * this process goes through these (the library is linked in statically,
 * so its calls land here first) and is counted. */
static int env_changes;

int setenv(const char *name, const char *value, int overwrite) {
  env_changes++;
  int (*real)(const char *, const char *, int) =
      (int (*)(const char *, const char *, int))dlsym(RTLD_NEXT, "setenv");
  return real(name, value, overwrite);
}

int unsetenv(const char *name) {
  env_changes++;
  int (*real)(const char *) =
      (int (*)(const char *))dlsym(RTLD_NEXT, "unsetenv");
  return real(name);
}

void tzset(void) {
  env_changes++;
  void (*real)(void) = (void (*)(void))dlsym(RTLD_NEXT, "tzset");
  real();
}

/* Zones are read without touching TZ, the environment or tzset(): other
 * threads (libpq on a reconnect, posix_spawn, plugins) read them. */
START_TEST(test_tz_leaves_the_environment) {
  cron_expr e;
  ck_assert_int_eq(cron_parse("30 2 * * *", &e, NULL), 0);
  ck_assert_int_eq(setenv("TZ", "Asia/Tokyo", 1), 0);
  const char *before = getenv("TZ");
  env_changes = 0;
  int64_t t = iso_ms("2026-03-07T12:00Z");
  for (int i = 0; i < 50; i++) {
    ck_assert(cron_next(&e, t, NY) != CRON_NEVER);
    ck_assert(cron_next(&e, t, BER) != CRON_NEVER);
  }
  ck_assert_int_eq(env_changes, 0);
  ck_assert_ptr_eq(getenv("TZ"), before);
  ck_assert_str_eq(getenv("TZ"), "Asia/Tokyo");
  /* still in the zone: 02:30 does not exist on 8 March in New York */
  ck_assert_int_eq(cron_next(&e, t, NY), iso_ms("2026-03-08T07:00Z"));
  unsetenv("TZ");
}
END_TEST

/* ---- Against croniter -------------------------------------------------- */

#define ORACLE_EXPRS 3000
#define ORACLE_FIRES 5

static uint64_t rng_state;

static uint32_t rnd(uint32_t n) { /* xorshift64*, uniform enough here */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 2685821657736338717ull) >> 33) % n;
}

static int between(int lo, int hi) { return lo + (int)rnd(hi - lo + 1); }

typedef struct gen {
  char ours[384], theirs[416];
} gen;

static void add(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add(char *buf, size_t len, const char *fmt, ...) {
  size_t used = strlen(buf);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, len - used, fmt, ap);
  va_end(ap);
}

/* A value of [lo, hi] for field text: a name now and then where the field
 * has names, in a random case. */
static void add_value(char *buf, size_t len, int v, int lo,
                      const char *const *names) {
  if (names && rnd(3) == 0) {
    const char *nm = names[v - lo];
    for (int i = 0; i < 3; i++)
      add(buf, len, "%c", rnd(2) ? nm[i] : nm[i] + 32);
  } else {
    add(buf, len, "%d", v);
  }
}

static const char *const g_months[] = {"JAN", "FEB", "MAR", "APR",
                                       "MAY", "JUN", "JUL", "AUG",
                                       "SEP", "OCT", "NOV", "DEC"};
static const char *const g_days[] = {"SUN", "MON", "TUE", "WED",
                                     "THU", "FRI", "SAT"};

/* One list field of [lo, hi] into buf; its set into *set (bit v). */
static void gen_list(char *buf, size_t len, int lo, int hi,
                     const char *const *names, int star_pct, bool dom_l,
                     uint64_t *set) {
  *set = 0;
  if ((int)rnd(100) < star_pct) {
    add(buf, len, "*");
    *set = ~0ull;
    return;
  }
  /* L stands alone: croniter 1.3 mishandles it next to numbers (from 24
   * November, "`*`/10,L", days 1, 11, 21, 31 and the last, goes to "31
   * November", that is 1 December, never seeing the 30th), and counts
   * "`*`/1,L" as restricted where we see every day. */
  if (dom_l && rnd(100) < 15) {
    add(buf, len, "L");
    return;
  }
  int items = between(1, 3);
  for (int it = 0; it < items; it++) {
    if (it)
      add(buf, len, ",");
    int kind = (int)rnd(5);
    if (dom_l && (kind == 2 || kind == 4))
      kind = 3; /* no step running to 31: see gen_expr */
    int a = between(lo, hi), b = between(a, hi);
    int step = between(1, (hi - lo) / 2 + 1);
    switch (kind) {
    case 0:
      add_value(buf, len, a, lo, names);
      *set |= 1ull << a;
      break;
    case 1:
      add_value(buf, len, a, lo, names);
      add(buf, len, "-");
      add_value(buf, len, b, lo, names);
      for (int v = a; v <= b; v++)
        *set |= 1ull << v;
      break;
    case 2:
      add(buf, len, "*/%d", step);
      for (int v = lo; v <= hi; v += step)
        *set |= 1ull << v;
      break;
    case 3:
      add_value(buf, len, a, lo, names);
      add(buf, len, "-");
      add_value(buf, len, b, lo, names);
      add(buf, len, "/%d", step);
      for (int v = a; v <= b; v += step)
        *set |= 1ull << v;
      break;
    case 4:
      add_value(buf, len, a, lo, names);
      add(buf, len, "/%d", step);
      for (int v = a; v <= hi; v += step)
        *set |= 1ull << v;
      break;
    }
  }
}

/* A random expression in our syntax and croniter's.  Minute, hour,
 * day-of-month and month read the same in both; the weekday field is
 * written for croniter as the explicit list of the days it means, in Unix
 * numbers (ours minus 1), or as croniter's d#k and Ld. */
static void gen_expr(gen *g) {
  uint64_t set;
  char f[4][64];
  memset(f, 0, sizeof f);
  gen_list(f[0], 64, 0, 59, NULL, 20, false, &set);
  gen_list(f[1], 64, 0, 23, NULL, 30, false, &set);
  /* Days 1-28 only: croniter 1.3 overshoots when a listed day is past
   * the end of the current month (from 28 February 2027, "1,31" goes to
   * "31 February", 3 March, and misses 1 March).  The month ends are in
   * the tables above instead. */
  gen_list(f[2], 64, 1, 28, NULL, 50, true, &set);
  gen_list(f[3], 64, 1, 12, g_months, 50, false, &set);
  char ours_dow[64] = "", theirs_dow[96] = "";
  int kind = (int)rnd(100);
  if (kind < 45) {
    add(ours_dow, sizeof ours_dow, rnd(4) ? "*" : "?");
    add(theirs_dow, sizeof theirs_dow, "*");
  } else if (kind < 85) {
    gen_list(ours_dow, sizeof ours_dow, 1, 7, g_days, 0, false, &set);
    for (int d = 1; d <= 7; d++)
      if (set & (1ull << d))
        add(theirs_dow, sizeof theirs_dow, "%s%d", theirs_dow[0] ? "," : "",
            d - 1);
  } else {
    /* croniter ignores day-of-month next to d#k or Ld (it takes their
     * days alone, not either), so day-of-month is * here. */
    snprintf(f[2], 64, "*");
    int items = between(1, 2);
    for (int it = 0; it < items; it++) {
      int d = between(1, 7);
      const char *sep = it ? "," : "";
      add(ours_dow, sizeof ours_dow, "%s", sep);
      add(theirs_dow, sizeof theirs_dow, "%s", sep);
      add_value(ours_dow, sizeof ours_dow, d, 1, g_days);
      if (rnd(3) == 0) {
        add(ours_dow, sizeof ours_dow, "L");
        add(theirs_dow, sizeof theirs_dow, "L%d", d - 1);
      } else {
        int k = between(1, 5);
        add(ours_dow, sizeof ours_dow, "#%d", k);
        add(theirs_dow, sizeof theirs_dow, "%d#%d", d - 1, k);
      }
    }
  }
  snprintf(g->ours, sizeof g->ours, "%s %s %s %s %s", f[0], f[1], f[2], f[3],
           ours_dow);
  snprintf(g->theirs, sizeof g->theirs, "%s %s %s %s %s", f[0], f[1], f[2],
           f[3], theirs_dow);
}

START_TEST(test_oracle) {
  uint64_t seed = 20260308;
  const char *env_seed = getenv("CRON_SEED");
  if (env_seed)
    seed = strtoull(env_seed, NULL, 10);
  printf("test_oracle: seed %" PRIu64 " (CRON_SEED=n to change)\n", seed);
  rng_state = seed * 0x9e3779b97f4a7c15ull + 1;

  static gen g[ORACLE_EXPRS];
  static int64_t start[ORACLE_EXPRS];
  static int64_t ours[ORACLE_EXPRS][ORACLE_FIRES];
  char path[] = "/tmp/cron_oracle_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  FILE *in = fdopen(fd, "w");
  ck_assert_ptr_nonnull(in);
  const int64_t from = 946684800, span = 40LL * 365 * 86400; /* 2000-2039 */
  for (int i = 0; i < ORACLE_EXPRS; i++) {
    gen_expr(&g[i]);
    start[i] = from + (int64_t)rnd(1u << 30) % span;
    cron_expr e;
    cron_error err;
    ck_assert_msg(cron_parse(g[i].ours, &e, &err) == 0, "\"%s\": %s at %zu",
                  g[i].ours, err.msg, err.offset);
    int64_t at = start[i] * 1000;
    for (int k = 0; k < ORACLE_FIRES; k++) {
      ours[i][k] = at == CRON_NEVER ? CRON_NEVER : cron_next(&e, at, NULL);
      at = ours[i][k];
    }
    fprintf(in, "%s\t%" PRId64 "\n", g[i].theirs, start[i]);
  }
  fclose(in);

  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' '%s' < '%s'", CRON_PYTHON, CRON_ORACLE, path);
  FILE *out = popen(cmd, "r");
  ck_assert_ptr_nonnull(out);
  static char line[ORACLE_EXPRS][256];
  int n = 0;
  while (n < ORACLE_EXPRS && fgets(line[n], sizeof line[n], out))
    n++;
  int status = pclose(out);
  unlink(path);
  ck_assert_msg(status == 0 && n == ORACLE_EXPRS,
                "%s failed (status %d, %d lines): is python3-croniter "
                "installed? .ci/deps installs it",
                cmd, status, n);

  int bad = 0;
  for (int i = 0; i < ORACLE_EXPRS; i++) {
    char *p = line[i];
    int64_t prev = start[i] * 1000;
    for (int k = 0; k < ORACLE_FIRES; k++) {
      while (*p == ' ')
        p++;
      bool never = strncmp(p, "NEVER", 5) == 0;
      char *endp;
      int64_t theirs = never ? CRON_NEVER : strtoll(p, &endp, 10) * 1000;
      bool ok;
      if (strncmp(p, "ERROR", 5) == 0)
        ok = false;
      else if (ours[i][k] == CRON_NEVER)
        /* We look CRON_SEARCH_YEARS ahead, croniter further. */
        ok = never ||
             theirs - prev > (int64_t)CRON_SEARCH_YEARS * 365 * 86400 * 1000;
      else
        ok = theirs == ours[i][k];
      if (!ok) {
        if (bad++ < 10) {
          char a[32], b[32], s[32];
          fprintf(stderr,
                  "disagree: \"%s\" (croniter \"%s\") after %s, fire %d: "
                  "ours %s, croniter %s (%.60s)\n",
                  g[i].ours, g[i].theirs, iso_of(prev, s, sizeof s), k + 1,
                  iso_of(ours[i][k], a, sizeof a), iso_of(theirs, b, sizeof b),
                  p);
        }
        break;
      }
      if (never || ours[i][k] == CRON_NEVER)
        break;
      prev = ours[i][k];
      p = endp;
    }
  }
  ck_assert_msg(bad == 0, "%d of %d expressions disagree with croniter", bad,
                ORACLE_EXPRS);
}
END_TEST

static Suite *cron_suite(void) {
  Suite *s = suite_create("cron_expr");
  TCase *tc = tcase_create("parse");
  tcase_add_loop_test(tc, test_same, 0, (int)(sizeof same / sizeof same[0]));
  tcase_add_test(tc, test_sets);
  tcase_add_loop_test(tc, test_bad, 0, (int)(sizeof bad / sizeof bad[0]));
  tcase_add_test(tc, test_null);
  tcase_add_loop_test(tc, test_note, 0, (int)(sizeof notes / sizeof notes[0]));
  suite_add_tcase(s, tc);
  tc = tcase_create("next");
  tcase_add_loop_test(tc, test_tz, 0, (int)(sizeof zones / sizeof zones[0]));
  tcase_add_loop_test(tc, test_next, 0, (int)(sizeof nexts / sizeof nexts[0]));
  tcase_add_test(tc, test_tz_restored);
  tcase_add_test(tc, test_ever_fires);
  tcase_add_test(tc, test_tz_leaves_the_environment);
  suite_add_tcase(s, tc);
  tc = tcase_create("oracle");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_oracle);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return suite_run(cron_suite()); }
