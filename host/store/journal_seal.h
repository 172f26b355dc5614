/* journal_seal.h — which values of the journal are encrypted at rest, and
 * where each is sealed and opened (journal_seal.c): the values of a
 * batch's ops as they go to the backend, and those of the rows reads
 * hand back.  journal.c calls these, so both backends get the same
 * values sealed from one place; the backends only see text.
 *
 * Sealed: an instance's params, output and error, a step's result and
 * error, a failed attempt's error, an event's payload, a log line, a
 * queue message's body and last error.  Not: ids, names, statuses,
 * times, search attributes, claim keys, cron ticks, bulk jobs, pipeline
 * records. */
#ifndef DURO_JOURNAL_SEAL_H
#define DURO_JOURNAL_SEAL_H

#include <stddef.h>
#include <stdint.h>

#include "journal.h"
#include "journal_crypt.h"

/* A batch's ops as the backend writes them: copies of the caller's, their
 * values sealed.  The caller's ops stay as they were (plaintext), for
 * the commit hook and the caller. */
typedef struct journal_sealed {
  journal_op *ops; /* as many as the batch's, in its order */
  void **mem;      /* what the copies point to, freed with them */
  size_t n_mem, cap_mem;
} journal_sealed;

/* Seals batch b's values under c's active key into *out (zeroed first). */
void journal_seal_batch(const journal_crypt *c, const journal_batch *b,
                        journal_sealed *out);
void journal_sealed_free(journal_sealed *s);
/* Once the backend applied sealed op `s`: its results copied to the
 * caller's `op`, the messages a lease took opened (one that does not open
 * is left leased and dropped from the op, with an error logged: its lease
 * runs out and its attempts count, so it dead-letters as any message that
 * keeps failing would). */
void journal_seal_results(const journal_crypt *c, journal_op *op,
                          const journal_op *s);

/* The host's log told, at most once every 10 s, that queue message
 * `seq` waits for the key `stored` is sealed under (a lease parked it). */
void journal_note_parked(const char *queue, int64_t seq, const char *stored);

/* One stored value opened in place (*v replaced by its plaintext when
 * sealed): 0, or DURO_E_STORAGE with why (store_error).  c may be NULL:
 * a journal without keys still says which key a value needs. */
int journal_open_value(const journal_crypt *c, journal_field f, int64_t rowid,
                       const char *name, char **v);
/* The values of rows a read gives, opened in place: 0, or
 * DURO_E_STORAGE with why (the rows stay the caller's to free). */
int journal_open_instance(const journal_crypt *c, journal_instance *in);
int journal_open_steps(const journal_crypt *c, int64_t rowid,
                       journal_step *steps, size_t n);
int journal_open_events(const journal_crypt *c, int64_t rowid,
                        journal_event *ev, size_t n);
int journal_open_logs(const journal_crypt *c, int64_t rowid, journal_log *v,
                      size_t n);
int journal_open_messages(const journal_crypt *c, journal_message *m, size_t n);

#endif
