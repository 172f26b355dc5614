/* otlp_sink.c — the local OTLP/HTTP sink of W1T (otlp_sink.h): one
 * connection at a time, each request read whole (its head, then
 * Content-Length bytes), answered 200 with an empty body, and the
 * connection closed, as the exporter opens one a post. */
#include "otlp_sink.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* The spans in a body: its "spanId" members. */
static uint64_t count_spans(const char *body, size_t len) {
  static const char key[] = "\"spanId\"";
  uint64_t n = 0;
  for (const char *p = body;
       (p = memmem(p, len - (size_t)(p - body), key, sizeof key - 1));
       p += sizeof key - 1)
    n++;
  return n;
}

/* Reads one request off fd and answers it; -1 when the peer went. */
static int serve(otlp_sink *s, int fd) {
  size_t cap = 1 << 16, len = 0, head = 0, want = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (len == cap)
      buf = realloc(buf, cap *= 2);
    ssize_t got = read(fd, buf + len, cap - len);
    if (got <= 0) {
      free(buf);
      return -1;
    }
    len += (size_t)got;
    if (!head) {
      char *end = memmem(buf, len, "\r\n\r\n", 4);
      if (!end)
        continue;
      head = (size_t)(end - buf) + 4;
      for (char *l = buf; l < end; l = strstr(l, "\r\n") + 2)
        if (!strncasecmp(l, "content-length:", 15))
          want = (size_t)strtoull(l + 15, NULL, 10);
    }
    if (len >= head + want)
      break;
  }
  __atomic_add_fetch(&s->posts, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&s->bytes, want, __ATOMIC_RELAXED);
  __atomic_add_fetch(&s->spans, count_spans(buf + head, want),
                     __ATOMIC_RELAXED);
  free(buf);
  static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Type: "
                           "application/json\r\nContent-Length: 2\r\n"
                           "Connection: close\r\n\r\n{}";
  return write(fd, ok, sizeof ok - 1) == (ssize_t)(sizeof ok - 1) ? 0 : -1;
}

static void *run(void *arg) {
  otlp_sink *s = arg;
  while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    if (poll(&p, 1, 100) <= 0)
      continue;
    int c = accept(s->fd, NULL, NULL);
    if (c < 0)
      continue;
    serve(s, c);
    close(c);
  }
  return NULL;
}

int otlp_sink_start(otlp_sink *s) {
  memset(s, 0, sizeof *s);
  s->fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(s->fd, 16) != 0 ||
      getsockname(s->fd, (struct sockaddr *)&a, &alen) != 0 ||
      pthread_create(&s->thread, NULL, run, s) != 0) {
    if (s->fd >= 0)
      close(s->fd);
    return -1;
  }
  s->port = ntohs(a.sin_port);
  return 0;
}

void otlp_sink_stop(otlp_sink *s) {
  __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
  pthread_join(s->thread, NULL);
  close(s->fd);
}
