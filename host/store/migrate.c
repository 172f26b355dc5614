/* migrate.c — copying a SQLite journal into PostgreSQL (migrate.h). */
#include "migrate.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clock.h"
#include "duro.h"
#include "journal.h"
#include "util.h"

/* Parents before the rows that name them, so that a reader of a partial
 * copy could never meet an orphan; the copy is one transaction anyway. */
const store_table migrate_tables[] = {
    {"instances",
     "rowid,workflow,id,status,params,output,error,created_ms,started_ms,"
     "ended_ms,wake_ms,paused_ms,wait_type,control,retention_ms,build,"
     "restarts,deadline_ms,parent,parent_close,traceparent",
     21, "rowid"},
    {"steps",
     "instance,key,seq,name,count,type,status,result,error,attempts,"
     "started_ms,ended_ms,wake_ms,attempt_started_ms,build",
     15, NULL},
    {"attempts", "instance,key,number,started_ms,ended_ms,error,build", 7,
     NULL},
    {"events", "seq,instance,type,payload,ts_ms,consumed_by", 6, "seq"},
    {"messages",
     "seq,queue,body,attempts,visible_ms,lease,sent_ms,last_error,traceparent,"
     "key",
     10, "seq"},
    {"queue_counts", "queue,dropped,dead_lettered", 3, NULL},
    {"queue_key_pointers", "queue,pointer", 2, NULL},
    {"cron_triggers", "trigger,since_ms,complete,failed,missed,skipped", 6,
     NULL},
    {"cron_ticks", "trigger,tick_ms,state,fired_ms,instance,error", 6, NULL},
    {"pipelines",
     "pipeline,next_seq,accepted,accepted_bytes,written,written_bytes,files,"
     "backlog_bytes,last_flush_ms,plan_first,plan_last,plan_ms,plan_host,"
     "plan_until",
     14, NULL},
    {"pipeline_records", "pipeline,seq,last,bytes,sent_ms,body", 6, NULL},
    {"logs", "instance,n,ts_ms,level,step,attempt,message", 7, NULL},
    {"attributes", "instance,name,workflow,str,num", 5, NULL},
    {"bulk_jobs",
     "id,workflow,action,terminate,status,prefix,created_after,created_before,"
     "ended_after,ended_before,bound,below,matched,done,failed,skipped,state,"
     "created_ms,ended_ms,host,errors,plan,where_terms,ids",
     24, "id"},
};
const size_t migrate_n_tables =
    sizeof migrate_tables / sizeof migrate_tables[0];

/* The source must be a journal of exactly MIGRATE_SCHEMA: an older one is
 * upgraded by the duro that opens it, which migrate leaves to `duro run`
 * (it never changes its source); a newer one has tables this duro does
 * not know. */
static int check_source(const char *from, char *err, size_t errlen) {
  struct stat sb;
  if (stat(from, &sb) != 0) {
    snprintf(err, errlen, "%s: %s", from, strerror(errno));
    return -1;
  }
  char version[32], why[256];
  if (store_sqlite.schema_version(from, version, sizeof version, why,
                                  sizeof why)) {
    snprintf(err, errlen, "%s is not a duro journal (%s)", from, why);
    return -1;
  }
  char *end;
  long v = strtol(version, &end, 10);
  if (*end || end == version) {
    snprintf(err, errlen,
             "%s is not a duro journal (its schema row says \"%s\")", from,
             version);
    return -1;
  }
  if (v < MIGRATE_SCHEMA) {
    snprintf(err, errlen,
             "%s is a journal of schema %ld; duro migrate copies schema %d: "
             "start this duro on it once (duro run, then stop it), which "
             "upgrades it, and migrate again",
             from, v, MIGRATE_SCHEMA);
    return -1;
  }
  if (v > MIGRATE_SCHEMA) {
    snprintf(err, errlen,
             "%s is a journal of schema %ld, newer than this duro's %d: "
             "migrate it with the duro that wrote it",
             from, v, MIGRATE_SCHEMA);
    return -1;
  }
  return 0;
}

/* Never merge: a target with any row is refused with its counts. */
static int check_target_empty(const store_backend *be, void *db, char *err,
                              size_t errlen) {
  char held[512] = "";
  size_t len = 0;
  int64_t total = 0;
  for (size_t i = 0; i < migrate_n_tables; i++) {
    int64_t n = 0;
    if (be->table_count(db, &migrate_tables[i], &n)) {
      snprintf(err, errlen, "PostgreSQL: %s", journal_errmsg(NULL));
      return -1;
    }
    if (n && len < sizeof held)
      len += (size_t)snprintf(held + len, sizeof held - len, "%s%s %" PRId64,
                              total ? ", " : "", migrate_tables[i].name, n);
    total += n;
  }
  if (total) {
    snprintf(err, errlen,
             "the target database already holds a journal with %" PRId64
             " rows (%s); duro migrate never merges journals: give it an "
             "empty database (e.g. createdb duro_new)",
             total, held);
    return -1;
  }
  return 0;
}

typedef struct table_copy {
  const store_backend *src;
  void *src_db;
  const store_table *t;
  int64_t key_high;
} table_copy;

/* table_import's producer: the source's rows, straight into the load. */
static int produce_rows(void *ctx, store_row_fn put, void *put_ctx) {
  table_copy *tc = ctx;
  return tc->src->table_export(tc->src_db, tc->t, &tc->key_high, put, put_ctx);
}

/* Every table in one transaction of the target. */
static int copy_tables(const store_backend *src, void *src_db,
                       const store_backend *dst, void *dst_db, FILE *out,
                       char *err, size_t errlen) {
  int64_t copied[sizeof migrate_tables / sizeof migrate_tables[0]];
  if (dst->begin(dst_db))
    goto failed;
  for (size_t i = 0; i < migrate_n_tables; i++) {
    table_copy tc = {src, src_db, &migrate_tables[i], 0};
    if (dst->table_import(dst_db, tc.t, produce_rows, &tc, &copied[i]) ||
        (tc.t->serial && dst->key_continue(dst_db, tc.t, tc.key_high)))
      goto failed;
  }
  if (dst->commit(dst_db))
    goto failed;
  for (size_t i = 0; i < migrate_n_tables; i++)
    fprintf(out, "  %-18s %" PRId64 " rows\n", migrate_tables[i].name,
            copied[i]);
  return 0;
failed:
  snprintf(err, errlen, "copy failed, nothing copied: %s",
           journal_errmsg(NULL));
  dst->rollback(dst_db);
  return -1;
}

int migrate_copy(const char *from, const char *to, FILE *out, char *err,
                 size_t errlen) {
  const store_backend *dst = store_backend_postgresql();
  if (!dst) {
    snprintf(err, errlen,
             "this duro was built without PostgreSQL (libpq): it cannot "
             "migrate a journal there");
    return -1;
  }
  if (check_source(from, err, errlen))
    return -1;
  int64_t t0 = clock_mono_ms();
  void *src_db = NULL, *dst_db = NULL;
  char why[512];
  int rc = -1;
  /* Read-only: the copy changes nothing in its source. */
  if (store_sqlite.open(from, -1, &src_db, why, sizeof why)) {
    snprintf(err, errlen, "%s", why);
    return -1;
  }
  /* Opening creates the tables of an empty database (in a transaction of
   * their own: a failed copy leaves them empty, which a second migrate
   * accepts) and refuses one of another schema. */
  if (dst->open(to, 1, &dst_db, why, sizeof why)) {
    snprintf(err, errlen, "%s", why);
    goto done;
  }
  if (check_target_empty(dst, dst_db, err, errlen))
    goto done;
  fprintf(out, "copying %s into PostgreSQL\n", from);
  if (copy_tables(&store_sqlite, src_db, dst, dst_db, out, err, errlen))
    goto done;
  fprintf(out, "done in %.2f s\n", (double)(clock_mono_ms() - t0) / 1e3);
  rc = 0;
done:
  if (dst_db)
    dst->close(dst_db);
  store_sqlite.close(src_db);
  return rc;
}
