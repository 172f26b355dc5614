/* altstack.c — a thread's signal stack (altstack.h). */
#include "altstack.h"

#include <signal.h>
#include <sys/mman.h>

void thread_altstack(void) {
  /* Big enough for a handler and for ASan's own frames in tests. */
  size_t size = 64 * 1024;
  stack_t ss = {.ss_size = size, .ss_flags = 0};
  ss.ss_sp = mmap(NULL, size, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ss.ss_sp == MAP_FAILED)
    return;
  sigaltstack(&ss, NULL);
}

void thread_altstack_release(void) {
  stack_t off = {.ss_flags = SS_DISABLE}, old;
  if (sigaltstack(&off, &old) == 0 && old.ss_sp && old.ss_size &&
      !(old.ss_flags & SS_DISABLE))
    munmap(old.ss_sp, old.ss_size);
}
