/* faults.c — the fault-isolation test plugin (tests/test_faults.c):
 * workflow class "Fault" runs ordinary steps and, between them, one step
 * whose callback misbehaves the way a buggy plugin does, on every attempt,
 * so the test can check that the host survives it.  Params:
 *
 *   {"fault": "none|segv|abort|stack|exit|kill|hang", "steps": N,
 *    "hold_ms": M, "timeout_s": T}
 *
 * The instance runs step#1, then (unless fault is "none") the step
 * "fault", then step#2 .. step#N; every ordinary step takes M ms (default
 * 0), so instances are still running when another one crashes the host.
 * The fault step retries 10 times, 100 ms apart, with a timeout of T
 * seconds (default 1) when it hangs.  The faults are:
 *
 *   segv   a write through a NULL pointer
 *   abort  abort()
 *   stack  unbounded recursion, a 4 KiB frame per call
 *   exit   exit(0) from the worker thread
 *   kill   SIGKILL to its own process, which no handler sees (as when
 *          the OOM killer ends a callback that takes too much memory)
 *   hang   sleeps in a loop forever (without burning a core)
 *   spin   loops forever on a core (for limits.cpu)
 *   thread starts a thread of its own that segfaults 20 ms later, while
 *          the callback sleeps a second (a crash in no activation)
 *   fork   forks a child that sleeps a minute (holding every descriptor
 *          of the worker, its channels too), then segfaults
 *   killgroup  kill(0, SIGTERM): SIGTERM to its whole process group
 *   hog    takes 32 MiB more every 5 ms, up to 4 GiB (limits.memory)
 *   populate  maps 4 GiB with MAP_POPULATE, every page touched in one
 *          call, faster than any watch of the RSS (limits.memory)
 *   forks  forks children until a fork fails (at most 256), each in a
 *          session of its own, named "faults-child", sleeping a minute;
 *          its result {"forks": the children forked, "errno": the
 *          failed fork's, 0 if none} (limits.processes)
 *   burn   spins for a second of wall time; its result {"cpu_ms": the
 *          CPU time it got meanwhile} (limits.cpus)
 *   once   segv on the step's first attempt only, success on the next
 *          (a rare crash of a healthy build, given to few instances)
 *   flood  writes six frames of 200 MiB straight onto each channel of
 *          its worker to the engine (every socket but the control
 *          socket, descriptor 3): a hostile worker's flood, which the
 *          engine must refuse at the first frame's length
 *   regress  segv in the build compiled with FAULTS_REGRESSED
 *          (libfaults-regressed.so: a deploy that brought a bug), a
 *          step that succeeds in the others
 *
 * With "in_run": "kill" as well, run() itself SIGKILLs its own process
 * before its first step, on every activation: code outside any step
 * whose kill no handler sees (tests/test_workers.c).  With "in_run":
 * "hog", run() takes and touches 640 MiB before its first step, on every
 * activation, and keeps it (a leak in code outside any step).
 *
 * While a file $DURO_FAULTS_LOG.fixed exists, the fault step
 * succeeds instead (its result "fixed"): a deploy that fixed the bug,
 * for the crash-storm breaker's tests.
 *
 * Like the chain plugin, it writes what it does to the file named by
 * $DURO_FAULTS_LOG, outside the journal, in fixed 64-byte O_APPEND
 * records (plugins/sidelog.h) so a crash never leaves half a line:
 *
 *   exec <instance> <i> <token>   step i's callback ran (the fault step is
 *                                 i = 0; its record is written before the
 *                                 fault)
 *   seen <instance> <i> <token>   run() got step i's result from duro_do
 *
 * "seen" is written only after duro_do returned DURO_OK, which the host
 * allows only once the result is committed: an "exec" after a "seen" of
 * the same step is a completed step that ran again.
 *
 * Class "Io" (tests/test_workers.c) runs steps as real ones are: each
 * blocks on I/O (a sleep) as a call to another service would.  Params
 * {"steps": N (2), "hold_ms": M (200), "bytes": B (0), "timeout_s": T
 * (none)}: each step's callback counts itself among the callbacks running
 * at once in its process, holds M ms and returns a string of B bytes
 * (B > 0) or "1"; the output is {"max_running": the most callbacks seen
 * running at once in the process so far, "len": the length of the last
 * step's result as duro_do gave it back}.  With "k": K, each callback
 * appends "enter" and "leave" records (index K, the token the time in
 * microseconds) to $DURO_FAULTS_LOG: flow control's test across hosts
 * reads from them how many of a key ran at once.
 *
 * While a file $DURO_FAULTS_LOG.noinit exists, its init refuses the load.
 *
 * Each run of its constructor and of its init appends a record to
 * $DURO_FAULTS_LOG.loads (a file of its own: the suites read every record
 * of the main log as a step's, a message's or a tick's), so a test can
 * tell which processes loaded the build (tests/test_workers.c):
 *
 *   ctor faults 0 <token>    its constructor ran (dlopen)
 *   init faults 0 <token>    its init ran (the host accepted it)
 *
 * Its queue handler (tests/test_queue_host.c) acks every message of a
 * batch, after one record per message:
 *
 *   msg <id>/<attempts> <n> <token>   the handler got message id on its
 *                                     delivery `attempts`; n is the
 *                                     body's "n"
 *
 * Its scheduled handler (tests/test_cron_host.c) takes TICK_HOLD_MS, so
 * the tick before is still running when the next one comes, after one
 * record per tick:
 *
 *   tick <scheduled_ms> 0 <token>     the handler ran for that tick */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "duro.h"
#include "sidelog.h"

#define LOG_ENV "DURO_FAULTS_LOG"

/* The faults are compiled without sanitizer instrumentation, so in a
 * sanitizer build they still crash the way they do in a plain one (a
 * SIGSEGV, not a sanitizer report) and the stack frames are real ones. */
#if defined(__GNUC__)
#define PLAIN_ __attribute__((noinline, no_sanitize("address", "undefined")))
#else
#define PLAIN_
#endif

typedef struct fault_step {
  const char *instance;
  int index;
  int hold_ms;
  const char *fault;
} fault_step;

static void nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int ordinary_step(duro_attempt *a, void *arg) {
  const fault_step *fs = arg;
  char token[40];
  sidelog_token(token, sizeof token);
  sidelog_append(LOG_ENV, "exec", fs->instance, fs->index, token);
  if (fs->hold_ms > 0)
    nap_ms(fs->hold_ms);
  char json[64];
  snprintf(json, sizeof json, "\"%s\"", token);
  return duro_attempt_result(a, json);
}

/* Both the pointer and the store are volatile: the compiler cannot see
 * the pointer is NULL, and must emit the store (with a plain `int *`,
 * GCC drops it). */
static PLAIN_ void write_null(void) {
  volatile int *volatile p = NULL;
  *p = 1;
}

/* Each frame holds a 4 KiB volatile array and uses it after the call, so
 * the call is not a tail call and the recursion is not folded away.  The
 * unsigned depth wraps only after 2^32 calls: the stack ends long before,
 * but the compiler cannot call the recursion infinite. */
static PLAIN_ unsigned recurse(unsigned depth) {
  volatile char frame[4096];
  frame[0] = (char)depth;
  frame[sizeof frame - 1] = (char)depth;
  if (depth == 0)
    return 0;
  return recurse(depth + 1) + (unsigned char)frame[0] +
         (unsigned char)frame[sizeof frame - 1];
}

/* Takes memory and touches it, 32 MiB every 5 ms, up to 4 GiB, then
 * holds it (sleeping): a leak the limits.memory watch must see. */
/* What run_hog keeps, so the compiler cannot drop it. */
static char *volatile kept_by_run[20];

static void hog(void) {
  static char *held[128];
  for (int i = 0; i < 128; i++) {
    held[i] = malloc(32u << 20);
    if (held[i])
      memset(held[i], i + 1, 32u << 20);
    nap_ms(5);
  }
  for (;;)
    nap_ms(50);
}

/* 640 MiB taken and touched by run() itself, 32 MiB at a time, then
 * kept (never freed): its step that follows holds the worker meanwhile. */
static void run_hog(void) {
  for (int i = 0; i < 20; i++) {
    char *p = malloc(32u << 20);
    if (p)
      memset(p, i + 1, 32u << 20);
    kept_by_run[i] = p;
  }
}

/* 4 GiB populated in one call, then held. */
static void populate(void) {
  void *p = mmap(NULL, (size_t)4 << 30, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  (void)p;
  for (;;)
    nap_ms(50);
}

/* Children until a fork fails (each escapes the worker's session, so
 * only its cgroup holds it): the result names how many. */
static int forks(duro_attempt *a) {
  int n = 0, err = 0;
  for (; n < 256; n++) {
    pid_t pid = fork();
    if (pid < 0) {
      err = errno;
      break;
    }
    if (pid == 0) {
      setsid();
      prctl(PR_SET_NAME, "faults-child");
      nap_ms(60000);
      _exit(0);
    }
  }
  char json[64];
  snprintf(json, sizeof json, "{\"forks\":%d,\"errno\":%d}", n, err);
  return duro_attempt_result(a, json);
}

static int64_t clock_ms(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A second of wall time on a core: the CPU time it got. */
static int burn(duro_attempt *a) {
  int64_t until = clock_ms(CLOCK_MONOTONIC) + 1000;
  while (clock_ms(CLOCK_MONOTONIC) < until)
    ;
  char json[64];
  snprintf(json, sizeof json, "{\"cpu_ms\":%lld}",
           (long long)clock_ms(CLOCK_THREAD_CPUTIME_ID));
  return duro_attempt_result(a, json);
}

/* Writes all of p to fd, waiting for room up to 2 s at a time: 0, or -1
 * when the other side stopped reading or went away. */
static int send_all(int fd, const void *p, size_t len) {
  for (size_t done = 0; done < len;) {
    struct pollfd w = {.fd = fd, .events = POLLOUT};
    if (poll(&w, 1, 2000) <= 0)
      return -1;
    ssize_t k = send(fd, (const char *)p + done, len - done,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0 && errno != EAGAIN && errno != EINTR)
      return -1;
    done += k > 0 ? (size_t)k : 0;
  }
  return 0;
}

/* Six frames of 200 MiB each, header and bytes, onto each socket of the
 * process but descriptor 3 (the worker's control socket) in turn: its
 * channels to the engine.  The next socket when one stops taking them
 * (no one reads it, or the engine refused the frame). */
#define FLOOD_FRAME (200u << 20)
static void flood(void) {
  static char chunk[1 << 20];
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    return;
  int fds[64], n = 0;
  struct dirent *de;
  while ((de = readdir(d)) && n < 64) {
    int fd = atoi(de->d_name);
    struct stat st;
    if (fd > 3 && fd != dirfd(d) && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
      fds[n++] = fd;
  }
  closedir(d);
  for (int i = 0; i < n; i++)
    for (int f = 0; f < 6; f++) {
      /* the length of what follows it, a kind and an activation */
      uint32_t header[4] = {FLOOD_FRAME, 17, 1, 0};
      if (send_all(fds[i], header, sizeof header) != 0)
        break;
      size_t left = FLOOD_FRAME - 12;
      while (left > 0) {
        size_t k = left < sizeof chunk ? left : sizeof chunk;
        if (send_all(fds[i], chunk, k) != 0)
          break;
        left -= k;
      }
      if (left > 0)
        break;
    }
}

static void *crash_later(void *arg) {
  (void)arg;
  nap_ms(20);
  write_null();
  return NULL;
}

static int fault_step_fn(duro_attempt *a, void *arg) {
  const fault_step *fs = arg;
  char token[40];
  sidelog_token(token, sizeof token);
  sidelog_append(LOG_ENV, "exec", fs->instance, 0, token);
  /* A fix deployed: $DURO_FAULTS_LOG.fixed exists. */
  const char *log = getenv(LOG_ENV);
  char fixed[4200];
  if (log &&
      snprintf(fixed, sizeof fixed, "%s.fixed", log) < (int)sizeof fixed &&
      access(fixed, F_OK) == 0)
    return duro_attempt_result(a, "\"fixed\"");
  if (!strcmp(fs->fault, "segv"))
    write_null();
  else if (!strcmp(fs->fault, "once")) {
    if (duro_attempt_number(a) == 1)
      write_null();
    return duro_attempt_result(a, "\"survived\"");
  } else if (!strcmp(fs->fault, "abort"))
    abort();
  else if (!strcmp(fs->fault, "stack"))
    return (int)recurse(1);
  else if (!strcmp(fs->fault, "exit"))
    exit(0);
  else if (!strcmp(fs->fault, "kill"))
    raise(SIGKILL);
  else if (!strcmp(fs->fault, "hang"))
    for (;;)
      nap_ms(50);
  else if (!strcmp(fs->fault, "spin"))
    for (volatile uint64_t n = 0;; n++)
      ;
  else if (!strcmp(fs->fault, "hog"))
    hog();
  else if (!strcmp(fs->fault, "flood"))
    flood();
  else if (!strcmp(fs->fault, "populate"))
    populate();
  else if (!strcmp(fs->fault, "forks"))
    return forks(a);
  else if (!strcmp(fs->fault, "burn"))
    return burn(a);
  else if (!strcmp(fs->fault, "killgroup")) {
    kill(0, SIGTERM);
    nap_ms(1000);
  } else if (!strcmp(fs->fault, "fork")) {
    if (fork() == 0) {
      nap_ms(60000);
      _exit(0);
    }
    write_null();
  } else if (!strcmp(fs->fault, "thread")) {
    pthread_t t;
    if (pthread_create(&t, NULL, crash_later, NULL) == 0)
      pthread_detach(t);
    nap_ms(1000);
    return duro_attempt_result(a, "\"survived\"");
  } else if (!strcmp(fs->fault, "regress"))
#ifdef FAULTS_REGRESSED
    write_null();
#else
    return duro_attempt_result(a, "\"fine\"");
#endif
  return duro_attempt_fail_final(a, "unknown fault \"%s\"", fs->fault);
}

/* The value of "key" in a flat JSON object: a number (as text) or a
 * string (without its quotes), copied into out; NULL when absent. */
static const char *param(const char *params, const char *key, char *out,
                         size_t len) {
  char quoted[32];
  snprintf(quoted, sizeof quoted, "\"%s\"", key);
  const char *p = strstr(params, quoted);
  if (!p)
    return NULL;
  p += strlen(quoted);
  p += strspn(p, " \t\r\n");
  if (*p++ != ':')
    return NULL;
  p += strspn(p, " \t\r\n");
  size_t n = *p == '"' ? strcspn(++p, "\"") : strcspn(p, ",} \t\r\n");
  snprintf(out, len, "%.*s", (int)n, p);
  return out;
}

static int int_param(const char *params, const char *key, int fallback) {
  char buf[32];
  return param(params, key, buf, sizeof buf) ? atoi(buf) : fallback;
}

static duro_rc do_ordinary(duro_step *step, const duro_event *ev, int index,
                           int hold_ms) {
  fault_step fs = {
      .instance = ev->instance_id, .index = index, .hold_ms = hold_ms};
  const char *result;
  DURO_TRY(duro_do(step, "step", NULL, ordinary_step, &fs, &result));
  sidelog_seen(LOG_ENV, ev->instance_id, index, result);
  return DURO_OK;
}

static duro_rc fault_flow(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  (void)env;
  char fault[16];
  if (!param(ev->params, "fault", fault, sizeof fault))
    snprintf(fault, sizeof fault, "none");
  int n = int_param(ev->params, "steps", 3);
  int hold_ms = int_param(ev->params, "hold_ms", 0);
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%d seconds",
           int_param(ev->params, "timeout_s", 1));
  char in_run[16] = "";
  if (param(ev->params, "in_run", in_run, sizeof in_run) &&
      !strcmp(in_run, "kill"))
    raise(SIGKILL);
  if (!strcmp(in_run, "hog"))
    run_hog();

  for (int i = 1; i <= n; i++) {
    DURO_TRY(do_ordinary(step, ev, i, hold_ms));
    if (i == 1 && strcmp(fault, "none") != 0) {
      /* After a completed step, so the test sees that one never runs
       * again; the timeout matters only to "hang". */
      duro_retries retries = {
          .limit = 10, .delay = "100", .backoff = DURO_BACKOFF_CONSTANT};
      duro_step_config cfg = {.retries = &retries,
                              .timeout =
                                  !strcmp(fault, "hang") ? timeout : NULL};
      fault_step fs = {.instance = ev->instance_id, .fault = fault};
      const char *result;
      DURO_TRY(duro_do(step, "fault", &cfg, fault_step_fn, &fs, &result));
    }
  }
  char out[64];
  snprintf(out, sizeof out, "{\"steps\":%d}", n);
  return duro_set_output(step, out);
}

/* Class "Sender": one step that sends {"instance": ID} to the queue bound
 * to SENT from inside its callback (a transactional send: committed with
 * the step's result), holding hold_ms before and after the send so a
 * kill can land inside the attempt; "exec <instance> 1" records each
 * attempt that ran. */
typedef struct send_step {
  const char *instance;
  int hold_ms;
  duro_queue *q;
} send_step;

static int send_step_fn(duro_attempt *a, void *arg) {
  const send_step *ss = arg;
  char token[40], body[160];
  sidelog_token(token, sizeof token);
  sidelog_append(LOG_ENV, "exec", ss->instance, 1, token);
  nap_ms(ss->hold_ms);
  snprintf(body, sizeof body, "{\"instance\":\"%s\"}", ss->instance);
  if (duro_queue_send(ss->q, body, 0) != 0)
    return duro_attempt_fail(a, "the send was refused");
  nap_ms(ss->hold_ms);
  return duro_attempt_result(a, "1");
}

static duro_rc send_flow(duro_step *step, const duro_event *ev, duro_env *env) {
  send_step ss = {.instance = ev->instance_id,
                  .hold_ms = int_param(ev->params, "hold_ms", 0),
                  .q = duro_env_queue(env, "SENT")};
  if (!ss.q)
    return duro_set_output(step, "\"no SENT binding\"");
  DURO_TRY(duro_do(step, "send", NULL, send_step_fn, &ss, NULL));
  return duro_set_output(step, "\"sent\"");
}

typedef struct io_step {
  int hold_ms;
  int bytes;
  const char *instance;
  int key; /* its params' "k", or -1 */
} io_step;

/* "enter"/"leave" INSTANCE KEY MICROSECONDS (CLOCK_REALTIME): when a
 * callback of flow key `key` began and ended, for a test of flow
 * control across hosts (tests/test_pg_hosts.c). */
static void io_mark(const io_step *is, const char *kind) {
  if (is->key < 0)
    return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char us[32];
  snprintf(us, sizeof us, "%lld",
           (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
  sidelog_append(LOG_ENV, kind, is->instance, is->key, us);
}

static int io_running, io_max_running; /* atomics, process-wide */

static int io_step_fn(duro_attempt *a, void *arg) {
  const io_step *is = arg;
  int now = __atomic_add_fetch(&io_running, 1, __ATOMIC_ACQ_REL);
  int max = __atomic_load_n(&io_max_running, __ATOMIC_ACQUIRE);
  while (now > max &&
         !__atomic_compare_exchange_n(&io_max_running, &max, now, 0,
                                      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    ;
  io_mark(is, "enter");
  if (is->hold_ms > 0) /* nanosleep(0) still takes the timer's slack */
    nap_ms(is->hold_ms);
  io_mark(is, "leave");
  __atomic_sub_fetch(&io_running, 1, __ATOMIC_ACQ_REL);
  if (is->bytes <= 0)
    return duro_attempt_result(a, "1");
  char *json = malloc((size_t)is->bytes + 3);
  if (!json)
    return duro_attempt_fail(a, "no memory for %d bytes", is->bytes);
  json[0] = '"';
  memset(json + 1, 'x', (size_t)is->bytes);
  json[is->bytes + 1] = '"';
  json[is->bytes + 2] = '\0';
  int rc = duro_attempt_result(a, json);
  free(json);
  return rc;
}

static duro_rc io_flow(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  io_step is = {.hold_ms = int_param(ev->params, "hold_ms", 200),
                .bytes = int_param(ev->params, "bytes", 0),
                .instance = ev->instance_id,
                .key = int_param(ev->params, "k", -1)};
  int n = int_param(ev->params, "steps", 2);
  int timeout_s = int_param(ev->params, "timeout_s", 0);
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%d seconds", timeout_s);
  duro_retries once = {.limit = 0};
  duro_step_config cfg = {.retries = &once, .timeout = timeout};
  const char *result = NULL;
  for (int i = 1; i <= n; i++)
    DURO_TRY(duro_do(step, "io", timeout_s > 0 ? &cfg : NULL, io_step_fn, &is,
                     &result));
  char out[96];
  snprintf(out, sizeof out, "{\"max_running\":%d,\"len\":%zu}",
           __atomic_load_n(&io_max_running, __ATOMIC_ACQUIRE),
           result ? strlen(result) : 0);
  return duro_set_output(step, out);
}

/* Class "Answer" (tests/test_workers.c): waits for the first event of
 * type "approve" or "reject" until an hour after its creation
 * (duro_wait_any); its output is the event, or "timedOut".  With
 * {"bad": 1}, it passes no types, and its output is the error. */
static duro_rc answer_flow(duro_step *step, const duro_event *ev,
                           duro_env *env) {
  (void)env;
  static const char *const types[] = {"approve", "reject"};
  int bad = int_param(ev->params, "bad", 0);
  const char *event = NULL;
  duro_rc rc = duro_wait_any(step, "answer", bad ? NULL : types, 2,
                             ev->created_ms + 3600000, &event);
  if (rc == DURO_ERROR)
    return duro_set_output(step, duro_error_is(step, DURO_ERR_TIMEOUT)
                                     ? "\"timedOut\""
                                     : duro_step_error(step));
  DURO_TRY(rc);
  return duro_set_output(step, event);
}

/* Class "Fan" (tests/test_workers.c): starts n children (at most 64) of
 * the workflow bound to KID with {"steps":1,"hold_ms":hold_ms}, then
 * waits for each; its output is how many completed. */
static duro_rc fan_flow(duro_step *step, const duro_event *ev, duro_env *env) {
  duro_workflow *kid = duro_env_workflow(env, "KID");
  int n = int_param(ev->params, "n", 3);
  n = n < 0 ? 0 : n > 64 ? 64 : n;
  char params[64];
  snprintf(params, sizeof params, "{\"steps\":1,\"hold_ms\":%d}",
           int_param(ev->params, "hold_ms", 50));
  const char *ids[64];
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "kid %d", i);
    DURO_TRY(duro_child_start(step, name, kid, NULL, params,
                              DURO_PARENT_CLOSE_TERMINATE, &ids[i]));
  }
  int done = 0;
  for (int i = 0; i < n; i++) {
    const char *out;
    DURO_TRY(duro_child_wait(step, "kid done", kid, ids[i], &out));
    done++;
  }
  char out[32];
  snprintf(out, sizeof out, "{\"children\":%d}", done);
  return duro_set_output(step, out);
}

/* Class "Par" (tests/test_workers.c): one duro_do_all of n branches
 * (at most 64), max_in_flight "max" (0: the workflow's), flags "flags".
 * Params {"n": N (4), "max": M (0), "flags": F (0), "meet": K (0),
 * "hold_ms": H (0), "segv": S (-1), "fail": X (-1)}: each branch records
 * "exec <instance> <i>" as its callback begins, counts itself among the
 * branches running at once in the process, then, with K > 0, waits (20 s
 * at most) until K branches have begun since the process started (so
 * only branches that run side by side get past it at once), holds H ms
 * and returns its index; branch S crashes its worker (SIGSEGV) on its
 * first attempt, branch X fails for good.  Its output is {"results": the
 * branches' results in call order (null for none), "max_running": the
 * most seen at once, "rc": duro_do_all's}. */
typedef struct par_branch {
  const char *instance;
  int index, meet, hold_ms, segv, fail;
} par_branch;

static int par_running, par_max_running, par_begun; /* atomics */

static int par_step_fn(duro_attempt *a, void *arg) {
  const par_branch *pb = arg;
  char token[40];
  sidelog_token(token, sizeof token);
  sidelog_append(LOG_ENV, "exec", pb->instance, pb->index, token);
  if (pb->index == pb->segv && duro_attempt_number(a) == 1)
    write_null();
  if (pb->index == pb->fail)
    return duro_attempt_fail_final(a, "branch %d fails", pb->index);
  int now = __atomic_add_fetch(&par_running, 1, __ATOMIC_ACQ_REL);
  int max = __atomic_load_n(&par_max_running, __ATOMIC_ACQUIRE);
  while (now > max &&
         !__atomic_compare_exchange_n(&par_max_running, &max, now, 0,
                                      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    ;
  int begun = __atomic_add_fetch(&par_begun, 1, __ATOMIC_ACQ_REL);
  for (int waited = 0; begun < pb->meet && waited < 20000; waited += 5) {
    nap_ms(5);
    begun = __atomic_load_n(&par_begun, __ATOMIC_ACQUIRE);
  }
  if (pb->hold_ms > 0)
    nap_ms(pb->hold_ms);
  __atomic_sub_fetch(&par_running, 1, __ATOMIC_ACQ_REL);
  char json[32];
  snprintf(json, sizeof json, "%d", pb->index);
  return duro_attempt_result(a, json);
}

static duro_rc par_flow(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int n = int_param(ev->params, "n", 4);
  n = n < 1 ? 1 : n > 64 ? 64 : n;
  par_branch pb[64];
  duro_branch b[64];
  duro_retries quick = {.limit = 3, .delay = "100"};
  duro_step_config cfg = {.retries = &quick};
  for (int i = 0; i < n; i++) {
    pb[i] = (par_branch){.instance = ev->instance_id,
                         .index = i,
                         .meet = int_param(ev->params, "meet", 0),
                         .hold_ms = int_param(ev->params, "hold_ms", 0),
                         .segv = int_param(ev->params, "segv", -1),
                         .fail = int_param(ev->params, "fail", -1)};
    b[i] = (duro_branch){.fn = par_step_fn, .arg = &pb[i], .cfg = &cfg};
  }
  duro_rc rc = duro_do_all(step, "par", b, (size_t)n,
                           (uint32_t)int_param(ev->params, "max", 0),
                           (uint32_t)int_param(ev->params, "flags", 0));
  if (rc == DURO_SUSPEND)
    return rc;
  char out[1024];
  size_t len = (size_t)snprintf(out, sizeof out, "{\"results\":[");
  for (int i = 0; i < n; i++) {
    len += (size_t)snprintf(out + len, sizeof out - len, "%s%s", i ? "," : "",
                            b[i].result ? b[i].result : "null");
  }
  snprintf(out + len, sizeof out - len, "],\"max_running\":%d,\"rc\":%d}",
           __atomic_load_n(&par_max_running, __ATOMIC_ACQUIRE), (int)rc);
  return duro_set_output(step, out);
}

/* Class "Saga" (tests/test_workers.c): n steps (at most 4; params "n",
 * 3) each with a rollback, then a step that fails for good: the instance
 * errors once the rollbacks ran, newest first.  Each step's callback
 * records "exec <instance> <i>", each rollback's "undo <instance> <i>"
 * once it checked it was handed its step's output. */
static int saga_step(duro_attempt *a, void *arg) {
  const fault_step *fs = arg;
  char token[40], json[32];
  sidelog_token(token, sizeof token);
  sidelog_append(LOG_ENV, "exec", fs->instance, fs->index, token);
  snprintf(json, sizeof json, "{\"made\":%d}", fs->index);
  return duro_attempt_result(a, json);
}

static int saga_undo(duro_attempt *a, const char *output, void *arg) {
  int i = (int)(intptr_t)arg;
  int64_t made = -1;
  duro_json_integer(output, "/made", &made);
  if (made != i)
    return duro_attempt_fail_final(a, "undo %d handed %s", i, output);
  /* the instance's id is its key's first part: "<id>/s#<k>/rollback" */
  char inst[32], token[40];
  snprintf(inst, sizeof inst, "%s", duro_attempt_idempotency_key(a));
  char *slash = strchr(inst, '/');
  if (slash)
    *slash = '\0';
  sidelog_token(token, sizeof token);
  sidelog_append(LOG_ENV, "undo", inst, i, token);
  return duro_attempt_result(a, "true");
}

static int saga_broken(duro_attempt *a, void *arg) {
  (void)arg;
  return duro_attempt_fail_final(a, "out of stock");
}

/* Rule 7: a rollback's argument outlives run(): constant data. */
static const duro_rollback_cfg saga_undos[] = {
    {.fn = saga_undo, .arg = (void *)(intptr_t)0},
    {.fn = saga_undo, .arg = (void *)(intptr_t)1},
    {.fn = saga_undo, .arg = (void *)(intptr_t)2},
    {.fn = saga_undo, .arg = (void *)(intptr_t)3}};

static duro_rc saga_flow(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)env;
  int n = int_param(ev->params, "n", 3);
  n = n < 0 ? 0 : n > 4 ? 4 : n;
  fault_step fs[4];
  for (int i = 0; i < n; i++) {
    fs[i] = (fault_step){.instance = ev->instance_id, .index = i};
    DURO_TRY(duro_do_with_rollback(step, "s", NULL, saga_step, &fs[i],
                                   &saga_undos[i], NULL));
  }
  return duro_do(step, "fail", NULL, saga_broken, NULL, NULL);
}

static const duro_workflow_def workflows[] = {
    {"Fault", fault_flow},   {"Sender", send_flow}, {"Io", io_flow},
    {"Answer", answer_flow}, {"Fan", fan_flow},     {"Par", par_flow},
    {"Saga", saga_flow}};

static int on_queue(duro_message_batch *b, duro_env *env) {
  (void)env;
  char token[48], what[40];
  sidelog_token(token, sizeof token);
  for (size_t i = 0; i < duro_batch_size(b); i++) {
    const duro_message *m = duro_batch_message(b, i);
    snprintf(what, sizeof what, "%lld/%u", (long long)m->id, m->attempts);
    sidelog_append("DURO_FAULTS_LOG", "msg", what, int_param(m->body, "n", -1),
                   token);
  }
  return 0; /* every message acked */
}

#define TICK_HOLD_MS 300

static int on_tick(const duro_scheduled_event *ev, duro_env *env) {
  (void)env;
  char token[48], tick[24];
  sidelog_token(token, sizeof token);
  snprintf(tick, sizeof tick, "%lld", (long long)ev->scheduled_ms);
  sidelog_append(LOG_ENV, "tick", tick, 0, token);
  struct timespec hold = {0, TICK_HOLD_MS * 1000000L};
  nanosleep(&hold, NULL);
  return 0;
}

/* A `kind` record of this process's load in $DURO_FAULTS_LOG.loads. */
static void note_load(const char *kind) {
  const char *log = getenv(LOG_ENV);
  char path[512], token[48];
  if (!log)
    return;
  snprintf(path, sizeof path, "%s.loads", log);
  sidelog_token(token, sizeof token);
  sidelog_append_to(path, kind, "faults", 0, token);
}

__attribute__((constructor)) static void on_load(void) { note_load("ctor"); }

/* Refuses the load while $DURO_FAULTS_LOG.noinit exists: a build whose
 * init fails in a new worker process (a dependency gone, a full disk),
 * though it loaded where it was checked (tests/test_workers.c). */
static int on_init(void) {
  const char *log = getenv(LOG_ENV);
  char path[512];
  if (!log)
    return 0;
  note_load("init");
  snprintf(path, sizeof path, "%s.noinit", log);
  return access(path, F_OK) == 0 ? -1 : 0;
}

DURO_PLUGIN(.name = "faults", .version = "1", DURO_WORKFLOWS(workflows),
            .queue = on_queue, .scheduled = on_tick, .init = on_init);
