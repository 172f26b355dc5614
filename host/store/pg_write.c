/* pg_write.c — the writer's statements of the PostgreSQL backend (their
 * SQL, prepared on the writer connection as "w<i>"), the group's
 * transaction (BEGIN with the host's fence, COMMIT, ROLLBACK, and the
 * writer connected again when the server dropped it), and every JOP_* op
 * handed to its kind's function (pg_write_*.c). */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"

/* ---- the writer's statements --------------------------------------------
 * Parameters are typed where PostgreSQL could not infer them (a bare $n in
 * a select list, or compared with NULL). */

/* Whether the event type (the parameter $2, or an events row's) is one of
 * those the instance's wait_type lists (journal.h's JOURNAL_WAIT_SEP),
 * each compared whole. */
#define WAIT_LIST "string_to_array(instances.wait_type,'" JOURNAL_WAIT_SEP "')"
#define WAITS_FOR_PARAM "$2::text=ANY(" WAIT_LIST ")"
#define WAITS_FOR_EVENT "type=ANY(" WAIT_LIST ")"

static const char *const write_sql[ST_WRITE_COUNT_] = {
    /* RETURNING gives no row for a duplicate: that is the duplicate. */
    [ST_INSTANCE_INSERT] =
        "INSERT INTO instances(workflow,id,status,params,created_ms,"
        "retention_ms,owner,deadline_ms,parent,parent_close,traceparent,"
        "wake_ms,claim_key) VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,"
        "$13) "
        /* its id taken, or its claim key held by a live instance */
        "ON CONFLICT DO NOTHING RETURNING rowid",
    [ST_INSTANCE_SET] =
        "UPDATE instances SET status=$2, output=$3, error=$4, started_ms=$5, "
        "ended_ms=$6, wake_ms=$7, paused_ms=$8, wait_type=$9, "
        "control=CASE WHEN $10::int<>0 THEN 0 ELSE control END, "
        /* an instance that ended lets go of its claim key */
        "claim_key=CASE WHEN $2 IN ('complete','errored','terminated') "
        "THEN NULL ELSE claim_key END "
        "WHERE rowid=$1",
    [ST_INSTANCE_CONTROL] = "UPDATE instances SET control=$2 WHERE rowid=$1",
    [ST_INSTANCE_CONTROL_CLEAR] =
        "UPDATE instances SET control=0 WHERE rowid=$1",
    [ST_STEP_PUT] =
        "INSERT INTO steps(instance,key,seq,name,count,type,status,"
        "result,error,attempts,started_ms,ended_ms,wake_ms,attempt_started_ms,"
        "build) VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15) "
        "ON CONFLICT(instance,key) DO UPDATE SET seq=excluded.seq,"
        "name=excluded.name,count=excluded.count,type=excluded.type,"
        "status=excluded.status,result=excluded.result,error=excluded.error,"
        "attempts=excluded.attempts,started_ms=excluded.started_ms,"
        "ended_ms=excluded.ended_ms,wake_ms=excluded.wake_ms,"
        "attempt_started_ms=excluded.attempt_started_ms,build=excluded.build",
    [ST_STEPS_DISCARD] = "DELETE FROM steps WHERE instance=$1 AND seq>=$2",
    [ST_ATTEMPTS_DISCARD] =
        "DELETE FROM attempts WHERE instance=$1 AND key NOT IN "
        "(SELECT key FROM steps WHERE instance=$1)",
    /* An instance that ends closes the steps still pending. */
    [ST_STEPS_CANCEL] =
        "UPDATE steps SET status='cancelled', ended_ms=$2, wake_ms=NULL "
        "WHERE instance=$1 AND status='waiting'",
    [ST_INSTANCE_RESTARTED] =
        "UPDATE instances SET restarts=restarts+1, deadline_ms=$2 "
        "WHERE rowid=$1",
    [ST_STEPS_SHIFT_WAKE] =
        "UPDATE steps SET wake_ms=wake_ms+$2 WHERE instance=$1 AND "
        "status='waiting' AND wake_ms IS NOT NULL",
    [ST_ATTEMPT_PUT] =
        "INSERT INTO attempts(instance,key,number,started_ms,"
        "ended_ms,error,build) VALUES($1,$2,$3,$4,$5,$6,$7) "
        "ON CONFLICT(instance,key,number) DO UPDATE SET "
        "started_ms=excluded.started_ms,ended_ms=excluded.ended_ms,"
        "error=excluded.error,build=excluded.build",
    /* Nothing is stored for an instance that has ended: checked in the
     * transaction, so an end that overtakes the event cannot be missed. */
    [ST_EVENT_INSERT] =
        "INSERT INTO events(instance,type,payload,ts_ms) "
        "SELECT $1::bigint,$2::text,$3::text,$4::bigint FROM instances "
        "WHERE rowid=$1::bigint AND "
        "status NOT IN ('complete','errored','terminated') RETURNING seq",
    [ST_EVENT_CONSUME] = "UPDATE events SET consumed_by=$2 WHERE seq=$1",
    [ST_WAKE_IF_WAITING] =
        "WITH u AS (UPDATE instances SET wake_ms=$3 WHERE rowid=$1 AND "
        "status='waiting' AND " WAITS_FOR_PARAM " RETURNING 1) "
        "SELECT (SELECT COUNT(*) FROM u), owner FROM instances WHERE rowid=$1",
    /* Only when it changes. */
    [ST_INSTANCE_PIN] = "UPDATE instances SET build=$2::text WHERE rowid=$1 "
                        "AND build IS DISTINCT FROM $2::text",
    [ST_INSTANCE_RESCHEDULE] =
        "UPDATE instances SET params=COALESCE($3::text,params), wake_ms=$4 "
        "WHERE workflow=$1 AND id=$2 AND status IN ('queued','paused') AND "
        "started_ms IS NULL",
    [ST_INSTANCE_RETAIN] =
        "UPDATE instances SET retention_ms=$2 WHERE rowid=$1",
    [ST_WAKE_IF_EVENT_PENDING] =
        "UPDATE instances SET wake_ms=$2 WHERE rowid=$1 AND "
        "status='waiting' AND wait_type IS NOT NULL AND EXISTS(SELECT 1 "
        "FROM events WHERE instance=$1 AND consumed_by IS NULL "
        "AND " WAITS_FOR_EVENT ")",
    /* One statement for the whole sweep: the picked instances, then their
     * rows everywhere; the count is of instances deleted. */
    [ST_SWEEP] =
        "WITH picked AS (SELECT rowid FROM instances WHERE "
        "ended_ms IS NOT NULL AND (ended_ms + retention_ms) <= $1 AND "
        "status IN ('complete','errored','terminated') LIMIT $2 "
        /* another host sweeping at the same time takes other rows */
        "FOR UPDATE SKIP LOCKED), "
        "s AS (DELETE FROM steps WHERE instance IN (SELECT rowid FROM "
        "picked)), "
        "a AS (DELETE FROM attempts WHERE instance IN (SELECT rowid FROM "
        "picked)), "
        "e AS (DELETE FROM events WHERE instance IN (SELECT rowid FROM "
        "picked)), "
        "l AS (DELETE FROM logs WHERE instance IN (SELECT rowid FROM "
        "picked)), "
        "t AS (DELETE FROM attributes WHERE instance IN (SELECT rowid FROM "
        "picked)), "
        "i AS (DELETE FROM instances WHERE rowid IN (SELECT rowid FROM "
        "picked) RETURNING 1) SELECT COUNT(*) FROM i",
    /* The instance's next number (none for an instance gone), and the
     * oldest lines past the bound ($7) deleted in the same statement. */
    /* One instance deleted at once (a DELETE), only once it has ended,
     * with the rows the sweep deletes with it; what went, counted. */
    [ST_INSTANCE_DELETE] =
        "WITH i AS (DELETE FROM instances WHERE rowid=$1 AND "
        "status IN ('complete','errored','terminated') RETURNING rowid), "
        "s AS (DELETE FROM steps WHERE instance IN (SELECT rowid FROM i) "
        "RETURNING 1), "
        "a AS (DELETE FROM attempts WHERE instance IN (SELECT rowid FROM i) "
        "RETURNING 1), "
        "e AS (DELETE FROM events WHERE instance IN (SELECT rowid FROM i) "
        "RETURNING 1), "
        "l AS (DELETE FROM logs WHERE instance IN (SELECT rowid FROM i) "
        "RETURNING 1), "
        "t AS (DELETE FROM attributes WHERE instance IN (SELECT rowid FROM i)) "
        "SELECT (SELECT COUNT(*) FROM i), (SELECT COUNT(*) FROM s), "
        "(SELECT COUNT(*) FROM a), (SELECT COUNT(*) FROM e), "
        "(SELECT COUNT(*) FROM l)",
    /* The instance's workflow beside it, for the indexes; nothing for an
     * instance gone. */
    [ST_ATTRIBUTE_SET] =
        "INSERT INTO attributes(instance,name,workflow,str,num) "
        "SELECT $1,$2,workflow,$3,$4::double precision FROM instances WHERE "
        "rowid=$1 ON CONFLICT(instance,name) DO UPDATE SET str=excluded.str, "
        "num=excluded.num",
    /* A rescheduled instance's attributes, by its id (the op's key). */
    [ST_ATTRIBUTES_CLEAR_BY_ID] =
        "DELETE FROM attributes WHERE instance=(SELECT rowid FROM instances "
        "WHERE workflow=$1 AND id=$2)",
    [ST_ATTRIBUTE_SET_BY_ID] =
        "INSERT INTO attributes(instance,name,workflow,str,num) "
        "SELECT rowid,$3,workflow,$4,$5::double precision FROM instances "
        "WHERE workflow=$1 AND id=$2 ON CONFLICT(instance,name) DO UPDATE "
        "SET str=excluded.str, num=excluded.num",
    [ST_LOG_APPEND] =
        "WITH ins AS (INSERT INTO logs(instance,n,ts_ms,level,step,attempt,"
        "message) SELECT $1,COALESCE(MAX(n),0)+1,$2,$3,$4,$5,$6 FROM logs "
        "WHERE instance=$1 HAVING EXISTS(SELECT 1 FROM instances WHERE "
        "rowid=$1) ON CONFLICT DO NOTHING RETURNING n), "
        "del AS (DELETE FROM logs WHERE instance=$1 AND "
        "n<=(SELECT n FROM ins)-$7) SELECT n FROM ins",
    [ST_MESSAGE_INSERT] = "INSERT INTO messages(queue,body,attempts,"
                          "visible_ms,sent_ms,traceparent) "
                          "VALUES($1,$2,0,$4,$3,$5) RETURNING seq",
    [ST_MESSAGE_PICK] =
        "SELECT seq,attempts,body,sent_ms,last_error,traceparent FROM messages "
        "WHERE queue=$1 AND visible_ms<=$2 ORDER BY visible_ms,seq LIMIT $3 "
        /* another host's lease of the same messages, not yet committed,
         * is left to it: a message is leased to one consumer at a time */
        "FOR UPDATE SKIP LOCKED",
    /* A keyed consumer's lease (queue_keys.h) counts what every host has
     * in handlers: the leases of one queue by key go one host at a time,
     * and take only what no one else leased meanwhile (an HTTP pull's
     * row locks are waited for, then its lease seen). */
    [ST_MESSAGE_KEY_LOCK] =
        "SELECT pg_advisory_xact_lock(hashtext('duro.queue_keys.'||$1))",
    /* The pointer the queue's keys are of made $2's: when it was
     * another (or none), the keys are cleared, to be computed again as
     * leases meet them.  When it is $2 already, nothing is written (no
     * row lock a lease). */
    [ST_MESSAGE_KEY_POINTER] =
        "WITH stale AS (SELECT 1 WHERE NOT EXISTS(SELECT 1 FROM "
        "queue_key_pointers WHERE queue=$1 AND pointer=$2)), "
        "up AS (INSERT INTO queue_key_pointers(queue,pointer) SELECT $1,$2 "
        "FROM stale ON CONFLICT(queue) DO UPDATE SET "
        "pointer=excluded.pointer RETURNING 1) "
        "UPDATE messages SET key=NULL WHERE queue=$1 AND key IS NOT NULL "
        "AND EXISTS(SELECT 1 FROM up)",
    [ST_MESSAGE_KEY_AHEAD] = PG_SQL_KEY_AHEAD,
    [ST_MESSAGE_KEY_PAGE] = PG_SQL_KEY_PAGE,
    /* The keys a lease computed ($1: {"<seq>": "<key>", ...}), of the
     * messages still in its queue and not in a handler at $3: a host
     * settling one of those must not wait for this lease (its key is
     * computed again by each lease until it is settled). */
    [ST_MESSAGE_KEY_FILL] =
        "UPDATE messages m SET key=f.value FROM jsonb_each_text($1::jsonb) "
        "f WHERE m.seq=f.key::bigint AND m.queue=$2 AND "
        "(m.lease IS NULL OR m.visible_ms<=$3)",
    [ST_MESSAGE_KEY_LEASE] =
        "UPDATE messages SET lease=$2||'-'||seq::text, visible_ms=$3, "
        "attempts=attempts+1 WHERE seq=ANY($1::bigint[]) AND queue=$4 AND "
        "visible_ms<=$5 RETURNING seq",
    [ST_MESSAGE_LEASE] = "UPDATE messages SET lease=$2, visible_ms=$3, "
                         "attempts=attempts+1 WHERE seq=$1",
    /* A lease is held while its message is invisible; its id names its
     * row ("<token>-<seq>"). */
    [ST_MESSAGE_ACK] = "DELETE FROM messages WHERE seq=$4 AND lease=$1 AND "
                       "queue=$2 AND visible_ms>$3",
    [ST_MESSAGE_HELD] = "SELECT seq,attempts FROM messages WHERE seq=$4 AND "
                        "lease=$1 AND queue=$2 AND visible_ms>$3",
    [ST_MESSAGE_MOVE] =
        /* a key is its queue's (queue_key_pointers): one moved to
         * another queue has none yet */
    "UPDATE messages SET queue=$2, lease=NULL, visible_ms=$3, "
    "last_error=COALESCE($4,last_error), "
    "key=CASE WHEN queue=$2 THEN key END WHERE seq=$1",
    [ST_MESSAGE_DELETE] = "DELETE FROM messages WHERE seq=$1",
    [ST_MESSAGES_DROPPED] =
        "INSERT INTO queue_counts(queue,dropped,dead_lettered) "
        "VALUES($1,$2,$3) ON CONFLICT(queue) DO UPDATE SET "
        "dropped=queue_counts.dropped+excluded.dropped,"
        "dead_lettered=queue_counts.dead_lettered+excluded.dead_lettered",
    [ST_CRON_SINCE] =
        "INSERT INTO cron_triggers(trigger,since_ms,complete,failed,missed,"
        "skipped) VALUES($1,$2,0,0,0,0) ON CONFLICT(trigger) DO NOTHING",
    /* A tick is claimed by inserting its row: a second claim changes
     * nothing (out_rowid 0). */
    [ST_CRON_TICK] = "INSERT INTO cron_ticks(trigger,tick_ms,state,"
                     "fired_ms,instance,error) VALUES($1,$2,$3,$4,$5,$6) "
                     "ON CONFLICT(trigger,tick_ms) DO NOTHING",
    [ST_CRON_TICK_SET] = "UPDATE cron_ticks SET state=$3, error=$4 WHERE "
                         "trigger=$1 AND tick_ms=$2 AND state='fired'",
    [ST_CRON_MISSED_EXTRA] = "UPDATE cron_triggers SET missed=missed+$2 "
                             "WHERE trigger=$1",
    /* The counts go with the rows' writes, so they outlive the sweep. */
    [ST_CRON_COUNT] =
        "UPDATE cron_triggers SET "
        "complete=complete+($2::text='complete')::int,"
        "failed=failed+($2::text='failed')::int,"
        "missed=missed+($2::text='missed')::int,"
        "skipped=skipped+($2::text='skipped')::int WHERE trigger=$1",
    [ST_CRON_SWEEP] =
        "DELETE FROM cron_ticks WHERE tick_ms<$1 AND tick_ms<(SELECT "
        "MAX(tick_ms) FROM cron_ticks AS c WHERE c.trigger=cron_ticks.trigger)",
    [ST_PIPELINE_DECLARE] =
        "INSERT INTO pipelines(pipeline,next_seq,accepted,accepted_bytes,"
        "written,written_bytes,files,backlog_bytes) "
        "VALUES($1,0,0,0,0,0,0,0) ON CONFLICT(pipeline) DO NOTHING",
    /* A send: the counter moved once by its $3 records, which are one
     * row, the lines of $2 ($4 bytes, newlines included).  No row: not
     * declared. */
    [ST_PIPELINE_APPEND] =
        "WITH s AS (UPDATE pipelines SET next_seq=next_seq+$3, "
        "accepted=accepted+$3, accepted_bytes=accepted_bytes+$4, "
        "backlog_bytes=backlog_bytes+$4 WHERE pipeline=$1 "
        "RETURNING next_seq-$3 AS base), r AS (INSERT INTO "
        "pipeline_records(pipeline,seq,last,body,bytes,sent_ms) SELECT $1, "
        "s.base+1, s.base+$3, $2, $4, $5 FROM s) SELECT base+1 FROM s",
    [ST_PIPELINE_PLAN] =
        "UPDATE pipelines SET plan_first=$2, plan_last=$3, plan_ms=$4, "
        "plan_host=$5, plan_until=$6 WHERE pipeline=$1 AND plan_first IS NULL",
    [ST_PIPELINE_CLAIM] =
        "UPDATE pipelines SET plan_host=$2, plan_until=$4 WHERE pipeline=$1 "
        "AND plan_first IS NOT NULL AND (plan_host=$2 OR plan_until<=$3)",
    /* The sum reads the records before the DELETE beside it (one
     * snapshot); the DELETE runs only when the plan was this host's. */
    [ST_PIPELINE_DONE] =
        "WITH b AS (SELECT COALESCE(SUM(bytes),0) AS s FROM pipeline_records "
        "WHERE pipeline=$1 AND seq BETWEEN $2 AND $3), d AS (UPDATE pipelines "
        "SET written=written+($3::bigint-$2::bigint+1), "
        "written_bytes=written_bytes+b.s, backlog_bytes=backlog_bytes-b.s, "
        "files=files+1, last_flush_ms=$5, plan_first=NULL, plan_last=NULL, "
        "plan_ms=NULL, plan_host=NULL, plan_until=NULL FROM b WHERE "
        "pipeline=$1 AND plan_first=$2 AND plan_last=$3 AND plan_host=$4 "
        "RETURNING 1), r AS (DELETE FROM pipeline_records WHERE pipeline=$1 "
        "AND seq BETWEEN $2 AND $3 AND EXISTS (SELECT 1 FROM d)) "
        "SELECT COUNT(*) FROM d",
    /* Delivered to the channel's listener when the group commits. */
    /* Bulk actions' jobs (pg_bulk.c). */
    [ST_BULK_INSERT] =
        "INSERT INTO bulk_jobs(workflow,action,terminate,status,prefix,"
        "created_after,created_before,ended_after,ended_before,bound,below,"
        "matched,done,failed,skipped,state,created_ms,host,where_terms,ids) "
        "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,0,0,0,'running',$13,"
        "$14,$15,$16) RETURNING id",
    /* Only where this host runs it; a cancel that came meanwhile stands:
     * the counts move, the state does not. */
    [ST_BULK_PROGRESS] =
        "UPDATE bulk_jobs SET below=$3, done=$4, failed=$5, skipped=$6, "
        "errors=$7, plan=$8, "
        "ended_ms=CASE WHEN state='running' THEN $10::bigint ELSE ended_ms "
        "END, state=CASE WHEN state='running' THEN $9::text ELSE state END "
        "WHERE id=$1 AND host=$2",
    [ST_BULK_CANCEL] = "UPDATE bulk_jobs SET state='cancelled', ended_ms=$2 "
                       "WHERE id=$1 AND state='running'",
    /* A running job is taken by a host when no live host runs it: none
     * yet, or one the takeover found dead (pg_hosts.c), or gone. */
    [ST_BULK_CLAIM] =
        "UPDATE bulk_jobs SET host=$2 WHERE id=$1 AND state='running' AND "
        "(host=$2 OR NOT EXISTS(SELECT 1 FROM hosts WHERE "
        "hosts.id=bulk_jobs.host AND NOT hosts.dead))",
    [ST_BULK_SWEEP] = "DELETE FROM bulk_jobs WHERE id IN (SELECT id FROM "
                      "bulk_jobs WHERE ended_ms IS NOT NULL AND ended_ms<$1 "
                      "LIMIT $2)",
    /* $1 the new text, $2 the old, then the value's place (pg_values.c):
     * written only if it is still the old */
    [ST_RESEAL_PARAMS] =
        "UPDATE instances SET params=$1 WHERE rowid=$3 AND params=$2",
    [ST_RESEAL_OUTPUT] =
        "UPDATE instances SET output=$1 WHERE rowid=$3 AND output=$2",
    [ST_RESEAL_ERROR] =
        "UPDATE instances SET error=$1 WHERE rowid=$3 AND error=$2",
    [ST_RESEAL_STEP_RESULT] = "UPDATE steps SET result=$1 WHERE instance=$3 "
                              "AND key=$4 AND result=$2",
    [ST_RESEAL_STEP_ERROR] = "UPDATE steps SET error=$1 WHERE instance=$3 "
                             "AND key=$4 AND error=$2",
    [ST_RESEAL_ATTEMPT_ERROR] = "UPDATE attempts SET error=$1 WHERE "
                                "instance=$3 AND key=$4 AND number=$5 AND "
                                "error=$2",
    [ST_RESEAL_EVENT] = "UPDATE events SET payload=$1 WHERE seq=$4 AND "
                        "instance=$3 AND payload=$2",
    [ST_RESEAL_LOG] = "UPDATE logs SET message=$1 WHERE instance=$3 AND n=$4 "
                      "AND message=$2",
    [ST_RESEAL_MESSAGE] =
        "UPDATE messages SET body=$1 WHERE seq=$3 AND body=$2",
    [ST_RESEAL_MESSAGE_ERROR] =
        "UPDATE messages SET last_error=$1 WHERE seq=$3 AND last_error=$2",
    [ST_NOTIFY] = "SELECT pg_notify($1, $2)",
    [ST_MESSAGES_EXPIRE] =
        "DELETE FROM messages WHERE seq IN (SELECT seq FROM messages WHERE "
        "queue=$1 AND sent_ms<$2 LIMIT $3)",
    /* A host's lease row, alive, held until the group commits (pg_begin);
     * a dead one divides by zero: an error, so that nothing sent behind
     * it in the same pipeline commits. */
    [ST_FENCE] = "SELECT 1/COUNT(*) FROM (SELECT id FROM hosts WHERE id=$1 "
                 "AND NOT dead FOR SHARE) AS alive",
};

/* Prepares every write statement on the writer connection as "w<i>". */
int pg_prepare_writes(PGconn *c, char *err, size_t errlen) {
  for (int i = 0; i < ST_WRITE_COUNT_; i++) {
    char name[16];
    snprintf(name, sizeof name, "w%d", i);
    PGresult *r = PQprepare(c, name, write_sql[i], 0, NULL);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
      snprintf(err, errlen, "PostgreSQL: preparing %s: %s", name,
               PQresultErrorMessage(r));
    PQclear(r);
    if (!ok)
      return DURO_E_STORAGE;
  }
  return 0;
}

/* A writer connection the server dropped (a restart) is connected again
 * before the next group: its prepared statements are gone with it. */
static int writer_ready(pg_store *pg) {
  if (PQstatus(pg->wr) == CONNECTION_OK)
    return 0;
  char err[512];
  PGconn *c = pg_connect(pg->conninfo, pg->synchronous_full, err, sizeof err);
  if (!c || pg_prepare_writes(c, err, sizeof err) ||
      pg_session_name(pg, c, err, sizeof err)) {
    store_error("%s", err);
    PQfinish(c);
    return DURO_E_STORAGE;
  }
  PQfinish(pg->wr);
  pg->wr = c;
  return 0;
}

/* libpq learns that the server dropped the connection only when it next
 * uses it: a BEGIN that finds it so connects again and begins once more
 * (nothing was written yet), so that a restarted server costs no group.
 * A connection that sat idle with nothing to read was not closed by the
 * server (its closing would be there): then BEGIN is not waited for, it
 * goes out with the group's first writes (pg_pipe.c). */
static int begin_once(pg_store *pg) {
  int quiet = pg_write_quiet(pg);
  if (!quiet) {
    PGresult *r = PQexec(pg->wr, "BEGIN");
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) {
      pg_set_err("BEGIN", pg_failure_of(pg->wr, r));
      pg_drop_if_lost(&pg->wr, r);
    }
    PQclear(r);
    if (!ok)
      return DURO_E_STORAGE;
  }
  /* A host's group holds its own lease row, alive, until it commits (the
   * fence, ST_FENCE), sent with the group's first writes either way. */
  params p = {0};
  p_i64(&p, pg->host);
  return pg_write_begin(pg, !quiet, pg->host ? ST_FENCE : -1, &p);
}

int pg_begin(void *db) {
  pg_store *pg = db;
  if (writer_ready(pg))
    return DURO_E_STORAGE;
  int rc = begin_once(pg);
  if (rc && PQstatus(pg->wr) != CONNECTION_OK && writer_ready(pg) == 0)
    rc = begin_once(pg);
  return rc;
}

/* COMMIT of a transaction that failed answers "ROLLBACK": not committed.
 * A COMMIT the server's crash cut off fails the group like any other
 * failure (it may have landed: then the engine, which runs the instances
 * again from the journal, finds it there), and the connection is made
 * again for the next group.  Behind queued writes it goes out with them
 * and a Sync: one round trip for all (pg_pipe.c). */
int pg_commit(void *db) {
  pg_store *pg = db;
  PGresult *r;
  if (pg->piped) {
    if (pg_write_finish(pg, "COMMIT", &r))
      return DURO_E_STORAGE;
  } else {
    r = PQexec(pg->wr, "COMMIT");
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      pg_set_err("COMMIT", pg_failure_of(pg->wr, r));
      pg_drop_if_lost(&pg->wr, r);
      PQclear(r);
      return DURO_E_STORAGE;
    }
  }
  int rc = 0;
  if (strcmp(PQcmdStatus(r), "COMMIT") != 0) {
    store_error("COMMIT: the transaction was rolled back");
    rc = DURO_E_STORAGE;
  }
  PQclear(r);
  return rc;
}

void pg_rollback(void *db) {
  pg_store *pg = db;
  pg_write_abandon(pg);
  if (PQstatus(pg->wr) == CONNECTION_OK &&
      PQtransactionStatus(pg->wr) != PQTRANS_IDLE) {
    PGresult *r = PQexec(pg->wr, "ROLLBACK");
    PQclear(r);
  }
}

/* Runs a write and puts how many rows it changed in out_rowid. */
int pg_write_changes(pg_store *pg, int which, const params *p, journal_op *op) {
  PGresult *r = pg_write_run(pg, which, p);
  if (!r)
    return DURO_E_STORAGE;
  op->out_rowid = strtoll(PQcmdTuples(r), NULL, 10);
  PQclear(r);
  return 0;
}

/* An insert whose RETURNING gives the new id; no row: *inserted = 0. */
int pg_write_returning(pg_store *pg, int which, const params *p, int *inserted,
                       int64_t *id) {
  PGresult *r = pg_write_run(pg, which, p);
  if (!r)
    return DURO_E_STORAGE;
  *inserted = PQntuples(r) > 0;
  if (*inserted)
    *id = get_i64(r, 0, 0);
  PQclear(r);
  return 0;
}

/* Every op kind is named here, so the compiler tells of a new one left
 * out (-Wswitch). */
int pg_apply(void *db, journal_op *op) {
  pg_store *pg = db;
  switch (op->kind) {
  case JOP_INSTANCE_INSERT:
    return pg_instance_insert(pg, op);
  case JOP_INSTANCE_SET:
    return pg_instance_set(pg, op);
  case JOP_INSTANCE_CONTROL:
  case JOP_INSTANCE_CONTROL_CLEAR:
  case JOP_INSTANCE_RESTARTED:
  case JOP_INSTANCE_PIN:
  case JOP_INSTANCE_RESCHEDULE:
  case JOP_INSTANCE_RETAIN:
    return pg_instance_mark(pg, op);
  case JOP_STEP_PUT:
    return pg_step_put(pg, op);
  case JOP_STEPS_DISCARD:
  case JOP_STEPS_SHIFT_WAKE:
  case JOP_ATTEMPT_PUT:
    return pg_steps_change(pg, op);
  case JOP_EVENT_INSERT:
  case JOP_EVENT_CONSUME:
  case JOP_WAKE_IF_WAITING:
  case JOP_WAKE_IF_EVENT_PENDING:
    return pg_event_apply(pg, op);
  case JOP_SWEEP:
    return pg_sweep(pg, op);
  case JOP_MESSAGE_INSERT:
  case JOP_MESSAGE_ACK:
  case JOP_MESSAGES_EXPIRE:
    return pg_message_apply(pg, op);
  case JOP_MESSAGE_LEASE:
    return pg_message_lease(pg, op);
  case JOP_MESSAGE_RETRY:
    return pg_message_retry(pg, op);
  case JOP_CRON_SINCE:
  case JOP_CRON_TICK:
  case JOP_CRON_TICK_SET:
  case JOP_CRON_SWEEP:
  case JOP_CRON_MISSED_EXTRA:
    return pg_cron_apply(pg, op);
  case JOP_PIPELINE_DECLARE:
  case JOP_PIPELINE_APPEND:
  case JOP_PIPELINE_PLAN:
  case JOP_PIPELINE_CLAIM:
  case JOP_PIPELINE_DONE:
    return pg_pipeline_apply(pg, op);
  case JOP_LOG_APPEND:
    return pg_log_apply(pg, op);
  case JOP_VALUE_RESEAL:
    return pg_value_reseal(pg, op);
  case JOP_INSTANCE_DELETE:
    return pg_instance_delete(pg, op);
  case JOP_ATTRIBUTE_SET:
    return pg_attribute_set(pg, op->rowid, op->attr);
  case JOP_BULK_INSERT:
  case JOP_BULK_PROGRESS:
  case JOP_BULK_CANCEL:
  case JOP_BULK_CLAIM:
  case JOP_BULK_SWEEP:
    return pg_bulk_apply(pg, op);
  }
  store_error("PostgreSQL backend: unknown journal op %d", (int)op->kind);
  return DURO_E_STORAGE;
}
