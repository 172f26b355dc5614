/* pg_builds.c — the plugin builds shared by the hosts of one database:
 * a build's file stored, fetched into the build store, and dropped once
 * no host has offered it for long.  On the calling thread's reader
 * connection, outside any group: a build is a file of the build store,
 * not journal state. */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "pg_internal.h"

/* Reads the file at `path` whole (malloc'ed, *len bytes); NULL on failure,
 * recorded. */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rbe");
  char *buf = NULL;
  long n = -1;
  if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
      fseek(f, 0, SEEK_SET) == 0) {
    buf = xmalloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
      free(buf);
      buf = NULL;
    }
  }
  if (f)
    fclose(f);
  if (!buf)
    store_error("cannot read build %s", path);
  *len = buf ? (size_t)n : 0;
  return buf;
}

int pg_build_put(void *db, const char *hash, const char *plugin,
                 const char *path, int64_t now_ms) {
  params p = {0};
  p_text(&p, hash);
  p_i64(&p, now_ms);
  PGresult *r = pg_query(db,
                         "WITH u AS (UPDATE builds SET seen_ms=$2 WHERE "
                         "hash=$1 RETURNING 1) SELECT COUNT(*) FROM u",
                         &p);
  if (!r)
    return DURO_E_STORAGE;
  int known = get_i64(r, 0, 0) > 0;
  PQclear(r);
  if (known)
    return 0;
  size_t len;
  char *image = slurp(path, &len);
  if (!image)
    return DURO_E_IO;
  reader *rd = pg_reader_take(db);
  int rc = DURO_E_STORAGE;
  if (rd) {
    char now[24];
    snprintf(now, sizeof now, "%" PRId64, now_ms);
    const char *v[4] = {hash, plugin, image, now};
    int lens[4] = {0, 0, (int)len, 0}, fmts[4] = {0, 0, 1, 0};
    r = PQexecParams(rd->conn,
                     "INSERT INTO builds(hash,plugin,image,seen_ms) "
                     "VALUES($1,$2,$3,$4) ON CONFLICT(hash) DO UPDATE SET "
                     "seen_ms=excluded.seen_ms",
                     4, NULL, v, lens, fmts, 0);
    if (PQresultStatus(r) == PGRES_COMMAND_OK)
      rc = 0;
    else
      pg_set_err("storing a build", pg_failure_of(rd->conn, r));
    pg_drop_if_lost(&rd->conn, r);
    PQclear(r);
    pg_reader_give(db, rd);
  }
  free(image);
  return rc;
}

int pg_build_get(void *db, const char *hash, const char *path) {
  reader *rd = pg_reader_take(db);
  if (!rd)
    return DURO_E_STORAGE;
  const char *v[1] = {hash};
  PGresult *r =
      PQexecParams(rd->conn, "SELECT image FROM builds WHERE hash=$1", 1, NULL,
                   v, NULL, NULL, 1 /* binary: the bytes as stored */);
  int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
  if (!ok) {
    pg_set_err("fetching a build", pg_failure_of(rd->conn, r));
    pg_drop_if_lost(&rd->conn, r);
  }
  pg_reader_give(db, rd);
  if (!ok) {
    PQclear(r);
    return DURO_E_STORAGE;
  }
  if (PQntuples(r) == 0) {
    PQclear(r);
    store_error("build %s is not in the database", hash);
    return DURO_E_NOT_FOUND;
  }
  /* Written beside, synced, renamed: a crash leaves no half build. */
  char *tmp = xasprintf("%s.fetch", path);
  FILE *f = fopen(tmp, "wbe");
  int len = PQgetlength(r, 0, 0);
  ok = f && fwrite(PQgetvalue(r, 0, 0), 1, (size_t)len, f) == (size_t)len &&
       fflush(f) == 0 && fsync(fileno(f)) == 0;
  if (f && fclose(f) != 0)
    ok = 0;
  ok = ok && rename(tmp, path) == 0;
  if (!ok) {
    store_error("cannot write build %s to %s", hash, path);
    unlink(tmp);
  }
  free(tmp);
  PQclear(r);
  return ok ? 0 : DURO_E_IO;
}

int pg_builds_prune(void *db, int64_t seen_before_ms, size_t *n) {
  params p = {0};
  p_i64(&p, seen_before_ms);
  PGresult *r = pg_query(
      db,
      "WITH d AS (DELETE FROM builds WHERE seen_ms<$1 AND NOT EXISTS (SELECT "
      "1 FROM instances WHERE build=builds.hash AND status NOT IN "
      "('complete','errored','terminated')) RETURNING 1) "
      "SELECT COUNT(*) FROM d",
      &p);
  if (!r)
    return DURO_E_STORAGE;
  *n = (size_t)get_i64(r, 0, 0);
  PQclear(r);
  return 0;
}
