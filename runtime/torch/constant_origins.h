// Tensors whose NaN/Inf is deliberate, by storage:
//  - made only from constants: factory ops (ones, full, arange, fill_ with a
//    number) and the ops that read nothing else (tril, ==, log, to, views) --
//    a mask built as log(tril(ones)) or triu(full(-inf)) holds -inf on purpose;
//  - holding a deliberate NaN/Inf put among data: masked_fill(mask, -inf),
//    the inf that isfinite compares with, and what carries those on.
// A value stays "constant" through ops that only carry it, so a healthy causal
// mask never looks like a NaN produced or carried in. A parameter is never
// "only constants" (it is trained), nor is what a random op makes.
// Beside those, the storages a collective (c10d::allreduce_, reduce-scatter,
// all-gather) wrote: what other ranks sent, named by that collective when an
// op later carries a NaN/Inf out of them.
#ifndef OVF_CONSTANT_ORIGINS_H
#define OVF_CONSTANT_ORIGINS_H

#include <ATen/core/Tensor.h>

namespace ovf {

enum class Origin {
  kNone,           // data, or not known to be anything else
  kDeliberate,     // holds a NaN/Inf an op was told to make, among data
  kOnlyConstants,  // made from constants alone, whatever its values
  kReceived,       // written by a collective: other ranks' values (not deliberate)
};

// Remembers what `tensor`'s storage holds now (kNone forgets it: an in-place
// write of data into a former mask).
void note_origin(const at::Tensor& tensor, Origin origin);
void note_origin(const c10::Storage& storage, Origin origin);

// Forgets what was noted for `tensor`'s storage (an in-place write of data into it);
// returns the collective that had filled it, or OVF_NO_ID.
uint32_t forget_origin(const at::Tensor& tensor);

// Notes that collective `collective_id` (interned "c10d::allreduce_") writes
// `tensor`'s storage; received_through names it while nothing else wrote there.
void note_received(const at::Tensor& tensor, uint32_t collective_id);
uint32_t received_through(const at::Tensor& tensor);  // OVF_NO_ID: not received

// What was noted for `tensor`'s storage, if it is still the same storage (weak
// references: a freed storage whose address is reused is not mistaken for it).
Origin origin_of(const at::Tensor& tensor);

// Whether any storage is noted: ops skip the look-ups while none is.
bool any_origins();

inline bool has_constant_origin(const at::Tensor& tensor) {
  const Origin origin = origin_of(tensor);
  return origin == Origin::kDeliberate || origin == Origin::kOnlyConstants;
}

}  // namespace ovf

#endif  // OVF_CONSTANT_ORIGINS_H
