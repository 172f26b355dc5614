/* kit_crash.c — duro_test_crash_everywhere: a workflow run to its end
 * once without a crash (the reference), then, for each boundary that run
 * passed, in a process killed there and one that recovers from the
 * journal it left.
 *
 * The processes are forks of the test's, so they share what the test
 * registered (workflows, mocks); the test's own engine is closed while
 * they run (a fork of a process with an engine's threads would inherit
 * their locks mid-use).  They report through one file per run, a line a
 * fact, appended with single writes:
 *   S <instance>\t<kind>:<name>\t...  an activation's calls (reference)
 *   B <n>\t<where>                    boundary n (reference)
 *   K <instance>\t<key>\t<ms>         an attempt began then (reference)
 *   T <ms>                            the virtual time of the crash
 *   R <instance>\t<key>\t<result>     a callback returned this result
 *   C <instance>\t<key>               a step's completion was journaled
 * (an instance as "workflow/id")
 *   X <message>                       a check failed (the process ends)
 *   E <status>\t<output>              the instance ended so */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kit_internal.h"
#include "status.h"
#include "util.h"

/* The reference run's longest activation of an instance: the calls run()
 * made up to its end, which every replay must repeat in order. */
typedef struct kit_reference {
  char *instance; /* workflow "/" id */
  char **calls;   /* "kind:name" */
  size_t n;
} kit_reference;

static struct {
  int log_fd;
  int reference; /* this process runs the reference */
  size_t boundary, crash_at;
  kit_reference *refs;
  size_t n_refs;
  char **completed; /* "instance\tkey" journaled complete before the crash */
  size_t n_completed;
  /* when the reference's last attempt of each step began: the time a
   * step's callback reads in the crash runs ("instance\tkey\tms") */
  char **began;
  size_t n_began;
} run = {.log_fd = -1};

/* One line, tabs and newlines inside a field made spaces by the caller. */
static void put(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void put(const char *fmt, ...) {
  char line[8192];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n > sizeof line - 2)
    n = sizeof line - 2;
  line[n++] = '\n';
  if (write(run.log_fd, line, (size_t)n) < 0)
    _exit(4);
}

/* s with its tabs and newlines made spaces (a copy). */
static char *flat(const char *s) {
  char *f = xstrdup(s ? s : "");
  for (char *p = f; *p; p++)
    if (*p == '\t' || *p == '\n' || *p == '\r')
      *p = ' ';
  return f;
}

static void violation(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char *f = flat(msg);
  put("X %s", f);
  free(f);
  _exit(3);
}

void kit_boundary(duro_test *t, const char *fmt, ...) {
  if (!t->crash.active || (!run.reference && !run.crash_at))
    return;
  run.boundary++;
  if (run.reference) {
    char where[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(where, sizeof where, fmt, ap);
    va_end(ap);
    char *f = flat(where);
    put("B %zu\t%s", run.boundary, f);
    free(f);
  } else if (run.boundary == run.crash_at) {
    put("T %lld", (long long)duro_test_now_ms(t));
    _exit(99); /* all in memory is lost, as with kill -9 */
  }
}

static kit_reference *reference_of(const char *workflow, const char *id) {
  size_t lw = strlen(workflow);
  for (size_t i = 0; i < run.n_refs; i++) {
    const char *in = run.refs[i].instance;
    if (!strncmp(in, workflow, lw) && in[lw] == '/' && !strcmp(in + lw + 1, id))
      return &run.refs[i];
  }
  return NULL;
}

/* How many keys a call of `kind` takes: a do_all's branches one each
 * ("do_all*3"), any other call one. */
static uint32_t keys_of(const char *kind) {
  const char *star = strchr(kind, '*');
  return star ? (uint32_t)strtoul(star + 1, NULL, 10) : 1;
}

/* The first key of the reference's call k ("name#count": the name's
 * keys before it, plus one), into out. */
static void reference_key(const kit_reference *r, size_t k, char *out,
                          size_t len) {
  const char *name = strchr(r->calls[k], ':') + 1;
  uint32_t count = 1;
  for (size_t i = 0; i < k; i++) {
    const char *n = strchr(r->calls[i], ':') + 1;
    if (!strcmp(n, name)) {
      char kind[16];
      snprintf(kind, sizeof kind, "%.*s", (int)(n - 1 - r->calls[i]),
               r->calls[i]);
      count += keys_of(kind);
    }
  }
  snprintf(out, len, "%s#%u", name, count);
}

/* The same for this activation's call k. */
static void activation_key(const kit_activation *a, size_t k, char *out,
                           size_t len) {
  uint32_t count = 1;
  for (size_t i = 0; i < k; i++)
    if (!strcmp(a->calls[i].name, a->calls[k].name))
      count += keys_of(a->calls[i].kind);
  snprintf(out, len, "%s#%u", a->calls[k].name, count);
}

void kit_crash_call(duro_test *t, kit_activation *a, const char *kind,
                    const char *name) {
  (void)t;
  if (run.reference)
    return;
  const kit_reference *r = reference_of(a->workflow, a->id);
  if (!r)
    return; /* an instance the reference did not have (a child's new id) */
  size_t k = a->n_calls - 1;
  char got[300], want[300];
  activation_key(a, k, got, sizeof got);
  if (k >= r->n)
    violation("run() of %s/%s made a call the first run never made: its "
              "call %zu asks for step %s (%s), after the first run's last "
              "(%zu calls): run() depends on something outside its params "
              "and step results (the clock, randomness, a global)",
              a->workflow, a->id, k + 1, got, kind, r->n);
  const char *ref = r->calls[k];
  size_t lk = strlen(kind);
  char *flat_name = flat(name);
  int same = !strncmp(ref, kind, lk) && ref[lk] == ':' &&
             !strcmp(ref + lk + 1, flat_name);
  free(flat_name);
  if (!same) {
    reference_key(r, k, want, sizeof want);
    violation("run() of %s/%s diverged on replay: its call %zu asked for "
              "step %s (%.*s) in the first run and asks for %s (%s) now: a "
              "step name or a branch depends on something outside its "
              "params and step results (the clock, randomness, a global)",
              a->workflow, a->id, k + 1, want, (int)(strchr(ref, ':') - ref),
              ref, got, kind);
  }
}

void kit_crash_activation_end(duro_test *t, const kit_activation *a) {
  (void)t;
  if (!run.reference)
    return;
  size_t len = 64, used;
  for (size_t i = 0; i < a->n_calls; i++)
    len += strlen(a->calls[i].kind) + strlen(a->calls[i].name) + 2;
  char *line = xmalloc(len + strlen(a->workflow) + strlen(a->id));
  used = (size_t)sprintf(line, "S %s/%s", a->workflow, a->id);
  for (size_t i = 0; i < a->n_calls; i++) {
    char *n = flat(a->calls[i].name);
    used += (size_t)sprintf(line + used, "\t%s:%s", a->calls[i].kind, n);
    free(n);
  }
  put("%s", line);
  free(line);
}

static int was_completed(const char *instance, const char *key) {
  for (size_t i = 0; i < run.n_completed; i++) {
    const char *c = run.completed[i];
    size_t lw = strlen(instance);
    if (!strncmp(c, instance, lw) && c[lw] == '\t' && !strcmp(c + lw + 1, key))
      return 1;
  }
  return 0;
}

/* When the reference's last attempt of the step began, or -1. */
static int64_t began_at(const char *instance, const char *key) {
  size_t lw = strlen(instance), lk = strlen(key);
  for (size_t i = run.n_began; i-- > 0;) {
    const char *b = run.began[i];
    if (!strncmp(b, instance, lw) && b[lw] == '\t' &&
        !strncmp(b + lw + 1, key, lk) && b[lw + 1 + lk] == '\t')
      return strtoll(b + lw + 2 + lk, NULL, 10);
  }
  return -1;
}

int64_t kit_crash_attempt(duro_test *t, const char *instance, const char *key) {
  if (run.reference)
    put("K %s\t%s\t%lld", instance, key, (long long)duro_test_now_ms(t));
  else if (was_completed(instance, key))
    violation("step %s of %s ran again after its completion was journaled", key,
              instance);
  kit_boundary(t, "before an attempt of %s", key);
  return run.reference ? -1 : began_at(instance, key);
}

void kit_crash_returned(duro_test *t, const char *instance, const char *key,
                        const char *result) {
  if (!run.reference) {
    char *r = flat(result ? result : "null");
    put("R %s\t%s\t%s", instance, key, r);
    free(r);
  }
  kit_boundary(t, "after %s's callback returned, before its commit", key);
}

void kit_crash_completed(duro_test *t, const char *instance, const char *key) {
  if (!run.reference)
    put("C %s\t%s", instance, key);
  kit_boundary(t, "after the commit of %s", key);
}

/* ---- the runs ---- */

#define KIT_CRASH_ID "crash-everywhere"

/* In a forked process: opens the engine on db, runs the instance to its
 * end (creating it first when `create`), says how it ended, and exits. */
static void run_child(duro_test *t, const char *db, const char *workflow,
                      const char *params, const char *const *events,
                      int create) {
  snprintf(t->db, sizeof t->db, "%s", db);
  t->crash.active = 1;
  if (kit_engine_open(t) != 0)
    violation("the engine did not open: %s", t->err);
  if (create) {
    if (duro_test_create(t, workflow, KIT_CRASH_ID, params) != 0)
      violation("%s", t->err);
    for (size_t i = 0; events && events[i] && events[i + 1]; i += 2)
      if (duro_test_send_event(t, workflow, KIT_CRASH_ID, events[i],
                               events[i + 1]) != 0)
        violation("%s", t->err);
  }
  if (kit_run_to_end(t, workflow, KIT_CRASH_ID, 3650LL * 24 * 3600 * 1000) != 0)
    violation("%s", t->err);
  const char *status = duro_test_status(t, workflow, KIT_CRASH_ID);
  char *out = flat(duro_test_output(t, workflow, KIT_CRASH_ID));
  put("E %s\t%s", status ? status : "?", out);
  free(out);
  _exit(0);
}

/* Forks fn's process and waits for it: its exit status (99: crashed at
 * its boundary, 3: a check failed), or -1 when it died otherwise. */
static int in_child(duro_test *t, const char *log, const char *db,
                    const char *workflow, const char *params,
                    const char *const *events, int create,
                    int64_t clock_shift_s, int64_t start_ms) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    run.log_fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (run.log_fd < 0)
      _exit(4);
    if (clock_shift_s) {
      kit_clock_shift(clock_shift_s);
      srand((unsigned)getpid());
      srandom((unsigned)getpid() * 2654435761u);
    }
    int64_t now = duro_test_now_ms(t);
    if (start_ms > now)
      duro_clock_advance(&t->clock, start_ms - now);
    run_child(t, db, workflow, params, events, create);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR)
      return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A run's file, read whole into lines (NULL-terminated; free with
 * free_lines). */
static char **read_lines(const char *path) {
  FILE *f = fopen(path, "re");
  char **lines = xcalloc(1, sizeof *lines);
  size_t n = 0;
  if (!f)
    return lines;
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) > 0) {
    if (line[len - 1] == '\n')
      line[len - 1] = '\0';
    lines = xrealloc(lines, (n + 2) * sizeof *lines);
    lines[n++] = xstrdup(line);
    lines[n] = NULL;
  }
  free(line);
  fclose(f);
  return lines;
}

static void free_lines(char **lines) {
  for (size_t i = 0; lines[i]; i++)
    free(lines[i]);
  free(lines);
}

/* The reference's longest activation of each instance, from its S lines. */
static void take_references(char **lines) {
  for (size_t i = 0; lines[i]; i++) {
    if (strncmp(lines[i], "S ", 2))
      continue;
    char *rest = lines[i] + 2, *tab = strchr(rest, '\t');
    size_t n = 0;
    for (char *p = rest; (p = strchr(p, '\t')); p++)
      n++;
    char *instance = tab ? xstrndup(rest, (size_t)(tab - rest)) : xstrdup(rest);
    kit_reference *r = NULL;
    for (size_t k = 0; k < run.n_refs && !r; k++)
      if (!strcmp(run.refs[k].instance, instance))
        r = &run.refs[k];
    if (r && r->n >= n) {
      free(instance);
      continue;
    }
    if (!r) {
      run.refs = xrealloc(run.refs, (run.n_refs + 1) * sizeof *run.refs);
      r = &run.refs[run.n_refs++];
      *r = (kit_reference){.instance = instance};
    } else {
      free(instance);
      for (size_t k = 0; k < r->n; k++)
        free(r->calls[k]);
      free(r->calls);
    }
    r->calls = xcalloc(n ? n : 1, sizeof *r->calls);
    r->n = 0;
    for (char *p = tab; p;) {
      char *next = strchr(p + 1, '\t');
      r->calls[r->n++] =
          next ? xstrndup(p + 1, (size_t)(next - p - 1)) : xstrdup(p + 1);
      p = next;
    }
  }
}

static void forget_run(void) {
  for (size_t i = 0; i < run.n_refs; i++) {
    free(run.refs[i].instance);
    for (size_t k = 0; k < run.refs[i].n; k++)
      free(run.refs[i].calls[k]);
    free(run.refs[i].calls);
  }
  free(run.refs);
  for (size_t i = 0; i < run.n_completed; i++)
    free(run.completed[i]);
  free(run.completed);
  for (size_t i = 0; i < run.n_began; i++)
    free(run.began[i]);
  free(run.began);
  run.began = NULL;
  run.n_began = 0;
  run.refs = NULL;
  run.completed = NULL;
  run.n_refs = run.n_completed = 0;
  run.reference = 0;
  run.boundary = run.crash_at = 0;
}

/* The line of `lines` that starts with `prefix`, past it; NULL if none. */
static const char *line_of(char **lines, const char *prefix) {
  size_t lp = strlen(prefix);
  for (size_t i = 0; lines[i]; i++)
    if (!strncmp(lines[i], prefix, lp))
      return lines[i] + lp;
  return NULL;
}

static void remove_db(const char *db) {
  char path[400];
  const char *suffix[] = {"", "-wal", "-shm"};
  for (size_t i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s%s", db, suffix[i]);
    unlink(path);
  }
}

/* Checks what boundary b's two processes said: 0, or fills r. */
static int judge(char **lines, int crashed, int recovered, const char *ending,
                 size_t b, const char *where, duro_test_crash_report *r) {
  r->boundary = b;
  snprintf(r->where, sizeof r->where, "%s", where ? where : "?");
  const char *x = line_of(lines, "X ");
  if (x) {
    snprintf(r->message, sizeof r->message, "%s", x);
    return -1;
  }
  if (crashed != 99) {
    snprintf(r->message, sizeof r->message,
             crashed == 0 ? "the run ended before reaching this boundary, "
                            "which the first run passed: run() took another "
                            "path"
                          : "the process that was to crash here died first "
                            "(exit %d)",
             crashed);
    return -1;
  }
  if (recovered != 0) {
    snprintf(r->message, sizeof r->message,
             "the recovering process died (exit %d)", recovered);
    return -1;
  }
  /* a callback run again after a crash before its commit */
  for (size_t i = 0; lines[i]; i++) {
    if (strncmp(lines[i], "R ", 2))
      continue;
    const char *a = lines[i] + 2, *ra = strrchr(a, '\t');
    for (size_t k = i + 1; lines[k]; k++) {
      const char *c = lines[k] + 2, *rc = strrchr(c, '\t');
      if (strncmp(lines[k], "R ", 2) || ra - a != rc - c ||
          strncmp(a, c, (size_t)(ra - a)))
        continue;
      if (strcmp(ra, rc)) {
        char *key = xstrndup(a, (size_t)(ra - a));
        *strchr(key, '\t') = ' ';
        snprintf(r->message, sizeof r->message,
                 "step %s returned %s, and %s when it ran again after the "
                 "crash: its effect is not idempotent (pass "
                 "duro_attempt_idempotency_key() to what it calls, or mock "
                 "a step whose result may differ)",
                 key, ra + 1, rc + 1);
        free(key);
        return -1;
      }
    }
  }
  const char *end = line_of(lines, "E ");
  if (!end || strcmp(end, ending)) {
    snprintf(r->message, sizeof r->message,
             "the instance ended \"%s\" (status, output) after the crash, "
             "\"%s\" without one",
             end ? end : "(nothing)", ending);
    return -1;
  }
  return 0;
}

int duro_test_crash_everywhere(duro_test *t, const char *workflow,
                               const char *params, const char *const *events,
                               size_t *n_boundaries,
                               duro_test_crash_report *report) {
  duro_test_crash_report scratch;
  duro_test_crash_report *r = report ? report : &scratch;
  memset(r, 0, sizeof *r);
  if (n_boundaries)
    *n_boundaries = 0;
  int was_started = t->started;
  char saved_db[sizeof t->db];
  snprintf(saved_db, sizeof saved_db, "%s", t->db);
  kit_engine_close(t);

  char dir[300], log[360], db[360];
  snprintf(dir, sizeof dir, "%s/crash", t->dir);
  mkdir(dir, 0700);
  snprintf(log, sizeof log, "%s/reference.log", dir);
  snprintf(db, sizeof db, "%s/reference.db", dir);
  unlink(log);
  remove_db(db);
  int64_t start = duro_test_now_ms(t);

  run.reference = 1;
  int rc = in_child(t, log, db, workflow, params, events, 1, 0, 0);
  run.reference = 0;
  char **ref = read_lines(log);
  int result = 0;
  const char *ending = line_of(ref, "E ");
  if (rc != 0 || !ending) {
    const char *x = line_of(ref, "X ");
    snprintf(r->where, sizeof r->where, "the first run, without a crash");
    snprintf(r->message, sizeof r->message, "%s",
             x ? x : "it did not end (its process died)");
    result = DURO_ERROR;
  } else if (strncmp(ending, "complete\t", 9) &&
             strncmp(ending, "errored\t", 8) &&
             strncmp(ending, "terminated\t", 11)) {
    snprintf(r->where, sizeof r->where, "the first run, without a crash");
    snprintf(r->message, sizeof r->message, "it did not end: %s", ending);
    result = DURO_ERROR;
  }
  size_t n = 0;
  for (size_t i = 0; ref[i]; i++) {
    n += !strncmp(ref[i], "B ", 2);
    if (!strncmp(ref[i], "K ", 2)) {
      run.began = xrealloc(run.began, (run.n_began + 1) * sizeof *run.began);
      run.began[run.n_began++] = xstrdup(ref[i] + 2);
    }
  }
  take_references(ref);

  for (size_t b = 1; result == 0 && b <= n; b++) {
    char key[32];
    snprintf(key, sizeof key, "B %zu\t", b);
    const char *where = line_of(ref, key);
    snprintf(log, sizeof log, "%s/boundary-%zu.log", dir, b);
    snprintf(db, sizeof db, "%s/boundary-%zu.db", dir, b);
    unlink(log);
    remove_db(db);
    run.crash_at = b;
    int crashed = in_child(t, log, db, workflow, params, events, 1, 0, 0);
    run.crash_at = 0;
    char **lines = read_lines(log);
    const char *tl = line_of(lines, "T ");
    int64_t crash_ms = tl ? strtoll(tl, NULL, 10) : start;
    for (size_t i = 0; lines[i]; i++)
      if (!strncmp(lines[i], "C ", 2)) {
        run.completed = xrealloc(run.completed,
                                 (run.n_completed + 1) * sizeof *run.completed);
        run.completed[run.n_completed++] = xstrdup(lines[i] + 2);
      }
    free_lines(lines);
    int recovered = -2;
    if (crashed == 99) /* a restarted host: a second later, a day on */
      recovered = in_child(t, log, db, workflow, params, events, 0, 86400 + 1,
                           crash_ms + 1000);
    lines = read_lines(log);
    if (judge(lines, crashed, recovered, ending, b, where, r) != 0)
      result = DURO_ERROR;
    free_lines(lines);
    for (size_t i = 0; i < run.n_completed; i++)
      free(run.completed[i]);
    run.n_completed = 0;
    if (n_boundaries)
      *n_boundaries = b;
    remove_db(db);
  }
  free_lines(ref);
  forget_run();

  snprintf(t->db, sizeof t->db, "%s", saved_db);
  if (kit_engine_open(t) != 0) {
    fprintf(stderr, "duro_test_crash_everywhere: %s\n", t->err);
    abort();
  }
  if (was_started && duro_engine_start(t->e) == 0)
    t->started = 1;
  return result;
}
