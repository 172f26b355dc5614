/* channel.h — framed messages between the engine and a worker process
 * over one end of a stream socketpair.
 *
 * A frame is its length (u32, of what follows), its kind (u32), the
 * activation it is about (u64) and the kind's fields (wire.h).  A stream
 * rather than SOCK_SEQPACKET: a step result may be larger than a socket
 * buffer, and a record type would cap it.  Each activation on a channel
 * talks ping-pong (worker_proto.h), so a reader routes frames by their
 * activation id alone.  EOF, or any error,
 * is the other side's death: the channel is not used again. */
#ifndef DURO_WORKER_CHANNEL_H
#define DURO_WORKER_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

typedef struct channel {
  int fd;
  char *buf; /* what was read and not yet taken */
  size_t len, off, cap;
  wire_buf out;   /* frames queued, not yet written (channel_queue) */
  size_t out_off; /* of out, written already (channel_write_some) */
  /* The longest frame it takes from the other side (0: CHANNEL_MAX_FRAME):
   * a longer one is bytes that are no frame, refused before anything is
   * allocated for it. */
  size_t max_frame;
  /* The length the frame channel_take refused last claimed (what follows
   * the length itself): over max_frame, or too short for a header. */
  uint32_t refused;
} channel;

/* Takes fd (closed by channel_close). */
void channel_init(channel *c, int fd);
void channel_close(channel *c);

/* Starts a frame of `kind` about activation `act` in m (reset). */
void channel_begin(wire_buf *m, uint32_t kind, uint64_t act);
/* Sends the frame m holds; 0, or -1 when the other side is gone. */
int channel_send(channel *c, wire_buf *m);
/* Queues the frame m holds, to go with the others in one write at the
 * next channel_flush (0, or -1 when the other side is gone). */
void channel_queue(channel *c, wire_buf *m);
int channel_flush(channel *c);
/* Writes what is queued as far as the socket takes it without waiting
 * (a non-blocking end: its reader never stops reading to write): 1 when
 * all of it went, 0 when some is left for the next call (poll for
 * POLLOUT), -1 when the other side is gone. */
int channel_write_some(channel *c);
/* Whether frames are queued and not all written. */
int channel_pending(const channel *c);
/* Queues the frame m holds and writes what the socket takes now: 0 (the
 * rest, if any, goes at the next channel_write_some: poll for POLLOUT),
 * or -1 when the other side is gone.  For the end that must never wait on
 * the other side's reading. */
int channel_post(channel *c, wire_buf *m);

/* Reading, for a reader that must not block: take the next frame
 * already read — its kind, activation and a reader over its fields (1; 0
 * when none is complete; -1 for bytes that are no frame, a frame longer
 * than CHANNEL_MAX_FRAME among them) — and read what the socket holds (1
 * read, 0 nothing there without `block`, -1 at EOF or on an error).  A
 * frame taken is valid until the next take or fill. */
#define CHANNEL_MAX_FRAME (256u << 20)
int channel_take(channel *c, uint32_t *kind, uint64_t *act, wire_reader *r);
int channel_fill(channel *c, int block);

#endif
