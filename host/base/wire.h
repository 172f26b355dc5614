/* wire.h — flat bytes between two processes of one binary on one
 * machine: a growing buffer to append fields to, and a reader that never
 * trusts what it reads.
 *
 * Host byte order; a string is its length + 1 (0 for NULL, so NULL and
 * "" differ), its bytes and a NUL, so that a reader may borrow it in
 * place (wire_get_strz) or copy it (wire_get_str).  A short or malformed
 * buffer makes the reader bad from then on: every later read returns
 * zero or NULL, never a byte past the end (the bytes may come from a
 * process that died mid-write, or from plugin code that scribbled on
 * them). */
#ifndef DURO_WIRE_H
#define DURO_WIRE_H

#include <stddef.h>
#include <stdint.h>

typedef struct wire_buf {
  char *data;
  size_t len, cap;
} wire_buf;

void wire_put(wire_buf *w, const void *p, size_t n);
void wire_put_u8(wire_buf *w, uint8_t v);
void wire_put_u32(wire_buf *w, uint32_t v);
void wire_put_u64(wire_buf *w, uint64_t v);
void wire_put_i64(wire_buf *w, int64_t v);
void wire_put_str(wire_buf *w, const char *s);
void wire_buf_free(wire_buf *w);

typedef struct wire_reader {
  const char *p, *end;
  int bad; /* a read ran short or found garbage */
} wire_reader;

void wire_reader_init(wire_reader *r, const void *data, size_t len);
int wire_get(wire_reader *r, void *out, size_t n);
uint8_t wire_get_u8(wire_reader *r);
uint32_t wire_get_u32(wire_reader *r);
uint64_t wire_get_u64(wire_reader *r);
int64_t wire_get_i64(wire_reader *r);
/* A malloc'ed copy (NULL for NULL, or on a bad read). */
char *wire_get_str(wire_reader *r);
/* The string in place, valid while the bytes are (NULL for NULL, or on a
 * bad read). */
const char *wire_get_strz(wire_reader *r);
/* An enum's value, checked against its count. */
uint32_t wire_get_enum(wire_reader *r, uint32_t count);

#endif
