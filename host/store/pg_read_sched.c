/* pg_read_sched.c — the PostgreSQL backend's reads across instances: the
 * scheduler's (due, the next wake, recovery, the queued ones and the
 * oldest of them), the builds that instances are pinned to, and the
 * listing and the counts by status. */
#include <libpq-fe.h>

#include "list_where.h"
#include "pg_internal.h"

int pg_due(void *db, int64_t after_ms, int64_t upto_ms, size_t limit,
           int64_t *rowids, int64_t *wakes, size_t *n) {
  params p = {0};
  p_i64(&p, after_ms);
  p_i64(&p, upto_ms);
  p_i64(&p, (int64_t)limit);
  *n = 0;
  p_i64(&p, ((pg_store *)db)->host);
  PGresult *r =
      pg_query(db,
               "SELECT rowid, wake_ms FROM instances WHERE owner=$4 "
               "AND wake_ms>$1 AND wake_ms<=$2 ORDER BY wake_ms LIMIT $3",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r) && *n < limit; i++) {
    rowids[*n] = get_i64(r, i, 0);
    wakes[*n] = get_i64(r, i, 1);
    (*n)++;
  }
  PQclear(r);
  return 0;
}

int pg_next_wake(void *db, int64_t after_ms, int64_t *wake) {
  params p = {0};
  p_i64(&p, after_ms);
  p_i64(&p, ((pg_store *)db)->host);
  *wake = JOURNAL_NONE;
  PGresult *r = pg_query(
      db, "SELECT MIN(wake_ms) FROM instances WHERE owner=$2 AND wake_ms>$1",
      &p);
  if (!r)
    return DURO_E_STORAGE;
  if (PQntuples(r) > 0)
    *wake = get_ms(r, 0, 0);
  PQclear(r);
  return 0;
}

int pg_recover_each(void *db,
                    void (*fn)(void *ctx, int64_t rowid, duro_status status,
                               int control),
                    void *ctx) {
  params p = {0};
  p_i64(&p, ((pg_store *)db)->host);
  PGresult *r = pg_query(db,
                         "SELECT rowid,status,control FROM instances WHERE "
                         "owner=$1 AND (status='queued' OR (control<>0 AND "
                         "status IN ('waiting','paused')))",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_i64(r, i, 0), get_status(r, i, 1), (int)get_i64(r, i, 2));
  PQclear(r);
  return 0;
}

/* This host's only: another's instances end in its commits, which this
 * host never sees (flow.singleton and flow.debounce are per host). */
int pg_live_each(void *db, const char *workflow, journal_live_fn fn,
                 void *ctx) {
  params p = {0};
  p_text(&p, workflow);
  p_i64(&p, ((pg_store *)db)->host);
  PGresult *r = pg_query(
      db,
      "SELECT rowid,id,status,created_ms,started_ms,"
      "wake_ms,params FROM instances WHERE workflow=$1 AND owner=$2 AND "
      "status NOT IN ('complete','errored','terminated') "
      "ORDER BY rowid",
      &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++) {
    journal_live_row row = {.rowid = get_i64(r, i, 0),
                            .id = PQgetvalue(r, i, 1),
                            .status = get_status(r, i, 2),
                            .created_ms = get_ms(r, i, 3),
                            .started_ms = get_ms(r, i, 4),
                            .wake_ms = get_ms(r, i, 5),
                            .params = get_str(r, i, 6)};
    fn(ctx, &row);
  }
  PQclear(r);
  return 0;
}

int pg_children_each(void *db, int64_t parent,
                     void (*fn)(void *ctx, int64_t rowid, const char *workflow,
                                const char *id, duro_status status),
                     void *ctx) {
  params p = {0};
  p_i64(&p, parent);
  PGresult *r = pg_query(db,
                         "SELECT rowid,workflow,id,status FROM instances "
                         "WHERE parent=$1 ORDER BY rowid",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_i64(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
       get_status(r, i, 3));
  PQclear(r);
  return 0;
}

/* Every host looks (a terminate goes to the child's owner). */
int pg_orphans_each(void *db, size_t limit,
                    void (*fn)(void *ctx, int64_t rowid, const char *workflow,
                               const char *id, int parent_close),
                    void *ctx) {
  params p = {0};
  p_i64(&p, (int64_t)limit);
  PGresult *r = pg_query(db,
                         "SELECT c.rowid,c.workflow,c.id,c.parent_close "
                         "FROM instances c JOIN instances p ON "
                         "p.rowid=c.parent WHERE c.parent IS NOT NULL AND "
                         "c.ended_ms IS NULL AND (c.parent_close=0 OR "
                         "(c.parent_close=2 AND COALESCE(c.control,0)<>3)) "
                         "AND p.ended_ms IS NOT NULL LIMIT $1",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_i64(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
       (int)get_i64(r, i, 3));
  PQclear(r);
  return 0;
}

int pg_queued_from(void *db, int64_t from, size_t limit, int64_t *rowids,
                   size_t *n) {
  params p = {0};
  p_i64(&p, from);
  p_i64(&p, (int64_t)limit);
  p_i64(&p, ((pg_store *)db)->host);
  *n = 0;
  PGresult *r =
      pg_query(db,
               "SELECT rowid FROM instances WHERE owner=$3 AND "
               "status='queued' AND rowid>=$1 ORDER BY rowid LIMIT $2",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r) && *n < limit; i++)
    rowids[(*n)++] = get_i64(r, i, 0);
  PQclear(r);
  return 0;
}

int pg_oldest_queued(void *db, const char *workflow, int64_t *created_ms) {
  params p = {0};
  p_text(&p, workflow);
  *created_ms = JOURNAL_NONE;
  PGresult *r =
      pg_query(db,
               "SELECT created_ms FROM instances WHERE status='queued' "
               "AND ($1::text IS NULL OR workflow=$1::text) "
               "ORDER BY rowid LIMIT 1",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  if (PQntuples(r) > 0)
    *created_ms = get_i64(r, 0, 0);
  PQclear(r);
  return 0;
}

int pg_build_pinned(void *db, const char *workflow, const char *build,
                    int *pinned) {
  params p = {0};
  p_text(&p, workflow);
  p_text(&p, build);
  *pinned = 0;
  PGresult *r =
      pg_query(db,
               "SELECT 1 FROM instances WHERE workflow=$1 AND build=$2 "
               "AND build IS NOT NULL AND status IN "
               "('queued','waiting','paused') LIMIT 1",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  *pinned = PQntuples(r) > 0;
  PQclear(r);
  return 0;
}

int pg_pinned_builds(void *db,
                     void (*fn)(void *ctx, const char *workflow,
                                const char *build, int64_t n),
                     void *ctx) {
  params p = {0};
  PGresult *r =
      pg_query(db,
               "SELECT workflow, build, COUNT(*) FROM instances "
               "WHERE build IS NOT NULL AND status IN "
               "('queued','waiting','paused') GROUP BY workflow, build",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_str(r, i, 0), get_str(r, i, 1), get_i64(r, i, 2));
  PQclear(r);
  return 0;
}

int pg_waiting_on(void *db, const char *wait_type,
                  void (*fn)(void *ctx, int64_t rowid, const char *workflow),
                  void *ctx) {
  params p = {0};
  p_text(&p, wait_type);
  p_i64(&p, ((pg_store *)db)->host);
  PGresult *r = pg_query(db,
                         "SELECT rowid, workflow FROM instances WHERE "
                         "owner=$2 AND status='waiting' AND wait_type=$1",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_i64(r, i, 0), get_str(r, i, 1));
  PQclear(r);
  return 0;
}

/* A listing with search attributes (as sqlite_read_sched.c's): one of
 * them walked newest first in its index, the others checked on each
 * instance it finds; SQL made for the call.  Chosen ids (f->ids) are one
 * more check on each. */
static PGresult *list_where(pg_store *db, const journal_list_filter *f,
                            params *p) {
  char *terms = list_where_sql(f, '$', 11, "::text", "::double precision", 0);
  char *ids = f->ids ? xasprintf(" AND i.id IN (SELECT "
                                 "jsonb_array_elements_text($%d::jsonb))",
                                 11 + 2 * (int)f->n_where)
                     : xstrdup("");
  char *sql = xasprintf(
      "SELECT i.rowid,i.id,i.status,i.created_ms,i.started_ms,i.ended_ms,"
      "i.wait_type FROM attributes a JOIN instances i ON i.rowid=a.instance "
      "WHERE a.workflow=$1 AND ($3::bigint=0 OR a.instance<$3::bigint)%s AND "
      "($2::text IS NULL OR i.status=$2::text) AND ($5::text IS NULL OR "
      "(i.id COLLATE \"C\">=$5::text AND ($6::text IS NULL OR i.id COLLATE "
      "\"C\"<$6::text))) AND ($7::bigint=0 OR i.created_ms>=$7::bigint) AND "
      "($8::bigint=0 OR i.created_ms<$8::bigint) AND ($9::bigint=0 OR "
      "i.ended_ms>=$9::bigint) AND ($10::bigint=0 OR i.ended_ms<$10::bigint)"
      "%s ORDER BY a.instance DESC LIMIT $4",
      terms, ids);
  free(terms);
  free(ids);
  char num[DURO_ATTR_MAX][32];
  for (size_t k = 0; k < f->n_where; k++) {
    const duro_attr_filter *w = &f->where[k];
    p_text(p, w->name);
    snprintf(num[k], sizeof num[k], "%.17g", w->num);
    p_text(p, w->str ? w->str : num[k]);
  }
  if (f->ids)
    p_text(p, f->ids);
  PGresult *r = pg_query_once(db, sql, p);
  free(sql);
  return r;
}

/* The listing's columns and filters.  Ids compared byte by byte, as
 * SQLite does, whatever the collation.  Each way to find the rows has a
 * statement of its own, its range a plain one an index takes (an `OR`
 * of "no bound" keeps every index out of a prepared statement's generic
 * plan): chosen ids, an id prefix (instances' (workflow, id)), a
 * creation or end time of few instances (instances_created,
 * instances_ended: JOURNAL_LIST_SORTED_MAX), else the rows newest first.
 * A prefix's rows (few) and a time range's are sorted (`rowid+0` keeps the
 * primary key out, which the planner would walk from the newest,
 * believing the range's rows spread over all of it: an hour half a
 * million rows back took 180 ms). */
#define LIST_SELECT                                                            \
  "SELECT rowid,id,status,created_ms,started_ms,ended_ms,wait_type FROM "      \
  "instances WHERE "
#define LIST_FILTERS                                                           \
  " AND workflow=$1 AND ($2::text IS NULL OR status=$2::text) AND "            \
  "rowid<$3::bigint AND ($5::text IS NULL OR (id COLLATE \"C\">=$5::text AND " \
  "($6::text IS NULL OR id COLLATE \"C\"<$6::text))) AND ($7::bigint=0 OR "    \
  "created_ms>=$7::bigint) AND ($8::bigint=0 OR created_ms<$8::bigint) AND "   \
  "($9::bigint=0 OR ended_ms>=$9::bigint) AND ($10::bigint=0 OR "              \
  "ended_ms<$10::bigint)"
#define LIST_NEWEST " ORDER BY rowid DESC LIMIT $4"
#define LIST_SORTED " ORDER BY rowid+0 DESC LIMIT $4"

/* Whether the time range of f (its creation's, else its end's) holds more
 * than JOURNAL_LIST_SORTED_MAX instances of workflow: counted in its
 * index, up to one more.  0, or DURO_E_STORAGE. */
static int time_range_wide(pg_store *db, const char *workflow,
                           const journal_list_filter *f, int *wide) {
  int created = f->created_after || f->created_before;
  int64_t before = created ? f->created_before : f->ended_before;
  params p = {0};
  p_text(&p, workflow);
  p_i64(&p, created ? f->created_after : f->ended_after);
  p_i64(&p, before ? before : INT64_MAX);
  p_i64(&p, JOURNAL_LIST_SORTED_MAX + 1);
  PGresult *r =
      pg_query(db,
               created ? "SELECT COUNT(*) FROM (SELECT 1 FROM instances WHERE "
                         "workflow=$1 AND created_ms>=$2::bigint AND "
                         "created_ms<$3::bigint LIMIT $4::bigint) n"
                       : "SELECT COUNT(*) FROM (SELECT 1 FROM instances WHERE "
                         "workflow=$1 AND ended_ms>=$2::bigint AND "
                         "ended_ms<$3::bigint LIMIT $4::bigint) n",
               &p);
  if (!r)
    return DURO_E_STORAGE;
  *wide = get_i64(r, 0, 0) > JOURNAL_LIST_SORTED_MAX;
  PQclear(r);
  return 0;
}

int pg_list(void *db, const char *workflow, const journal_list_filter *f,
            int64_t cursor, size_t limit,
            void (*fn)(void *ctx, const journal_list_row *row), void *ctx) {
  char *prefix_end = journal_prefix_end(f->prefix);
  int created = f->created_after || f->created_before;
  int ended = f->ended_after || f->ended_before;
  int sorted = !f->n_where && !f->ids && !prefix_end && (created || ended);
  if (sorted) {
    int wide;
    if (time_range_wide(db, workflow, f, &wide)) {
      free(prefix_end);
      return DURO_E_STORAGE;
    }
    sorted = !wide;
  }
  params p = {0};
  p_text(&p, workflow);
  p_text(&p, f->status < 0 ? NULL : duro_status_name(f->status));
  p_i64(&p, cursor ? cursor : INT64_MAX); /* a range, no OR */
  p_i64(&p, (int64_t)limit);
  p_text(&p, f->prefix && *f->prefix ? f->prefix : NULL);
  p_text(&p, prefix_end);
  p_i64(&p, f->created_after);
  p_i64(&p, f->created_before);
  p_i64(&p, f->ended_after);
  p_i64(&p, f->ended_before);
  if (sorted) { /* the range's end as its index takes it (no OR): $11 */
    int64_t before = created ? f->created_before : f->ended_before;
    p_i64(&p, before ? before : INT64_MAX);
  }
  PGresult *r;
  if (f->n_where)
    r = list_where(db, f, &p);
  else if (f->ids) { /* chosen ones (at most DURO_BULK_IDS), by their id */
    p_text(&p, f->ids);
    r = pg_query(db,
                 LIST_SELECT "id IN (SELECT jsonb_array_elements_text("
                             "$11::jsonb))" LIST_FILTERS LIST_NEWEST,
                 &p);
  } else if (prefix_end) /* ids in [prefix, prefix_end) */
    r = pg_query(db,
                 LIST_SELECT "id COLLATE \"C\">=$5::text AND id COLLATE "
                             "\"C\"<$6::text" LIST_FILTERS LIST_SORTED,
                 &p);
  else if (sorted && created)
    r = pg_query(db,
                 LIST_SELECT "created_ms>=$7::bigint AND "
                             "created_ms<$11::bigint" LIST_FILTERS LIST_SORTED,
                 &p);
  else if (sorted)
    r = pg_query(db,
                 LIST_SELECT "ended_ms>=$9::bigint AND "
                             "ended_ms<$11::bigint" LIST_FILTERS LIST_SORTED,
                 &p);
  else
    r = pg_query(db, LIST_SELECT "true" LIST_FILTERS LIST_NEWEST, &p);
  free(prefix_end);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++) {
    journal_list_row row = {.rowid = get_i64(r, i, 0),
                            .id = get_str(r, i, 1),
                            .status = get_status(r, i, 2),
                            .created_ms = get_i64(r, i, 3),
                            .started_ms = get_ms(r, i, 4),
                            .ended_ms = get_ms(r, i, 5),
                            .wait_type = get_str(r, i, 6)};
    fn(ctx, &row);
  }
  PQclear(r);
  return 0;
}

int pg_count_by_status(void *db,
                       void (*fn)(void *ctx, const char *workflow,
                                  duro_status status, int64_t n),
                       void *ctx) {
  params p = {0};
  PGresult *r = pg_query(db,
                         "SELECT workflow,status,COUNT(*) FROM instances "
                         "GROUP BY workflow,status ORDER BY workflow,status",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++)
    fn(ctx, get_str(r, i, 0), get_status(r, i, 1), get_i64(r, i, 2));
  PQclear(r);
  return 0;
}
