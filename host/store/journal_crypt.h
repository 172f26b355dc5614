/* journal_crypt.h — values encrypted at rest (storage.encryption): the
 * keys, and the sealing and opening of one value.
 *
 * A sealed value is text, so it fits the TEXT columns plaintext values
 * live in, and says what it is, so that a journal holds both (values
 * written before encryption was turned on read as they are):
 *
 *   "\x01duro1:" KEY-ID ":" base64(nonce[12] | ciphertext | tag[16])
 *
 * The first byte is a control character, which starts no JSON text and no
 * log line a plugin writes.  The cipher is AES-256-GCM (OpenSSL's EVP),
 * with a random nonce per value: a key seals at most 2^32 values before
 * it should be rotated.  The key id is stored with each value, so a
 * journal holds values under several keys: the active key seals, every
 * listed key opens.
 *
 * The associated data binds a value to where it lives (journal_field and
 * its scope, below): a value copied onto another row or column does not
 * open.  Thread-safe once set up: seal and open only read the keys. */
#ifndef DURO_JOURNAL_CRYPT_H
#define DURO_JOURNAL_CRYPT_H

#include <stddef.h>
#include <stdint.h>

typedef struct journal_crypt journal_crypt;

#define JOURNAL_CRYPT_KEY_BYTES 32
/* A key id: 1 to 32 of [A-Za-z0-9_-]. */
#define JOURNAL_CRYPT_ID_MAX 32
/* What every sealed value starts with (two literals: "\x01d" would be one
 * hex escape). */
#define JOURNAL_CRYPT_PREFIX                                                   \
  "\x01"                                                                       \
  "duro1:"

/* The column a value lives in, and so what its scope is (the rowid and
 * name a seal and its open are given must agree). */
typedef enum journal_field {
  JOURNAL_FIELD_PARAMS,        /* instances.params; name = the workflow */
  JOURNAL_FIELD_OUTPUT,        /* instances.output; rowid */
  JOURNAL_FIELD_ERROR,         /* instances.error; rowid */
  JOURNAL_FIELD_STEP_RESULT,   /* steps.result; rowid, name = the step key */
  JOURNAL_FIELD_STEP_ERROR,    /* steps.error; rowid, name = the step key */
  JOURNAL_FIELD_ATTEMPT_ERROR, /* attempts.error; rowid, name = the key */
  JOURNAL_FIELD_EVENT,         /* events.payload; rowid */
  JOURNAL_FIELD_LOG,           /* logs.message; rowid */
  JOURNAL_FIELD_MESSAGE,       /* messages.body (dead-lettering moves it) */
  JOURNAL_FIELD_MESSAGE_ERROR  /* messages.last_error */
} journal_field;

journal_crypt *journal_crypt_new(void);
void journal_crypt_free(journal_crypt *c);

/* Whether `id` is a key id's syntax. */
int journal_crypt_id_ok(const char *id);
/* A key as its environment variable gives it: 64 hex digits, or the
 * standard base64 of 32 bytes (44 characters, padded); surrounding
 * whitespace is ignored.  0, or -1 when it is neither. */
int journal_crypt_parse_key(const char *text,
                            unsigned char key[JOURNAL_CRYPT_KEY_BYTES]);
/* Adds key `id` (copied): 0, or -1 for a bad or repeated id. */
int journal_crypt_add(journal_crypt *c, const char *id,
                      const unsigned char key[JOURNAL_CRYPT_KEY_BYTES]);
/* The key that seals from now on, one added: 0, or -1. */
int journal_crypt_activate(journal_crypt *c, const char *id);
/* The active key's id (NULL before journal_crypt_activate). */
const char *journal_crypt_active(const journal_crypt *c);
/* The ids of the keys added, in their order, into ids (at most n; c may
 * be NULL): how many there are. */
size_t journal_crypt_ids(const journal_crypt *c, const char **ids, size_t n);

/* Whether a stored value is sealed (NULL is not). */
int journal_crypt_sealed(const char *stored);
/* The id of the key that sealed `stored` into id (room for
 * JOURNAL_CRYPT_ID_MAX + 1): 0, or -1 when it is not a sealed value. */
int journal_crypt_key_of(const char *stored, char *id);

/* Whether `stored` can be opened as far as its key goes: it is not
 * sealed (NULL, plaintext), or sealed under a key c lists (c may be
 * NULL: no keys).  A value under a key taken off the list waits for it
 * to come back (a queue message is not delivered meanwhile). */
int journal_crypt_listed(const journal_crypt *c, const char *stored);

/* `plain` sealed under the active key for field f of the row its scope
 * names (malloc'ed).  NULL for NULL. */
char *journal_crypt_seal(const journal_crypt *c, journal_field f, int64_t rowid,
                         const char *name, const char *plain);
/* `stored` opened: 0 with *plain malloc'ed (NULL when stored is not
 * sealed: it is plaintext, use it as it is).  -1 when it does not open
 * (c may be NULL: no keys), with why in err: the key it names is not
 * listed, or it was altered or moved from another row. */
int journal_crypt_open(const journal_crypt *c, journal_field f, int64_t rowid,
                       const char *name, const char *stored, char **plain,
                       char *err, size_t errlen);

#endif
