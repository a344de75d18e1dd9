#include "optimizer_check.h"

#include "control.h"
#include "monitor.h"
#include "parameters.h"
#include "ring_writer.h"
#include "torch_tensor.h"

namespace ovf {

StepCheck::StepCheck(const std::string& optimizer_class) {
  frame_.begin(intern("optimizer.step"), intern(optimizer_class), false);
}

std::string StepCheck::name_of(const at::Tensor& param, size_t index) const {
  const uint32_t path = parameter_path(param);
  return path != OVF_NO_ID ? std::string(interned(path))
                           : "param_groups[...]params[" + std::to_string(index) + "]";
}

void StepCheck::parameter(const at::Tensor& param, size_t index) {
  const ovf_record line = tensor_line(OVF_KIND_STEP_PARAM, 0, param);
  if (!(line.flags & OVF_FLAG_NONFINITE)) return;
  ovf_record named = line;
  named.label_id = intern(name_of(param, index));
  frame_.add_line(named);
  any_ = true;
  // The gradient brought the NaN/Inf (the step only applied it) or not (the
  // step made it): its line says which, next to the parameter's.
  const at::Tensor& grad = param.grad();
  if (!grad.defined()) return;
  ovf_record grad_line = tensor_line(OVF_KIND_STEP_PARAM, 0, grad);
  if (!(grad_line.flags & OVF_FLAG_NONFINITE)) return;
  grad_line.label_id = intern(name_of(param, index) + ".grad");
  frame_.add_line(grad_line);
  carried_ = true;
}

void StepCheck::state(const at::Tensor& param, size_t index, const std::string& slot,
                      const at::Tensor& value) {
  ovf_record line = tensor_line(OVF_KIND_STEP_PARAM, 0, value);
  if (!(line.flags & OVF_FLAG_NONFINITE)) return;
  line.label_id = intern(name_of(param, index) + " " + slot);
  frame_.add_line(line);
  any_ = true;
}

uint32_t StepCheck::finish() {
  return any_ ? Monitor::instance().optimizer_step(frame_, carried_) : 0;
}

bool check_optimizer_state() {
  return read_control(ovf_state.control.observe) & OVF_OBSERVE_OPTIMIZER_STATE;
}

}  // namespace ovf
