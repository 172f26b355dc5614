/* worker_engine.h — what the engine's side of the workers shares: the
 * processes of a plugin and an engine thread's channel to one of them.
 * Private to worker_pool.c and worker_proxy.c. */
#ifndef DURO_WORKER_ENGINE_H
#define DURO_WORKER_ENGINE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "channel.h"
#include "map.h"
#include "worker.h"
#include "worker_cgroup.h"

typedef struct worker_plugin worker_plugin;

typedef struct worker_proc {
  worker_plugin *plugin;
  uint32_t index;
  pid_t pid;    /* 0: not running */
  int ctl;      /* the control socket (channels are handed over it) */
  uint64_t gen; /* bumped at each start: a channel of an older one is dead */
  uint64_t dead_gen; /* the start that `how` is the death of */
  char how[96];
  int killed; /* that death was a SIGKILL: no handler could name a cause */
  int alone;  /* one callback was in flight at that death */
  /* Channels whose thread ran run() code, outside any callback, at that
   * death (their pages' WM_PAGE_RUN): a kill is laid on such code, never
   * on a callback beside it. */
  uint32_t runs_named;
  /* The kernel's OOM killer ended it, its group over limits.memory, and
   * the most memory the group held (bytes; 0: unknown). */
  int oom;
  int64_t peak;
  uint64_t grower;  /* its pages' WM_PAGE_GROWER at that death (0: none) */
  worker_cgroup cg; /* its group (none made: no dir) */
  /* Callbacks in flight in it now, whether one runs alone (a suspect of
   * a kill) or waits to, and whether the engine killed it (a hung
   * callback: the others it held are not suspects).  The plugin's mu. */
  uint32_t in_callback;
  int alone_running, alone_waiting;
  int engine_killed;
  /* Its exit, seen apart from its channels (a process the plugin forked
   * may hold their other ends open): a pidfd, and a dup of the engine's
   * end of each channel of this generation, shut down when it exits so
   * that their readers see EOF (worker_pool.c's death watch); with a
   * mapping of each channel's page of its own, read at its death. */
  int pidfd;
  struct worker_chan {
    int fd;
    uint64_t *page;
  } * chans;
  size_t n_chans;
  /* Callbacks it may run at once now (0: the plugin's per_proc): halved
   * at each death (down to 8), so that a crash storm cuts short few
   * callbacks beside the guilty one, and the plugin's again once no
   * process died for WORKER_CALM_MS (last_death_ms, monotonic). */
  uint32_t allowed;
  int64_t last_death_ms;
} worker_proc;

struct worker_plugin {
  worker_pool *pool;
  char *name;
  uint32_t n;
  worker_limits limits;
  uint32_t per_proc; /* callbacks at once in one process (concurrency) */
  unsigned cg_kept;  /* the controllers (WCG_*) its processes' groups have */
  /* the limits and the pool's max_result, as the worker's argv has them */
  char limit_args[3][24];
  worker_proc *procs;
  /* Channels for queue and cron handlers, each lent to one at a time
   * (their threads come and go; an engine thread's own channels stay
   * with it): idle ones here, the next to open on procs[next_lend % n]. */
  struct worker_conn **lendable;
  size_t n_lendable;
  uint32_t next_lend;
  pthread_mutex_t mu; /* procs, lendable */
};

typedef struct worker_build {
  worker_plugin *plugin;
  char *path, *hash, *class_name;
} worker_build;

/* An engine thread's channel to one worker process. */
typedef struct worker_conn {
  worker_proc *proc;
  uint64_t gen;
  channel ch;
  int broken;
  /* Activations using it now; a channel replaced while some still do
   * (they will see it broken) is freed by the last (worker_conn_put). */
  uint32_t users;
  int detached;
  uint64_t next_act;
  idmap waiting; /* activation id → its proxy (worker_proxy.c) */
  /* The page shared with the worker (worker_proto.h's WM_PAGE_*): the
   * activation its crash handler named, a bit per CALL begun; call_seq
   * numbers the CALLs. */
  uint64_t *page;
  uint64_t call_seq;
  /* A CRASH frame named this activation (0: none). */
  uint64_t crash_act;
  char how[96]; /* how the process died, once broken */
  int killed;   /* by a SIGKILL no handler saw (not the engine's own) */
  int alone;    /* with one callback in flight then */
  /* The channels of its process whose thread ran run() code at that
   * kill, and the activation whose run() this one's ran (0: none). */
  uint32_t runs_named;
  uint64_t run_act;
  int oom;      /* by the kernel, its group over limits.memory */
  int64_t peak; /* the most memory its group held (bytes; 0: unknown) */
  /* Then: whose code its worker's watch saw take the most memory
   * (WM_PAGE_GROWER; 0: nobody of note). */
  uint64_t grower;
} worker_conn;

/* This thread's channel to one of p's processes, starting it when it
 * does not run; NULL with why in err when none could start. */
worker_conn *worker_conn_get(worker_plugin *p, char *err, size_t errlen);
/* A callback's place in c's process: a suspect's alone (it waits until
 * no other callback runs there, and none starts meanwhile), any other
 * beside the rest while fewer than the plugin's concurrency allows run
 * there; 1 while it must wait (try again), 0 once taken, -1
 * when c's process is gone (the callback cannot begin).  Given
 * back by worker_turn_end. */
int worker_turn_try(worker_conn *c, int suspect, int *waiting);
void worker_turn_end(worker_conn *c, int suspect);
/* A wait for the place given up (the worker died, the activation went). */
void worker_turn_cancel(worker_conn *c, int *waiting);
/* Kills c's process (a callback in it hung past its deadline): its
 * death is then the engine's doing, nobody's crash. */
void worker_conn_kill(worker_conn *c, const char *why);
/* A channel to one of p's processes for one handler alone (NULL with
 * why in err when none could start), and given back once it returned. */
worker_conn *worker_conn_lend(worker_plugin *p, char *err, size_t errlen);
void worker_conn_give_back(worker_conn *c);
/* An activation is done with c. */
void worker_conn_put(worker_conn *c);
/* The channel failed (EOF, an error, a frame out of turn): the process
 * is reaped (killed first when it still runs), how it died goes to
 * c->how, and the next worker_conn_get starts a new one. */
void worker_conn_broken(worker_conn *c);

#endif
