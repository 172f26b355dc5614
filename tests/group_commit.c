/* group_commit.c — many threads committing to one journal at once
 * (group_commit.h). */
#include "group_commit.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "metrics.h"

#define MAX_THREADS 64

typedef struct committer {
  journal *j;
  int index, per_thread, read_back;
  int async_done; /* callbacks seen, atomic */
} committer;

typedef struct async_batch {
  journal_batch b;
  journal_instance row;
  char id[32];
  committer *owner;
} async_batch;

static void on_done(void *ctx, int rc) {
  async_batch *ab = ctx;
  ck_assert_int_eq(rc, 0);
  ck_assert_int_eq(ab->b.ops[0].rc, 0);
  __atomic_add_fetch(&ab->owner->async_done, 1, __ATOMIC_RELAXED);
  journal_batch_free(&ab->b);
  free(ab);
}

static void *commit_many(void *arg) {
  committer *c = arg;
  for (int i = 0; i < c->per_thread; i++) {
    if (i % 2) {
      async_batch *ab = calloc(1, sizeof *ab);
      ab->owner = c;
      snprintf(ab->id, sizeof ab->id, "a-%d-%d", c->index, i);
      ab->row = (journal_instance){.workflow = "wf",
                                   .id = ab->id,
                                   .status = DURO_STATUS_QUEUED,
                                   .params = "null"};
      journal_batch_add(&ab->b, JOP_INSTANCE_INSERT)->inst = &ab->row;
      journal_commit_async(c->j, &ab->b, on_done, ab);
      continue;
    }
    char id[32];
    snprintf(id, sizeof id, "s-%d-%d", c->index, i);
    journal_instance row = {.workflow = "wf",
                            .id = id,
                            .status = DURO_STATUS_QUEUED,
                            .params = "null"};
    journal_batch b = {0};
    journal_batch_add(&b, JOP_INSTANCE_INSERT)->inst = &row;
    ck_assert_int_eq(journal_commit(c->j, &b), 0);
    ck_assert_int_eq(b.ops[0].rc, 0);
    ck_assert_int_gt(b.ops[0].out_rowid, 0);
    if (c->read_back) { /* at once, on this thread's own connection */
      journal_instance got = {0};
      ck_assert_int_eq(
          journal_instance_get_rowid(c->j, b.ops[0].out_rowid, &got), 0);
      ck_assert_str_eq(got.id, id);
      journal_instance_clear(&got);
    }
    journal_batch_free(&b);
  }
  return NULL;
}

void group_commit_drive(journal *j, int threads, int per_thread, int read_back,
                        int wait_ms) {
  ck_assert_int_le(threads, MAX_THREADS);
  pthread_t th[MAX_THREADS];
  committer c[MAX_THREADS];
  for (int i = 0; i < threads; i++) {
    c[i] = (committer){
        .j = j, .index = i, .per_thread = per_thread, .read_back = read_back};
    pthread_create(&th[i], NULL, commit_many, &c[i]);
  }
  for (int i = 0; i < threads; i++)
    pthread_join(th[i], NULL);
  /* Every asynchronous batch's callback ran once, after its commit... */
  for (int w = 0; w < wait_ms; w++) {
    int all = 1;
    for (int i = 0; i < threads; i++)
      all &=
          __atomic_load_n(&c[i].async_done, __ATOMIC_RELAXED) == per_thread / 2;
    if (all)
      break;
    usleep(1000);
  }
  for (int i = 0; i < threads; i++)
    ck_assert_int_eq(c[i].async_done, per_thread / 2);
  /* ...and the batches shared transactions. */
  ck_assert_uint_eq(journal_batches_committed(j),
                    (uint64_t)threads * per_thread);
  ck_assert_uint_lt(journal_commit_latency(j)->count,
                    (uint64_t)threads * per_thread);
}
