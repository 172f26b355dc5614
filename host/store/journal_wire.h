/* journal_wire.h — journal batches and rows as flat bytes, for a process
 * that builds writes it does not commit (a worker process running plugin
 * code sends its activation's batches to the engine, which commits them;
 * the engine sends it the rows an activation starts from).
 *
 * The encoding is for two processes of one binary on one machine: host
 * byte order, a version byte that refuses anything else, every string by
 * length (NULL distinct from ""), no pointers.  A decoder never trusts
 * its input: a short, long or malformed buffer is an error, never a read
 * past its end (the bytes may come from a process that died mid-write or
 * from plugin code that scribbled on them).
 *
 * Decoded strings and rows belong to the batch (journal_batch_own) or to
 * the rows' usual owners (journal_instance_clear, journal_steps_free,
 * journal_events_free), so a decoded batch commits and frees like any
 * other. */
#ifndef DURO_JOURNAL_WIRE_H
#define DURO_JOURNAL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "journal.h"
#include "wire.h"

/* ---- batches (worker to engine) ---- */

/* Appends batch b's ops (what a writer fills in; not their results). */
void journal_wire_batch(wire_buf *w, const journal_batch *b);
/* Decodes a batch appended by journal_wire_batch into `b` (empty, or
 * reset), its strings and rows owned by b.  0, or DURO_E_INVALID_ARGUMENT
 * for bytes that are not one batch (b is reset then). */
int journal_wire_batch_read(const void *data, size_t len, journal_batch *b);

/* The results of a committed batch (engine to worker): each op's rc,
 * out_rowid and out_owner, in order.  _read fills them into the batch
 * the worker sent (the same number of ops, or DURO_E_INVALID_ARGUMENT). */
void journal_wire_results(wire_buf *w, const journal_batch *b);
int journal_wire_results_read(const void *data, size_t len, journal_batch *b);

/* ---- rows (engine to worker) ---- */

void journal_wire_instance(wire_buf *w, const journal_instance *in);
void journal_wire_steps(wire_buf *w, const journal_step *s, size_t n);
void journal_wire_events(wire_buf *w, const journal_event *ev, size_t n);

/* Each returns 0, or DURO_E_INVALID_ARGUMENT with nothing left allocated
 * (the reader is bad from then on). */
int journal_wire_instance_read(wire_reader *r, journal_instance *out);
int journal_wire_steps_read(wire_reader *r, journal_step **out, size_t *n);
int journal_wire_events_read(wire_reader *r, journal_event **out, size_t *n);

#endif
