/* pipeline_check.h — what the suites of pipelines on a real host share
 * (test_pipeline_host, whose sink is files, and test_pipeline_s3, whose
 * sink is a bucket): the host with pipeline `events`, its counts, numbered
 * records sent in batches and what became of each, the batches read back
 * and checked to follow one another, and the engine SIGKILLed at random
 * moments meanwhile.
 *
 * A record is {"s":S,"i":N} (or {"s":S,"i":N,"pad":"ppp..."}): record N
 * of sender S.  Failures are Check assertions: call from test cases. */
#ifndef DURO_TEST_PIPELINE_CHECK_H
#define DURO_TEST_PIPELINE_CHECK_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "host_run.h"

/* ---- the host ------------------------------------------------------------ */

/* `duro run` of `h` (host_init()'ed as `name`) with the plugins of
 * `plugins` (a YAML list) and pipeline `events` (binding EVENTS), its
 * sink the YAML lines `sink` ("    sink: ...\n", indented by 4), its
 * other keys the YAML lines `keys` (indented by 4 too). */
void pipeline_host_start(host_run *h, const char *name, const char *plugins,
                         const char *sink, const char *keys);

/* GET /pipelines/events, which must answer 200 (caller's). */
json_t *pipeline_stats(const host_run *h);

/* The integer at `path` of `stats`, which must be there. */
int64_t pipeline_stat(json_t *stats, const char *path);

/* Polls until nothing waits and, unless `written` is negative, that many
 * records are written; fails after `ms`. */
void pipeline_wait_written(const host_run *h, int64_t written, int ms);

/* ---- sending ------------------------------------------------------------- */

/* What a 503 said: its error code, whether it said Retry-After. */
typedef struct pipeline_refusal {
  char code[64];
  int retry_after;
} pipeline_refusal;

/* Records n0 .. n0+count-1 of sender `s`, each with `pad` bytes of
 * padding (none: no "pad"), POSTed as one request: its status, 0 when no
 * answer came; a 503's details into *why (when not NULL). */
long pipeline_send(const host_run *h, int s, int n0, int count, size_t pad,
                   pipeline_refusal *why);

#define PIPELINE_SENDERS 2
#define PIPELINE_MAX_RECORDS 200000
#define PIPELINE_BATCH 50

/* What became of each record sent: 0 never sent, 1 answered 202, 2 sent
 * with no answer (or a 503: the engine going away). */
typedef struct pipeline_fates {
  unsigned char fate[PIPELINE_SENDERS][PIPELINE_MAX_RECORDS];
  int sent[PIPELINE_SENDERS]; /* records sent by each sender */
} pipeline_fates;

/* Sender s's next PIPELINE_BATCH records (with `pad`), sent once
 * whatever the answer, noted in `f`. */
void pipeline_send_batch(const host_run *h, pipeline_fates *f, int s,
                         size_t pad);

/* Checks the records read back (`lines`, one record a line, in the order
 * of the batches): each one sent and there at most once, each sender's in
 * the order sent, and every one answered 202 there.  Returns how many
 * were answered 202. */
int pipeline_fates_check(const pipeline_fates *f, const char *lines);

/* ---- reading back -------------------------------------------------------- */

/* A batch of the sink: a file or an object named
 * events-FIRST-LAST.jsonl.gz after the sequence numbers of its records. */
typedef struct pipeline_batch {
  char name[600]; /* the file's path, the object's key */
  long long first, last;
} pipeline_batch;

/* Takes b->name's first and last from its last part; fails when it is no
 * batch's name. */
void pipeline_batch_parse(pipeline_batch *b);

/* The batches' text, read by `read` (malloc'ed), one after another in
 * the order of their first sequence number (v is sorted): each must
 * follow the one before from 1 (no gap, no overlap) and hold as many
 * lines as its range says.  The text of all, malloc'ed. */
char *pipeline_read_batches(pipeline_batch *v, size_t n,
                            char *(*read)(const pipeline_batch *b));

/* ---- kills --------------------------------------------------------------- */

/* A thread that SIGKILLs the host's engine `want` times at random
 * moments, 150-900 ms apart. */
typedef struct pipeline_killer {
  const host_run *h;
  int want;
  int kills, stop; /* atomic */
  unsigned seed;
  pthread_t thread;
} pipeline_killer;

void pipeline_killer_start(pipeline_killer *k, const host_run *h, int want);

/* How many kills so far. */
int pipeline_killer_kills(pipeline_killer *k);

/* Stops and joins it: it must have killed `want` times, and the
 * supervisor must have started each engine killed once ready after its
 * first delay (a SIGKILL from outside adds nothing to its back-off). */
void pipeline_killer_stop(pipeline_killer *k);

#endif
