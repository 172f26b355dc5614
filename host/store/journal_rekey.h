/* journal_rekey.h — a key rotation's rewrite of the values encrypted at
 * rest (journal_crypt.h): each value not sealed under the active key
 * (sealed under an older one, or written in the clear before encryption
 * was turned on) opened and sealed again under it, page by page; or the
 * values only counted by the key that sealed them, to know when an old
 * key may be taken off the list.
 *
 * Each rewrite is written only if the value is still what was read
 * (JOP_VALUE_RESEAL): a value that changed meanwhile was written anew,
 * under the active key, by whoever changed it.  A pass is safe beside
 * the engine's work and on several hosts at once, and a rotation that
 * stopped (a restart) starts again from the beginning and skips what is
 * done.  Hosts that share a database must all run with the new active
 * key first: one still sealing under the old key writes values a
 * finished rotation no longer sees. */
#ifndef DURO_JOURNAL_REKEY_H
#define DURO_JOURNAL_REKEY_H

#include <stddef.h>
#include <stdint.h>

#include "journal.h"
#include "journal_crypt.h"

#define JOURNAL_REKEY_KEYS 16

/* Values counted under one key id. */
typedef struct journal_key_count {
  char id[JOURNAL_CRYPT_ID_MAX + 1];
  uint64_t n;
} journal_key_count;

/* Where a rotation (or a count) is, and what it found so far.  Zeroed to
 * start. */
typedef struct journal_rekey {
  int64_t after_instance, after_message; /* the last rowid, seq looked at */
  int instances_done, messages_done;
  uint64_t plaintext; /* values not sealed */
  /* sealed values by key: a count's, every key; a rotation's, the keys
   * other than the active one (the active key's are not read) */
  journal_key_count keys[JOURNAL_REKEY_KEYS];
  size_t n_keys;
  uint64_t rewritten; /* sealed again under the active key */
  uint64_t changed;   /* changed meanwhile: left as its writer left it */
  uint64_t unopened;  /* under a key not listed, or altered: left */
} journal_rekey;

/* One page of the walk from where r is: the values of up to `limit`
 * instances (then of up to `limit` queue messages), counted into r, and
 * unless count_only each value not under the active key rewritten under
 * it, in one commit.  0, DURO_E_INVALID_ARGUMENT to rewrite without an
 * active key, or DURO_E_STORAGE.  The walk is through when
 * journal_rekey_done(r). */
int journal_rekey_page(journal *j, journal_rekey *r, size_t limit,
                       int count_only);
int journal_rekey_done(const journal_rekey *r);

#endif
