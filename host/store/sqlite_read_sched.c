/* sqlite_read_sched.c — the SQLite backend's reads across instances: the
 * scheduler's (due, the next wake, recovery, the queued ones and the
 * oldest of them), the listing and the counts by status, and the builds
 * that instances are pinned to. */
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>

#include "list_where.h"
#include "sqlite_internal.h"

int sqlite_due(void *db, int64_t after_ms, int64_t upto_ms, size_t limit,
               int64_t *rowids, int64_t *wakes, size_t *n) {
  *n = 0;
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT rowid, wake_ms FROM instances WHERE wake_ms>?1 "
                   "AND wake_ms<=?2 ORDER BY wake_ms LIMIT ?3");
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, after_ms);
    sqlite3_bind_int64(q.st, 2, upto_ms);
    sqlite3_bind_int64(q.st, 3, (sqlite3_int64)limit);
    while (rd_row(&q)) {
      rowids[*n] = sqlite3_column_int64(q.st, 0);
      wakes[*n] = sqlite3_column_int64(q.st, 1);
      (*n)++;
    }
  }
  if ((rc = rd_close(&q, rc)))
    *n = 0;
  return rc;
}

int sqlite_next_wake(void *db, int64_t after_ms, int64_t *wake) {
  *wake = JOURNAL_NONE;
  rd q;
  int rc =
      rd_open(&q, db, "SELECT MIN(wake_ms) FROM instances WHERE wake_ms>?1");
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, after_ms);
    if (rd_row(&q))
      *wake = col_ms(q.st, 0);
  }
  return rd_close(&q, rc);
}

int sqlite_recover_each(void *db,
                        void (*fn)(void *ctx, int64_t rowid, duro_status status,
                                   int control),
                        void *ctx) {
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT rowid,status,control FROM instances WHERE "
                   "status='queued' OR (control<>0 AND status IN "
                   "('waiting','paused'))");
  if (rc == 0)
    while (rd_row(&q))
      fn(ctx, sqlite3_column_int64(q.st, 0), col_status(q.st, 1),
         sqlite3_column_int(q.st, 2));
  return rd_close(&q, rc);
}

/* On the (workflow, id) index: the workflow's rows, the ended skipped. */
int sqlite_live_each(void *db, const char *workflow, journal_live_fn fn,
                     void *ctx) {
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT rowid,id,status,created_ms,started_ms,wake_ms,"
                   "params FROM instances WHERE workflow=?1 AND status NOT IN "
                   "('complete','errored','terminated') ORDER BY rowid");
  if (rc == 0) {
    sqlite3_bind_text(q.st, 1, workflow, -1, SQLITE_STATIC);
    while (rd_row(&q)) {
      journal_live_row row = {.rowid = sqlite3_column_int64(q.st, 0),
                              .id = (const char *)sqlite3_column_text(q.st, 1),
                              .status = col_status(q.st, 2),
                              .created_ms = col_ms(q.st, 3),
                              .started_ms = col_ms(q.st, 4),
                              .wake_ms = col_ms(q.st, 5),
                              .params =
                                  (const char *)sqlite3_column_text(q.st, 6)};
      fn(ctx, &row);
    }
  }
  return rd_close(&q, rc);
}

int sqlite_children_each(void *db, int64_t parent,
                         void (*fn)(void *ctx, int64_t rowid,
                                    const char *workflow, const char *id,
                                    duro_status status),
                         void *ctx) {
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT rowid,workflow,id,status FROM instances WHERE "
                   "parent=?1 ORDER BY rowid");
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, parent);
    while (rd_row(&q))
      fn(ctx, sqlite3_column_int64(q.st, 0),
         (const char *)sqlite3_column_text(q.st, 1),
         (const char *)sqlite3_column_text(q.st, 2), col_status(q.st, 3));
  }
  return rd_close(&q, rc);
}

/* On instances_live_child: only children still running are read. */
int sqlite_orphans_each(void *db, size_t limit,
                        void (*fn)(void *ctx, int64_t rowid,
                                   const char *workflow, const char *id,
                                   int parent_close),
                        void *ctx) {
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT c.rowid,c.workflow,c.id,c.parent_close FROM "
                   "instances c JOIN instances p ON p.rowid=c.parent WHERE "
                   "c.parent IS NOT NULL AND c.ended_ms IS NULL AND "
                   "(c.parent_close=0 OR (c.parent_close=2 AND "
                   "COALESCE(c.control,0)<>3)) AND p.ended_ms IS NOT NULL "
                   "LIMIT ?1");
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, (sqlite3_int64)limit);
    while (rd_row(&q))
      fn(ctx, sqlite3_column_int64(q.st, 0),
         (const char *)sqlite3_column_text(q.st, 1),
         (const char *)sqlite3_column_text(q.st, 2),
         sqlite3_column_int(q.st, 3));
  }
  return rd_close(&q, rc);
}

static const char sql_queued_from[] =
    "SELECT rowid FROM instances WHERE status='queued' AND rowid>=?1 "
    "ORDER BY rowid LIMIT ?2";

int sqlite_queued_from(void *db, int64_t from, size_t limit, int64_t *rowids,
                       size_t *n) {
  *n = 0;
  rd q;
  int rc = rd_open(&q, db, sql_queued_from);
  if (rc == 0) {
    sqlite3_bind_int64(q.st, 1, from);
    sqlite3_bind_int64(q.st, 2, (sqlite3_int64)limit);
    while (rd_row(&q) && *n < limit)
      rowids[(*n)++] = sqlite3_column_int64(q.st, 0);
  }
  return rd_close(&q, rc);
}

/* On instances_status, in rowid order: the unary + keeps the planner off
 * (workflow, id), which would read every instance of the workflow. */
static const char sql_oldest_queued[] =
    "SELECT created_ms FROM instances WHERE status='queued' AND "
    "(?1 IS NULL OR +workflow=?1) ORDER BY rowid LIMIT 1";

int sqlite_oldest_queued(void *db, const char *workflow, int64_t *created_ms) {
  *created_ms = JOURNAL_NONE;
  rd q;
  int rc = rd_open(&q, db, sql_oldest_queued);
  if (rc == 0) {
    bind_text(q.st, 1, workflow);
    if (rd_row(&q)) {
      *created_ms = sqlite3_column_int64(q.st, 0);
      rd_row(&q);
    }
  }
  return rd_close(&q, rc);
}

int sqlite_waiting_on(void *db, const char *wait_type,
                      void (*fn)(void *ctx, int64_t rowid,
                                 const char *workflow),
                      void *ctx) {
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT rowid, workflow FROM instances "
                   "WHERE status='waiting' AND wait_type=?1");
  if (rc == 0) {
    bind_text(q.st, 1, wait_type);
    while (rd_row(&q))
      fn(ctx, sqlite3_column_int64(q.st, 0),
         (const char *)sqlite3_column_text(q.st, 1));
  }
  return rd_close(&q, rc);
}

/* The listing's columns and filters, after how it finds the workflow's
 * rows: the query planner left to itself takes the (workflow, id) index
 * for `workflow=` and then sorts every row of the workflow by rowid, half
 * a second at a million.  So a prefix is a range of that index (its
 * matches few), a creation time a range of instances_created and an end
 * time one of instances_ended when it holds few (JOURNAL_LIST_SORTED_MAX:
 * walked newest first, an hour's end half a million rows back took
 * 100 ms), and otherwise the rows are walked newest first by rowid
 * (`+workflow` keeps the indexes out), the page full after a few when the
 * filters pass many. */
#define LIST_SELECT                                                            \
  "SELECT rowid,id,status,created_ms,started_ms,ended_ms,wait_type "           \
  "FROM instances WHERE "
#define LIST_FILTERS                                                           \
  " AND (?2 IS NULL OR status=?2) AND rowid<?3 AND (?5 IS NULL OR "            \
  "(id>=?5 AND (?6 IS NULL OR id<?6))) AND (?7=0 OR created_ms>=?7) AND "      \
  "(?8=0 OR created_ms<?8) AND (?9=0 OR ended_ms>=?9) AND (?10=0 OR "          \
  "ended_ms<?10) ORDER BY rowid DESC LIMIT ?4"

/* A range the attribute index holds more matches of than this is walked
 * no more: sorting its matches by instance took 75 ms at 20,000 of a
 * million.  The instances are walked newest first instead, each term
 * checked on each: the page full after about limit * n / matches rows,
 * at most 10,000 for a page of 20 at a million. */
#define WHERE_SORTED_MAX 2000

/* Whether the walk should be of the instances: the driving term is a
 * range (no equality is among the terms) of more than WHERE_SORTED_MAX
 * matches, and no other bound (a prefix, a time) has an index of its own
 * that a walk from the newest would miss. */
static int where_wide(reader *r, const char *workflow,
                      const journal_list_filter *f, int *wide) {
  const duro_attr_filter *w = &f->where[list_where_drive(f)];
  *wide = 0;
  if (w->op == DURO_ATTR_EQ || w->str || (f->prefix && *f->prefix) ||
      f->created_after || f->created_before || f->ended_after ||
      f->ended_before)
    return 0;
  char *sql = xasprintf("SELECT COUNT(*) FROM (SELECT 1 FROM attributes WHERE "
                        "workflow=?1 AND name=?2 AND num%s?3 LIMIT %d)",
                        list_where_op(w->op), WHERE_SORTED_MAX + 1);
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(r->db, sql, -1, &st, NULL);
  free(sql);
  if (rc == SQLITE_OK) {
    bind_text(st, 1, workflow);
    bind_text(st, 2, w->name);
    sqlite3_bind_double(st, 3, w->num);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
      *wide = sqlite3_column_int64(st, 0) > WHERE_SORTED_MAX;
  }
  sqlite3_finalize(st);
  if (rc == SQLITE_ROW)
    return 0;
  sqlite_set_err(r->db, "list");
  return DURO_E_STORAGE;
}

/* A listing with search attributes: the rows of one of them walked newest
 * first in its index (attributes_str or _num: workflow, name, value,
 * instance), each joined to its instance (CROSS JOIN keeps that order),
 * the others checked on it; or, a wide range (where_wide), the instances
 * walked newest first, every term checked on each.  Its SQL is the
 * filter's own, prepared for the call.  Chosen ids (f->ids) are one more
 * check on each. */
static int list_where(sqlite_store *sq, const char *workflow,
                      const journal_list_filter *f, int64_t cursor,
                      size_t limit,
                      void (*fn)(void *ctx, const journal_list_row *row),
                      void *ctx) {
  char *prefix_end = journal_prefix_end(f->prefix);
  reader *r = sqlite_reader_take(sq);
  sqlite3_stmt *st = NULL;
  char *sql = NULL;
  int rc = DURO_E_STORAGE, s = SQLITE_DONE, walk = 0;
  if (!r || (rc = where_wide(r, workflow, f, &walk)) != 0)
    goto done;
  rc = DURO_E_STORAGE;
  char *terms = list_where_sql(f, '?', 11, "", "", walk);
  int ids_at = 11 + 2 * (int)f->n_where;
  char *ids = f->ids ? xasprintf(" AND i.id IN (SELECT value FROM "
                                 "json_each(?%d))",
                                 ids_at)
                     : xstrdup("");
  sql = xasprintf(
      "SELECT i.rowid,i.id,i.status,i.created_ms,i.started_ms,i.ended_ms,"
      "i.wait_type FROM %s%s AND (?2 IS NULL OR i.status=?2) AND (?5 IS NULL "
      "OR (i.id>=?5 AND (?6 IS NULL OR i.id<?6))) AND (?7=0 OR "
      "i.created_ms>=?7) AND (?8=0 OR i.created_ms<?8) AND (?9=0 OR "
      "i.ended_ms>=?9) AND (?10=0 OR i.ended_ms<?10)%s ORDER BY %s DESC "
      "LIMIT ?4",
      walk ? "instances i WHERE +i.workflow=?1 AND i.rowid<?3"
           : "attributes a CROSS JOIN instances i ON i.rowid=a.instance "
             "WHERE a.workflow=?1 AND a.instance<?3",
      terms, ids, walk ? "i.rowid" : "a.instance");
  free(terms);
  free(ids);
  if (sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) != SQLITE_OK) {
    sqlite_set_err(r->db, "list");
    goto done;
  }
  bind_text(st, 1, workflow);
  bind_text(st, 2, f->status < 0 ? NULL : duro_status_name(f->status));
  sqlite3_bind_int64(st, 3, cursor > 0 ? cursor : INT64_MAX);
  sqlite3_bind_int64(st, 4, (sqlite3_int64)limit);
  bind_text(st, 5, f->prefix && *f->prefix ? f->prefix : NULL);
  bind_text(st, 6, prefix_end);
  sqlite3_bind_int64(st, 7, f->created_after);
  sqlite3_bind_int64(st, 8, f->created_before);
  sqlite3_bind_int64(st, 9, f->ended_after);
  sqlite3_bind_int64(st, 10, f->ended_before);
  for (size_t k = 0; k < f->n_where; k++) {
    const duro_attr_filter *w = &f->where[k];
    bind_text(st, 11 + 2 * (int)k, w->name);
    if (w->str)
      bind_text(st, 12 + 2 * (int)k, w->str);
    else
      sqlite3_bind_double(st, 12 + 2 * (int)k, w->num);
  }
  if (f->ids)
    bind_text(st, ids_at, f->ids);
  while ((s = sqlite3_step(st)) == SQLITE_ROW) {
    journal_list_row row = {.rowid = sqlite3_column_int64(st, 0),
                            .id = (const char *)sqlite3_column_text(st, 1),
                            .status = col_status(st, 2),
                            .created_ms = sqlite3_column_int64(st, 3),
                            .started_ms = col_ms(st, 4),
                            .ended_ms = col_ms(st, 5),
                            .wait_type =
                                (const char *)sqlite3_column_text(st, 6)};
    fn(ctx, &row);
  }
  rc = s == SQLITE_DONE ? 0 : sqlite_rows_end(r, s);
done:
  sqlite3_finalize(st);
  free(sql);
  free(prefix_end);
  return r ? sqlite_reader_give(sq, r, rc) : rc;
}

/* Whether the time range of f (its creation's, else its end's) holds more
 * than JOURNAL_LIST_SORTED_MAX instances of workflow: counted in its
 * index, up to one more. */
static int time_range_wide(void *db, const char *workflow,
                           const journal_list_filter *f, int *wide) {
  int created = f->created_after || f->created_before;
  int64_t after = created ? f->created_after : f->ended_after;
  int64_t before = created ? f->created_before : f->ended_before;
  rd q;
  int rc = rd_open(
      &q, db,
      created ? "SELECT COUNT(*) FROM (SELECT 1 FROM instances WHERE "
                "workflow=?1 AND created_ms>=?2 AND created_ms<?3 LIMIT ?4)"
              : "SELECT COUNT(*) FROM (SELECT 1 FROM instances WHERE "
                "workflow=?1 AND ended_ms>=?2 AND ended_ms<?3 LIMIT ?4)");
  *wide = 0;
  if (rc == 0) {
    bind_text(q.st, 1, workflow);
    sqlite3_bind_int64(q.st, 2, after);
    sqlite3_bind_int64(q.st, 3, before ? before : INT64_MAX);
    sqlite3_bind_int64(q.st, 4, JOURNAL_LIST_SORTED_MAX + 1);
    if (rd_row(&q))
      *wide = sqlite3_column_int64(q.st, 0) > JOURNAL_LIST_SORTED_MAX;
  }
  return rd_close(&q, rc);
}

int sqlite_list(void *db, const char *workflow, const journal_list_filter *f,
                int64_t cursor, size_t limit,
                void (*fn)(void *ctx, const journal_list_row *row), void *ctx) {
  if (f->n_where)
    return list_where(db, workflow, f, cursor, limit, fn, ctx);
  rd q;
  char *prefix_end = journal_prefix_end(f->prefix);
  int created = f->created_after || f->created_before;
  int ended = f->ended_after || f->ended_before;
  int wide = 0, rc = 0;
  if (!f->ids && !prefix_end && (created || ended) &&
      (rc = time_range_wide(db, workflow, f, &wide)) != 0) {
    free(prefix_end);
    return rc;
  }
  if (f->ids) /* chosen ones (at most DURO_BULK_IDS), by (workflow, id) */
    rc = rd_open(&q, db,
                 LIST_SELECT "workflow=?1 AND id IN (SELECT value FROM "
                             "json_each(?12))" LIST_FILTERS);
  else if (prefix_end) /* ids in [prefix, prefix_end) */
    rc = rd_open(&q, db,
                 LIST_SELECT "workflow=?1 AND id>=?5 AND id<?6" LIST_FILTERS);
  else if (created && !wide) /* instances_created */
    rc = rd_open(&q, db,
                 LIST_SELECT "workflow=?1 AND created_ms>=?7 AND "
                             "created_ms<?11" LIST_FILTERS);
  else if (ended && !wide) /* instances_ended */
    rc = rd_open(&q, db,
                 LIST_SELECT "workflow=?1 AND ended_ms>=?9 AND "
                             "ended_ms<?11" LIST_FILTERS);
  else
    rc = rd_open(&q, db, LIST_SELECT "+workflow=?1" LIST_FILTERS);
  if (rc == 0) {
    bind_text(q.st, 1, workflow);
    bind_text(q.st, 2, f->status < 0 ? NULL : duro_status_name(f->status));
    /* no OR: the cursor is a range of the rowid the walk takes, so a
     * page deep in the list (a bulk job's batch) starts at its place */
    sqlite3_bind_int64(q.st, 3, cursor ? cursor : INT64_MAX);
    sqlite3_bind_int64(q.st, 4, (sqlite3_int64)limit);
    bind_text(q.st, 5, f->prefix && *f->prefix ? f->prefix : NULL);
    bind_text(q.st, 6, prefix_end);
    sqlite3_bind_int64(q.st, 7, f->created_after);
    sqlite3_bind_int64(q.st, 8, f->created_before);
    sqlite3_bind_int64(q.st, 9, f->ended_after);
    sqlite3_bind_int64(q.st, 10, f->ended_before);
    /* the range's end as its index takes it (no OR) */
    int64_t before = f->created_after || f->created_before ? f->created_before
                                                           : f->ended_before;
    sqlite3_bind_int64(q.st, 11, before ? before : INT64_MAX);
    if (f->ids)
      bind_text(q.st, 12, f->ids);
    while (rd_row(&q)) {
      journal_list_row row = {.rowid = sqlite3_column_int64(q.st, 0),
                              .id = (const char *)sqlite3_column_text(q.st, 1),
                              .status = col_status(q.st, 2),
                              .created_ms = sqlite3_column_int64(q.st, 3),
                              .started_ms = col_ms(q.st, 4),
                              .ended_ms = col_ms(q.st, 5),
                              .wait_type =
                                  (const char *)sqlite3_column_text(q.st, 6)};
      fn(ctx, &row);
    }
  }
  rc = rd_close(&q, rc);
  free(prefix_end);
  return rc;
}

int sqlite_count_by_status(void *db,
                           void (*fn)(void *ctx, const char *workflow,
                                      duro_status status, int64_t n),
                           void *ctx) {
  sqlite_store *sq = db;
  rd q;
  /* A read-only look at a file of an older host may have no counts: it
   * counts the rows. */
  int rc =
      rd_open(&q, db,
              sq->counted ? "SELECT workflow,status,n FROM instance_counts "
                            "WHERE n>0 ORDER BY workflow,status"
                          : "SELECT workflow,status,COUNT(*) FROM instances "
                            "GROUP BY workflow,status ORDER BY "
                            "workflow,status");
  if (rc == 0)
    while (rd_row(&q))
      fn(ctx, (const char *)sqlite3_column_text(q.st, 0), col_status(q.st, 1),
         sqlite3_column_int64(q.st, 2));
  return rd_close(&q, rc);
}

int sqlite_build_pinned(void *db, const char *workflow, const char *build,
                        int *pinned) {
  *pinned = 0;
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT 1 FROM instances WHERE workflow=?1 AND build=?2 "
                   "AND build IS NOT NULL AND status IN "
                   "('queued','waiting','paused') LIMIT 1");
  if (rc == 0) {
    bind_text(q.st, 1, workflow);
    bind_text(q.st, 2, build);
    *pinned = rd_row(&q);
  }
  return rd_close(&q, rc);
}

int sqlite_pinned_builds(void *db,
                         void (*fn)(void *ctx, const char *workflow,
                                    const char *build, int64_t n),
                         void *ctx) {
  rd q;
  int rc = rd_open(&q, db,
                   "SELECT workflow, build, COUNT(*) FROM instances "
                   "WHERE build IS NOT NULL AND status IN "
                   "('queued','waiting','paused') GROUP BY workflow, build");
  if (rc == 0)
    while (rd_row(&q))
      fn(ctx, (const char *)sqlite3_column_text(q.st, 0),
         (const char *)sqlite3_column_text(q.st, 1),
         sqlite3_column_int64(q.st, 2));
  return rd_close(&q, rc);
}
