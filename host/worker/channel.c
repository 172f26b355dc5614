/* channel.c — framed messages over a stream socket (channel.h). */
#include "channel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"

#define HEADER (sizeof(uint32_t) * 2 + sizeof(uint64_t))

void channel_init(channel *c, int fd) {
  memset(c, 0, sizeof *c);
  c->fd = fd;
}

void channel_close(channel *c) {
  if (c->fd >= 0)
    close(c->fd);
  free(c->buf);
  memset(c, 0, sizeof *c);
  c->fd = -1;
}

void channel_begin(wire_buf *m, uint32_t kind, uint64_t act) {
  m->len = 0;
  wire_put_u32(m, 0); /* the length, filled in by channel_send */
  wire_put_u32(m, kind);
  wire_put_u64(m, act);
}

int channel_send(channel *c, wire_buf *m) {
  uint32_t n = (uint32_t)(m->len - sizeof n);
  memcpy(m->data, &n, sizeof n);
  size_t done = 0;
  while (done < m->len) {
    ssize_t k = send(c->fd, m->data + done, m->len - done, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return -1;
    done += (size_t)k;
  }
  return 0;
}

/* Reads until at least `want` bytes are buffered past off. */
static int fill(channel *c, size_t want) {
  if (c->off > 0 && c->off == c->len)
    c->off = c->len = 0;
  if (c->len - c->off >= want)
    return 0;
  if (c->off + want > c->cap) {
    /* move what is left to the front, then grow if still short */
    if (c->buf)
      memmove(c->buf, c->buf + c->off, c->len - c->off);
    c->len -= c->off;
    c->off = 0;
    if (want > c->cap) {
      size_t cap = c->cap ? c->cap : 64 * 1024;
      while (cap < want)
        cap *= 2;
      c->buf = xrealloc(c->buf, cap);
      c->cap = cap;
    }
  }
  while (c->len - c->off < want) {
    ssize_t k = read(c->fd, c->buf + c->len, c->cap - c->len);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return -1;
    c->len += (size_t)k;
  }
  return 0;
}

int channel_recv(channel *c, uint32_t *kind, uint64_t *act, wire_reader *r) {
  if (c->fd < 0 || fill(c, sizeof(uint32_t)) != 0)
    return -1;
  uint32_t n;
  memcpy(&n, c->buf + c->off, sizeof n);
  if (n < HEADER - sizeof n || n > CHANNEL_MAX_FRAME ||
      fill(c, sizeof n + n) != 0)
    return -1;
  const char *p = c->buf + c->off + sizeof n;
  memcpy(kind, p, sizeof *kind);
  memcpy(act, p + sizeof *kind, sizeof *act);
  wire_reader_init(r, p + HEADER - sizeof n, n - (HEADER - sizeof n));
  c->off += sizeof n + n;
  return 0;
}
