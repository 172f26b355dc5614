/* faulty_vfs.h — a SQLite VFS for tests that fails chosen I/O.
 *
 * faulty_vfs_install() registers a VFS named "faulty" as SQLite's default:
 * every connection opened afterwards (the journal's writer and readers)
 * goes through it.  It passes everything to the real unix VFS, except that
 * while a fault is armed it fails:
 *   - writes and truncates with SQLITE_FULL (a full disk),
 *   - syncs with SQLITE_IOERR_FSYNC,
 *   - reads with SQLITE_IOERR_READ,
 * each either always (rate 1000) or at random with the given rate per
 * thousand calls, from a seeded generator.  Opening a file can be made to
 * fail too (a deleted directory, no descriptors left).  Faults apply to
 * every file of the database (main, WAL, journal).  Thread-safe. */
#ifndef DURO_TEST_FAULTY_VFS_H
#define DURO_TEST_FAULTY_VFS_H

#include <stdint.h>

typedef struct faulty_plan {
  int write_per_mille; /* 0 = writes succeed, 1000 = all fail (full disk) */
  int sync_per_mille;
  int read_per_mille;
  int open_per_mille;
} faulty_plan;

void faulty_vfs_install(uint64_t seed);
void faulty_vfs_set(const faulty_plan *plan); /* NULL = no faults */

/* Faults injected so far, of each kind. */
typedef struct faulty_counts {
  uint64_t writes, syncs, reads, opens;
} faulty_counts;
void faulty_vfs_counts(faulty_counts *out);

#endif
