/* fiber.c — ucontext fibers with AddressSanitizer's switch annotations
 * (without them ASan takes a fiber's frames for a stack overflow). */
#include "fiber.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define FIBER_ASAN 1
#else
#define FIBER_ASAN 0
#endif

#define FIBER_STACK (8u << 20)

struct fiber {
  ucontext_t ctx;
  void *map; /* guard page + stack */
  size_t map_size;
  void *stack; /* above the guard page */
  size_t stack_size;
  fiber_fn fn;
  void *arg;
  int finished;
  void *asan_fake; /* ASan's fake stack while switched away */
};

static __thread ucontext_t thread_ctx; /* the thread's own stack */

#if FIBER_ASAN
/* ASan's swapcontext interceptor warns on every process that uses it
 * ("may produce false positives") and guesses at the stacks; the switch
 * annotations below tell it exactly, so the C library's own swapcontext
 * is called. */
typedef int (*swap_fn)(ucontext_t *, const ucontext_t *);
static swap_fn libc_swap(void) {
  static swap_fn fn;
  swap_fn f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
  if (!f) {
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    f = libc ? (swap_fn)dlsym(libc, "swapcontext") : NULL;
    if (!f)
      f = swapcontext;
    __atomic_store_n(&fn, f, __ATOMIC_RELEASE);
  }
  return f;
}
#define swapcontext(from, to) libc_swap()(from, to)
#endif
static __thread fiber *running;
#if FIBER_ASAN
static __thread const void *thread_stack_bottom;
static __thread size_t thread_stack_size;
#endif

fiber *fiber_create(void) {
  fiber *f = calloc(1, sizeof *f);
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
  munmap(f->map, f->map_size);
  free(f);
}

/* Leaving a fiber for the thread's stack; `dying` when it will never be
 * resumed (ASan then drops its fake stack). */
static void switch_to_thread(fiber *f, int dying) {
#if FIBER_ASAN
  __sanitizer_start_switch_fiber(dying ? NULL : &f->asan_fake,
                                 thread_stack_bottom, thread_stack_size);
#else
  (void)dying;
#endif
  swapcontext(&f->ctx, &thread_ctx);
#if FIBER_ASAN
  __sanitizer_finish_switch_fiber(f->asan_fake, NULL, NULL);
#endif
}

static void trampoline(void) {
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
  getcontext(&f->ctx);
  f->ctx.uc_stack.ss_sp = f->stack;
  f->ctx.uc_stack.ss_size = f->stack_size;
  f->ctx.uc_link = NULL;
  f->fn = fn;
  f->arg = arg;
  f->finished = 0;
  f->asan_fake = NULL;
#if FIBER_ASAN
  /* No poison left from the stack's last fiber. */
  __asan_unpoison_memory_region(f->ctx.uc_stack.ss_sp, f->ctx.uc_stack.ss_size);
#endif
  makecontext(&f->ctx, trampoline, 0);
}

void fiber_resume(fiber *f) {
  running = f;
#if FIBER_ASAN
  void *fake = NULL;
  __sanitizer_start_switch_fiber(&fake, f->stack, f->stack_size);
#endif
  swapcontext(&thread_ctx, &f->ctx);
#if FIBER_ASAN
  __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
  running = NULL;
}

void fiber_yield(void) { switch_to_thread(running, 0); }

int fiber_finished(const fiber *f) { return f->finished; }
