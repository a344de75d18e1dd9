#include "optimizer_check.h"

#include "control.h"
#include "device_engine.h"
#include "monitor.h"
#include "parameters.h"
#include "ring_writer.h"
#include "torch_tensor.h"

namespace ovf {

StepCheck::StepCheck(const std::string& optimizer_class) {
  frame_.begin(intern("optimizer.step"), intern(optimizer_class), false);
}

void StepCheck::parameter(const at::Tensor& param, size_t index, const at::Tensor& values,
                          const at::Tensor& grad) {
  add(values, param, grad, index, "");
}

void StepCheck::state(const at::Tensor& param, size_t index, const std::string& slot,
                      const at::Tensor& value) {
  add(value, param, at::Tensor(), index, slot);
}

void StepCheck::add(const at::Tensor& t, const at::Tensor& param, const at::Tensor& grad,
                    size_t index, std::string slot) {
  TensorView view;
  if (!stats_view(t, &view)) return;  // no data: nothing to say of it
  reads_.push_back({param, grad, index, std::move(slot), view.dtype, device_id_of(t),
                    request_stats(t, view, &batch_, StatsUse::kLine)});
}

uint32_t StepCheck::finish() {
  if (batch_) {
    batch_->submit();
    batch_->wait();
  }
  for (const Read& read : reads_) {
    const Stats s = read.stats.get();
    if (!s.has_stats) continue;
    ovf_record line = make_line(OVF_KIND_STEP_PARAM, 0, s, read.dtype, read.device, 0);
    if (!(line.flags & OVF_FLAG_NONFINITE)) continue;
    const std::string name = parameter_name(read.param, read.index);
    line.label_id = intern(read.slot.empty() ? name : name + " " + read.slot);
    frame_.add_line(line);
    any_ = true;
    if (!read.slot.empty()) continue;
    // The gradient brought the NaN/Inf (the step only applied it) or not (the
    // step made it): its line says which, next to the parameter's. Read here
    // only, at a non-finite parameter.
    const at::Tensor& grad = read.grad;
    if (!grad.defined()) continue;
    ovf_record grad_line = tensor_line(OVF_KIND_STEP_PARAM, 0, grad);
    if (!(grad_line.flags & OVF_FLAG_NONFINITE)) continue;
    grad_line.label_id = intern(name + ".grad");
    frame_.add_line(grad_line);
    carried_ = true;
  }
  reads_.clear();
  return any_ ? Monitor::instance().optimizer_step(frame_, carried_) : 0;
}

bool check_optimizer_state() {
  return read_control(ovf_state.control.observe) & OVF_OBSERVE_OPTIMIZER_STATE;
}

}  // namespace ovf
