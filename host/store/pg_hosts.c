/* pg_hosts.c — several hosts on one PostgreSQL database (journal.h's
 * journal_join and what follows it).
 *
 * A host that joins gets a row in `hosts` and a lease on it: its keeper
 * thread renews `heartbeat` (the server's clock, so the hosts' clocks
 * never matter) every third of the lease.  Each instance row names the
 * host that runs it (`owner`); a host reads only its own runnable
 * instances and wakes, so each runs on one host and each wake fires once.
 * The lease is all-or-nothing: one row for every instance a host runs, so
 * renewing costs one UPDATE whatever their number.
 *
 * A host whose heartbeat is older than its lease is marked dead by the
 * next host's takeover pass, and its instances move, in batches claimed
 * with FOR UPDATE SKIP LOCKED so that survivors share them, to whoever
 * claims them.  A restarted server gives every host a full lease again
 * (pg_postmaster_start_time): an outage of the database kills no host.
 *
 * Fencing: every group transaction of a host first takes its own hosts
 * row FOR SHARE, and only if it is not dead.  Marking a host dead waits
 * for that lock, so a group of a host that was only slow either commits
 * before its instances move (and the taker replays it) or finds itself
 * dead and fails; then the host has lost its lease and must stop
 * (hooks.lost).  No step of a moved instance is written twice.
 *
 * The fence stops a stale host's writes, not its step callbacks: a host
 * frozen past its lease (SIGSTOP, a paused VM, a long swap stall) would
 * resume its activations straight into their next callbacks, steps that
 * the host that took over may have completed meanwhile.  So a host knows
 * until when its lease surely holds (lease_until: when the last renewal
 * that succeeded was sent, since the server dates the heartbeat by its
 * own clock once the statement arrives, plus two thirds of the lease),
 * on CLOCK_BOOTTIME, which counts the time a process was stopped and the
 * machine suspended; the engine asks before each callback
 * (pg_lease_held), and past that time waits for the keeper's next
 * renewal to say whether the lease still holds.  (A freeze that falls
 * in the microseconds between that look and the callback's start is one
 * that caught a callback under way: no fence can stop what a callback
 * does once it runs.)
 *
 * Notices: the keeper LISTENs on "duro_host_<id>" and hands each payload
 * to hooks.notice; other hosts send them with pg_notify (an event stored
 * for an instance this host runs, a control request). */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "pg_internal.h"

/* Wakes the threads waiting in lease_wait. */
static void lease_tell(pg_store *pg) {
  pthread_mutex_lock(&pg->lease_mu);
  pthread_cond_broadcast(&pg->lease_cv);
  pthread_mutex_unlock(&pg->lease_mu);
}

/* A renewal sent at `sent` (clock_boot_ms) succeeded. */
static void lease_renewed(pg_store *pg, int64_t sent) {
  int64_t until = sent + pg->lease_ms - pg->lease_ms / 3;
  int64_t old = __atomic_load_n(&pg->lease_until, __ATOMIC_ACQUIRE);
  while (old < until &&
         !__atomic_compare_exchange_n(&pg->lease_until, &old, until, 0,
                                      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    ;
  if (__atomic_load_n(&pg->lost, __ATOMIC_ACQUIRE))
    __atomic_store_n(&pg->lease_until, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&pg->lease_warned, 0, __ATOMIC_RELAXED);
  lease_tell(pg);
}

void pg_host_lost(pg_store *pg) {
  int first = __atomic_exchange_n(&pg->lost, 1, __ATOMIC_ACQ_REL) == 0;
  /* After `lost`: a renewal that raced with this sees it (lease_renewed) */
  __atomic_store_n(&pg->lease_until, 0, __ATOMIC_RELEASE);
  if (first) {
    lease_tell(pg);
    if (pg->hooks.lost)
      pg->hooks.lost(pg->hooks.ctx);
  }
}

static int lease_sure(pg_store *pg) {
  return clock_boot_ms() < __atomic_load_n(&pg->lease_until, __ATOMIC_ACQUIRE);
}

/* The lease may have lapsed: waits, for up to a lease, for the keeper to
 * renew it (1) or find it lost (0).  No answer in that time (the
 * database is away) is 0 too: the caller's work is retried later. */
static int lease_wait(pg_store *pg) {
  int64_t give_up = clock_boot_ms() + pg->lease_ms;
  int held;
  pthread_mutex_lock(&pg->lease_mu);
  while (!(held = lease_sure(pg)) &&
         !__atomic_load_n(&pg->lost, __ATOMIC_ACQUIRE) &&
         !__atomic_load_n(&pg->stopping, __ATOMIC_ACQUIRE) &&
         clock_boot_ms() < give_up) {
    /* the boot clock decides, not this one */
    struct timespec ts = clock_deadline(CLOCK_REALTIME, 50);
    pthread_cond_timedwait(&pg->lease_cv, &pg->lease_mu, &ts);
  }
  pthread_mutex_unlock(&pg->lease_mu);
  if (!held && !__atomic_load_n(&pg->lost, __ATOMIC_ACQUIRE) &&
      !__atomic_exchange_n(&pg->lease_warned, 1, __ATOMIC_RELAXED))
    log_warn("PostgreSQL: host %" PRId64 "'s lease was not renewed for "
             "%" PRId64 " ms: no step starts until it is",
             pg->host, pg->lease_ms);
  return held;
}

int pg_lease_held(void *db) {
  pg_store *pg = db;
  return lease_sure(pg) || lease_wait(pg);
}

int64_t pg_lease_until(void *db) {
  pg_store *pg = db;
  return __atomic_load_n(&pg->lease_until, __ATOMIC_ACQUIRE);
}

/* Renews the lease on `c`, and leaves the host's counts (its hooks') on
 * its row: 1, 0 when the host was found dead, -1 when the statement
 * failed (the connection, most likely). */
static int lease_renew(pg_store *pg, PGconn *c) {
  char id[24];
  snprintf(id, sizeof id, "%" PRId64, pg->host);
  char *counts = pg->hooks.counts ? pg->hooks.counts(pg->hooks.ctx) : NULL;
  const char *v[2] = {id, counts};
  PGresult *r = PQexecParams(c,
                             "UPDATE hosts SET heartbeat=now(),"
                             "counts=coalesce($2,counts) WHERE id=$1 "
                             "AND NOT dead",
                             2, NULL, v, NULL, NULL, 0);
  free(counts);
  int rc = PQresultStatus(r) != PGRES_COMMAND_OK ? -1
           : strcmp(PQcmdTuples(r), "1") == 0    ? 1
                                                 : 0;
  if (rc < 0)
    log_warn("PostgreSQL: renewing host %" PRId64 "'s lease: %s", pg->host,
             pg_failure_of(c, r));
  PQclear(r);
  return rc;
}

/* The keeper's session: connected, listening. */
static PGconn *keeper_connect(pg_store *pg) {
  char err[512], sql[64];
  PGconn *c = pg_connect(pg->conninfo, pg->synchronous_full, err, sizeof err);
  if (!c)
    return NULL;
  snprintf(sql, sizeof sql, "LISTEN " HOST_CHANNEL "%" PRId64, pg->host);
  if (pg_exec_cmd(c, sql, err, sizeof err) != 0 ||
      pg_session_name(pg, c, err, sizeof err) != 0) {
    PQfinish(c);
    return NULL;
  }
  return c;
}

static void *keeper_main(void *arg) {
  pg_store *pg = arg;
  PGconn *c = NULL;
  int64_t next_beat = 0, beat_every = pg->lease_ms / 3;
  int listened_before = 0;
  while (!__atomic_load_n(&pg->stopping, __ATOMIC_ACQUIRE)) {
    if (!c) {
      if (!(c = keeper_connect(pg))) {
        usleep(200000);
        continue;
      }
      /* Notices sent while it was away are gone: the engine looks again
       * at what they could have said. */
      if (listened_before && pg->hooks.notice)
        pg->hooks.notice(pg->hooks.ctx, "resync");
      listened_before = 1;
      next_beat = 0;
    }
    int64_t now = clock_mono_ms();
    if (__atomic_exchange_n(&pg->renew_soon, 0, __ATOMIC_ACQ_REL))
      next_beat = 0;
    if (now >= next_beat) {
      int64_t sent = clock_boot_ms();
      int rc = lease_renew(pg, c);
      if (rc == 0) {
        pg_host_lost(pg);
        break;
      }
      if (rc < 0) {
        pg_cut_note();
        PQfinish(c);
        c = NULL;
        continue;
      }
      lease_renewed(pg, sent);
      next_beat = now + beat_every;
    }
    int64_t wait = next_beat - clock_mono_ms();
    struct pollfd pfd = {.fd = PQsocket(c), .events = POLLIN};
    poll(&pfd, 1, (int)(wait < 100 ? (wait > 0 ? wait : 0) : 100));
    if (!PQconsumeInput(c)) {
      pg_cut_note();
      PQfinish(c);
      c = NULL;
      continue;
    }
    for (PGnotify *n; (n = PQnotifies(c)); PQfreemem(n))
      if (pg->hooks.notice)
        pg->hooks.notice(pg->hooks.ctx, n->extra);
  }
  PQfinish(c);
  return NULL;
}

/* A host frozen (SIGSTOP, a paused VM, a long swap stall) inside a
 * group's transaction holds its hosts row FOR SHARE, the fence, and in
 * the middle of a pipeline the server arms no idle timeout: marking it
 * dead would wait for that lock for as long as it stays frozen, and its
 * instances would never move.  So every session of a joined host carries
 * its name, and the takeover pass ends the sessions of a host past its
 * lease before it marks that host dead (which lets the lock go; the
 * frozen host, once it runs again, finds its connections gone and its
 * row dead). */
void pg_renew_soon(void *db) {
  pg_store *pg = db;
  __atomic_store_n(&pg->renew_soon, 1, __ATOMIC_RELEASE);
}

int pg_session_name(pg_store *pg, PGconn *c, char *err, size_t errlen) {
  if (pg->host <= 0)
    return 0;
  char sql[80], msg[256];
  snprintf(sql, sizeof sql, "SET application_name='duro host %" PRId64 "'",
           pg->host);
  if (pg_exec_cmd(c, sql, msg, sizeof msg) == 0)
    return 0;
  snprintf(err, errlen, "PostgreSQL: %s", msg);
  return -1;
}

int pg_join(void *db, int64_t lease_ms, const store_host_hooks *hooks,
            int64_t *host, char *err, size_t errlen) {
  pg_store *pg = db;
  char name[256] = "", pid[24], lease[24];
  gethostname(name, sizeof name - 1);
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  snprintf(lease, sizeof lease, "%" PRId64, lease_ms);
  const char *v[3] = {name, pid, lease};
  int64_t sent = clock_boot_ms();
  PGresult *r = PQexecParams(pg->wr,
                             "INSERT INTO hosts(name,pid,lease_ms) "
                             "VALUES($1,$2,$3) RETURNING id",
                             3, NULL, v, NULL, NULL, 0);
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    snprintf(err, errlen, "PostgreSQL: cannot join as a host: %s",
             pg_failure_of(pg->wr, r));
    PQclear(r);
    return DURO_E_STORAGE;
  }
  pg->host = get_i64(r, 0, 0);
  PQclear(r);
  pg->lease_ms = lease_ms;
  if (pg_session_name(pg, pg->wr, err, errlen))
    return DURO_E_STORAGE;
  lease_renewed(pg, sent); /* the row's heartbeat is its insert's */
  pg->hooks = *hooks;
  if (pthread_create(&pg->keeper, NULL, keeper_main, pg) != 0) {
    snprintf(err, errlen, "cannot start the lease keeper thread");
    return DURO_E_STORAGE;
  }
  pg->keeper_started = 1;
  *host = pg->host;
  return 0;
}

/* Ends the sessions of every other host past its lease (see
 * pg_session_name), logging each host whose sessions it ended.  Without
 * the right to (another role, not pg_signal_backend), marking such a
 * host dead waits as before. */
static void end_stale_sessions(pg_store *pg, PGconn *c, const params *me) {
  (void)pg;
  PGresult *r = PQexecParams(
      c,
      "SELECT h.id, count(*) FILTER (WHERE pg_terminate_backend(a.pid)) "
      "FROM hosts h JOIN pg_stat_activity a ON a.application_name = "
      "'duro host ' || h.id WHERE h.id<>$1 AND NOT h.dead AND "
      "greatest(h.heartbeat, pg_postmaster_start_time()) < now() - "
      "h.lease_ms * interval '1 millisecond' GROUP BY h.id",
      me->n, NULL, me->v, NULL, NULL, 0);
  if (PQresultStatus(r) == PGRES_TUPLES_OK)
    for (int i = 0; i < PQntuples(r); i++)
      if (strcmp(PQgetvalue(r, i, 1), "0") != 0)
        log_warn("host %s is past its lease: ended its %s session(s), so "
                 "that what it held (a frozen group's fence) lets go",
                 PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
  PQclear(r);
}

int pg_takeover(void *db, size_t limit,
                void (*fn)(void *ctx, int64_t rowid, int64_t wake_ms),
                void *ctx, size_t *moved) {
  pg_store *pg = db;
  *moved = 0;
  reader *rd = pg_reader_take(pg);
  if (!rd)
    return DURO_E_STORAGE;
  PGconn *c = rd->conn;
  params me = {0};
  p_i64(&me, pg->host);
  PGresult *r = NULL;
  int rc = DURO_E_STORAGE;
  int64_t sent = clock_boot_ms();
  /* This host found the database away less than a lease ago (its keeper
   * tries to reach it all along an outage): the others may have been cut
   * off as long, and may not have renewed yet.  A restarted server says
   * so itself (pg_postmaster_start_time), a standby promoted in its place
   * does not: its server started long before.  So none is found dead
   * until a lease has passed. */
  int64_t cut = pg_cut_last();
  int grace = cut && sent - cut < pg->lease_ms;
  if (!grace)
    end_stale_sessions(pg, c, &me);
  if (pg_exec_cmd(c, "BEGIN", NULL, 0))
    goto out;
  /* Its own lease first: a host that lost it takes nothing. */
  if (!(r = pg_tx_exec(c,
                       "UPDATE hosts SET heartbeat=now() WHERE id=$1 AND "
                       "NOT dead",
                       &me)))
    goto out;
  int alive = strcmp(PQcmdTuples(r), "1") == 0;
  PQclear(r);
  r = NULL;
  if (!alive) {
    store_error("host %" PRId64 " lost its lease", pg->host);
    pg_host_lost(pg);
    goto out;
  }
  if (grace)
    r = pg_tx_exec(c, "SELECT 1 WHERE false", &(params){0});
  else
    r = pg_tx_exec(c,
                   "UPDATE hosts SET dead=true WHERE id<>$1 AND NOT dead "
                   "AND greatest(heartbeat, pg_postmaster_start_time()) < "
                   "now() - lease_ms * interval '1 millisecond' "
                   "RETURNING id, name, pid",
                   &me);
  if (!r)
    goto out;
  for (int i = 0; i < PQntuples(r); i++)
    log_warn("host %s (%s, pid %s) stopped renewing its lease: its "
             "instances move to the hosts left",
             PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2));
  PQclear(r);
  params q = {0};
  p_i64(&q, pg->host);
  p_i64(&q, (int64_t)limit);
  if (!(r = pg_tx_exec(c,
                       "WITH picked AS (SELECT rowid FROM instances WHERE "
                       "owner = ANY(ARRAY(SELECT id FROM hosts WHERE dead) || "
                       "0::bigint) AND status NOT IN "
                       "('complete','errored','terminated') LIMIT $2 "
                       "FOR UPDATE SKIP LOCKED) "
                       "UPDATE instances SET owner=$1 FROM picked WHERE "
                       "instances.rowid=picked.rowid "
                       "RETURNING instances.rowid, instances.wake_ms",
                       &q)))
    goto out;
  PGresult *taken = r;
  r = pg_tx_exec(c,
                 "DELETE FROM hosts WHERE dead AND NOT EXISTS (SELECT 1 FROM "
                 "instances WHERE owner=hosts.id AND status NOT IN "
                 "('complete','errored','terminated'))",
                 &(params){0});
  if (!r || pg_exec_cmd(c, "COMMIT", NULL, 0)) {
    PQclear(taken);
    goto out;
  }
  lease_renewed(pg, sent); /* its heartbeat is the transaction's start */
  for (int i = 0; i < PQntuples(taken); i++)
    fn(ctx, get_i64(taken, i, 0), get_ms(taken, i, 1));
  *moved = (size_t)PQntuples(taken);
  PQclear(taken);
  rc = 0;
out:
  PQclear(r);
  pg_reader_end(pg, rd, rc != 0);
  return rc;
}

int pg_adopt(void *db, int64_t rowid, int64_t *owner) {
  pg_store *pg = db;
  params p = {0};
  p_i64(&p, rowid);
  p_i64(&p, pg->host);
  PGresult *r = pg_query(
      pg,
      "WITH cur AS (SELECT owner FROM instances WHERE rowid=$1), "
      "up AS (UPDATE instances SET owner=$2 WHERE rowid=$1 AND owner<>$2 AND "
      "NOT EXISTS (SELECT 1 FROM hosts h WHERE h.id=instances.owner AND NOT "
      "h.dead) RETURNING owner) "
      "SELECT (SELECT owner FROM up), (SELECT owner FROM cur)",
      &p);
  if (!r)
    return DURO_E_STORAGE;
  int rc = 0;
  if (!PQgetisnull(r, 0, 0))
    *owner = get_i64(r, 0, 0);
  else if (!PQgetisnull(r, 0, 1))
    *owner = get_i64(r, 0, 1);
  else
    rc = DURO_E_NOT_FOUND;
  PQclear(r);
  return rc;
}

int pg_notify(void *db, int64_t host, const char *text) {
  char channel[40];
  snprintf(channel, sizeof channel, HOST_CHANNEL "%" PRId64, host);
  params p = {0};
  p_text(&p, channel);
  p_text(&p, text);
  PGresult *r = pg_query(db, "SELECT pg_notify($1, $2)", &p);
  PQclear(r);
  return r ? 0 : DURO_E_STORAGE;
}

/* No more notices: the keeper stops (the lease then runs out unless the
 * store is closed soon, which ends it). */
void pg_quiet(void *db) {
  pg_store *pg = db;
  if (!pg->keeper_started)
    return;
  __atomic_store_n(&pg->stopping, 1, __ATOMIC_RELEASE);
  lease_tell(pg); /* no renewal is coming */
  pthread_join(pg->keeper, NULL);
  pg->keeper_started = 0;
}

/* At close: a host that leaves cleanly marks itself dead so that its
 * instances move at once, not a lease later. */
void pg_host_leave(pg_store *pg) {
  pg_quiet(pg);
  if (!pg->host || __atomic_load_n(&pg->lost, __ATOMIC_ACQUIRE) ||
      PQstatus(pg->wr) != CONNECTION_OK)
    return;
  char id[24];
  snprintf(id, sizeof id, "%" PRId64, pg->host);
  const char *v[1] = {id};
  PGresult *r = PQexecParams(pg->wr, "UPDATE hosts SET dead=true WHERE id=$1",
                             1, NULL, v, NULL, NULL, 0);
  PQclear(r);
}

int pg_hosts_each(void *db, void (*fn)(void *ctx, const journal_host_row *row),
                  void *ctx) {
  params p = {0};
  /* the live instances by instances_owner_live, a host at a time */
  PGresult *r = pg_query(
      db,
      "SELECT h.id,h.name,h.pid,(extract(epoch FROM h.started)*1000)::bigint,"
      "(extract(epoch FROM h.heartbeat)*1000)::bigint,"
      "(extract(epoch FROM now()-h.heartbeat)*1000)::bigint,h.lease_ms,"
      "h.dead,(SELECT count(*) FROM instances i WHERE i.owner=h.id AND "
      "i.status NOT IN ('complete','errored','terminated')),h.counts "
      "FROM hosts h "
      "WHERE NOT h.dead OR h.heartbeat > now() - interval '1 day' "
      "ORDER BY h.id",
      &p);
  if (!r)
    return DURO_E_STORAGE;
  for (int i = 0; i < PQntuples(r); i++) {
    journal_host_row row = {
        .id = get_i64(r, i, 0),
        .name = get_str(r, i, 1),
        .pid = get_i64(r, i, 2),
        .started_ms = get_i64(r, i, 3),
        .heartbeat_ms = get_i64(r, i, 4),
        .heartbeat_age_ms = get_i64(r, i, 5),
        .lease_ms = get_i64(r, i, 6),
        .dead = PQgetvalue(r, i, 7)[0] == 't',
        .live = get_i64(r, i, 8),
        .counts = PQgetisnull(r, i, 9) ? NULL : PQgetvalue(r, i, 9)};
    fn(ctx, &row);
  }
  PQclear(r);
  return 0;
}
