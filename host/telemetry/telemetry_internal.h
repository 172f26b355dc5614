/* telemetry_internal.h — what the files of telemetry/ share.  Not for
 * other modules.
 *
 *   telemetry.c       the driver: options, the buffer the commits fill,
 *                     metrics, the exporter's thread
 *   span_capture.c    a committed batch's ops made span records
 *   span_export.c     a batch of records named, sampled, made OTLP JSON
 *                     and posted */
#ifndef DURO_TELEMETRY_INTERNAL_H
#define DURO_TELEMETRY_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "driver.h"
#include "journal.h"
#include "telemetry.h"

/* An instance's spans (SPAN_EVENT: an event it was sent), and those of
 * what starts instances, each a trace of its own linked to them: a queue
 * delivery settled (SPAN_QUEUE), a cron tick fired (SPAN_TICK). */
enum {
  SPAN_INSTANCE,
  SPAN_ATTEMPT,
  SPAN_STEP,
  SPAN_EVENT,
  SPAN_QUEUE,
  SPAN_TICK,
  /* an activation of an instance, from its start to its final commit:
   * its build, the instance's status after it (code), its outcome (in
   * the subject string) */
  SPAN_ACTIVATION,
  /* not a span: an instance created (rowid, workflow, id, creation,
   * traceparent), which names the spans it will have (telemetry.names) */
  SPAN_NAME
};

/* A span another links to: its trace and span ids. */
typedef struct span_link {
  char trace[33], span[17];
} span_link;

/* One span as the exporter reads it (span_view): pointers into its
 * slot, or static (step_kind, status).  workflow and id are NULL for all
 * but SPAN_INSTANCE: the exporter names the instance from its rowid. */
typedef struct span_rec {
  int kind;
  int64_t rowid;
  const char *workflow, *id;
  int64_t created_ms;     /* JOURNAL_NONE until named */
  const char *key, *name; /* the step's key and name (not SPAN_INSTANCE) */
  const char *step_kind;  /* "do", "sleep", ... (a step's, or NULL) */
  uint32_t attempt;
  const char *build;
  /* the instance's end status (SPAN_INSTANCE), or its status after the
   * activation (SPAN_ACTIVATION) */
  const char *status;
  const char *error;       /* {"name","message"} text, or NULL: it went well */
  const char *traceparent; /* the instance's creator's, or NULL */
  const char *sender;      /* SPAN_EVENT: its sender's traceparent, or NULL */
  /* SPAN_QUEUE and SPAN_TICK: their own ids, the queue or trigger, how
   * many messages it settled (or the tick's time), and the instances it
   * started */
  span_link self;
  const char *subject;
  int64_t count;
  const span_link *links;
  size_t n_links;
  int64_t start_ms, end_ms;
} span_rec;

/* The strings a slot may carry, in the order it holds them. */
enum {
  SS_WORKFLOW,
  SS_ID,
  SS_KEY,
  SS_NAME,
  SS_BUILD,
  SS_ERROR,
  SS_TRACEPARENT,
  SS_SENDER,
  SS_SUBJECT,
  SS_N
};

/* What a SPAN_QUEUE or SPAN_TICK slot's data starts with (then its
 * n_links links, then its strings). */
typedef struct span_started {
  span_link self;
  int64_t count;
  size_t n_links;
} span_started;

#define SPAN_INLINE 48

/* One span as a commit saw it, as the buffer keeps it: 96 bytes, and no
 * allocation for a span whose strings fit in SPAN_INLINE bytes (a step's
 * key, name and build, an instance's workflow and UUID): what a commit
 * copies is little, and into memory the buffer reuses. */
typedef struct span_slot {
  int64_t rowid, created_ms, start_ms, end_ms;
  uint32_t attempt;
  uint32_t len; /* bytes of data */
  uint16_t has; /* 1 << SS_* of the strings data holds, each NUL-ended */
  uint8_t kind;
  uint8_t code; /* 0, or 1 + the instance's status (SPAN_INSTANCE) or the
                 * step's type (a completed step's span) */
  union {
    char in[SPAN_INLINE]; /* len <= SPAN_INLINE, not QUEUE or TICK */
    char *heap;           /* else, owned */
  } data;
} span_slot;

/* Frees what s owns and zeroes it. */
void span_slot_clear(span_slot *s);

/* The span s holds, pointing into s (valid while s is). */
void span_view(const span_slot *s, span_rec *r);

typedef struct telemetry {
  duro_engine *e;
  int on;
  char *endpoint, *service;
  double sample;
  uint32_t max;
  int64_t interval_ms;
  pthread_mutex_t mu; /* guards what follows */
  pthread_cond_t wake;
  span_slot *ring; /* max of them, from head, n used */
  size_t head, n;
  /* taken off the ring by the exporter and not yet posted: they count
   * against max too, so a collector that is down costs max spans */
  size_t held;
  /* the instances created since the exporter last looked (SPAN_NAME
   * slots, max at most; past it they are named from the journal) */
  span_slot *names;
  size_t n_names, cap_names;
  int started, stop;
  pthread_t thread;
  /* counts for /metrics */
  uint64_t exported, dropped, errors;
  /* the exporter's thread only (span_export.c): the instances named, the
   * connection to the collector, the body being written */
  struct span_exporter *x;
} telemetry;

/* span_capture.c: appends batch b's spans to t's buffer (dropping what
 * does not fit, counted). */
void span_capture(telemetry *t, const journal_batch *b);
/* The same for an activation's span, once its final commit is on disk. */
void span_capture_activation(telemetry *t, const duro_activation_report *r);

/* span_export.c: names, samples and posts v[0..n); 0, or -1 when the
 * collector did not take them (why in err). */
int span_export(telemetry *t, const span_slot *v, size_t n, char *err,
                size_t errlen);

/* span_export.c: the instances v[0..n) names (SPAN_NAME) kept for the
 * spans to come, and v cleared. */
void span_names(telemetry *t, span_slot *v, size_t n);

/* Frees what span_export kept between calls (t->x). */
void span_export_free(telemetry *t);

#endif
