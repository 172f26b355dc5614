/* view_journal.h — an instance's journal as a document of its own
 * ("duro-journal-1"): what `duro workflows instances export` writes (GET
 * /workflows/{wf}/instances/{id}/export) and the test kit's import reads
 * back, built from and into store/journal.h's journal_rows.
 *
 * {"format":"duro-journal-1","exported_ms","workflow","id","status",
 *  "params","output","error","created_ms","started_ms","ended_ms",
 *  "wake_ms","paused_ms","deadline_ms","wait_type","control",
 *  "retention_ms","build","restarts","parent":{"workflow","id"}|null,
 *  "parent_close":"terminate|abandon|rollback",
 *  "traceparent" (only when it was created with one),
 *  "steps":[{"key","name","count","seq","kind","status","result","error",
 *            "attempts","started_ms","ended_ms","wake_ms",
 *            "attempt_started_ms","build",
 *            "failed_attempts":[{"number","started_ms","ended_ms","error",
 *                                "build"}]}],
 *  "events":[{"type","payload","sent_ms","consumed_by"}]}
 *
 * User data (params, output, errors, results, payloads) is the journal's
 * JSON text as it is, in a string (or null): a replay reads byte for byte
 * what was stored, which a value parsed and printed again would not be
 * (a number's form, an integer past 64 bits).  Times are Unix ms, null
 * for none. */
#ifndef DURO_VIEW_JOURNAL_H
#define DURO_VIEW_JOURNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "journal.h"

#define VIEW_JOURNAL_FORMAT "duro-journal-1"

/* The document of rows read at exported_ms (caller owns it). */
json_t *view_journal(const journal_rows *r, int64_t exported_ms);

/* Reads a document back into *out (caller frees with journal_rows_free;
 * zeroed on an error) and its exported_ms into *exported_ms (may be
 * NULL).  0, or DURO_E_INVALID_ARGUMENT with what and where in err
 * ("steps[2].status: \"done\" is not a step status"). */
int view_journal_parse(const json_t *doc, journal_rows *out,
                       int64_t *exported_ms, char *err, size_t errlen);

/* duro_instance_rows as view_journal's document into *out (caller owns;
 * NULL on an error). */
int duro_instance_export(duro_engine *e, const char *workflow, const char *id,
                         json_t **out);

#endif
