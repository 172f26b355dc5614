/* host.h — the `duro` process: config → plugins → engine → libuv loop. */
#ifndef DURO_HOST_H
#define DURO_HOST_H

/* `duro run CONFIG`: runs until SIGINT/SIGTERM. Returns the exit code. */
int host_run(const char *config_path);

/* `duro check CONFIG`: validates the config and loads every plugin, then
 * unloads them. Prints "file:line:column: message" per problem. */
int host_check(const char *config_path);

#endif
