/* params_key.c — see params_key.h. */
#include "params_key.h"

#include <jansson.h>
#include <string.h>

#include "json_pointer.h"

char *params_key_value(const char *pointer, const char *params) {
  json_t *doc = params ? json_loads(params, JSON_DECODE_ANY, NULL) : NULL;
  json_t *v = doc ? duro_json_pointer_get(doc, pointer) : NULL;
  char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  json_decref(doc);
  return text;
}

int64_t params_key_hash(const char *a, const char *b) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (const char *s = a; s && *s; s++) {
    h ^= (unsigned char)*s;
    h *= UINT64_C(0x100000001b3);
  }
  h ^= '\n';
  h *= UINT64_C(0x100000001b3);
  for (const char *s = b; s && *s; s++) {
    h ^= (unsigned char)*s;
    h *= UINT64_C(0x100000001b3);
  }
  return (int64_t)h;
}

params_key_node *params_keys_find(const idmap *m, const char *value) {
  for (params_key_node *n = idmap_get(m, params_key_hash(value, NULL)); n;
       n = n->next)
    if (!strcmp(n->value, value))
      return n;
  return NULL;
}

void params_keys_add(idmap *m, params_key_node *n) {
  int64_t h = params_key_hash(n->value, NULL);
  n->next = idmap_get(m, h);
  idmap_put(m, h, n);
}

void params_keys_remove(idmap *m, params_key_node *n) {
  int64_t h = params_key_hash(n->value, NULL);
  params_key_node *head = idmap_get(m, h);
  if (head == n) {
    if (n->next)
      idmap_put(m, h, n->next);
    else
      idmap_del(m, h);
    return;
  }
  for (params_key_node *p = head; p; p = p->next)
    if (p->next == n) {
      p->next = n->next;
      return;
    }
}
