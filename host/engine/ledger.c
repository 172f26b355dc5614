/* ledger.c — the crash ledger (ledger.h): shared slots, and the handlers
 * that say which thread brought the process down.
 *
 * The handlers only store into the ledger and then let the process die
 * the way it was dying: the fatal signal is raised again with its default
 * action, and exit() from a plugin ends the process at once with the
 * plugin's status (no further exit handlers run while other threads are
 * still inside plugin code). */
#include "ledger.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "altstack.h"

#define LEDGER_MAGIC 0x6475726fu /* "duro" */

/* Who died and how: the live engine's, then the dead one's. */
typedef struct ledger_blame_info {
  int32_t blamed;      /* atomic: slot, -1 none, -2 a slot-less thread */
  int32_t blamed_exit; /* the blamed thread called exit() */
  int32_t blamed_code; /* its signal, or its exit status */
  int32_t death_how;   /* ledger_death, set by the supervisor */
  int32_t death_code;  /* signal number or exit status */
  int32_t pad;
} ledger_blame_info;

typedef struct ledger_suspect {
  int64_t rowid; /* 0: an empty entry */
  uint32_t kills, pad;
  char key[LEDGER_KEY_MAX];
} ledger_suspect;

typedef struct ledger_header {
  uint32_t magic;
  uint32_t n_slots;
  ledger_blame_info live, last;
  uint32_t n_suspects; /* atomic: entries in use */
  uint32_t pad;
  ledger_suspect suspects[LEDGER_SUSPECTS];
  /* n_slots live slots, then n_slots of the dead engine */
  ledger_slot slots[];
} ledger_header;

struct ledger {
  ledger_header h;
};

static ledger *crash_ledger; /* the one the handlers write */
static __thread int thread_slot = -1;

static size_t ledger_bytes(uint32_t n) {
  return sizeof(ledger_header) + 2 * (size_t)n * sizeof(ledger_slot);
}

static ledger *ledger_map(uint32_t n_slots, int flags) {
  void *p =
      mmap(NULL, ledger_bytes(n_slots), PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  ledger *l = p; /* zero-filled: every slot LEDGER_FREE */
  l->h.magic = LEDGER_MAGIC;
  l->h.n_slots = n_slots;
  l->h.live.blamed = l->h.last.blamed = -1;
  return l;
}

ledger *ledger_create_shared(uint32_t n_slots) {
  return ledger_map(n_slots, MAP_SHARED | MAP_ANONYMOUS);
}

ledger *ledger_create_private(uint32_t n_slots) {
  return ledger_map(n_slots, MAP_PRIVATE | MAP_ANONYMOUS);
}

void ledger_free(ledger *l) {
  if (!l)
    return;
  if (crash_ledger == l)
    crash_ledger = NULL;
  munmap(l, ledger_bytes(l->h.n_slots));
}

uint32_t ledger_size(const ledger *l) { return l->h.n_slots; }

ledger_slot *ledger_slot_at(ledger *l, uint32_t i) {
  return i < l->h.n_slots ? &l->h.slots[i] : NULL;
}

ledger_slot *ledger_claim(ledger *l, ledger_state state) {
  for (uint32_t i = 0; i < l->h.n_slots; i++) {
    uint32_t expect = LEDGER_FREE;
    if (__atomic_compare_exchange_n(&l->h.slots[i].state, &expect,
                                    (uint32_t)state, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED))
      return &l->h.slots[i];
  }
  return NULL;
}

void ledger_thread_bind(ledger *l, ledger_slot *s) {
  if (l != crash_ledger)
    return;
  int in_live = s && s >= l->h.slots && s < l->h.slots + l->h.n_slots;
  thread_slot = in_live ? (int)(s - l->h.slots) : -1;
}

void ledger_release(ledger *l, ledger_slot *s) {
  if (!s)
    return;
  if (l == crash_ledger && thread_slot == (int)(s - l->h.slots))
    thread_slot = -1;
  ledger_set_state(s, LEDGER_FREE);
}

void ledger_copy(char *dst, size_t cap, const char *src) {
  size_t n = src ? strlen(src) : 0;
  if (n >= cap)
    n = cap - 1;
  memcpy(dst, src ? src : "", n);
  dst[n] = '\0';
}

/* ---- suspects ----------------------------------------------------------- */

static pthread_mutex_t suspects_mu = PTHREAD_MUTEX_INITIALIZER;

static ledger_suspect *suspect_find(ledger *l, int64_t rowid, const char *key) {
  for (uint32_t i = 0; i < LEDGER_SUSPECTS; i++) {
    ledger_suspect *x = &l->h.suspects[i];
    if (x->rowid == rowid && !strncmp(x->key, key, sizeof x->key))
      return x;
  }
  return NULL;
}

static void suspects_count(ledger *l) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < LEDGER_SUSPECTS; i++)
    n += l->h.suspects[i].rowid != 0;
  __atomic_store_n(&l->h.n_suspects, n, __ATOMIC_RELEASE);
}

uint32_t ledger_suspect_charge(ledger *l, int64_t rowid, const char *key) {
  pthread_mutex_lock(&suspects_mu);
  ledger_suspect *x = suspect_find(l, rowid, key);
  if (!x) {
    /* A full table forgets its fewest-charged entry: at worst a poisoned
     * step is isolated one death later. */
    x = &l->h.suspects[0];
    for (uint32_t i = 0; i < LEDGER_SUSPECTS; i++) {
      ledger_suspect *c = &l->h.suspects[i];
      if (c->rowid == 0) {
        x = c;
        break;
      }
      if (c->kills < x->kills)
        x = c;
    }
    x->rowid = rowid;
    x->kills = 0;
    ledger_copy(x->key, sizeof x->key, key);
  }
  uint32_t kills = ++x->kills;
  suspects_count(l);
  pthread_mutex_unlock(&suspects_mu);
  return kills;
}

uint32_t ledger_suspect_kills(ledger *l, int64_t rowid, const char *key) {
  if (!ledger_has_suspects(l))
    return 0;
  pthread_mutex_lock(&suspects_mu);
  ledger_suspect *x = suspect_find(l, rowid, key);
  uint32_t kills = x ? x->kills : 0;
  pthread_mutex_unlock(&suspects_mu);
  return kills;
}

void ledger_suspect_clear(ledger *l, int64_t rowid, const char *key) {
  if (!ledger_has_suspects(l))
    return;
  pthread_mutex_lock(&suspects_mu);
  for (uint32_t i = 0; i < LEDGER_SUSPECTS; i++) {
    ledger_suspect *x = &l->h.suspects[i];
    if (x->rowid == rowid && (!key || !strncmp(x->key, key, sizeof x->key)))
      memset(x, 0, sizeof *x);
  }
  suspects_count(l);
  pthread_mutex_unlock(&suspects_mu);
}

int ledger_has_suspects(const ledger *l) {
  return __atomic_load_n(&l->h.n_suspects, __ATOMIC_ACQUIRE) != 0;
}

int64_t ledger_suspect_rowid(ledger *l, uint32_t i) {
  pthread_mutex_lock(&suspects_mu);
  int64_t rowid = i < LEDGER_SUSPECTS ? l->h.suspects[i].rowid : 0;
  pthread_mutex_unlock(&suspects_mu);
  return rowid;
}

/* ---- crashes ------------------------------------------------------------ */

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE,
                                    SIGABRT, SIGSYS, SIGTRAP};

void ledger_blame(ledger *l, int slot, int exited, int code) {
  int32_t none = -1;
  /* The first thread to die is the one to blame. */
  if (__atomic_compare_exchange_n(&l->h.live.blamed, &none, slot, 0,
                                  __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
    l->h.live.blamed_exit = exited;
    l->h.live.blamed_code = code;
  }
}

static void blame(int exited, int code) {
  if (crash_ledger)
    ledger_blame(crash_ledger, thread_slot >= 0 ? thread_slot : -2, exited,
                 code);
}

static void on_fatal_signal(int sig) {
  blame(0, sig);
  /* SA_RESETHAND restored the default action: raising again kills us the
   * way the signal would have (with the same status for the supervisor),
   * whether it came from a faulting instruction or from kill(). */
  raise(sig);
}

static void on_process_exit(int status, void *arg) {
  (void)arg;
  ledger *l = crash_ledger;
  if (!l || thread_slot < 0)
    return; /* the host's own exit: nothing to record */
  ledger_state st = ledger_get_state(&l->h.slots[thread_slot]);
  if (st != LEDGER_ATTEMPT && st != LEDGER_ACTIVATION && st != LEDGER_LOADING &&
      st != LEDGER_HANDLER)
    return;
  blame(1, status);
  _exit(status);
}

void ledger_install_crash_handlers(ledger *l) {
  crash_ledger = l;
  thread_altstack();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fatal_signal;
  sa.sa_flags = SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof fatal_signals / sizeof *fatal_signals; i++)
    sigaction(fatal_signals[i], &sa, NULL);
  on_exit(on_process_exit, NULL);
}

void ledger_rotate(ledger *l, ledger_death how, int code) {
  uint32_t n = l->h.n_slots;
  memcpy(&l->h.slots[n], &l->h.slots[0], n * sizeof(ledger_slot));
  l->h.last = l->h.live;
  l->h.last.death_how = (int32_t)how;
  l->h.last.death_code = code;
  memset(&l->h.slots[0], 0, n * sizeof(ledger_slot));
  memset(&l->h.live, 0, sizeof l->h.live);
  l->h.live.blamed = -1;
}

const ledger_slot *ledger_last_slot(const ledger *l, uint32_t i) {
  return i < l->h.n_slots ? &l->h.slots[l->h.n_slots + i] : NULL;
}

ledger_death ledger_last_death(const ledger *l, int *code) {
  if (code)
    *code = l->h.last.death_code;
  return (ledger_death)l->h.last.death_how;
}

int ledger_last_blamed(const ledger *l) { return l->h.last.blamed; }

int ledger_last_blamed_exit(const ledger *l) { return l->h.last.blamed_exit; }

void ledger_last_clear(ledger *l) {
  uint32_t n = l->h.n_slots;
  memset(&l->h.slots[n], 0, n * sizeof(ledger_slot));
  memset(&l->h.last, 0, sizeof l->h.last);
  l->h.last.blamed = -1;
}

const char *ledger_death_text(const ledger *l, char *buf, size_t len) {
  int code = l->h.last.death_code;
  switch ((ledger_death)l->h.last.death_how) {
  case LEDGER_DEATH_SIGNAL: {
    const char *abbrev = sigabbrev_np(code);
    snprintf(buf, len, "killed by signal %d (SIG%s)", code,
             abbrev ? abbrev : "?");
    break;
  }
  case LEDGER_DEATH_EXIT:
    snprintf(buf, len, "exited with status %d%s", code,
             l->h.last.blamed >= 0 && l->h.last.blamed_exit
                 ? " (exit() called from plugin code)"
                 : "");
    break;
  default:
    snprintf(buf, len, "stopped");
  }
  return buf;
}
