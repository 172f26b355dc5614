/* view_dry_run.h — a dry run of another build (`duro check --replay`) as
 * JSON, built from engine.h's typed report. */
#ifndef DURO_VIEW_DRY_RUN_H
#define DURO_VIEW_DRY_RUN_H

#include <jansson.h>

#include "engine.h"

/* {"workflow","instances":[{"id","status":"replays|completes|diverged",
 * "journaled","next"?,"error"?: {"name","message"}} | {"rowid","status":
 * "unreadable","error"}],"diverged":N}.  Caller owns it. */
json_t *view_dry_run(const duro_dry_run_report *r);

/* duro_engine_dry_run_report as view_dry_run's JSON into *report (caller
 * owns; NULL on an error). */
int duro_engine_dry_run(duro_engine *e, const char *workflow, duro_run_fn run,
                        json_t **report);

#endif
