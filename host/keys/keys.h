/* keys.h — rotating the keys values are encrypted at rest under
 * (storage.encryption; a driver, engine/driver.h).  After the config
 * names a new active key (the old ones kept listed, for reading), a
 * rotation rewrites every value not sealed under the active key (under an
 * old key, or stored in the clear from before encryption was turned on)
 * in the background, page by page beside the engine's work
 * (store/journal_rekey.h); a count walks the same values and tells how
 * many each key sealed, so an operator knows when an old key may be
 * taken off the list.
 *
 * One run at a time per host, kept in memory: a run a restart cut short
 * is started again (it skips what is done).  With `workers: 0` (a test's
 * engine) no thread runs: the test calls duro_keys_pass. */
#ifndef DURO_KEYS_H
#define DURO_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "driver.h"
#include "engine.h"
#include "journal_rekey.h"

extern const duro_driver keys_driver;

/* Instances (or queue messages) a page of a run reads at most. */
#define DURO_KEYS_PAGE 100

typedef enum duro_keys_state {
  DURO_KEYS_IDLE,    /* no run since the host started */
  DURO_KEYS_RUNNING, /* a run goes on */
  DURO_KEYS_DONE,    /* the last run went through every value */
  DURO_KEYS_FAILED,  /* the last run stopped at a storage error */
  DURO_KEYS_STOPPED  /* the last run was cut short by the host stopping */
} duro_keys_state;

const char *duro_keys_state_name(duro_keys_state s);

/* A run, as it stands. */
typedef struct duro_keys_run {
  duro_keys_state state;
  int count_only;                        /* a count, not a rotation */
  char active[JOURNAL_CRYPT_ID_MAX + 1]; /* the key it seals under */
  int64_t started_ms, ended_ms;          /* ended_ms 0 while it runs */
  journal_rekey progress;                /* where it is, what it found */
  char error[256];                       /* DURO_KEYS_FAILED: why */
} duro_keys_run;

/* Starts a rotation (count_only 0) or a count in the background: 0;
 * DURO_E_ALREADY_EXISTS while a run goes on (*run gets it);
 * DURO_E_INVALID_ARGUMENT for a rotation when storage.encryption lists
 * no key, with why in err.  *run (may be NULL) gets the run as started. */
int duro_keys_start(duro_engine *e, int count_only, duro_keys_run *run,
                    char *err, size_t errlen);
/* The current or last run. */
void duro_keys_status(duro_engine *e, duro_keys_run *out);
/* The keys storage.encryption lists, into ids (at most n), and the
 * active one's index in *active (-1: none listed): how many. */
size_t duro_keys_listed(duro_engine *e, const char **ids, size_t n,
                        int *active);
/* One page of the run (what the driver's thread does): 1 while the run
 * has more, 0 when it is through or none runs. */
int duro_keys_pass(duro_engine *e);

#endif
