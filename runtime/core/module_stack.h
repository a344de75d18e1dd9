// Which module's forward is running on this thread: what an op record names as
// its context. Module pre-hooks push, forward hooks pop.
#ifndef OVF_MODULE_STACK_H
#define OVF_MODULE_STACK_H

#include <cstddef>
#include <cstdint>

namespace ovf {

// `key` identifies the module (its object address); `name_id` its interned
// path; `start_seq` the ring's write_seq when its forward began.
void push_module(const void* key, uint32_t name_id, uint64_t start_seq);

// Pops down to and including `key` and returns its start_seq (OVF_NO_SEQ when
// `key` is not on the stack). Entries above it are stale: forwards that raised
// (their forward hook never ran) are dropped here too.
uint64_t pop_module(const void* key);

// Empties this thread's stack (a new top-level forward begins).
void clear_modules_on_thread();

// This thread's stack, to come back to (the replay: its forward may end by an
// exception, leaving its entries; they must not be taken for the run's).
struct ModuleStackMark {
  size_t depth;
  size_t untracked;
};
ModuleStackMark mark_modules();
void return_to_mark(const ModuleStackMark& mark);

// The innermost module's name id, or OVF_NO_ID.
uint32_t innermost_module();

}  // namespace ovf

#endif  // OVF_MODULE_STACK_H
