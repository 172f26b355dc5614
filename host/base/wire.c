/* wire.c — flat bytes written and read back (wire.h). */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

void wire_put(wire_buf *w, const void *p, size_t n) {
  if (w->len + n > w->cap) {
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + n)
      cap *= 2;
    w->data = xrealloc(w->data, cap);
    w->cap = cap;
  }
  memcpy(w->data + w->len, p, n);
  w->len += n;
}

void wire_put_u8(wire_buf *w, uint8_t v) { wire_put(w, &v, 1); }
void wire_put_u32(wire_buf *w, uint32_t v) { wire_put(w, &v, sizeof v); }
void wire_put_u64(wire_buf *w, uint64_t v) { wire_put(w, &v, sizeof v); }
void wire_put_i64(wire_buf *w, int64_t v) { wire_put(w, &v, sizeof v); }

void wire_put_str(wire_buf *w, const char *s) {
  size_t n = s ? strlen(s) : 0;
  wire_put_u32(w, s ? (uint32_t)n + 1 : 0);
  if (s)
    wire_put(w, s, n + 1);
}

void wire_buf_free(wire_buf *w) {
  free(w->data);
  memset(w, 0, sizeof *w);
}

void wire_reader_init(wire_reader *r, const void *data, size_t len) {
  r->p = data;
  r->end = r->p + len;
  r->bad = 0;
}

int wire_get(wire_reader *r, void *out, size_t n) {
  if (r->bad || (size_t)(r->end - r->p) < n) {
    r->bad = 1;
    memset(out, 0, n);
    return -1;
  }
  memcpy(out, r->p, n);
  r->p += n;
  return 0;
}

uint8_t wire_get_u8(wire_reader *r) {
  uint8_t v;
  wire_get(r, &v, 1);
  return v;
}

uint32_t wire_get_u32(wire_reader *r) {
  uint32_t v;
  wire_get(r, &v, sizeof v);
  return v;
}

uint64_t wire_get_u64(wire_reader *r) {
  uint64_t v;
  wire_get(r, &v, sizeof v);
  return v;
}

int64_t wire_get_i64(wire_reader *r) {
  int64_t v;
  wire_get(r, &v, sizeof v);
  return v;
}

const char *wire_get_strz(wire_reader *r) {
  uint32_t n = wire_get_u32(r);
  if (r->bad || n == 0)
    return NULL;
  /* n - 1 bytes with no NUL among them, then the NUL */
  if ((size_t)(r->end - r->p) < (size_t)n || r->p[n - 1] != '\0' ||
      memchr(r->p, '\0', (size_t)n - 1)) {
    r->bad = 1;
    return NULL;
  }
  const char *s = r->p;
  r->p += n;
  return s;
}

char *wire_get_str(wire_reader *r) {
  const char *s = wire_get_strz(r);
  return s ? xstrdup(s) : NULL;
}

uint32_t wire_get_enum(wire_reader *r, uint32_t count) {
  uint32_t v = wire_get_u32(r);
  if (v >= count)
    r->bad = 1;
  return r->bad ? 0 : v;
}
