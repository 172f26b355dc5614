/* worker.h — plugin code in worker processes: the engine's side.
 *
 * A plugin whose config says `workers: N` (N > 0, the default 1) has its
 * run() and step callbacks run in N processes of its own (`duro
 * __worker`), never in the engine: a crash, an exit() or a kill there
 * fails what that process held and nothing else (worker_proxy.c), and a
 * new process starts for the next activation.  The engine's step runner,
 * journal and crash accounting are unchanged: for such a build the
 * engine's run() is worker_proxy_run, which carries each of the plugin's
 * calls out in the activation's own context (worker_proto.h). */
#ifndef DURO_WORKER_H
#define DURO_WORKER_H

#include <stdint.h>

#include "duro.h"

typedef struct worker_pool worker_pool;

/* A pool that starts workers as `exe __worker` (exe: the duro binary, or
 * "/proc/self/exe" for this process's own; opened now, so a file
 * replaced later does not change what workers run), each in a session
 * of its own, with the environment of this
 * process less the variable `hide_env` (the HTTP token's; NULL: none). */
worker_pool *worker_pool_create(const char *exe, const char *hide_env);
/* The engine's engine.max_step_result (bytes; 0: none), before the first
 * process starts: a worker refuses a callback's result over it as the
 * engine would (step.output_too_large) rather than send it, and the
 * engine reads no frame from a worker over twice it plus a MiB. */
void worker_pool_set_max_result(worker_pool *p, int64_t bytes);
/* Kills the workers and frees what the pool holds.  Call once no
 * activation runs. */
void worker_pool_free(worker_pool *p);

/* A plugin's limits on its worker processes (its config's `limits`),
 * 0 = none: the memory of each process (with what it starts), its
 * processes and threads, and the CPUs it may use, which the kernel keeps
 * in a cgroup per process where the host may make one
 * (worker_cgroup.c; else the process watches its own RSS and the rest
 * is not kept); and the CPU time of one attempt's callback, which the
 * process watches itself (worker_limits.c).  And its `concurrency`: the
 * callbacks that run at once in its processes (each on a thread of its
 * own there; 0: the default). */
typedef struct worker_limits {
  int64_t memory; /* bytes */
  int64_t cpu_ms;
  uint32_t processes;
  uint32_t cpus_ppm; /* millionths of a CPU */
  uint32_t concurrency;
} worker_limits;

/* The run() context of class `class_name` (NULL: the context of the
 * build's queue and cron handlers) of build `hash` (its file at `path`)
 * of plugin `plugin`, served by `n` processes of that plugin's with
 * limits `lim` (the first call for a plugin sets n and lim).  Owned by
 * the pool until it is freed; the same arguments give the same
 * pointer. */
void *worker_pool_build(worker_pool *p, const char *plugin, uint32_t n,
                        const worker_limits *lim, const char *path,
                        const char *hash, const char *class_name);

/* Worker processes started and died so far, over every plugin. */
void worker_pool_counts(worker_pool *p, uint64_t *started, uint64_t *died);

/* The engine's run() for a build served by workers: its context is the
 * build's (duro_engine_build_set_ctx with worker_pool_build's pointer). */
duro_rc worker_proxy_run(duro_step *step, const duro_event *ev, duro_env *env);

/* The engine's queue and cron handlers for a build served by workers
 * (env->ctx: worker_pool_build's pointer for class NULL): each batch or
 * tick runs in one of the plugin's processes, on a channel lent to it
 * alone.  A batch's marks come back with the handler's return and are
 * made here; a worker that dies in a handler, or passes a limit, or
 * holds a batch past its deadline (env->deadline_ms; the process is
 * killed), makes the handler return -1: the batch's unmarked messages
 * are retried (max_retries then sends them to the dead-letter queue),
 * the tick is failed. */
int worker_proxy_queue(duro_message_batch *batch, duro_env *env);
int worker_proxy_scheduled(const duro_scheduled_event *ev, duro_env *env);
int worker_proxy_tail(const duro_tail_batch *batch, duro_env *env);

/* `duro __worker FD PLUGIN`: a worker process's main. */
int worker_process_main(int argc, char **argv);

#endif
