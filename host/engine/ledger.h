/* ledger.h — the crash ledger: what every thread that runs plugin code is
 * doing right now, kept in memory that outlives the process running the
 * plugins.
 *
 * `duro run` is a supervisor and an engine process (server/supervisor.c).
 * The supervisor maps the ledger shared before it forks the engine, so
 * when the engine dies — a segfault, abort(), a stack overflow or exit()
 * inside a plugin — the supervisor still has it, and the next engine reads
 * it: an attempt whose callback was running when the process died becomes
 * a failed attempt `plugin.crashed`.  Writing it costs a few stores per
 * attempt, no system call and no fsync: it has to survive the death of a
 * process, not of the machine (after a power cut an interrupted attempt
 * simply runs again, as the rules for plugin authors allow).
 *
 * One slot per thread that runs plugin code (worker threads, queue
 * handler threads, and the main thread while it loads plugins).  A slot's
 * fields are written by its thread only, before it publishes the slot's state
 * with a release store; readers (the watchdog, the next engine) load the state
 * first.
 *
 * The crash handlers (ledger_install_crash_handlers) record which slot's
 * thread died and how: a fatal signal on that thread, or exit() called
 * from it.  A death the handlers did not see (SIGKILL, _exit) blames no
 * thread in particular; for a SIGKILL, the suspects below take over. */
#ifndef DURO_LEDGER_H
#define DURO_LEDGER_H

#include <stddef.h>
#include <stdint.h>

typedef enum ledger_state {
  LEDGER_FREE = 0,   /* no thread owns the slot */
  LEDGER_IDLE,       /* a worker waiting for work */
  LEDGER_ACTIVATION, /* running an activation, outside any step callback */
  LEDGER_ATTEMPT,    /* inside a step callback */
  LEDGER_LOADING,    /* loading a plugin (dlopen, constructors, init) */
  LEDGER_ABANDONED,  /* in a hung callback the watchdog gave up on */
  LEDGER_HANDLER,    /* in plugin code a driver runs (driver.h): `driver`
                        names it, `what` says what runs in words (for the
                        supervisor's log), the other fields are the
                        driver's to fill (its recover reads them) */
} ledger_state;

#define LEDGER_NAME_MAX 128
#define LEDGER_KEY_MAX 272
#define LEDGER_DRIVER_MAX 24

typedef struct ledger_slot {
  uint32_t state; /* ledger_state; atomic */
  uint32_t attempt;
  uint32_t count; /* the step's occurrence: key = name#count */
  uint32_t pad;
  int64_t rowid; /* the instance */
  int64_t seq;   /* the step's call order in the activation */
  int64_t started_ms, deadline_ms;
  /* the step's first call, for a step row the crash must create */
  int64_t step_started_ms;
  char workflow[LEDGER_NAME_MAX];
  char id[LEDGER_NAME_MAX];
  char plugin[LEDGER_NAME_MAX]; /* the plugin's config name */
  char key[LEDGER_KEY_MAX];     /* "name#count" */
  char name[LEDGER_KEY_MAX];
  char driver[LEDGER_DRIVER_MAX]; /* LEDGER_HANDLER: the driver's name */
  char what[LEDGER_KEY_MAX];      /* LEDGER_HANDLER: "queue handler (...)" */
} ledger_slot;

/* How the last engine process ended, as the supervisor saw it. */
typedef enum ledger_death {
  LEDGER_DEATH_NONE = 0, /* no earlier engine, or it stopped when asked */
  LEDGER_DEATH_SIGNAL,   /* killed by `code` (a signal number) */
  LEDGER_DEATH_EXIT,     /* exited with status `code` unasked */
} ledger_death;

typedef struct ledger ledger;

/* A ledger of `n_slots` in memory shared with children forked later
 * (MAP_SHARED | MAP_ANONYMOUS).  NULL when mmap fails. */
ledger *ledger_create_shared(uint32_t n_slots);
/* The same in private memory: for an engine with no supervisor (tests,
 * benchmarks), where nothing reads it after a crash. */
ledger *ledger_create_private(uint32_t n_slots);
void ledger_free(ledger *l);

uint32_t ledger_size(const ledger *l);
ledger_slot *ledger_slot_at(ledger *l, uint32_t i);

/* Takes a free slot; NULL when all are taken. */
ledger_slot *ledger_claim(ledger *l, ledger_state state);
/* Makes `s` (NULL: none) the calling thread's slot, the one the crash
 * handlers blame should this thread die. */
void ledger_thread_bind(ledger *l, ledger_slot *s);
/* Gives a slot back (and unbinds it from the calling thread). */
void ledger_release(ledger *l, ledger_slot *s);

static inline void ledger_set_state(ledger_slot *s, ledger_state st) {
  __atomic_store_n(&s->state, (uint32_t)st, __ATOMIC_RELEASE);
}
static inline ledger_state ledger_get_state(const ledger_slot *s) {
  return (ledger_state)__atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
}

/* Copies `src` into a fixed field, truncating. */
void ledger_copy(char *dst, size_t cap, const char *src);

/* ---- crashes ------------------------------------------------------------ */

/* Installs, in the engine process, handlers that record the slot of the
 * thread that dies (fatal signals, on an alternate stack so a stack
 * overflow is seen too; exit() from a thread that owns a slot) and then
 * let the process die as it would have.  Threads that run plugin code
 * give themselves a signal stack (altstack.h); the main thread gets one
 * here. */
void ledger_install_crash_handlers(ledger *l);

/* The slot whose thread caused the death: >= 0 a slot, -1 none recorded,
 * -2 a thread that owns no slot (host code, not a plugin).  The handlers
 * call it; tests call it to stage a crash. */
void ledger_blame(ledger *l, int slot, int exited, int code);

/* ---- after a death -------------------------------------------------------
 *
 * The supervisor rotates the ledger once the engine is reaped: what the
 * dead engine's threads were doing becomes the `last` view, with how it
 * died, and the live slots are cleared for the next engine (which claims
 * slots while loading plugins, before it records the crash). */
void ledger_rotate(ledger *l, ledger_death how, int code);

/* The dead engine's slot i (ledger_size slots). */
const ledger_slot *ledger_last_slot(const ledger *l, uint32_t i);
ledger_death ledger_last_death(const ledger *l, int *code);
/* Its blamed slot (as ledger_blame), and whether that thread called
 * exit() rather than died of a signal. */
int ledger_last_blamed(const ledger *l);
int ledger_last_blamed_exit(const ledger *l);
/* The next engine recorded the crash: forget it. */
void ledger_last_clear(ledger *l);

/* ---- suspects ------------------------------------------------------------
 *
 * A SIGKILL (what the OOM killer sends, and what a callback that kills
 * its own process raises) is seen by no handler.  The next engine charges
 * every step whose attempt was inside its callback then with one kill,
 * kept here: beside the slots, kept across deaths, cleared only by the
 * engine.  A kill is charged to the step, not to its attempt: the
 * interrupted attempt is journaled as cut short, and the kills go on
 * adding up over the attempts that run after it.  A charged step's
 * callback (a suspect's) runs again alone, with no other callback running
 * beside it, so that a later kill can only be its own; its charges go
 * when its callback returns.  Only the engine process uses them, one
 * thread at a time (ledger.c locks). */
#define LEDGER_SUSPECTS 64

/* Adds a kill to step `key` of rowid; returns its kills so far. */
uint32_t ledger_suspect_charge(ledger *l, int64_t rowid, const char *key);
/* The kills charged to step `key` of rowid, 0 when none. */
uint32_t ledger_suspect_kills(ledger *l, int64_t rowid, const char *key);
/* Forgets every attempt of step `key` of rowid (NULL: of every step). */
void ledger_suspect_clear(ledger *l, int64_t rowid, const char *key);
/* Whether any attempt is charged (one load: callbacks ask it each time). */
int ledger_has_suspects(const ledger *l);
/* The rowid of suspect i (0 <= i < LEDGER_SUSPECTS), 0 for an empty one. */
int64_t ledger_suspect_rowid(ledger *l, uint32_t i);

/* "killed by signal 11 (SIGSEGV)" / "exited with status 0 (exit() called
 * from plugin code)": the last death, into buf. */
const char *ledger_death_text(const ledger *l, char *buf, size_t len);

/* Drivers' handlers (queue batches, cron ticks) that run with a slot;
 * more at once run without one (a queue batch's crash is then seen when
 * its lease ends). */
#define LEDGER_HANDLER_SLOTS 32

/* Slots an engine with `workers` worker threads needs: the workers, as
 * many replacements for hung ones, the main thread, drivers' handlers. */
static inline uint32_t ledger_slots_for(uint32_t workers) {
  return (workers ? workers : 1) * 2 + 2 + LEDGER_HANDLER_SLOTS;
}

#endif
