/* fiber.h — a stack of its own for one activation, switched to and from
 * on the worker thread that created it.
 *
 * A worker would otherwise sleep while its activation's step result is
 * committed (a millisecond or so for an fsync shared by a group); with a
 * fiber per activation it runs other activations meanwhile, and the
 * commit callback makes the parked one ready again.  Two thread switches
 * per step become two fiber switches.
 *
 * A fiber never moves between threads: code in a plugin may have cached
 * a thread-local address (errno's, say) across the call that parked it.
 * Its stack is mapped like a thread's (8 MiB, reserved lazily, a guard
 * page below), so plugin code sees the stack it would see on a thread. */
#ifndef DURO_FIBER_H
#define DURO_FIBER_H

#include <stddef.h>
#include <stdint.h>

typedef struct fiber fiber;
typedef void (*fiber_fn)(void *arg);

/* A fiber with its own stack, or NULL (no memory); not started.  A
 * destroyed fiber is kept for a later fiber_create (fiber.c says why);
 * fiber_cache_trim(clock_mono_ms()) unmaps those the process has not
 * needed for 10 s (fiber_destroy does it too; a thread with a periodic
 * pass calls it there, so an idle process lets them go). */
fiber *fiber_create(void);
void fiber_destroy(fiber *f);
void fiber_cache_trim(int64_t mono_ms);
size_t fiber_cache_count(void); /* kept now */

/* Makes f run fn(arg) from the start at its next fiber_resume.  f must
 * be new or finished. */
void fiber_start(fiber *f, fiber_fn fn, void *arg);

/* From the thread's own stack: runs f until it yields or fn returns. */
void fiber_resume(fiber *f);

/* From inside a fiber: back to the fiber_resume that ran it. */
void fiber_yield(void);

/* fn has returned; f may be started again. */
int fiber_finished(const fiber *f);

#endif
