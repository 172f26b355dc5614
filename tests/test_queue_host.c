/* test_queue_host.c — queue consumers on a real `duro run` (DURO_BIN,
 * tests/host_run.h), in the case's own directory.
 *
 *  - a push consumer: the queue_handler fixture (FIXTURES_DIR), loaded by
 *    the host, gets the messages of queue "in" in batches of at most
 *    max_batch_size and forwards each to queue "out" (which a second
 *    plugin consumes, as a pull consumer), retrying one once; its
 *    max_batch_size lowered in the config and reloaded, its batches are
 *    that size;
 *  - the no-code consumer under kill -9: a stream of messages sent to a
 *    host whose queue `jobs` feeds workflow fault-flow (the faults plugin,
 *    FAULTS_PLUGIN) with one instance per job id, while its engine process
 *    is SIGKILLed again and again (the supervisor starts a new one each
 *    time).  No send that was answered 201 is lost (each of its job ids
 *    has an instance, which completes), and each instance is created once:
 *    a second creation of a job (after an ack lost with its engine) would
 *    be refused by its id, and a job created anew would run its step again
 *    after its result was seen, which the plugin's side log
 *    ($DURO_FAULTS_LOG, "exec"/"seen" records) would show.  A send that
 *    got no answer is sent again until one comes: it may be stored twice,
 *    which must still make one instance.  The queue ends empty. */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_run.h"
#include "http_client.h"
#include "proc.h"

#ifndef FAULTS_PLUGIN
#error "build with -DFAULTS_PLUGIN=\"<path of libfaults.so>\""
#endif
#ifndef FIXTURES_DIR
#error "build with -DFIXTURES_DIR=\"<dir holding libfixture_*.so>\""
#endif

#define FLOW "fault-flow"
#define JOBS 200
#define KILL_EVERY 50 /* sends between two kills */
#define SETTLE_MS 60000
#define LINE_SIZE 64 /* a record of the faults log */

/* ---- a push consumer ------------------------------------------------------
 */

static int64_t queue_count(host_run *h, const char *q, const char *what) {
  char path[64];
  snprintf(path, sizeof path, "/queues/%s", q);
  http_resp r;
  host_request(h, &r, "GET", path, NULL);
  ck_assert_int_eq(r.status, 200);
  int64_t n = json_integer_value(jget(r.json, what));
  http_resp_free(&r);
  return n;
}

/* The push consumer's options of start_push_consumer. */
#define PUSH_CONSUMER                                                          \
  "max_batch_size: 4, max_batch_timeout: 0,\n"                                 \
  "            max_retries: 2, dead_letter_queue: in-dead,\n"                  \
  "            visibility_timeout: 10m"

/* keys: the qh plugin's own ("workers: 0" runs its handler in the
 * engine), or NULL. */
static void start_push_keys(host_run *h, const char *engine,
                            const char *consumer, const char *keys) {
  char db[400], plugins[1024];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_init(h, "push");
  h->plugin_keys = keys;
  h->request_ms = 3000;
  h->restarts = 1;
  snprintf(plugins, sizeof plugins,
           "      - { name: hello, binding: HELLO, class_name: Hello }\n"
           "    queues:\n"
           "      producers: [{ binding: OUT, queue: out }]\n"
           "      consumers:\n"
           "        - { queue: in, %s }\n"
           "  - name: sink\n"
           "    path: " FIXTURES_DIR "/libfixture_good_v1.so\n"
           "    queues:\n"
           "      consumers: [{ queue: out }]\n",
           consumer);
  host_write_config(h, db, engine, "qh",
                    FIXTURES_DIR "/libfixture_queue_handler.so", plugins);
  host_start(h);
}

static void start_push_consumer(host_run *h, const char *engine,
                                const char *consumer) {
  start_push_keys(h, engine, consumer, NULL);
}

static void start_push_engine(host_run *h, const char *engine) {
  start_push_consumer(h, engine, PUSH_CONSUMER);
}

static void start_push(host_run *h) { start_push_engine(h, "{ workers: 2 }"); }

START_TEST(push_handler_gets_batches) {
  host_run H;
  start_push(&H);
  char body[2048] = "{\"messages\":[";
  for (int i = 0; i < 10; i++)
    snprintf(body + strlen(body), sizeof body - strlen(body),
             "{\"body\":{\"n\":%d}},", i);
  strcat(body, "{\"body\":{\"retry\":true}}]}");
  /* sent in a trace: the handler is handed its traceparent */
  static const char tp[] =
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  char header[100];
  snprintf(header, sizeof header, "traceparent: %s", tp);
  http_req q = {.method = "POST",
                .path = "/queues/in/messages/batch",
                .body = body,
                .header = header};
  http_resp r;
  ck_assert_int_eq(http_send(H.port, &q, &r), CURLE_OK);
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  int64_t deadline = proc_now_ms() + 10000;
  while (queue_count(&H, "out", "ready") < 11) {
    ck_assert_msg(proc_now_ms() < deadline, "out holds %lld of 11",
                  (long long)queue_count(&H, "out", "ready"));
    proc_sleep_ms(50);
  }
  host_request(&H, &r, "POST", "/queues/out/messages/pull",
               "{\"batch_size\":100}");
  ck_assert_int_eq(r.status, 200);
  json_t *msgs = jget(r.json, "messages");
  ck_assert_uint_eq(json_array_size(msgs), 11);
  int seen[10] = {0}, retried = 0;
  size_t i;
  json_t *m;
  json_array_foreach(msgs, i, m) {
    json_t *got = json_object_get(m, "body");
    ck_assert_int_le(json_integer_value(json_object_get(got, "batch")), 4);
    /* the handler ran in the plugin's worker process, not the engine */
    json_int_t pid = json_integer_value(json_object_get(got, "pid"));
    ck_assert(pid > 0 && pid != host_last_engine(&H));
    ck_assert_str_eq(json_string_value(json_object_get(got, "traceparent")),
                     tp);
    json_t *sent = json_object_get(got, "body");
    if (json_object_get(sent, "retry")) {
      retried++;
      ck_assert_int_eq(json_integer_value(json_object_get(got, "attempts")), 2);
    } else {
      seen[json_integer_value(json_object_get(sent, "n"))]++;
    }
  }
  http_resp_free(&r);
  ck_assert_int_eq(retried, 1);
  for (int k = 0; k < 10; k++)
    ck_assert_int_eq(seen[k], 1);
  ck_assert_int_eq(
      queue_count(&H, "in", "ready") + queue_count(&H, "in", "in_flight"), 0);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* Writes the push consumer's config again with `consumer` as its
 * options and reloads it (POST /plugins/reload); the answer's config part
 * must be applied and name `change`. */
static void reconfigure_push(host_run *h, const char *consumer,
                             const char *change) {
  char db[400], plugins[1024];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  snprintf(plugins, sizeof plugins,
           "      - { name: hello, binding: HELLO, class_name: Hello }\n"
           "    queues:\n"
           "      producers: [{ binding: OUT, queue: out }]\n"
           "      consumers:\n"
           "        - { queue: in, %s }\n"
           "  - name: sink\n"
           "    path: " FIXTURES_DIR "/libfixture_good_v1.so\n"
           "    queues:\n"
           "      consumers: [{ queue: out }]\n",
           consumer);
  host_write_config(h, db, "{ workers: 2 }", "qh",
                    FIXTURES_DIR "/libfixture_queue_handler.so", plugins);
  http_resp r;
  host_request(h, &r, "POST", "/plugins/reload", "{}");
  ck_assert_int_eq(r.status, 200);
  char *text = jdump(r.json);
  json_t *changes = jget(r.json, "config.changes");
  int named = 0;
  size_t i;
  json_t *v;
  json_array_foreach(changes, i, v) named |=
      strstr(json_string_value(v), change) != NULL;
  ck_assert_msg(!strcmp(jstr(r.json, "config.status"), "applied") && named,
                "want %s applied: %s", change, text);
  free(text);
  http_resp_free(&r);
}

/* A push consumer's max_batch_size lowered by a config reload: the
 * handler's batches are that size from then on (the fixture forwards
 * each message with the size of its batch). */
START_TEST(push_batch_size_changes_at_reload) {
  host_run H;
  start_push(&H);
  reconfigure_push(&H,
                   "max_batch_size: 1, max_batch_timeout: 0,\n"
                   "            max_retries: 2, dead_letter_queue: in-dead,\n"
                   "            visibility_timeout: 10m",
                   "queue in: max_batch_size: 4 -> 1");
  http_resp r;
  host_request(&H, &r, "GET", "/queues/in", NULL);
  ck_assert_int_eq(json_integer_value(jget(r.json, "consumer.max_batch_size")),
                   1);
  http_resp_free(&r);
  host_request(&H, &r, "POST", "/queues/in/messages/batch",
               "{\"messages\":[{\"body\":1},{\"body\":2},{\"body\":3},"
               "{\"body\":4},{\"body\":5},{\"body\":6}]}");
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  int64_t deadline = proc_now_ms() + 10000;
  while (queue_count(&H, "out", "ready") < 6) {
    ck_assert_msg(proc_now_ms() < deadline, "out holds %lld of 6",
                  (long long)queue_count(&H, "out", "ready"));
    proc_sleep_ms(50);
  }
  host_request(&H, &r, "POST", "/queues/out/messages/pull",
               "{\"batch_size\":100}");
  ck_assert_int_eq(r.status, 200);
  json_t *msgs = jget(r.json, "messages");
  ck_assert_uint_eq(json_array_size(msgs), 6);
  size_t i;
  json_t *m;
  json_array_foreach(msgs, i, m)
      ck_assert_int_eq(json_integer_value(jget(m, "body.batch")), 1);
  http_resp_free(&r);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

static json_t *pull_when_ready(host_run *h, const char *q, int64_t n,
                               int64_t within_ms);

/* A consumer with concurrency by key (limit 1): a batch holds at most
 * one message of an account, an account's messages are handled in the
 * order sent (its first retried once, and the next waiting for it), and
 * a reload changes the limit live. */
#define KEYED_CONSUMER                                                         \
  "max_batch_size: 4, max_batch_timeout: 0,\n"                                 \
  "            max_retries: 2, dead_letter_queue: in-dead,\n"                  \
  "            visibility_timeout: 10m,\n"                                     \
  "            concurrency: { key: /account, limit: %d }"

START_TEST(push_concurrency_by_key) {
  host_run H;
  char consumer[256];
  snprintf(consumer, sizeof consumer, KEYED_CONSUMER, 1);
  start_push_consumer(&H, "{ workers: 2 }", consumer);
  http_resp r;
  host_request(&H, &r, "GET", "/queues/in", NULL);
  ck_assert_str_eq(jstr(r.json, "consumer.concurrency.key"), "/account");
  ck_assert_int_eq(
      json_integer_value(jget(r.json, "consumer.concurrency.limit")), 1);
  ck_assert_int_eq(json_integer_value(jget(r.json, "held")), 0);
  http_resp_free(&r);
  char body[2048] = "{\"messages\":[";
  for (int n = 0; n < 5; n++)
    for (int a = 0; a < 2; a++)
      snprintf(body + strlen(body), sizeof body - strlen(body),
               "%s{\"body\":{\"account\":\"%c\",\"n\":%d%s}}",
               n || a ? "," : "", 'a' + a, n,
               n == 0 && a == 0 ? ",\"retry\":true" : "");
  strcat(body, "]}");
  host_request(&H, &r, "POST", "/queues/in/messages/batch", body);
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  json_t *msgs = pull_when_ready(&H, "out", 10, 10000);
  int next[2] = {0, 0};
  size_t i;
  json_t *m;
  json_array_foreach(msgs, i, m) {
    ck_assert_int_le(json_integer_value(jget(m, "body.batch")), 2);
    int a = jstr(m, "body.body.account")[0] - 'a';
    int n = (int)json_integer_value(jget(m, "body.body.n"));
    ck_assert_msg(n == next[a], "account %c: %d came before %d", 'a' + a, n,
                  next[a]);
    next[a]++;
    if (a == 0 && n == 0)
      ck_assert_int_eq(json_integer_value(jget(m, "body.attempts")), 2);
  }
  json_decref(msgs);
  snprintf(consumer, sizeof consumer, KEYED_CONSUMER, 2);
  reconfigure_push(&H, consumer, "concurrency.limit");
  host_request(&H, &r, "GET", "/queues/in", NULL);
  ck_assert_int_eq(
      json_integer_value(jget(r.json, "consumer.concurrency.limit")), 2);
  http_resp_free(&r);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* Waits until queue q holds n ready messages, then pulls them. */
static json_t *pull_when_ready(host_run *h, const char *q, int64_t n,
                               int64_t within_ms) {
  char path[64];
  snprintf(path, sizeof path, "/queues/%s", q);
  int64_t deadline = proc_now_ms() + within_ms;
  http_resp r = {0};
  for (;;) {
    if (host_request_try(h, &r, "GET", path, NULL) == 0) {
      int64_t ready = json_integer_value(jget(r.json, "ready"));
      http_resp_free(&r);
      if (ready == n)
        break;
    }
    ck_assert_msg(proc_now_ms() < deadline, "%s: not %lld ready in %lld ms", q,
                  (long long)n, (long long)within_ms);
    proc_sleep_ms(100);
  }
  snprintf(path, sizeof path, "/queues/%s/messages/pull", q);
  host_request(h, &r, "POST", path, "{\"batch_size\":100}");
  ck_assert_int_eq(r.status, 200);
  json_t *msgs = json_incref(jget(r.json, "messages"));
  http_resp_free(&r);
  return msgs;
}

/* A handler run in the engine (workers: 0) that kills it is named in the
 * crash ledger: the next engine retries its batch at once, not when the
 * lease (10 minutes here) ends. */
START_TEST(push_handler_crash_redelivers) {
  host_run H;
  start_push_keys(&H, "{ workers: 2 }", PUSH_CONSUMER, "workers: 0");
  pid_t first = host_last_engine(&H);
  http_resp r = {0};
  /* The handler may crash the engine before the 201 goes out: no answer
   * then, but the message was committed (only committed ones reach it). */
  if (host_request_try(&H, &r, "POST", "/queues/in/messages",
                       "{\"body\":{\"crash\":true}}") == 0)
    ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  ck_assert_msg(host_wait_gone(first, 10000), "the handler did not crash");
  json_t *msgs = pull_when_ready(&H, "out", 1, 30000);
  ck_assert_int_eq(
      json_integer_value(jget(json_array_get(msgs, 0), "body.attempts")), 2);
  json_decref(msgs);
  ck_assert_int_ne(host_last_engine(&H), first);
  /* The supervisor's line names what the dead thread ran, in the words
   * the queues' driver left in its ledger slot. */
  ck_assert_int_ge(host_count_lines(&H, "queue handler (queue \"in\", a "
                                        "batch of 1)"),
                   1);
  host_stop(&H, proc_now_ms() + 10000, 1);
}
END_TEST

/* A handler that crashes its worker process: the engine runs on (no
 * restart, the same process answers), the death is logged naming the
 * handler, and the batch is retried at once, not when the lease (10
 * minutes here) ends; the next worker handles it. */
START_TEST(push_handler_crash_in_worker) {
  host_run H;
  start_push(&H);
  pid_t engine = host_last_engine(&H);
  http_resp r = {0};
  host_request(&H, &r, "POST", "/queues/in/messages",
               "{\"body\":{\"crash\":true}}");
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  json_t *msgs = pull_when_ready(&H, "out", 1, 30000);
  json_t *got = jget(json_array_get(msgs, 0), "body");
  ck_assert_int_eq(json_integer_value(json_object_get(got, "attempts")), 2);
  json_int_t pid = json_integer_value(json_object_get(got, "pid"));
  ck_assert(pid > 0 && pid != engine);
  json_decref(msgs);
  ck_assert_int_eq(host_last_engine(&H), engine);
  ck_assert_int_eq(host_count_lines(&H, "restarting in"), 0);
  ck_assert_int_eq(host_count_lines(&H, "the queue handler of plugin \"qh\" "
                                        "(queue \"in\") crashed its worker "
                                        "process"),
                   1);
  host_request(&H, &r, "GET", "/healthz", NULL);
  ck_assert_int_eq(r.status, 200);
  http_resp_free(&r);
  host_stop(&H, proc_now_ms() + 10000, 0);
}
END_TEST

/* A handler that crashes on every delivery: max_retries (2) + 1 crashes,
 * each recorded as the message's failed attempt, then the message is in
 * the dead-letter queue with the crash as its last error. */
START_TEST(push_handler_always_crashing_dead_letters) {
  host_run H;
  start_push(&H);
  http_resp r = {0};
  if (host_request_try(&H, &r, "POST", "/queues/in/messages",
                       "{\"body\":{\"crash\":\"always\"}}") == 0)
    ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  json_t *msgs = pull_when_ready(&H, "in-dead", 1, 30000);
  json_t *m = json_array_get(msgs, 0);
  ck_assert_str_eq(json_string_value(jget(m, "body.crash")), "always");
  ck_assert_int_eq(json_integer_value(jget(m, "attempts")), 4);
  const char *last = json_string_value(jget(m, "last_error"));
  ck_assert_ptr_nonnull(last);
  ck_assert_msg(strstr(last, "plugin.crashed") &&
                    strstr(last, "queue handler of plugin"),
                "last_error: %s", last);
  json_decref(msgs);
  ck_assert_int_eq(queue_count(&H, "in", "ready"), 0);
  ck_assert_int_eq(queue_count(&H, "in", "in_flight"), 0);
  host_stop(&H, proc_now_ms() + 10000, 1);
}
END_TEST

/* A handler that never returns does not hold the host past
 * engine.shutdown_grace on SIGTERM. */
START_TEST(push_hung_handler_does_not_hold_shutdown) {
  host_run H;
  start_push_engine(&H, "{ workers: 2, shutdown_grace: 1s }");
  http_resp r;
  host_request(&H, &r, "POST", "/queues/in/messages",
               "{\"body\":{\"hang\":true}}");
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  int64_t deadline = proc_now_ms() + 10000;
  while (queue_count(&H, "in", "in_flight") != 1) {
    ck_assert_msg(proc_now_ms() < deadline, "the batch never went");
    proc_sleep_ms(50);
  }
  host_stop(&H, proc_now_ms() + 8000, 0);
  ck_assert_int_eq(host_count_lines(&H, "queue batch(es) still running"), 1);
}
END_TEST

/* A handler that hangs on one message, on the consumer's only slot: past
 * its visibility_timeout (1 s) it is abandoned — logged with the queue
 * and how long, listed by /healthz, the message's delivery counted — so
 * the 50 messages behind it are handled, and the hung one reaches the
 * dead-letter queue after max_retries (2) + 1 deliveries, each of which
 * hung a thread. */
#define HUNG_CONSUMER                                                          \
  "max_batch_size: 1, max_concurrency: 1,\n"                                   \
  "            max_retries: 2, dead_letter_queue: in-dead,\n"                  \
  "            visibility_timeout: 1s"

/* The hung message, then 50 behind it: the hung one is in the dead-letter
 * queue after max_retries (2) + 1 deliveries, abandoned at its
 * visibility_timeout each time, and the 50 are handled. */
static void hang_then_fifty(host_run *h) {
  http_resp r;
  host_request(h, &r, "POST", "/queues/in/messages",
               "{\"body\":{\"hang\":true}}");
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);
  char body[4096] = "{\"messages\":[";
  for (int i = 0; i < 50; i++)
    snprintf(body + strlen(body), sizeof body - strlen(body),
             "%s{\"body\":{\"n\":%d}}", i ? "," : "", i);
  strcat(body, "]}");
  host_request(h, &r, "POST", "/queues/in/messages/batch", body);
  ck_assert_int_eq(r.status, 201);
  http_resp_free(&r);

  json_t *dead = pull_when_ready(h, "in-dead", 1, 30000);
  json_t *m = json_array_get(dead, 0);
  ck_assert(json_is_true(jget(m, "body.hang")));
  ck_assert_int_eq(json_integer_value(jget(m, "attempts")), 4);
  const char *last = json_string_value(jget(m, "last_error"));
  ck_assert_msg(last && strstr(last, "TimeoutError") &&
                    strstr(last, "visibility_timeout of 1000 ms"),
                "last_error: %s", last ? last : "(none)");
  json_decref(dead);
  json_t *out = pull_when_ready(h, "out", 50, 30000);
  json_decref(out);
  ck_assert_int_eq(queue_count(h, "in", "ready") +
                       queue_count(h, "in", "in_flight") +
                       queue_count(h, "in", "delayed"),
                   0);
}

/* Lines saying a batch of queue "in" was abandoned at its deadline. */
static int abandoned_lines(const host_run *h) {
  return host_count_lines(h, "queue in: the queue handler of plugin \"qh\" "
                             "ran past the consumer's visibility_timeout of "
                             "1000 ms: abandoned after");
}

/* In a worker process, a hung handler's process is killed at its
 * batch's deadline and the handler returns then: no thread stays hung,
 * /healthz stays ok, and no delivery of the message behind it is begun in
 * the process being killed (the slot frees once it is dead), so each of
 * the three deliveries ends as a timeout, none cut short. */
START_TEST(push_hung_handler_in_worker_is_killed) {
  host_run H;
  start_push_consumer(&H, "{ workers: 2, shutdown_grace: 1s }", HUNG_CONSUMER);
  pid_t engine = host_last_engine(&H);
  hang_then_fifty(&H);
  const char *killed = "a queue handler ran past its consumer's "
                       "visibility_timeout";
  host_wait_lines(&H, killed, 3, proc_now_ms() + 5000);
  ck_assert_int_eq(host_count_lines(&H, killed), 3);
  ck_assert_int_eq(abandoned_lines(&H), 0);
  ck_assert_int_eq(host_count_lines(&H, "crashed its worker process"), 0);
  ck_assert_int_eq(host_count_lines(&H, "was cut short"), 0);
  /* the last killed handler's thread returns a moment after its kill */
  http_resp r;
  for (int64_t until = proc_now_ms() + 5000;; proc_sleep_ms(50)) {
    host_request(&H, &r, "GET", "/healthz", NULL);
    if (proc_now_ms() > until || !strcmp(jstr(r.json, "status"), "ok"))
      break;
    http_resp_free(&r);
  }
  ck_assert_int_eq(r.status, 200);
  char *health = jdump(r.json);
  ck_assert_msg(!strcmp(jstr(r.json, "status"), "ok") &&
                    json_array_size(jget(r.json, "hung_queue_handlers")) == 0,
                "%s", health);
  free(health);
  http_resp_free(&r);
  ck_assert_int_eq(host_last_engine(&H), engine);
  host_stop(&H, proc_now_ms() + 8000, 0);
}
END_TEST

/* In the engine (workers: 0) a hung handler's thread cannot be stopped:
 * abandoned, it is listed by /healthz as hung. */
START_TEST(push_hung_handler_is_abandoned) {
  host_run H;
  start_push_keys(&H, "{ workers: 2, shutdown_grace: 1s }", HUNG_CONSUMER,
                  "workers: 0");
  hang_then_fifty(&H);
  ck_assert_int_eq(abandoned_lines(&H), 3);
  http_resp r;
  host_request(&H, &r, "GET", "/healthz", NULL);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(json_string_value(jget(r.json, "status")), "degraded");
  json_t *hung = jget(r.json, "hung_queue_handlers");
  ck_assert_uint_eq(json_array_size(hung), 3);
  json_t *one = json_array_get(hung, 0);
  ck_assert_str_eq(json_string_value(json_object_get(one, "queue")), "in");
  ck_assert_str_eq(json_string_value(json_object_get(one, "plugin")), "qh");
  ck_assert_int_ge(json_integer_value(json_object_get(one, "running_ms")),
                   1000);
  http_resp_free(&r);
  host_stop(&H, proc_now_ms() + 8000, 0);
}
END_TEST

/* ---- the no-code consumer under kill -9 -----------------------------------
 */

static const char *faults_log(void) {
  static char path[400];
  snprintf(path, sizeof path, "%s/faults.log", proc_tmp_dir);
  return path;
}

/* A host of the faults plugin (its side log in faults_log()) whose
 * config goes on with `rest` after the plugin's first workflow line, and
 * which the supervisor restarts when its engine is killed. */
static void start_faults(host_run *h, const char *name, const char *engine,
                         const char *rest) {
  char db[400];
  snprintf(db, sizeof db, "%s/var/duro.db", proc_tmp_dir);
  host_init(h, name);
  host_setenv(h, "DURO_FAULTS_LOG", faults_log());
  h->request_ms = 3000;
  h->restarts = 1;
  host_write_config(h, db, engine, "faults", FAULTS_PLUGIN, rest);
  host_start(h);
}

static void start(host_run *h) {
  start_faults(h, "host", "{ workers: 2 }",
               "      - name: " FLOW "\n"
               "        binding: FAULT_FLOW\n"
               "        class_name: Fault\n"
               "    queues:\n"
               "      consumers:\n"
               "        - { queue: jobs, workflow: " FLOW ",\n"
               "            id_from: /jobId, max_batch_size: 20 }\n");
}

/* Sends job i until a 201 answers (a send without an answer may have been
 * stored: sending it again is the duplicate the consumer must absorb). */
static void send_job(host_run *h, int i) {
  char body[160];
  snprintf(body, sizeof body,
           "{\"body\":{\"jobId\":\"j-%d\",\"fault\":\"none\",\"steps\":1}}", i);
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    http_resp r;
    if (host_request_try(h, &r, "POST", "/queues/jobs/messages", body) == 0) {
      int status = (int)r.status;
      http_resp_free(&r);
      if (status == 201)
        return;
      ck_assert_msg(status >= 500, "send j-%d: %d", i, status);
    }
    ck_assert_msg(proc_now_ms() < deadline, "send j-%d: no 201", i);
    proc_sleep_ms(50);
  }
}

/* The instance of job i comes to exist (the consumer creates it on its
 * next pass, about a second after the send) and completes. */
static void assert_job_done(host_run *h, int i) {
  char id[32], path[128];
  snprintf(id, sizeof id, "j-%d", i);
  snprintf(path, sizeof path, "/workflows/%s/instances/%s", FLOW, id);
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    http_resp r = {0};
    int found =
        host_request_try(h, &r, "GET", path, NULL) == 0 && r.status == 200;
    http_resp_free(&r);
    if (found)
      break;
    ck_assert_msg(proc_now_ms() < deadline, "%s was never created", id);
    proc_sleep_ms(50);
  }
  json_t *d = host_wait_status(h, FLOW, id, "complete", deadline);
  json_decref(d);
}

/* The messages queue q still holds (ready, delayed or in flight), -1
 * while the host does not answer; *dropped (may be NULL) how many it
 * dropped. */
static int64_t queue_left(host_run *h, const char *q, int64_t *dropped) {
  char path[64];
  snprintf(path, sizeof path, "/queues/%s", q);
  http_resp r;
  if (host_request_try(h, &r, "GET", path, NULL) != 0)
    return -1;
  int64_t n = r.status != 200
                  ? -1
                  : json_integer_value(jget(r.json, "ready")) +
                        json_integer_value(jget(r.json, "delayed")) +
                        json_integer_value(jget(r.json, "in_flight"));
  if (dropped)
    *dropped = json_integer_value(jget(r.json, "dropped"));
  http_resp_free(&r);
  return n;
}

/* No step ran again after run() had seen its result: a job created a
 * second time would. */
static void assert_no_step_after_seen(void) {
  char *text = proc_slurp(faults_log());
  size_t n = strlen(text) / LINE_SIZE;
  char *seen = calloc(JOBS, 1);
  ck_assert(seen != NULL);
  for (size_t i = 0; i < n; i++) {
    char kind[8], inst[32], token[40];
    int index, job;
    ck_assert(sscanf(text + i * LINE_SIZE, "%7s %31s %d %39s", kind, inst,
                     &index, token) == 4);
    ck_assert(sscanf(inst, "j-%d", &job) == 1 && job >= 0 && job < JOBS);
    if (!strcmp(kind, "seen"))
      seen[job] = 1;
    else
      ck_assert_msg(!seen[job], "j-%d ran its step after its result was seen",
                    job);
  }
  for (int i = 0; i < JOBS; i++)
    ck_assert_msg(seen[i], "j-%d never completed its step", i);
  free(seen);
  free(text);
}

START_TEST(acked_sends_survive_kill9) {
  host_run H;
  start(&H);
  int kills = 0;
  for (int i = 0; i < JOBS; i++) {
    send_job(&H, i);
    if (i % KILL_EVERY == KILL_EVERY - 1 && i + 1 < JOBS) {
      pid_t engine = host_last_engine(&H);
      ck_assert_int_eq(kill(engine, SIGKILL), 0);
      ck_assert_msg(host_wait_gone(engine, 5000), "engine %d survived",
                    (int)engine);
      kills++;
    }
  }
  ck_assert_int_eq(kills, JOBS / KILL_EVERY - 1);
  pid_t pids[16];
  char *log = proc_slurp(H.log);
  ck_assert_uint_ge(host_engine_pids(log, pids, 16), (size_t)kills + 1);
  free(log);
  for (int i = 0; i < JOBS; i++)
    assert_job_done(&H, i);
  http_resp r;
  host_request(&H, &r, "GET", "/workflows/" FLOW "/instances?limit=1000", NULL);
  ck_assert_int_eq(r.status, 200);
  ck_assert_uint_eq(json_array_size(jget(r.json, "instances")), JOBS);
  http_resp_free(&r);
  int64_t deadline = proc_now_ms() + 10000;
  while (queue_left(&H, "jobs", NULL) != 0) {
    ck_assert_msg(proc_now_ms() < deadline, "the queue is not empty");
    proc_sleep_ms(50);
  }
  assert_no_step_after_seen();
  /* the faults plugin has a queue handler this config never feeds */
  ck_assert_int_ge(host_count_lines(&H, "has a queue handler but its config"),
                   1);
  host_stop(&H, proc_now_ms() + 10000, 1);
}
END_TEST

/* ---- a push consumer's stream under kill -9 ------------------------------
 */

#define STREAM 10000
#define STREAM_BATCH 50
#define STREAM_KILLS 8
#define MAX_SEQ 40000 /* message ids: the stream, and sends repeated */

static void start_stream(host_run *h) {
  start_faults(h, "stream", "{ workers: 2 }",
               "      - name: " FLOW "\n"
               "        binding: FAULT_FLOW\n"
               "        class_name: Fault\n"
               "    queues:\n"
               "      consumers:\n"
               "        - { queue: stream, max_batch_size: 100,\n"
               "            max_batch_timeout: 0, max_retries: 100,\n"
               "            max_concurrency: 16 }\n");
}

typedef struct killer {
  host_run *h;
  int stop; /* atomic */
  int kills;
  unsigned seed;
} killer;

/* SIGKILLs the engine at random moments (20-400 ms apart, once it is
 * up) while the stream is sent and consumed. */
static void *kill_loop(void *arg) {
  killer *k = arg;
  while (!__atomic_load_n(&k->stop, __ATOMIC_ACQUIRE) &&
         k->kills < STREAM_KILLS) {
    proc_sleep_ms(20 + (int)(rand_r(&k->seed) % 380));
    pid_t engine = host_last_engine(k->h);
    if (engine > 0 && !__atomic_load_n(&k->stop, __ATOMIC_ACQUIRE) &&
        kill(engine, SIGKILL) == 0) {
      host_wait_gone(engine, 5000);
      k->kills++;
    }
  }
  return NULL;
}

/* Sends messages n0 .. n0+49 as one batch until a 201 answers (a send
 * without an answer may have been stored: the copies are delivered too,
 * under other ids). */
static void send_stream_batch(host_run *h, int n0) {
  char body[STREAM_BATCH * 24 + 32] = "{\"messages\":[";
  for (int i = 0; i < STREAM_BATCH; i++)
    snprintf(body + strlen(body), sizeof body - strlen(body),
             "%s{\"body\":{\"n\":%d}}", i ? "," : "", n0 + i);
  strcat(body, "]}");
  int64_t deadline = proc_now_ms() + SETTLE_MS;
  for (;;) {
    http_resp r;
    if (host_request_try(h, &r, "POST", "/queues/stream/messages/batch",
                         body) == 0) {
      int status = (int)r.status;
      http_resp_free(&r);
      if (status == 201)
        return;
      ck_assert_msg(status >= 500, "send %d: %d", n0, status);
    }
    ck_assert_msg(proc_now_ms() < deadline, "send %d: no 201", n0);
    proc_sleep_ms(50);
  }
}

/* From the handler's records: every message of the stream reached the
 * handler, and a message ran again only in a later engine process — in
 * the one that ran it, its ack (one commit after the handler returned)
 * was journaled, after which nothing delivers it again. */
static void assert_stream_handled(int kills) {
  char *text = proc_slurp(faults_log());
  size_t n = strlen(text) / LINE_SIZE, runs = 0, again = 0;
  int *seen = calloc(STREAM, sizeof *seen);
  int *last_pid = calloc(MAX_SEQ, sizeof *last_pid);
  unsigned *last_attempt = calloc(MAX_SEQ, sizeof *last_attempt);
  ck_assert(seen && last_pid && last_attempt);
  for (size_t i = 0; i < n; i++) {
    char kind[8], what[40], token[48];
    int body_n, pid;
    long long id;
    unsigned attempt;
    ck_assert(sscanf(text + i * LINE_SIZE, "%7s %39s %d %47s", kind, what,
                     &body_n, token) == 4);
    ck_assert_str_eq(kind, "msg");

    ck_assert(sscanf(what, "%lld/%u", &id, &attempt) == 2);
    ck_assert(sscanf(token, "%d-", &pid) == 1);
    ck_assert_msg(id > 0 && id < MAX_SEQ, "message id %lld", id);
    ck_assert_msg(body_n >= 0 && body_n < STREAM, "n %d", body_n);
    seen[body_n]++;
    runs++;
    if (last_pid[id]) {
      again++;
      ck_assert_msg(last_pid[id] != pid,
                    "message %lld ran twice in engine %d (attempts %u, %u): "
                    "after its ack",
                    id, pid, last_attempt[id], attempt);
      ck_assert_uint_gt(attempt, last_attempt[id]);
    }
    last_pid[id] = pid;
    last_attempt[id] = attempt;
  }
  for (int i = 0; i < STREAM; i++)
    ck_assert_msg(seen[i] > 0, "message n=%d never reached the handler", i);
  fprintf(stderr,
          "stream: %d messages, %zu handler runs, %zu again after one of "
          "%d kills\n",
          STREAM, runs, again, kills);
  free(seen);
  free(last_pid);
  free(last_attempt);
  free(text);
}

/* 10,000 messages sent in batches of 50 to a push consumer while its
 * engine is SIGKILLed at random moments: no acknowledged send lost, each
 * message handled at least once, none after its ack was journaled. */
START_TEST(push_stream_survives_kill9) {
  host_run H;
  start_stream(&H);
  killer k = {.h = &H, .seed = (unsigned)proc_now_ms()};
  fprintf(stderr, "stream: kill seed %u\n", k.seed);
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, kill_loop, &k), 0);
  /* Paced (a batch, then 10 ms), so the kills fall across the stream. */
  for (int n0 = 0; n0 < STREAM; n0 += STREAM_BATCH) {
    send_stream_batch(&H, n0);
    proc_sleep_ms(10);
  }
  __atomic_store_n(&k.stop, 1, __ATOMIC_RELEASE);
  pthread_join(t, NULL);
  ck_assert_int_ge(k.kills, STREAM_KILLS / 2);
  int64_t deadline = proc_now_ms() + SETTLE_MS, dropped = 0;
  while (queue_left(&H, "stream", &dropped) != 0) {
    ck_assert_msg(proc_now_ms() < deadline, "the stream is not consumed");
    proc_sleep_ms(100);
  }
  ck_assert_int_eq(dropped, 0);
  assert_stream_handled(k.kills);
  host_stop(&H, proc_now_ms() + 10000, 1);
}
END_TEST

/* ---- a transactional send under kill -9 ---------------------------------
 */

#define SENDERS 60

/* SENDERS instances each send one message from inside their one step's
 * callback, holding 40 ms on each side of the send, while the engine is
 * SIGKILLed at random moments: attempts cut short run again (the faults
 * log shows them), yet each instance's message is in the queue exactly
 * once — committed with the step's result, never by an attempt that did
 * not complete. */
START_TEST(transactional_send_survives_kill9) {
  host_run H;
  start_faults(&H, "send", "{ workers: 4 }",
               "      - { name: send-flow, binding: SEND_FLOW,\n"
               "          class_name: Sender }\n"
               "    queues:\n"
               "      producers: [{ binding: SENT, queue: sent }]\n"
               "  - name: sink\n"
               "    path: " FIXTURES_DIR "/libfixture_good_v1.so\n"
               "    queues:\n"
               "      consumers: [{ queue: sent }]\n");
  killer k = {.h = &H, .seed = (unsigned)proc_now_ms()};
  fprintf(stderr, "send: kill seed %u\n", k.seed);
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, kill_loop, &k), 0);
  for (int i = 0; i < SENDERS; i++) {
    char path[96], body[64];
    snprintf(path, sizeof path, "/workflows/send-flow/instances");
    /* 2 x 300 ms an attempt: their callbacks run side by side in the
     * worker, so each must last past the first kill (at most 400 ms in) */
    snprintf(body, sizeof body,
             "{\"id\":\"s-%d\",\"params\":{\"hold_ms\":300}}", i);
    int64_t deadline = proc_now_ms() + SETTLE_MS;
    for (;;) {
      http_resp r;
      int status = 0;
      if (host_request_try(&H, &r, "POST", path, body) == 0) {
        status = (int)r.status;
        http_resp_free(&r);
      }
      if (status == 201 || status == 409) /* 409: created, answer lost */
        break;
      ck_assert_msg(proc_now_ms() < deadline, "create s-%d: no 201", i);
      proc_sleep_ms(50);
    }
  }
  /* the kills go on while the instances run */
  for (int i = 0; i < SENDERS; i++) {
    char id[32];
    snprintf(id, sizeof id, "s-%d", i);
    json_decref(host_wait_status(&H, "send-flow", id, "complete",
                                 proc_now_ms() + SETTLE_MS));
  }
  __atomic_store_n(&k.stop, 1, __ATOMIC_RELEASE);
  pthread_join(t, NULL);
  json_t *msgs = pull_when_ready(&H, "sent", SENDERS, SETTLE_MS);
  int seen[SENDERS] = {0};
  size_t i;
  json_t *m;
  json_array_foreach(msgs, i, m) {
    int n = -1;
    ck_assert(sscanf(json_string_value(jget(m, "body.instance")), "s-%d", &n) ==
                  1 &&
              n >= 0 && n < SENDERS);
    seen[n]++;
  }
  json_decref(msgs);
  for (int n = 0; n < SENDERS; n++)
    ck_assert_msg(seen[n] == 1, "s-%d sent %d message(s)", n, seen[n]);
  /* how many attempts the kills cut short (they sent nothing) */
  char *text = proc_slurp(faults_log());
  size_t execs = strlen(text) / LINE_SIZE;
  free(text);
  fprintf(stderr, "send: %d instances, %zu attempts, %d kills\n", SENDERS,
          execs, k.kills);
  ck_assert_uint_ge(execs, SENDERS);
  ck_assert_int_ge(k.kills, 1);
  host_stop(&H, proc_now_ms() + 10000, 1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("queue_host");
  TCase *tc = tcase_create("queue_host");
  proc_fixtures(tc, "duro-queue-host");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, push_handler_gets_batches);
  tcase_add_test(tc, push_batch_size_changes_at_reload);
  tcase_add_test(tc, push_concurrency_by_key);
  tcase_add_test(tc, push_handler_crash_redelivers);
  tcase_add_test(tc, push_handler_crash_in_worker);
  tcase_add_test(tc, push_handler_always_crashing_dead_letters);
  tcase_add_test(tc, push_hung_handler_does_not_hold_shutdown);
  tcase_add_test(tc, push_hung_handler_is_abandoned);
  tcase_add_test(tc, push_hung_handler_in_worker_is_killed);
  tcase_add_test(tc, acked_sends_survive_kill9);
  tcase_add_test(tc, push_stream_survives_kill9);
  tcase_add_test(tc, transactional_send_survives_kill9);
  suite_add_tcase(s, tc);
  return http_suite_run(s);
}
