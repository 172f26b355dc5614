/* map.c — linear-probing hash maps.  idmap deletes with tombstones (a slot
 * whose value is the TOMB marker) and rebuilds when they pile up; strmap
 * never deletes, since an activation's map dies with the activation. */
#include "map.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

static char tomb_marker;
#define TOMB ((void *)&tomb_marker)

static size_t hash64(int64_t k) {
  uint64_t x = (uint64_t)k;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x;
}

static void idmap_grow(idmap *m) {
  size_t old_cap = m->cap;
  int64_t *old_keys = m->keys;
  void **old_vals = m->vals;
  if (m->len * 2 >= m->cap)
    m->cap = m->cap ? m->cap * 2 : 64;
  m->keys = xcalloc(m->cap, sizeof *m->keys);
  m->vals = xcalloc(m->cap, sizeof *m->vals);
  m->len = m->tombs = 0;
  for (size_t i = 0; i < old_cap; i++)
    if (old_vals[i] && old_vals[i] != TOMB)
      idmap_put(m, old_keys[i], old_vals[i]);
  free(old_keys);
  free(old_vals);
}

void *idmap_get(const idmap *m, int64_t key) {
  if (!m->cap)
    return NULL;
  for (size_t i = hash64(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->vals[i])
      return NULL;
    if (m->vals[i] != TOMB && m->keys[i] == key)
      return m->vals[i];
  }
}

void idmap_put(idmap *m, int64_t key, void *val) {
  if ((m->len + m->tombs + 1) * 4 >= m->cap * 3)
    idmap_grow(m);
  size_t slot = SIZE_MAX;
  for (size_t i = hash64(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->vals[i]) {
      if (slot == SIZE_MAX)
        slot = i;
      break;
    }
    if (m->vals[i] == TOMB) {
      if (slot == SIZE_MAX)
        slot = i;
      continue;
    }
    if (m->keys[i] == key) {
      m->vals[i] = val;
      return;
    }
  }
  if (m->vals[slot] == TOMB)
    m->tombs--;
  m->keys[slot] = key;
  m->vals[slot] = val;
  m->len++;
}

void *idmap_del(idmap *m, int64_t key) {
  if (!m->cap)
    return NULL;
  for (size_t i = hash64(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->vals[i])
      return NULL;
    if (m->vals[i] != TOMB && m->keys[i] == key) {
      void *v = m->vals[i];
      m->vals[i] = TOMB;
      m->len--;
      m->tombs++;
      return v;
    }
  }
}

void idmap_each(const idmap *m, void (*fn)(void *ctx, int64_t key, void *val),
                void *ctx) {
  for (size_t i = 0; i < m->cap; i++)
    if (m->vals[i] && m->vals[i] != TOMB)
      fn(ctx, m->keys[i], m->vals[i]);
}

void idmap_free(idmap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

int64_t map_hash_str(const char *s) {
  uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 0x100000001b3ULL;
  }
  return (int64_t)h;
}

static size_t hash_str(const char *s) { return (size_t)map_hash_str(s); }

static void strmap_grow(strmap *m) {
  size_t old_cap = m->cap;
  const char **old_keys = m->keys;
  void **old_vals = m->vals;
  m->cap = m->cap ? m->cap * 2 : 32;
  m->keys = xcalloc(m->cap, sizeof *m->keys);
  m->vals = xcalloc(m->cap, sizeof *m->vals);
  m->len = 0;
  for (size_t i = 0; i < old_cap; i++)
    if (old_keys[i])
      strmap_put(m, old_keys[i], old_vals[i]);
  free(old_keys);
  free(old_vals);
}

void *strmap_get(const strmap *m, const char *key) {
  if (!m->cap)
    return NULL;
  for (size_t i = hash_str(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->keys[i])
      return NULL;
    if (strcmp(m->keys[i], key) == 0)
      return m->vals[i];
  }
}

void strmap_put(strmap *m, const char *key, void *val) {
  if ((m->len + 1) * 4 >= m->cap * 3)
    strmap_grow(m);
  size_t i = hash_str(key) & (m->cap - 1);
  for (; m->keys[i]; i = (i + 1) & (m->cap - 1))
    if (strcmp(m->keys[i], key) == 0) {
      m->vals[i] = val;
      return;
    }
  m->keys[i] = key;
  m->vals[i] = val;
  m->len++;
}

void strmap_free(strmap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}
