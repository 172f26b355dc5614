/* describe.h — renders the control plane's JSON for people: the instance
 * list table and the `describe` report (see describe.c). */
#ifndef DURO_DESCRIBE_H
#define DURO_DESCRIBE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The describe JSON of one instance (engine.h) as a report: header, then
 * one line per step with its failed attempts under it, then one per event
 * received (type, sent, the step that consumed it or "pending", payload).
 * `now_ms` (Unix ms) turns a wake time into "in 3 m".  Long values are cut to
 * fit a screen, each cut said on its line ("… (cut at 97 of 5,000 bytes; --full
 * shows all)"), and long runs of failed attempts folded; `full` prints
 * everything. */
void describe_instance(FILE *out, const json_t *inst, int64_t now_ms, int full);

/* A list answer {"instances":[{id,status,created_ms}],"cursor"} as a
 * table, then "next: --cursor X" when there is a next page. */
void describe_list(FILE *out, const json_t *list);

/* GET /crons' array as a table: plugin, schedule, zone, target (the
 * workflow, or "handler"), the next tick, the last one with its state,
 * and the missed, skipped and failed counts. */
void describe_crons(FILE *out, const json_t *list);

/* Prints `s` (NULL prints "-") with control characters shown as '?', cut
 * to `max` code points ending in "…" (0 = no limit), then pads with spaces
 * to `pad` code points; a cut value is followed by " (cut at N of M
 * bytes)".  Everything the server sent goes through this or the report. */
void describe_text(FILE *out, const char *s, size_t max, size_t pad);

/* Unix ms as ISO 8601 UTC ("2026-01-01T00:00:00.000Z"), or "-" for none;
 * into buf, returned. */
const char *describe_time(char buf[32], int64_t ms);

#endif
