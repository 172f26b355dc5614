/* tz.h — the system's time zone database, for cron_next() and the ids of
 * cron instances: a zone opened by name, and its offset from UTC at an
 * instant, without touching the process's TZ or environment (GLib's
 * GTimeZone, tz.c). */
#ifndef DURO_CRON_TZ_H
#define DURO_CRON_TZ_H

#include <stdbool.h>
#include <stdint.h>

typedef struct cron_zone cron_zone;

/* The zone `tz` (a name cron_tz_valid() accepts); NULL when it is not
 * valid or cannot be read.  Safe from any thread; close it after use. */
cron_zone *cron_tz_open(const char *tz);
void cron_tz_close(cron_zone *z);

/* Seconds east of UTC in zone z at Unix time `t`. */
int64_t cron_tz_offset(const cron_zone *z, int64_t t);

#endif
