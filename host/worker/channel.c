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
  wire_buf_free(&c->out);
  memset(c, 0, sizeof *c);
  c->fd = -1;
}

void channel_begin(wire_buf *m, uint32_t kind, uint64_t act) {
  m->len = 0;
  wire_put_u32(m, 0); /* the length, filled in by channel_send */
  wire_put_u32(m, kind);
  wire_put_u64(m, act);
}

static int write_all(int fd, const char *p, size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t k = send(fd, p + done, len - done, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return -1;
    done += (size_t)k;
  }
  return 0;
}

static void seal(wire_buf *m) {
  uint32_t n = (uint32_t)(m->len - sizeof n);
  memcpy(m->data, &n, sizeof n);
}

int channel_send(channel *c, wire_buf *m) {
  seal(m);
  return write_all(c->fd, m->data, m->len);
}

/* Appends len bytes at p to what is queued to go. */
static void queue_bytes(channel *c, const char *p, size_t len) {
  if (c->out_off && c->out_off >= c->out.len / 2) {
    /* what was written goes, so a busy channel's queue does not grow */
    memmove(c->out.data, c->out.data + c->out_off, c->out.len - c->out_off);
    c->out.len -= c->out_off;
    c->out_off = 0;
  }
  wire_put(&c->out, p, len);
}

void channel_queue(channel *c, wire_buf *m) {
  seal(m);
  queue_bytes(c, m->data, m->len);
}

int channel_flush(channel *c) {
  if (c->out.len == c->out_off) {
    c->out.len = c->out_off = 0;
    return 0;
  }
  int rc = write_all(c->fd, c->out.data + c->out_off, c->out.len - c->out_off);
  c->out.len = c->out_off = 0;
  return rc;
}

int channel_write_some(channel *c) {
  while (c->out_off < c->out.len) {
    ssize_t k = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    if (k <= 0)
      return -1;
    c->out_off += (size_t)k;
  }
  c->out.len = c->out_off = 0;
  return 1;
}

int channel_pending(const channel *c) { return c->out_off < c->out.len; }

int channel_post(channel *c, wire_buf *m) {
  if (channel_pending(c)) { /* behind what waits: in order */
    channel_queue(c, m);
    return channel_write_some(c) < 0 ? -1 : 0;
  }
  /* Nothing waits (nearly always): written from m, and only what the
   * socket did not take is copied into the queue. */
  seal(m);
  size_t sent = 0;
  while (sent < m->len) {
    ssize_t k =
        send(c->fd, m->data + sent, m->len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    if (k <= 0)
      return -1;
    sent += (size_t)k;
  }
  if (sent < m->len)
    queue_bytes(c, m->data + sent, m->len - sent);
  return 0;
}

int channel_fill(channel *c, int block) {
  if (c->fd < 0)
    return -1;
  if (c->off > 0 && c->off == c->len)
    c->off = c->len = 0;
  if (c->len == c->cap) {
    /* full: move what is left to the front, or grow */
    if (c->off > 0) {
      memmove(c->buf, c->buf + c->off, c->len - c->off);
      c->len -= c->off;
      c->off = 0;
    } else {
      c->cap = c->cap ? c->cap * 2 : 64 * 1024;
      c->buf = xrealloc(c->buf, c->cap);
    }
  }
  for (;;) {
    ssize_t k =
        recv(c->fd, c->buf + c->len, c->cap - c->len, block ? 0 : MSG_DONTWAIT);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && !block && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    if (k <= 0)
      return -1;
    c->len += (size_t)k;
    return 1;
  }
}

int channel_take(channel *c, uint32_t *kind, uint64_t *act, wire_reader *r) {
  size_t have = c->len - c->off;
  uint32_t n;
  if (have < sizeof n)
    return 0;
  memcpy(&n, c->buf + c->off, sizeof n);
  if (n < HEADER - sizeof n || n > CHANNEL_MAX_FRAME ||
      (c->max_frame && n > c->max_frame)) {
    c->refused = n;
    return -1;
  }
  if (have < sizeof n + n) {
    /* make room for the whole frame, so that a fill can complete it */
    if (sizeof n + n > c->cap - c->off) {
      memmove(c->buf, c->buf + c->off, have);
      c->len = have;
      c->off = 0;
      if (sizeof n + n > c->cap) {
        size_t cap = c->cap;
        while (cap < sizeof n + n)
          cap *= 2;
        c->buf = xrealloc(c->buf, cap);
        c->cap = cap;
      }
    }
    return 0;
  }
  const char *p = c->buf + c->off + sizeof n;
  memcpy(kind, p, sizeof *kind);
  memcpy(act, p + sizeof *kind, sizeof *act);
  wire_reader_init(r, p + HEADER - sizeof n, n - (HEADER - sizeof n));
  c->off += sizeof n + n;
  return 1;
}
