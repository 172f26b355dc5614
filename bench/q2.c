/* q2.c — Q2, the queue benchmark through the front door: Q1 of bench.c
 * (200,000 messages sent in batches of 100 while a consumer takes batches
 * of 100), but against a real `duro run` host process over HTTP.
 *
 * The bench writes a config into a directory of its own (under --dir,
 * default bench-data/: on the disk the figures are about, not a tmpfs),
 * starts DURO_BIN on it (storage `synchronous: full` unless --synchronous
 * normal, HTTP on a port the kernel picks, read back from the host's
 * "ready" line) with the orders example plugin (ORDERS_PLUGIN) declaring
 * `queues: consumers: [{queue: bench}]`; that plugin has no queue handler,
 * so the consumer is a pull consumer.  Then, over loopback HTTP/1.1, each
 * thread on one keep-alive libcurl connection of its own:
 *
 *   end to end   a producer thread sends POST /queues/bench/messages/batch
 *                with 100 messages a request while a consumer thread pulls
 *                (batch_size 100, visibility_timeout_ms 60000) and acks
 *                each batch it got; the clock stops when all are acked.
 *                Each body carries the wall time at which its request
 *                went out: send-to-pull latency p50/p99 is measured when
 *                the pull's reply has been read;
 *   sends alone  the same number sent with nobody pulling;
 *   pull+ack     then all of those pulled and acked, nobody sending;
 *   CPU          the host's (supervisor and engine, from getrusage of
 *                the waited-for children) and this process's, per
 *                message sent, pulled and acked.
 *
 * libcurl, not a socket of our own: the test suites already use it, it
 * keeps a connection alive across requests on the same easy handle, and
 * this process's CPU (about 4 µs a message, JSON included) is small
 * beside the host's (about 19).  Figures, never assertions: an HTTP error,
 * an ack that acks fewer than it names or a host that does not exit 0 on
 * SIGTERM ends the run with exit 1 and keeps its files.  --quick sends
 * 2,000 messages (the smoke test). */
#include <curl/curl.h>
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef DURO_BIN
#error "build with -DDURO_BIN=\"<path of the built duro binary>\""
#endif
#ifndef ORDERS_PLUGIN
#error "build with -DORDERS_PLUGIN=\"<path of liborders.so>\""
#endif

#define BATCH 100
#define READY_MS 20000

static struct {
  int csv, quick, sync_full, keep;
  size_t n;
  char parent[256];
} opts = {.sync_full = 1};

static char dir[512];
static pid_t host_pid = -1;
static int port;

/* ---- time and reporting ------------------------------------------------- */

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void report(const char *figure, double value, const char *unit,
                   const char *peer) {
  const char *sync = opts.sync_full ? "full" : "normal";
  if (opts.csv)
    printf("%s,%.3f,%s,\"synchronous=%s http\"\n", figure, value, unit, sync);
  else
    printf("%-28s %12.3f %-10s [synchronous=%s http]%s%s\n", figure, value,
           unit, sync, peer ? "  peer: " : "", peer ? peer : "");
  fflush(stdout);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "duro-bench-q2: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (host files kept in %s)\n", dir);
  va_end(ap);
  if (host_pid > 0)
    kill(host_pid, SIGKILL);
  exit(1);
}

/* ---- the host ------------------------------------------------------------ */

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f)
    return strdup("");
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)(len > 0 ? len : 0) + 1);
  size_t got = fread(text, 1, (size_t)(len > 0 ? len : 0), f);
  text[got] = '\0';
  fclose(f);
  return text;
}

static void write_config(const char *config) {
  FILE *f = fopen(config, "w");
  if (!f)
    die("%s: %s", config, strerror(errno));
  fprintf(f,
          "storage: { path: %s/duro.db, synchronous: %s }\n"
          "http: { listen: \"127.0.0.1:0\" }\n"
          "engine: { workers: 4 }\n"
          "plugins:\n"
          "  - name: orders\n"
          "    path: %s\n"
          "    workflows:\n"
          "      - { name: order-flow, binding: ORDER_FLOW,"
          " class_name: OrderFlow }\n"
          "    queues:\n"
          "      consumers: [{ queue: bench }]\n",
          dir, opts.sync_full ? "full" : "normal", ORDERS_PLUGIN);
  if (fclose(f) != 0)
    die("%s: %s", config, strerror(errno));
}

/* `duro run` on the config, its output in host.log, up to its "ready: ...
 * http on port N" line. */
static void start_host(void) {
  char config[600], log[600];
  snprintf(config, sizeof config, "%s/duro.yaml", dir);
  snprintf(log, sizeof log, "%s/host.log", dir);
  write_config(config);
  host_pid = fork();
  if (host_pid < 0)
    die("fork: %s", strerror(errno));
  if (host_pid == 0) {
    FILE *out = freopen(log, "w", stdout);
    if (!out || dup2(fileno(stdout), 2) < 0)
      _exit(127);
    execl(DURO_BIN, DURO_BIN, "run", config, (char *)NULL);
    _exit(127);
  }
  int64_t deadline = now_us() + READY_MS * 1000LL;
  for (;;) {
    char *text = slurp(log);
    const char *at = strstr(text, "http on port ");
    if (at)
      port = atoi(at + strlen("http on port "));
    int st;
    pid_t gone = waitpid(host_pid, &st, WNOHANG);
    if (port > 0 || gone == host_pid || now_us() > deadline) {
      if (port <= 0) {
        fprintf(stderr, "%s", text);
        host_pid = -1;
        die("%s did not get ready", DURO_BIN);
      }
      free(text);
      return;
    }
    free(text);
    usleep(10000);
  }
}

/* SIGTERM: the host must exit 0 within 30 s (else its files are kept). */
static void stop_host(void) {
  kill(host_pid, SIGTERM);
  int64_t deadline = now_us() + 30000000LL;
  int st = 0;
  while (waitpid(host_pid, &st, WNOHANG) == 0) {
    if (now_us() > deadline)
      die("the host did not stop within 30 s of SIGTERM");
    usleep(10000);
  }
  host_pid = -1;
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    die("the host ended with status 0x%x after SIGTERM", st);
}

/* CPU seconds (user + system) of this process or of its waited-for
 * children (the host: its supervisor waits for its engine). */
static double cpu_s(int who) {
  struct rusage ru;
  getrusage(who, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

/* ---- HTTP: one keep-alive connection per thread -------------------------- */

typedef struct conn {
  CURL *c;
  struct curl_slist *hdrs;
  char *buf;
  size_t len, cap;
} conn;

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  conn *k = ud;
  size_t len = size * n;
  if (k->len + len + 1 > k->cap) {
    k->cap = (k->len + len + 1) * 2;
    k->buf = realloc(k->buf, k->cap);
    if (!k->buf)
      die("out of memory");
  }
  memcpy(k->buf + k->len, p, len);
  k->len += len;
  k->buf[k->len] = '\0';
  return len;
}

static void conn_open(conn *k) {
  memset(k, 0, sizeof *k);
  k->c = curl_easy_init();
  if (!k->c)
    die("curl_easy_init failed");
  k->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
  k->hdrs = curl_slist_append(k->hdrs, "Expect:");
  curl_easy_setopt(k->c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(k->c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(k->c, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(k->c, CURLOPT_TIMEOUT_MS, 60000L);
  curl_easy_setopt(k->c, CURLOPT_HTTPHEADER, k->hdrs);
  curl_easy_setopt(k->c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(k->c, CURLOPT_WRITEDATA, k);
}

static void conn_close(conn *k) {
  curl_slist_free_all(k->hdrs);
  curl_easy_cleanup(k->c);
  free(k->buf);
}

/* POST `body` to `path`; the reply must be `want`.  Returns it parsed
 * (caller's). */
static json_t *post(conn *k, const char *path, const char *body, long want) {
  char url[256];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
  k->len = 0;
  curl_easy_setopt(k->c, CURLOPT_URL, url);
  curl_easy_setopt(k->c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
  curl_easy_setopt(k->c, CURLOPT_POSTFIELDS, body);
  CURLcode rc = curl_easy_perform(k->c);
  if (rc != CURLE_OK)
    die("POST %s: %s", path, curl_easy_strerror(rc));
  long status = 0;
  curl_easy_getinfo(k->c, CURLINFO_RESPONSE_CODE, &status);
  if (status != want)
    die("POST %s: %ld %s", path, status, k->buf ? k->buf : "");
  json_t *j = json_loadb(k->buf, k->len, 0, NULL);
  if (!j)
    die("POST %s: a reply that is not JSON: %s", path, k->buf);
  return j;
}

/* ---- producer and consumer ----------------------------------------------- */

/* Sends n messages in batches of BATCH, each body holding the wall time
 * its request went out. */
static void *producer(void *arg) {
  size_t n = *(size_t *)arg;
  conn k;
  conn_open(&k);
  char body[BATCH * 80 + 32];
  for (size_t sent = 0; sent < n; sent += BATCH) {
    int64_t t = wall_us();
    size_t len = (size_t)snprintf(body, sizeof body, "{\"messages\":[");
    for (size_t i = 0; i < BATCH; i++)
      len += (size_t)snprintf(
          body + len, sizeof body - len,
          "%s{\"body\":{\"order\":42,\"sku\":\"A-1\",\"t\":%lld}}",
          i ? "," : "", (long long)t);
    snprintf(body + len, sizeof body - len, "]}");
    json_decref(post(&k, "/queues/bench/messages/batch", body, 201));
  }
  conn_close(&k);
  return NULL;
}

typedef struct consumer {
  size_t n;
  int64_t *latency_us; /* send to pull of each message, or NULL */
  int64_t done_us;     /* when the last ack was answered */
} consumer;

/* Pulls and acks until n messages are acked. */
static void *consume(void *arg) {
  consumer *c = arg;
  conn k;
  conn_open(&k);
  size_t acked = 0, seen = 0;
  char acks[BATCH * 96 + 32];
  while (acked < c->n) {
    json_t *r =
        post(&k, "/queues/bench/messages/pull",
             "{\"batch_size\":100,\"visibility_timeout_ms\":60000}", 200);
    int64_t now = wall_us();
    json_t *msgs = json_object_get(r, "messages");
    size_t got = json_array_size(msgs);
    if (got == 0) { /* nothing yet: the producer is behind */
      json_decref(r);
      usleep(200);
      continue;
    }
    size_t len = (size_t)snprintf(acks, sizeof acks, "{\"acks\":[");
    for (size_t i = 0; i < got; i++) {
      json_t *m = json_array_get(msgs, i);
      if (c->latency_us && seen < c->n)
        c->latency_us[seen++] = now - json_integer_value(json_object_get(
                                          json_object_get(m, "body"), "t"));
      const char *lease = json_string_value(json_object_get(m, "lease_id"));
      if (!lease)
        die("a pulled message without a lease_id");
      len +=
          (size_t)snprintf(acks + len, sizeof acks - len,
                           "%s{\"lease_id\":\"%.60s\"}", i ? "," : "", lease);
    }
    snprintf(acks + len, sizeof acks - len, "]}");
    json_decref(r);
    r = post(&k, "/queues/bench/messages/ack", acks, 200);
    size_t ok = (size_t)json_integer_value(json_object_get(r, "acked"));
    if (ok != got)
      die("ack of %zu acked %zu", got, ok);
    json_decref(r);
    acked += ok;
  }
  c->done_us = now_us();
  conn_close(&k);
  return NULL;
}

/* ---- the workloads ------------------------------------------------------- */

static double rate(size_t n, int64_t us) {
  return (double)n / ((double)(us > 0 ? us : 1) / 1e6);
}

static void end_to_end(size_t n) {
  consumer c = {.n = n, .latency_us = calloc(n, sizeof(int64_t))};
  if (!c.latency_us)
    die("out of memory");
  pthread_t tp, tc;
  int64_t t0 = now_us();
  pthread_create(&tc, NULL, consume, &c);
  pthread_create(&tp, NULL, producer, &n);
  pthread_join(tp, NULL);
  pthread_join(tc, NULL);
  qsort(c.latency_us, n, sizeof *c.latency_us, cmp_i64);
  report("Q2 end to end (http)", rate(n, c.done_us - t0), "msg/s",
         "Q1 in process 101,000-109,000");
  report("Q2 send to pull p50", (double)c.latency_us[n / 2] / 1000.0, "ms",
         NULL);
  report("Q2 send to pull p99", (double)c.latency_us[n * 99 / 100] / 1000.0,
         "ms", NULL);
  free(c.latency_us);
}

static void one_after_other(size_t n) {
  int64_t t0 = now_us();
  producer(&n);
  int64_t t1 = now_us();
  consumer c = {.n = n};
  consume(&c);
  report("Q2 sends alone", rate(n, t1 - t0), "msg/s", NULL);
  report("Q2 pull+ack alone", rate(n, c.done_us - t1), "msg/s", NULL);
}

static int usage(void) {
  fprintf(stderr, "usage: duro-bench-q2 [--csv] [--quick] [--messages N]\n"
                  "                     [--synchronous full|normal] "
                  "[--dir DIR] [--keep]\n");
  return 2;
}

int main(int argc, char **argv) {
  snprintf(opts.parent, sizeof opts.parent, "bench-data");
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--csv"))
      opts.csv = 1;
    else if (!strcmp(a, "--quick"))
      opts.quick = 1;
    else if (!strcmp(a, "--keep"))
      opts.keep = 1;
    else if (!strcmp(a, "--messages") && v)
      opts.n = (size_t)atol(argv[++i]);
    else if (!strcmp(a, "--synchronous") && v)
      opts.sync_full = strcmp(argv[++i], "normal") != 0;
    else if (!strcmp(a, "--dir") && v)
      snprintf(opts.parent, sizeof opts.parent, "%s", argv[++i]);
    else
      return usage();
  }
  if (!opts.n)
    opts.n = opts.quick ? 2000 : 200000;
  opts.n = (opts.n + BATCH - 1) / BATCH * BATCH;
  mkdir(opts.parent, 0755);
  snprintf(dir, sizeof dir, "%s/q2.XXXXXX", opts.parent);
  if (!mkdtemp(dir)) {
    fprintf(stderr, "duro-bench-q2: mkdtemp %s: %s\n", dir, strerror(errno));
    return 1;
  }
  /* An absolute path: the config names the database inside it. */
  char *abs = realpath(dir, NULL);
  if (abs) {
    snprintf(dir, sizeof dir, "%s", abs);
    free(abs);
  }
  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  if (opts.csv)
    printf("figure,value,unit,setting\n");
  start_host();
  end_to_end(opts.n);
  one_after_other(opts.n);
  stop_host();
  /* Each message was sent, pulled and acked twice over (2n in all). */
  report("Q2 host CPU per message",
         cpu_s(RUSAGE_CHILDREN) * 1e6 / (2.0 * opts.n), "us", NULL);
  report("Q2 client CPU per message", cpu_s(RUSAGE_SELF) * 1e6 / (2.0 * opts.n),
         "us", NULL);
  curl_global_cleanup();
  if (!opts.keep) {
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    rmdir(opts.parent); /* when nothing else is in it */
  }
  return 0;
}
