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

/* Puts duro.h's JSON accessors in the table (api_json.c). */
void json_api_fill(duro_api *t);

/* What the engine gave a queue or cron handler with its env: the
 * context its registration named (a worker's stand-in finds its build
 * there) and, for a queue handler, when its batch is given up on
 * (CLOCK_MONOTONIC ms, 0 = never).  NULL / 0 for run()'s env. */
void *duro_env_handler_ctx(const duro_env *env);
int64_t duro_env_deadline_ms(const duro_env *env);
int64_t duro_env_timeout_ms(const duro_env *env); /* the deadline's span */
/* The handler failed, and why (name: a DURO_ERR_*; message copied): the
 * batch's messages or the tick record it rather than its return code. */
void duro_env_handler_failed(duro_env *env, const char *name,
                             const char *message);

#endif
