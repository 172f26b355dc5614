/* queue_keys.c — which visible messages a keyed push consumer may lease
 * (queue_keys.h): a tally per key of the messages in handlers, those
 * waiting out a retry, and the visible ones met so far. */
#include "queue_keys.h"

#include <jansson.h>
#include <stdlib.h>

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

struct queue_keys {
  char *pointer;
  uint32_t limit;
  strmap lines;     /* key -> key_line */
  key_line **owned; /* every line, to free */
  size_t n_owned;
  int64_t held;
};

queue_keys *queue_keys_new(const char *pointer, uint32_t limit) {
  queue_keys *k = xcalloc(1, sizeof *k);
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
  free(k->owned);
  strmap_free(&k->lines);
  free(k->pointer);
  free(k);
}

/* The line of the body's key, made on first use; NULL when the body has
 * no key (not limited). */
static key_line *line_of(queue_keys *k, const char *body) {
  json_t *doc =
      body ? json_loads(body, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) : NULL;
  json_t *v = doc ? duro_json_pointer_get(doc, k->pointer) : NULL;
  /* The JSON text tells "1" from 1, as the body does. */
  char *key =
      v && !json_is_null(v)
          ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY)
          : NULL;
  json_decref(doc);
  if (!key)
    return NULL;
  key_line *l = strmap_get(&k->lines, key);
  if (l) {
    free(key);
    return l;
  }
  l = xcalloc(1, sizeof *l);
  l->key = key;
  k->owned = xrealloc(k->owned, (k->n_owned + 1) * sizeof *k->owned);
  k->owned[k->n_owned++] = l;
  strmap_put(&k->lines, l->key, l);
  return l;
}

void queue_keys_ahead(queue_keys *k, const char *body, int64_t sent_ms,
                      int64_t seq, int leased) {
  key_line *l = line_of(k, body);
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

int queue_keys_admit(queue_keys *k, const char *body, int64_t sent_ms,
                     int64_t seq) {
  key_line *l = line_of(k, body);
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
