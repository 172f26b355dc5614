/* map.h — two small open-addressing hash maps: int64 → pointer (the
 * engine's in-flight instances by rowid) and string → pointer (an
 * activation's steps by key).  Keys of a strmap are borrowed: they must
 * outlive their entry. */
#ifndef DURO_MAP_H
#define DURO_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct idmap {
  int64_t *keys;
  void **vals; /* NULL = empty slot */
  size_t cap, len, tombs;
} idmap;

void *idmap_get(const idmap *m, int64_t key);
void idmap_put(idmap *m, int64_t key, void *val); /* val != NULL */
void *idmap_del(idmap *m, int64_t key);
/* Calls fn for every entry (any order); fn must not change the map. */
void idmap_each(const idmap *m, void (*fn)(void *ctx, int64_t key, void *val),
                void *ctx);
void idmap_free(idmap *m);

typedef struct strmap {
  const char **keys;
  void **vals;
  size_t cap, len;
} strmap;

/* FNV-1a 64 of a string: strmap's hash, and a key for an idmap of
 * chains of strings. */
int64_t map_hash_str(const char *s);

void *strmap_get(const strmap *m, const char *key);
void strmap_put(strmap *m, const char *key, void *val); /* replaces */
void strmap_free(strmap *m);

#endif
