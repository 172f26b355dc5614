/* api.h — the table of host calls every plugin is handed (duro.h's
 * duro_api): what loader_open binds into a plugin, and what a program
 * that runs plugins in-process without the loader (the tests, the
 * benchmarks) points duro_api_ptr_ at. */
#ifndef DURO_API_H
#define DURO_API_H

#include "duro.h"

/* The host's table, complete at DURO_ABI_MINOR; it lives as long as the
 * process.  Safe to call from any thread. */
const duro_api *duro_host_api(void);

#endif
