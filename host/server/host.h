/* host.h — the engine process of `duro run` (config → plugins → engine →
 * libuv loop), which the supervisor forks, and `duro check`. */
#ifndef DURO_HOST_H
#define DURO_HOST_H

#include "config.h"

struct ledger;

/* The engine process: loads the plugins (with the crash handlers on),
 * tells the supervisor over `ctl_fd` and waits for the storage lock, opens
 * the journal, serves HTTP on `listen_fd` and runs until SIGINT/SIGTERM.
 * Returns the exit code.  `cfg` and `ledger` are borrowed. */
int host_engine_main(const config *cfg, int listen_fd, struct ledger *ledger,
                     int ctl_fd);

/* `duro check CONFIG`: validates the config and loads every plugin, each
 * in a child process of its own (a constructor that crashes or calls
 * exit() is that plugin's error, not the checker's end), then unloads
 * them. Prints "file:line:column: message" per problem. */
int host_check(const char *config_path);

#endif
