/* instant.h — parses a point in time as the API takes it: milliseconds
 * since the epoch ("1765101600000") or an ISO 8601 date and time
 * ("2026-12-07T10:00:00Z", "2026-12-07T11:00:00.250+01:00"; UTC when it
 * names no offset). */
#ifndef DURO_INSTANT_H
#define DURO_INSTANT_H

#include <stdint.h>

/* Parses `text` into ms since the epoch: 0, or DURO_E_INVALID_ARGUMENT
 * when it is empty, malformed or before the epoch. */
int instant_parse(const char *text, int64_t *ms_out);

#endif
