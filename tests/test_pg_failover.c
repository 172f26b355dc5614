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
 *    first create acknowledged on the new primary is printed. */
#include <check.h>
#include <jansson.h>
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

static pg_cluster primary, standby;
static char cluster_err[1024];

static void pair_start(void) {
  if (pg_cluster_start(&primary, cluster_err, sizeof cluster_err) == 0 &&
      pg_cluster_standby(&primary, &standby, cluster_err, sizeof cluster_err) !=
          0) {
    char ignored[64];
    pg_cluster_stop(&primary, ignored, sizeof ignored);
  }
}

/* A case that failed may have left hosts running: none outlives the
 * suite (their command lines name its directory). */
static void pair_stop(void) {
  if (system("pkill -KILL -f 'duro-pg-failover-' >/dev/null 2>&1") == -1)
    perror("pkill");
  char ignored[256];
  pg_cluster_stop(&standby, ignored, sizeof ignored);
  pg_cluster_stop(&primary, ignored, sizeof ignored);
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
          "}\n",
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
  return pg_query_int(standby.conninfo, sql);
}

#define FAULTS 40
#define STEPS 10
#define ORDERS 6
#define OUTAGE_CREATES 40

START_TEST(primary_dies_and_the_standby_takes_over) {
  ck_assert_msg(standby.dir[0], "no primary and standby: %s", cluster_err);
  host_run h[HOSTS];
  for (int i = 0; i < HOSTS; i++) {
    host_prepare(&h[i], i, standby.conninfo);
    host_start(&h[i]);
  }
  char id[32];
  for (int i = 0; i < ORDERS; i++) {
    snprintf(id, sizeof id, "o%d", i);
    create_order(&h[i % HOSTS], id);
  }
  for (int i = 0; i < FAULTS; i++) {
    snprintf(id, sizeof id, "f%d", i);
    create_fault(&h[i % HOSTS], id, STEPS);
  }
  /* some steps done, many to go */
  for (int tries = 0; tries < 500; tries++) {
    if (sidelog_steps(faults_log(), "exec") >= FAULTS * STEPS / 4)
      break;
    proc_sleep_ms(20);
  }
  char err[512];
  ck_assert_msg(pg_cluster_kill(&primary, err, sizeof err) == 0, "%s", err);
  int64_t killed = proc_now_ms();
  /* no primary for two leases: creates now are refused or wait */
  int acked[OUTAGE_CREATES] = {0}, refused = 0;
  int64_t first_ack_ms = -1;
  int promoted = 0;
  for (int i = 0; i < OUTAGE_CREATES; i++) {
    if (!promoted && proc_now_ms() - killed >= 2 * LEASE_MS) {
      ck_assert_msg(pg_cluster_promote(&standby, err, sizeof err) == 0, "%s",
                    err);
      promoted = 1;
    }
    snprintf(id, sizeof id, "during%d", i);
    char body[160];
    snprintf(body, sizeof body,
             "{\"id\":\"%s\",\"params\":{\"fault\":\"none\",\"steps\":2,"
             "\"hold_ms\":1}}",
             id);
    http_resp r;
    long status =
        post(&h[i % HOSTS], "/workflows/fault-flow/instances", body, &r);
    if (status == 201) {
      acked[i] = 1;
      if (first_ack_ms < 0 && promoted)
        first_ack_ms = proc_now_ms() - killed;
    } else if (status == 503) {
      char after[32];
      ck_assert_msg(http_resp_header(&r, "retry-after", after, sizeof after),
                    "a 503 without Retry-After: %s", r.body);
      refused++;
    } else {
      ck_assert_msg(status == -1, "create %s during the failover: %ld %s", id,
                    status, r.body ? r.body : "");
    }
    if (status >= 0)
      http_resp_free(&r);
    proc_sleep_ms(100);
  }
  ck_assert(promoted);
  printf("failover: the first create acknowledged %lld ms after the "
         "primary's kill (promoted after %d ms); %d of %d creates during it "
         "refused with 503\n",
         (long long)first_ack_ms, 2 * LEASE_MS, refused, OUTAGE_CREATES);
  /* the orders' approvals, through the other host than each's own */
  for (int i = 0; i < ORDERS; i++) {
    char path[128];
    snprintf(path, sizeof path,
             "/workflows/order-flow/instances/o%d/events/approval", i);
    for (int tries = 0;; tries++) {
      http_resp r;
      long status = post(&h[(i + 1) % HOSTS], path, "{\"approved\":true}", &r);
      if (status >= 0)
        http_resp_free(&r);
      if (status == 202)
        break;
      ck_assert_msg(tries < 100, "approval of o%d: %ld", i, status);
      proc_sleep_ms(100);
    }
  }
  int64_t want = FAULTS + ORDERS;
  for (int i = 0; i < OUTAGE_CREATES; i++)
    want += acked[i];
  int64_t done = 0, deadline = proc_now_ms() + SETTLE_MS;
  while (proc_now_ms() < deadline) {
    done = count_rows("SELECT COUNT(*) FROM instances WHERE status="
                      "'complete'");
    if (done >= want)
      break;
    proc_sleep_ms(100);
  }
  /* every acknowledged create is there and complete */
  ck_assert_int_eq(done, want);
  for (int i = 0; i < OUTAGE_CREATES; i++) {
    char sql[128];
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM instances WHERE id='during%d' AND "
             "status='complete'",
             i);
    if (acked[i])
      ck_assert_int_eq(count_rows(sql), 1);
  }
  sidelog_assert_no_rerun(faults_log());
  /* no host lost its lease for the database's absence */
  for (int i = 0; i < HOSTS; i++)
    ck_assert_int_eq(host_count_lines(&h[i], "lease on the store was lost"), 0);
  for (int i = 0; i < HOSTS; i++)
    host_stop(&h[i], proc_now_ms() + SETTLE_MS, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("pg_failover");
  TCase *tc = tcase_create("failover");
  tcase_add_unchecked_fixture(tc, pair_start, pair_stop);
  proc_fixtures(tc, "duro-pg-failover");
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, primary_dies_and_the_standby_takes_over);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
