/* test_pg_hosts.c — three real `duro run` hosts (DURO_BIN,
 * tests/host_run.h) on one PostgreSQL database (a throwaway cluster,
 * tests/pg_fixture.h; each case a database of its own), each with its own
 * directory for storage.path and a lease of 1 s:
 *
 *  - a mixed workload created round-robin on the three (many-step
 *    instances of the faults plugin, FAULTS_PLUGIN, and orders whose
 *    approval event goes through another host than the one that created
 *    them) completes, every instance once, on all three hosts, and no
 *    completed step runs again (the plugin's log outside the journal,
 *    plugins/sidelog.h);
 *  - kill -9 of one host of three mid-run: the other two take over its
 *    instances once its lease runs out and finish them from their last
 *    completed step, running none again; its hosts row goes;
 *  - a flow control key's limit of 3, 300 instances over 10 keys made on
 *    the three hosts, kill -9 of one mid-run: the plugin's records of its
 *    callbacks never show more than 3 of a key running at once on the
 *    hosts together, and all complete;
 *  - flow.singleton in queue mode, 60 instances over 10 keys made on the
 *    three hosts, kill -9 of one mid-run: never two callbacks of a key at
 *    once on the hosts together (the killed host's instance holds its key
 *    until another host finishes it), and all complete;
 *  - pause, resume, an event, restart, terminate and delete of an
 *    instance, each sent to a host that does not run it, take effect (a
 *    delete of a live one refused with the owner's reason), and the
 *    instance stays where it runs;
 *  - messages pulled from three hosts at once are each leased to one of
 *    them: no message twice, none lost;
 *  - ticks of a cron trigger that three hosts starting together all find
 *    due fire once each: one instance a tick, counted once;
 *  - a host stopped (SIGSTOP) past its lease is taken over and, once it
 *    runs again, finds its lease lost, exits and comes back as a new host
 *    (its supervisor restarts the engine); an event for an instance it
 *    used to run, sent to it, reaches the new owner;
 *  - a host frozen past its lease while its instances run, let go once
 *    the others ran some of their steps, runs none of those steps again;
 *  - forwarded control requests that wait on the database leave the
 *    keeper free: it still hears other hosts' answers, and the lease holds;
 *  - three hosts started at once on an empty database all come up. */
#include <check.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "host_run.h"
#include "http_client.h"
#include "pg_fixture.h"
#include "proc.h"
#include "sidelog_read.h"

#ifndef ORDERS_PLUGIN
#error "build with -DORDERS_PLUGIN=\"<path of liborders.so>\""
#endif
#ifndef FAULTS_PLUGIN
#error "build with -DFAULTS_PLUGIN=\"<path of libfaults.so>\""
#endif

#define HOSTS 3
#define SETTLE_MS 30000

static pg_fixture pg = {.suite = "test_pg_hosts"};

static void cluster_start(void) { pg_fixture_up(&pg); }

/* A case that failed may have left hosts running: none outlives the
 * suite (their command lines name its directory). */
static void cluster_stop(void) {
  if (system("pkill -KILL -f 'duro-pg-hosts-' >/dev/null 2>&1") == -1)
    perror("pkill");
  pg_fixture_down(&pg);
}

#define PLUGINS                                                                \
  "  - name: orders\n"                                                         \
  "    path: " ORDERS_PLUGIN "\n"                                              \
  "    workflows:\n"                                                           \
  "      - { name: order-flow, binding: ORDER_FLOW, class_name: OrderFlow }\n" \
  "    queues:\n"                                                              \
  "      consumers: [{ queue: jobs }]\n"                                       \
  "  - name: faults\n"                                                         \
  "    path: " FAULTS_PLUGIN "\n"                                              \
  "    workflows:\n"                                                           \
  "      - { name: fault-flow, binding: FAULT_FLOW, class_name: Fault }\n"

/* The plugins, with a cron trigger that starts an order-flow instance
 * every minute and fires every missed tick. */
#define PLUGINS_WITH_CRON                                                      \
  PLUGINS "    triggers:\n"                                                    \
          "      crons:\n"                                                     \
          "        - { schedule: \"* * * * *\", workflow: order-flow,\n"       \
          "            id: \"tick-{ts}\", catch_up: all, overlap: allow }\n"

static const char *faults_log(void) {
  static char path[400];
  snprintf(path, sizeof path, "%s/faults.log", proc_tmp_dir);
  return path;
}

/* Host `i` of a case: its config and log in the case's directory, its
 * storage.path (the lock file, stored builds) in a directory of its own,
 * the journal in `conninfo`. */
static void host_prepare_lease(host_run *h, int i, const char *conninfo,
                               const char *plugins, const char *lease) {
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
          "  lease: %s\n"
          "http: { listen: \"127.0.0.1:0\" }\n"
          "engine: { workers: 4 }\n"
          "plugins:\n"
          "%s",
          proc_tmp_dir, name, conninfo, lease, plugins);
  ck_assert(fclose(f) == 0);
}

static void host_prepare(host_run *h, int i, const char *conninfo,
                         const char *plugins) {
  host_prepare_lease(h, i, conninfo, plugins, "1s");
}

static void hosts_start_lease(host_run *h, const char *db, const char *plugins,
                              char *conninfo, size_t n, const char *lease) {
  ck_assert_msg(pg.cluster.dir[0], "no cluster: %s", pg.err);
  pg_fixture_database(&pg, db, conninfo, n);
  for (int i = 0; i < HOSTS; i++) {
    host_prepare_lease(&h[i], i, conninfo, plugins, lease);
    host_start(&h[i]);
  }
}

static void hosts_start(host_run *h, const char *db, const char *plugins,
                        char *conninfo, size_t n) {
  hosts_start_lease(h, db, plugins, conninfo, n, "1s");
}

static int64_t count_rows(const char *conninfo, const char *sql) {
  return pg_query_int(conninfo, sql);
}

static long request(const host_run *h, const char *method, const char *path,
                    const char *body, http_resp *r) {
  host_request(h, r, method, path, body);
  return r->status;
}

static void expect(const host_run *h, const char *method, const char *path,
                   const char *body, long status) {
  http_resp r;
  long got = request(h, method, path, body, &r);
  ck_assert_msg(got == status, "%s %s: %ld %s", method, path, got,
                r.body ? r.body : "");
  http_resp_free(&r);
}

/* Instance `id` of fault-flow: `steps` steps that each hold `hold_ms`. */
static void create_fault_flow_held(const host_run *h, const char *id, int steps,
                                   int hold_ms) {
  char body[256];
  snprintf(body, sizeof body,
           "{\"id\":\"%s\",\"params\":{\"fault\":\"none\",\"steps\":%d,"
           "\"hold_ms\":%d}}",
           id, steps, hold_ms);
  expect(h, "POST", "/workflows/fault-flow/instances", body, 201);
}

static void create_fault_flow(const host_run *h, const char *id, int steps) {
  create_fault_flow_held(h, id, steps, 5);
}

static void create_order(const host_run *h, const char *id) {
  char body[256];
  snprintf(body, sizeof body,
           "{\"id\":\"%s\",\"params\":{\"orderId\":\"%s\",\"email\":"
           "\"a@example.com\",\"amount\":5,\"graceSeconds\":0}}",
           id, id);
  expect(h, "POST", "/workflows/order-flow/instances", body, 201);
}

/* Waits, asking host h, until order `id` waits for its review. */
static void wait_review(const host_run *h, const char *id) {
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    json_t *d = host_describe(h, "order-flow", id);
    int waits = d && step_of(d, "manual review#1") != NULL &&
                !strcmp(jstr(d, "status"), "waiting");
    json_decref(d);
    if (waits)
      return;
    ck_assert_msg(proc_now_ms() < deadline, "%s never waited for review", id);
    proc_sleep_ms(20);
  }
}

static void approve(const host_run *h, const char *id) {
  char path[128];
  snprintf(path, sizeof path,
           "/workflows/order-flow/instances/%s/events/"
           "approval",
           id);
  expect(h, "POST", path, "{\"approved\":true}", 202);
}

static void control(const host_run *h, const char *id, const char *body,
                    long status) {
  char path[128];
  snprintf(path, sizeof path, "/workflows/order-flow/instances/%s/status", id);
  expect(h, "PATCH", path, body, status);
}

static void wait_status(const host_run *h, const char *wf, const char *id,
                        const char *status) {
  json_decref(host_wait_status(h, wf, id, status, proc_now_ms() + SETTLE_MS));
}

/* The host id that runs instance `id` (instances.owner). */
static int64_t owner_of(const char *conninfo, const char *id) {
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT owner FROM instances WHERE id='%s'", id);
  return count_rows(conninfo, sql);
}

static void hosts_stop(host_run *h, int skip) {
  for (int i = 0; i < HOSTS; i++)
    if (i != skip)
      host_stop(&h[i], proc_now_ms() + SETTLE_MS, 0);
}

/* A child that waits on host h for order `id` to end (GET ?wait=20s):
 * it exits 0 when the answer came within 10 s saying complete. */
static pid_t wait_elsewhere(const host_run *h, const char *id) {
  pid_t kid = fork();
  ck_assert_int_ge(kid, 0);
  if (kid)
    return kid;
  char path[128];
  snprintf(path, sizeof path, "/workflows/order-flow/instances/%s?wait=20s",
           id);
  host_run mine = *h;
  mine.request_ms = 30000;
  http_resp r;
  int64_t t0 = proc_now_ms();
  int ok = host_request_try(&mine, &r, "GET", path, NULL) == 0 &&
           r.status == 200 && !strcmp(jstr(r.json, "status"), "complete") &&
           proc_now_ms() - t0 < 10000;
  _exit(ok ? 0 : 1);
}

#define MIXED_FAULTS 24
#define MIXED_ORDERS 6
#define MIXED_STEPS 20

/* Any host shows every host's counts (each gives its own with its
 * lease's renewals) and the totals: the steps the three completed
 * together, read on each host, are at least the fault-flows' (the orders
 * have steps too), and /metrics has a line a host and the totals. */
static void cluster_seen_from_each(host_run *h) {
  for (int i = 0; i < HOSTS; i++) {
    json_int_t steps = 0;
    http_resp r;
    for (int tries = 0; tries < 400; tries++) { /* the next renewals */
      ck_assert_int_eq(request(&h[i], "GET", "/hosts", NULL, &r), 200);
      steps = json_integer_value(jget(r.json, "totals.steps_completed"));
      json_t *hosts = jget(r.json, "hosts");
      int counted = 0;
      for (size_t k = 0; k < json_array_size(hosts); k++)
        counted += json_integer_value(jget(json_array_get(hosts, k),
                                           "counts.steps_completed")) > 0;
      http_resp_free(&r);
      if (counted == HOSTS && steps >= MIXED_FAULTS * MIXED_STEPS)
        break;
      proc_sleep_ms(50);
    }
    ck_assert_int_ge(steps, MIXED_FAULTS * MIXED_STEPS);
    ck_assert_int_eq(request(&h[i], "GET", "/metrics", NULL, &r), 200);
    size_t up = 0;
    for (const char *p = r.body; (p = strstr(p, "\nduro_host_up{")); p++)
      up++;
    ck_assert_uint_eq(up, HOSTS);
    ck_assert_ptr_nonnull(strstr(r.body, "\nduro_cluster_hosts_alive 3\n"));
    const char *total = strstr(r.body, "\nduro_cluster_steps_completed_total ");
    ck_assert_ptr_nonnull(total);
    ck_assert_int_ge(atoll(strchr(total + 1, ' ')), MIXED_FAULTS * MIXED_STEPS);
    http_resp_free(&r);
  }
}

START_TEST(mixed_workload_runs_once_on_three_hosts) {
  host_run h[HOSTS];
  char conninfo[700];
  hosts_start(h, "mixed", PLUGINS, conninfo, sizeof conninfo);
  char id[32];
  for (int i = 0; i < MIXED_FAULTS; i++) {
    snprintf(id, sizeof id, "f%d", i);
    create_fault_flow(&h[i % HOSTS], id, MIXED_STEPS);
  }
  for (int i = 0; i < MIXED_ORDERS; i++) {
    snprintf(id, sizeof id, "o%d", i);
    create_order(&h[i % HOSTS], id);
  }
  /* each order's event through the next host, its status read on the one
   * after; the first awaited there too (a remote watch) */
  pid_t waiter = 0;
  for (int i = 0; i < MIXED_ORDERS; i++) {
    snprintf(id, sizeof id, "o%d", i);
    wait_review(&h[(i + 2) % HOSTS], id);
    if (i == 0) {
      waiter = wait_elsewhere(&h[2], id);
      proc_sleep_ms(300); /* its watch registered */
    }
    approve(&h[(i + 1) % HOSTS], id);
  }
  int st;
  ck_assert_int_eq(waitpid(waiter, &st, 0), waiter);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                "a wait on another host than the owner did not end with "
                "the instance");
  for (int i = 0; i < MIXED_ORDERS; i++) {
    snprintf(id, sizeof id, "o%d", i);
    wait_status(&h[(i + 2) % HOSTS], "order-flow", id, "complete");
  }
  for (int i = 0; i < MIXED_FAULTS; i++) {
    snprintf(id, sizeof id, "f%d", i);
    wait_status(&h[(i + 1) % HOSTS], "fault-flow", id, "complete");
  }
  sidelog_assert_no_rerun(faults_log());
  ck_assert_uint_eq(sidelog_steps(faults_log(), "exec"),
                    MIXED_FAULTS * MIXED_STEPS);
  ck_assert_uint_eq(sidelog_steps(faults_log(), "seen"),
                    MIXED_FAULTS * MIXED_STEPS);
  /* every host ran its share: instances stay with the host that made them */
  ck_assert_int_eq(count_rows(conninfo, "SELECT COUNT(DISTINCT owner) FROM "
                                        "instances"),
                   HOSTS);
  ck_assert_int_eq(count_rows(conninfo, "SELECT COUNT(*) FROM instances "
                                        "WHERE status<>'complete'"),
                   0);
  ck_assert_int_eq(count_rows(conninfo, "SELECT COUNT(*) FROM hosts"), HOSTS);
  cluster_seen_from_each(h);
  /* /healthz names each host as the hosts table does */
  for (int i = 0; i < HOSTS; i++) {
    http_resp r;
    ck_assert_int_eq(request(&h[i], "GET", "/healthz", NULL, &r), 200);
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT lease_ms FROM hosts WHERE id=%lld",
             (long long)json_integer_value(jget(r.json, "host.id")));
    ck_assert_int_eq(count_rows(conninfo, sql), 1000);
    ck_assert_int_eq(json_integer_value(jget(r.json, "host.lease_ms")), 1000);
    http_resp_free(&r);
  }
  hosts_stop(h, -1);
  /* a host that stops cleanly hands its instances on at once */
  ck_assert_int_eq(count_rows(conninfo, "SELECT COUNT(*) FROM hosts WHERE "
                                        "NOT dead"),
                   0);
}
END_TEST

/* Work created on one host is shared out (rebalance.c): all of it is
 * created on the first host, which has 4 workers and steps that hold
 * theirs for 20 ms, so a backlog builds there; the two others, idle, are
 * handed some.  Every step runs once all the same, and every instance
 * completes. */
#define SHARED_FAULTS 300
#define SHARED_STEPS 4

START_TEST(backlog_is_shared_with_idle_hosts) {
  host_run h[HOSTS];
  char conninfo[700];
  hosts_start(h, "shared", PLUGINS, conninfo, sizeof conninfo);
  for (int b = 0; b < SHARED_FAULTS / 100; b++) {
    json_t *items = json_array();
    for (int i = 0; i < 100; i++) {
      char id[16];
      snprintf(id, sizeof id, "s%d", b * 100 + i);
      json_array_append_new(items, json_pack("{s:s,s:{s:s,s:i,s:i}}", "id", id,
                                             "params", "fault", "none", "steps",
                                             SHARED_STEPS, "hold_ms", 20));
    }
    json_t *body = json_pack("{s:o}", "instances", items);
    char *text = json_dumps(body, JSON_COMPACT);
    expect(&h[0], "POST", "/workflows/fault-flow/instances/batch", text, 200);
    free(text);
    json_decref(body);
  }
  int64_t done = 0;
  for (int tries = 0; tries < 1200 && done < SHARED_FAULTS; tries++) {
    done = count_rows(conninfo,
                      "SELECT COUNT(*) FROM instances WHERE status='complete'");
    if (done < SHARED_FAULTS)
      proc_sleep_ms(100);
  }
  ck_assert_int_eq(done, SHARED_FAULTS);
  sidelog_assert_no_rerun(faults_log());
  ck_assert_uint_eq(sidelog_steps(faults_log(), "exec"),
                    SHARED_FAULTS * SHARED_STEPS);
  /* the others ran some: each of them ended up owning instances */
  ck_assert_int_eq(count_rows(conninfo, "SELECT COUNT(DISTINCT owner) FROM "
                                        "instances"),
                   HOSTS);
  ck_assert_int_ge(host_count_lines(&h[0], "queued instance(s) to host"), 1);
  hosts_stop(h, -1);
}
END_TEST

#define KILL_FAULTS 24
#define KILL_STEPS 40

START_TEST(kill_one_of_three_loses_nothing) {
  host_run h[HOSTS];
  char conninfo[700];
  hosts_start(h, "killone", PLUGINS, conninfo, sizeof conninfo);
  char id[32];
  for (int i = 0; i < KILL_FAULTS; i++) {
    snprintf(id, sizeof id, "k%d", i);
    create_fault_flow(&h[i % HOSTS], id, KILL_STEPS);
  }
  int64_t victim = owner_of(conninfo, "k1"); /* made on h[1] */
  /* mid-run: some steps done, most to come */
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  while (sidelog_steps(faults_log(), "seen") < 60) {
    ck_assert_msg(proc_now_ms() < deadline, "no steps ran");
    proc_sleep_ms(5);
  }
  kill(h[1].engine, SIGKILL);
  kill(h[1].pid, SIGKILL);
  waitpid(h[1].pid, NULL, 0);
  ck_assert_msg(sidelog_steps(faults_log(), "seen") < KILL_FAULTS * KILL_STEPS,
                "every step had run before the kill");
  for (int i = 0; i < KILL_FAULTS; i++) {
    snprintf(id, sizeof id, "k%d", i);
    wait_status(&h[i % 2 ? 0 : 2], "fault-flow", id, "complete");
  }
  sidelog_assert_no_rerun(faults_log());
  ck_assert_uint_eq(sidelog_steps(faults_log(), "seen"),
                    KILL_FAULTS * KILL_STEPS);
  ck_assert_int_ge(host_count_lines(&h[0], "took over") +
                       host_count_lines(&h[2], "took over"),
                   1);
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM instances WHERE owner=%lld",
           (long long)victim);
  ck_assert_int_eq(count_rows(conninfo, sql), 0);
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM hosts WHERE id=%lld",
           (long long)victim);
  ck_assert_int_eq(count_rows(conninfo, sql), 0);
  hosts_stop(h, 1);
}
END_TEST

/* The faults plugin's Io class, a key's limit 3 across the hosts. */
#define KEYED_PLUGINS                                                          \
  "  - name: faults\n"                                                         \
  "    path: " FAULTS_PLUGIN "\n"                                              \
  "    workflows:\n"                                                           \
  "      - { name: io-flow, binding: IO_FLOW, class_name: Io,\n"               \
  "          flow: { concurrency: [{ key: /k, limit: 3 }] } }\n"
#define KEYED 300
#define KEYS 10

/* The most callbacks of one key the "enter"/"leave" records of the
 * faults log show at once on all the hosts; a callback of the host
 * killed at `killed_us` that never left ends then.  Each key's most
 * into most[]. */
static int keyed_most(int64_t killed_us, int most[KEYS]) {
  size_t n;
  sidelog_rec *recs = sidelog_read(faults_log(), &n);
  typedef struct {
    int64_t at;
    int key, delta;
  } edge;
  edge *edges = calloc(2 * n + 1, sizeof *edges);
  size_t n_edges = 0;
  /* each instance's open callback: its enter's time, or -1 */
  char(*inst)[32] = calloc(KEYED + 1, sizeof *inst);
  int64_t *open_at = calloc(KEYED + 1, sizeof *open_at);
  int *open_key = calloc(KEYED + 1, sizeof *open_key);
  size_t n_inst = 0;
  for (size_t i = 0; i < n; i++) {
    sidelog_rec *r = &recs[i];
    int enter = !strcmp(r->kind, "enter");
    if (!enter && strcmp(r->kind, "leave"))
      continue;
    size_t k = 0;
    while (k < n_inst && strcmp(inst[k], r->inst))
      k++;
    if (k == n_inst) {
      ck_assert_uint_lt(n_inst, KEYED);
      snprintf(inst[n_inst], sizeof inst[0], "%s", r->inst);
      open_at[n_inst++] = -1;
    }
    int64_t at = strtoll(r->token, NULL, 10);
    if (open_at[k] >= 0 && enter) { /* cut short by the kill */
      ck_assert_msg(open_at[k] < killed_us, "%s entered twice", r->inst);
      edges[n_edges++] = (edge){killed_us, open_key[k], -1};
    }
    edges[n_edges++] = (edge){at, r->index, enter ? 1 : -1};
    open_at[k] = enter ? at : -1;
    open_key[k] = r->index;
  }
  for (size_t k = 0; k < n_inst; k++)
    if (open_at[k] >= 0) {
      ck_assert_msg(open_at[k] < killed_us, "%s never left", inst[k]);
      edges[n_edges++] = (edge){killed_us, open_key[k], -1};
    }
  /* in time order, a leave before an enter at the same microsecond */
  for (size_t i = 1; i < n_edges; i++)
    for (size_t j = i; j > 0 && (edges[j - 1].at > edges[j].at ||
                                 (edges[j - 1].at == edges[j].at &&
                                  edges[j - 1].delta > edges[j].delta));
         j--) {
      edge t = edges[j - 1];
      edges[j - 1] = edges[j];
      edges[j] = t;
    }
  int now[KEYS] = {0}, all = 0;
  for (size_t i = 0; i < n_edges; i++) {
    int k = edges[i].key;
    ck_assert(k >= 0 && k < KEYS);
    now[k] += edges[i].delta;
    if (now[k] > most[k])
      most[k] = now[k];
    if (most[k] > all)
      all = most[k];
  }
  free(edges);
  free(inst);
  free(open_at);
  free(open_key);
  free(recs);
  return all;
}

/* `n` instances q0.. of io-flow over KEYS keys (/k = i % KEYS), each 2
 * steps of 40 ms, made in batches of 50 on the three hosts in turn. */
static void create_keyed(const host_run *h, int n) {
  for (int b = 0; b * 50 < n; b++) {
    char body[50 * 96 + 32];
    size_t len = (size_t)snprintf(body, sizeof body, "{\"instances\":[");
    for (int i = b * 50; i < (b + 1) * 50 && i < n; i++)
      len += (size_t)snprintf(body + len, sizeof body - len,
                              "%s{\"id\":\"q%d\",\"params\":{\"k\":%d,"
                              "\"steps\":2,\"hold_ms\":40}}",
                              i > b * 50 ? "," : "", i, i % KEYS);
    snprintf(body + len, sizeof body - len, "]}");
    expect(&h[b % HOSTS], "POST", "/workflows/io-flow/instances/batch", body,
           200);
  }
}

/* Once `leaves` callbacks have ended, kill -9 of host 1: when (µs). */
static int64_t kill_mid_run(host_run *h, size_t leaves) {
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  while (sidelog_steps(faults_log(), "leave") < leaves) {
    ck_assert_msg(proc_now_ms() < deadline, "no keyed steps ran");
    proc_sleep_ms(5);
  }
  kill(h[1].engine, SIGKILL);
  kill(h[1].pid, SIGKILL);
  waitpid(h[1].pid, NULL, 0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Once the `n` instances of create_keyed complete (asked of the hosts
 * that live, 0 and 2), the most callbacks of a key at once (keyed_most). */
static int keyed_all_complete(const host_run *h, int n, int64_t killed_us,
                              int most[KEYS]) {
  char id[32];
  for (int i = 0; i < n; i++) {
    snprintf(id, sizeof id, "q%d", i);
    wait_status(&h[i % 2 ? 0 : 2], "io-flow", id, "complete");
  }
  return keyed_most(killed_us, most);
}

START_TEST(key_limit_holds_across_hosts_through_a_kill) {
  host_run h[HOSTS];
  char conninfo[700];
  hosts_start(h, "keyed", KEYED_PLUGINS, conninfo, sizeof conninfo);
  create_keyed(h, KEYED);
  int64_t killed_us = kill_mid_run(h, 60);
  int most[KEYS] = {0};
  int all = keyed_all_complete(h, KEYED, killed_us, most);
  fprintf(stderr,
          "key_limit_holds_across_hosts_through_a_kill: at most %d of a key "
          "at once (limit 3) over %d keys, %d instances\n",
          all, KEYS, KEYED);
  for (int k = 0; k < KEYS; k++)
    ck_assert_msg(most[k] <= 3, "key %d had %d running at once", k, most[k]);
  ck_assert_int_eq(all, 3); /* the hosts did run a key's 3 at once */
  hosts_stop(h, 1);
}
END_TEST

/* The faults plugin's Io class, one live instance a key across the
 * hosts (flow.singleton, queue mode). */
#define SINGLE_PLUGINS                                                         \
  "  - name: faults\n"                                                         \
  "    path: " FAULTS_PLUGIN "\n"                                              \
  "    workflows:\n"                                                           \
  "      - { name: io-flow, binding: IO_FLOW, class_name: Io,\n"               \
  "          flow: { singleton: { key: /k, mode: queue } } }\n"
#define SINGLE 60

START_TEST(singleton_holds_across_hosts_through_a_kill) {
  host_run h[HOSTS];
  char conninfo[700];
  hosts_start(h, "single", SINGLE_PLUGINS, conninfo, sizeof conninfo);
  create_keyed(h, SINGLE);
  int64_t killed_us = kill_mid_run(h, 12);
  int most[KEYS] = {0};
  int all = keyed_all_complete(h, SINGLE, killed_us, most);
  for (int k = 0; k < KEYS; k++)
    ck_assert_msg(most[k] <= 1, "key %d had %d running at once", k, most[k]);
  ck_assert_int_eq(all, 1);
  hosts_stop(h, 1);
}
END_TEST

START_TEST(control_through_another_host) {
  host_run h[HOSTS];
  char conninfo[700];
  hosts_start(h, "control", PLUGINS, conninfo, sizeof conninfo);
  create_order(&h[0], "c1");
  int64_t runner = owner_of(conninfo, "c1");
  wait_review(&h[2], "c1");
  control(&h[1], "c1", "{\"status\":\"pause\"}", 200);
  wait_status(&h[2], "order-flow", "c1", "paused");
  control(&h[2], "c1", "{\"status\":\"resume\"}", 200);
  wait_review(&h[1], "c1");
  /* the owner's answer comes back: a resume of a running instance */
  http_resp r;
  char path[128] = "/workflows/order-flow/instances/c1/status";
  ck_assert_int_eq(request(&h[1], "PATCH", path, "{\"status\":\"resume\"}", &r),
                   409);
  ck_assert_str_eq(jstr(r.json, "error.code"), "instance.cannot_resume");
  http_resp_free(&r);
  approve(&h[1], "c1");
  wait_status(&h[0], "order-flow", "c1", "complete");
  control(&h[2], "c1", "{\"status\":\"restart\"}", 200);
  wait_review(&h[0], "c1");
  /* a restart of an instance that has not ended: the owner's reason */
  ck_assert_int_eq(request(&h[1], "PATCH", path,
                           "{\"status\":\"restart\",\"from\":{\"name\":"
                           "\"nope\"}}",
                           &r),
                   409);
  assert_contains(jstr(r.json, "error.message"), "instance is waiting");
  http_resp_free(&r);
  /* a delete of a live instance: the owner's refusal, naming its status */
  char one[128] = "/workflows/order-flow/instances/c1";
  ck_assert_int_eq(request(&h[1], "DELETE", one, NULL, &r), 409);
  ck_assert_str_eq(jstr(r.json, "error.code"), "instance.cannot_delete");
  assert_contains(jstr(r.json, "error.message"), "instance is waiting");
  http_resp_free(&r);
  control(&h[1], "c1", "{\"status\":\"terminate\"}", 200);
  wait_status(&h[2], "order-flow", "c1", "terminated");
  ck_assert_int_eq(owner_of(conninfo, "c1"), runner);
  /* deleted through other hosts, an ended one and a live one with
   * terminate: gone for every host */
  ck_assert_int_eq(request(&h[2], "DELETE", one, NULL, &r), 200);
  ck_assert(json_is_true(jget(r.json, "deleted")));
  http_resp_free(&r);
  create_order(&h[0], "c2");
  wait_review(&h[1], "c2");
  ck_assert_int_eq(request(&h[1], "DELETE",
                           "/workflows/order-flow/instances/c2?terminate=true",
                           NULL, &r),
                   200);
  http_resp_free(&r);
  for (int i = 0; i < HOSTS; i++) {
    ck_assert_int_eq(request(&h[i], "GET", one, NULL, &r), 404);
    http_resp_free(&r);
    ck_assert_int_eq(
        request(&h[i], "GET", "/workflows/order-flow/instances/c2", NULL, &r),
        404);
    http_resp_free(&r);
  }
  hosts_stop(h, -1);
}
END_TEST

#define MESSAGES 300

/* Pulls from host h until `got` of them came back empty in a row, writing
 * each message's id on its own line to `out`; a child of the case. */
static int pull_all(const host_run *h, const char *out) {
  FILE *f = fopen(out, "w");
  if (!f)
    return 1;
  for (int empty = 0; empty < 3;) {
    http_resp r;
    if (host_request_try(h, &r, "POST", "/queues/jobs/messages/pull",
                         "{\"batch_size\":7,\"visibility_timeout_ms\":"
                         "600000}") != 0 ||
        r.status != 200) {
      fclose(f);
      return 1;
    }
    json_t *msgs = jget(r.json, "messages");
    size_t i;
    json_t *m;
    empty = json_array_size(msgs) ? 0 : empty + 1;
    json_array_foreach(msgs, i, m) fprintf(
        f, "%lld\n", (long long)json_integer_value(json_object_get(m, "id")));
    http_resp_free(&r);
    if (!json_array_size(msgs))
      proc_sleep_ms(50);
  }
  return fclose(f) != 0;
}

START_TEST(queue_message_leased_to_one_host) {
  host_run h[HOSTS];
  char conninfo[700];
  hosts_start(h, "queue", PLUGINS, conninfo, sizeof conninfo);
  for (int b = 0; b < MESSAGES / 100; b++) {
    char body[8192] = "{\"messages\":[";
    for (int i = 0; i < 100; i++)
      snprintf(body + strlen(body), sizeof body - strlen(body),
               "%s{\"body\":{\"n\":%d}}", i ? "," : "", b * 100 + i);
    strcat(body, "]}");
    expect(&h[b], "POST", "/queues/jobs/messages/batch", body, 201);
  }
  pid_t kids[HOSTS];
  char out[HOSTS][400];
  for (int i = 0; i < HOSTS; i++) {
    snprintf(out[i], sizeof out[i], "%s/pulled%d", proc_tmp_dir, i);
    kids[i] = fork();
    ck_assert_int_ge(kids[i], 0);
    if (kids[i] == 0)
      _exit(pull_all(&h[i], out[i]));
  }
  for (int i = 0; i < HOSTS; i++) {
    int st;
    ck_assert_int_eq(waitpid(kids[i], &st, 0), kids[i]);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "puller %d failed", i);
  }
  static char seen[MESSAGES * 4];
  int total = 0, hosts_with_some = 0;
  for (int i = 0; i < HOSTS; i++) {
    FILE *f = fopen(out[i], "r");
    ck_assert_ptr_nonnull(f);
    long long mid;
    int mine = 0;
    while (fscanf(f, "%lld", &mid) == 1) {
      ck_assert_msg(mid > 0 && mid < (long long)sizeof seen, "id %lld", mid);
      ck_assert_msg(!seen[mid], "message %lld leased twice", mid);
      seen[mid] = 1;
      total++;
      mine++;
    }
    fclose(f);
    hosts_with_some += mine > 0;
  }
  ck_assert_int_eq(total, MESSAGES);
  ck_assert_int_ge(hosts_with_some, 2);
  hosts_stop(h, -1);
}
END_TEST

START_TEST(cron_tick_fires_once_across_hosts) {
  ck_assert_msg(pg.cluster.dir[0], "no cluster: %s", pg.err);
  char conninfo[700];
  pg_fixture_database(&pg, "cron", conninfo, sizeof conninfo);
  host_run h[HOSTS];
  /* One host sees the trigger first (it is new: it has missed nothing),
   * then, with every host stopped, its first sight moves ten minutes
   * back: ten ticks were missed, and every host starts to catch up at
   * once. */
  host_prepare(&h[0], 0, conninfo, PLUGINS_WITH_CRON);
  host_start(&h[0]);
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  while (count_rows(conninfo, "SELECT COUNT(*) FROM cron_triggers") != 1) {
    ck_assert_msg(proc_now_ms() < deadline, "the trigger was never seen");
    proc_sleep_ms(20);
  }
  host_stop(&h[0], proc_now_ms() + SETTLE_MS, 0);
  pg_query_int(conninfo, "WITH u AS (UPDATE cron_triggers SET "
                         "since_ms=since_ms-600000 RETURNING 1) "
                         "SELECT COUNT(*) FROM u");
  pg_query_int(conninfo, "WITH d AS (DELETE FROM cron_ticks RETURNING 1), "
                         "i AS (DELETE FROM instances RETURNING 1) "
                         "SELECT (SELECT COUNT(*) FROM d)+(SELECT COUNT(*) "
                         "FROM i)");
  for (int i = 0; i < HOSTS; i++) {
    host_prepare(&h[i], i, conninfo, PLUGINS_WITH_CRON);
    h[i].pid = host_spawn(&h[i], "run");
  }
  for (int i = 0; i < HOSTS; i++)
    host_wait_lines(&h[i], "ready:", 1, proc_now_ms() + SETTLE_MS);
  deadline = proc_now_ms() + SETTLE_MS;
  int64_t ticks;
  while ((ticks = count_rows(conninfo, "SELECT COUNT(*) FROM cron_ticks "
                                       "WHERE state<>'missed'")) < 10) {
    ck_assert_msg(proc_now_ms() < deadline, "%lld ticks fired",
                  (long long)ticks);
    proc_sleep_ms(50);
  }
  proc_sleep_ms(1000); /* a second fire of any of them would come now */
  /* Each tick one instance, each complete: read until the three agree
   * and the ticks did not move meanwhile (the minute's own tick may fire
   * between two reads, and completes a moment after it is fired); a
   * second fire of a tick would keep them apart for good. */
  int64_t inst = -1, complete = -1, again = -1;
  deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    ticks = count_rows(conninfo, "SELECT COUNT(*) FROM cron_ticks WHERE "
                                 "state<>'missed'");
    inst = count_rows(conninfo, "SELECT COUNT(*) FROM instances WHERE "
                                "id LIKE 'tick-%'");
    complete = count_rows(conninfo, "SELECT complete FROM cron_triggers");
    again = count_rows(conninfo, "SELECT COUNT(*) FROM cron_ticks WHERE "
                                 "state<>'missed'");
    if (again == ticks && inst == ticks && complete == ticks)
      break;
    ck_assert_msg(proc_now_ms() < deadline,
                  "%lld ticks fired (then %lld), %lld instances, %lld "
                  "complete",
                  (long long)ticks, (long long)again, (long long)inst,
                  (long long)complete);
    proc_sleep_ms(50);
  }
  for (int i = 0; i < HOSTS; i++)
    host_stop(&h[i], proc_now_ms() + SETTLE_MS, 0);
}
END_TEST

START_TEST(stalled_host_is_fenced_and_rejoins) {
  host_run h[HOSTS];
  char conninfo[700];
  hosts_start(h, "stall", PLUGINS, conninfo, sizeof conninfo);
  h[1].restarts = 1;
  create_order(&h[1], "s1");
  wait_review(&h[0], "s1");
  int64_t before = owner_of(conninfo, "s1");
  kill(h[1].engine, SIGSTOP);
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  while (owner_of(conninfo, "s1") == before) {
    ck_assert_msg(proc_now_ms() < deadline, "s1 never moved");
    proc_sleep_ms(50);
  }
  kill(h[1].engine, SIGCONT);
  /* it finds its lease gone, exits, and its supervisor starts a new
   * engine, which joins as a new host */
  host_wait_lines(&h[1], "lease on the store was lost", 1,
                  proc_now_ms() + SETTLE_MS);
  host_wait_lines(&h[1], "ready:", 2, proc_now_ms() + SETTLE_MS);
  approve(&h[1], "s1");
  wait_status(&h[1], "order-flow", "s1", "complete");
  ck_assert_int_eq(count_rows(conninfo, "SELECT COUNT(*) FROM hosts WHERE "
                                        "NOT dead"),
                   HOSTS);
  for (int i = 0; i < HOSTS; i++)
    host_stop(&h[i], proc_now_ms() + SETTLE_MS, i == 1);
}
END_TEST

/* Rounds of env variable `name` (a positive number), else `dflt`. */
static int rounds_of(const char *name, int dflt) {
  const char *v = getenv(name);
  int n = v ? atoi(v) : 0;
  return n > 0 ? n : dflt;
}

/* Freezes of each of frozen_host_runs_no_completed_step_again's two runs:
 * DURO_FROZEN_ROUNDS, default 1 (`make chaos-pg-hosts` asks 3, as `make
 * test` did: two more rounds of each run took 45 s of its time). */
#define FROZEN_ROUNDS_MAX 20
#define FROZEN_WORKERS 8
/* The frozen host's workers, stopped with it, let go with it. */
static pid_t h_frozen_workers[FROZEN_WORKERS];
static size_t n_frozen_workers;
#define FROZEN_FAULTS 16
#define FROZEN_STEPS 200

static int64_t steps_done(const char *conninfo) {
  return count_rows(conninfo, "SELECT COUNT(*) FROM steps WHERE "
                              "status='complete'");
}

/* One round of frozen_host_runs_no_completed_step_again: instances
 * "z<round>-<i>" made on h[1], which is frozen once they run, until the
 * others took them over and ran some of their steps. */
/* The wall clock in ns (the side log's tokens carry it). */
static long long wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Waits until process `pid` is stopped ('T' in its stat). */
static void wait_stopped(pid_t pid) {
  char path[64], stat[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  for (int i = 0;; i++) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
    if (f)
      fclose(f);
    stat[n] = '\0';
    const char *state = strrchr(stat, ')');
    if (state && state[1] == ' ' && state[2] == 'T')
      break;
    ck_assert_msg(i < 1000, "process %d did not stop", (int)pid);
    proc_sleep_ms(1);
  }
}

/* Stops engine `pid` (and, with `workers`, its worker processes first,
 * as a paused VM stops them all) and returns once all are stopped, with
 * each in fz[0..*n) (the side log names the process a callback ran in). */
static void freeze(pid_t pid, int workers, sidelog_freeze *fz, size_t *n) {
  pid_t pids[FROZEN_WORKERS + 1];
  size_t count = workers ? host_workers_of(pid, pids, FROZEN_WORKERS) : 0;
  ck_assert_msg(!workers || count > 0, "engine %d has no worker", (int)pid);
  pids[count++] = pid;
  for (size_t i = 0; i < count; i++)
    kill(pids[i], SIGSTOP);
  for (size_t i = 0; i < count; i++)
    wait_stopped(pids[i]);
  long long now = wall_ns();
  for (size_t i = 0; i < count; i++)
    fz[(*n)++] = (sidelog_freeze){.pid = (int)pids[i], .stopped_ns = now};
  for (size_t i = 0; i + 1 < count; i++) /* let go with the engine */
    h_frozen_workers[n_frozen_workers++] = pids[i];
}

static void freeze_round(host_run *h, const char *conninfo, int round,
                         int workers, sidelog_freeze *fz, size_t *n_fz) {
  char id[32];
  for (int i = 0; i < FROZEN_FAULTS; i++) {
    snprintf(id, sizeof id, "z%d-%d", round, i);
    create_fault_flow_held(&h[1], id, FROZEN_STEPS, 0);
  }
  int64_t frozen = owner_of(conninfo, id);
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  int64_t before = steps_done(conninfo);
  while (steps_done(conninfo) < before + 200) {
    ck_assert_msg(proc_now_ms() < deadline, "no steps ran");
    proc_sleep_ms(5);
  }
  n_frozen_workers = 0;
  freeze(h[1].engine, workers, fz, n_fz);
  char sql[160];
  snprintf(sql, sizeof sql,
           "SELECT COUNT(*) FROM instances WHERE owner=%lld AND status NOT IN "
           "('complete','errored','terminated')",
           (long long)frozen);
  while (count_rows(conninfo, sql) > 0) {
    ck_assert_msg(proc_now_ms() < deadline, "its instances never moved");
    proc_sleep_ms(50);
  }
  before = steps_done(conninfo);
  while (steps_done(conninfo) < before + 200) {
    ck_assert_msg(proc_now_ms() < deadline, "the takers ran no steps");
    proc_sleep_ms(20);
  }
  snprintf(sql, sizeof sql,
           "SELECT COUNT(*) FROM instances WHERE id LIKE 'z%d-%%' AND "
           "status<>'complete'",
           round);
  ck_assert_msg(count_rows(conninfo, sql) > 0,
                "every instance had completed before the frozen host ran "
                "again");
  for (size_t i = 0; i < n_frozen_workers; i++)
    kill(h_frozen_workers[i], SIGCONT);
  kill(h[1].engine, SIGCONT);
  /* it finds its lease lost and comes back as a new host */
  host_wait_lines(&h[1], "lease on the store was lost", round + 1,
                  proc_now_ms() + SETTLE_MS);
  host_wait_lines(&h[1], "ready:", round + 2, proc_now_ms() + SETTLE_MS);
  h[1].engine = host_last_engine(&h[1]);
}

/* A host frozen (SIGSTOP) for several leases while its instances run
 * many steps: the others take them over and go on from their last
 * completed step.  Once it runs again, the frozen host starts no step
 * callback, though its activations were parked mid-run, about to start
 * their next steps, which the takers may have completed meanwhile: its
 * lease may have lapsed, so it asks the keeper and finds it lost.  No
 * completed step runs again, and every instance completes.  (Which of
 * its threads runs first once it is let go is the scheduler's choice:
 * before the fix, a parked activation ran a completed step's callback in
 * most rounds, the lost lease found a few milliseconds later.)  A
 * callback already under way when the process stopped (its token older
 * than the freeze) writes its record once let go: it began under a lease
 * that held, and is no completed step run again.
 *
 * _i 1 freezes the host's worker processes with it, as a paused VM
 * does: a CALL the engine sent before the freeze is read by a worker once
 * let go, past the lease the CALL was sent under, and the worker begins
 * no callback for it (it carries the time its callback must begin by). */
START_TEST(frozen_host_runs_no_completed_step_again) {
  sidelog_freeze fz[FROZEN_ROUNDS_MAX * (FROZEN_WORKERS + 1)];
  size_t n_fz = 0;
  const int rounds = rounds_of("DURO_FROZEN_ROUNDS", 1);
  ck_assert_msg(rounds <= FROZEN_ROUNDS_MAX, "DURO_FROZEN_ROUNDS: at most %d",
                FROZEN_ROUNDS_MAX);
  host_run h[HOSTS];
  char conninfo[700];
  hosts_start(h, _i ? "frozen_workers" : "frozen", PLUGINS, conninfo,
              sizeof conninfo);
  h[1].restarts = 1;
  for (int round = 0; round < rounds; round++)
    freeze_round(h, conninfo, round, _i, fz, &n_fz);
  char id[32];
  for (int round = 0; round < rounds; round++)
    for (int i = 0; i < FROZEN_FAULTS; i++) {
      snprintf(id, sizeof id, "z%d-%d", round, i);
      wait_status(&h[0], "fault-flow", id, "complete");
    }
  sidelog_assert_no_rerun_but_frozen(faults_log(), fz, n_fz);
  ck_assert_uint_eq(sidelog_steps(faults_log(), "seen"),
                    rounds * FROZEN_FAULTS * FROZEN_STEPS);
  for (int i = 0; i < HOSTS; i++)
    host_stop(&h[i], proc_now_ms() + SETTLE_MS, i == 1);
}
END_TEST

#define SLOW_CONTROLS 4

/* A child that restarts fault-flow instance `id` from its first step
 * through host h: it exits 0 when the answer was 200. */
static pid_t restart_elsewhere(const host_run *h, const char *id) {
  pid_t kid = fork();
  ck_assert_int_ge(kid, 0);
  if (kid)
    return kid;
  char path[128];
  snprintf(path, sizeof path, "/workflows/fault-flow/instances/%s/status", id);
  http_resp r;
  int ok = host_request_try(h, &r, "PATCH", path,
                            "{\"status\":\"restart\",\"from\":{\"name\":"
                            "\"step\"}}") == 0 &&
           r.status == 200;
  _exit(ok ? 0 : 1);
}

/* Forwarded control requests that wait on the database (a restart from a
 * step reads the steps, which the test holds locked) are worked on by a
 * thread of their own: the keeper thread, which renews the lease and
 * reads the notices, still hears the answer to a request of its host's
 * own (before, it waited in the first restart and the answer came too
 * late: 503), the host keeps its lease, and the restarts take effect
 * once the lock goes. */
START_TEST(slow_forwarded_controls_leave_the_keeper_free) {
  host_run h[HOSTS];
  char conninfo[700];
  /* A lease of 3 s: a keeper held in a restart would lose it (its host
   * marked dead) within the 4 s the lock is held below, and a keeper
   * merely starved of CPU on a busy machine for a second does not. */
  hosts_start_lease(h, "slowctl", PLUGINS, conninfo, sizeof conninfo, "3s");
  char id[32];
  for (int i = 0; i < SLOW_CONTROLS; i++) {
    snprintf(id, sizeof id, "r%d", i);
    create_fault_flow(&h[0], id, 3);
  }
  for (int i = 0; i < SLOW_CONTROLS; i++) {
    snprintf(id, sizeof id, "r%d", i);
    wait_status(&h[0], "fault-flow", id, "complete");
  }
  int64_t slow = owner_of(conninfo, "r0");
  create_order(&h[1], "p1");
  wait_review(&h[1], "p1");
  PGconn *lock = PQconnectdb(conninfo);
  ck_assert_int_eq(PQstatus(lock), CONNECTION_OK);
  PGresult *r = PQexec(lock, "BEGIN; LOCK TABLE steps IN ACCESS EXCLUSIVE "
                             "MODE");
  ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
  PQclear(r);
  pid_t kids[SLOW_CONTROLS];
  for (int i = 0; i < SLOW_CONTROLS; i++) {
    snprintf(id, sizeof id, "r%d", i);
    kids[i] = restart_elsewhere(&h[2], id);
  }
  /* the first restart waits for the lock on h[0] */
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  while (count_rows(conninfo, "SELECT COUNT(*) FROM pg_locks l JOIN pg_class "
                              "c ON c.oid=l.relation WHERE "
                              "c.relname='steps' AND NOT l.granted") < 1) {
    ck_assert_msg(proc_now_ms() < deadline, "no restart reached the steps");
    proc_sleep_ms(20);
  }
  control(&h[0], "p1", "{\"status\":\"pause\"}", 200);
  proc_sleep_ms(4000); /* past a lease */
  ck_assert_int_eq(host_count_lines(&h[0], "lease on the store was lost"), 0);
  char sql[96];
  snprintf(sql, sizeof sql,
           "SELECT COUNT(*) FROM hosts WHERE id=%lld AND "
           "NOT dead",
           (long long)slow);
  ck_assert_int_eq(count_rows(conninfo, sql), 1);
  PQfinish(lock);
  for (int i = 0; i < SLOW_CONTROLS; i++) {
    int st;
    ck_assert_int_eq(waitpid(kids[i], &st, 0), kids[i]);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "restart %d was not carried out", i);
  }
  ck_assert_int_eq(count_rows(conninfo, "SELECT COUNT(*) FROM instances WHERE "
                                        "id LIKE 'r%' AND restarts=1"),
                   SLOW_CONTROLS);
  wait_status(&h[2], "order-flow", "p1", "paused");
  hosts_stop(h, -1);
}
END_TEST

/* Rounds of hosts_starting_at_once_on_an_empty_database_come_up:
 * DURO_EMPTY_ROUNDS, default 2 (`make chaos-pg-hosts` asks 5, as `make
 * test` did). */
#define EMPTY_ROUNDS rounds_of("DURO_EMPTY_ROUNDS", 2)

/* Three hosts started at once on an empty database, round after round:
 * one creates the schema, the others find it there once they may look
 * (none runs the schema's DDL under hosts already at work: that
 * deadlocked with their transactions and a host died), and all three
 * come up. */
START_TEST(hosts_starting_at_once_on_an_empty_database_come_up) {
  ck_assert_msg(pg.cluster.dir[0], "no cluster: %s", pg.err);
  for (int round = 0; round < EMPTY_ROUNDS; round++) {
    char db[16], conninfo[700];
    snprintf(db, sizeof db, "empty%d", round);
    pg_fixture_database(&pg, db, conninfo, sizeof conninfo);
    host_run h[HOSTS];
    for (int i = 0; i < HOSTS; i++)
      host_prepare(&h[i], i, conninfo, PLUGINS_WITH_CRON);
    for (int i = 0; i < HOSTS; i++)
      h[i].pid = host_spawn(&h[i], "run");
    int64_t deadline = proc_now_ms() + SETTLE_MS;
    for (int i = 0; i < HOSTS; i++) {
      while (!host_count_lines(&h[i], "ready:")) {
        char *why = proc_slurp(h[i].log);
        ck_assert_msg(!strstr(why, "cannot create schema"),
                      "round %d: host %d did not come up:\n%s", round, i,
                      proc_tail(why));
        free(why);
        ck_assert_msg(proc_now_ms() < deadline,
                      "round %d: host %d never came up", round, i);
        proc_sleep_ms(20);
      }
    }
    ck_assert_int_eq(count_rows(conninfo, "SELECT COUNT(*) FROM hosts WHERE "
                                          "NOT dead"),
                     HOSTS);
    for (int i = 0; i < HOSTS; i++)
      host_stop(&h[i], proc_now_ms() + SETTLE_MS, 0);
  }
}
END_TEST

/* The deploy plugin (plugins/deploy) at `path`: build v1 or v2. */
#define DEPLOY_AT(path)                                                        \
  "  - name: deploy\n"                                                         \
  "    path: " path "\n"                                                       \
  "    workflows:\n"                                                           \
  "      - { name: flow, binding: FLOW, class_name: Flow }\n"

/* A host that never loaded build v1 (its config says v2) takes over an
 * instance pinned to v1 and finishes it on v1, fetched from the
 * database. */
START_TEST(takeover_fetches_the_pinned_build) {
  ck_assert_msg(pg.cluster.dir[0], "no cluster: %s", pg.err);
  char conninfo[700];
  pg_fixture_database(&pg, "builds", conninfo, sizeof conninfo);
  host_run a, b;
  host_prepare(&a, 0, conninfo, DEPLOY_AT(DEPLOY_V1));
  host_prepare(&b, 1, conninfo, DEPLOY_AT(DEPLOY_V2));
  host_start(&a);
  host_start(&b);
  expect(&a, "POST", "/workflows/flow/instances",
         "{\"id\":\"d1\",\"params\":{\"nap\":\"4 seconds\"}}", 201);
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    json_t *d = host_describe(&b, "flow", "d1");
    int asleep = d && !strcmp(jstr(d, "status"), "waiting");
    json_decref(d);
    if (asleep)
      break;
    ck_assert_msg(proc_now_ms() < deadline, "d1 never slept");
    proc_sleep_ms(20);
  }
  ck_assert_int_eq(count_rows(conninfo, "SELECT COUNT(*) FROM builds"), 2);
  kill(a.engine, SIGKILL);
  kill(a.pid, SIGKILL);
  waitpid(a.pid, NULL, 0);
  json_t *d =
      host_wait_status(&b, "flow", "d1", "complete", proc_now_ms() + SETTLE_MS);
  ck_assert_str_eq(jstr(d, "output.build"), "v1");
  json_decref(d);
  ck_assert_int_eq(host_count_lines(&b, "fetched from the database"), 1);
  host_stop(&b, proc_now_ms() + SETTLE_MS, 0);
}
END_TEST

/* A bulk job runs on the host it was made on; killed in its midst
 * (engine and supervisor), another host takes the job over once the
 * takeover finds that host dead, and finishes it: every instance it
 * matched terminated, its counts adding up to its matches. */
#define BULK_ORDERS 600
START_TEST(bulk_job_outlives_its_host) {
  host_run h[HOSTS];
  char conninfo[700];
  hosts_start(h, "bulkjob", PLUGINS, conninfo, sizeof conninfo);
  for (int b = 0; b < BULK_ORDERS / 100; b++) {
    char *body = strdup("{\"instances\":[");
    for (int k = 0; k < 100; k++) {
      char one[200];
      snprintf(one, sizeof one,
               "%s{\"id\":\"b%d\",\"params\":{\"orderId\":\"b%d\","
               "\"email\":\"a@example.com\",\"amount\":5,"
               "\"graceSeconds\":0}}",
               k ? "," : "", b * 100 + k, b * 100 + k);
      body = realloc(body, strlen(body) + strlen(one) + 3);
      strcat(body, one);
    }
    strcat(body, "]}");
    expect(&h[b % HOSTS], "POST", "/workflows/order-flow/instances/batch", body,
           200);
    free(body);
  }
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  while (count_rows(conninfo, "SELECT COUNT(*) FROM steps WHERE "
                              "key='manual review#1' AND status='waiting'") <
         BULK_ORDERS) {
    ck_assert_msg(proc_now_ms() < deadline, "the orders never all waited");
    proc_sleep_ms(50);
  }
  http_resp r;
  ck_assert_int_eq(request(&h[1], "POST", "/workflows/order-flow/bulk",
                           "{\"action\":\"terminate\"}", &r),
                   202);
  ck_assert_int_eq(json_integer_value(jget(r.json, "matched")), BULK_ORDERS);
  http_resp_free(&r);
  int64_t victim = count_rows(conninfo, "SELECT host FROM bulk_jobs");
  deadline = proc_now_ms() + SETTLE_MS;
  while (count_rows(conninfo, "SELECT done FROM bulk_jobs") < 50) {
    ck_assert_msg(proc_now_ms() < deadline, "the job never got going");
    proc_sleep_ms(2);
  }
  kill(h[1].engine, SIGKILL);
  kill(h[1].pid, SIGKILL);
  waitpid(h[1].pid, NULL, 0);
  ck_assert_msg(count_rows(conninfo, "SELECT COUNT(*) FROM bulk_jobs WHERE "
                                     "state='running'") == 1,
                "the job ended before the kill");
  deadline = proc_now_ms() + SETTLE_MS;
  while (count_rows(conninfo,
                    "SELECT COUNT(*) FROM bulk_jobs WHERE state='done'") < 1) {
    ck_assert_msg(proc_now_ms() < deadline, "the job was never finished");
    proc_sleep_ms(50);
  }
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM bulk_jobs WHERE host<>%lld",
           (long long)victim);
  ck_assert_int_eq(count_rows(conninfo, sql), 1);
  ck_assert_int_eq(count_rows(conninfo, "SELECT done+skipped+failed FROM "
                                        "bulk_jobs"),
                   BULK_ORDERS);
  ck_assert_int_eq(count_rows(conninfo, "SELECT failed FROM bulk_jobs"), 0);
  ck_assert_int_eq(count_rows(conninfo, "SELECT COUNT(*) FROM instances "
                                        "WHERE status='terminated'"),
                   BULK_ORDERS);
  ck_assert_int_ge(host_count_lines(&h[0], "taken over from host") +
                       host_count_lines(&h[2], "taken over from host"),
                   1);
  hosts_stop(h, 1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("pg_hosts");
  TCase *tc = tcase_create("hosts");
  tcase_add_unchecked_fixture(tc, cluster_start, cluster_stop);
  proc_fixtures(tc, "duro-pg-hosts");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, mixed_workload_runs_once_on_three_hosts);
  tcase_add_test(tc, backlog_is_shared_with_idle_hosts);
  tcase_add_test(tc, kill_one_of_three_loses_nothing);
  tcase_add_test(tc, key_limit_holds_across_hosts_through_a_kill);
  tcase_add_test(tc, singleton_holds_across_hosts_through_a_kill);
  tcase_add_test(tc, control_through_another_host);
  tcase_add_test(tc, queue_message_leased_to_one_host);
  tcase_add_test(tc, cron_tick_fires_once_across_hosts);
  tcase_add_test(tc, stalled_host_is_fenced_and_rejoins);
  tcase_add_test(tc, takeover_fetches_the_pinned_build);
  tcase_add_test(tc, hosts_starting_at_once_on_an_empty_database_come_up);
  tcase_add_loop_test(tc, frozen_host_runs_no_completed_step_again, 0, 2);
  tcase_add_test(tc, slow_forwarded_controls_leave_the_keeper_free);
  suite_add_tcase(s, tc);
  /* bulk actions' jobs across the hosts (CK_RUN_CASE=bulk alone) */
  TCase *bulk = tcase_create("bulk");
  tcase_add_unchecked_fixture(bulk, cluster_start, cluster_stop);
  proc_fixtures(bulk, "duro-pg-hosts");
  tcase_set_timeout(bulk, 120);
  tcase_add_test(bulk, bulk_job_outlives_its_host);
  suite_add_tcase(s, bulk);
  return http_suite_run(s);
}
