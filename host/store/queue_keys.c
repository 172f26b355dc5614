/* queue_keys.c — which visible messages a keyed push consumer may lease
 * (queue_keys.h): a tally per key of the messages in handlers, those
 * waiting out a retry, and the visible ones met so far; and the keys
 * computed from bodies, for the caller to store. */
#include "queue_keys.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "journal_crypt.h"
#include "json_pointer.h"
#include "map.h"
#include "util.h"

/* A message waiting out a retry: its place in its key's line. */
typedef struct place {
  int64_t sent_ms, seq;
} place;

typedef struct key_line {
  char *key;       /* the value's JSON text; the map's key */
  uint32_t leased; /* in a handler */
  uint32_t met;    /* visible ones admitted or held so far */
  place *retrying; /* waiting out a retry's delay */
  size_t n_retrying;
} key_line;

/* A key computed from a body, to be stored with its message. */
typedef struct fill {
  int64_t seq;
  char *key;
} fill;

struct queue_keys {
  char *pointer;
  uint32_t limit;
  const journal_crypt *crypt;
  strmap lines;     /* key -> key_line */
  key_line **owned; /* every line, to free */
  size_t n_owned, cap_owned;
  fill *fills;
  size_t n_fills, cap_fills;
  int64_t held;
};

queue_keys *queue_keys_new(const char *pointer, uint32_t limit,
                           const journal_crypt *crypt) {
  queue_keys *k = xcalloc(1, sizeof *k);
  k->crypt = crypt;
  k->pointer = xstrdup(pointer);
  k->limit = limit ? limit : 1;
  return k;
}

void queue_keys_free(queue_keys *k) {
  if (!k)
    return;
  for (size_t i = 0; i < k->n_owned; i++) {
    free(k->owned[i]->key);
    free(k->owned[i]->retrying);
    free(k->owned[i]);
  }
  for (size_t i = 0; i < k->n_fills; i++)
    free(k->fills[i].key);
  free(k->fills);
  free(k->owned);
  strmap_free(&k->lines);
  free(k->pointer);
  free(k);
}

/* The JSON text of the value at the pointer, or QUEUE_KEY_NONE. */
static char *key_of(const char *pointer, const char *body) {
  json_t *doc =
      body ? json_loads(body, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) : NULL;
  json_t *v = doc ? duro_json_pointer_get(doc, pointer) : NULL;
  /* The JSON text tells "1" from 1, as the body does. */
  char *key =
      v && !json_is_null(v)
          ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY)
          : NULL;
  json_decref(doc);
  return key ? key : xstrdup(QUEUE_KEY_NONE);
}

const char *queue_keys_key(queue_keys *k, int64_t seq, const char *stored,
                           const char *body) {
  if (stored)
    return stored;
  if (k->n_fills == k->cap_fills) { /* a first lease may fill thousands */
    k->cap_fills = k->cap_fills ? 2 * k->cap_fills : 16;
    k->fills = xrealloc(k->fills, k->cap_fills * sizeof *k->fills);
  }
  char *plain = NULL, err[200];
  if (journal_crypt_sealed(body) &&
      journal_crypt_open(k->crypt, JOURNAL_FIELD_MESSAGE, 0, NULL, body, &plain,
                         err, sizeof err) != 0)
    body = NULL; /* not delivered either (journal_seal_results) */
  k->fills[k->n_fills] = (fill){seq, key_of(k->pointer, plain ? plain : body)};
  free(plain);
  return k->fills[k->n_fills++].key;
}

int queue_keys_fill(const queue_keys *k, size_t i, int64_t *seq,
                    const char **key) {
  if (i >= k->n_fills)
    return 0;
  *seq = k->fills[i].seq;
  *key = k->fills[i].key;
  return 1;
}

/* The line of a key, made on first use; NULL for a message without one
 * (not limited). */
static key_line *line_of(queue_keys *k, const char *key) {
  if (!key || !strcmp(key, QUEUE_KEY_NONE))
    return NULL;
  key_line *l = strmap_get(&k->lines, key);
  if (l)
    return l;
  l = xcalloc(1, sizeof *l);
  l->key = xstrdup(key);
  if (k->n_owned == k->cap_owned) {
    k->cap_owned = k->cap_owned ? 2 * k->cap_owned : 16;
    k->owned = xrealloc(k->owned, k->cap_owned * sizeof *k->owned);
  }
  k->owned[k->n_owned++] = l;
  strmap_put(&k->lines, l->key, l);
  return l;
}

void queue_keys_ahead(queue_keys *k, const char *key, int64_t sent_ms,
                      int64_t seq, int leased) {
  key_line *l = line_of(k, key);
  if (!l)
    return;
  if (leased) {
    l->leased++;
    return;
  }
  l->retrying =
      xrealloc(l->retrying, (l->n_retrying + 1) * sizeof *l->retrying);
  l->retrying[l->n_retrying++] = (place){sent_ms, seq};
}

char *queue_keys_full(const queue_keys *k) {
  json_t *full = json_array();
  for (size_t i = 0; i < k->n_owned; i++)
    if (k->owned[i]->leased >= k->limit)
      json_array_append_new(full, json_string(k->owned[i]->key));
  char *s = json_dumps(full, JSON_COMPACT);
  json_decref(full);
  return s;
}

int queue_keys_admit(queue_keys *k, const char *key, int64_t sent_ms,
                     int64_t seq) {
  key_line *l = line_of(k, key);
  if (!l)
    return 1;
  /* In handlers, then the ones ahead of it in the line: retrying ones
   * sent earlier, and the visible ones met before it. */
  uint64_t before = (uint64_t)l->leased + l->met;
  for (size_t i = 0; i < l->n_retrying && before < k->limit; i++) {
    const place *p = &l->retrying[i];
    before += p->sent_ms < sent_ms || (p->sent_ms == sent_ms && p->seq < seq);
  }
  l->met++;
  if (before < k->limit)
    return 1;
  k->held++;
  return 0;
}

int64_t queue_keys_held(const queue_keys *k) { return k->held; }
