/* trace_ids.h — the ids of an instance's trace: W3C Trace Context's
 * traceparent (https://www.w3.org/TR/trace-context/) read and written,
 * and the trace, span and parent ids duro derives from an instance.
 *
 * Ids come from SHA-256 of the instance (workflow, id, created_ms), so an
 * instance has the same trace on every host and after every restart.  An
 * instance created with a caller's traceparent joins the caller's trace:
 * its trace id is the caller's and its root span's parent the caller's
 * span.  In base/ because the engine (duro_attempt_traceparent), the
 * telemetry exporter and the HTTP routes all apply these rules. */
#ifndef DURO_TRACE_IDS_H
#define DURO_TRACE_IDS_H

#include <stdint.h>

/* "00-" 32 hex "-" 16 hex "-" 2 hex */
#define TRACEPARENT_LEN 55

typedef struct trace_parent {
  char trace[33]; /* lowercase hex */
  char span[17];
  int sampled; /* the flags' sampled bit */
} trace_parent;

/* 1 and *out when s is a valid traceparent (a version this reader
 * understands read as version 00, as the spec asks), else 0: an invalid
 * one is ignored, never an error. */
int traceparent_parse(const char *s, trace_parent *out);

/* s as a version-00 traceparent (malloc'ed), or NULL when s is NULL or
 * not valid. */
char *traceparent_norm(const char *s);

/* trace, span and the sampled flag as a traceparent into out. */
void traceparent_format(const char *trace, const char *span, int sampled,
                        char out[TRACEPARENT_LEN + 1]);

/* The trace of an instance: its trace id, its root span's id, its root's
 * parent ("" when none) and whether the caller sampled it (-1: no caller,
 * the exporter's ratio decides).  traceparent is the one it was created
 * with, or NULL. */
typedef struct trace_of {
  char trace[33];
  char root[17];
  char parent[17];
  int sampled;
} trace_of;
void trace_of_instance(const char *workflow, const char *id, int64_t created_ms,
                       const char *traceparent, trace_of *out);

/* The span of step `key`'s attempt `attempt` (its completion, for a sleep
 * or a wait: attempt 0) in that instance's trace, into span. */
void trace_step_span(const char *workflow, const char *id, int64_t created_ms,
                     const char *key, uint32_t attempt, char span[17]);

/* The span of something outside an instance that starts instances (a
 * queue batch, a cron tick): SHA-256 of kind, name and n, into trace and
 * span. */
void trace_event_ids(const char *kind, const char *name, int64_t n,
                     char trace[33], char span[17]);

/* Whether a trace is kept at ratio: the trace id's last 8 bytes, as a
 * fraction, under it (every span of a trace is kept or none). */
int trace_sampled(const char *trace, double ratio);

#endif
