// Tensors whose NaN/Inf is deliberate: made from a constant argument
// (masked_fill(mask, -inf), the inf that isfinite compares with), and the ones
// copies, casts, views and reductions made from them alone. A value stays
// "constant" through ops that only carry it, so a healthy causal mask never
// looks like a NaN produced or carried in.
#ifndef OVF_CONSTANT_ORIGINS_H
#define OVF_CONSTANT_ORIGINS_H

#include <ATen/core/Tensor.h>

namespace ovf {

// Remembers `tensor`'s storage as holding deliberate NaN/Inf.
void note_constant_origin(const at::Tensor& tensor);

// Whether `tensor`'s storage was noted and is still the same storage (weak
// references: a freed storage whose address is reused is not mistaken for it).
bool has_constant_origin(const at::Tensor& tensor);

}  // namespace ovf

#endif  // OVF_CONSTANT_ORIGINS_H
