/* probe.h — a plugin's first load, in a child process, awaited.
 *
 * Constructors and init run arbitrary code: before a build is loaded into
 * a process that matters (the engine, or `duro check`'s report), it is
 * loaded in a child, which leads a process group of its own.  The wait
 * gives up after LOADER_PROBE_TIMEOUT_MS (a constructor that spins), and
 * whatever the load left running in the group (a constructor that forked)
 * is ended and named: a plugin must not leave processes behind, and a
 * fork inside the engine would copy the whole host.  A process that left
 * the group (setsid) is not seen. */
#ifndef DURO_LOADER_PROBE_H
#define DURO_LOADER_PROBE_H

#include <stddef.h>
#include <sys/types.h>

#define LOADER_PROBE_TIMEOUT_MS 10000

typedef struct loader_probe {
  int timed_out;  /* it did not exit in time: it was killed */
  int status;     /* waitpid's status of the child */
  pid_t forked;   /* a process the load left in the group (ended); 0: none */
  char out[1024]; /* the start of what the child wrote to its pipe */
  size_t got;
} loader_probe;

/* First thing in the child: it dies with the process that waits for it
 * (which it no longer shares a process group, or a terminal's signals,
 * with).  `parent`: the waiting process's pid, 0 when not known. */
void loader_probe_child(pid_t parent);

/* Waits for `pid`, a child that leads its own process group, reading the
 * pipe `fd` (closed here) until the child exits or the time runs out,
 * then ends whatever is left of its group and reaps the child. */
void loader_probe_wait(pid_t pid, int fd, int timeout_ms, loader_probe *p);

/* Why the load was refused, as the end of a sentence about the plugin
 * ("its constructor or init did not return within 10 s", "its
 * constructor or init forked a child (pid N), which was ended"), when it
 * timed out or forked: returns 1.  Otherwise 0, why untouched. */
int loader_probe_why(const loader_probe *p, char *why, size_t len);

#endif
