/* migrate_cmd.h — `duro migrate` (see migrate_cmd.c). */
#ifndef DURO_MIGRATE_CMD_H
#define DURO_MIGRATE_CMD_H

#include <stdio.h>

/* Runs `duro migrate …` with main()'s argc/argv (argv[1] is "migrate").
 * Returns the exit status: 0 copied, 1 refused or failed, 2 a usage
 * error. */
int migrate_main(int argc, char **argv);

/* Prints its usage lines (indented to follow "usage: duro …"). */
void migrate_usage(FILE *out);

#endif
