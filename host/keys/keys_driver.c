/* keys_driver.c — key rotations and counts run in the background
 * (keys.h): a thread of the driver's own runs the pages back to back, the
 * engine's commits sharing its group commits, and is gone when the run
 * is through.  The run's state is under the driver's lock; a page runs
 * outside it, on a copy of the walk's progress. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "journal_crypt.h"
#include "keys.h"
#include "log.h"
#include "util.h"

typedef struct keys_state {
  duro_engine *e;
  pthread_mutex_t mu;
  pthread_t thread;
  int thread_live; /* joined at stop, or by the next run's start */
  int stop;        /* atomic: read between pages */
  duro_keys_run run;
} keys_state;

static keys_state *state_of(duro_engine *e) {
  return duro_engine_driver_state(e, &keys_driver);
}

const char *duro_keys_state_name(duro_keys_state s) {
  switch (s) {
  case DURO_KEYS_RUNNING:
    return "running";
  case DURO_KEYS_DONE:
    return "done";
  case DURO_KEYS_FAILED:
    return "failed";
  case DURO_KEYS_STOPPED:
    return "stopped";
  default:
    return "idle";
  }
}

static const char *what(const duro_keys_run *r) {
  return r->count_only ? "count" : "rotation";
}

int duro_keys_pass(duro_engine *e) {
  keys_state *s = state_of(e);
  if (!s)
    return 0;
  pthread_mutex_lock(&s->mu);
  if (s->run.state != DURO_KEYS_RUNNING) {
    pthread_mutex_unlock(&s->mu);
    return 0;
  }
  journal_rekey r = s->run.progress;
  int count_only = s->run.count_only;
  pthread_mutex_unlock(&s->mu);

  journal *j = engine_journal(e);
  int rc = journal_rekey_page(j, &r, DURO_KEYS_PAGE, count_only);
  int stopping =
      __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE) || engine_stopping(e);

  pthread_mutex_lock(&s->mu);
  s->run.progress = r;
  if (rc) {
    s->run.state = DURO_KEYS_FAILED;
    snprintf(s->run.error, sizeof s->run.error, "%s", journal_errmsg(j));
  } else if (journal_rekey_done(&r)) {
    s->run.state = DURO_KEYS_DONE;
  } else if (stopping) {
    s->run.state = DURO_KEYS_STOPPED;
  }
  int more = s->run.state == DURO_KEYS_RUNNING;
  if (!more)
    s->run.ended_ms = engine_now(e);
  duro_keys_run done = s->run;
  pthread_mutex_unlock(&s->mu);

  if (done.state == DURO_KEYS_DONE && !done.count_only)
    log_info("keys: rotation to \"%s\" done: %llu values rewritten, %llu "
             "changed meanwhile, %llu left unopened",
             done.active, (unsigned long long)r.rewritten,
             (unsigned long long)r.changed, (unsigned long long)r.unopened);
  else if (done.state == DURO_KEYS_DONE)
    log_info("keys: count done: %llu values in the clear",
             (unsigned long long)r.plaintext);
  else if (done.state == DURO_KEYS_FAILED)
    log_error("keys: %s stopped: %s", what(&done), done.error);
  return more;
}

static void *runner(void *arg) {
  keys_state *s = arg;
  while (duro_keys_pass(s->e))
    ;
  return NULL;
}

static void join_locked(keys_state *s) {
  if (!s->thread_live)
    return;
  pthread_t t = s->thread;
  s->thread_live = 0;
  pthread_mutex_unlock(&s->mu);
  pthread_join(t, NULL);
  pthread_mutex_lock(&s->mu);
}

int duro_keys_start(duro_engine *e, int count_only, duro_keys_run *run,
                    char *err, size_t errlen) {
  keys_state *s = state_of(e);
  const journal_crypt *c = journal_get_crypt(engine_journal(e));
  const char *active = journal_crypt_active(c);
  if (!s || (!count_only && !active)) {
    snprintf(err, errlen,
             "storage.encryption lists no key: there is nothing to rotate "
             "to");
    return DURO_E_INVALID_ARGUMENT;
  }
  pthread_mutex_lock(&s->mu);
  if (s->run.state == DURO_KEYS_RUNNING) {
    if (run)
      *run = s->run;
    pthread_mutex_unlock(&s->mu);
    snprintf(err, errlen, "a key %s is running already", what(&s->run));
    return DURO_E_ALREADY_EXISTS;
  }
  join_locked(s); /* the last run's thread, through */
  s->run = (duro_keys_run){.state = DURO_KEYS_RUNNING,
                           .count_only = count_only,
                           .started_ms = engine_now(e)};
  snprintf(s->run.active, sizeof s->run.active, "%s", active ? active : "");
  if (run)
    *run = s->run;
  if (engine_workers(e) > 0) {
    if (pthread_create(&s->thread, NULL, runner, s) == 0)
      s->thread_live = 1;
    else {
      s->run.state = DURO_KEYS_FAILED;
      snprintf(s->run.error, sizeof s->run.error, "cannot start a thread");
    }
  }
  log_info("keys: %s%s%s started", what(&s->run), count_only ? "" : " to key ",
           count_only ? "" : s->run.active);
  pthread_mutex_unlock(&s->mu);
  return 0;
}

void duro_keys_status(duro_engine *e, duro_keys_run *out) {
  keys_state *s = state_of(e);
  *out = (duro_keys_run){0};
  if (!s)
    return;
  pthread_mutex_lock(&s->mu);
  *out = s->run;
  pthread_mutex_unlock(&s->mu);
}

size_t duro_keys_listed(duro_engine *e, const char **ids, size_t n,
                        int *active) {
  const journal_crypt *c = journal_get_crypt(engine_journal(e));
  size_t have = journal_crypt_ids(c, ids, n);
  const char *a = journal_crypt_active(c);
  *active = -1;
  for (size_t i = 0; a && i < have && i < n; i++)
    if (!strcmp(ids[i], a))
      *active = (int)i;
  return have;
}

static void *driver_create(duro_engine *e) {
  keys_state *s = xcalloc(1, sizeof *s);
  s->e = e;
  pthread_mutex_init(&s->mu, NULL);
  return s;
}

/* A page is short (DURO_KEYS_PAGE instances): the one under way is all
 * a stop waits for. */
static uint32_t keys_drain(void *state, const struct timespec *until) {
  (void)until;
  keys_state *s = state;
  __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
  pthread_mutex_lock(&s->mu);
  join_locked(s);
  pthread_mutex_unlock(&s->mu);
  return 0;
}

static void state_free(void *state) {
  keys_state *s = state;
  keys_drain(s, NULL);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

const duro_driver keys_driver = {
    .name = "keys",
    .create = driver_create,
    .drain = keys_drain,
    .free = state_free,
};
