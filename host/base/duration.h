/* duration.h — parses the human durations used by steps and the config:
 * "10 seconds", "1 hour", "3 days", "30d", "5s", "2 minutes", "1 week",
 * "250 milliseconds", or a bare number of milliseconds ("500"). */
#ifndef DURO_DURATION_H
#define DURO_DURATION_H

#include <stdint.h>

/* Parses `text` into milliseconds.  Returns 0, or DURO_E_INVALID_DURATION
 * when the text is empty, has an unknown unit, trailing garbage, a negative
 * value, or overflows. */
int duration_parse(const char *text, int64_t *ms_out);

#define DURATION_MAX_SLEEP_MS (365LL * 24 * 3600 * 1000)

#endif
