// Tensors whose NaN/Inf is deliberate, by storage:
//  - made only from constants: factory ops (ones, full, arange, fill_ with a
//    number) and the ops that read nothing else (tril, ==, log, to, views) --
//    a mask built as log(tril(ones)) or triu(full(-inf)) holds -inf on purpose;
//  - holding a deliberate NaN/Inf put among data: masked_fill(mask, -inf),
//    the inf that isfinite compares with, and what carries those on.
// A value stays "constant" through ops that only carry it, so a healthy causal
// mask never looks like a NaN produced or carried in. A parameter is never
// "only constants" (it is trained), nor is what a random op makes.
#ifndef OVF_CONSTANT_ORIGINS_H
#define OVF_CONSTANT_ORIGINS_H

#include <ATen/core/Tensor.h>

namespace ovf {

enum class Origin {
  kNone,           // data, or not known to be anything else
  kDeliberate,     // holds a NaN/Inf an op was told to make, among data
  kOnlyConstants,  // made from constants alone, whatever its values
};

// Remembers what `tensor`'s storage holds now (kNone forgets it: an in-place
// write of data into a former mask).
void note_origin(const at::Tensor& tensor, Origin origin);
void note_origin(const c10::Storage& storage, Origin origin);

// What was noted for `tensor`'s storage, if it is still the same storage (weak
// references: a freed storage whose address is reused is not mistaken for it).
Origin origin_of(const at::Tensor& tensor);

// Whether any storage is noted: ops skip the look-ups while none is.
bool any_origins();

inline bool has_constant_origin(const at::Tensor& tensor) {
  return origin_of(tensor) != Origin::kNone;
}

}  // namespace ovf

#endif  // OVF_CONSTANT_ORIGINS_H
