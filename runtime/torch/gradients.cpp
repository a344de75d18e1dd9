#include "gradients.h"

#include "monitor.h"
#include "ring_writer.h"
#include "torch_tensor.h"

namespace ovf {

void watch_output_gradient(const at::Tensor& output, uint32_t module_id, const std::string& label) {
  if (!output.defined() || !output.requires_grad()) return;
  const uint32_t label_id = intern("grad " + label);
  output.register_hook([module_id, label_id](const at::Tensor& grad) {
    ovf_record r = tensor_line(OVF_KIND_GRAD, label_id, grad, OVF_FLAG_BACKWARD);
    if (r.flags & OVF_FLAG_NO_DATA) return;
    r.name_id = module_id;
    r.context_id = module_id;
    Monitor::instance().commit_line(r);
  });
}

}  // namespace ovf
