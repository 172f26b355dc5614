/* p1_records.h — bench P1's sends: 100 records of 100 bytes of JSON a
 * send, made and sent alike by duro-bench's workflow in the engine
 * (bench.c) and by the bench plugin's Pipe in a worker process
 * (http/bench_plugin.c).  Header-only: each side is built on its own. */
#ifndef DURO_BENCH_P1_RECORDS_H
#define DURO_BENCH_P1_RECORDS_H

#include <stdio.h>
#include <string.h>

#include "duro.h"

#define P1_RECORDS 100
#define P1_BYTES 100

/* Record k: {"k":…,"page":…,"user":…,"pad":"xx…"}, P1_BYTES long. */
static inline void p1_record(char *out, unsigned k) {
  int n = snprintf(out, P1_BYTES + 1,
                   "{\"k\":%u,\"page\":\"/products/%06u\",\"user\":"
                   "\"u-%06u\",\"pad\":\"",
                   k, k * 7919u % 1000000u, k * 31u % 1000000u);
  while (n < P1_BYTES - 2)
    out[n++] = 'x';
  memcpy(out + n, "\"}", 3);
}

/* A step callback's send to p of the next P1_RECORDS records, numbered
 * from *sent (atomic: what makes each record differ). */
static inline int p1_send(duro_attempt *a, duro_pipeline *p, unsigned *sent) {
  char text[P1_RECORDS][P1_BYTES + 1];
  const char *recs[P1_RECORDS];
  unsigned k = __atomic_fetch_add(sent, P1_RECORDS, __ATOMIC_RELAXED);
  for (int i = 0; i < P1_RECORDS; i++) {
    p1_record(text[i], k + (unsigned)i);
    recs[i] = text[i];
  }
  int rc = duro_pipeline_send(p, recs, P1_RECORDS);
  if (rc)
    return duro_attempt_fail(a, "pipeline: %s", duro_strerror(rc));
  return duro_attempt_result(a, "1");
}

#endif
