/* supervisor.h — `duro run`: a small supervising process and the engine
 * process it forks.
 *
 * Plugins run inside the engine process, so a plugin that segfaults,
 * aborts, overflows its stack or calls exit() takes that process down.
 * The supervisor, which runs no plugin code, keeps what must outlive it:
 * the config, the HTTP listening socket (bound once: the port stays, and
 * connections wait in its backlog during a restart), the crash ledger
 * (engine/ledger.h) and the storage lock (store/lock.h).  When the engine dies
 * the supervisor logs how and what was running, and starts a new one with
 * back-off; the new engine records the crash in the journal before it runs
 * anything.  The engine dies with the supervisor (PR_SET_PDEATHSIG), so
 * killing the supervisor leaves nothing behind.
 *
 * The two talk over a socket pair, one byte a message:
 *   engine -> supervisor  'L'  plugins loaded; waiting for the lock
 *   supervisor -> engine  'G'  the storage lock (its fd passed along): go
 *   engine -> supervisor  'R'  ready: serving
 * A first engine that fails before 'L' (a bad plugin) ends `duro run` with
 * its error, as before; later deaths are restarts. */
#ifndef DURO_SUPERVISOR_H
#define DURO_SUPERVISOR_H

/* `duro run CONFIG`: returns the process's exit code. */
int supervisor_run(const char *config_path);

/* The channel, for the engine side (host.c).  Returns 0, or -1 when the
 * other end is gone. */
int supervisor_send(int fd, char msg, int pass_fd);
int supervisor_recv(int fd, char *msg, int *passed_fd);

#endif
