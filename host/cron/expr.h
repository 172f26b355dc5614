/* expr.h — cron expressions of cron triggers: parsing, and the next time
 * one fires, in UTC or in an IANA time zone.
 *
 * The syntax is Cloudflare's Cron Triggers, which follow Quartz: five
 * fields separated by blanks,
 *
 *   minute (0-59)  hour (0-23)  day-of-month (1-31)  month (1-12)
 *   day-of-week (1-7, 1 = Sunday)
 *
 * each a comma-separated list of items: `*`, `n`, `a-b`, `*`/n, `a-b/n` and
 * `a/n` (a to the field's maximum, by n).  Months take the names JAN-DEC and
 * weekdays SUN-SAT, in any case, wherever a number goes (MON-FRI, JAN-JUN/2,
 * FRI#3, FRIL).  `?` means `*` in the two day fields.  Ranges do not wrap: 22-2
 * is refused.  A step is 1 to the field's maximum.
 *
 * Weekday numbers are Quartz's, 1-7 with 1 = Sunday and 7 = Saturday, not
 * Unix cron's 0-6 with 0 = Sunday: 0 is refused with a message saying
 * so, and cron_weekday_note() spells out what a numbered weekday field
 * means, since "1-5" is Sunday to Thursday here but Monday to Friday in a
 * crontab.
 *
 * Day-of-month also takes `L` (the last day), `L-n` (n days before it),
 * `nW` (the weekday nearest day n, without leaving the month: 1W on a
 * Saturday is Monday the 3rd, 31W on a Sunday is Friday the 29th; no fire
 * in a month shorter than n days) and `LW` (the last weekday).
 * Day-of-week also takes `nL` (the last weekday n of the month, 6L = the
 * last Friday), `L` alone (Saturday, as in Quartz) and `n#k` (the k-th
 * weekday n, k 1-5; a month with no k-th gets no fire).  These may be
 * list items like any other.
 *
 * Day-of-month with day-of-week: a field is unrestricted when it admits
 * every day (`*`, `?`, 1-31, `*`/1, 1-7, ...) and restricted otherwise.
 * When both are restricted a day fires if it matches EITHER (Vixie cron,
 * and croniter, which the tests compare against); Quartz would refuse
 * the expression.  Unlike Vixie cron, `*`/2 counts as restricted: what
 * matters is the days a field admits, not whether its text starts with
 * `*`.
 *
 * Time zones: fires are wall-clock times in the zone.  A time that a
 * spring-forward gap skips fires once, at the instant the gap ends (02:30
 * on a 02:00 -> 03:00 day fires at 03:00 local; 02:00, 02:15 and 02:30
 * all fire once, together, at 03:00).  A time that a fall-back repeats
 * fires once, at its first occurrence; so `*`/15 fires four times in the
 * repeated hour, not eight. */
#ifndef DURO_CRON_EXPR_H
#define DURO_CRON_EXPR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What cron_next() returns when nothing fires within CRON_SEARCH_YEARS
 * years, as for `0 0 30 2 *`.  Larger than any instant, so it sorts as
 * "never" among deadlines. */
#define CRON_NEVER INT64_MAX

/* How far cron_next() looks: 29 February recurs within 8 years (2096 to
 * 2104 skips one leap day). */
#define CRON_SEARCH_YEARS 8

/* A parsed expression: a plain value, nothing to free.  Sets are bit
 * masks indexed by the field's own numbers. */
typedef struct cron_expr {
  uint64_t minutes;    /* bits 0-59 */
  uint32_t hours;      /* bits 0-23 */
  uint32_t days;       /* bits 1-31 */
  uint32_t last_minus; /* bit n: L-n (bit 0: L) */
  uint32_t nearest;    /* bit n: nW */
  bool last_weekday;   /* LW */
  uint16_t months;     /* bits 1-12 */
  uint8_t weekdays;    /* bits 1-7, 1 = Sunday */
  uint8_t last_of;     /* bit n: nL */
  uint8_t nth_of[8];   /* [n] bit k: n#k */
  bool dom_restricted; /* the OR rule above */
  bool dow_restricted;
  bool dow_numbers;      /* a weekday written as a number: worth a note */
  uint8_t unix_weekdays; /* what Unix cron would read there, for the note */
  char dow_text[48];     /* the weekday field as written, for the note */
} cron_expr;

/* A refusal: the message names the field and the fault, and `offset` is
 * the 0-based position in the text of the offending token. */
typedef struct cron_error {
  char msg[192];
  size_t offset;
} cron_error;

/* Parses `text` into *out.  Returns 0, or -1 with *err filled in (err may
 * be NULL); *out is written only on success. */
int cron_parse(const char *text, cron_expr *out, cron_error *err);

/* When the weekday field of `e` uses numbers, writes a note saying which
 * days they mean, e.g. `weekday field "1-5" means Sunday to Thursday (1 =
 * Sunday, as in Cloudflare and Quartz; Monday to Friday is 2-6 or
 * MON-FRI)`, and returns true.  Returns false, writing nothing, when the
 * field uses only names or `*`, or reads the same in both numberings. */
bool cron_weekday_note(const cron_expr *e, char *buf, size_t len);

/* Whether `tz` names a zone of the system's time zone database: a
 * relative path under /usr/share/zoneinfo, without "..", to a TZif file.
 * NULL and "UTC" are valid.  On a refusal writes why to err (may be
 * NULL). */
bool cron_tz_valid(const char *tz, char *err, size_t errlen);

/* The first whole minute strictly after `after_ms` (Unix milliseconds) at
 * which `e` fires in zone `tz` (NULL or "UTC": UTC), in Unix milliseconds;
 * CRON_NEVER when none within CRON_SEARCH_YEARS, or when `tz` is not
 * cron_tz_valid(). */
int64_t cron_next(const cron_expr *e, int64_t after_ms, const char *tz);

/* Whether some day ever matches `e` (every matching day has a fire in
 * any zone: a time a DST gap skips fires at the gap's end).  The
 * Gregorian calendar repeats every 400 years, so it looks at one such
 * cycle: `0 0 30 2 *` and `0 0 31 4 *` never fire; `0 0 ? 2 2#5` (a
 * fifth Monday in February) does, once in 28 years or so. */
bool cron_ever_fires(const cron_expr *e);

#endif
