/* test_backend.c — what journal.c promises a storage backend, checked on
 * a backend that only records its calls: batches queued while a group
 * commits share the next transaction, every op is applied once between
 * begin and commit, a failed apply rolls back and fails every batch of
 * its group with the apply's message (not the rollback's), the next
 * group starts clean, and a thread that led its own group leaves the
 * asynchronous batches behind it to the writer thread. */
#include <check.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "duro.h"
#include "journal.h"
#include "suite_run.h"

/* Each call of the backend, in order: 'b'egin, 'a'pply (with the op's
 * rowid), 'c'ommit, 'r'ollback. */
typedef struct call {
  char what;
  int64_t rowid;
} call;

typedef struct recorder {
  call calls[64];
  int n;
  /* The first commit waits here until the test lets it go, so batches
   * queue behind it. */
  int hold_first_commit;
  sem_t in_commit, release;
  int commits;
  /* A stream of asynchronous batches: while stream_left > 0, every
   * commit queues one more (on journal `j`), as HTTP creates arriving
   * during each commit would; nothing is recorded in `calls`. */
  journal *j;
  int stream_left;
  pthread_t watched; /* whose commits are counted in watched_commits */
  int watched_commits;
} recorder;

static void record(recorder *r, char what, int64_t rowid) {
  if (r->j)
    return; /* streaming: too many calls to keep */
  ck_assert_int_lt(r->n, 64);
  r->calls[r->n++] = (call){what, rowid};
}

static recorder *opened; /* set by rec_open, for the test to inspect */

static int rec_open(const char *path, int synchronous_full, void **db,
                    char *err, size_t errlen) {
  (void)path, (void)synchronous_full, (void)err, (void)errlen;
  recorder *r = calloc(1, sizeof *r);
  sem_init(&r->in_commit, 0, 0);
  sem_init(&r->release, 0, 0);
  *db = opened = r;
  return 0;
}

static void rec_close(void *db) {
  recorder *r = db;
  sem_destroy(&r->in_commit);
  sem_destroy(&r->release);
  free(r);
}

static int rec_begin(void *db) {
  record(db, 'b', 0);
  return 0;
}

/* An op with a negative rowid fails the group. */
static int rec_apply(void *db, journal_op *op) {
  record(db, 'a', op->rowid);
  if (op->rowid < 0) {
    store_error("apply failed on %lld", (long long)op->rowid);
    return DURO_E_STORAGE;
  }
  op->out_rowid = op->rowid * 10;
  return 0;
}

#define STREAM 200
static journal_batch streamed[STREAM];
static int streamed_done;

static void stream_done(void *ctx, int rc) {
  (void)ctx;
  ck_assert_int_eq(rc, 0);
  __atomic_add_fetch(&streamed_done, 1, __ATOMIC_SEQ_CST);
}

static int rec_commit(void *db) {
  recorder *r = db;
  record(r, 'c', 0);
  if (r->j && pthread_equal(pthread_self(), r->watched))
    r->watched_commits++;
  if (r->j && r->stream_left > 0) {
    journal_batch *b = &streamed[--r->stream_left];
    journal_batch_add(b, JOP_INSTANCE_CONTROL_CLEAR)->rowid = r->stream_left;
    journal_commit_background(r->j, b, stream_done, NULL);
  }
  if (r->commits++ == 0 && r->hold_first_commit) {
    sem_post(&r->in_commit);
    while (sem_wait(&r->release) != 0)
      ;
  }
  return 0;
}

static void rec_rollback(void *db) {
  record(db, 'r', 0);
  store_error("the rollback's own message");
}

static const store_backend recording = {
    .open = rec_open,
    .close = rec_close,
    .begin = rec_begin,
    .apply = rec_apply,
    .commit = rec_commit,
    .rollback = rec_rollback,
};

static journal *open_recording(void) {
  journal *j = NULL;
  char err[64];
  ck_assert_int_eq(
      journal_open_backend(&recording, "mem", 1, &j, err, sizeof err), 0);
  return j;
}

static void add(journal_batch *b, int64_t rowid) {
  journal_batch_add(b, JOP_INSTANCE_CONTROL_CLEAR)->rowid = rowid;
}

static void expect_calls(const recorder *r, const char *whats,
                         const int64_t *rowids) {
  ck_assert_int_eq(r->n, (int)strlen(whats));
  for (int i = 0; i < r->n; i++) {
    ck_assert_msg(r->calls[i].what == whats[i], "call %d is '%c', not '%c'", i,
                  r->calls[i].what, whats[i]);
    ck_assert_int_eq(r->calls[i].rowid, rowids[i]);
  }
}

typedef struct committer {
  journal *j;
  journal_batch *b;
  int rc;
} committer;

static void *commit_thread(void *arg) {
  committer *c = arg;
  c->rc = journal_commit(c->j, c->b);
  return NULL;
}

typedef struct done {
  int calls, rc;
  pthread_t thread;
} done;

static void on_done(void *ctx, int rc) {
  done *d = ctx;
  d->calls++;
  d->rc = rc;
  d->thread = pthread_self();
}

START_TEST(batches_queued_during_a_commit_share_the_next) {
  journal *j = open_recording();
  recorder *r = opened;
  r->hold_first_commit = 1;
  journal_batch first = {0}, second = {0}, third = {0};
  add(&first, 1);
  add(&second, 2);
  add(&second, 3);
  add(&third, 4);
  committer c = {j, &first, -1};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, commit_thread, &c), 0);
  while (sem_wait(&r->in_commit) != 0)
    ;
  /* The thread leads and is inside its commit: these only queue. */
  done d2 = {0}, d3 = {0};
  journal_commit_async(j, &second, on_done, &d2);
  journal_commit_async(j, &third, on_done, &d3);
  ck_assert_int_eq(d2.calls + d3.calls, 0);
  sem_post(&r->release);
  pthread_join(t, NULL);
  ck_assert_int_eq(c.rc, 0);
  while (journal_batches_committed(j) < 3)
    usleep(1000);

  expect_calls(r, "bacbaaac", (int64_t[]){0, 1, 0, 0, 2, 3, 4, 0});
  ck_assert_int_eq(second.ops[1].out_rowid, 30);
  /* The asynchronous batches behind the thread's own went to the writer
   * thread, together. */
  ck_assert_int_eq(d2.calls, 1);
  ck_assert_int_eq(d3.calls, 1);
  ck_assert_int_eq(d2.rc, 0);
  ck_assert(!pthread_equal(d2.thread, t));
  ck_assert(pthread_equal(d2.thread, d3.thread));
  ck_assert_int_eq(journal_failing(j, NULL, 0, NULL), 0);
  journal_batch_free(&first);
  journal_batch_free(&second);
  journal_batch_free(&third);
  journal_close(j);
}
END_TEST

/* A thread that commits, synchronously or not, while asynchronous batches
 * keep arriving (one more during every commit) commits its own group and
 * no other: it returns, and the writer thread takes the stream. */
static void streams_past(int synchronous) {
  journal *j = open_recording();
  recorder *r = opened;
  memset(streamed, 0, sizeof streamed);
  streamed_done = 0;
  r->j = j;
  r->stream_left = STREAM;
  r->watched = pthread_self();
  journal_batch mine = {0};
  add(&mine, 1);
  done d = {0};
  if (synchronous)
    ck_assert_int_eq(journal_commit(j, &mine), 0);
  else
    journal_commit_async(j, &mine, on_done, &d);
  ck_assert_int_eq(r->watched_commits, 1);
  if (!synchronous)
    ck_assert_int_eq(d.calls, 1);
  /* and the stream is committed all the same */
  while (__atomic_load_n(&streamed_done, __ATOMIC_SEQ_CST) < STREAM)
    usleep(1000);
  ck_assert_uint_eq(journal_batches_committed(j), STREAM + 1);
  journal_close(j);
  for (int i = 0; i < STREAM; i++)
    journal_batch_free(&streamed[i]);
  journal_batch_free(&mine);
}

START_TEST(a_synchronous_committer_returns_while_async_batches_stream) {
  streams_past(1);
}
END_TEST

START_TEST(an_async_committer_returns_while_async_batches_stream) {
  streams_past(0);
}
END_TEST

START_TEST(a_failed_apply_fails_its_group_and_the_next_starts_clean) {
  journal *j = open_recording();
  recorder *r = opened;
  journal_batch bad = {0}, good = {0};
  add(&bad, 5);
  add(&bad, -6);
  add(&bad, 7);
  ck_assert_int_eq(journal_commit(j, &bad), DURO_E_STORAGE);
  /* Nothing after the failed op is applied, nothing is committed. */
  expect_calls(r, "baar", (int64_t[]){0, 5, -6, 0});
  ck_assert_str_eq(journal_errmsg(j), "apply failed on -6");
  char msg[64];
  uint64_t failures = 0;
  ck_assert_int_eq(journal_failing(j, msg, sizeof msg, &failures), 1);
  ck_assert_str_eq(msg, "apply failed on -6");
  ck_assert_uint_eq(failures, 1);

  r->n = 0;
  add(&good, 8);
  ck_assert_int_eq(journal_commit(j, &good), 0);
  expect_calls(r, "bac", (int64_t[]){0, 8, 0});
  ck_assert_int_eq(journal_failing(j, NULL, 0, NULL), 0);
  journal_batch_free(&bad);
  journal_batch_free(&good);
  journal_close(j);
}
END_TEST

int main(void) {
  Suite *s = suite_create("backend");
  TCase *tc = tcase_create("backend");
  tcase_add_test(tc, batches_queued_during_a_commit_share_the_next);
  tcase_add_test(tc, a_failed_apply_fails_its_group_and_the_next_starts_clean);
  tcase_add_test(tc,
                 a_synchronous_committer_returns_while_async_batches_stream);
  tcase_add_test(tc, an_async_committer_returns_while_async_batches_stream);
  suite_add_tcase(s, tc);
  return suite_run(s);
}
