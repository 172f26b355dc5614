/* fiber.c — fibers on Boost.Context's switch (libboost_context, whose
 * jump_fcontext and make_fcontext are C functions behind a C++ header),
 * with AddressSanitizer's switch annotations (without them ASan takes a
 * fiber's frames for a stack overflow).  The C library's swapcontext
 * saves and restores the signal mask with a system call on every switch:
 * a step in a worker process made eleven of them, half of its system
 * calls.  Fibers change no signal mask, so none is needed. */
#include "fiber.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define FIBER_ASAN 1
#else
#define FIBER_ASAN 0
#endif

/* Boost.Context's context switch (boost/context/detail/fcontext.hpp):
 * jump_fcontext saves the running context, switches to `to` and hands it
 * `data`; it returns, in the context switched from, once something jumps
 * back, with the context that jumped (to resume it later). */
typedef void *fcontext_t;
typedef struct {
  fcontext_t fctx;
  void *data;
} transfer_t;
transfer_t jump_fcontext(fcontext_t const to, void *data);
fcontext_t make_fcontext(void *sp, size_t size, void (*fn)(transfer_t));

#define FIBER_STACK (8u << 20)

struct fiber {
  fcontext_t ctx; /* where it resumes */
  void *map;      /* guard page + stack */
  size_t map_size;
  void *stack; /* above the guard page */
  size_t stack_size;
  fiber_fn fn;
  void *arg;
  int finished;
  void *asan_fake; /* ASan's fake stack while switched away */
};

/* Fibers let go, kept for the next fiber_create: mapping a stack costs
 * mmap, mprotect and a page fault for each page the activation touches,
 * and unmapping one makes every CPU that runs a thread of the process
 * drop its TLB (an interrupt each, dear under a hypervisor).  A host
 * whose plugin runs in workers has an activation on a fiber for each
 * step in flight, hundreds at once, in the engine and in the worker; the
 * W1 benchmark through a worker spent a quarter of its CPU time mapping
 * and unmapping them.  Those the process has not needed for a whole
 * CACHE_DECAY_S are unmapped (checked as fibers come and go), so the
 * cache holds what a busy moment used, not the most it ever did. */
#define CACHE_MAX 1024
#define CACHE_DECAY_MS 10000
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static fiber *cache[CACHE_MAX];
static size_t cached, cache_low; /* cache_low: fewest cached this period */
static int64_t cache_period;     /* the mono_ms it began */

/* Under ASan the stack's shadow is cleared first: the frames of a fiber
 * that ended (its trampoline's, never returned from) leave their
 * redzones poisoned, and munmap does not clear them, so the next mapping
 * at that address (SQLite's shared WAL index, say) would be reported as
 * an overflow of a stack long gone. */
static void unmap(fiber *f) {
#if FIBER_ASAN
  __asan_unpoison_memory_region(f->stack, f->stack_size);
#endif
  munmap(f->map, f->map_size);
  free(f);
}

/* Takes the fibers that stayed cached for a whole period into *out
 * (cache_mu held): at most CACHE_MAX, unmapped by the caller. */
static size_t cache_decay_locked(fiber **out, int64_t mono_ms) {
  if (mono_ms - cache_period < CACHE_DECAY_MS)
    return 0;
  size_t n = cache_low < cached ? cache_low : cached;
  for (size_t i = 0; i < n; i++)
    out[i] = cache[i]; /* the oldest: the bottom of the stack */
  for (size_t i = n; i < cached; i++)
    cache[i - n] = cache[i];
  cached -= n;
  cache_low = cached;
  cache_period = mono_ms;
  return n;
}

void fiber_cache_trim(int64_t mono_ms) {
  static fiber *gone[CACHE_MAX];
  static pthread_mutex_t trim_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&trim_mu); /* one trimmer at a time shares `gone` */
  pthread_mutex_lock(&cache_mu);
  size_t n = cache_decay_locked(gone, mono_ms);
  pthread_mutex_unlock(&cache_mu);
  for (size_t i = 0; i < n; i++)
    unmap(gone[i]);
  pthread_mutex_unlock(&trim_mu);
}

static __thread fcontext_t thread_ctx; /* the thread's own stack */
static __thread fiber *running;
#if FIBER_ASAN
static __thread const void *thread_stack_bottom;
static __thread size_t thread_stack_size;
#endif

fiber *fiber_create(void) {
  pthread_mutex_lock(&cache_mu);
  fiber *f = cached ? cache[--cached] : NULL;
  if (cached < cache_low)
    cache_low = cached;
  pthread_mutex_unlock(&cache_mu);
  if (f)
    return f; /* finished, as when new */
  f = calloc(1, sizeof *f);
  if (!f)
    return NULL;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  f->map_size = FIBER_STACK + page;
  f->map = mmap(NULL, f->map_size, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (f->map == MAP_FAILED) {
    free(f);
    return NULL;
  }
  mprotect(f->map, page, PROT_NONE); /* an overflow faults, not corrupts */
  f->stack = (char *)f->map + page;
  f->stack_size = f->map_size - page;
  f->finished = 1;
  return f;
}

void fiber_destroy(fiber *f) {
  if (!f)
    return;
  f->finished = 1;
  pthread_mutex_lock(&cache_mu);
  int kept = cached < CACHE_MAX;
  if (kept)
    cache[cached++] = f;
  pthread_mutex_unlock(&cache_mu);
  if (!kept)
    unmap(f);
  fiber_cache_trim(clock_mono_ms());
}

size_t fiber_cache_count(void) {
  pthread_mutex_lock(&cache_mu);
  size_t n = cached;
  pthread_mutex_unlock(&cache_mu);
  return n;
}

/* Leaving a fiber for the thread's stack; `dying` when it will never be
 * resumed (ASan then drops its fake stack). */
static void switch_to_thread(fiber *f, int dying) {
#if FIBER_ASAN
  __sanitizer_start_switch_fiber(dying ? NULL : &f->asan_fake,
                                 thread_stack_bottom, thread_stack_size);
#else
  (void)f, (void)dying;
#endif
  /* resumed: the thread that did it may have moved its own context */
  thread_ctx = jump_fcontext(thread_ctx, NULL).fctx;
#if FIBER_ASAN
  __sanitizer_finish_switch_fiber(f->asan_fake, NULL, NULL);
#endif
}

static void trampoline(transfer_t from) {
  thread_ctx = from.fctx;
  fiber *f = running;
#if FIBER_ASAN
  __sanitizer_finish_switch_fiber(NULL, &thread_stack_bottom,
                                  &thread_stack_size);
#endif
  f->fn(f->arg);
  f->finished = 1;
  switch_to_thread(f, 1);
  abort(); /* a finished fiber is never resumed */
}

void fiber_start(fiber *f, fiber_fn fn, void *arg) {
  f->fn = fn;
  f->arg = arg;
  f->finished = 0;
  f->asan_fake = NULL;
#if FIBER_ASAN
  /* No poison left from the stack's last fiber. */
  __asan_unpoison_memory_region(f->stack, f->stack_size);
#endif
  f->ctx = make_fcontext((char *)f->stack + f->stack_size, f->stack_size,
                         trampoline);
}

void fiber_resume(fiber *f) {
  running = f;
#if FIBER_ASAN
  void *fake = NULL;
  __sanitizer_start_switch_fiber(&fake, f->stack, f->stack_size);
#endif
  f->ctx = jump_fcontext(f->ctx, NULL).fctx; /* where it yielded */
#if FIBER_ASAN
  __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
  running = NULL;
}

void fiber_yield(void) { switch_to_thread(running, 0); }

int fiber_finished(const fiber *f) { return f->finished; }
