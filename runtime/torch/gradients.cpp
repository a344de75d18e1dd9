#include "gradients.h"

#include "op_groups.h"
#include "ring_writer.h"
#include "torch_tensor.h"

namespace ovf {

void watch_output_gradient(const at::Tensor& output, uint32_t module_id, const std::string& label) {
  if (!output.defined() || !output.requires_grad()) return;
  const uint32_t label_id = intern("grad " + label);
  output.register_hook([module_id, label_id](const at::Tensor& grad) {
    // Judged when its statistics are known: a device tensor's in fast mode
    // without a wait here, in the backward pass's thread (op_groups.h).
    ovf_record line = make_value_line(OVF_KIND_GRAD, label_id, OVF_FLAG_BACKWARD);
    line.name_id = module_id;
    line.context_id = module_id;
    queue_tensor_line(line, grad);
  });
}

}  // namespace ovf
