/* telemetry.h — traces of what the engine runs, exported over OTLP/HTTP
 * (its JSON encoding) to a collector: a span per instance (created to
 * ended) and one per step attempt, per completed sleep or wait and per
 * event received, all of one instance in one trace (its creator's when it
 * was created with a W3C traceparent: trace_ids.h); and a span per queue
 * delivery settled and per cron tick fired, each a trace of its own
 * linked to the instances it started.
 *
 * Spans are read from the journal's commits (the driver's committed
 * hook): a commit copies what it needs into a bounded buffer and returns;
 * the exporter's thread names them, samples them by trace and posts them
 * in batches.  A collector that is down costs the buffer's memory and a
 * count of dropped spans, never a step.  Ids are derived from the
 * instance (workflow, id, creation time) and the traceparent kept with it,
 * so the same instance has the same trace on every host and after every
 * restart. */
#ifndef DURO_TELEMETRY_H
#define DURO_TELEMETRY_H

#include <stdint.h>

#include "driver.h"

typedef struct duro_telemetry_options {
  const char *otlp_endpoint; /* "http://collector:4318" (copied) */
  const char *service_name;  /* service.name (copied) */
  double sample;             /* the share of traces kept, 0..1 */
  uint32_t max_spans;        /* spans buffered at most */
  int64_t interval_ms;       /* how often a batch is posted at the least */
} duro_telemetry_options;

/* Turns the export on; before duro_engine_start. */
int duro_telemetry_enable(duro_engine *e, const duro_telemetry_options *o);

/* The 32 hex digits of the trace of instance (workflow, id) created at
 * created_ms, and the 16 of its root span, each into a buffer of 33 and
 * 17: what a collector's spans of it carry. */
void duro_telemetry_trace_id(const char *workflow, const char *id,
                             int64_t created_ms, char trace[33], char span[17]);

extern const duro_driver telemetry_driver;

#endif
