/* http_fixture.c — the engine and server behind the HTTP fuzz targets
 * (http_fixture.h). */
#include "http_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "queue.h"
#include "trigger.h"

/* The step API's table, as a loaded plugin has it (duro.h). */
const duro_api *duro_api_ptr_;

static duro_engine *engine;
static http_server *server;
static char dir[256];

static duro_rc run_now(duro_step *step, const duro_event *ev, duro_env *env) {
  (void)ev;
  (void)env;
  return duro_set_output(step, "{\"done\":true}");
}

static duro_rc run_waiter(duro_step *step, const duro_event *ev,
                          duro_env *env) {
  (void)ev;
  (void)env;
  const char *payload;
  DURO_TRY(duro_wait_for_event(step, "wait", "go", "1 hour", &payload));
  return duro_set_output(step, payload);
}

static void cleanup(void) {
  http_free(server);
  duro_engine_close(engine);
  static const char *files[] = {"fuzz.db", "fuzz.db-wal", "fuzz.db-shm"};
  char path[300];
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(dir);
}

http_server *fuzz_http_server(const char *token) {
  if (server)
    return server;
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/duro-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    abort();
  }
  char db[300], err[512];
  snprintf(db, sizeof db, "%s/fuzz.db", dir);
  duro_api_ptr_ = duro_host_api();
  duro_engine_options opt = {.db_path = db, .workers = 0};
  if (duro_engine_open(&opt, &engine, err, sizeof err) != 0) {
    fprintf(stderr, "fuzz: %s\n", err);
    abort();
  }
  duro_engine_register(engine, "wf", "WF", run_now, NULL, "fuzz");
  duro_engine_register(engine, "waiter", "WAITER", run_waiter, NULL, "fuzz");
  /* a queue for the queue routes, a no-code cron for the cron routes */
  duro_queue_register(engine, "q", NULL);
  duro_cron_spec cron = {.plugin = "fuzz",
                         .schedule = "0 3 * * *",
                         .workflow = "wf",
                         .id = "n-{date}"};
  if (duro_cron_register(engine, &cron, err, sizeof err) != 0) {
    fprintf(stderr, "fuzz: %s\n", err);
    abort();
  }
  server = http_server_new(engine, token, 4096);
  atexit(cleanup);
  return server;
}

void fuzz_http_settle(void) { duro_engine_run_until_idle(engine); }
