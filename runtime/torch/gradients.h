// Backward observed: the gradient of each module output is recorded under the
// module's name when autograd computes it (a GRAD record, evaluated like a
// backward op's output).
#ifndef OVF_GRADIENTS_H
#define OVF_GRADIENTS_H

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace ovf {

// Hooks `output` (when it requires a gradient) so that its gradient is recorded
// as "grad <label>" of module `module_id`. The hook lives with the tensor's
// autograd graph and is freed with it.
void watch_output_gradient(const at::Tensor& output, uint32_t module_id, const std::string& label);

}  // namespace ovf

#endif  // OVF_GRADIENTS_H
