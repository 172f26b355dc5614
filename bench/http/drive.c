/* drive.c — the client of H3-H6 (bench/http/run.sh): creates N
 * instances of a workflow through POST /workflows/{wf}/instances, each with
 * an id of its own, on C keep-alive connections at once (libcurl multi, one
 * thread, so the client takes little of the CPU the host needs), and with
 * --await then learns each one's result: GET /workflows/{wf}/instances/{id}
 * (with ?wait=30s when the host supports it, else polled) until it is
 * complete.  Prints, as the other benches do, one line per figure:
 *
 *   NAME creates/s         N / the time to the last 201
 *   NAME steps/s           (--await) N * --steps / the time from the first
 *                          create to the last result learned
 *   NAME GETs per instance (--await) how many GETs learning took
 *
 * --create-wait (H5): on one connection, N times in sequence, a create
 * that waits for the result (POST .../instances?wait=10s), and GET
 * .../instances/{id}?wait=10s only until it answers complete; with
 * --then-get the create does not wait and the GET learns the result (two
 * round trips, as clients did before the create could wait); prints the
 * create-to-result latency's p50, p99 and max in ms.
 *
 * --overload SECS (H6): creates at the maximum rate on C connections for
 * SECS seconds (a 503 counts as refused, not as an error); every --every
 * seconds (5) a sample line of the engine's VmRSS (--engine-pid, from
 * /proc/PID/status) and of GET /metrics's duro_backlog,
 * duro_backlog_in_journal and the complete instances, then summary lines:
 * creates/s accepted, completions/s, RSS start/peak/end, the backlog at the
 * end.
 *
 * Figures, never assertions; but any reply other than the expected one, or
 * an instance that ends otherwise than complete, exits 1. */
#include <curl/curl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *name = "H?", *setting = "", *wf = "One", *prefix = "i";
static int port, conns = 64, await_results, steps = 1, use_wait;
static int create_wait, then_get, engine_pid;
static long n = 1000;
static double overload_secs, every_secs = 5;
static const char *wait_q = "?wait=30s";

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void report(const char *figure, double value, const char *unit) {
  char full[64];
  snprintf(full, sizeof full, "%s %s", name, figure);
  printf("%-28s %12.3f %-10s [%s]\n", full, value, unit, setting);
  fflush(stdout);
}

typedef struct slot {
  CURL *c;
  long id; /* the instance this request is about */
  char body[128], url[256];
  char *buf;
  size_t len, cap;
} slot;

static size_t on_body(char *p, size_t size, size_t nm, void *ud) {
  slot *s = ud;
  size_t len = size * nm;
  if (s->len + len + 1 > s->cap) {
    s->cap = (s->len + len + 1) * 2;
    s->buf = realloc(s->buf, s->cap);
    if (!s->buf)
      exit(1);
  }
  memcpy(s->buf + s->len, p, len);
  s->len += len;
  s->buf[s->len] = '\0';
  return len;
}

static struct curl_slist *hdrs;

static void slot_init(slot *s) {
  memset(s, 0, sizeof *s);
  s->c = curl_easy_init();
  curl_easy_setopt(s->c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(s->c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(s->c, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(s->c, CURLOPT_TIMEOUT_MS, 120000L);
  curl_easy_setopt(s->c, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(s->c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(s->c, CURLOPT_WRITEDATA, s);
  curl_easy_setopt(s->c, CURLOPT_PRIVATE, s);
}

/* A create; with `wait` ("?wait=10s", or "") it answers once it ends. */
static void start_create_q(CURLM *m, slot *s, long id, const char *wait) {
  s->id = id;
  s->len = 0;
  snprintf(s->url, sizeof s->url,
           "http://127.0.0.1:%d/workflows/%s/instances%s", port, wf, wait);
  snprintf(s->body, sizeof s->body,
           "{\"id\":\"%s-%ld\",\"params\":{\"i\":%ld}}", prefix, id, id);
  curl_easy_setopt(s->c, CURLOPT_HTTPGET, 0L);
  curl_easy_setopt(s->c, CURLOPT_URL, s->url);
  curl_easy_setopt(s->c, CURLOPT_POSTFIELDSIZE, (long)strlen(s->body));
  curl_easy_setopt(s->c, CURLOPT_POSTFIELDS, s->body);
  curl_multi_add_handle(m, s->c);
}

static void start_create(CURLM *m, slot *s, long id) {
  start_create_q(m, s, id, "");
}

static void start_get(CURLM *m, slot *s, long id) {
  s->id = id;
  s->len = 0;
  snprintf(s->url, sizeof s->url,
           "http://127.0.0.1:%d/workflows/%s/instances/%s-%ld%s", port, wf,
           prefix, id, use_wait ? wait_q : "");
  curl_easy_setopt(s->c, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(s->c, CURLOPT_URL, s->url);
  curl_multi_add_handle(m, s->c);
}

/* Runs the multi handle until a transfer ends; returns its slot. */
static slot *next_done(CURLM *m, long *status) {
  for (;;) {
    int running, left;
    curl_multi_perform(m, &running);
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(m, &left))) {
      if (msg->msg != CURLMSG_DONE)
        continue;
      slot *s;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
      CURLcode rc = msg->data.result;
      curl_multi_remove_handle(m, msg->easy_handle);
      if (rc != CURLE_OK) {
        fprintf(stderr, "drive: %s: %s\n", s->url, curl_easy_strerror(rc));
        exit(1);
      }
      curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, status);
      return s;
    }
    curl_multi_poll(m, NULL, 0, 100, NULL);
  }
}

/* A separate probe: does GET ...?wait= hold the request until the instance
 * ends?  An instance that sleeps an hour must keep it ~300 ms. */
static int probe_wait(CURLM *m, slot *s) {
  const char *saved_wf = wf, *saved_prefix = prefix;
  long status;
  wf = "Nap";
  prefix = "probe";
  start_create(m, s, 0);
  next_done(m, &status);
  if (status != 201) {
    fprintf(stderr, "drive: probe create: %ld %s\n", status, s->buf);
    exit(1);
  }
  snprintf(s->url, sizeof s->url,
           "http://127.0.0.1:%d/workflows/Nap/instances/probe-0?wait=300ms",
           port);
  s->len = 0;
  curl_easy_setopt(s->c, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(s->c, CURLOPT_URL, s->url);
  int64_t t0 = now_us();
  curl_multi_add_handle(m, s->c);
  next_done(m, &status);
  int64_t took = now_us() - t0;
  wf = saved_wf;
  prefix = saved_prefix;
  return status == 200 && took >= 250000;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static double pct_ms(const int64_t *sorted, long len, double p) {
  long i = (long)(p * (double)len);
  if (i >= len)
    i = len - 1;
  return (double)sorted[i] / 1000.0;
}

/* The status of an instance's GET answer, or NULL (then the answer is
 * printed and the drive exits 1). */
static const char *answer_status(slot *s, long status, json_t **j) {
  *j = status == 200 || status == 201 ? json_loadb(s->buf, s->len, 0, NULL)
                                      : NULL;
  const char *st = json_string_value(json_object_get(*j, "status"));
  if (!st) {
    fprintf(stderr, "drive: GET %s: %ld %s\n", s->url, status,
            s->buf ? s->buf : "");
    exit(1);
  }
  if (!strcmp(st, "errored") || !strcmp(st, "terminated")) {
    fprintf(stderr, "drive: %s ended %s: %s\n", s->url, st, s->buf);
    exit(1);
  }
  return st;
}

/* H5: create, then wait for the result, N times on one connection. */
static int run_create_wait(CURLM *m, slot *s) {
  int64_t *lat = malloc((size_t)n * sizeof *lat);
  long gets = 0, status;
  use_wait = 1;
  wait_q = "?wait=10s";
  int64_t all0 = now_us();
  for (long i = 0; i < n; i++) {
    int64_t t0 = now_us();
    start_create_q(m, s, i, then_get ? "" : wait_q);
    next_done(m, &status);
    if (status != 201) {
      fprintf(stderr, "drive: create %s-%ld: %ld %s\n", prefix, i, status,
              s->buf ? s->buf : "");
      return 1;
    }
    json_t *created;
    int done =
        !then_get && !strcmp(answer_status(s, status, &created), "complete");
    if (!then_get)
      json_decref(created);
    while (!done) {
      start_get(m, s, i);
      next_done(m, &status);
      gets++;
      json_t *j;
      done = !strcmp(answer_status(s, status, &j), "complete");
      json_decref(j);
    }
    lat[i] = now_us() - t0;
  }
  int64_t all = now_us() - all0;
  qsort(lat, (size_t)n, sizeof *lat, cmp_i64);
  report("create-to-result p50", pct_ms(lat, n, 0.50), "ms");
  report("create-to-result p99", pct_ms(lat, n, 0.99), "ms");
  report("create-to-result max", (double)lat[n - 1] / 1000.0, "ms");
  report("instances/s", (double)n / ((double)all / 1e6), "inst/s");
  report("GETs per instance", (double)gets / (double)n, "GETs");
  free(lat);
  return 0;
}

/* The engine's VmRSS in KiB, or -1. */
static long rss_kib(void) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", engine_pid);
  FILE *f = fopen(path, "r");
  long kib = -1;
  if (!f)
    return -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6))
      kib = atol(line + 6);
  fclose(f);
  return kib;
}

typedef struct sample {
  double t;
  long rss;                                /* KiB */
  long long backlog, in_journal, complete; /* -1: not in /metrics */
} sample;

/* Reads duro_backlog, duro_backlog_in_journal and the sum of
 * duro_instances{...,status="complete"} from a /metrics answer. */
static void parse_metrics(const char *text, sample *out) {
  out->backlog = out->in_journal = -1;
  out->complete = 0; /* no instances yet: no line */
  for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : l) {
    if (!strncmp(l, "duro_backlog ", 13))
      out->backlog = atoll(l + 13);
    else if (!strncmp(l, "duro_backlog_in_journal ", 24))
      out->in_journal = atoll(l + 24);
    else if (!strncmp(l, "duro_instances{", 15)) {
      const char *close = strchr(l, '}'), *nl = strchr(l, '\n');
      const char *st = strstr(l, "status=\"complete\"");
      if (close && st && st < close && (!nl || close < nl))
        out->complete += atoll(close + 1);
    }
  }
}

static void print_sample(const sample *x) {
  printf("%s t=%.0fs rss=%.1f MiB backlog=%lld in_journal=%lld "
         "completed=%lld\n",
         name, x->t, (double)x->rss / 1024.0, x->backlog, x->in_journal,
         x->complete);
  fflush(stdout);
}

/* H6: creates at the maximum rate for overload_secs, sampled. */
static int run_overload(CURLM *m, slot *slots) {
  slot *ms = &slots[conns]; /* the /metrics slot */
  char murl[96];
  snprintf(murl, sizeof murl, "http://127.0.0.1:%d/metrics", port);
  sample first, last;
  long status, peak = 0, accepted = 0, refused = 0;
  long long next_id = 0;

  /* The starting point: RSS, and the counts before any create. */
  ms->len = 0;
  snprintf(ms->url, sizeof ms->url, "%s", murl);
  curl_easy_setopt(ms->c, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(ms->c, CURLOPT_URL, ms->url);
  curl_multi_add_handle(m, ms->c);
  next_done(m, &status);
  if (status != 200) {
    fprintf(stderr, "drive: GET /metrics: %ld\n", status);
    return 1;
  }
  parse_metrics(ms->buf, &first);
  first.t = 0;
  first.rss = peak = rss_kib();
  print_sample(&first);
  last = first;

  int64_t t0 = now_us(), end = t0 + (int64_t)(overload_secs * 1e6);
  int64_t due = t0 + (int64_t)(every_secs * 1e6), t_sample = 0;
  int in_flight = 0, metrics_busy = 0;
  for (int i = 0; i < conns; i++, in_flight++)
    start_create(m, &slots[i], next_id++);
  while (in_flight > 0 || metrics_busy) {
    int64_t now = now_us();
    if (!metrics_busy && now >= due && now < end) {
      /* RSS now, the counts when /metrics answers. */
      t_sample = now;
      last.rss = rss_kib();
      if (last.rss > peak)
        peak = last.rss;
      ms->len = 0;
      curl_multi_add_handle(m, ms->c);
      metrics_busy = 1;
      due += (int64_t)(every_secs * 1e6);
    }
    slot *s = next_done(m, &status);
    if (s == ms) {
      metrics_busy = 0;
      if (status != 200) {
        fprintf(stderr, "drive: GET /metrics: %ld\n", status);
        return 1;
      }
      long rss = last.rss;
      parse_metrics(ms->buf, &last);
      last.rss = rss;
      last.t = (double)(t_sample - t0) / 1e6;
      print_sample(&last);
      continue;
    }
    in_flight--;
    if (status == 201)
      accepted++;
    else if (status == 503)
      refused++;
    else {
      fprintf(stderr, "drive: create %s-%ld: %ld %s\n", prefix, s->id, status,
              s->buf ? s->buf : "");
      return 1;
    }
    if (now_us() < end) {
      start_create(m, s, next_id++);
      in_flight++;
    }
  }
  int64_t t1 = now_us();
  double secs = (double)(t1 - t0) / 1e6;
  /* The end: one more sample once the last create is answered. */
  last.rss = rss_kib();
  if (last.rss > peak)
    peak = last.rss;
  ms->len = 0;
  curl_multi_add_handle(m, ms->c);
  next_done(m, &status);
  parse_metrics(ms->buf, &last);
  last.t = secs;
  print_sample(&last);
  report("creates/s accepted", (double)accepted / secs, "inst/s");
  if (refused)
    report("creates refused (503)", (double)refused, "creates");
  report("completions/s", (double)(last.complete - first.complete) / secs,
         "inst/s");
  report("RSS start", (double)first.rss / 1024.0, "MiB");
  report("RSS peak", (double)peak / 1024.0, "MiB");
  report("RSS end", (double)last.rss / 1024.0, "MiB");
  report("backlog at the end", (double)last.backlog, "instances");
  report("of which in journal", (double)last.in_journal, "instances");
  return 0;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--await"))
      await_results = 1;
    else if (!strcmp(a, "--create-wait"))
      create_wait = 1;
    else if (!strcmp(a, "--then-get"))
      then_get = 1;
    else if (!v)
      goto usage;
    else if (!strcmp(a, "--port"))
      port = atoi(argv[++i]);
    else if (!strcmp(a, "--wf"))
      wf = argv[++i];
    else if (!strcmp(a, "-n"))
      n = atol(argv[++i]);
    else if (!strcmp(a, "-c"))
      conns = atoi(argv[++i]);
    else if (!strcmp(a, "--steps"))
      steps = atoi(argv[++i]);
    else if (!strcmp(a, "--name"))
      name = argv[++i];
    else if (!strcmp(a, "--setting"))
      setting = argv[++i];
    else if (!strcmp(a, "--prefix"))
      prefix = argv[++i];
    else if (!strcmp(a, "--overload"))
      overload_secs = atof(argv[++i]);
    else if (!strcmp(a, "--every"))
      every_secs = atof(argv[++i]);
    else if (!strcmp(a, "--engine-pid"))
      engine_pid = atoi(argv[++i]);
    else
      goto usage;
  }
  if (port <= 0 || n <= 0 || conns <= 0 || every_secs <= 0 ||
      (overload_secs > 0 && engine_pid <= 0))
    goto usage;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  hdrs = curl_slist_append(NULL, "Content-Type: application/json");
  hdrs = curl_slist_append(hdrs, "Expect:");
  CURLM *m = curl_multi_init();
  curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)conns + 1);
  slot *slots = calloc((size_t)conns + 1, sizeof *slots);
  for (int i = 0; i <= conns; i++)
    slot_init(&slots[i]);
  if (create_wait)
    return run_create_wait(m, &slots[0]);
  if (overload_secs > 0)
    return run_overload(m, slots);
  if (await_results)
    use_wait = probe_wait(m, &slots[0]);

  /* Creations, C at a time. */
  long next = 0, done = 0, status;
  int64_t t0 = now_us();
  for (int i = 0; i < conns && next < n; i++)
    start_create(m, &slots[i], next++);
  while (done < n) {
    slot *s = next_done(m, &status);
    if (status != 201) {
      fprintf(stderr, "drive: create %s-%ld: %ld %s\n", prefix, s->id, status,
              s->buf ? s->buf : "");
      return 1;
    }
    done++;
    if (next < n)
      start_create(m, s, next++);
  }
  int64_t t1 = now_us();
  report("creates/s", (double)n / ((double)(t1 - t0) / 1e6), "inst/s");
  if (!await_results)
    return 0;

  /* Results: each id asked until it is complete; one not yet complete goes
   * to the back of the queue. */
  long *queue = malloc((size_t)n * sizeof *queue), head = 0, queued = n,
       gets = 0;
  for (long i = 0; i < n; i++)
    queue[i] = i;
  long learned = 0; /* the queue is a ring: head .. head + queued */
  for (int i = 0; i < conns && queued > 0; i++, queued--)
    start_get(m, &slots[i], queue[head++ % n]);
  while (learned < n) {
    slot *s = next_done(m, &status);
    gets++;
    json_t *j = status == 200 ? json_loadb(s->buf, s->len, 0, NULL) : NULL;
    const char *st = json_string_value(json_object_get(j, "status"));
    if (!st) {
      fprintf(stderr, "drive: GET %s: %ld %s\n", s->url, status,
              s->buf ? s->buf : "");
      return 1;
    }
    if (!strcmp(st, "complete")) {
      learned++;
    } else if (!strcmp(st, "errored") || !strcmp(st, "terminated")) {
      fprintf(stderr, "drive: %s ended %s: %s\n", s->url, st, s->buf);
      return 1;
    } else {
      queue[(head + queued) % n] = s->id;
      queued++;
    }
    json_decref(j);
    if (queued > 0) {
      start_get(m, s, queue[head++ % n]);
      queued--;
    }
  }
  int64_t t2 = now_us();
  report("steps/s", (double)(n * steps) / ((double)(t2 - t0) / 1e6), "steps/s");
  report("to all results", (double)(t2 - t0) / 1e6, "s");
  report(use_wait ? "GETs per instance (wait)" : "GETs per instance (poll)",
         (double)gets / (double)n, "GETs");
  return 0;
usage:
  fprintf(stderr, "usage: drive --port P [--wf WF] [-n N] [-c CONNS] "
                  "[--await [--steps S] | --create-wait [--then-get] | "
                  "--overload SECS "
                  "--engine-pid PID [--every SECS]] [--name H3] "
                  "[--setting TEXT]\n");
  return 2;
}
