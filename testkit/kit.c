/* kit.c — the test kit's engine: a duro engine in the test's process, on
 * a journal in a temporary directory and a virtual clock, with workers = 0
 * (every activation runs on the calling thread, when the test says). */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "children.h"
#include "duration.h"
#include "error.h"
#include "kit_internal.h"
#include "loader.h"
#include "log.h"
#include "queue.h"
#include "status.h"
#include "trigger.h"
#include "util.h"
#include "view_instance.h"

/* 2026-01-01T00:00:00Z: a fixed start, so that tests read the same dates. */
#define KIT_T0_MS 1767225600000LL

duro_test *kit_current;

int kit_fail(duro_test *t, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->err, sizeof t->err, fmt, ap);
  va_end(ap);
  return rc;
}

const char *duro_test_error_text(const duro_test *t) { return t->err; }

int kit_engine_open(duro_test *t) {
  duro_engine_options opt = {
      .db_path = t->db, .workers = 0, .clock = &t->clock};
  char err[512];
  if (duro_engine_open(&opt, &t->e, err, sizeof err) != 0)
    return kit_fail(t, DURO_E_IO, "the engine did not open: %s", err);
  for (size_t i = 0; i < t->n_wfs; i++) {
    kit_workflow *w = &t->wfs[i];
    int rc = duro_engine_register(t->e, w->name, w->binding, kit_run, NULL,
                                  w->build);
    if (rc != 0)
      return kit_fail(t, rc, "workflow \"%s\": %s", w->name, duro_err_name(rc));
  }
  return kit_drivers_declare(t);
}

void kit_engine_close(duro_test *t) {
  if (t->e)
    duro_engine_close(t->e);
  t->e = NULL;
  t->started = 0;
}

/* The engine started: workflows are registered before, instances after. */
static int started(duro_test *t) {
  if (t->started)
    return 0;
  int rc = duro_engine_start(t->e);
  if (rc != 0)
    return kit_fail(t, rc, "the engine did not start: %s", duro_err_name(rc));
  t->started = 1;
  return 0;
}

duro_test *duro_test_open(void) {
  duro_test *t = xcalloc(1, sizeof *t);
  if (kit_current) {
    fprintf(stderr, "duro_test_open: another duro_test is open in this "
                    "process; close it first\n");
    abort();
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(t->dir, sizeof t->dir, "%s/duro-test-XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(t->dir)) {
    fprintf(stderr, "duro_test_open: %s: %s\n", t->dir, strerror(errno));
    abort();
  }
  snprintf(t->db, sizeof t->db, "%s/duro.db", t->dir);
  /* a test's output is its failures: the engine's info lines (every
   * retry, every recovery) only with DURO_LOG=info */
  if (!getenv("DURO_LOG"))
    log_set_level(DURO_LOG_WARN);
  duro_clock_virtual_init(&t->clock, KIT_T0_MS);
  kit_current = t;
  if (kit_engine_open(t) != 0) {
    fprintf(stderr, "duro_test_open: %s\n", t->err);
    abort();
  }
  return t;
}

/* Removes the journal's files and the directory (nothing else is in it). */
static void remove_dir(const char *dir) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "duro_test_close: could not remove %s\n", dir);
}

void duro_test_close(duro_test *t) {
  if (!t)
    return;
  kit_engine_close(t);
  for (size_t i = 0; i < t->n_plugins; i++)
    loader_close(t->plugins[i]);
  free(t->plugins);
  for (size_t i = 0; i < t->n_wfs; i++) {
    free(t->wfs[i].name);
    free(t->wfs[i].binding);
  }
  free(t->wfs);
  for (size_t i = 0; i < t->n_mocks; i++) {
    free(t->mocks[i].workflow);
    free(t->mocks[i].step);
    free(t->mocks[i].result);
    free(t->mocks[i].fail_message);
  }
  free(t->mocks);
  for (size_t i = 0; i < t->n_calls; i++) {
    free(t->calls[i].workflow);
    free(t->calls[i].key);
    free(t->calls[i].name);
  }
  free(t->calls);
  strmap_free(&t->call_index);
  kit_drivers_free(t);
  for (size_t i = 0; i < sizeof t->strings / sizeof *t->strings; i++)
    free(t->strings[i]);
  remove_dir(t->dir);
  if (kit_current == t)
    kit_current = NULL;
  free(t);
}

/* ---- workflows ---- */

static int add_workflow(duro_test *t, const duro_plugin_info *info,
                        const char *build, const char *workflow,
                        const char *class_name, const char *binding) {
  if (t->started)
    return kit_fail(t, DURO_E_INVALID_ARGUMENT,
                    "workflow \"%s\": register workflows before the first "
                    "create",
                    workflow);
  duro_run_fn run = NULL;
  for (uint32_t i = 0; i < info->n_workflows; i++)
    if (info->workflows[i].class_name &&
        !strcmp(info->workflows[i].class_name, class_name))
      run = info->workflows[i].run;
  if (!run)
    return kit_fail(t, DURO_E_PLUGIN, "plugin \"%s\" exports no class \"%s\"",
                    info->name ? info->name : "?", class_name);
  int rc = duro_engine_register(t->e, workflow, binding, kit_run, NULL, build);
  if (rc != 0)
    return kit_fail(t, rc, "workflow \"%s\": %s", workflow, duro_err_name(rc));
  t->wfs = xrealloc(t->wfs, (t->n_wfs + 1) * sizeof *t->wfs);
  kit_workflow *w = &t->wfs[t->n_wfs++];
  *w = (kit_workflow){.name = xstrdup(workflow),
                      .binding = binding ? xstrdup(binding) : NULL,
                      .run = run};
  snprintf(w->build, sizeof w->build, "%s", build);
  return 0;
}

int duro_test_load(duro_test *t, const char *path, const char *workflow,
                   const char *class_name, const char *binding) {
  loader_plugin *p = NULL;
  char err[1024];
  int rc = loader_open(workflow, path, kit_api(), &p, err, sizeof err);
  if (rc != 0)
    return kit_fail(t, rc, "%s", err);
  t->plugins = xrealloc(t->plugins, (t->n_plugins + 1) * sizeof *t->plugins);
  t->plugins[t->n_plugins++] = p;
  return add_workflow(t, loader_info(p), loader_build(p), workflow, class_name,
                      binding);
}

int duro_test_load_info(duro_test *t, const duro_plugin_info *info,
                        const char *workflow, const char *class_name,
                        const char *binding) {
  char err[1024];
  int rc = loader_check_info(info, kit_api(), workflow, "(linked in)", err,
                             sizeof err);
  if (rc != 0)
    return kit_fail(t, rc, "%s", err);
  info->bind(kit_api());
  return add_workflow(t, info, "linked", workflow, class_name, binding);
}

/* ---- running ---- */

int duro_test_create(duro_test *t, const char *workflow, const char *id,
                     const char *params) {
  int rc = started(t);
  if (rc != 0)
    return rc;
  rc = duro_instance_create(t->e, workflow, id, params, -1, NULL);
  if (rc != 0)
    return kit_fail(t, rc, "create %s/%s: %s", workflow, id ? id : "(random)",
                    duro_err_name(rc));
  return 0;
}

size_t duro_test_run(duro_test *t) {
  if (started(t) != 0)
    return 0;
  /* as the scheduler thread of a host would, then the activations */
  size_t total = 0, n;
  do {
    n = duro_crons_dispatch(t->e, NULL);
    n += duro_queues_dispatch(t->e);
    n += duro_children_dispatch(t->e);
    n += duro_engine_run_until_idle(t->e);
    total += n;
  } while (n);
  return total;
}

/* The next time something is due: a wake or a cron tick (Unix ms). */
static int64_t next_event(duro_test *t) {
  int64_t wake = duro_engine_next_wake(t->e), tick = kit_next_tick(t);
  return wake < tick ? wake : tick;
}

/* Moves the clock to `to` (Unix ms), stopping at each wake on the way. */
static size_t advance_to(duro_test *t, int64_t to) {
  size_t ran = duro_test_run(t);
  for (;;) {
    int64_t now = duro_clock_now(&t->clock);
    int64_t next = next_event(t);
    if (next <= now) {
      /* due already: run it (a wake ahead of now the engine took) */
      size_t n = duro_test_run(t);
      ran += n;
      if (n)
        continue;
      next = now + 1;
    }
    if (next > to)
      break;
    duro_clock_advance(&t->clock, next - now);
    ran += duro_test_run(t);
  }
  int64_t now = duro_clock_now(&t->clock);
  if (to > now)
    duro_clock_advance(&t->clock, to - now);
  return ran + duro_test_run(t);
}

int64_t duro_test_advance(duro_test *t, const char *duration) {
  int64_t ms;
  if (!duration || duration_parse(duration, &ms) != 0 || ms < 0)
    return kit_fail(t, DURO_E_INVALID_ARGUMENT,
                    "duro_test_advance: \"%s\" is not a duration (\"90s\", "
                    "\"2 days\")",
                    duration ? duration : "(null)");
  if (started(t) != 0)
    return DURO_E_IO;
  return (int64_t)advance_to(t, duro_clock_now(&t->clock) + ms);
}

int kit_run_to_end(duro_test *t, const char *workflow, const char *id,
                   int64_t limit_ms) {
  int rc = started(t);
  if (rc != 0)
    return rc;
  int64_t until = duro_clock_now(&t->clock) + limit_ms;
  for (;;) {
    duro_test_run(t);
    duro_status s;
    rc = duro_instance_status(t->e, workflow, id, &s);
    if (rc != 0)
      return kit_fail(t, rc, "%s/%s: %s", workflow, id, duro_err_name(rc));
    if (duro_status_ended(s))
      return 0;
    int64_t now = duro_clock_now(&t->clock);
    int64_t next = next_event(t);
    if (next == INT64_MAX || next > until)
      return kit_fail(t, DURO_E_BUSY,
                      "%s/%s is %s and nothing wakes it within the limit",
                      workflow, id, duro_status_name(s));
    if (next > now)
      duro_clock_advance(&t->clock, next - now);
  }
}

int duro_test_run_to_end(duro_test *t, const char *workflow, const char *id,
                         const char *limit) {
  int64_t ms = 365LL * 24 * 3600 * 1000;
  if (limit && (duration_parse(limit, &ms) != 0 || ms < 0))
    return kit_fail(t, DURO_E_INVALID_ARGUMENT, "\"%s\" is not a duration",
                    limit);
  return kit_run_to_end(t, workflow, id, ms);
}

int duro_test_send_event(duro_test *t, const char *workflow, const char *id,
                         const char *type, const char *payload) {
  int rc = started(t);
  if (rc != 0)
    return rc;
  rc = duro_instance_send_event(t->e, workflow, id, type, payload);
  if (rc != 0)
    return kit_fail(t, rc, "event \"%s\" to %s/%s: %s", type, workflow, id,
                    duro_err_name(rc));
  return 0;
}

int64_t duro_test_now_ms(const duro_test *t) {
  return duro_clock_now((duro_clock *)&t->clock);
}

/* ---- reading ---- */

const char *kit_keep(duro_test *t, int k, char *s) {
  free(t->strings[k]);
  t->strings[k] = s;
  return s;
}

const char *duro_test_status(duro_test *t, const char *workflow,
                             const char *id) {
  duro_status s;
  if (duro_instance_status(t->e, workflow, id, &s) != 0)
    return NULL;
  return duro_status_name(s);
}

/* One field of the instance's row, copied. */
static char *summary_field(duro_test *t, const char *workflow, const char *id,
                           int output) {
  duro_instance_info in;
  if (duro_instance_read_summary(t->e, workflow, id, &in) != 0)
    return NULL;
  char *s = output ? in.output : in.error;
  s = s ? xstrdup(s) : NULL;
  duro_instance_info_free(&in);
  return s;
}

const char *duro_test_output(duro_test *t, const char *workflow,
                             const char *id) {
  return kit_keep(t, KIT_KEEP_OUTPUT, summary_field(t, workflow, id, 1));
}

const char *duro_test_error(duro_test *t, const char *workflow,
                            const char *id) {
  return kit_keep(t, KIT_KEEP_ERROR, summary_field(t, workflow, id, 0));
}

/* The step `key` of a read instance, or NULL. */
static const duro_step_info *step_of(const duro_instance_info *in,
                                     const char *key) {
  for (size_t i = 0; i < in->n_steps; i++)
    if (!strcmp(in->steps[i].key, key))
      return &in->steps[i];
  return NULL;
}

const char *duro_test_step_result(duro_test *t, const char *workflow,
                                  const char *id, const char *key) {
  duro_instance_info in;
  if (duro_instance_read(t->e, workflow, id, &in) != 0)
    return NULL;
  const duro_step_info *s = step_of(&in, key);
  char *r = s && s->result ? xstrdup(s->result) : NULL;
  duro_instance_info_free(&in);
  return kit_keep(t, KIT_KEEP_RESULT, r);
}

int duro_test_step_attempts(duro_test *t, const char *workflow, const char *id,
                            const char *key) {
  duro_instance_info in;
  if (duro_instance_read(t->e, workflow, id, &in) != 0)
    return 0;
  const duro_step_info *s = step_of(&in, key);
  int n = s ? (int)s->n_attempts : 0;
  duro_instance_info_free(&in);
  return n;
}

const char *duro_test_describe(duro_test *t, const char *workflow,
                               const char *id) {
  json_t *d = NULL;
  if (duro_instance_describe(t->e, workflow, id, &d) != 0)
    return kit_keep(t, KIT_KEEP_DESCRIBE, NULL);
  char *s = json_dumps(d, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(d);
  return kit_keep(t, KIT_KEEP_DESCRIBE, s);
}

/* ---- assertions ---- */

void duro_test_on_failure(duro_test *t, void (*fail)(void *ctx), void *ctx) {
  t->fail = fail;
  t->fail_ctx = ctx;
}

/* Says what differed and shows the journal, then fails the test. */
static int mismatch(duro_test *t, const char *workflow, const char *id,
                    const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static int mismatch(duro_test *t, const char *workflow, const char *id,
                    const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s:%d: %s/%s: ", file, line, workflow, id);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  const char *d = duro_test_describe(t, workflow, id);
  fprintf(stderr, "\nthe instance's journal:\n%s\n",
          d ? d : "(no such instance)");
  if (t->fail)
    t->fail(t->fail_ctx);
  else
    abort();
  return -1;
}

int duro_test_expect_status_(duro_test *t, const char *workflow, const char *id,
                             const char *status, const char *file, int line) {
  const char *s = duro_test_status(t, workflow, id);
  if (s && !strcmp(s, status))
    return 0;
  return mismatch(t, workflow, id, file, line, "expected status %s, found %s",
                  status, s ? s : "no such instance");
}

/* 1 when the JSON texts a and b hold the same value. */
static int same_json(const char *a, const char *b) {
  if (!a || !b)
    return a == b;
  json_t *ja = json_loads(a, JSON_DECODE_ANY, NULL);
  json_t *jb = json_loads(b, JSON_DECODE_ANY, NULL);
  int same = ja && jb ? json_equal(ja, jb) : !strcmp(a, b);
  json_decref(ja);
  json_decref(jb);
  return same;
}

int duro_test_expect_output_(duro_test *t, const char *workflow, const char *id,
                             const char *json, const char *file, int line) {
  const char *o = duro_test_output(t, workflow, id);
  if (same_json(o, json))
    return 0;
  return mismatch(t, workflow, id, file, line, "expected output %s, found %s",
                  json ? json : "none", o ? o : "none");
}

int duro_test_expect_attempts_(duro_test *t, const char *workflow,
                               const char *id, const char *key, int n,
                               const char *file, int line) {
  int got = duro_test_step_attempts(t, workflow, id, key);
  if (got == n)
    return 0;
  return mismatch(t, workflow, id, file, line,
                  "expected %d attempts of step %s, found %d", n, key, got);
}

/* ---- mocks and counts ---- */

static kit_mock *mock_add(duro_test *t, const char *workflow,
                          const char *step) {
  for (size_t i = 0; i < t->n_mocks; i++)
    if (!strcmp(t->mocks[i].workflow, workflow) &&
        !strcmp(t->mocks[i].step, step))
      return &t->mocks[i];
  t->mocks = xrealloc(t->mocks, (t->n_mocks + 1) * sizeof *t->mocks);
  kit_mock *m = &t->mocks[t->n_mocks++];
  *m = (kit_mock){.workflow = xstrdup(workflow),
                  .step = xstrdup(step),
                  .by_key = strchr(step, '#') != NULL};
  return m;
}

kit_mock *kit_mock_find(duro_test *t, const char *workflow, const char *name,
                        const char *key) {
  kit_mock *by_name = NULL;
  size_t len = strlen(name);
  for (size_t i = 0; i < t->n_mocks; i++) {
    kit_mock *m = &t->mocks[i];
    if (strcmp(m->workflow, workflow))
      continue;
    if (!m->by_key && !strcmp(m->step, name))
      by_name = m;
    else if (m->by_key && key && !strcmp(m->step, key))
      return m; /* a key wins over its name */
    else if (m->by_key && !key && !strncmp(m->step, name, len) &&
             m->step[len] == '#')
      by_name = by_name ? by_name : m; /* a key of it may match */
  }
  return by_name;
}

int duro_test_mock_result(duro_test *t, const char *workflow, const char *step,
                          const char *json) {
  json_t *j = json ? json_loads(json, JSON_DECODE_ANY, NULL) : NULL;
  if (!j)
    return kit_fail(t, DURO_E_INVALID_ARGUMENT,
                    "mock of %s: \"%s\" is not JSON", step,
                    json ? json : "(null)");
  json_decref(j);
  kit_mock *m = mock_add(t, workflow, step);
  free(m->result);
  m->result = xstrdup(json);
  return 0;
}

int duro_test_mock_fail(duro_test *t, const char *workflow, const char *step,
                        uint32_t n, const char *message) {
  kit_mock *m = mock_add(t, workflow, step);
  m->fail_first = n;
  free(m->fail_message);
  m->fail_message = xstrdup(message ? message : "mocked failure");
  return 0;
}

int duro_test_mock_fail_final(duro_test *t, const char *workflow,
                              const char *step, const char *message) {
  kit_mock *m = mock_add(t, workflow, step);
  m->fail_final = 1;
  free(m->fail_message);
  m->fail_message = xstrdup(message ? message : "mocked failure");
  return 0;
}

int duro_test_mock_fn(duro_test *t, const char *workflow, const char *step,
                      duro_step_fn fn, void *arg) {
  kit_mock *m = mock_add(t, workflow, step);
  m->fn = fn;
  m->arg = arg;
  return 0;
}

void kit_count_call(duro_test *t, const char *workflow, const char *key) {
  /* one lookup a callback: a test of thousands of steps stays linear */
  char *name = xasprintf("%s\t%s", workflow, key);
  uintptr_t at = (uintptr_t)strmap_get(&t->call_index, name);
  if (at) {
    t->calls[at - 1].n++;
    free(name);
    return;
  }
  t->calls = xrealloc(t->calls, (t->n_calls + 1) * sizeof *t->calls);
  t->calls[t->n_calls++] = (kit_calls){
      .workflow = xstrdup(workflow), .key = xstrdup(key), .n = 1, .name = name};
  strmap_put(&t->call_index, name, (void *)(uintptr_t)t->n_calls);
}

int duro_test_calls(duro_test *t, const char *workflow, const char *step) {
  int n = 0, by_key = strchr(step, '#') != NULL;
  size_t len = strlen(step);
  for (size_t i = 0; i < t->n_calls; i++) {
    const kit_calls *c = &t->calls[i];
    if (strcmp(c->workflow, workflow))
      continue;
    if (by_key ? !strcmp(c->key, step)
               : !strncmp(c->key, step, len) && c->key[len] == '#')
      n += c->n;
  }
  return n;
}
