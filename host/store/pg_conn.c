/* pg_conn.c — the PostgreSQL backend's connections (pg_internal.h): made
 * and set up, dropped when the server went away so that their next use
 * connects again, a pool of readers the reading threads share, and
 * libpq's errors recorded on one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "pg_internal.h"

/* Joins libpq's lines into one, for the log: its hint comes on an indented
 * line of its own ("…failed: No such file or directory\n\tIs the server
 * running…").  A newline and its indent become "; " (never longer). */
static void one_line(char *s) {
  char *w = s;
  for (const char *r = s; *r;) {
    if (*r != '\n') {
      *w++ = *r++;
      continue;
    }
    size_t indent = strspn(++r, "\t ");
    r += indent;
    if (indent)
      *w++ = ';';
    *w++ = ' ';
  }
  *w = '\0';
}

/* Records libpq's message (on one line, without its trailing newline). */
void pg_set_err(const char *what, const char *msg) {
  size_t n = msg ? strlen(msg) : 0;
  while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
    n--;
  char line[512];
  snprintf(line, sizeof line, "%.*s", (int)n, msg ? msg : "");
  one_line(line);
  store_error("%s%s%s", what ? what : "", what ? ": " : "", line);
}

/* Why a statement failed: the result's message, or the connection's when
 * the result has none (libpq could not send it, or got no answer). */
const char *pg_failure_of(PGconn *c, const PGresult *r) {
  const char *msg = PQresultErrorMessage(r);
  return msg && *msg ? msg : PQerrorMessage(c);
}

/* ---- a connection the server dropped -------------------------------------
 * libpq does not always know it at once: when the server went away while a
 * connection sat idle, the next statement fails ("server closed the
 * connection unexpectedly") but PQstatus may still say CONNECTION_OK (only
 * the write failed).  So a failure is taken as the connection's when libpq
 * calls it bad, when the error has no SQLSTATE (every error the server
 * sends has one: none is libpq's own, about the connection), or when its
 * class says so: 08 (connection exception) or 57P (the server ended the
 * session: a shutdown, pg_terminate_backend).  Such a connection is
 * closed and set to NULL, which PQstatus calls CONNECTION_BAD, so its next
 * use connects again (writer_ready, reader_get). */
static int connection_lost(PGconn *c, const PGresult *r) {
  if (PQstatus(c) != CONNECTION_OK)
    return 1;
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  return !state || !strncmp(state, "08", 2) || !strncmp(state, "57P", 3);
}

/* When (clock_boot_ms) this process last found the database away: a
 * connection that would not open, or that broke.  Every host tries to
 * connect all along an outage (its lease keeper does), so a host that
 * got through again knows how lately the others may have been cut off
 * too (pg_takeover). */
static int64_t last_cut_ms;

void pg_cut_note(void) {
  __atomic_store_n(&last_cut_ms, clock_boot_ms(), __ATOMIC_RELEASE);
}

int64_t pg_cut_last(void) {
  return __atomic_load_n(&last_cut_ms, __ATOMIC_ACQUIRE);
}

void pg_drop_if_lost(PGconn **c, const PGresult *r) {
  if (*c && connection_lost(*c, r)) {
    pg_cut_note();
    PQfinish(*c);
    *c = NULL;
  }
}

/* Runs a command with no parameters (BEGIN, COMMIT, the schema); 0 or
 * DURO_E_STORAGE with the message recorded and, when err, copied there. */
int pg_exec_cmd(PGconn *c, const char *sql, char *err, size_t errlen) {
  PGresult *r = PQexec(c, sql);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
           PQresultStatus(r) == PGRES_TUPLES_OK;
  if (!ok) {
    pg_set_err(NULL, pg_failure_of(c, r));
    if (err)
      snprintf(err, errlen, "%s", pg_failure_of(c, r));
  }
  PQclear(r);
  return ok ? 0 : DURO_E_STORAGE;
}

/* A notice of the server's (client_min_messages=warning: its warnings,
 * such as "terminating connection due to immediate shutdown command")
 * goes to the log as one line, never straight to stderr, libpq's
 * default. */
static void log_notice(void *arg, const char *message) {
  (void)arg;
  char line[512];
  snprintf(line, sizeof line, "%s", message);
  size_t n = strlen(line);
  while (n && (line[n - 1] == '\n' || line[n - 1] == ' '))
    line[--n] = '\0';
  one_line(line);
  log_warn("PostgreSQL: %s", line);
}

/* Connects and sets the session as synchronous_full asks. */
PGconn *pg_connect(const char *conninfo, int synchronous_full, char *err,
                   size_t errlen) {
  PGconn *c = PQconnectdb(conninfo);
  if (PQstatus(c) != CONNECTION_OK) {
    pg_cut_note();
    /* The user too: a refusal's message does not always name it. */
    const char *user = PQuser(c);
    snprintf(err, errlen, "cannot connect to PostgreSQL as user \"%s\": %s",
             user ? user : "", PQerrorMessage(c));
    size_t n = strlen(err);
    while (n && err[n - 1] == '\n')
      err[--n] = 0;
    one_line(err);
    PQfinish(c);
    return NULL;
  }
  PQsetNoticeProcessor(c, log_notice, NULL);
  const char *session = synchronous_full < 0
                            ? "SET default_transaction_read_only=on"
                        : synchronous_full ? "SET synchronous_commit=on"
                                           : "SET synchronous_commit=off";
  char msg[256];
  if (pg_exec_cmd(c, "SET client_min_messages=warning", msg, sizeof msg) ||
      pg_exec_cmd(c, session, msg, sizeof msg)) {
    snprintf(err, errlen, "PostgreSQL: %s", msg);
    PQfinish(c);
    return NULL;
  }
  return c;
}

/* A reader taken after the join carries the host's name (a failure to
 * name it leaves it unnamed: it is tried again at the next take). */
static reader *reader_named(pg_store *pg, reader *r) {
  int64_t host = __atomic_load_n(&pg->host, __ATOMIC_RELAXED);
  if (host > 0 && r->named != host) {
    char err[256];
    if (pg_session_name(pg, r->conn, err, sizeof err) == 0)
      r->named = host;
  }
  return r;
}

reader *pg_reader_take(pg_store *pg) {
  pthread_mutex_lock(&pg->readers_mu);
  reader *r;
  while (!(r = pg->idle) && pg->n_readers >= READERS_MAX)
    pthread_cond_wait(&pg->readers_cv, &pg->readers_mu);
  if (r)
    pg->idle = r->next_idle;
  else
    pg->n_readers++; /* this thread makes one */
  pthread_mutex_unlock(&pg->readers_mu);
  if (r && PQstatus(r->conn) == CONNECTION_OK)
    return reader_named(pg, r);
  char err[512];
  PGconn *c = pg_connect(pg->conninfo, pg->synchronous_full, err, sizeof err);
  if (!c) {
    /* The server is away: this read fails, and the next one tries again. */
    store_error("%s", err);
    pthread_mutex_lock(&pg->readers_mu);
    if (r) {
      r->next_idle = pg->idle;
      pg->idle = r;
    } else {
      pg->n_readers--;
    }
    pthread_cond_signal(&pg->readers_cv);
    pthread_mutex_unlock(&pg->readers_mu);
    return NULL;
  }
  if (r) { /* a dropped connection: its statements went with it */
    PQfinish(r->conn);
    r->conn = c;
    r->n = 0;
    r->named = 0;
    return reader_named(pg, r);
  }
  r = xcalloc(1, sizeof *r);
  r->conn = c;
  pthread_mutex_lock(&pg->readers_mu);
  r->next = pg->readers;
  pg->readers = r;
  pthread_mutex_unlock(&pg->readers_mu);
  return reader_named(pg, r);
}

/* Runs `sql` on c within the caller's transaction; NULL after a failure
 * (recorded). */
PGresult *pg_tx_exec(PGconn *c, const char *sql, const params *p) {
  PGresult *r = PQexecParams(c, sql, p->n, NULL, p->v, NULL, NULL, 0);
  ExecStatusType s = PQresultStatus(r);
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
    pg_set_err(NULL, pg_failure_of(c, r));
    PQclear(r);
    return NULL;
  }
  return r;
}

void pg_reader_end(pg_store *pg, reader *r, int failed) {
  if (failed) {
    PGresult *rb = PQexec(r->conn, "ROLLBACK");
    PQclear(rb);
    if (PQstatus(r->conn) != CONNECTION_OK) { /* its next use connects again */
      PQfinish(r->conn);
      r->conn = NULL;
    }
  }
  pg_reader_give(pg, r);
}

void pg_reader_give(pg_store *pg, reader *r) {
  pthread_mutex_lock(&pg->readers_mu);
  r->next_idle = pg->idle;
  pg->idle = r;
  pthread_cond_signal(&pg->readers_cv);
  pthread_mutex_unlock(&pg->readers_mu);
}

/* Runs a read on reader r, preparing it on first use there; the rows (to
 * PQclear), or NULL with the error recorded. */
static PGresult *query_once(reader *r, const char *sql, const params *p,
                            int cached) {
  char name[16];
  size_t i = 0;
  while (cached && i < r->n && r->sql[i] != sql)
    i++;
  PGresult *res;
  if (i == r->n || !cached) {
    if (i == READER_CACHE || !cached) {
      res = PQexecParams(r->conn, sql, p->n, NULL, p->v, NULL, NULL, 0);
      goto ran;
    }
    snprintf(name, sizeof name, "r%zu", i);
    res = PQprepare(r->conn, name, sql, 0, NULL);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
      pg_set_err(NULL, pg_failure_of(r->conn, res));
      pg_drop_if_lost(&r->conn, res);
      PQclear(res);
      return NULL;
    }
    PQclear(res);
    r->sql[r->n++] = sql;
  }
  snprintf(name, sizeof name, "r%zu", i);
  res = PQexecPrepared(r->conn, name, p->n, p->v, NULL, NULL, 0);
ran:
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    pg_set_err(NULL, pg_failure_of(r->conn, res));
    pg_drop_if_lost(&r->conn, res);
    PQclear(res);
    return NULL;
  }
  return res;
}

/* query_once on a reader of the pool, again on a new connection when the
 * server had dropped that one or could not be reached (drop_if_lost; a
 * read changes nothing: it can run twice).  A server that was just restarted
 * may take a moment to take new sessions, so up to three tries, 50 and 100 ms
 * apart: a read waits at most 150 ms more for a server that is away. */
static PGresult *query(pg_store *pg, const char *sql, const params *p,
                       int cached) {
  PGresult *res = NULL;
  for (int attempt = 0; attempt < 3; attempt++) {
    if (attempt)
      usleep(50000u * (unsigned)attempt);
    reader *r = pg_reader_take(pg);
    if (!r)
      continue;
    res = query_once(r, sql, p, cached);
    int statement_failed = !res && PQstatus(r->conn) == CONNECTION_OK;
    pg_reader_give(pg, r);
    if (res || statement_failed)
      break; /* done, or a failure of the statement, not the connection */
  }
  return res;
}

PGresult *pg_query(pg_store *pg, const char *sql, const params *p) {
  return query(pg, sql, p, 1);
}

PGresult *pg_query_once(pg_store *pg, const char *sql, const params *p) {
  return query(pg, sql, p, 0);
}
