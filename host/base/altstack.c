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
