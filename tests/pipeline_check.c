/* pipeline_check.c — what the pipeline suites on a real host share
 * (pipeline_check.h). */
#include "pipeline_check.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_client.h"
#include "proc.h"

/* ---- the host ------------------------------------------------------------ */

void pipeline_host_start(host_run *h, const char *name, const char *plugins,
                         const char *sink, const char *keys) {
  host_init(h, name);
  h->request_ms = 20000;
  FILE *f = fopen(h->config, "w");
  ck_assert_msg(f != NULL, "%s: %s", h->config, strerror(errno));
  fprintf(f,
          "storage: { path: duro.db, synchronous: normal }\n"
          "http: { listen: \"127.0.0.1:0\", max_body_bytes: 8000000 }\n"
          "plugins: %s\n"
          "pipelines:\n"
          "  - name: events\n"
          "    binding: EVENTS\n"
          "%s%s",
          plugins, sink, keys);
  ck_assert(fclose(f) == 0);
  host_start(h);
}

json_t *pipeline_stats(const host_run *h) {
  http_resp r;
  host_request(h, &r, "GET", "/pipelines/events", NULL);
  ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
  json_t *j = json_incref(r.json);
  http_resp_free(&r);
  return j;
}

int64_t pipeline_stat(json_t *stats, const char *path) {
  json_t *v = jget(stats, path);
  ck_assert_msg(json_is_integer(v), "%s missing", path);
  return json_integer_value(v);
}

void pipeline_wait_written(const host_run *h, int64_t written, int ms) {
  int64_t deadline = proc_now_ms() + ms;
  for (;;) {
    json_t *s = pipeline_stats(h);
    int done = (written < 0 || pipeline_stat(s, "written") == written) &&
               pipeline_stat(s, "backlog.records") == 0;
    json_decref(s);
    if (done)
      return;
    ck_assert_msg(proc_now_ms() < deadline,
                  "the backlog is not written (%lld records wanted)",
                  (long long)written);
    proc_sleep_ms(100);
  }
}

/* ---- sending ------------------------------------------------------------- */

long pipeline_send(const host_run *h, int s, int n0, int count, size_t pad,
                   pipeline_refusal *why) {
  size_t cap = (size_t)count * (pad + 48) + 4;
  char *body = malloc(cap);
  ck_assert_ptr_nonnull(body);
  size_t at = (size_t)sprintf(body, "[");
  for (int i = 0; i < count; i++) {
    at += (size_t)sprintf(body + at, "%s{\"s\":%d,\"i\":%d", i ? "," : "", s,
                          n0 + i);
    if (pad) {
      at += (size_t)sprintf(body + at, ",\"pad\":\"");
      memset(body + at, 'p', pad);
      at += pad;
      body[at++] = '"';
    }
    body[at++] = '}';
  }
  strcpy(body + at, "]");
  http_resp r;
  long status = 0;
  if (host_request_try(h, &r, "POST", "/pipelines/events", body) == 0) {
    status = r.status;
    if (status == 503 && why) {
      char retry[16];
      why->retry_after =
          http_resp_header(&r, "Retry-After", retry, sizeof retry) != NULL;
      const char *code = r.json ? jstr(r.json, "error.code") : NULL;
      snprintf(why->code, sizeof why->code, "%s", code ? code : "");
    }
    http_resp_free(&r);
  }
  free(body);
  return status;
}

void pipeline_send_batch(const host_run *h, pipeline_fates *f, int s,
                         size_t pad) {
  int n0 = f->sent[s];
  ck_assert_int_le(n0 + PIPELINE_BATCH, PIPELINE_MAX_RECORDS);
  long status = pipeline_send(h, s, n0, PIPELINE_BATCH, pad, NULL);
  ck_assert_msg(status == 0 || status == 202 || status == 503,
                "sender %d: answered %ld", s, status);
  for (int i = 0; i < PIPELINE_BATCH; i++)
    f->fate[s][n0 + i] = status == 202 ? 1 : 2;
  f->sent[s] += PIPELINE_BATCH;
}

int pipeline_fates_check(const pipeline_fates *f, const char *lines) {
  static unsigned char seen[PIPELINE_SENDERS][PIPELINE_MAX_RECORDS];
  memset(seen, 0, sizeof seen);
  int last[PIPELINE_SENDERS], acked = 0;
  for (int s = 0; s < PIPELINE_SENDERS; s++)
    last[s] = -1;
  for (const char *line = lines; *line;) {
    const char *nl = strchr(line, '\n');
    ck_assert_msg(nl != NULL, "a last line with no newline");
    int s, i;
    ck_assert_msg(sscanf(line, "{\"s\":%d,\"i\":%d", &s, &i) == 2, "line %.40s",
                  line);
    ck_assert_msg(s >= 0 && s < PIPELINE_SENDERS && i >= 0 && i < f->sent[s] &&
                      f->fate[s][i],
                  "record %d of sender %d never sent", i, s);
    ck_assert_msg(!seen[s][i], "record %d of sender %d written twice", i, s);
    ck_assert_msg(i > last[s], "sender %d: record %d after %d: out of order", s,
                  i, last[s]);
    seen[s][i] = 1;
    last[s] = i;
    line = nl + 1;
  }
  for (int s = 0; s < PIPELINE_SENDERS; s++)
    for (int i = 0; i < f->sent[s]; i++) {
      ck_assert_msg(f->fate[s][i] != 1 || seen[s][i],
                    "record %d of sender %d (answered 202) lost", i, s);
      acked += f->fate[s][i] == 1;
    }
  return acked;
}

/* ---- reading back -------------------------------------------------------- */

void pipeline_batch_parse(pipeline_batch *b) {
  const char *base = strrchr(b->name, '/');
  base = base ? base + 1 : b->name;
  ck_assert_msg(
      sscanf(base, "events-%lld-%lld.jsonl.gz", &b->first, &b->last) == 2,
      "batch name %s", b->name);
}

static int by_first(const void *a, const void *b) {
  long long x = ((const pipeline_batch *)a)->first;
  long long y = ((const pipeline_batch *)b)->first;
  return x < y ? -1 : x > y;
}

char *pipeline_read_batches(pipeline_batch *v, size_t n,
                            char *(*read)(const pipeline_batch *b)) {
  qsort(v, n, sizeof *v, by_first);
  size_t len = 0;
  char *all = calloc(1, 1);
  for (size_t k = 0; k < n; k++) {
    ck_assert_msg(v[k].first == (k ? v[k - 1].last + 1 : 1),
                  "%s does not follow the batch before", v[k].name);
    char *t = read(&v[k]);
    long long lines = 0;
    for (const char *c = t; *c; c++)
      lines += *c == '\n';
    ck_assert_msg(lines == v[k].last - v[k].first + 1, "%s holds %lld lines",
                  v[k].name, lines);
    size_t tl = strlen(t);
    all = realloc(all, len + tl + 1);
    memcpy(all + len, t, tl + 1);
    len += tl;
    free(t);
  }
  return all;
}

/* ---- kills --------------------------------------------------------------- */

static void *kill_loop(void *arg) {
  pipeline_killer *k = arg;
  while (!__atomic_load_n(&k->stop, __ATOMIC_ACQUIRE) && k->kills < k->want) {
    proc_sleep_ms(150 + (int)(rand_r(&k->seed) % 750));
    pid_t engine = host_last_engine(k->h);
    /* the one killed last is gone until the supervisor starts another */
    if (engine > 0 && !__atomic_load_n(&k->stop, __ATOMIC_ACQUIRE) &&
        kill(engine, SIGKILL) == 0) {
      host_wait_gone(engine, 5000);
      __atomic_add_fetch(&k->kills, 1, __ATOMIC_ACQ_REL);
    }
  }
  return NULL;
}

void pipeline_killer_start(pipeline_killer *k, const host_run *h, int want) {
  *k = (pipeline_killer){.h = h, .want = want, .seed = (unsigned)proc_now_ms()};
  ck_assert_int_eq(pthread_create(&k->thread, NULL, kill_loop, k), 0);
}

int pipeline_killer_kills(pipeline_killer *k) {
  return __atomic_load_n(&k->kills, __ATOMIC_ACQUIRE);
}

/* Each engine that said "ready" and then died of a SIGKILL was started
 * again after the first delay. */
static void assert_kills_not_backed_off(const host_run *h) {
  char *log = proc_slurp(h->log);
  int ready = 0, checked = 0;
  for (char *line = log, *nl; *line; line = nl + 1) {
    nl = strchr(line, '\n');
    if (!nl)
      break;
    *nl = '\0';
    if (strstr(line, "engine started (pid "))
      ready = 0;
    else if (strstr(line, " ready: "))
      ready = 1;
    else if (ready && strstr(line, "engine died: killed by signal 9")) {
      ck_assert_msg(strstr(line, "restarting in 100 ms") != NULL,
                    "a ready engine's SIGKILL backed off: %s", line);
      checked++;
    }
  }
  free(log);
  ck_assert_int_gt(checked, 0);
}

void pipeline_killer_stop(pipeline_killer *k) {
  __atomic_store_n(&k->stop, 1, __ATOMIC_RELEASE);
  pthread_join(k->thread, NULL);
  ck_assert_int_eq(k->kills, k->want);
  assert_kills_not_backed_off(k->h);
}
