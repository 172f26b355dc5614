/* worker_cgroup.h — the kernel's hold on a plugin's worker processes: a
 * cgroup per worker process (it and every process it starts), with the
 * plugin's limits.memory, limits.processes and limits.cpus in it, where
 * the host may make cgroups.  Private to worker_pool.c.
 *
 * Where: cgroup v2 when the host's own cgroup can give memory, pids or
 * cpu to groups below it; else cgroup v1, each controller's group below
 * the host's own in that controller's hierarchy; else none, and the
 * worker's own watch (worker_limits.c) is all there is. */
#ifndef DURO_WORKER_CGROUP_H
#define DURO_WORKER_CGROUP_H

#include <stddef.h>
#include <stdint.h>

/* The controllers, as bits. */
enum {
  WCG_MEMORY = 1u << 0,
  WCG_PIDS = 1u << 1,
  WCG_CPU = 1u << 2,
};
#define WCG_N 3

/* Where this host makes its workers' groups: below its own cgroup, in a
 * group `duro-<pid>` of its own (one per hierarchy on v1). */
typedef struct worker_cgroups worker_cgroups;

/* Finds which cgroups the host may make, makes its own group there, and
 * removes those of hosts that died without removing theirs.  Never
 * NULL: with none, worker_cgroups_version says 0 and _why says why. */
worker_cgroups *worker_cgroups_open(void);
/* Kills whatever still runs in the host's groups and removes them. */
void worker_cgroups_close(worker_cgroups *cg);
/* 2, 1, or 0 (none), and the controllers usable (WCG_*). */
int worker_cgroups_version(const worker_cgroups *cg);
unsigned worker_cgroups_controllers(const worker_cgroups *cg);
/* Why there are none (version 0), or which controller is missing. */
const char *worker_cgroups_why(const worker_cgroups *cg);

/* A plugin's limits on each of its worker processes (0: none). */
typedef struct worker_cgroup_limits {
  int64_t memory;     /* bytes */
  uint32_t processes; /* tasks: processes and threads */
  uint32_t cpus_ppm;  /* millionths of a CPU */
} worker_cgroup_limits;

/* Which controllers limits need (WCG_*). */
unsigned worker_cgroup_wants(const worker_cgroup_limits *lim);

/* One worker process's group: a directory per hierarchy it is in (one
 * on v2), and their cgroup.procs opened for the forked child to join
 * before it runs anything (-1 once closed; a slot with no dir holds
 * nothing, so a zeroed struct is a group never made). */
typedef struct worker_cgroup {
  char *dir[WCG_N];
  int procs_fd[WCG_N];
} worker_cgroup;

/* Makes group `name` below the host's own, with lim in it (the
 * controllers of `which` only): 0, or -1 with why in err (nothing is
 * left made). */
int worker_cgroup_make(worker_cgroups *cg, const char *name,
                       const worker_cgroup_limits *lim, unsigned which,
                       worker_cgroup *g, char *err, size_t errlen);
/* In the forked child, before exec: it joins g (async-signal-safe). 0,
 * or -1. */
int worker_cgroup_join(const worker_cgroup *g);
/* In the parent once the child is forked: the opened files are closed. */
void worker_cgroup_forked(worker_cgroup *g);

/* What the kernel did in g: how often its OOM killer ended a process
 * there (for being over the group's memory), and the most memory the
 * group held (bytes; 0 when unknown). */
typedef struct worker_cgroup_usage {
  int64_t oom_kills;
  int64_t peak;
} worker_cgroup_usage;
void worker_cgroup_usage_read(const worker_cgroup *g, worker_cgroup_usage *u);

/* Kills whatever still runs in g (what the plugin forked, even in a
 * session of its own) and removes it.  g is empty afterwards. */
void worker_cgroup_remove(worker_cgroup *g);

#endif
