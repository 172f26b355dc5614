/* journal_crypt.c — the keys of storage.encryption and one value sealed
 * or opened with AES-256-GCM (journal_crypt.h).  The cipher is OpenSSL's;
 * this file only lays out the bytes around it. */
#include "journal_crypt.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define NONCE_BYTES 12
#define TAG_BYTES 16
#define PREFIX_LEN (sizeof JOURNAL_CRYPT_PREFIX - 1)
/* The keys a configuration lists: a handful. */
#define MAX_KEYS 16

typedef struct crypt_key {
  char id[JOURNAL_CRYPT_ID_MAX + 1];
  unsigned char key[JOURNAL_CRYPT_KEY_BYTES];
  /* The cipher set up with the key once, each value's context a copy
   * given its own nonce: no key schedule or cipher lookup a value.  Only
   * ever read once made (copies are made from any thread). */
  EVP_CIPHER_CTX *enc, *dec;
} crypt_key;

struct journal_crypt {
  crypt_key keys[MAX_KEYS];
  size_t n;
  const crypt_key *active;
};

journal_crypt *journal_crypt_new(void) {
  return xcalloc(1, sizeof(journal_crypt));
}

void journal_crypt_free(journal_crypt *c) {
  if (!c)
    return;
  for (size_t i = 0; i < c->n; i++) {
    EVP_CIPHER_CTX_free(c->keys[i].enc);
    EVP_CIPHER_CTX_free(c->keys[i].dec);
  }
  OPENSSL_cleanse(c, sizeof *c); /* the keys do not outlive it in memory */
  free(c);
}

int journal_crypt_id_ok(const char *id) {
  size_t n = strlen(id);
  return n >= 1 && n <= JOURNAL_CRYPT_ID_MAX &&
         strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789_-") == n;
}

static int hex_digit(int ch) {
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  ch = tolower(ch);
  return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

int journal_crypt_parse_key(const char *text,
                            unsigned char key[JOURNAL_CRYPT_KEY_BYTES]) {
  while (isspace((unsigned char)*text))
    text++;
  size_t n = strlen(text);
  while (n > 0 && isspace((unsigned char)text[n - 1]))
    n--;
  if (n == 2 * JOURNAL_CRYPT_KEY_BYTES) {
    for (size_t i = 0; i < JOURNAL_CRYPT_KEY_BYTES; i++) {
      int hi = hex_digit((unsigned char)text[2 * i]);
      int lo = hex_digit((unsigned char)text[2 * i + 1]);
      if (hi < 0 || lo < 0)
        return -1;
      key[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
  }
  /* base64 of 32 bytes: 44 characters, the last one '=' */
  if (n != 44 || text[43] != '=' || text[42] == '=')
    return -1;
  unsigned char out[33];
  if (EVP_DecodeBlock(out, (const unsigned char *)text, 44) != 33)
    return -1;
  memcpy(key, out, JOURNAL_CRYPT_KEY_BYTES);
  OPENSSL_cleanse(out, sizeof out);
  return 0;
}

static const crypt_key *find_key(const journal_crypt *c, const char *id,
                                 size_t id_len) {
  for (size_t i = 0; c && i < c->n; i++)
    if (strlen(c->keys[i].id) == id_len &&
        memcmp(c->keys[i].id, id, id_len) == 0)
      return &c->keys[i];
  return NULL;
}

int journal_crypt_add(journal_crypt *c, const char *id,
                      const unsigned char key[JOURNAL_CRYPT_KEY_BYTES]) {
  if (!journal_crypt_id_ok(id) || find_key(c, id, strlen(id)) ||
      c->n == MAX_KEYS)
    return -1;
  crypt_key *k = &c->keys[c->n];
  snprintf(k->id, sizeof k->id, "%s", id);
  memcpy(k->key, key, JOURNAL_CRYPT_KEY_BYTES);
  k->enc = EVP_CIPHER_CTX_new();
  k->dec = EVP_CIPHER_CTX_new();
  if (!k->enc || !k->dec ||
      EVP_EncryptInit_ex(k->enc, EVP_aes_256_gcm(), NULL, key, NULL) != 1 ||
      EVP_DecryptInit_ex(k->dec, EVP_aes_256_gcm(), NULL, key, NULL) != 1) {
    EVP_CIPHER_CTX_free(k->enc);
    EVP_CIPHER_CTX_free(k->dec);
    OPENSSL_cleanse(k, sizeof *k);
    return -1;
  }
  c->n++;
  return 0;
}

int journal_crypt_activate(journal_crypt *c, const char *id) {
  const crypt_key *k = find_key(c, id, strlen(id));
  if (!k)
    return -1;
  c->active = k;
  return 0;
}

const char *journal_crypt_active(const journal_crypt *c) {
  return c && c->active ? c->active->id : NULL;
}

size_t journal_crypt_ids(const journal_crypt *c, const char **ids, size_t n) {
  size_t have = c ? c->n : 0;
  for (size_t i = 0; i < have && i < n; i++)
    ids[i] = c->keys[i].id;
  return have;
}

int journal_crypt_sealed(const char *stored) {
  return stored && stored[0] == JOURNAL_CRYPT_PREFIX[0] &&
         strncmp(stored, JOURNAL_CRYPT_PREFIX, PREFIX_LEN) == 0;
}

/* The key id of a sealed value: where it starts and how long it is. */
static int split(const char *stored, const char **id, size_t *id_len,
                 const char **body) {
  if (!journal_crypt_sealed(stored))
    return -1;
  *id = stored + PREFIX_LEN;
  const char *colon = strchr(*id, ':');
  if (!colon || colon == *id || (size_t)(colon - *id) > JOURNAL_CRYPT_ID_MAX)
    return -1;
  *id_len = (size_t)(colon - *id);
  *body = colon + 1;
  return 0;
}

int journal_crypt_key_of(const char *stored, char *id) {
  const char *p, *body;
  size_t n;
  if (split(stored, &p, &n, &body) != 0)
    return -1;
  memcpy(id, p, n);
  id[n] = '\0';
  return 0;
}

int journal_crypt_listed(const journal_crypt *c, const char *stored) {
  const char *id, *body;
  size_t n;
  if (!journal_crypt_sealed(stored))
    return 1;
  /* a malformed one opens under no key: nothing to wait for */
  return split(stored, &id, &n, &body) != 0 || find_key(c, id, n) != NULL;
}

/* The associated data: the format, the key, the field and its row, so a
 * value opens only where it was sealed.  Malloc'ed, *len bytes. */
static unsigned char *associated(const char *key_id, journal_field f,
                                 int64_t rowid, const char *name, int *len) {
  char *ad = xasprintf("duro1\n%s\n%d\n%lld\n%s", key_id, (int)f,
                       (long long)rowid, name ? name : "");
  *len = (int)strlen(ad);
  return (unsigned char *)ad;
}

char *journal_crypt_seal(const journal_crypt *c, journal_field f, int64_t rowid,
                         const char *name, const char *plain) {
  if (!plain)
    return NULL;
  const crypt_key *k = c->active;
  size_t n = strlen(plain);
  if (n > INT32_MAX - NONCE_BYTES - TAG_BYTES) {
    fprintf(stderr, "duro: a value of %zu bytes is too large to encrypt\n", n);
    abort();
  }
  size_t raw_len = NONCE_BYTES + n + TAG_BYTES;
  unsigned char *raw = xmalloc(raw_len);
  int ad_len, out_len = 0, fin_len = 0;
  unsigned char *ad = associated(k->id, f, rowid, name, &ad_len);
  EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
  /* A failure here is the library's or the machine's (no entropy, no
   * memory): no value may be stored in the clear in its place. */
  if (!ctx || RAND_bytes(raw, NONCE_BYTES) != 1 ||
      EVP_CIPHER_CTX_copy(ctx, k->enc) != 1 ||
      EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, raw) != 1 ||
      EVP_EncryptUpdate(ctx, NULL, &out_len, ad, ad_len) != 1 ||
      EVP_EncryptUpdate(ctx, raw + NONCE_BYTES, &out_len,
                        (const unsigned char *)plain, (int)n) != 1 ||
      EVP_EncryptFinal_ex(ctx, raw + NONCE_BYTES + out_len, &fin_len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_BYTES,
                          raw + NONCE_BYTES + n) != 1) {
    fprintf(stderr, "duro: cannot encrypt a value (OpenSSL failed)\n");
    abort();
  }
  EVP_CIPHER_CTX_free(ctx);
  free(ad);
  size_t id_len = strlen(k->id);
  size_t b64_len = 4 * ((raw_len + 2) / 3);
  char *out = xmalloc(PREFIX_LEN + id_len + 1 + b64_len + 1);
  char *p = out;
  memcpy(p, JOURNAL_CRYPT_PREFIX, PREFIX_LEN);
  p += PREFIX_LEN;
  memcpy(p, k->id, id_len);
  p += id_len;
  *p++ = ':';
  EVP_EncodeBlock((unsigned char *)p, raw, (int)raw_len); /* NUL-ended */
  free(raw);
  return out;
}

int journal_crypt_open(const journal_crypt *c, journal_field f, int64_t rowid,
                       const char *name, const char *stored, char **plain,
                       char *err, size_t errlen) {
  *plain = NULL;
  if (!journal_crypt_sealed(stored))
    return 0;
  const char *id, *body;
  size_t id_len;
  if (split(stored, &id, &id_len, &body) != 0) {
    snprintf(err, errlen, "an encrypted value is malformed (no key id)");
    return -1;
  }
  const crypt_key *k = find_key(c, id, id_len);
  if (!k) {
    snprintf(err, errlen,
             "a value is encrypted under key \"%.*s\", which "
             "storage.encryption.keys does not list",
             (int)id_len, id);
    return -1;
  }
  size_t b64_len = strlen(body);
  size_t pad = b64_len >= 2
                   ? (body[b64_len - 1] == '=') + (body[b64_len - 2] == '=')
                   : 0;
  unsigned char *raw = xmalloc(b64_len / 4 * 3 + 3);
  int got =
      b64_len % 4 == 0 && b64_len <= INT32_MAX
          ? EVP_DecodeBlock(raw, (const unsigned char *)body, (int)b64_len)
          : -1;
  size_t raw_len = got < 0 ? 0 : (size_t)got - pad;
  if (got < 0 || raw_len < NONCE_BYTES + TAG_BYTES) {
    free(raw);
    snprintf(err, errlen, "a value encrypted under key \"%s\" is malformed",
             k->id);
    return -1;
  }
  size_t n = raw_len - NONCE_BYTES - TAG_BYTES;
  char *out = xmalloc(n + 1);
  int ad_len, out_len = 0, fin_len = 0;
  unsigned char *ad = associated(k->id, f, rowid, name, &ad_len);
  EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
  int ok =
      ctx && EVP_CIPHER_CTX_copy(ctx, k->dec) == 1 &&
      EVP_DecryptInit_ex(ctx, NULL, NULL, NULL, raw) == 1 &&
      EVP_DecryptUpdate(ctx, NULL, &out_len, ad, ad_len) == 1 &&
      EVP_DecryptUpdate(ctx, (unsigned char *)out, &out_len, raw + NONCE_BYTES,
                        (int)n) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_BYTES,
                          raw + NONCE_BYTES + n) == 1 &&
      EVP_DecryptFinal_ex(ctx, (unsigned char *)out + out_len, &fin_len) == 1;
  EVP_CIPHER_CTX_free(ctx);
  free(ad);
  free(raw);
  /* A plaintext holds no NUL: one would cut the text a reader sees. */
  if (!ok || memchr(out, '\0', n)) {
    free(out);
    snprintf(err, errlen,
             "a value encrypted under key \"%s\" does not decrypt: it was "
             "altered, or moved from another row",
             k->id);
    return -1;
  }
  out[n] = '\0';
  *plain = out;
  return 0;
}
