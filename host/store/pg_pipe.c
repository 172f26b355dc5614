/* pg_pipe.c — how a group's writes go out on the writer connection
 * (pg_internal.h): in libpq's pipeline mode, so that a group costs a few
 * round trips, not one an op.
 *
 * A write whose result only needs checking (pg_write_queue) is sent
 * without waiting; its result is read and checked later, at the latest
 * when the group's COMMIT goes out with it (pg_write_finish).  A write
 * whose result is needed at once (pg_write_run) goes out behind the
 * queued ones, and the results of all of them are read in the same round
 * trip.  After a failure the server skips the rest of the pipeline up to
 * its Sync, so one failing write fails the whole group.
 *
 * A group's BEGIN (and a host's fence) is queued too when the connection
 * sat idle with nothing to read (pg_write_quiet): the server did not
 * close it, so it need not be tried first.  A W2 step (BEGIN, its upsert,
 * COMMIT) is one round trip.
 *
 * The pipeline is entered on the group's first queued statement, never
 * before, and left (its Sync sent, every result read) at COMMIT and
 * before anything that cannot run in it (COPY, a multi-statement
 * command): pg_write_finish.  Between groups the connection is never in
 * pipeline mode.  A connection the server dropped is closed and set to
 * NULL (pg_drop_if_lost), with the pipeline's state, so that the next
 * group connects again. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"

/* Queued writes are read at the latest after this many: their results
 * are held by libpq (or the socket) until then. */
#define QUEUE_MAX 256
_Static_assert(QUEUE_MAX <= sizeof((pg_store *)0)->counted /
                                sizeof((pg_store *)0)->counted[0],
               "a counted write per queued one");

/* Drops the writer when `r`'s failure (may be NULL) was the connection's:
 * the pipeline goes with it. */
static void drop_if_lost(pg_store *pg, const PGresult *r) {
  pg_drop_if_lost(&pg->wr, r);
  if (!pg->wr) {
    pg->piped = 0;
    pg->queued = 0;
    pg->fence = 0;
    pg->counted_n = 0;
  }
}

/* A failure to send or to flush: the connection's. */
static int send_failed(pg_store *pg) {
  pg_set_err(NULL, PQerrorMessage(pg->wr));
  drop_if_lost(pg, NULL);
  return DURO_E_STORAGE;
}

static int enter(pg_store *pg) {
  if (pg->piped)
    return 0;
  if (!PQenterPipelineMode(pg->wr)) {
    pg_set_err("pipeline mode", PQerrorMessage(pg->wr));
    return DURO_E_STORAGE;
  }
  pg->piped = 1;
  pg->queued = 0;
  pg->fence = 0;
  pg->counted_n = 0;
  return 0;
}

static int send_prepared(pg_store *pg, int which, const params *p) {
  char name[16];
  snprintf(name, sizeof name, "w%d", which);
  return PQsendQueryPrepared(pg->wr, name, p->n, p->v, NULL, NULL, 0)
             ? 0
             : send_failed(pg);
}

/* The next result of the pipeline, with the NULL that ends each query's
 * results read past; NULL with the failure recorded (and the connection
 * dropped) when there is none to read. */
static PGresult *next_result(pg_store *pg) {
  PGresult *r = PQgetResult(pg->wr);
  if (!r) {
    pg_set_err(NULL, PQerrorMessage(pg->wr));
    drop_if_lost(pg, NULL);
    return NULL;
  }
  if (PQresultStatus(r) != PGRES_PIPELINE_SYNC)
    PQclear(PQgetResult(pg->wr));
  return r;
}

static int succeeded(const PGresult *r) {
  ExecStatusType s = PQresultStatus(r);
  return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

/* Checks a result: 0, or DURO_E_STORAGE with the failure recorded unless
 * one already was (`rc`) and the connection dropped when it was lost. */
static int check(pg_store *pg, const PGresult *r, int rc) {
  if (succeeded(r))
    return rc;
  if (PQresultStatus(r) == PGRES_PIPELINE_ABORTED) { /* skipped, not lost */
    if (rc == 0)
      pg_set_err(NULL, "an earlier write of the group failed");
    return DURO_E_STORAGE;
  }
  if (rc == 0)
    pg_set_err(NULL, pg_failure_of(pg->wr, r));
  drop_if_lost(pg, r);
  return DURO_E_STORAGE;
}

/* The fence's division by zero: this host's row is dead, so another host
 * took over its instances (pg_write_begin). */
static int fence_failed(pg_store *pg, const PGresult *r) {
  const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  if (PQresultStatus(r) != PGRES_FATAL_ERROR || !state ||
      strcmp(state, "22012") != 0)
    return 0;
  store_error("this host (%" PRId64 ") lost its lease: another host took "
              "over its instances",
              pg->host);
  pg_host_lost(pg);
  return 1;
}

/* Reads and checks the results of the queued writes (already flushed or
 * synced): 0, or DURO_E_STORAGE with the first failure recorded.  Stops
 * early only when the connection is gone. */
static int read_queued(pg_store *pg) {
  int rc = 0;
  while (pg->wr && pg->queued) {
    PGresult *r = next_result(pg);
    if (!r)
      return DURO_E_STORAGE;
    pg->queued--;
    pg->reads++;
    if (pg->counted_n && pg->counted[pg->counted_head].at == pg->reads) {
      if (succeeded(r))
        *pg->counted[pg->counted_head].out = strtoll(PQcmdTuples(r), NULL, 10);
      pg->counted_head = (pg->counted_head + 1) % QUEUE_MAX;
      pg->counted_n--;
    }
    if (pg->fence && --pg->fence == 0 && rc == 0 && fence_failed(pg, r))
      rc = DURO_E_STORAGE;
    else
      rc = check(pg, r, rc);
    PQclear(r);
  }
  return pg->wr ? rc : DURO_E_STORAGE;
}

/* Sends a Flush: the server sends what it has answered so far. */
static int flush(pg_store *pg) {
  return PQsendFlushRequest(pg->wr) && PQflush(pg->wr) == 0 ? 0
                                                            : send_failed(pg);
}

int pg_write_quiet(pg_store *pg) {
  struct pollfd fd = {.fd = PQsocket(pg->wr), .events = POLLIN};
  return PQstatus(pg->wr) == CONNECTION_OK && !pg->piped && fd.fd >= 0 &&
         poll(&fd, 1, 0) == 0;
}

int pg_write_begin(pg_store *pg, int begun, int fence, const params *p) {
  if (begun && fence < 0)
    return 0; /* nothing to send */
  int rc = enter(pg);
  if (rc)
    return rc;
  if (!begun) {
    if (!PQsendQueryParams(pg->wr, "BEGIN", 0, NULL, NULL, NULL, NULL, 0))
      return send_failed(pg);
    pg->queued++;
  }
  if (fence < 0)
    return 0;
  if ((rc = send_prepared(pg, fence, p)))
    return rc;
  pg->fence = ++pg->queued;
  return 0;
}

int pg_write_queue(pg_store *pg, int which, const params *p) {
  int rc = enter(pg);
  if (rc || (rc = send_prepared(pg, which, p)))
    return rc;
  pg->queued++;
  if (pg->queued < QUEUE_MAX)
    return 0;
  return flush(pg) ? DURO_E_STORAGE : read_queued(pg);
}

int pg_write_queue_counted(pg_store *pg, int which, const params *p,
                           int64_t *changed) {
  *changed = -1;
  int rc = enter(pg);
  if (rc || (rc = send_prepared(pg, which, p)))
    return rc;
  pg->queued++;
  pg->counted[(pg->counted_head + pg->counted_n++) % QUEUE_MAX] =
      (struct pg_counted){.at = pg->reads + pg->queued, .out = changed};
  if (pg->queued < QUEUE_MAX)
    return 0;
  return flush(pg) ? DURO_E_STORAGE : read_queued(pg);
}

PGresult *pg_write_run(pg_store *pg, int which, const params *p) {
  if (!pg->piped) { /* nothing queued: a plain round trip */
    char name[16];
    snprintf(name, sizeof name, "w%d", which);
    PGresult *r = PQexecPrepared(pg->wr, name, p->n, p->v, NULL, NULL, 0);
    if (check(pg, r, 0)) {
      PQclear(r);
      return NULL;
    }
    return r;
  }
  /* Behind the queued writes, read with theirs in one round trip. */
  if (send_prepared(pg, which, p) || flush(pg))
    return NULL;
  int rc = read_queued(pg);
  if (!pg->wr)
    return NULL;
  PGresult *r = next_result(pg);
  if (!r)
    return NULL;
  if ((rc = check(pg, r, rc))) {
    PQclear(r);
    return NULL;
  }
  return r;
}

/* Reads up to the pipeline's Sync, past whatever comes before it, and
 * leaves pipeline mode: 0, or DURO_E_STORAGE (the connection dropped). */
static int read_to_sync(pg_store *pg) {
  for (int ends = 0;;) {
    PGresult *r = PQgetResult(pg->wr);
    if (!r) {
      /* One NULL ends each query's results; two in a row: nothing left,
       * not even the Sync. */
      if (PQstatus(pg->wr) != CONNECTION_OK || ++ends > 1)
        break;
      continue;
    }
    ends = 0;
    ExecStatusType s = PQresultStatus(r);
    PQclear(r);
    if (s == PGRES_PIPELINE_SYNC) {
      if (!PQexitPipelineMode(pg->wr))
        break;
      pg->piped = 0;
      pg->queued = 0;
      pg->fence = 0;
      pg->counted_n = 0;
      return 0;
    }
  }
  pg_set_err("pipeline", PQerrorMessage(pg->wr));
  drop_if_lost(pg, NULL);
  return DURO_E_STORAGE;
}

int pg_write_finish(pg_store *pg, const char *last, PGresult **result) {
  if (result)
    *result = NULL;
  if (!pg->piped)
    return 0;
  if (last && !PQsendQueryParams(pg->wr, last, 0, NULL, NULL, NULL, NULL, 0))
    return send_failed(pg);
  if (!PQpipelineSync(pg->wr))
    return send_failed(pg);
  int rc = read_queued(pg);
  if (!pg->wr)
    return DURO_E_STORAGE;
  if (last) {
    PGresult *r = next_result(pg);
    if (!r)
      return DURO_E_STORAGE;
    rc = check(pg, r, rc);
    if (rc == 0 && result)
      *result = r;
    else
      PQclear(r);
    if (!pg->wr)
      return DURO_E_STORAGE;
  }
  if (read_to_sync(pg)) {
    if (result) {
      PQclear(*result);
      *result = NULL;
    }
    return DURO_E_STORAGE;
  }
  return rc;
}

void pg_write_abandon(pg_store *pg) {
  if (!pg->piped)
    return;
  if (!PQpipelineSync(pg->wr)) {
    send_failed(pg);
    return;
  }
  read_to_sync(pg);
}
