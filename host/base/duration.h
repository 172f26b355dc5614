/* duration.h — parses the human durations used by steps and the config:
 * "10 seconds", "1 hour", "3 days", "30d", "5s", "2 minutes", "1 week",
 * "250 milliseconds", or a bare number of milliseconds ("500"). */
#ifndef DURO_DURATION_H
#define DURO_DURATION_H

#include <stdint.h>

/* The longest sleep, event wait or back-off: 365 days.  The parser does not
 * apply it; the step API does. */
#define DURATION_MAX_SLEEP_MS (365LL * 24 * 3600 * 1000)

/* The longest duration of any kind: 36500 days (a hundred 365-day years),
 * for what may reasonably exceed a year, such as a retention or a step
 * timeout.  The parser refuses anything longer, so a parsed value can be
 * added to a clock reading, or multiplied by an attempt number below a
 * million, without overflowing 64 bits. */
#define DURATION_MAX_MS (100 * DURATION_MAX_SLEEP_MS)

/* Parses `text` into milliseconds.  Returns 0, or DURO_E_INVALID_DURATION
 * when the text is empty, has an unknown unit, trailing garbage, a negative
 * value, or is longer than DURATION_MAX_MS. */
int duration_parse(const char *text, int64_t *ms_out);

/* duration_parse(), and on a refusal sets *too_long (when not NULL) to
 * whether the text was a well-formed duration longer than DURATION_MAX_MS,
 * so that a message can name the limit rather than the syntax. */
int duration_parse_detail(const char *text, int64_t *ms_out, int *too_long);

#endif
