/* altstack.h — a signal stack for the calling thread, so that a crash
 * handler still runs when the fault is a stack overflow (of a thread or
 * of a fiber). */
#ifndef DURO_ALTSTACK_H
#define DURO_ALTSTACK_H

/* Maps 64 KiB and makes it the thread's alternate signal stack.  Mapped,
 * not allocated: AddressSanitizer unmaps a thread's signal stack when the
 * thread ends.  Left mapped otherwise (threads that live as long as the
 * process). */
void thread_altstack(void);
/* A thread that ends before the process does: its signal stack is
 * taken down and unmapped (ASan then finds none to unmap). */
void thread_altstack_release(void);

#endif
