// After optimizer.step(): the parameters (and, when asked, state tensors such
// as Adam's moments) that came out non-finite, as one STEP frame named after
// the optimizer, named by parameter path (parameters.h); beside each, its
// gradient ("<path>.grad") when that was non-finite already. A healthy step costs
// one read of each parameter and writes no record; the device tensors' reads
// are one batch, waited for once at finish().
#ifndef OVF_OPTIMIZER_CHECK_H
#define OVF_OPTIMIZER_CHECK_H

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device_engine.h"
#include "frame_builder.h"

namespace ovf {

class StepCheck {
 public:
  explicit StepCheck(const std::string& optimizer_class);
  // Parameter number `index` in param_groups order (names unregistered ones).
  void parameter(const at::Tensor& param, size_t index) {
    parameter(param, index, param, param.grad());
  }
  // The same where the values read are not the parameter's own tensor: a
  // sharded (DTensor) parameter's local shard and its gradient's.
  void parameter(const at::Tensor& param, size_t index, const at::Tensor& values,
                 const at::Tensor& grad);
  // One of its state tensors, `slot` ("exp_avg_sq"): a line when non-finite.
  void state(const at::Tensor& param, size_t index, const std::string& slot,
             const at::Tensor& value);
  // Reads what was added (one wait for the device tensors), adds the lines of
  // the non-finite ones, and commits the frame when there are any; returns
  // the stop events.
  uint32_t finish();

 private:
  struct Read {
    at::Tensor param;
    at::Tensor grad;  // the values' gradient (undefined for a state tensor)
    size_t index;
    std::string slot;  // "" for the parameter itself
    ovf_dtype dtype;
    DeviceId device;
    StatsRef stats;  // in batch_ for a device tensor
  };
  void add(const at::Tensor& tensor, const at::Tensor& param, const at::Tensor& grad, size_t index,
           std::string slot);
  std::vector<Read> reads_;
  std::shared_ptr<TensorStatsBatch> batch_;  // made at the first device tensor
  FrameBuilder frame_;
  bool any_ = false;
  bool carried_ = false;  // a gradient brought the NaN/Inf: the step only applied it
};

// Whether control.observe asks for the optimizer's state tensors too.
bool check_optimizer_state();

}  // namespace ovf

#endif  // OVF_OPTIMIZER_CHECK_H
