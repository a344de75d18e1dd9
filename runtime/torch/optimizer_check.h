// After optimizer.step(): the parameters (and, when asked, state tensors such
// as Adam's moments) that came out non-finite, as one STEP frame named after
// the optimizer, named by parameter path (parameters.h); beside each, its
// gradient ("<path>.grad") when that was non-finite already. A healthy step costs
// one read of each parameter and writes no record.
#ifndef OVF_OPTIMIZER_CHECK_H
#define OVF_OPTIMIZER_CHECK_H

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "frame_builder.h"

namespace ovf {

class StepCheck {
 public:
  explicit StepCheck(const std::string& optimizer_class);
  // Parameter number `index` in param_groups order (names unregistered ones).
  void parameter(const at::Tensor& param, size_t index);
  // One of its state tensors, `slot` ("exp_avg_sq"): a line when non-finite.
  void state(const at::Tensor& param, size_t index, const std::string& slot,
             const at::Tensor& value);
  // Commits the frame when a line was added; returns the stop events.
  uint32_t finish();

 private:
  std::string name_of(const at::Tensor& param, size_t index) const;
  FrameBuilder frame_;
  bool any_ = false;
  bool carried_ = false;  // a gradient brought the NaN/Inf: the step only applied it
};

// Whether control.observe asks for the optimizer's state tensors too.
bool check_optimizer_state();

}  // namespace ovf

#endif  // OVF_OPTIMIZER_CHECK_H
