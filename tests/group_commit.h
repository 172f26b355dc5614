/* group_commit.h — many threads committing to one journal at once, for
 * the journal suites of both backends (test_journal, test_pg_journal).
 *
 * Failures are Check assertions: call from test cases. */
#ifndef DURO_TEST_GROUP_COMMIT_H
#define DURO_TEST_GROUP_COMMIT_H

#include "journal.h"

/* Runs `threads` threads, each committing `per_thread` one-insert batches
 * to j (instances "s-T-I" waited for, every other one "a-T-I"
 * asynchronous); with read_back, each waited-for insert is read back at
 * once on its own thread.  Then waits up to wait_ms for the asynchronous
 * callbacks and asserts that each ran once and that the batches shared
 * transactions (fewer commits than batches). */
void group_commit_drive(journal *j, int threads, int per_thread, int read_back,
                        int wait_ms);

#endif
