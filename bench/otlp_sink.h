/* otlp_sink.h — a local OTLP/HTTP sink for W1T: a thread that answers 200
 * to every POST on 127.0.0.1 and counts what it took, so that the traced
 * run pays for encoding and posting its spans, and for nothing a real
 * collector would add. */
#ifndef DURO_BENCH_OTLP_SINK_H
#define DURO_BENCH_OTLP_SINK_H

#include <pthread.h>
#include <stdint.h>

typedef struct otlp_sink {
  int fd;
  int port;
  pthread_t thread;
  int stop; /* atomic */
  /* what it took (atomic): posts, body bytes, and spans (each "spanId"
   * member, a link's included) */
  uint64_t posts, bytes, spans;
} otlp_sink;

/* Listens on a port of the kernel's (s->port) and starts the thread; 0 or
 * -1. */
int otlp_sink_start(otlp_sink *s);

/* Stops the thread and closes the socket. */
void otlp_sink_stop(otlp_sink *s);

#endif
