/* chaos.c — `make chaos`: a long durability run, not one of the test
 * suites.  It starts a real `duro run` (DURO_BIN, a supervisor and its
 * engine) on the chaos plugin (CHAOS_PLUGIN, plugins/chaos/chaos.c: steps,
 * naps, event waits, a retried step), drives a mixed workload at it over
 * HTTP from a few threads, and SIGKILLs the supervisor (the engine dies
 * with it) at CHAOS_KILLS random moments (default 1000), starting it again
 * each time on the same database and config.  Then it lets the host finish
 * everything and checks that nothing the host acknowledged was lost and no
 * completed step ran again.  It runs copies of the binary and the plugin,
 * made at the start in the run's directory: the build directory may be
 * rebuilt while a run of twenty minutes goes on.
 *
 * Between the host's kills, about one time in three, its plugin's worker
 * processes (`duro __worker`, children of the engine) are killed instead
 * with SIGKILL or SIGSEGV from outside, at a random moment: the engine
 * lives on, the callbacks they held run again.
 *
 * The kills land at random moments after the host said ready, in its
 * start-up (the lock, the engine's fork, recovery), or a fraction of a
 * millisecond after a request of a chosen kind (create, event, control)
 * went out, so that some land between a request's commit and its answer.
 *
 * The workload: creates with explicit ids (single and in batches of 3),
 * events, pause, resume, terminate, restart (from the top and from a
 * step) and reads.  Every operation and its outcome goes to acks.log, and
 * the outcomes to memory: acknowledged (2xx), refused (4xx: it did not
 * happen), unknown (the kill cut the answer off, or a 5xx: it may have
 * happened) or not sent (connection refused: the host was down).  Creates
 * and events whose outcome is unknown are sent again: a create retried
 * with its id is acknowledged by its 409, and the plugin consumes events
 * idempotently (each carries {"k": 1..E, "send": S}, S numbering the
 * instance's sends, and a repeated k is waited past).  An event for an
 * ended instance is refused (409 instance.ended, nothing stored): not a
 * finding; the instance needs it again only if a restart makes it wait
 * for it.  A restart (acknowledged, or with an unknown outcome) leaves the
 * events its discarded steps consumed consumed, so the re-run waits for
 * new ones: the driver sends every event of the instance again ("sent
 * again after a restart"; one still buffered from before is delivered
 * first, and the repeat is waited past or stays buffered).  Controls are
 * not retried; their unknown outcomes widen what the end state may be.
 * Requests go through http_client.h's libcurl client, unchecked (this is
 * no Check test case), and its JSON path helpers.
 *
 * The plugin logs "exec" inside each step callback, "fail" for a failure
 * it was asked for, "seen" once duro_do returned OK (the result is then
 * committed) and "got <id> <k> s<S>" when a wait returned event k of send
 * S (on every replay too, and maybe before the consumption is committed:
 * a kill then leaves the event first in line), in 64-byte O_APPEND
 * records outside the journal.  This driver appends records of its own to
 * the same file, so they fall in order with the plugin's:
 *
 *   rstq <id> <k> r<n>   before restart request n (from step k; 1: the top)
 *   rsta <id> <k> r<n>   after request n was acknowledged
 *   rstx <id> <k> r<n>   after request n was refused or never sent
 *   rstu <id> <k> r<n>   after request n's answer was cut off
 *   term <id> 0 r<n>@<t> after a terminate was acknowledged at t (the
 *                        wall clock in ns, as in a step's token, when
 *                        its answer came)
 *   paus <id> 0 r<n>@<t> after a pause was acknowledged at t
 *   resq <id> 0 r<n>     before a resume request
 *
 * A restart is the start of a new generation of the steps it discards (the
 * marker comes before the request, so the new generation's records come
 * after it).  Only an ended instance can be restarted, so the old
 * generation may still finish its last steps between the request and the
 * answer (the restart then waits in the host's queue behind the end): a
 * "seen" of a discarded step there is of either generation and is not
 * counted.  One whose outcome is unknown counts as a restart too, without
 * vouching that a step seen after it ran after it: that can only hide a
 * finding, never invent one.  From that file the checks are: no step ran
 * after it was seen in the same generation ("rerun"); no seen result
 * changed; no step ran after an acknowledged terminate, nor a new step
 * after an acknowledged pause before a resume (a step whose "exec" comes
 * after the "term" or "paus" but whose token, taken as its callback
 * began, is older than the acknowledgement began before it: a worker can
 * be held up between the two by the memory pressure that gets it killed);
 * every acknowledged event was consumed at least once (a restart may have
 * discarded the wait, not the consumption), or is still buffered behind
 * every consumed one: the host delivers an instance's events in arrival
 * order, so an acknowledged event passed over by a later send's is lost;
 * one still buffered at the end is fine (its instance had all it needed,
 * or was terminated) and a "got" for an event never stored is a finding.
 * From the final state read over HTTP: every acknowledged create exists
 * and ended as the acknowledged controls say (terminated after a
 * terminate, complete otherwise, either when an unknown outcome allows
 * both), every event acknowledged since the instance's last restart is in
 * one of its journal's waits, every paused instance was still paused at
 * the end of the kills, and each complete instance's step results are
 * those its last generation saw.  `PRAGMA integrity_check` runs on the database
 * every CHAOS_CHECK_EVERY kills while the host is down, and at the end.
 *
 * Fan-outs (tests/chaos_fan.h): one single create in five is of a parent
 * of the plugin's class Fan (workflow chaos-fan, id "f<n>"), which starts
 * two to five children of class Chaos ("f<n>.<i>": steps, naps, a failed
 * first attempt, no events) with duro_child_start and sums their outputs
 * after duro_child_wait.  Parents are paused and resumed, never terminated
 * or restarted (they must complete with their sum); children get no
 * requests.  At the end each parent is complete with its children's sum
 * and lists exactly its children, each started once, every child is
 * complete, and every child step ran exactly once as far as it completed:
 * its journaled result is the token of an "exec" of it, and no "exec" of
 * it began after that one or came after a "seen".
 *
 * CHAOS_PG=1 (`make chaos-pg`) runs the same on PostgreSQL: a throwaway
 * cluster for the run (tests/pg/cluster.sh through chaos_pg.c, stopped
 * however the run ends) and three hosts on its database, each with its
 * own config hN.yaml, log hN.log and storage.path hN/, a lease of 1 s.
 * Each operation goes to a random running host, so events and controls
 * often reach one that does not run the instance (a 503
 * host.unavailable, the owner killed before it answered a forwarded
 * control, is an unknown outcome).  A kill picks a random host (in the
 * start-up kills, the one being started); it is started again at the
 * next kill, as a new host, and its instances go to whichever host takes
 * them over.  The final state is read through random hosts.  Instead of
 * integrity_check (the server checks its own pages): mid-run no unended
 * instance is owned by a host id without a `hosts` row; at the end, all
 * ended and the three running, exactly three hosts are not dead and no
 * dead host's row is left (within 10 s); after the clean stops none is
 * alive.  A failed run also dumps `hosts` and the instances' owners into
 * pg-hosts-instances.txt.
 *
 * Environment: CHAOS_PG, CHAOS_KILLS, CHAOS_SEED, CHAOS_THREADS (4),
 * CHAOS_PACE_MS (mean pause between one thread's requests, 35), CHAOS_FINISH_S
 * (how long the host gets to finish, 300), CHAOS_CHECK_EVERY (100), CHAOS_DIR
 * (where to put the run; default a fresh /tmp/duro-chaos-*, removed after a
 * clean run unless CHAOS_KEEP=1).  Prints one line per figure and exits 1 on
 * any loss, rerun or failed check. */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chaos_fan.h"
#include "chaos_par.h"
#include "http_client.h"
#ifdef CHAOS_HAVE_PG
#include "chaos_pg.h"
#endif

#define WF "chaos"
#define MAX_STEPS 10
#define MAX_EVENTS 3
#define MAX_THREADS 16
#define RECORD 64 /* plugins/sidelog.h's SIDELOG_RECORD */
#define TOKEN 32
/* Beyond the 10 s a host waits for the owner of a forwarded control, so
 * that its 503 host.unavailable, not our own timeout, ends the wait. */
#define REQ_TIMEOUT_MS 15000L
#define MAX_HOSTS 3
#define ANY_HOST (-1) /* a port argument: a random live host's */

/* ---- settings and the run's files --------------------------------------- */

static int kills_wanted = 1000, n_threads = 4, pace_ms = 35, finish_s = 300,
           check_every = 100;
static unsigned seed;
static char dir[256], db_path[320], side_path[320], ack_path[320],
    problems_path[320], bin_path[320], plugin_path[320];
static int side_fd = -1, ack_fd = -1;
static FILE *problems;
static int64_t t0;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static int env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "chaos: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (the run is in %s)\n", dir);
  va_end(ap);
  exit(2);
}

/* A finding: counted by the caller, the first few printed, all kept in
 * problems.txt. */
static pthread_mutex_t problems_mu = PTHREAD_MUTEX_INITIALIZER;
static int problems_printed;

static void vproblem(const char *fmt, va_list ap) {
  char line[2048];
  vsnprintf(line, sizeof line, fmt, ap);
  pthread_mutex_lock(&problems_mu);
  fprintf(problems, "%s\n", line);
  fflush(problems);
  if (problems_printed++ < 20)
    fprintf(stderr, "chaos: PROBLEM: %s\n", line);
  pthread_mutex_unlock(&problems_mu);
}

static void problem(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vproblem(fmt, ap);
  va_end(ap);
}

/* The same for chaos_fan.c. */
void chaos_problem(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vproblem(fmt, ap);
  va_end(ap);
}

long long chaos_token_ns(const char *token) {
  int pid;
  long long ns;
  return sscanf(token, "%d-%lld", &pid, &ns) == 2 ? ns : -1;
}

static long long wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts); /* the clock of the steps' tokens */
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One O_APPEND write per record, as the plugin writes its own: records of
 * the two processes interleave whole, in the order they were written.
 * at_ns, when not 0, is a time the record is about ("@<ns>"). */
static void side_record_at(const char *kind, const char *id, int index,
                           unsigned req, long long at_ns) {
  char line[RECORD + 1];
  int n =
      at_ns ? snprintf(line, sizeof line, "%s %s %d r%u@%lld", kind, id, index,
                       req, at_ns)
            : snprintf(line, sizeof line, "%s %s %d r%u", kind, id, index, req);
  memset(line + n, ' ', (size_t)(RECORD - 1 - n));
  line[RECORD - 1] = '\n';
  if (write(side_fd, line, RECORD) != RECORD)
    die("write %s: %s", side_path, strerror(errno));
}

static void side_record(const char *kind, const char *id, int index,
                        unsigned req) {
  side_record_at(kind, id, index, req, 0);
}

/* ---- what was asked and what the host said ------------------------------ */

enum kind {
  K_CREATE,
  K_BATCH,
  K_EVENT,
  K_PAUSE,
  K_RESUME,
  K_TERMINATE,
  K_RESTART,
  K_RESTART_FROM,
  K_GET,
  N_KINDS
};
static const char *kind_name[N_KINDS] = {"create",  "batch",        "event",
                                         "pause",   "resume",       "terminate",
                                         "restart", "restart-from", "get"};

typedef enum outcome { OUT_ACK, OUT_REFUSED, OUT_UNKNOWN, OUT_DOWN } outcome;
static const char *outcome_name[] = {"ack", "refused", "unknown", "notsent"};

static long n_out[N_KINDS][4]; /* by kind and outcome */
/* How long requests took: by kind for those answered, by kind for those
 * the kill cut off (no answer); each count, total and longest ms. */
static long answer_ms[N_KINDS][3], cut_ms[N_KINDS][3];
static long created_in_batch;      /* instances acknowledged by batches */
static long retried_creates;       /* creates sent again after an unknown */
static long retried_events;        /* events sent again after an unknown */
static long resent_events;         /* events sent again after a restart */
static long refused_events;        /* 409 instance.ended: not stored */
static long server_errors;         /* 5xx answers */
static long inflight[N_KINDS];     /* requests being sent now */
static long kills_during[N_KINDS]; /* kills with such a request in flight */
static unsigned req_seq;

enum { C_NONE, C_PENDING, C_ACKED };
enum { POSS_COMPLETE = 1, POSS_TERMINATED = 2 };

typedef struct inst {
  char id[16];
  uint8_t steps, events, nap_every, flaky, hog;
  uint16_t nap_ms, hold_ms;
  uint8_t create;     /* C_*: pending until acknowledged */
  uint8_t ev_acked;   /* bit k: event k acknowledged since the last restart */
  uint8_t ev_pending; /* bit k: sent with an unknown outcome, to resend */
  uint8_t ev_ended;   /* bit k: refused since it, the instance had ended */
  uint8_t ev_again;   /* bit k: sent before a restart, not since */
  uint16_t ev_sends;  /* the last send number ("send" in the payload) */
  uint8_t poss;       /* POSS_*: end states the controls allow */
  uint8_t pause_expected;
  chaos_fan *fan; /* a fan-out parent's children (NULL: a Chaos instance) */
  chaos_par *par; /* a Par instance's shape (NULL: not one) */
  /* the final state read over HTTP */
  uint8_t final_checked;
  char final_tok[MAX_STEPS + 1][TOKEN];
} inst;

static inst *insts;
static int n_cap;

/* Every event request, in the order each instance's sends went out (one
 * thread sends all of an instance's): the host consumes an instance's
 * events in the order they arrived, so an acknowledged one never consumed
 * while a later one was is a lost event. */
typedef struct ev_send {
  int n;
  uint16_t send;
  uint8_t k, outcome, consumed;
} ev_send;

static pthread_mutex_t sends_mu = PTHREAD_MUTEX_INITIALIZER;
static ev_send *sends;
static size_t n_sends, sends_cap;

static void record_send(int n, uint16_t send, int k, outcome o) {
  pthread_mutex_lock(&sends_mu);
  if (n_sends == sends_cap) {
    sends_cap = sends_cap ? 2 * sends_cap : 4096;
    sends = realloc(sends, sends_cap * sizeof *sends);
    if (!sends)
      die("out of memory");
  }
  sends[n_sends++] = (ev_send){n, send, (uint8_t)k, (uint8_t)o, 0};
  pthread_mutex_unlock(&sends_mu);
}

/* A driver thread owns instances t, t + T, t + 2T, ...: one thread sends
 * every request about an instance, so the order in which it got the
 * answers is the order the host applied them. */
typedef struct driver {
  int t;
  unsigned rnd;
  pthread_t th;
  int *mine; /* instance numbers, in creation order */
  int n_mine;
  int next; /* the next number to allocate */
} driver;

static driver drivers[MAX_THREADS];
static int g_stop;

/* The hosts: one on SQLite; CHAOS_PG=1: MAX_HOSTS on one PostgreSQL
 * database, each with its own config, log and storage.path. */
typedef struct host {
  char cfg[320], log[320];
  pid_t pid;
  int port; /* 0: down */
} host;
static host hosts[MAX_HOSTS];
static int n_hosts = 1, pg_mode;
static char conninfo[512];
static long host_unavailable; /* 503 host.unavailable: the owner was dying */

static int rnd(unsigned *r, int n) { return n > 0 ? (int)(rand_r(r) % n) : 0; }

static const char *wf_of(const inst *in) {
  return in->fan ? FAN_WF : in->par ? PAR_WF : WF;
}

/* The port of a random host that is up; 0 when none is. */
static int live_port(unsigned *r) {
  int start = rnd(r, n_hosts);
  for (int j = 0; j < n_hosts; j++) {
    int p =
        __atomic_load_n(&hosts[(start + j) % n_hosts].port, __ATOMIC_ACQUIRE);
    if (p)
      return p;
  }
  return 0;
}

static void ack_line(enum kind k, outcome o, const char *id, int arg,
                     long status) {
  char line[160];
  int n = snprintf(line, sizeof line, "%lld %s %s %s %d %ld\n",
                   (long long)(now_ms() - t0), outcome_name[o], kind_name[k],
                   id, arg, status);
  if (write(ack_fd, line, (size_t)n) != n)
    die("write %s: %s", ack_path, strerror(errno));
}

/* libcurl to 127.0.0.1:port through http_client.h, unchecked: this is
 * no Check test case. */
static CURLcode send_request(int port, const char *method, const char *path,
                             const char *body, http_resp *r) {
  http_req q = {.method = method,
                .path = path,
                .body = body,
                .timeout_ms = REQ_TIMEOUT_MS,
                .unchecked = 1};
  CURLcode rc = http_send(port, &q, r);
  if (rc == CURLE_FAILED_INIT)
    die("curl_easy_init failed");
  return rc;
}

/* When this thread's last request was answered (wall clock, ns): read as
 * the answer came, before anything else, so that it is late by as little
 * as can be. */
static __thread long long answered_ns;

/* One request; its outcome.  A refused connection means nothing was sent;
 * any other failure, or a 5xx, leaves the outcome unknown. */
static outcome call(enum kind k, int port, const char *method, const char *path,
                    const char *body, http_resp *r) {
  static __thread unsigned any_rnd;
  if (port == ANY_HOST) {
    if (!any_rnd)
      any_rnd = seed ^ (unsigned)(uintptr_t)&any_rnd;
    port = live_port(&any_rnd);
  }
  __atomic_add_fetch(&inflight[k], 1, __ATOMIC_SEQ_CST);
  int64_t sent_at = now_ms();
  CURLcode rc = send_request(port, method, path, body, r);
  answered_ns = wall_ns();
  long took = (long)(now_ms() - sent_at);
  __atomic_sub_fetch(&inflight[k], 1, __ATOMIC_SEQ_CST);
  if (rc != CURLE_COULDNT_CONNECT) {
    long *t = rc == CURLE_OK ? answer_ms[k] : cut_ms[k];
    __atomic_add_fetch(&t[0], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&t[1], took, __ATOMIC_RELAXED);
    long longest = __atomic_load_n(&t[2], __ATOMIC_RELAXED);
    while (took > longest &&
           !__atomic_compare_exchange_n(&t[2], &longest, took, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      ;
  }
  outcome o;
  if (rc == CURLE_COULDNT_CONNECT)
    o = OUT_DOWN;
  else if (rc != CURLE_OK)
    o = OUT_UNKNOWN;
  else if (r->status >= 200 && r->status < 300)
    o = OUT_ACK;
  else if (r->status >= 400 && r->status < 500)
    o = OUT_REFUSED;
  else if (pg_mode && r->status == 503 &&
           !strcmp(jstr(r->json, "error.code"), "host.unavailable")) {
    /* The owner did not answer a forwarded control: it was killed, and
     * its instances are not taken over yet.  It may have applied it. */
    o = OUT_UNKNOWN;
    __atomic_add_fetch(&host_unavailable, 1, __ATOMIC_RELAXED);
  } else {
    o = OUT_UNKNOWN;
    __atomic_add_fetch(&server_errors, 1, __ATOMIC_RELAXED);
    problem("%s %s: HTTP %ld %s", method, path, r->status,
            r->body ? r->body : "");
  }
  __atomic_add_fetch(&n_out[k][o], 1, __ATOMIC_RELAXED);
  return o;
}

static const char *err_code(http_resp *r) {
  return jstr(r->json, "error.code");
}

static void params_json(const inst *in, char *buf, size_t len) {
  snprintf(buf, len,
           "{\"steps\":%d,\"events\":%d,\"nap_every\":%d,\"nap_ms\":%d,"
           "\"hold_ms\":%d,\"flaky\":%d,\"hog\":%d}",
           in->steps, in->events, in->nap_every, in->nap_ms, in->hold_ms,
           in->flaky, in->hog);
}

/* ---- the operations ------------------------------------------------------ */

static int new_instance(driver *d) {
  int n = d->next;
  if (n >= n_cap)
    return -1;
  d->next += n_threads;
  inst *in = &insts[n];
  snprintf(in->id, sizeof in->id, "c%06d", n);
  unsigned *r = &d->rnd;
  in->steps = (uint8_t)(3 + rnd(r, MAX_STEPS - 2));
  in->events = (uint8_t)(rnd(r, 10) < 3 ? 0 : 1 + rnd(r, MAX_EVENTS));
  in->nap_every = (uint8_t)(rnd(r, 4) == 0 ? 0 : 2 + rnd(r, 3));
  in->nap_ms = (uint16_t)(5 + rnd(r, 300));
  in->hold_ms = (uint16_t)rnd(r, 25);
  in->flaky = (uint8_t)(rnd(r, 10) < 4 ? 1 + rnd(r, in->steps) : 0);
  /* One in twenty takes memory past limits.memory once (the config's):
   * its worker is killed as the OOM killer would kill it. */
  in->hog = (uint8_t)(rnd(r, 20) == 0 ? 1 + rnd(r, in->steps) : 0);
  in->poss = POSS_COMPLETE;
  in->create = C_PENDING;
  d->mine[d->n_mine++] = n;
  return n;
}

/* A fan-out parent (its children are drawn now), created alone. */
static int new_fan(driver *d) {
  int n = new_instance(d);
  if (n < 0)
    return -1;
  inst *in = &insts[n];
  in->id[0] = 'f';
  in->steps = in->events = in->flaky = in->hog = 0;
  in->fan = chaos_fan_new(&d->rnd);
  return n;
}

/* A Par instance (parallel steps, maybe a saga), created alone. */
static int new_par(driver *d) {
  int n = new_instance(d);
  if (n < 0)
    return -1;
  inst *in = &insts[n];
  in->id[0] = 'p';
  in->steps = in->events = in->flaky = in->hog = 0;
  in->par = chaos_par_new(&d->rnd);
  return n;
}

static void create_one(int port, int n) {
  inst *in = &insts[n];
  char params[1024], body[1200], path[64];
  if (in->fan)
    chaos_fan_params(in->fan, params, sizeof params);
  else if (in->par)
    chaos_par_params(in->par, params, sizeof params);
  else
    params_json(in, params, sizeof params);
  snprintf(body, sizeof body, "{\"id\":\"%s\",\"params\":%s}", in->id, params);
  snprintf(path, sizeof path, "/workflows/%s/instances", wf_of(in));
  http_resp r;
  outcome o = call(K_CREATE, port, "POST", path, body, &r);
  ack_line(K_CREATE, o, in->id, 0, r.status);
  if (o == OUT_ACK) {
    in->create = C_ACKED;
  } else if (o == OUT_REFUSED) {
    if (r.status == 409 && !strcmp(err_code(&r), "instance.already_exists"))
      in->create = C_ACKED; /* an earlier attempt was applied */
    else
      problem("create %s refused: HTTP %ld %s", in->id, r.status,
              r.body ? r.body : "");
  }
  http_resp_free(&r);
}

/* Sends pending creates again (their first outcome was unknown). */
static void retry_create(int port, int n) {
  __atomic_add_fetch(&retried_creates, 1, __ATOMIC_RELAXED);
  create_one(port, n);
}

static void create_batch(driver *d, int port) {
  int ns[3], k = 0;
  for (; k < 3; k++)
    if ((ns[k] = new_instance(d)) < 0)
      break;
  if (k == 0)
    return;
  char body[1024], path[64];
  size_t at = (size_t)snprintf(body, sizeof body, "{\"instances\":[");
  for (int i = 0; i < k; i++) {
    char params[160];
    params_json(&insts[ns[i]], params, sizeof params);
    at += (size_t)snprintf(body + at, sizeof body - at,
                           "%s{\"id\":\"%s\",\"params\":%s}", i ? "," : "",
                           insts[ns[i]].id, params);
  }
  snprintf(body + at, sizeof body - at, "]}");
  snprintf(path, sizeof path, "/workflows/%s/instances/batch", WF);
  http_resp r;
  outcome o = call(K_BATCH, port, "POST", path, body, &r);
  ack_line(K_BATCH, o, insts[ns[0]].id, k, r.status);
  if (o == OUT_ACK) {
    size_t i;
    json_t *c;
    json_array_foreach(jget(r.json, "created"), i, c) {
      const char *id = jstr(c, "id");
      int n = id[0] == 'c' ? atoi(id + 1) : -1;
      if (n >= 0 && n < n_cap && !strcmp(insts[n].id, id)) {
        insts[n].create = C_ACKED;
        __atomic_add_fetch(&created_in_batch, 1, __ATOMIC_RELAXED);
      }
    }
    json_array_foreach(jget(r.json, "errors"), i, c) {
      problem("batch create of %s: %s", jstr(c, "id"), jstr(c, "code"));
    }
  } else if (o == OUT_REFUSED) {
    problem("batch create refused: HTTP %ld %s", r.status,
            r.body ? r.body : "");
  }
  /* Anything not acknowledged stays pending and is sent again alone. */
  http_resp_free(&r);
}

static void send_event(int port, int n, int k) {
  inst *in = &insts[n];
  char path[128], body[48];
  uint8_t bit = (uint8_t)(1u << k);
  uint16_t send = ++in->ev_sends;
  snprintf(path, sizeof path, "/workflows/%s/instances/%s/events/go", WF,
           in->id);
  snprintf(body, sizeof body, "{\"k\":%d,\"send\":%u}", k, send);
  if (in->ev_again & bit) {
    __atomic_add_fetch(&resent_events, 1, __ATOMIC_RELAXED);
    in->ev_again &= (uint8_t)~bit;
  }
  http_resp r;
  outcome o = call(K_EVENT, port, "POST", path, body, &r);
  ack_line(K_EVENT, o, in->id, k, r.status);
  record_send(n, send, k, o);
  if (o == OUT_ACK) {
    in->ev_acked |= bit;
    in->ev_pending &= (uint8_t)~bit;
  } else if (o == OUT_REFUSED) {
    /* An ended instance takes no events; it needs this one again only
     * if a restart makes it wait for it. */
    in->ev_pending &= (uint8_t)~bit;
    if (r.status == 409 && !strcmp(err_code(&r), "instance.ended")) {
      in->ev_ended |= bit;
      __atomic_add_fetch(&refused_events, 1, __ATOMIC_RELAXED);
    } else
      problem("event %d to %s refused: HTTP %ld %s", k, in->id, r.status,
              r.body ? r.body : "");
  } else {
    in->ev_pending |= bit;
  }
  http_resp_free(&r);
}

static outcome patch_status(enum kind kind, int port, const inst *in,
                            const char *body, http_resp *r) {
  char path[128];
  snprintf(path, sizeof path, "/workflows/%s/instances/%s/status", wf_of(in),
           in->id);
  return call(kind, port, "PATCH", path, body, r);
}

static void pause_one(int port, int n) {
  inst *in = &insts[n];
  http_resp r;
  outcome o = patch_status(K_PAUSE, port, in, "{\"status\":\"pause\"}", &r);
  ack_line(K_PAUSE, o, in->id, 0, r.status);
  if (o == OUT_ACK) {
    in->pause_expected = 1;
    side_record_at("paus", in->id, 0,
                   __atomic_add_fetch(&req_seq, 1, __ATOMIC_RELAXED),
                   answered_ns);
  }
  http_resp_free(&r);
}

static void resume_one(int port, int n) {
  inst *in = &insts[n];
  http_resp r;
  side_record("resq", in->id, 0,
              __atomic_add_fetch(&req_seq, 1, __ATOMIC_RELAXED));
  outcome o = patch_status(K_RESUME, port, in, "{\"status\":\"resume\"}", &r);
  ack_line(K_RESUME, o, in->id, 0, r.status);
  if (o == OUT_ACK || o == OUT_UNKNOWN)
    in->pause_expected = 0;
  http_resp_free(&r);
}

static void terminate_one(int port, int n) {
  inst *in = &insts[n];
  http_resp r;
  outcome o =
      patch_status(K_TERMINATE, port, in, "{\"status\":\"terminate\"}", &r);
  ack_line(K_TERMINATE, o, in->id, 0, r.status);
  if (o == OUT_ACK) {
    in->poss = POSS_TERMINATED;
    in->pause_expected = 0;
    side_record_at("term", in->id, 0,
                   __atomic_add_fetch(&req_seq, 1, __ATOMIC_RELAXED),
                   answered_ns);
  } else if (o == OUT_UNKNOWN) {
    in->poss |= POSS_TERMINATED;
    in->pause_expected = 0;
  }
  http_resp_free(&r);
}

/* From the top (from = 0) or from step#from. */
static void restart_one(int port, int n, int from) {
  inst *in = &insts[n];
  enum kind k = from ? K_RESTART_FROM : K_RESTART;
  char body[96];
  if (from)
    snprintf(body, sizeof body,
             "{\"status\":\"restart\",\"from\":{\"name\":\"step\","
             "\"count\":%d}}",
             from);
  else
    snprintf(body, sizeof body, "{\"status\":\"restart\"}");
  unsigned req = __atomic_add_fetch(&req_seq, 1, __ATOMIC_RELAXED);
  side_record("rstq", in->id, from ? from : 1, req);
  http_resp r;
  outcome o = patch_status(k, port, in, body, &r);
  ack_line(k, o, in->id, from, r.status);
  if (o == OUT_ACK || o == OUT_UNKNOWN) {
    /* The re-run's waits need new events: those the discarded steps
     * consumed stay consumed.  Every event is sent again (one never
     * consumed is still buffered, and a repeated k is waited past). */
    in->ev_again |= (uint8_t)(in->ev_acked | in->ev_ended);
    in->ev_acked = in->ev_ended = 0;
  }
  if (o == OUT_ACK) {
    in->poss = POSS_COMPLETE;
    in->pause_expected = 0;
    side_record("rsta", in->id, from ? from : 1, req);
  } else if (o == OUT_UNKNOWN) {
    in->poss |= POSS_COMPLETE;
    in->pause_expected = 0;
    side_record("rstu", in->id, from ? from : 1, req);
  } else {
    side_record("rstx", in->id, from ? from : 1, req);
  }
  http_resp_free(&r);
}

static void get_one(int port, int n) {
  inst *in = &insts[n];
  char path[128];
  snprintf(path, sizeof path, "/workflows/%s/instances/%s", wf_of(in), in->id);
  http_resp r;
  outcome o = call(K_GET, port, "GET", path, NULL, &r);
  if (o == OUT_REFUSED && in->create == C_ACKED)
    problem("GET %s (acknowledged create): HTTP %ld %s", in->id, r.status,
            r.body ? r.body : "");
  http_resp_free(&r);
}

/* ---- the driver threads -------------------------------------------------- */

/* An instance of d's whose create was acknowledged, most often a recent
 * one (they are the ones still running); -1 if it has none. */
static int pick(driver *d) {
  for (int tries = 0; tries < 8 && d->n_mine > 0; tries++) {
    int i = rnd(&d->rnd, 10) < 7 && d->n_mine > 12
                ? d->n_mine - 1 - rnd(&d->rnd, 12)
                : rnd(&d->rnd, d->n_mine);
    if (insts[d->mine[i]].create == C_ACKED)
      return d->mine[i];
  }
  return -1;
}

/* An event an instance still needs in its current run (not acknowledged,
 * not pending, not refused because the instance had ended). */
static int pick_event(driver *d, int *n_out) {
  for (int tries = 0; tries < 8; tries++) {
    int n = pick(d);
    if (n < 0)
      return 0;
    inst *in = &insts[n];
    int start = rnd(&d->rnd, MAX_EVENTS);
    for (int j = 0; j < in->events; j++) {
      int k = 1 + (start + j) % in->events;
      if (!((in->ev_acked | in->ev_pending | in->ev_ended) & (1u << k))) {
        *n_out = n;
        return k;
      }
    }
  }
  return 0;
}

/* The first unresolved create or event of d's, retried before anything
 * new: 1 if there was one. */
static int retry_pending(driver *d, int port) {
  for (int i = d->n_mine - 1; i >= 0 && i >= d->n_mine - 64; i--) {
    inst *in = &insts[d->mine[i]];
    if (in->create == C_PENDING) {
      retry_create(port, d->mine[i]);
      return 1;
    }
    if (in->ev_pending) {
      for (int k = 1; k <= MAX_EVENTS; k++)
        if (in->ev_pending & (1u << k)) {
          __atomic_add_fetch(&retried_events, 1, __ATOMIC_RELAXED);
          send_event(port, d->mine[i], k);
          return 1;
        }
    }
  }
  return 0;
}

static void one_operation(driver *d, int port) {
  if (retry_pending(d, port))
    return;
  int r = rnd(&d->rnd, 100), n, k;
  if (r < 10 || d->n_mine < 4) {
    /* One create in five a fan-out parent, one in five a Par. */
    int c = rnd(&d->rnd, 5);
    if ((n = c == 0 ? new_fan(d) : c == 1 ? new_par(d) : new_instance(d)) >= 0)
      create_one(port, n);
  } else if (r < 13) {
    create_batch(d, port);
  } else if (r < 45) {
    if ((k = pick_event(d, &n)) > 0)
      send_event(port, n, k);
  } else if (r < 57) {
    if ((n = pick(d)) >= 0)
      pause_one(port, n);
  } else if (r < 69) {
    /* Mostly an instance paused before. */
    n = -1;
    for (int tries = 0; tries < 6 && n < 0; tries++) {
      int c = pick(d);
      if (c >= 0 && insts[c].pause_expected)
        n = c;
    }
    if (n < 0)
      n = pick(d);
    if (n >= 0)
      resume_one(port, n);
  } else if (r < 74) {
    /* A fan-out parent or a Par is paused and resumed, not ended nor
     * run again: it must end as its params say. */
    if ((n = pick(d)) >= 0 && !insts[n].fan && !insts[n].par)
      terminate_one(port, n);
  } else if (r < 88) {
    if ((n = pick(d)) >= 0 && !insts[n].fan && !insts[n].par)
      restart_one(port, n,
                  rnd(&d->rnd, 2) ? 0 : 1 + rnd(&d->rnd, insts[n].steps));
  } else {
    if ((n = pick(d)) >= 0)
      get_one(port, n);
  }
}

static void *drive(void *arg) {
  driver *d = arg;
  while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
    /* Each operation to a random host: events and controls often reach
     * one that does not run the instance. */
    int port = live_port(&d->rnd);
    if (!port) {
      sleep_ms(2);
      continue;
    }
    one_operation(d, port);
    sleep_ms(rnd(&d->rnd, 2 * pace_ms + 1));
  }
  return NULL;
}

/* ---- the host ------------------------------------------------------------ */

/* Starts host h (its supervisor, which forks the engine) with its output
 * appended to its log, whose size before is *log_at. */
static pid_t spawn_host(int h, off_t *log_at) {
  const char *host_log = hosts[h].log;
  int fd = open(host_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    die("open %s: %s", host_log, strerror(errno));
  struct stat st;
  fstat(fd, &st);
  *log_at = st.st_size;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0)
    die("fork: %s", strerror(errno));
  if (pid == 0) {
    /* Only async-signal-safe calls: the parent has threads. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(127);
    if (dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
      _exit(127);
    execl(bin_path, "duro", "run", hosts[h].cfg, (char *)NULL);
    _exit(127);
  }
  close(fd);
  return pid;
}

/* The port of the host started at log offset `at`, once it said ready;
 * -1 when it exited first (reaped) or said nothing by the deadline. */
static int wait_ready(int h, pid_t pid, off_t at, int64_t deadline) {
  const char *host_log = hosts[h].log;
  static const char mark[] = "http on port ";
  char buf[65536];
  for (;;) {
    /* One start writes a few lines before it is ready. */
    int fd = open(host_log, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t got = pread(fd, buf, sizeof buf - 1, at);
      close(fd);
      buf[got > 0 ? got : 0] = '\0';
      const char *p = strstr(buf, mark);
      if (p && strchr(p, '\n'))
        return atoi(p + strlen(mark));
    }
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid)
      return -1;
    if (now_ms() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      return -1;
    }
    sleep_ms(2);
  }
}

/* Starts host h until one says ready (a start may be refused while the
 * engine of the killed one still holds the lock), and offers its port to
 * the drivers. */
static void start_ready(int h, long *failed_starts) {
  for (int tries = 0; tries < 20; tries++) {
    off_t at;
    pid_t pid = spawn_host(h, &at);
    int p = wait_ready(h, pid, at, now_ms() + 30000);
    if (p > 0) {
      hosts[h].pid = pid;
      __atomic_store_n(&hosts[h].port, p, __ATOMIC_RELEASE);
      return;
    }
    (*failed_starts)++;
    problem("a host start failed (see %s after offset %lld)", hosts[h].log,
            (long long)at);
    sleep_ms(200);
  }
  die("the host would not start");
}

/* PRAGMA integrity_check on the database: 1 when it says "ok". */
static int sqlite_integrity_ok(void) {
  sqlite3 *db = NULL;
  int ok = 0;
  if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 10000);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) ==
        SQLITE_OK) {
      int rows = 0;
      while (sqlite3_step(st) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        rows++;
        if (v && !strcmp(v, "ok") && rows == 1)
          ok = 1;
        else {
          ok = 0;
          problem("integrity_check: %s", v ? v : "(null)");
        }
      }
    }
    sqlite3_finalize(st);
  } else {
    problem("integrity_check: cannot open %s: %s", db_path,
            db ? sqlite3_errmsg(db) : "?");
  }
  sqlite3_close(db);
  return ok;
}

/* The check of the database: SQLite's integrity_check; on PostgreSQL
 * (which checks its own pages) what the hosts keep in it: mid-run no
 * unended instance owned by an unknown host, and `at_end` (every instance
 * ended, every host still running) the live hosts are exactly those
 * running and every dead one is gone. */
static int store_ok(int at_end) {
  if (!pg_mode)
    return sqlite_integrity_ok();
#ifdef CHAOS_HAVE_PG
  char why[512] = "";
  int ok = at_end ? chaos_pg_settled(conninfo, n_hosts, 10000, why, sizeof why)
                  : chaos_pg_owners_known(conninfo, why, sizeof why);
  if (!ok)
    problem("PostgreSQL check: %s", why);
  return ok;
#else
  (void)at_end;
  return 0;
#endif
}

/* ---- the end: finish everything, read the final state -------------------- */

/* Sends a request until the host answers (it is up and nothing kills it
 * now): the outcome, with *r filled. */
static outcome settle(enum kind k, int port, const char *method,
                      const char *path, const char *body, http_resp *r) {
  for (int tries = 0;; tries++) {
    outcome o = call(k, port, method, path, body, r);
    if (o == OUT_ACK || o == OUT_REFUSED || tries >= 20)
      return o;
    http_resp_free(r);
    sleep_ms(100);
  }
}

static int status_is(const char *s, const char *a) { return !strcmp(s, a); }

static int ended(const char *s) {
  return status_is(s, "complete") || status_is(s, "terminated") ||
         status_is(s, "errored");
}

typedef struct figures {
  long lost_creates, lost_events, lost_controls, unfinished;
  long complete, terminated, errored, other;
  long pause_checked;
  chaos_fan_figures fan;
  chaos_par_figures par;
} figures;

/* Reads instance `id` of workflow `wf` over HTTP; its description (NULL:
 * no answer). */
static json_t *describe_id(int port, const char *wf, const char *id,
                           long *status) {
  char path[128];
  snprintf(path, sizeof path, "/workflows/%s/instances/%s", wf, id);
  http_resp r;
  outcome o = settle(K_GET, port, "GET", path, NULL, &r);
  *status = r.status;
  json_t *d = o == OUT_ACK ? json_incref(r.json) : NULL;
  http_resp_free(&r);
  (void)o;
  return d;
}

static json_t *describe(int port, int n, long *status) {
  return describe_id(port, wf_of(&insts[n]), insts[n].id, status);
}

/* Pending creates and events resolved; paused instances checked; every
 * event sent; everything paused resumed until all instances ended. */
static void finish(int port, figures *f) {
  for (int n = 0; n < n_cap; n++) {
    inst *in = &insts[n];
    for (int t = 0; in->create == C_PENDING && t < 10; t++)
      retry_create(port, n);
    if (in->create == C_PENDING)
      problem("create %s: no answer after 10 tries", in->id);
  }
  /* An instance paused (acknowledged, no resume sent since) is still
   * paused after all the kills, or ended at the pause's step boundary. */
  for (int n = 0; n < n_cap; n++) {
    inst *in = &insts[n];
    if (in->create != C_ACKED || !in->pause_expected)
      continue;
    long st;
    json_t *d = describe(port, n, &st);
    const char *s = jstr(d, "status");
    f->pause_checked++;
    if (!(status_is(s, "paused") || status_is(s, "waitingForPause") ||
          status_is(s, "complete") ||
          (in->par && chaos_par_may_end(in->par, s)) ||
          (status_is(s, "terminated") && (in->poss & POSS_TERMINATED)))) {
      f->lost_controls++;
      problem("%s: pause acknowledged, no resume sent, but it is \"%s\"",
              in->id, s);
    }
    json_decref(d);
  }
  for (int n = 0; n < n_cap; n++) {
    inst *in = &insts[n];
    if (in->create != C_ACKED)
      continue;
    for (int k = 1; k <= in->events; k++) {
      uint8_t bit = (uint8_t)(1u << k);
      for (int t = 0; !((in->ev_acked | in->ev_ended) & bit) && t < 10; t++)
        send_event(port, n, k);
      if (!((in->ev_acked | in->ev_ended) & bit))
        problem("event %d to %s: no answer after 10 tries", k, in->id);
    }
  }
  /* Resume whatever is paused, until every instance ended. */
  uint8_t *done = calloc((size_t)n_cap, 1);
  int64_t deadline = now_ms() + (int64_t)finish_s * 1000;
  /* Every step, nap and back-off here is short: 30 s in which no
   * instance ends means the rest never will (an event that was lost). */
  int64_t progress_at = now_ms();
  int last_left = -1;
  for (int round = 0;; round++) {
    int left = 0;
    for (int n = 0; n < n_cap; n++) {
      inst *in = &insts[n];
      if (in->create != C_ACKED || done[n])
        continue;
      long st;
      json_t *d = describe(port, n, &st);
      const char *s = jstr(d, "status");
      if (ended(s)) {
        done[n] = 1;
      } else {
        left++;
        if (status_is(s, "paused") || status_is(s, "waitingForPause")) {
          http_resp r;
          side_record("resq", in->id, 0,
                      __atomic_add_fetch(&req_seq, 1, __ATOMIC_RELAXED));
          outcome o =
              patch_status(K_RESUME, port, in, "{\"status\":\"resume\"}", &r);
          ack_line(K_RESUME, o, in->id, 0, r.status);
          http_resp_free(&r);
        }
      }
      json_decref(d);
    }
    if (left != last_left) {
      last_left = left;
      progress_at = now_ms();
    }
    if (!left || now_ms() > deadline || now_ms() - progress_at > 30000)
      break;
    sleep_ms(200);
  }
  free(done);
}

/* The final state of every acknowledged instance, checked against what
 * was acknowledged; each complete one's step results kept for the log
 * check. */
static void check_final(int port, figures *f) {
  for (int n = 0; n < n_cap; n++) {
    inst *in = &insts[n];
    if (in->create != C_ACKED)
      continue;
    long st;
    json_t *d = describe(port, n, &st);
    if (!d) {
      f->lost_creates++;
      problem("%s: create acknowledged, GET says HTTP %ld", in->id, st);
      continue;
    }
    const char *s = jstr(d, "status");
    int want_complete = in->poss & POSS_COMPLETE,
        want_term = in->poss & POSS_TERMINATED;
    if (in->fan)
      f->fan.parents++;
    if (in->par) {
      /* Complete or errored as its params say: chaos_par.c judges. */
      chaos_par_final(in->par, in->id, d, &f->par);
      f->complete += status_is(s, "complete");
      f->errored += status_is(s, "errored");
    } else if (status_is(s, "complete") && in->fan) {
      f->complete++;
      f->fan.complete++;
      chaos_fan_final(in->fan, in->id, d, &f->fan);
      for (int i = 0; i < chaos_fan_kids(in->fan); i++) {
        char kid[64];
        long kst;
        chaos_fan_kid_id(in->id, i, kid, sizeof kid);
        json_t *kd = describe_id(port, WF, kid, &kst);
        chaos_fan_final_kid(in->fan, in->id, i, kd, &f->fan);
        json_decref(kd);
      }
    } else if (status_is(s, "complete")) {
      f->complete++;
      if (!want_complete) {
        f->lost_controls++;
        problem("%s: complete, but a terminate was acknowledged", in->id);
      }
      json_t *out = jget(d, "output");
      if (json_integer_value(jget(out, "steps")) != in->steps) {
        f->other++;
        char *o = jdump(out);
        problem("%s: complete with output %s, want %d steps", in->id, o,
                in->steps);
        free(o);
      }
      in->final_checked = 1;
      for (int i = 1; i <= in->steps; i++) {
        char key[16];
        snprintf(key, sizeof key, "step#%d", i);
        json_t *sj = step_of(d, key);
        snprintf(in->final_tok[i], TOKEN, "%s", jstr(sj, "result"));
      }
    } else if (status_is(s, "terminated")) {
      f->terminated++;
      if (!want_term) {
        f->lost_controls++;
        problem("%s: terminated, but no terminate was acknowledged or "
                "left unanswered",
                in->id);
      }
    } else {
      f->unfinished++;
      char *text = jdump(d);
      problem("%s: ended the run \"%s\" (acknowledged events 0x%x): %.1200s",
              in->id, s, in->ev_acked, text);
      free(text);
    }
    /* Every event acknowledged in the instance's current run (since its
     * last restart) is in a wait of the journal, unless the instance may
     * have been terminated first.  Those of earlier runs are checked
     * from the side log (check_events). */
    if (!status_is(s, "terminated")) {
      uint8_t consumed = 0;
      size_t i;
      json_t *sj;
      json_array_foreach(jget(d, "steps"), i, sj) {
        if (status_is(jstr(sj, "type"), "waitForEvent") &&
            status_is(jstr(sj, "status"), "complete")) {
          json_int_t k = json_integer_value(jget(sj, "result.payload.k"));
          if (k >= 1 && k <= MAX_EVENTS)
            consumed |= (uint8_t)(1u << k);
        }
      }
      for (int k = 1; k <= in->events; k++)
        if ((in->ev_acked & (1u << k)) && !(consumed & (1u << k))) {
          f->lost_events++;
          problem("%s: event %d acknowledged, never consumed (status %s)",
                  in->id, k, s);
        }
    }
    json_decref(d);
  }
}

/* ---- the side log -------------------------------------------------------- */

typedef struct gen_state {
  char tok[MAX_STEPS + 1][TOKEN]; /* seen in this generation */
  uint8_t started[MAX_STEPS + 1]; /* an attempt ran in this generation */
  uint8_t open[MAX_STEPS + 1];    /* an attempt without an end yet */
  uint8_t terminated, paused;
  /* when the terminate and the pause were acknowledged (0: unknown) */
  long long terminated_ns, paused_ns;
  /* From a restart request to its answer: the first step it discards
   * (0: no restart in flight). */
  uint8_t restarting_from;
} gen_state;

typedef struct log_figures {
  long records, execs, seens, reruns, changed, seen_unrun, cut_off;
  long after_terminate, after_pause, restarts, final_mismatch;
  /* recorded after the terminate or the pause, begun before it */
  long begun_before_terminate, begun_before_pause;
  long ev_consumed, ev_unconsumed, ev_lost, ev_unsent;
} log_figures;

/* The time in a "term" or "paus" record's "r<n>@<ns>" (0: none). */
static long long acked_ns(const char *token) {
  const char *at = strchr(token, '@');
  return at ? atoll(at + 1) : 0;
}

/* Whether the callback of an "exec" with this token began before a
 * control acknowledged at ack_ns (0: unknown, then it did not): its token
 * is when it began, whenever its record was written. */
static int began_before(const char *token, long long ack_ns) {
  long long began = chaos_token_ns(token);
  return began >= 0 && ack_ns && began < ack_ns;
}

static int send_cmp(const void *a, const void *b) {
  const ev_send *x = a, *y = b;
  if (x->n != y->n)
    return x->n < y->n ? -1 : 1;
  return (x->send > y->send) - (x->send < y->send);
}

/* A "got" record: the plugin's wait returned the event of that send. */
static void event_got(log_figures *lf, long line, int n, int k,
                      const char *token) {
  ev_send key = {.n = n, .send = (uint16_t)atoi(token + 1)};
  ev_send *e = token[0] == 's' && n_sends > 0
                   ? bsearch(&key, sends, n_sends, sizeof *sends, send_cmp)
                   : NULL;
  if (!e || e->k != k || e->outcome == OUT_REFUSED || e->outcome == OUT_DOWN) {
    lf->ev_unsent++;
    problem("record %ld: %s got event %d (%s), which was not stored", line,
            insts[n].id, k, token);
    return;
  }
  e->consumed = 1;
}

/* Each acknowledged event was consumed at least once (by a wait a later
 * restart may have discarded: it stays consumed), or it is still
 * buffered: then so are all sent after it, and the instance had all it
 * needed or was terminated (an unfinished instance is counted apart). */
static void check_events(log_figures *lf) {
  for (size_t i = 0; i < n_sends;) {
    size_t end = i;
    uint16_t last_consumed = 0;
    for (; end < n_sends && sends[end].n == sends[i].n; end++)
      if (sends[end].consumed)
        last_consumed = sends[end].send;
    for (; i < end; i++) {
      const ev_send *e = &sends[i];
      if (e->outcome != OUT_ACK)
        continue;
      if (e->consumed)
        lf->ev_consumed++;
      else if (e->send > last_consumed)
        lf->ev_unconsumed++;
      else {
        lf->ev_lost++;
        problem("%s: event %d (send %u) acknowledged, never consumed, but "
                "send %u, sent after it, was",
                insts[e->n].id, e->k, e->send, last_consumed);
      }
    }
  }
}

static void check_side_log(log_figures *lf, chaos_fan_figures *ff,
                           chaos_par_figures *pf) {
  FILE *fp = fopen(side_path, "r");
  if (!fp)
    die("open %s: %s", side_path, strerror(errno));
  /* First pass: the restart requests that were refused or never sent
   * (1), and those acknowledged (2). */
  uint8_t *fate = calloc((size_t)req_seq + 2, 1);
  qsort(sends, n_sends, sizeof *sends, send_cmp);
  char rec[RECORD + 1], kind[8], id[16], token[48];
  int idx;
  while (fread(rec, 1, RECORD, fp) == RECORD) {
    rec[RECORD] = '\0';
    if (sscanf(rec, "%7s %15s %d %47s", kind, id, &idx, token) == 4 &&
        (!strcmp(kind, "rstx") || !strcmp(kind, "rsta"))) {
      unsigned r = (unsigned)atoi(token + 1);
      if (r <= req_seq)
        fate[r] = kind[3] == 'x' ? 1 : 2;
    }
  }
  rewind(fp);
  gen_state *gs = calloc((size_t)n_cap, sizeof *gs);
  long line = 0;
  while (fread(rec, 1, RECORD, fp) == RECORD) {
    rec[RECORD] = '\0';
    line++;
    if (sscanf(rec, "%7s %15s %d %47s", kind, id, &idx, token) != 4 ||
        (id[0] != 'c' && id[0] != 'f' && id[0] != 'p')) {
      problem("side log record %ld unreadable: %.63s", line, rec);
      continue;
    }
    int n = atoi(id + 1);
    /* A Par's records are its own (its steps' indices go past
     * MAX_STEPS). */
    if (id[0] == 'p' && n >= 0 && n < n_cap && insts[n].par) {
      lf->records++;
      chaos_par_record(insts[n].par, id, line, kind, idx, token, pf);
      continue;
    }
    if (n < 0 || n >= n_cap || idx < 0 || idx > MAX_STEPS || id[0] == 'p' ||
        (id[0] == 'f') != !!insts[n].fan) {
      problem("side log record %ld out of range: %.63s", line, rec);
      continue;
    }
    lf->records++;
    /* A fan-out parent's child "f<n>.<i>": its records are its own. */
    const char *dot = strchr(id, '.');
    if (id[0] == 'f' && dot) {
      chaos_fan_record(insts[n].fan, id, atoi(dot + 1), line, kind, idx, token,
                       ff);
      continue;
    }
    gen_state *g = &gs[n];
    if (!strcmp(kind, "exec")) {
      lf->execs++;
      if (g->tok[idx][0]) {
        lf->reruns++;
        problem("RERUN: record %ld: %s step %d ran (%s) after it completed "
                "with %s in the same generation",
                line, id, idx, token, g->tok[idx]);
      }
      if (g->terminated && began_before(token, g->terminated_ns)) {
        lf->begun_before_terminate++;
      } else if (g->terminated) {
        lf->after_terminate++;
        problem("record %ld: %s step %d ran (%s) after a terminate was "
                "acknowledged (at %lld)",
                line, id, idx, token, g->terminated_ns);
      } else if (g->paused && !g->started[idx]) {
        if (began_before(token, g->paused_ns)) {
          lf->begun_before_pause++;
        } else {
          lf->after_pause++;
          problem("record %ld: %s step %d started (%s) after a pause was "
                  "acknowledged (at %lld), before any resume",
                  line, id, idx, token, g->paused_ns);
        }
      }
      lf->cut_off += g->open[idx];
      g->open[idx] = 1;
      g->started[idx] = 1;
    } else if (!strcmp(kind, "fail")) {
      g->open[idx] = 0;
    } else if (!strcmp(kind, "seen")) {
      lf->seens++;
      g->open[idx] = 0;
      /* The old generation finishing, or the new one starting. */
      if (g->restarting_from && idx >= g->restarting_from)
        continue;
      if (!g->started[idx]) {
        lf->seen_unrun++;
        problem("record %ld: %s step %d seen (%s), never run in this "
                "generation",
                line, id, idx, token);
      }
      if (!g->tok[idx][0])
        snprintf(g->tok[idx], TOKEN, "%.31s", token);
      else if (strcmp(g->tok[idx], token) != 0) {
        lf->changed++;
        problem("record %ld: %s step %d result changed from %s to %s", line, id,
                idx, g->tok[idx], token);
      }
    } else if (!strcmp(kind, "got")) {
      event_got(lf, line, n, idx, token);
    } else if (!strcmp(kind, "rstq")) {
      unsigned r = (unsigned)atoi(token + 1);
      int f = r <= req_seq ? fate[r] : 0;
      if (f == 1)
        continue;
      lf->restarts++;
      /* Unknown (0): the old generation may still be running, so a step
       * it had started is not flagged when seen again. */
      for (int i = idx < 1 ? 1 : idx; i <= MAX_STEPS; i++) {
        g->tok[i][0] = '\0';
        g->open[i] = 0;
        if (f == 2)
          g->started[i] = 0;
      }
      g->terminated = g->paused = 0;
      g->restarting_from = (uint8_t)(idx < 1 ? 1 : idx);
    } else if (!strcmp(kind, "rsta") || !strcmp(kind, "rstu")) {
      g->restarting_from = 0;
    } else if (!strcmp(kind, "term")) {
      if (!g->terminated)
        g->terminated_ns = acked_ns(token);
      g->terminated = 1;
    } else if (!strcmp(kind, "paus")) {
      /* A pause acknowledged again: the first one still holds. */
      if (!g->paused)
        g->paused_ns = acked_ns(token);
      g->paused = 1;
    } else if (!strcmp(kind, "resq")) {
      g->paused = 0;
    } else if (strcmp(kind, "rstx") != 0) {
      problem("side log record %ld: unknown kind: %.63s", line, rec);
    }
  }
  fclose(fp);
  check_events(lf);
  /* A complete instance's journaled results are those its last
   * generation saw. */
  for (int n = 0; n < n_cap; n++) {
    inst *in = &insts[n];
    if (!in->final_checked)
      continue;
    for (int i = 1; i <= in->steps; i++)
      if (gs[n].tok[i][0] && strcmp(gs[n].tok[i], in->final_tok[i]) != 0) {
        lf->final_mismatch++;
        problem("%s step %d: journal has %s, its last generation saw %s",
                in->id, i, in->final_tok[i], gs[n].tok[i]);
      }
  }
  for (int n = 0; n < n_cap; n++) {
    if (insts[n].fan)
      chaos_fan_log_end(insts[n].fan, insts[n].id, ff);
    if (insts[n].par)
      chaos_par_log_end(insts[n].par, insts[n].id, pf);
  }
  free(gs);
  free(fate);
}

/* Warnings and errors in the host's log, by message, for the report. */
static void host_log_summary(long *warns, long *errors, long *memory_kills) {
  *warns = *errors = *memory_kills = 0;
  int shown = 0;
  for (int h = 0; h < n_hosts; h++) {
    FILE *fp = fopen(hosts[h].log, "r");
    if (!fp)
      continue;
    char line[4096];
    while (fgets(line, sizeof line, fp)) {
      /* the stand-in's warning, one a kill (the retry's line is info) */
      if (strstr(line, " warn ") &&
          strstr(line, "over its plugin's limits.memory"))
        (*memory_kills)++;
      if (strstr(line, " warn "))
        (*warns)++;
      else if (strstr(line, " error ")) {
        (*errors)++;
        if (shown++ < 5)
          fprintf(stderr, "chaos: %s: %s", hosts[h].log, line);
      }
    }
    fclose(fp);
  }
}

/* ---- main ------------------------------------------------------------------
 */

static void write_file(const char *path, const char *text) {
  FILE *fp = fopen(path, "w");
  if (!fp || fputs(text, fp) < 0 || fclose(fp) != 0)
    die("write %s: %s", path, strerror(errno));
}

/* A copy of `from` at `to`, with its mode. */
static void copy_file(const char *from, const char *to) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (in < 0 || fstat(in, &st) != 0)
    die("open %s: %s", from, strerror(errno));
  int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, st.st_mode);
  if (out < 0)
    die("create %s: %s", to, strerror(errno));
  char buf[65536];
  ssize_t got;
  while ((got = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)got) != got)
      die("write %s: %s", to, strerror(errno));
  if (got < 0 || close(out) != 0)
    die("copy %s: %s", from, strerror(errno));
  close(in);
}

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

/* The run's directory and all in it (the host adds its build store). */
static void rm_run(void) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* SQLite: one host, duro.yaml and host.log, its journal duro.db.
 * PostgreSQL: hosts h0.., each hN.yaml, hN.log and storage.path in hN/,
 * the journal in the run's cluster, a lease of 1 s. */
static void write_configs(void) {
  for (int h = 0; h < n_hosts; h++) {
    host *o = &hosts[h];
    char storage[1024];
    if (pg_mode) {
      char store_dir[300];
      snprintf(store_dir, sizeof store_dir, "%s/h%d", dir, h);
      mkdir(store_dir, 0755);
      snprintf(o->cfg, sizeof o->cfg, "%s/h%d.yaml", dir, h);
      snprintf(o->log, sizeof o->log, "%s/h%d.log", dir, h);
      snprintf(storage, sizeof storage,
               "storage:\n"
               "  path: %s/duro.db\n"
               "  postgresql: \"%s\"\n"
               "  synchronous: full\n"
               "  lease: 1s\n",
               store_dir, conninfo);
    } else {
      snprintf(o->cfg, sizeof o->cfg, "%s/duro.yaml", dir);
      snprintf(o->log, sizeof o->log, "%s/host.log", dir);
      snprintf(storage, sizeof storage,
               "storage: { path: %s, synchronous: full }\n", db_path);
    }
    unlink(o->log);
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "%s"
             "http: { listen: \"127.0.0.1:0\" }\n"
             "plugins:\n"
             "  - name: chaos\n"
             "    path: %s\n"
             /* Its worker kills are ours, not a bad build's: the
              * crash-storm breaker would hold every instance. */
             "    crash_storm: { crashes: 0 }\n"
             /* Instances with "hog" take memory past it. */
             "    limits: { memory: 160MiB }\n"
             "    workflows:\n"
             "      - { name: %s, binding: CHAOS, class_name: Chaos }\n"
             "      - { name: %s, binding: CHAOS_FAN, class_name: Fan }\n"
             "      - { name: %s, binding: CHAOS_PAR, class_name: Par }\n",
             storage, plugin_path, WF, FAN_WF, PAR_WF);
    write_file(o->cfg, yaml);
  }
}

/* The parent pid of process `pid` from /proc, or -1. */
static pid_t parent_of(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *end = strrchr(buf, ')'); /* the name may hold spaces */
  int ppid;
  return end && sscanf(end + 1, " %*c %d", &ppid) == 1 ? (pid_t)ppid : -1;
}

/* Sends `sig` to every worker process of host h (children of its engine,
 * the supervisor's child); how many. */
static int kill_workers(int h, int sig) {
  DIR *d = opendir("/proc");
  int n = 0;
  struct dirent *de;
  while (d && (de = readdir(d))) {
    pid_t pid = (pid_t)atoi(de->d_name);
    if (pid <= 0)
      continue;
    pid_t engine = parent_of(pid);
    if (engine <= 0 || parent_of(engine) != hosts[h].pid)
      continue;
    char path[64], cmd[256] = {0};
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(cmd, 1, sizeof cmd - 1, f) : 0;
    if (f)
      fclose(f);
    /* argv is NUL-separated: "duro\0__worker\0..." */
    if (len > 0 && memmem(cmd, len, "__worker", 8) && kill(pid, sig) == 0)
      n++;
  }
  if (d)
    closedir(d);
  return n;
}

/* SIGKILL of host h's supervisor (the engine dies of its death): 0 when
 * it was still running, as it should have been. */
static int kill_host(int h, int kill_no) {
  pid_t pid = hosts[h].pid;
  kill(pid, SIGKILL);
  __atomic_store_n(&hosts[h].port, 0, __ATOMIC_RELEASE);
  int st;
  if (waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
    return 0;
  /* It exited by itself: refused the lock, or worse.  Look. */
  problem("kill %d: host %d had exited by itself (%s %d)", kill_no, h,
          WIFSIGNALED(st) ? "signal" : "exit code",
          WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  return -1;
}

/* SIGTERM, and the status it exited with (SIGKILL after 60 s). */
static int stop_host(int h) {
  pid_t pid = hosts[h].pid;
  __atomic_store_n(&hosts[h].port, 0, __ATOMIC_RELEASE);
  kill(pid, SIGTERM);
  int st = 0, waited = 0;
  while (waitpid(pid, &st, WNOHANG) != pid) {
    if (waited++ > 6000) {
      problem("host %d did not stop within 60 s of SIGTERM", h);
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      break;
    }
    sleep_ms(10);
  }
  return st;
}

static void on_signal(int sig) {
  (void)sig;
  exit(2); /* the atexit handler stops the cluster */
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);
  kills_wanted = env_int("CHAOS_KILLS", 1000);
  n_threads = env_int("CHAOS_THREADS", 4);
  pace_ms = env_int("CHAOS_PACE_MS", 35);
  finish_s = env_int("CHAOS_FINISH_S", 300);
  check_every = env_int("CHAOS_CHECK_EVERY", 100);
  seed = (unsigned)env_int("CHAOS_SEED", (int)(time(NULL) ^ getpid()));
  if (kills_wanted < 0 || n_threads < 1 || n_threads > MAX_THREADS ||
      pace_ms < 0) {
    fprintf(stderr,
            "chaos: bad CHAOS_KILLS, CHAOS_THREADS (1..%d) or "
            "CHAOS_PACE_MS\n",
            MAX_THREADS);
    return 2;
  }
  pg_mode = env_int("CHAOS_PG", 0);
#ifndef CHAOS_HAVE_PG
  if (pg_mode) {
    fprintf(stderr, "chaos: CHAOS_PG=1, but built without libpq\n");
    return 2;
  }
#endif
  n_hosts = pg_mode ? MAX_HOSTS : 1;
  const char *given = getenv("CHAOS_DIR");
  if (given && *given) {
    snprintf(dir, sizeof dir, "%s", given);
    mkdir(dir, 0755);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
      die("CHAOS_DIR %s is not a directory", dir);
  } else {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/duro-chaos-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
      die("mkdtemp: %s", strerror(errno));
  }
  snprintf(db_path, sizeof db_path, "%s/duro.db", dir);
  snprintf(side_path, sizeof side_path, "%s/side.log", dir);
  snprintf(ack_path, sizeof ack_path, "%s/acks.log", dir);
  snprintf(problems_path, sizeof problems_path, "%s/problems.txt", dir);
  snprintf(bin_path, sizeof bin_path, "%s/duro", dir);
  snprintf(plugin_path, sizeof plugin_path, "%s/libchaos.so", dir);
#ifdef CHAOS_HAVE_PG
  if (pg_mode) {
    char err[1024];
    if (chaos_pg_start(conninfo, sizeof conninfo, err, sizeof err) != 0)
      die("no PostgreSQL cluster: %s", err);
    /* Stopped however the run ends: a failure, ^C, or a clean end. */
    atexit(chaos_pg_stop);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
  }
#endif
  /* Copies: a rebuild of the build directory during the run must not
   * change, or take away, what it runs. */
  copy_file(DURO_BIN, bin_path);
  copy_file(CHAOS_PLUGIN, plugin_path);
  /* A fresh run: CHAOS_DIR may hold an earlier one. */
  unlink(side_path);
  unlink(ack_path);
  static const char *db_files[] = {"", "-wal", "-shm"};
  for (size_t i = 0; i < 3; i++) {
    char p[400];
    snprintf(p, sizeof p, "%s%s", db_path, db_files[i]);
    unlink(p);
  }
  write_configs();
  side_fd = open(side_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  ack_fd = open(ack_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  problems = fopen(problems_path, "w");
  if (side_fd < 0 || ack_fd < 0 || !problems)
    die("cannot create the run's files: %s", strerror(errno));
  setenv("DURO_CHAOS_LOG", side_path, 1);
  setenv("DURO_LOG", "info", 1);
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    die("curl_global_init failed");

  n_cap = kills_wanted * 40 + 2000;
  insts = calloc((size_t)n_cap, sizeof *insts);
  if (!insts)
    die("out of memory");
  printf("chaos: %d kills, seed %u, %d threads, %s, run in %s\n", kills_wanted,
         seed, n_threads,
         pg_mode ? "3 hosts on PostgreSQL" : "one host on SQLite", dir);
  t0 = now_ms();
  for (int t = 0; t < n_threads; t++) {
    driver *d = &drivers[t];
    d->t = t;
    d->rnd = seed * 2654435761u + (unsigned)t * 40503u + 1;
    d->next = t;
    d->mine = calloc((size_t)n_cap / (size_t)n_threads + 2, sizeof *d->mine);
    if (pthread_create(&d->th, NULL, drive, d) != 0)
      die("pthread_create failed");
  }

  unsigned r = seed;
  long failed_starts = 0, early = 0, integrity_checks = 0, integrity_bad = 0;
  long worker_kills = 0;
  int64_t last_print = now_ms();
  /* Host `down` is the one the last kill took away: each kill's start
   * brings it back.  The others run from the start. */
  int down = 0;
  for (int h = 1; h < n_hosts; h++)
    start_ready(h, &failed_starts);
  for (int kill_no = 1; kill_no <= kills_wanted; kill_no++) {
    int victim = down;
    int kind = rnd(&r, 100);
    if (kind < 15) {
      /* In the start-up: the lock, the engine's fork, recovery (what
       * was queued or running is queued again; on PostgreSQL joining as
       * a new host) and the first steps. */
      off_t at;
      hosts[down].pid = spawn_host(down, &at);
      sleep_ms(rnd(&r, 120));
      early++;
    } else {
      /* Any host, while the others serve too: on PostgreSQL its
       * instances wait for a takeover, by any host. */
      start_ready(down, &failed_starts);
      victim = rnd(&r, n_hosts);
      if (kind < 45) {
        /* While a request of a chosen kind is being answered: a moment
         * (0 to 0.4 ms) after it was seen in flight, before or after its
         * commit. */
        static const int targets[][2] = {{K_CREATE, K_BATCH},
                                         {K_EVENT, K_EVENT},
                                         {K_PAUSE, K_RESUME},
                                         {K_TERMINATE, K_RESTART_FROM}};
        const int *tk = targets[rnd(&r, 4)];
        sleep_ms(20 + rnd(&r, 600));
        for (int64_t until = now_ms() + 400; now_ms() < until;) {
          int busy = 0;
          for (int k = tk[0]; k <= tk[1]; k++)
            busy |= __atomic_load_n(&inflight[k], __ATOMIC_SEQ_CST) > 0;
          if (busy) {
            struct timespec ts = {0, 1000L * rnd(&r, 400)};
            nanosleep(&ts, NULL);
            break;
          }
          struct timespec ts = {0, 50000};
          nanosleep(&ts, NULL);
        }
      } else {
        sleep_ms(kind < 65 ? rnd(&r, 200) : 200 + rnd(&r, 1500));
      }
      /* its workers first, now and then: the engine must not notice */
      if (rnd(&r, 3) == 0) {
        worker_kills += kill_workers(victim, rnd(&r, 2) ? SIGKILL : SIGSEGV);
        sleep_ms(20 + rnd(&r, 300));
      }
    }
    for (int k = 0; k < N_KINDS; k++)
      if (__atomic_load_n(&inflight[k], __ATOMIC_SEQ_CST) > 0)
        kills_during[k]++;
    if (kill_host(victim, kill_no) != 0)
      failed_starts++;
    down = victim;
    if (check_every > 0 && kill_no % check_every == 0) {
      /* The engine dies of its supervisor's death a moment later. */
      sleep_ms(100);
      integrity_checks++;
      integrity_bad += !store_ok(0);
    }
    if (now_ms() - last_print > 30000) {
      last_print = now_ms();
      long acks = 0;
      for (int k = 0; k < N_KINDS; k++)
        acks += k == K_GET ? 0 : n_out[k][OUT_ACK];
      printf("chaos: ... %d kills, %ld acknowledged operations, %.0f s\n",
             kill_no, acks, (now_ms() - t0) / 1000.0);
    }
  }
  __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
  for (int t = 0; t < n_threads; t++)
    pthread_join(drivers[t].th, NULL);
  int64_t chaos_end = now_ms();

  /* The last start: nothing kills the hosts now.  Every request goes
   * to a random one of them. */
  start_ready(down, &failed_starts);
  figures f = {0};
  finish(ANY_HOST, &f);
  check_final(ANY_HOST, &f);
  if (pg_mode) {
    /* Every instance ended, every host runs: the hosts' own rows. */
    integrity_checks++;
    integrity_bad += !store_ok(1);
  }
  int clean_stop = 1;
  for (int h = 0; h < n_hosts; h++) {
    int st = stop_host(h);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      clean_stop = 0;
      problem("host %d did not stop cleanly (status 0x%x)", h, st);
    }
  }
  integrity_checks++;
#ifdef CHAOS_HAVE_PG
  if (pg_mode) {
    /* A host that stops cleanly marks itself dead. */
    char why[512] = "";
    int ok = chaos_pg_none_alive(conninfo, why, sizeof why);
    if (!ok)
      problem("PostgreSQL check: %s", why);
    integrity_bad += !ok;
  } else
#endif
    integrity_bad += !store_ok(1);

  log_figures lf = {0};
  check_side_log(&lf, &f.fan, &f.par);
  long warns, errors;
  long memory_kills;
  host_log_summary(&warns, &errors, &memory_kills);

  /* ---- the figures ---- */
  long acks = 0, refused = 0, unknown = 0, notsent = 0;
  for (int k = 0; k < N_KINDS; k++) {
    if (k == K_GET)
      continue;
    acks += n_out[k][OUT_ACK];
    refused += n_out[k][OUT_REFUSED];
    unknown += n_out[k][OUT_UNKNOWN];
    notsent += n_out[k][OUT_DOWN];
  }
  long n_created = 0;
  for (int n = 0; n < n_cap; n++)
    n_created += insts[n].create == C_ACKED;
  long lost_events = f.lost_events + lf.ev_lost;
  long wrong_output = f.other + f.fan.wrong_output + f.par.wrong_end;
  long lost = lost_events + f.lost_creates + f.lost_controls + f.unfinished +
              wrong_output + f.fan.kids_lost + f.par.lost;
  long reruns = lf.reruns + lf.changed + lf.final_mismatch + f.fan.reruns +
                f.fan.changed + f.par.reruns + f.par.rb_reruns + f.par.changed;
  long control_runs = lf.after_terminate + lf.after_pause;
  printf("chaos: kills: %d (%ld in start-up/recovery; with a request in "
         "flight: create %ld, batch %ld, event %ld, pause %ld, resume %ld, "
         "terminate %ld, restart %ld, read %ld; step attempts cut off and "
         "run again: %ld; failed starts %ld)\n",
         kills_wanted, early, kills_during[K_CREATE], kills_during[K_BATCH],
         kills_during[K_EVENT], kills_during[K_PAUSE], kills_during[K_RESUME],
         kills_during[K_TERMINATE],
         kills_during[K_RESTART] + kills_during[K_RESTART_FROM],
         kills_during[K_GET], lf.cut_off, failed_starts);
  printf("chaos: worker processes killed (SIGKILL or SIGSEGV, the engine "
         "left running): %ld; by the engine for limits.memory in a callback "
         "(as the OOM killer would): %ld\n",
         worker_kills, memory_kills);
  printf("chaos: acknowledged: %ld operations (create %ld, batch %ld of "
         "%ld instances, event %ld, pause %ld, resume %ld, terminate %ld, "
         "restart %ld, restart from a step %ld)\n",
         acks, n_out[K_CREATE][OUT_ACK], n_out[K_BATCH][OUT_ACK],
         created_in_batch, n_out[K_EVENT][OUT_ACK], n_out[K_PAUSE][OUT_ACK],
         n_out[K_RESUME][OUT_ACK], n_out[K_TERMINATE][OUT_ACK],
         n_out[K_RESTART][OUT_ACK], n_out[K_RESTART_FROM][OUT_ACK]);
  printf("chaos: not acknowledged: refused %ld (resent creates that "
         "existed %ld, event %ld: the instance had ended, pause %ld, resume "
         "%ld, terminate %ld, restart %ld: not allowed in the instance's "
         "state), unknown outcome %ld (creates resent %ld, events resent "
         "%ld), not sent %ld, 5xx %ld\n",
         refused, n_out[K_CREATE][OUT_REFUSED], refused_events,
         n_out[K_PAUSE][OUT_REFUSED], n_out[K_RESUME][OUT_REFUSED],
         n_out[K_TERMINATE][OUT_REFUSED],
         n_out[K_RESTART][OUT_REFUSED] + n_out[K_RESTART_FROM][OUT_REFUSED],
         unknown, retried_creates, retried_events, notsent, server_errors);
  if (pg_mode)
    printf("chaos: forwarded controls answered 503 host.unavailable (the "
           "owner had been killed; counted as unknown outcomes): %ld\n",
           host_unavailable);
  printf("chaos: ms from request to answer, mean/longest:");
  for (int k = 0; k < N_KINDS; k++)
    if (answer_ms[k][0])
      printf(" %s %ld/%ld", kind_name[k], answer_ms[k][1] / answer_ms[k][0],
             answer_ms[k][2]);
  printf("; to the kill that cut it off, count mean/longest:");
  for (int k = 0; k < N_KINDS; k++)
    if (cut_ms[k][0])
      printf(" %s %ld %ld/%ld", kind_name[k], cut_ms[k][0],
             cut_ms[k][1] / cut_ms[k][0], cut_ms[k][2]);
  printf("\n");
  printf("chaos: events: %ld acknowledged, %ld consumed (at least once: a "
         "restart leaves them consumed), %ld still buffered after every one "
         "consumed (their instance had all it needed, or was terminated); "
         "%ld sent again after a restart (its re-run waits for new ones); "
         "%ld consumed but never stored\n",
         n_out[K_EVENT][OUT_ACK], lf.ev_consumed, lf.ev_unconsumed,
         resent_events, lf.ev_unsent);
  printf("chaos: instances: %ld acknowledged, %ld complete, %ld terminated, "
         "%ld errored (sagas); %ld step executions, %ld restarts in the log; "
         "%ld paused ones checked after the kills\n",
         n_created, f.complete, f.terminated, f.errored, lf.execs, lf.restarts,
         f.pause_checked);
  printf("chaos: fan-outs: %ld parents acknowledged, %ld complete; %ld "
         "children, %ld complete; %ld child step executions (%ld cut off and "
         "run again)\n",
         f.fan.parents, f.fan.complete, f.fan.kids, f.fan.kids_complete,
         f.fan.execs, f.fan.cut_off);
  chaos_par_print(&f.par);
  printf("chaos: lost: %ld (creates %ld, events %ld, controls %ld, "
         "unfinished %ld, wrong output %ld (fan-out sums and children's %ld, "
         "Par ends %ld), children %ld, Par steps and rollbacks %ld)\n",
         lost, f.lost_creates, lost_events, f.lost_controls, f.unfinished,
         wrong_output, f.fan.wrong_output, f.par.wrong_end, f.fan.kids_lost,
         f.par.lost);
  printf("chaos: rerun-after-completion: %ld (results changed %ld, journal "
         "unlike the last seen %ld, seen but never run %ld)\n",
         lf.reruns, lf.changed, lf.final_mismatch, lf.seen_unrun);
  printf("chaos: child steps run again after completing: %ld (results "
         "changed %ld, journaled or seen but never run %ld); children started "
         "twice for one (parent, name): %ld\n",
         f.fan.reruns, f.fan.changed, f.fan.unrun, f.fan.kids_twice);
  printf("chaos: steps run after an acknowledged terminate: %ld, new steps "
         "after an acknowledged pause: %ld (recorded after the terminate or "
         "pause, begun before it was acknowledged: %ld, %ld)\n",
         lf.after_terminate, lf.after_pause, lf.begun_before_terminate,
         lf.begun_before_pause);
  printf("chaos: %s: %s (%ld checks, %ld failed); %s stopped "
         "%s; host log%s: %ld warnings, %ld errors\n",
         pg_mode ? "hosts and owners in PostgreSQL" : "integrity",
         integrity_bad ? "FAILED" : "ok", integrity_checks, integrity_bad,
         pg_mode ? "hosts" : "host", clean_stop ? "cleanly" : "UNCLEANLY",
         pg_mode ? "s" : "", warns, errors);
  printf("chaos: elapsed: %.1f s (%.1f s of kills, %.1f s to finish and "
         "check)\n",
         (now_ms() - t0) / 1000.0, (chaos_end - t0) / 1000.0,
         (now_ms() - chaos_end) / 1000.0);
  int bad = lost || reruns || control_runs || integrity_bad || !clean_stop ||
            lf.seen_unrun || f.fan.unrun || f.fan.kids_twice || f.par.unrun ||
            f.par.disorder || f.par.stray || problems_printed;
  fclose(problems);
  close(side_fd);
  close(ack_fd);
  curl_global_cleanup();
  if (bad) {
#ifdef CHAOS_HAVE_PG
    char dump[400];
    snprintf(dump, sizeof dump, "%s/pg-hosts-instances.txt", dir);
    if (pg_mode)
      chaos_pg_dump(conninfo, dump);
#endif
    printf("chaos: FAILED; the evidence is in %s (problems.txt, side.log, "
           "acks.log, %s)\n",
           dir,
           pg_mode ? "h0.log h1.log h2.log, pg-hosts-instances.txt"
                   : "host.log, duro.db");
    return 1;
  }
  if (env_int("CHAOS_KEEP", 0) || (given && *given))
    printf("chaos: passed; the run is in %s\n", dir);
  else {
    rm_run();
    printf("chaos: passed\n");
  }
  return 0;
}
