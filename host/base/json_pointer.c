/* json_pointer.c — RFC 6901 pointers into a JSON document
 * (json_pointer.h): "" is the whole document, each "/"-led token an
 * object member or an array index, "~1" a '/' and "~0" a '~' in a
 * token. */
#include "json_pointer.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

int duro_json_pointer_valid(const char *ptr) {
  if (!ptr || (*ptr && *ptr != '/'))
    return 0;
  for (const char *p = ptr; *p; p++)
    if (*p == '~' && p[1] != '0' && p[1] != '1')
      return 0;
  return 1;
}

/* An array index token: "0" or digits without a leading zero. */
static int array_index(const char *tok, size_t *out) {
  if (!*tok || (tok[0] == '0' && tok[1]) || strlen(tok) > 9)
    return 0;
  size_t v = 0;
  for (const char *p = tok; *p; p++) {
    if (*p < '0' || *p > '9')
      return 0;
    v = v * 10 + (size_t)(*p - '0');
  }
  *out = v;
  return 1;
}

json_t *duro_json_pointer_get(json_t *doc, const char *ptr) {
  if (!duro_json_pointer_valid(ptr))
    return NULL;
  char *tok = xcalloc(strlen(ptr) + 1, 1);
  const char *p = ptr;
  while (doc && *p == '/') {
    size_t n = 0;
    for (p++; *p && *p != '/'; p++) /* ~1 is '/', ~0 is '~' */
      tok[n++] = *p == '~' ? (*++p == '1' ? '/' : '~') : *p;
    tok[n] = '\0';
    size_t i;
    if (json_is_object(doc))
      doc = json_object_get(doc, tok);
    else if (json_is_array(doc) && array_index(tok, &i))
      doc = json_array_get(doc, i);
    else
      doc = NULL;
  }
  free(tok);
  return doc;
}
