/* tz.h — the system's time zone database, through the C library, for
 * cron_next(): a zone is selected for the calling thread by setting TZ
 * under one mutex, and offsets from UTC are read with localtime_r(). */
#ifndef DURO_CRON_TZ_H
#define DURO_CRON_TZ_H

#include <stdbool.h>
#include <stdint.h>

/* Takes the module's mutex and makes `tz` (a zone cron_tz_valid()
 * accepted) the process's local time zone until cron_tz_leave(), which
 * restores the previous TZ and releases the mutex.  Returns false, with
 * the mutex not held, when `tz` is not valid. */
bool cron_tz_enter(const char *tz);
void cron_tz_leave(void);

/* Seconds east of UTC of the zone entered, at Unix time `t`. */
int64_t cron_tz_offset(int64_t t);

#endif
