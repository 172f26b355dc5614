/* sqlite_write.c — the writer's statements of the SQLite backend (their
 * SQL, prepared once at the opening), the group's transaction, and every
 * JOP_* op handed to its kind's function (sqlite_write_*.c). */
#include <sqlite3.h>

#include "sqlite_internal.h"

/* Whether the event type (the parameter ?2, or an events row's) is one of
 * those the instance's wait_type lists (journal.h's JOURNAL_WAIT_SEP),
 * whole: each listed type lies between two separators, and so does the
 * type sought.  instr, not LIKE, whose '_' and '%' a type may hold. */
#define WAIT_SEP_AROUND(x)                                                     \
  "'" JOURNAL_WAIT_SEP "'||" x "||'" JOURNAL_WAIT_SEP "'"
#define WAIT_LIST WAIT_SEP_AROUND("instances.wait_type")
#define WAITS_FOR_PARAM "instr(" WAIT_LIST "," WAIT_SEP_AROUND("?2") ")>0"
#define WAITS_FOR_EVENT "instr(" WAIT_LIST "," WAIT_SEP_AROUND("type") ")>0"

const char *const sqlite_write_sql[ST_WRITE_COUNT_] = {
    [ST_INSTANCE_INSERT] =
        "INSERT INTO instances(workflow,id,status,params,created_ms,"
        "retention_ms,deadline_ms,parent,parent_close,traceparent,wake_ms) "
        "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11) "
        "ON CONFLICT(workflow,id) DO NOTHING",
    [ST_INSTANCE_SET] =
        "UPDATE instances SET status=?2, output=?3, error=?4, started_ms=?5, "
        "ended_ms=?6, wake_ms=?7, paused_ms=?8, wait_type=?9, "
        "control=CASE WHEN ?10 THEN 0 ELSE control END "
        "WHERE rowid=?1",
    [ST_INSTANCE_CONTROL] = "UPDATE instances SET control=?2 WHERE rowid=?1",
    [ST_INSTANCE_CONTROL_CLEAR] =
        "UPDATE instances SET control=0 WHERE rowid=?1",
    [ST_STEP_PUT] =
        "INSERT OR REPLACE INTO steps(instance,key,seq,name,count,type,status,"
        "result,error,attempts,started_ms,ended_ms,wake_ms,attempt_started_ms,"
        "build) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15)",
    [ST_STEPS_DISCARD] = "DELETE FROM steps WHERE instance=?1 AND seq>=?2",
    [ST_ATTEMPTS_DISCARD] =
        "DELETE FROM attempts WHERE instance=?1 AND key NOT IN "
        "(SELECT key FROM steps WHERE instance=?1)",
    /* An instance that ends closes the steps still pending (a back-off,
     * a sleep, an event wait): nothing will run them. */
    [ST_STEPS_CANCEL] =
        "UPDATE steps SET status='cancelled', ended_ms=?2, wake_ms=NULL "
        "WHERE instance=?1 AND status='waiting'",
    [ST_INSTANCE_RESTARTED] =
        "UPDATE instances SET restarts=restarts+1, deadline_ms=?2 "
        "WHERE rowid=?1",
    [ST_STEPS_SHIFT_WAKE] =
        "UPDATE steps SET wake_ms=wake_ms+?2 WHERE instance=?1 AND "
        "status='waiting' AND wake_ms IS NOT NULL",
    [ST_ATTEMPT_PUT] =
        "INSERT OR REPLACE INTO attempts(instance,key,number,started_ms,"
        "ended_ms,error,build) VALUES(?1,?2,?3,?4,?5,?6,?7)",
    /* Nothing is stored for an instance that has ended: checked in the
     * commit, so an end that overtakes the event cannot be missed. */
    [ST_EVENT_INSERT] = "INSERT INTO events(instance,type,payload,ts_ms) "
                        "SELECT ?1,?2,?3,?4 FROM instances WHERE rowid=?1 AND "
                        "status NOT IN ('complete','errored','terminated')",
    [ST_EVENT_CONSUME] = "UPDATE events SET consumed_by=?2 WHERE seq=?1",
    [ST_WAKE_IF_WAITING] = "UPDATE instances SET wake_ms=?3 WHERE rowid=?1 AND "
                           "status='waiting' AND " WAITS_FOR_PARAM,
    /* Only when it changes: the pin index is not touched by the many
     * status writes of an instance. */
    [ST_INSTANCE_PIN] = "UPDATE instances SET build=?2 WHERE rowid=?1 AND "
                        "build IS NOT ?2",
    [ST_INSTANCE_RESCHEDULE] =
        "UPDATE instances SET params=COALESCE(?3,params), wake_ms=?4 "
        "WHERE workflow=?1 AND id=?2 AND status IN ('queued','paused') AND "
        "started_ms IS NULL",
    [ST_INSTANCE_RETAIN] =
        "UPDATE instances SET retention_ms=?2 WHERE rowid=?1",
    [ST_WAKE_IF_EVENT_PENDING] =
        "UPDATE instances SET wake_ms=?2 WHERE rowid=?1 AND "
        "status='waiting' AND wait_type IS NOT NULL AND EXISTS(SELECT 1 "
        "FROM events WHERE instance=?1 AND consumed_by IS NULL "
        "AND " WAITS_FOR_EVENT ")",
    /* The expression matches the instances_expiry index. */
    [ST_SWEEP_PICK] =
        "INSERT INTO temp.sweep SELECT rowid FROM instances WHERE "
        "ended_ms IS NOT NULL AND ended_ms + retention_ms <= ?1 AND "
        "status IN ('complete','errored','terminated') LIMIT ?2",
    [ST_SWEEP_STEPS] =
        "DELETE FROM steps WHERE instance IN (SELECT id FROM temp.sweep)",
    [ST_SWEEP_ATTEMPTS] =
        "DELETE FROM attempts WHERE instance IN (SELECT id FROM temp.sweep)",
    [ST_SWEEP_EVENTS] =
        "DELETE FROM events WHERE instance IN (SELECT id FROM temp.sweep)",
    [ST_SWEEP_INSTANCES] =
        "DELETE FROM instances WHERE rowid IN (SELECT id FROM temp.sweep)",
    [ST_SWEEP_CLEAR] = "DELETE FROM temp.sweep",
    [ST_SWEEP_LOGS] =
        "DELETE FROM logs WHERE instance IN (SELECT id FROM temp.sweep)",
    [ST_SWEEP_ATTRIBUTES] = "DELETE FROM attributes WHERE instance IN "
                            "(SELECT id FROM temp.sweep)",
    /* One instance deleted at once (a DELETE), only once it has ended:
     * the rows the sweep deletes with it go in the same transaction. */
    [ST_DELETE_INSTANCE] = "DELETE FROM instances WHERE rowid=?1 AND "
                           "status IN ('complete','errored','terminated')",
    [ST_DELETE_STEPS] = "DELETE FROM steps WHERE instance=?1",
    [ST_DELETE_ATTEMPTS] = "DELETE FROM attempts WHERE instance=?1",
    [ST_DELETE_EVENTS] = "DELETE FROM events WHERE instance=?1",
    [ST_DELETE_LOGS] = "DELETE FROM logs WHERE instance=?1",
    [ST_DELETE_ATTRIBUTES] = "DELETE FROM attributes WHERE instance=?1",
    /* The instance's workflow beside it, for the indexes; nothing for an
     * instance gone. */
    [ST_ATTRIBUTE_SET] =
        "INSERT INTO attributes(instance,name,workflow,str,num) "
        "SELECT ?1,?2,workflow,?3,?4 FROM instances WHERE rowid=?1 "
        "ON CONFLICT(instance,name) DO UPDATE SET str=excluded.str, "
        "num=excluded.num",
    /* A rescheduled instance's attributes, by its id (the op's key). */
    [ST_ATTRIBUTES_CLEAR_BY_ID] =
        "DELETE FROM attributes WHERE instance=(SELECT rowid FROM instances "
        "WHERE workflow=?1 AND id=?2)",
    [ST_ATTRIBUTE_SET_BY_ID] =
        "INSERT INTO attributes(instance,name,workflow,str,num) "
        "SELECT rowid,?3,workflow,?4,?5 FROM instances WHERE workflow=?1 AND "
        "id=?2 ON CONFLICT(instance,name) DO UPDATE SET str=excluded.str, "
        "num=excluded.num",
    /* The instance's next number; no line for an instance gone. */
    [ST_LOG_APPEND] =
        "INSERT OR IGNORE INTO logs(instance,n,ts_ms,level,step,attempt,"
        "message) SELECT ?1,COALESCE(MAX(n),0)+1,?2,?3,?4,?5,?6 FROM logs "
        "WHERE instance=?1 HAVING EXISTS(SELECT 1 FROM instances WHERE "
        "rowid=?1) RETURNING n",
    [ST_LOG_TRIM] = "DELETE FROM logs WHERE instance=?1 AND n<=?2",
    [ST_MESSAGE_INSERT] = "INSERT INTO messages(queue,body,attempts,"
                          "visible_ms,sent_ms,traceparent) "
                          "VALUES(?1,?2,0,?4,?3,?5)",
    /* Served by messages_next: the queue's visible messages in order. */
    [ST_MESSAGE_PICK] =
        "SELECT seq,attempts,body,sent_ms,last_error,traceparent FROM messages "
        "WHERE queue=?1 AND visible_ms<=?2 ORDER BY visible_ms,seq LIMIT ?3",
    /* A keyed consumer's (queue_keys.h): the pointer its queue's keys
     * are of, and the keys cleared when it is another. */
    [ST_MESSAGE_KEY_POINTER] =
        "SELECT pointer FROM queue_key_pointers WHERE queue=?1",
    [ST_MESSAGE_KEY_POINTER_SET] =
        "INSERT INTO queue_key_pointers(queue,pointer) VALUES(?1,?2) "
        "ON CONFLICT(queue) DO UPDATE SET pointer=excluded.pointer",
    [ST_MESSAGE_KEYS_CLEAR] =
        "UPDATE messages SET key=NULL WHERE queue=?1 AND key IS NOT NULL",
    [ST_MESSAGE_KEY_AHEAD] = SQLITE_SQL_KEY_AHEAD,
    [ST_MESSAGE_KEY_PICK] = SQLITE_SQL_KEY_PICK,
    [ST_MESSAGE_KEY_FILL] = "UPDATE messages SET key=?2 WHERE seq=?1",
    [ST_MESSAGE_LEASE] = "UPDATE messages SET lease=?2, visible_ms=?3, "
                         "attempts=attempts+1 WHERE seq=?1",
    /* A lease is held while its message is invisible: once visible_ms
     * passed, the message may be pulled again under another lease.  A
     * lease id names its message ("<token>-<seq>", lease_seq), so an ack
     * finds the row by its key and needs no index on leases (bench Q1:
     * one index fewer to keep on every lease and ack). */
    [ST_MESSAGE_ACK] = "DELETE FROM messages WHERE seq=?4 AND lease=?1 AND "
                       "queue=?2 AND visible_ms>?3",
    [ST_MESSAGE_HELD] = "SELECT seq,attempts FROM messages WHERE seq=?4 AND "
                        "lease=?1 AND queue=?2 AND visible_ms>?3",
    [ST_MESSAGE_MOVE] =
        /* a key is its queue's (queue_key_pointers): one moved to
         * another queue has none yet */
    "UPDATE messages SET queue=?2, lease=NULL, visible_ms=?3, "
    "last_error=COALESCE(?4,last_error), "
    "key=CASE WHEN queue=?2 THEN key END WHERE seq=?1",
    [ST_MESSAGE_DELETE] = "DELETE FROM messages WHERE seq=?1",
    [ST_MESSAGES_DROPPED] =
        "INSERT INTO queue_counts(queue,dropped,dead_lettered) "
        "VALUES(?1,?2,?3) ON CONFLICT(queue) DO UPDATE SET "
        "dropped=dropped+excluded.dropped,"
        "dead_lettered=dead_lettered+excluded.dead_lettered",
    /* Served by messages_age. */
    [ST_CRON_SINCE] = "INSERT OR IGNORE INTO cron_triggers(trigger,since_ms,"
                      "complete,failed,missed,skipped) VALUES(?1,?2,0,0,0,0)",
    /* A tick is claimed by inserting its row: a second claim changes
     * nothing (out_rowid 0). */
    [ST_CRON_TICK] = "INSERT OR IGNORE INTO cron_ticks(trigger,tick_ms,state,"
                     "fired_ms,instance,error) VALUES(?1,?2,?3,?4,?5,?6)",
    /* Only a tick still `fired` is settled, once. */
    [ST_CRON_TICK_SET] = "UPDATE cron_ticks SET state=?3, error=?4 WHERE "
                         "trigger=?1 AND tick_ms=?2 AND state='fired'",
    [ST_CRON_MISSED_EXTRA] = "UPDATE cron_triggers SET missed=missed+?2 "
                             "WHERE trigger=?1",
    /* The counts go with the rows' writes, so they outlive the rows the
     * sweep deletes. */
    [ST_CRON_COUNT] =
        "UPDATE cron_triggers SET complete=complete+(?2='complete'),"
        "failed=failed+(?2='failed'),missed=missed+(?2='missed'),"
        "skipped=skipped+(?2='skipped') WHERE trigger=?1",
    /* Ticks older than ?1, but each trigger's newest, which says where
     * its schedule stands. */
    [ST_CRON_SWEEP] =
        "DELETE FROM cron_ticks WHERE tick_ms<?1 AND tick_ms<(SELECT "
        "MAX(tick_ms) FROM cron_ticks AS c WHERE c.trigger=cron_ticks.trigger)",
    [ST_MESSAGES_EXPIRE] =
        "DELETE FROM messages WHERE seq IN (SELECT seq FROM messages WHERE "
        "queue=?1 AND sent_ms<?2 LIMIT ?3)",
    [ST_PIPELINE_DECLARE] =
        "INSERT OR IGNORE INTO pipelines(pipeline,next_seq,accepted,"
        "accepted_bytes,written,written_bytes,files,backlog_bytes) "
        "VALUES(?1,0,0,0,0,0,0,0)",
    /* A send's seqs reserved at once: next_seq is its last record's. */
    [ST_PIPELINE_NEXT] =
        "UPDATE pipelines SET next_seq=next_seq+?3, accepted=accepted+?3, "
        "accepted_bytes=accepted_bytes+?2, backlog_bytes=backlog_bytes+?2 "
        "WHERE pipeline=?1 RETURNING next_seq",
    [ST_PIPELINE_RECORD] = "INSERT INTO pipeline_records(pipeline,seq,last,"
                           "body,bytes,sent_ms) VALUES(?1,?2,?3,?4,?5,?6)",
    [ST_PIPELINE_PLAN] =
        "UPDATE pipelines SET plan_first=?2, plan_last=?3, plan_ms=?4, "
        "plan_host=?5, plan_until=?6 WHERE pipeline=?1 AND plan_first IS NULL",
    [ST_PIPELINE_CLAIM] =
        "UPDATE pipelines SET plan_host=?2, plan_until=?4 WHERE pipeline=?1 "
        "AND plan_first IS NOT NULL AND (plan_host=?2 OR plan_until<=?3)",
    /* The records of a plan are all there until it is done: its seqs were
     * taken from stored rows, whole (plan_first a row's seq, plan_last a
     * row's last), and later ones are above them. */
    [ST_PIPELINE_DONE] =
        "UPDATE pipelines SET written=written+(?3-?2+1), "
        "written_bytes=written_bytes+(SELECT TOTAL(bytes) FROM "
        "pipeline_records WHERE pipeline=?1 AND seq BETWEEN ?2 AND ?3), "
        "backlog_bytes=backlog_bytes-(SELECT TOTAL(bytes) FROM "
        "pipeline_records WHERE pipeline=?1 AND seq BETWEEN ?2 AND ?3), "
        "files=files+1, last_flush_ms=?5, plan_first=NULL, plan_last=NULL, "
        "plan_ms=NULL, plan_host=NULL, plan_until=NULL WHERE pipeline=?1 AND "
        "plan_first=?2 AND plan_last=?3 AND plan_host=?4",
    [ST_PIPELINE_DELETE] = "DELETE FROM pipeline_records WHERE pipeline=?1 "
                           "AND seq BETWEEN ?2 AND ?3",
    /* A group's transaction: prepared once, as every other write. */
    /* Bulk actions' jobs (sqlite_bulk.c). */
    [ST_BULK_INSERT] =
        "INSERT INTO bulk_jobs(workflow,action,terminate,status,prefix,"
        "created_after,created_before,ended_after,ended_before,bound,below,"
        "matched,done,failed,skipped,state,created_ms,host,where_terms,ids) "
        "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,0,0,0,'running',?13,?"
        "14,?15,?16)",
    /* A cancel that came meanwhile stands: the counts move, the state
     * does not. */
    [ST_BULK_PROGRESS] =
        "UPDATE bulk_jobs SET below=?3, done=?4, failed=?5, skipped=?6, "
        "errors=?7, plan=?8, "
        "ended_ms=CASE WHEN state='running' THEN ?10 ELSE ended_ms END, "
        "state=CASE WHEN state='running' THEN ?9 ELSE state END "
        "WHERE id=?1 AND host=?2",
    [ST_BULK_CANCEL] = "UPDATE bulk_jobs SET state='cancelled', ended_ms=?2 "
                       "WHERE id=?1 AND state='running'",
    /* One host: every running job is its own. */
    [ST_BULK_CLAIM] = "UPDATE bulk_jobs SET host=?2 WHERE id=?1 AND "
                      "state='running'",
    [ST_BULK_SWEEP] = "DELETE FROM bulk_jobs WHERE id IN (SELECT id FROM "
                      "bulk_jobs WHERE ended_ms IS NOT NULL AND ended_ms<?1 "
                      "LIMIT ?2)",
    /* ?1 the new text, ?2 the old, then the value's place
     * (sqlite_values.c): written only if it is still the old */
    [ST_RESEAL_PARAMS] =
        "UPDATE instances SET params=?1 WHERE rowid=?3 AND params=?2",
    [ST_RESEAL_OUTPUT] =
        "UPDATE instances SET output=?1 WHERE rowid=?3 AND output=?2",
    [ST_RESEAL_ERROR] =
        "UPDATE instances SET error=?1 WHERE rowid=?3 AND error=?2",
    [ST_RESEAL_STEP_RESULT] = "UPDATE steps SET result=?1 WHERE instance=?3 "
                              "AND key=?4 AND result=?2",
    [ST_RESEAL_STEP_ERROR] = "UPDATE steps SET error=?1 WHERE instance=?3 "
                             "AND key=?4 AND error=?2",
    [ST_RESEAL_ATTEMPT_ERROR] = "UPDATE attempts SET error=?1 WHERE "
                                "instance=?3 AND key=?4 AND number=?5 AND "
                                "error=?2",
    [ST_RESEAL_EVENT] = "UPDATE events SET payload=?1 WHERE seq=?4 AND "
                        "instance=?3 AND payload=?2",
    [ST_RESEAL_LOG] = "UPDATE logs SET message=?1 WHERE instance=?3 AND n=?4 "
                      "AND message=?2",
    [ST_RESEAL_MESSAGE] =
        "UPDATE messages SET body=?1 WHERE seq=?3 AND body=?2",
    [ST_RESEAL_MESSAGE_ERROR] =
        "UPDATE messages SET last_error=?1 WHERE seq=?3 AND last_error=?2",
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
};

int sqlite_step_done(sqlite_store *sq, sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
    sqlite_set_err(sq->wr, NULL);
    return DURO_E_STORAGE;
  }
  return 0;
}

/* sqlite_step_done, then how many rows the statement changed into out_rowid. */
int sqlite_step_changes(sqlite_store *sq, sqlite3_stmt *st, journal_op *op) {
  int rc = sqlite_step_done(sq, st);
  op->out_rowid = rc == 0 ? sqlite3_changes(sq->wr) : 0;
  return rc;
}

/* Every op kind is named here, so the compiler tells of a new one left
 * out (-Wswitch). */
int sqlite_apply(void *db, journal_op *op) {
  sqlite_store *sq = db;
  switch (op->kind) {
  case JOP_INSTANCE_INSERT:
    return sqlite_instance_insert(sq, op);
  case JOP_INSTANCE_SET:
    return sqlite_instance_set(sq, op);
  case JOP_INSTANCE_CONTROL:
  case JOP_INSTANCE_CONTROL_CLEAR:
  case JOP_INSTANCE_RESTARTED:
  case JOP_INSTANCE_PIN:
  case JOP_INSTANCE_RESCHEDULE:
  case JOP_INSTANCE_RETAIN:
    return sqlite_instance_mark(sq, op);
  case JOP_STEP_PUT:
    return sqlite_step_put(sq, op);
  case JOP_STEPS_DISCARD:
  case JOP_STEPS_SHIFT_WAKE:
  case JOP_ATTEMPT_PUT:
    return sqlite_steps_change(sq, op);
  case JOP_EVENT_INSERT:
  case JOP_EVENT_CONSUME:
  case JOP_WAKE_IF_WAITING:
  case JOP_WAKE_IF_EVENT_PENDING:
    return sqlite_event_apply(sq, op);
  case JOP_SWEEP:
    return sqlite_sweep(sq, op);
  case JOP_MESSAGE_INSERT:
  case JOP_MESSAGE_ACK:
  case JOP_MESSAGES_EXPIRE:
    return sqlite_message_apply(sq, op);
  case JOP_MESSAGE_LEASE:
    return sqlite_message_lease(sq, op);
  case JOP_MESSAGE_RETRY:
    return sqlite_message_retry(sq, op);
  case JOP_CRON_SINCE:
  case JOP_CRON_TICK:
  case JOP_CRON_TICK_SET:
  case JOP_CRON_SWEEP:
  case JOP_CRON_MISSED_EXTRA:
    return sqlite_cron_apply(sq, op);
  case JOP_PIPELINE_DECLARE:
  case JOP_PIPELINE_APPEND:
  case JOP_PIPELINE_PLAN:
  case JOP_PIPELINE_CLAIM:
  case JOP_PIPELINE_DONE:
    return sqlite_pipeline_apply(sq, op);
  case JOP_LOG_APPEND:
    return sqlite_log_apply(sq, op);
  case JOP_VALUE_RESEAL:
    return sqlite_value_reseal(sq, op);
  case JOP_INSTANCE_DELETE:
    return sqlite_instance_delete(sq, op);
  case JOP_ATTRIBUTE_SET:
    return sqlite_attribute_set(sq, op->rowid, op->attr);
  case JOP_BULK_INSERT:
  case JOP_BULK_PROGRESS:
  case JOP_BULK_CANCEL:
  case JOP_BULK_CLAIM:
  case JOP_BULK_SWEEP:
    return sqlite_bulk_apply(sq, op);
  }
  return DURO_E_INVALID_ARGUMENT;
}

/* Runs one of the transaction statements. */
static int exec_ws(sqlite_store *sq, int which) {
  sqlite3_stmt *st = sq->ws[which];
  int s = sqlite3_step(st);
  sqlite3_reset(st);
  if (s != SQLITE_DONE) {
    sqlite_set_err(sq->wr, sqlite_write_sql[which]);
    return DURO_E_STORAGE;
  }
  return 0;
}

int sqlite_begin(void *db) { return exec_ws(db, ST_BEGIN); }

int sqlite_commit(void *db) { return exec_ws(db, ST_COMMIT); }

/* A failed statement or COMMIT (a full disk, an I/O error, a busy lock)
 * can leave the transaction open: never leave it so, or every later
 * group would join a transaction that cannot commit. */
void sqlite_rollback(void *db) {
  sqlite_store *sq = db;
  if (!sqlite3_get_autocommit(sq->wr))
    exec_ws(sq, ST_ROLLBACK);
}
