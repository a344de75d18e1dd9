// Which module's forward is running on this thread: what an op record names as
// its context. Module pre-hooks push, forward hooks pop.
#ifndef OVF_MODULE_STACK_H
#define OVF_MODULE_STACK_H

#include <cstdint>

namespace ovf {

// `key` identifies the module (its object address); `name_id` its interned path.
void push_module(const void* key, uint32_t name_id);

// Pops down to and including `key`. Frames above it are stale entries of
// forwards that raised (their forward hook never ran), dropped here too.
// Does nothing when `key` is not on the stack.
void pop_module(const void* key);

// Empties this thread's stack (a new top-level forward begins).
void clear_modules_on_thread();

// The innermost module's name id, or OVF_NO_ID.
uint32_t innermost_module();

}  // namespace ovf

#endif  // OVF_MODULE_STACK_H
