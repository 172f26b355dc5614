/* cli.h — `duro workflows …`: the command-line client of a running host's
 * HTTP API (see cli.c). */
#ifndef DURO_CLI_H
#define DURO_CLI_H

#include <stdio.h>

/* Runs `duro workflows …`.  Takes main()'s argc/argv as they are
 * (argv[1] is "workflows").  Returns the exit status: 0 done, 1 the server
 * answered an error or could not be reached, 2 a usage error. */
int cli_main(int argc, char **argv);

/* Prints the client's usage lines (indented to follow "usage: duro …"). */
void cli_usage(FILE *out);

#endif
