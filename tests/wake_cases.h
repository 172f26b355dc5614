/* wake_cases.h — the journal's event wakes against an instance's
 * wait_type, for the journal suites of both backends (test_journal,
 * test_pg_journal): one type, or several joined by JOURNAL_WAIT_SEP
 * (duro_wait_any), each matched whole.
 *
 * Failures are Check assertions: call from test cases. */
#ifndef DURO_TEST_WAKE_CASES_H
#define DURO_TEST_WAKE_CASES_H

#include "journal.h"

/* Runs every case on j, an open journal of either backend, which may
 * hold other rows. */
void wake_cases_type_lists(journal *j);

#endif
