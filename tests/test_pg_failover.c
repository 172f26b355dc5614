/* test_pg_failover.c — two real `duro run` hosts on a PostgreSQL primary
 * with a synchronous streaming standby (tests/pg/cluster.sh standby),
 * given the connection string of both (target_session_attrs=read-write),
 * as a pair that fails over is run:
 *
 *  - the primary is killed mid-run and, two leases later, the standby
 *    promoted: every create the hosts acknowledged is there, every
 *    instance completes (fault-flows of many steps, order-flows whose
 *    approval is sent after the failover), no completed step runs again,
 *    and neither host loses its lease for the database's absence (the
 *    promoted server started long before, so its start time does not
 *    excuse the hosts' stale heartbeats: the hosts wait a lease after
 *    they are back before they find any other dead).  Creates sent
 *    while no primary answers are either acknowledged (and then there)
 *    or refused with 503 and Retry-After.  The time from the kill to the
 *    first create acknowledged on the new primary is printed.
 *
 * With DURO_PG_STANDBY=async (make chaos-failover-async) the standby is
 * asynchronous, and a failover may lose what the primary acknowledged
 * and the standby had not received: the run then counts what was lost
 * (acknowledged creates and sends that are not there, completed steps
 * run again, leases lost) instead of failing on it, and checks that the
 * hosts carry on: every instance the new primary has completes. */
#include <check.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_run.h"
#include "http_client.h"
#include "pg_cluster.h"
#include "pg_fixture.h"
#include "proc.h"
#include "sidelog_read.h"

#ifndef ORDERS_PLUGIN
#error "build with -DORDERS_PLUGIN=\"<path of liborders.so>\""
#endif
#ifndef FAULTS_PLUGIN
#error "build with -DFAULTS_PLUGIN=\"<path of libfaults.so>\""
#endif

#define HOSTS 2
#define SETTLE_MS 60000
#define LEASE_MS 1000

/* The two servers: srv[0] starts as the primary, srv[1] as its standby;
 * srv[1]'s connection string names both, and stays right as they swap. */
static pg_cluster srv[2];
static char cluster_err[1024];

static void pair_start(void) {
  if (pg_cluster_start(&srv[0], cluster_err, sizeof cluster_err) == 0 &&
      pg_cluster_standby(&srv[0], &srv[1], cluster_err, sizeof cluster_err) !=
          0) {
    char ignored[64];
    pg_cluster_stop(&srv[0], ignored, sizeof ignored);
  }
}

/* A case that failed may have left hosts running: none outlives the
 * suite (their command lines name its directory). */
static void pair_stop(void) {
  if (system("pkill -KILL -f 'duro-pg-failover-' >/dev/null 2>&1") == -1)
    perror("pkill");
  char ignored[256];
  pg_cluster_stop(&srv[1], ignored, sizeof ignored);
  pg_cluster_stop(&srv[0], ignored, sizeof ignored);
}

static const char *faults_log(void) {
  static char path[400];
  snprintf(path, sizeof path, "%s/faults.log", proc_tmp_dir);
  return path;
}

static void host_prepare(host_run *h, int i, const char *conninfo) {
  char name[16];
  snprintf(name, sizeof name, "h%d", i);
  host_init(h, name);
  h->request_ms = 15000;
  host_setenv(h, "DURO_FAULTS_LOG", faults_log());
  FILE *f = fopen(h->config, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f,
          "storage:\n"
          "  path: %s/%s/duro.db\n"
          "  postgresql: \"%s\"\n"
          "  synchronous: full\n"
          "  lease: %dms\n"
          "http: { listen: \"127.0.0.1:0\" }\n"
          "engine: { workers: 4 }\n"
          "plugins:\n"
          "  - name: orders\n"
          "    path: " ORDERS_PLUGIN "\n"
          "    workflows:\n"
          "      - { name: order-flow, binding: ORDER_FLOW, class_name: "
          "OrderFlow }\n"
          "  - name: faults\n"
          "    path: " FAULTS_PLUGIN "\n"
          "    workflows:\n"
          "      - { name: fault-flow, binding: FAULT_FLOW, class_name: Fault "
          "}\n"
          "    queues:\n"
          "      consumers: [{ queue: jobs, workflow: fault-flow, id_from: "
          "/id }]\n",
          proc_tmp_dir, name, conninfo, LEASE_MS);
  ck_assert(fclose(f) == 0);
}

static long post(const host_run *h, const char *path, const char *body,
                 http_resp *r) {
  if (host_request_try(h, r, "POST", path, body) != 0)
    return -1; /* no answer in time: not acknowledged */
  return r->status;
}

static void create_fault(const host_run *h, const char *id, int steps) {
  char body[256];
  snprintf(body, sizeof body,
           "{\"id\":\"%s\",\"params\":{\"fault\":\"none\",\"steps\":%d,"
           "\"hold_ms\":10}}",
           id, steps);
  http_resp r;
  ck_assert_int_eq(post(h, "/workflows/fault-flow/instances", body, &r), 201);
  http_resp_free(&r);
}

static void create_order(const host_run *h, const char *id) {
  char body[256];
  snprintf(body, sizeof body,
           "{\"id\":\"%s\",\"params\":{\"orderId\":\"%s\",\"email\":"
           "\"a@example.com\",\"amount\":5,\"graceSeconds\":0}}",
           id, id);
  http_resp r;
  ck_assert_int_eq(post(h, "/workflows/order-flow/instances", body, &r), 201);
  http_resp_free(&r);
}

static int64_t count_rows(const char *sql) {
  return pg_query_int(srv[1].conninfo, sql);
}

/* An asynchronous standby (tests/pg/cluster.sh standby): losses are
 * counted, not failures. */
static int async_standby(void) {
  const char *v = getenv("DURO_PG_STANDBY");
  return v && !strcmp(v, "async");
}

/* How many steps (instance, index) of the side-effect log ran again after
 * their result was seen (sidelog_assert_no_rerun's failures, counted). */
static size_t reruns(const char *path) {
  size_t n = 0, count = 0;
  sidelog_rec *v = sidelog_read(path, &n);
  for (size_t i = 0; i < n; i++) {
    if (strcmp(v[i].kind, "exec"))
      continue;
    for (size_t k = 0; k < i; k++)
      if (!strcmp(v[k].kind, "seen") && v[k].index == v[i].index &&
          !strcmp(v[k].inst, v[i].inst)) {
        count++;
        break;
      }
  }
  free(v);
  return count;
}

static long env_long(const char *name, long fallback) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : fallback;
}

#define STEPS 10
#define ORDERS 6
#define SENDS_A_ROUND 40

/* What was acknowledged while the servers failed over: creates and
 * queue sends (the no-code consumer makes each an instance). */
typedef struct acked {
  char (*ids)[32];
  size_t n, cap;
  int refused;
} acked;

static void ack(acked *a, const char *id) {
  if (a->n == a->cap) {
    a->cap = a->cap ? 2 * a->cap : 64;
    a->ids = realloc(a->ids, a->cap * sizeof *a->ids);
    ck_assert_ptr_nonnull(a->ids);
  }
  snprintf(a->ids[a->n++], sizeof a->ids[0], "%s", id);
}

/* A create (even i) or a queue send (odd i) of instance `id`: 1 when it
 * was acknowledged; a 503 must say when to try again. */
static int send_one(const host_run *h, int i, const char *id, acked *a) {
  char body[200];
  const char *path;
  if (i % 2 == 0) {
    path = "/workflows/fault-flow/instances";
    snprintf(body, sizeof body,
             "{\"id\":\"%s\",\"params\":{\"fault\":\"none\",\"steps\":2,"
             "\"hold_ms\":1}}",
             id);
  } else {
    path = "/queues/jobs/messages";
    snprintf(body, sizeof body,
             "{\"body\":{\"id\":\"%s\",\"fault\":\"none\",\"steps\":2,"
             "\"hold_ms\":1}}",
             id);
  }
  http_resp r;
  long status = post(h, path, body, &r);
  if (status == 201) {
    ack(a, id);
  } else if (status == 503) {
    char after[32];
    ck_assert_msg(http_resp_header(&r, "retry-after", after, sizeof after),
                  "a 503 without Retry-After: %s", r.body);
    a->refused++;
  } else {
    ck_assert_msg(status == -1, "%s during the failover: %ld %s", path, status,
                  r.body ? r.body : "");
  }
  if (status >= 0)
    http_resp_free(&r);
  return status == 201;
}

/* How long an asynchronous standby is held behind before each kill. */
#define LAG_MS 500

/* Cuts the standby off its primary, as a network partition would: it
 * follows a server that is not there (primary_conninfo, reloaded) and
 * no longer streams; promoted, it has what it had received. */
static void standby_cut_off(void) {
  char ci[sizeof srv[1].conninfo + 40];
  snprintf(ci, sizeof ci, "%s target_session_attrs=standby", srv[1].conninfo);
  PGconn *c = PQconnectdb(ci);
  ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
  PGresult *r = PQexec(c, "ALTER SYSTEM SET primary_conninfo = "
                          "'host=/nonexistent port=1 connect_timeout=1'");
  ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s",
                PQresultErrorMessage(r));
  PQclear(r);
  PQclear(PQexec(c, "SELECT pg_reload_conf()"));
  long streaming = 1;
  for (int i = 0; i < 250 && streaming; i++) {
    r = PQexec(c, "SELECT count(*) FROM pg_stat_wal_receiver WHERE "
                  "status='streaming'");
    streaming = PQresultStatus(r) == PGRES_TUPLES_OK
                    ? strtol(PQgetvalue(r, 0, 0), NULL, 10)
                    : 1;
    PQclear(r);
    if (streaming)
      proc_sleep_ms(20);
  }
  PQfinish(c);
  ck_assert_msg(!streaming, "the standby still streams");
}

/* The primary srv[cur] is killed once `faults * STEPS * (round + 1) /
 * (kills + 1)` steps ran; the standby is promoted after `outage_ms`,
 * while creates and sends go on; then (more rounds to come) the killed
 * one is made the new primary's standby, in its own directory. */
static void fail_over(host_run *h, int *cur, int round, long kills, long faults,
                      int64_t outage_ms, acked *a) {
  size_t want = (size_t)(faults * STEPS * (round + 1) / (kills + 1));
  for (int tries = 0; tries < 3000; tries++) {
    if (sidelog_steps(faults_log(), "exec") >= want)
      break;
    proc_sleep_ms(20);
  }
  char err[512];
  /* an asynchronous standby cut off: what the primary acknowledges for
   * the last LAG_MS before its death never reaches the standby */
  if (async_standby()) {
    standby_cut_off();
    for (int i = 0; i < LAG_MS / 100; i++) {
      char id[32];
      snprintf(id, sizeof id, "lag%d-%d", round, i);
      send_one(&h[i % HOSTS], i, id, a);
      proc_sleep_ms(100);
    }
  }
  ck_assert_msg(pg_cluster_kill(&srv[*cur], err, sizeof err) == 0, "%s", err);
  int64_t killed = proc_now_ms(), first = -1;
  int promoted = 0;
  for (int i = 0; i < SENDS_A_ROUND || (promoted && first < 0 && i < 400);
       i++) {
    if (!promoted && proc_now_ms() - killed >= outage_ms) {
      ck_assert_msg(pg_cluster_promote(&srv[1 - *cur], err, sizeof err) == 0,
                    "%s", err);
      promoted = 1;
    }
    char id[32];
    snprintf(id, sizeof id, "r%d-%d", round, i);
    if (send_one(&h[i % HOSTS], i, id, a) && promoted && first < 0)
      first = proc_now_ms() - killed;
    proc_sleep_ms(100);
  }
  ck_assert(promoted);
  printf("failover %d: no primary for %lld ms; the first write acknowledged "
         "%lld ms after the kill\n",
         round + 1, (long long)outage_ms, (long long)first);
  if (round + 1 < kills) {
    char dir[sizeof srv[0].dir];
    snprintf(dir, sizeof dir, "%s", srv[*cur].dir);
    ck_assert_msg(pg_cluster_stop(&srv[*cur], err, sizeof err) == 0, "%s", err);
    snprintf(srv[*cur].dir, sizeof srv[*cur].dir, "%s", dir);
    ck_assert_msg(
        pg_cluster_standby(&srv[1 - *cur], &srv[*cur], err, sizeof err) == 0,
        "%s", err);
  }
  *cur = 1 - *cur;
}

/* DURO_FAILOVER_KILLS failovers (default 1: the first after two leases
 * without a primary, the others after 0.3-3 s, DURO_FAILOVER_SEED's
 * draw) under DURO_FAILOVER_FAULTS fault-flows (default 40) of 10 steps,
 * 6 orders waiting for an event, and creates and queue sends all along. */
START_TEST(primary_dies_and_the_standby_takes_over) {
  ck_assert_msg(srv[1].dir[0], "no primary and standby: %s", cluster_err);
  long kills = env_long("DURO_FAILOVER_KILLS", 1);
  long faults = env_long("DURO_FAILOVER_FAULTS", 40);
  srand((unsigned)env_long("DURO_FAILOVER_SEED", 1));
  host_run h[HOSTS];
  for (int i = 0; i < HOSTS; i++) {
    host_prepare(&h[i], i, srv[1].conninfo);
    host_start(&h[i]);
  }
  char id[32];
  for (int i = 0; i < ORDERS; i++) {
    snprintf(id, sizeof id, "o%d", i);
    create_order(&h[i % HOSTS], id);
  }
  for (long i = 0; i < faults; i++) {
    snprintf(id, sizeof id, "f%ld", i);
    create_fault(&h[i % HOSTS], id, STEPS);
  }
  acked a = {0};
  int cur = 0;
  for (int round = 0; round < kills; round++)
    fail_over(h, &cur, round, kills, faults,
              round == 0 ? 2 * LEASE_MS : 300 + rand() % 2700, &a);
  printf("failover: %zu creates and sends acknowledged meanwhile, %d refused "
         "with 503\n",
         a.n, a.refused);
  /* the orders' approvals, each through the other host than its own */
  for (int i = 0; i < ORDERS; i++) {
    char path[128];
    snprintf(path, sizeof path,
             "/workflows/order-flow/instances/o%d/events/approval", i);
    for (int tries = 0;; tries++) {
      http_resp r;
      long status = post(&h[(i + 1) % HOSTS], path, "{\"approved\":true}", &r);
      if (status >= 0)
        http_resp_free(&r);
      if (status == 202 || (status == 404 && async_standby()))
        break; /* 404: an asynchronous standby lost the order */
      ck_assert_msg(tries < 100, "approval of o%d: %ld", i, status);
      proc_sleep_ms(100);
    }
  }
  int64_t want = faults + ORDERS + (int64_t)a.n, done = 0;
  if (async_standby()) /* every instance the new primary has */
    want = count_rows("SELECT COUNT(*) FROM instances");
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  while (proc_now_ms() < deadline) {
    done = count_rows("SELECT COUNT(*) FROM instances WHERE status="
                      "'complete'");
    if (done >= want)
      break;
    proc_sleep_ms(100);
  }
  if (async_standby()) {
    size_t lost = 0;
    for (size_t i = 0; i < a.n; i++) {
      char sql[128];
      snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM instances WHERE id='%s'",
               a.ids[i]);
      lost += count_rows(sql) == 0;
    }
    int leases = 0;
    for (int i = 0; i < HOSTS; i++)
      leases += host_count_lines(&h[i], "lease on the store was lost");
    printf("asynchronous standby: %zu of %zu creates and sends acknowledged "
           "during the failovers lost; %zu steps run again after they had "
           "completed; %d leases lost; %lld instances, all complete\n",
           lost, a.n, reruns(faults_log()), leases, (long long)want);
    ck_assert_int_eq(done, want);
    free(a.ids);
    for (int i = 0; i < HOSTS; i++)
      host_stop(&h[i], proc_now_ms() + SETTLE_MS, 1);
    return;
  }
  /* every acknowledged create and send is an instance that completed */
  ck_assert_int_eq(done, want);
  for (size_t i = 0; i < a.n; i++) {
    char sql[128];
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM instances WHERE id='%s' AND "
             "status='complete'",
             a.ids[i]);
    ck_assert_msg(count_rows(sql) == 1, "%s, acknowledged, is not complete",
                  a.ids[i]);
  }
  free(a.ids);
  sidelog_assert_no_rerun(faults_log());
  /* no host lost its lease for the database's absence (each host's
   * lines about hosts shown if one did) */
  int lost = 0;
  for (int i = 0; i < HOSTS; i++)
    lost += host_count_lines(&h[i], "lease on the store was lost");
  for (int i = 0; lost && i < HOSTS; i++) {
    int n = 0;
    char *log = proc_slurp(h[i].log);
    char *lines = host_lines_with(log, "host", &n);
    fprintf(stderr, "host %d:\n%s", i, lines);
    free(lines);
    free(log);
  }
  ck_assert_msg(!lost, "a host lost its lease %d time(s) (their lines above)",
                lost);
  for (int i = 0; i < HOSTS; i++)
    host_stop(&h[i], proc_now_ms() + SETTLE_MS, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("pg_failover");
  TCase *tc = tcase_create("failover");
  tcase_add_unchecked_fixture(tc, pair_start, pair_stop);
  proc_fixtures(tc, "duro-pg-failover");
  /* make chaos-failover: many failovers of many instances */
  tcase_set_timeout(tc, 180 + 120 * (int)env_long("DURO_FAILOVER_KILLS", 1));
  tcase_add_test(tc, primary_dies_and_the_standby_takes_over);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
